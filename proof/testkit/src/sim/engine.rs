//! The event loop: a priority queue of events on a virtual clock.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::link::{Bottleneck, Link, LinkConfig};
use super::node::{Addr, Factory, NodeInit, NodeStats, SimNode};
use super::rng::{derive_seed, SimRng};
use super::trace::{Trace, TraceEvent};

/// Settings of a [`Sim`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    /// The seed of every random decision (links, node seeds).
    pub seed: u64,
    /// The configuration of links not set explicitly.
    pub default_link: LinkConfig,
    /// Most events at one virtual instant (and most datagrams one node emits
    /// in one go) before the run stops with [`SimError::Livelock`]: a node
    /// whose timeout never moves forward would otherwise spin forever.
    pub max_events_per_instant: u64,
    /// Keep every [`TraceEntry`](super::TraceEntry) (the trace hash is always kept).
    pub record_trace: bool,
}

impl SimConfig {
    /// Defaults with this seed.
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed,
            default_link: LinkConfig::default(),
            max_events_per_instant: 100_000,
            record_trace: false,
        }
    }
}

/// Why a run stopped early, or a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SimError {
    /// No node has this address.
    #[error("no node has address {0}")]
    UnknownNode(Addr),
    /// A node already has this address.
    #[error("a node already has address {0}")]
    DuplicateNode(Addr),
    /// [`Sim::run_until_cond`] reached its limit.
    #[error("condition not met within {limit:?} of virtual time (now {at:?})")]
    Deadline {
        /// Virtual time now.
        at: Duration,
        /// The limit given.
        limit: Duration,
    },
    /// [`Sim::run_until_cond`] found nothing left to happen.
    #[error("condition not met and no event is left (at {at:?})")]
    Idle {
        /// Virtual time now.
        at: Duration,
    },
    /// Too many events at one instant (see
    /// [`SimConfig::max_events_per_instant`]).
    #[error("livelock: over {events} events at virtual time {at:?}")]
    Livelock {
        /// Virtual time now.
        at: Duration,
        /// The bound.
        events: u64,
    },
}

/// Counters of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimStats {
    /// Events processed.
    pub events: u64,
    /// Datagrams sent to an address no node has.
    pub unroutable: u64,
}

/// A deterministic network of `N` nodes (see the [module doc](super)).
pub struct Sim<N: SimNode + 'static> {
    pub(super) config: SimConfig,
    origin: Instant,
    pub(super) now: Duration,
    pub(super) rng: SimRng,
    queue: BinaryHeap<Scheduled<N>>,
    next_seq: u64,
    pub(super) nodes: Vec<Slot<N>>,
    pub(super) index: BTreeMap<Addr, usize>,
    pub(super) links: BTreeMap<(Addr, Addr), Link>,
    pub(super) bottlenecks: Vec<Bottleneck>,
    pub(super) groups: BTreeMap<Addr, BTreeSet<Addr>>,
    dirty: BTreeSet<usize>,
    events_now: u64,
    error: Option<SimError>,
    pub(super) trace: Trace,
    pub(super) stats: SimStats,
}

pub(super) struct Slot<N> {
    pub(super) addr: Addr,
    pub(super) state: Option<N>,
    factory: Factory<N>,
    incarnation: u32,
    /// The armed timeout and its generation (older timer events are stale).
    timer: Option<Duration>,
    timer_gen: u64,
    pub(super) stats: NodeStats,
}

pub(super) enum Event<N: SimNode + 'static> {
    Arrive {
        from: usize,
        to: usize,
        bytes: Vec<u8>,
    },
    Timer {
        node: usize,
        gen: u64,
    },
    Action(Action<N>),
}

/// Test code run at a scheduled instant.
type Action<N> = Box<dyn FnOnce(&mut Sim<N>)>;

/// An event and its key; the heap pops the smallest (time, insertion seq),
/// so simultaneous events run in the order they were scheduled.
struct Scheduled<N: SimNode + 'static> {
    at: Duration,
    seq: u64,
    event: Event<N>,
}

impl<N: SimNode> PartialEq for Scheduled<N> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<N: SimNode> Eq for Scheduled<N> {}

