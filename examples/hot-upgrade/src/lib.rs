//! Hot upgrade of a running controller, the second use case of the
//! real-time publisher/subscriber paper, on tagwire tags.
//!
//! A controller runs a cycle every period: it reads the latest sensor
//! value ([`SENSOR_TAG`]), updates its state and publishes one command
//! ([`COMMAND_TAG`]) numbered by its cycle. A new build replaces it while
//! it runs: the new process takes the same rights (it subscribes to the
//! sensor, gets send access to the commands) and says so on
//! [`UPGRADE_TAG`]; the running one answers with the cycle at which the
//! new one takes over, publishes every command before that cycle, then
//! hands its state over and stops; the new one publishes from that cycle
//! on, keeping the old one's schedule. The consumer of the commands is
//! not told: it sees every cycle once, in order, without a longer gap
//! than usual.
//!
//! [`Controller`] is the handshake as a state machine (sans-IO: time and
//! messages in, what to publish out); the programs in `src/bin` do I/O.

use std::time::{Duration, Instant};

/// Sensor readings: an `f64` each.
pub const SENSOR_TAG: &str = "/plant/sensor";
/// Commands: [`Command`].
pub const COMMAND_TAG: &str = "/plant/command";
/// The controllers' handshake: [`Upgrade`].
pub const UPGRADE_TAG: &str = "/plant/controller-upgrade";

/// One cycle's command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Command {
    /// The control cycle (from 1, continuous across upgrades).
    pub cycle: u64,
    /// The actuation.
    pub value: f64,
    /// The build that computed it.
    pub build: u32,
}

/// What controllers say to each other on [`UPGRADE_TAG`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Upgrade {
    /// A new build is ready to take over.
    Hello {
        /// Its build number.
        build: u32,
    },
    /// The running build's answer: `to` publishes from cycle `at` on.
    Handover {
        /// The build that hands over.
        from: u32,
        /// The build that takes over.
        to: u32,
        /// The first cycle of the new build.
        at: u64,
    },
    /// Sent right after the command of cycle `at - 1`: the state the new
    /// build starts from. The old build stops.
    Last {
        /// The build that hands over.
        from: u32,
        /// The build that takes over.
        to: u32,
        /// The first cycle of the new build.
        at: u64,
        /// The controller's state after cycle `at - 1`.
        state: f64,
        /// How long after this message cycle `at` is due on the old
        /// build's schedule, µs: the new build keeps the schedule, late
        /// only by this message's way to it.
        lead_us: u32,
    },
}

const CMD: u8 = 1;
const HELLO: u8 = 2;
const HANDOVER: u8 = 3;
const LAST: u8 = 4;

fn take<const N: usize>(b: &mut &[u8]) -> Option<[u8; N]> {
    let (h, rest) = b.split_first_chunk::<N>()?;
    *b = rest;
    Some(*h)
}

impl Command {
    /// The command's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![CMD];
        v.extend(self.cycle.to_le_bytes());
        v.extend(self.value.to_le_bytes());
        v.extend(self.build.to_le_bytes());
        v
    }

    /// A command from its bytes; `None` for anything else.
    pub fn decode(mut b: &[u8]) -> Option<Command> {
        (take::<1>(&mut b)? == [CMD]).then_some(())?;
        let c = Command {
            cycle: u64::from_le_bytes(take(&mut b)?),
            value: f64::from_le_bytes(take(&mut b)?),
            build: u32::from_le_bytes(take(&mut b)?),
        };
        b.is_empty().then_some(c)
    }
}

impl Upgrade {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Upgrade::Hello { build } => {
                let mut v = vec![HELLO];
                v.extend(build.to_le_bytes());
                v
            }
            Upgrade::Handover { from, to, at } => {
                let mut v = vec![HANDOVER];
                v.extend(from.to_le_bytes());
                v.extend(to.to_le_bytes());
                v.extend(at.to_le_bytes());
                v
            }
            Upgrade::Last {
                from,
                to,
                at,
                state,
                lead_us,
            } => {
                let mut v = vec![LAST];
                v.extend(from.to_le_bytes());
                v.extend(to.to_le_bytes());
                v.extend(at.to_le_bytes());
                v.extend(state.to_le_bytes());
                v.extend(lead_us.to_le_bytes());
                v
            }
        }
    }

    /// A message from its bytes; `None` for anything malformed.
    pub fn decode(mut b: &[u8]) -> Option<Upgrade> {
        let m = match take::<1>(&mut b)?[0] {
            HELLO => Upgrade::Hello {
                build: u32::from_le_bytes(take(&mut b)?),
            },
            HANDOVER => Upgrade::Handover {
                from: u32::from_le_bytes(take(&mut b)?),
                to: u32::from_le_bytes(take(&mut b)?),
                at: u64::from_le_bytes(take(&mut b)?),
            },
            LAST => Upgrade::Last {
                from: u32::from_le_bytes(take(&mut b)?),
                to: u32::from_le_bytes(take(&mut b)?),
                at: u64::from_le_bytes(take(&mut b)?),
                state: f64::from_le_bytes(take(&mut b)?),
                lead_us: u32::from_le_bytes(take(&mut b)?),
            },
            _ => return None,
        };
        b.is_empty().then_some(m)
    }
}

/// The controller's law: a proportional-integral step toward `setpoint`.
pub fn control(state: &mut f64, setpoint: f64, sensor: f64) -> f64 {
    let error = setpoint - sensor;
    *state += 0.01 * error;
    0.5 * error + *state
}

/// Where a controller is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// A new build: said hello, waits for the handover.
    Waiting,
    /// A new build with a handover: waits for its predecessor's state
    /// (sent after the command of cycle `at - 1`), then publishes from
    /// `at`.
    Joining {
        /// Its first cycle.
        at: u64,
    },
    /// Publishing; `until` is the first cycle it must not publish (a
    /// successor takes it), if it is handing over.
    Running {
        /// Hand over before this cycle, to this build.
        until: Option<(u64, u32)>,
    },
    /// Handed over: stop.
    Done,
}

/// What a [`Controller`] asks its program to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Out {
    /// Publish on [`UPGRADE_TAG`].
    Say(Upgrade),
    /// Publish on [`COMMAND_TAG`].
    Command(Command),
    /// Exit: the successor has the next cycle.
    Exit,
}

/// One controller build's side of the cycle and the handshake.
#[derive(Debug, Clone)]
pub struct Controller {
    build: u32,
    period: Duration,
    /// Cycles of notice a running build gives its successor.
    notice: u64,
    phase: Phase,
    /// The next cycle to publish, and when.
    next: u64,
    due: Instant,
    state: f64,
    setpoint: f64,
    sensor: f64,
    /// When a joining build gives up waiting for its predecessor's last
    /// command and starts anyway.
    give_up: Option<Instant>,
}

impl Controller {
    /// The first build: publishes from cycle 1 at `now`.
    pub fn first(build: u32, period: Duration, now: Instant) -> Controller {
        Controller {
            phase: Phase::Running { until: None },
            ..Self::base(build, period, now)
        }
    }

    /// A new build replacing a running one: says hello.
    pub fn successor(build: u32, period: Duration, now: Instant) -> (Controller, Out) {
        let c = Controller {
            phase: Phase::Waiting,
            ..Self::base(build, period, now)
        };
        (c, Out::Say(Upgrade::Hello { build }))
    }

    fn base(build: u32, period: Duration, now: Instant) -> Controller {
        Controller {
            build,
            period,
            notice: 5,
            phase: Phase::Running { until: None },
            next: 1,
            due: now,
            state: 0.0,
            setpoint: 1.0,
            sensor: 0.0,
            give_up: None,
        }
    }

    /// Where it is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The latest sensor reading.
    pub fn on_sensor(&mut self, value: f64) {
        if value.is_finite() {
            self.sensor = value;
        }
    }

    /// A message on [`UPGRADE_TAG`] at `now`.
    pub fn on_upgrade(&mut self, msg: Upgrade, now: Instant) -> Vec<Out> {
        match (msg, self.phase) {
            // A successor is ready: it takes over `notice` cycles from
            // now. (A second hello while handing over is answered alike:
            // the same cycle, the same successor.)
            (Upgrade::Hello { build }, Phase::Running { until }) if build != self.build => {
                let (at, to) = until.unwrap_or((self.next + self.notice, build));
                self.phase = Phase::Running {
                    until: Some((at, to)),
                };
                vec![Out::Say(Upgrade::Handover {
                    from: self.build,
                    to,
                    at,
                })]
            }
            (Upgrade::Handover { to, at, .. }, Phase::Waiting) if to == self.build => {
                self.phase = Phase::Joining { at };
                // The predecessor's state is due within the notice; past
                // twice that, start without it (it has died).
                self.give_up = Some(now + self.period * (2 * self.notice as u32 + 2));
                Vec::new()
            }
            (
                Upgrade::Last {
                    to,
                    at,
                    state,
                    lead_us,
                    ..
                },
                Phase::Joining { at: mine },
            ) if to == self.build && at == mine => {
                self.state = state;
                self.phase = Phase::Running { until: None };
                self.next = at;
                // On the old build's schedule (at most a period ahead).
                let lead = Duration::from_micros(u64::from(lead_us)).min(self.period);
                self.due = now + lead;
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// When [`Controller::tick`] next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Running { .. } => Some(self.due),
            Phase::Joining { .. } => self.give_up,
            Phase::Waiting | Phase::Done => None,
        }
    }

    /// Time passes: the cycle due, the hand-over, or a start without the
    /// predecessor's state.
    pub fn tick(&mut self, now: Instant) -> Vec<Out> {
        if let (Phase::Joining { at }, Some(t)) = (self.phase, self.give_up) {
            if now >= t {
                self.phase = Phase::Running { until: None };
                self.next = at;
                self.due = now;
            }
        }
        let Phase::Running { until } = self.phase else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while now >= self.due {
            let value = control(&mut self.state, self.setpoint, self.sensor);
            out.push(Out::Command(Command {
                cycle: self.next,
                value,
                build: self.build,
            }));
            self.next += 1;
            self.due += self.period;
            // The last cycle before the successor's: hand the state over
            // as soon as its command is out, and stop.
            if let Some((at, to)) = until.filter(|(at, _)| self.next >= *at) {
                let lead = self.due.saturating_duration_since(now);
                out.push(Out::Say(Upgrade::Last {
                    from: self.build,
                    to,
                    at,
                    state: self.state,
                    lead_us: lead.as_micros().min(u128::from(u32::MAX)) as u32,
                }));
                out.push(Out::Exit);
                self.phase = Phase::Done;
                return out;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