impl<N: SimNode> PartialOrd for Scheduled<N> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<N: SimNode> Ord for Scheduled<N> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The virtual clock's origin: the one real-clock read, once per process.
/// `Instant` has no other constructor; nothing depends on its value, only
/// on offsets from it.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl<N: SimNode + 'static> Sim<N> {
    /// An empty network at virtual time 0.
    pub fn new(config: SimConfig) -> Self {
        Self {
            rng: SimRng::derived(config.seed, "links"),
            trace: Trace {
                entries: config.record_trace.then(Vec::new),
                ..Trace::new()
            },
            config,
            origin: origin(),
            now: Duration::ZERO,
            queue: BinaryHeap::new(),
            next_seq: 0,
            nodes: Vec::new(),
            index: BTreeMap::new(),
            links: BTreeMap::new(),
            bottlenecks: Vec::new(),
            groups: BTreeMap::new(),
            dirty: BTreeSet::new(),
            events_now: 0,
            error: None,
            stats: SimStats::default(),
        }
    }

    /// Adds a node built by `factory` now (and again at every restart).
    pub fn add_node(
        &mut self,
        addr: Addr,
        factory: impl FnMut(&NodeInit) -> N + 'static,
    ) -> Result<(), SimError> {
        if self.index.contains_key(&addr) {
            return Err(SimError::DuplicateNode(addr));
        }
        let idx = self.nodes.len();
        self.nodes.push(Slot {
            addr,
            state: None,
            factory: Box::new(factory),
            incarnation: 0,
            timer: None,
            timer_gen: 0,
            stats: NodeStats::default(),
        });
        self.index.insert(addr, idx);
        self.instantiate(idx);
        Ok(())
    }

    // ----- time and running -------------------------------------------------

    /// The virtual now, as the nodes see it.
    pub fn now(&self) -> Instant {
        self.origin + self.now
    }

    /// Virtual time since the start.
    pub fn elapsed(&self) -> Duration {
        self.now
    }

    /// The instant `at` after the start.
    pub fn instant_at(&self, at: Duration) -> Instant {
        self.origin + at
    }

    /// The simulation's seed.
    pub fn seed(&self) -> u64 {
        self.config.seed
    }

    /// Processes the next event. `Ok(false)` when none is left.
    pub fn step(&mut self) -> Result<bool, SimError> {
        self.flush_dirty();
        self.check()?;
        let Some(Scheduled { at, event, .. }) = self.queue.pop() else {
            return Ok(false);
        };
        if at > self.now {
            self.now = at;
            self.events_now = 0;
        }
        self.events_now += 1;
        self.stats.events += 1;
        if self.events_now > self.config.max_events_per_instant {
            self.fail_livelock();
        }
        match event {
            Event::Arrive { from, to, bytes } => self.arrive(from, to, &bytes),
            Event::Timer { node, gen } => self.fire_timer(node, gen),
            Event::Action(f) => {
                self.trace.push(self.now, TraceEvent::Action);
                f(self);
            }
        }
        self.flush_dirty();
        self.check()?;
        Ok(true)
    }

    /// Processes every event up to virtual time `deadline` (since the
    /// start), then sets the clock to it.
    pub fn run_until(&mut self, deadline: Duration) -> Result<(), SimError> {
        loop {
            self.flush_dirty();
            match self.queue.peek() {
                Some(next) if next.at <= deadline => {
                    self.step()?;
                }
                _ => break,
            }
        }
        self.check()?;
        self.now = self.now.max(deadline);
        Ok(())
    }

    /// [`Sim::run_until`] `d` from now.
    pub fn run_for(&mut self, d: Duration) -> Result<(), SimError> {
        self.run_until(self.now + d)
    }

    /// Runs until `cond` holds (checked before every event), for at most
    /// `limit` of virtual time. Returns the virtual time it held at.
    pub fn run_until_cond(
        &mut self,
        limit: Duration,
        mut cond: impl FnMut(&Self) -> bool,
    ) -> Result<Duration, SimError> {
        let deadline = self.now + limit;
        loop {
            self.flush_dirty();
            self.check()?;
            if cond(self) {
                return Ok(self.now);
            }
            match self.queue.peek() {
                None => return Err(SimError::Idle { at: self.now }),
                Some(next) if next.at > deadline => {
                    self.now = deadline;
                    return Err(SimError::Deadline {
                        at: self.now,
                        limit,
                    });
                }
                Some(_) => {
                    self.step()?;
                }
            }
        }
    }

    /// Runs `f` at virtual time `at` (since the start; now if past).
    pub fn schedule(&mut self, at: Duration, f: impl FnOnce(&mut Self) + 'static) {
        self.push(at.max(self.now), Event::Action(Box::new(f)));
    }

    /// Runs `f` `delay` from now.
    pub fn schedule_in(&mut self, delay: Duration, f: impl FnOnce(&mut Self) + 'static) {
        self.schedule(self.now + delay, f);
    }

    // ----- nodes ------------------------------------------------------------

    /// The node at `addr`, if it exists and is up.
    pub fn node(&self, addr: Addr) -> Option<&N> {
        self.nodes.get(*self.index.get(&addr)?)?.state.as_ref()
    }

    /// The node at `addr` for test code to act on (e.g. to publish). What it
    /// then wants to send is collected before the next event.
    pub fn node_mut(&mut self, addr: Addr) -> Option<&mut N> {
        let idx = *self.index.get(&addr)?;
        self.dirty.insert(idx);
        self.nodes.get_mut(idx)?.state.as_mut()
    }

    /// Runs `f` on the node at `addr` (if up) with the virtual now, and
    /// collects what it wants to send at once.
    pub fn with_node<R>(&mut self, addr: Addr, f: impl FnOnce(&mut N, Instant) -> R) -> Option<R> {
        let idx = *self.index.get(&addr)?;
        let now = self.now();
        let r = f(self.nodes.get_mut(idx)?.state.as_mut()?, now);
        self.flush(idx);
        Some(r)
    }

    /// Every node's address, in address order.
    pub fn addrs(&self) -> impl Iterator<Item = Addr> + '_ {
        self.index.keys().copied()
    }

    /// Whether the node at `addr` is up.
    pub fn is_up(&self, addr: Addr) -> bool {
        self.node(addr).is_some()
    }

    /// The incarnation of the node at `addr` (0 until its first restart).
    pub fn incarnation(&self, addr: Addr) -> Option<u32> {
        Some(self.nodes.get(*self.index.get(&addr)?)?.incarnation)
    }

    /// Counters of the node at `addr`.
    pub fn node_stats(&self, addr: Addr) -> Option<NodeStats> {
        Some(self.nodes.get(*self.index.get(&addr)?)?.stats)
    }

    /// Crashes the node: its state is dropped, datagrams reaching it are
    /// dropped and it gets no timeouts until [`Sim::restart`].
    pub fn crash(&mut self, addr: Addr) -> Result<(), SimError> {
        let idx = self.idx(addr)?;
        let slot = &mut self.nodes[idx];
        slot.state = None;
        slot.timer = None;
        slot.timer_gen += 1;
        slot.stats.crashes += 1;
        self.dirty.remove(&idx);
        self.trace
            .push(self.now, TraceEvent::Crashed { node: addr });
        Ok(())
    }

    /// Replaces the node's state by a fresh instance from its factory
    /// (incarnation + 1), whether it was up or crashed.
    pub fn restart(&mut self, addr: Addr) -> Result<(), SimError> {
        let idx = self.idx(addr)?;
        let slot = &mut self.nodes[idx];
        slot.incarnation += 1;
        slot.stats.restarts += 1;
        let incarnation = slot.incarnation;
        self.trace.push(
            self.now,
            TraceEvent::Restarted {
                node: addr,
                incarnation,
            },
        );
        self.instantiate(idx);
        Ok(())
    }

    // ----- internals --------------------------------------------------------

    fn idx(&self, addr: Addr) -> Result<usize, SimError> {
        self.index
            .get(&addr)
            .copied()
            .ok_or(SimError::UnknownNode(addr))
    }

    fn check(&mut self) -> Result<(), SimError> {
        self.error.clone().map_or(Ok(()), Err)
    }

    fn fail_livelock(&mut self) {
        self.error.get_or_insert(SimError::Livelock {
            at: self.now,
            events: self.config.max_events_per_instant,
        });
    }

    pub(super) fn push(&mut self, at: Duration, event: Event<N>) {
        self.next_seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.next_seq,
            event,
        });
    }

    fn instantiate(&mut self, idx: usize) {
        let now = self.now();
        let slot = &mut self.nodes[idx];
        let init = NodeInit {
            addr: slot.addr,
            incarnation: slot.incarnation,
            now,
            elapsed: self.now,
            seed: derive_seed(
                self.config.seed,
                &format!("node {} #{}", slot.addr, slot.incarnation),
            ),
        };
        slot.state = Some((slot.factory)(&init));
        slot.timer = None;
        slot.timer_gen += 1;
        self.flush(idx);
    }

    fn flush_dirty(&mut self) {
        while let Some(idx) = self.dirty.pop_first() {
            self.flush(idx);
        }
    }

    /// Sends what the node wants to send, then re-arms its timer.
    pub(super) fn flush(&mut self, idx: usize) {
        let now = self.now();
        let mut emitted = 0u64;
        loop {
            let Some(state) = self.nodes[idx].state.as_mut() else {
                return;
            };
            let Some(out) = state.poll_transmit(now) else {
                break;
            };
            self.transmit(idx, out);
            emitted += 1;
            if emitted > self.config.max_events_per_instant {
                self.fail_livelock();
                break;
            }
        }
        let slot = &mut self.nodes[idx];
        let want = slot
            .state
            .as_ref()
            .and_then(|s| s.poll_timeout())
            .map(|t| t.saturating_duration_since(self.origin).max(self.now));
        if want == slot.timer {
            return;
        }
        slot.timer = want;
        slot.timer_gen += 1;
        let gen = slot.timer_gen;
        if let Some(at) = want {
            self.push(at, Event::Timer { node: idx, gen });
        }
    }

    pub(super) fn fire_timer(&mut self, idx: usize, gen: u64) {
        let now = self.now();
        let slot = &mut self.nodes[idx];
        if slot.timer_gen != gen {
            return;
        }
        let Some(state) = slot.state.as_mut() else {
            return;
        };
        slot.timer = None;
        slot.stats.timeouts += 1;
        state.handle_timeout(now);
        let node = slot.addr;
        self.trace.push(self.now, TraceEvent::Timeout { node });
        self.flush(idx);
    }
}

impl<N: SimNode + 'static> std::fmt::Debug for Sim<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("seed", &self.config.seed)
            .field("now", &self.now)
            .field("nodes", &self.index.keys().collect::<Vec<_>>())
            .field("queued_events", &self.queue.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
