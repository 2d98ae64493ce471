//! Fault-tolerant clock synchronisation with master fail-over, the first use
//! case of the real-time publisher/subscriber paper, on tagwire tags.
//!
//! Slaves publish time requests on [`REQUEST_TAG`]; each names the slave,
//! whose replies come on its own tag ([`reply_tag`]). Every master
//! subscribes to the requests, so every master hears every request; a
//! slave never knows which master answers. Two ways to make sure exactly
//! one does:
//!
//! * **Handshake** ([`Master`]): masters talk among themselves on
//!   [`MASTERS_TAG`] ("for use only by masters"): a heartbeat every
//!   period, saying whether the sender answers and which requests it
//!   answered. The live master of best rank answers; the others keep the
//!   requests it has not yet reported answered. When its heartbeats stop
//!   for [`Config::fail_after`], the best-ranked of the others takes over
//!   and first answers every request still outstanding, so a request in
//!   flight when the master died is answered too. A master that starts (or
//!   comes back) listens for [`Config::settle`] before it may answer, and
//!   of two answering masters that hear each other the worse-ranked stops.
//! * **Ownership**: every master answers every request, each at a strength
//!   of its own (`Publisher::set_strength`), and each slave subscribes to
//!   its replies with exclusive ownership and a deadline: it takes only the
//!   strongest live master's replies and fails over when that master
//!   misses the deadline. A request whose answer was filtered away is sent
//!   again (see the slave).
//!
//! Masters hear requests and each other best-effort: a reliable
//! subscriber holds its publishers back while its node is unreachable
//! (until the daemons declare the node down), and one master cut off must
//! not stall every slave. So a slave asks again for what is not answered
//! within a while (`--retry-ms`), and the answering master answers every
//! request it hears; a slave drops an answer it already has.
//!
//! Masters keep their clocks together the same way slaves do: each
//! non-answering master asks the answering one for the time on
//! [`MASTERS_TAG`] and corrects its own clock by the estimate of least
//! delay ([`Estimator`]).
//!
//! This module is sans-IO: the state machines take time and messages and
//! say what to send; the programs in `src/bin` do the I/O.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Where slaves ask for the time.
pub const REQUEST_TAG: &str = "/clock/master-request";
/// The masters' own tag: heartbeats and their clock comparisons.
pub const MASTERS_TAG: &str = "/clock/masters";

/// The tag on which slave `slave` gets its replies.
pub fn reply_tag(slave: u32) -> String {
    format!("/clock/reply/{slave}")
}

/// A slave's request: `t1` is the slave's clock when it sent it (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The asking slave.
    pub slave: u32,
    /// Its request number (from 1).
    pub seq: u64,
    /// The slave's clock at sending, ns.
    pub t1: i64,
}

/// A master's answer (NTP's four timestamps less the fourth, which the
/// slave takes on receipt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The slave asked.
    pub slave: u32,
    /// The request answered.
    pub seq: u64,
    /// The request's `t1`, echoed.
    pub t1: i64,
    /// The master's clock when the request arrived, ns.
    pub t2: i64,
    /// The master's clock when it sent this, ns.
    pub t3: i64,
    /// Who answered.
    pub master: u32,
}

/// What masters say to each other on [`MASTERS_TAG`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterMsg {
    /// Alive; whether the sender answers requests; the newest request of
    /// each slave it answered (an answering master's only).
    Heartbeat {
        /// The sender.
        master: u32,
        /// Its rank: lower is preferred.
        rank: u32,
        /// Whether it answers requests.
        active: bool,
        /// (slave, newest request answered), for the slaves it answered.
        answered: Vec<(u32, u64)>,
    },
    /// A master asks the answering one for the time.
    SyncRequest {
        /// The asking master.
        from: u32,
        /// Its clock at sending, ns.
        t1: i64,
    },
    /// The answering master's reply to a [`MasterMsg::SyncRequest`].
    SyncReply {
        /// The master that asked.
        to: u32,
        /// Echoed.
        t1: i64,
        /// Receipt, ns.
        t2: i64,
        /// Sending, ns.
        t3: i64,
    },
}

const KIND_REQUEST: u8 = 1;
const KIND_REPLY: u8 = 2;
const KIND_HEARTBEAT: u8 = 3;
const KIND_SYNC_REQUEST: u8 = 4;
const KIND_SYNC_REPLY: u8 = 5;
/// Most slaves a heartbeat lists.
pub const MAX_LISTED: usize = 1024;

/// Reads little-endian fields off a byte slice; `None` once it runs out.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_le_bytes)
    }
    /// `Some(v)` only if nothing is left over.
    fn end<T>(&self, v: T) -> Option<T> {
        self.0.is_empty().then_some(v)
    }
}

impl Request {
    /// The request's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![KIND_REQUEST];
        v.extend(self.slave.to_le_bytes());
        v.extend(self.seq.to_le_bytes());
        v.extend(self.t1.to_le_bytes());
        v
    }

    /// A request from its bytes; `None` for anything else.
    pub fn decode(b: &[u8]) -> Option<Request> {
        let mut r = Reader(b);
        (r.u8()? == KIND_REQUEST).then_some(())?;
        let req = Request {
            slave: r.u32()?,
            seq: r.u64()?,
            t1: r.i64()?,
        };
        r.end(req)
    }
}

impl Reply {
    /// The reply's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![KIND_REPLY];
        v.extend(self.slave.to_le_bytes());
        v.extend(self.seq.to_le_bytes());
        for t in [self.t1, self.t2, self.t3] {
            v.extend(t.to_le_bytes());
        }
        v.extend(self.master.to_le_bytes());
        v
    }

    /// A reply from its bytes; `None` for anything else.
    pub fn decode(b: &[u8]) -> Option<Reply> {
        let mut r = Reader(b);
        (r.u8()? == KIND_REPLY).then_some(())?;
        let rep = Reply {
            slave: r.u32()?,
            seq: r.u64()?,
            t1: r.i64()?,
            t2: r.i64()?,
            t3: r.i64()?,
            master: r.u32()?,
        };
        r.end(rep)
    }
}

impl MasterMsg {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        match self {
            MasterMsg::Heartbeat {
                master,
                rank,
                active,
                answered,
            } => {
                v.push(KIND_HEARTBEAT);
                v.extend(master.to_le_bytes());
                v.extend(rank.to_le_bytes());
                v.push(u8::from(*active));
                let listed = &answered[..answered.len().min(MAX_LISTED)];
                v.extend((listed.len() as u32).to_le_bytes());
                for (slave, seq) in listed {
                    v.extend(slave.to_le_bytes());
                    v.extend(seq.to_le_bytes());
                }
            }
            MasterMsg::SyncRequest { from, t1 } => {
                v.push(KIND_SYNC_REQUEST);
                v.extend(from.to_le_bytes());
                v.extend(t1.to_le_bytes());
            }
            MasterMsg::SyncReply { to, t1, t2, t3 } => {
                v.push(KIND_SYNC_REPLY);
                v.extend(to.to_le_bytes());
                for t in [t1, t2, t3] {
                    v.extend(t.to_le_bytes());
                }
            }
        }
        v
    }

    /// A message from its bytes; `None` for anything malformed.
    pub fn decode(b: &[u8]) -> Option<MasterMsg> {
        let mut r = Reader(b);
        let m = match r.u8()? {
            KIND_HEARTBEAT => {
                let (master, rank) = (r.u32()?, r.u32()?);
                let active = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                let n = r.u32()? as usize;
                if n > MAX_LISTED {
                    return None;
                }
                let mut answered = Vec::with_capacity(n);
                for _ in 0..n {
                    answered.push((r.u32()?, r.u64()?));
                }
                MasterMsg::Heartbeat {
                    master,
                    rank,
                    active,
                    answered,
                }
            }
            KIND_SYNC_REQUEST => MasterMsg::SyncRequest {
                from: r.u32()?,
                t1: r.i64()?,
            },
            KIND_SYNC_REPLY => MasterMsg::SyncReply {
                to: r.u32()?,
                t1: r.i64()?,
                t2: r.i64()?,
                t3: r.i64()?,
            },
            _ => return None,
        };
        r.end(m)
    }
}

/// The offset of a remote clock from ours, estimated from exchanges of
/// four timestamps (sent `t1`, received there `t2`, answered there `t3`,
/// received back `t4`): each gives offset `((t2 - t1) + (t3 - t4)) / 2`,
/// wrong by at most half its round trip `(t4 - t1) - (t3 - t2)`, plus what
/// either clock drifted since. The estimate is the sample whose bound,
/// half its round trip plus [`Estimator::DRIFT_PPM`] of its age, is
/// least; when the window is full, the sample of worst bound makes room.
/// So a burst of slow exchanges (a link that came back and delivered its
/// backlog late) never displaces a recent fast one.
#[derive(Debug, Clone, Default)]
pub struct Estimator {
    /// (offset, round trip, `t4`) of the samples kept, oldest first.
    samples: std::collections::VecDeque<(i64, i64, i64)>,
}

impl Estimator {
    /// Samples kept.
    pub const WINDOW: usize = 1024;
    /// The drift two clocks are allowed, parts per million.
    pub const DRIFT_PPM: i64 = 50;

    /// Adds an exchange; returns its (offset, round trip), ns.
    pub fn sample(&mut self, t1: i64, t2: i64, t3: i64, t4: i64) -> (i64, i64) {
        let offset = ((t2 - t1) + (t3 - t4)) / 2;
        let delay = ((t4 - t1) - (t3 - t2)).max(0);
        if self.samples.len() == Self::WINDOW {
            // Full: the sample of worst bound goes, not the oldest.
            let worst = (0..self.samples.len()).max_by_key(|i| self.bound(self.samples[*i], t4));
            if let Some(i) = worst {
                self.samples.remove(i);
            }
        }
        self.samples.push_back((offset, delay, t4));
        (offset, delay)
    }

    fn bound(&self, (_, delay, at): (i64, i64, i64), now: i64) -> i64 {
        let age = now.saturating_sub(at).max(0);
        delay / 2 + age / 1_000_000 * Self::DRIFT_PPM
    }

    /// The least bound the samples put at `now` on the error of `offset`
    /// (ns): each is within its own bound of the truth, so `offset` is
    /// within that plus its distance from the sample's offset.
    pub fn bound_of(&self, offset: i64, now: i64) -> Option<i64> {
        self.samples
            .iter()
            .map(|s| (offset - s.0).abs() + self.bound(*s, now))
            .min()
    }

    /// The estimate at `now` (our clock, ns): (offset, the bound on its
    /// error), or `None` before a sample.
    pub fn best(&self, now: i64) -> Option<(i64, i64)> {
        self.samples
            .iter()
            .map(|s| (s.0, self.bound(*s, now)))
            .min_by_key(|(_, bound)| *bound)
    }
}

/// A master's clock: the kernel's, corrected by its estimate of the
/// reference, which is the answering master's clock. The answering master
/// is the reference itself (correction 0). A master that does not answer
/// follows it; it counts as trusted, fit to time slaves, while exchanges
/// with the current reference put its clock within
/// [`MasterClock::TRUSTED_BOUND_NS`] of it.
#[derive(Debug, Clone, Default)]
pub struct MasterClock {
    /// Every exchange since this master last was the reference: the
    /// correction's source. (When the reference changes, the new one was
    /// following the old, so that the old exchanges still say much.)
    sync: Estimator,
    /// The exchanges with the current reference: the trust's source.
    current: Estimator,
    correction: i64,
    /// The master whose clock `current` samples.
    following: Option<u32>,
    reference: bool,
}

impl MasterClock {
    /// The largest error bound at which a master that is not the reference
    /// still answers slaves (ownership variant), ns. A master that has just
    /// started, or whose reference has just changed, stays silent until an
    /// exchange with the reference is fast enough: answering on its first
    /// exchange, one that took 5 ms under load, puts a slave 2.5 ms off.
    pub const TRUSTED_BOUND_NS: i64 = 500_000;

    /// Reads the kernel's clock `raw` (ns) as this master's.
    pub fn read(&self, raw: i64) -> i64 {
        raw + self.correction
    }

    /// This master answers now: its clock becomes the reference.
    pub fn become_reference(&mut self) {
        *self = Self {
            reference: true,
            ..Self::default()
        };
    }

    /// This master does not answer; `id` does. Trust waits for an exchange
    /// with `id` when it is a new reference.
    pub fn follow(&mut self, id: u32) {
        self.reference = false;
        if self.following != Some(id) {
            self.following = Some(id);
            self.current = Estimator::default();
        }
    }

    /// An exchange with the reference: `t1` and `t4` on the kernel's clock,
    /// so that the estimate is the whole correction.
    pub fn on_sync_reply(&mut self, t1: i64, t2: i64, t3: i64, t4: i64) {
        self.sync.sample(t1, t2, t3, t4);
        self.current.sample(t1, t2, t3, t4);
        if let Some((offset, _)) = self.sync.best(t4) {
            self.correction = offset;
        }
    }

    /// At the kernel's `now`: (correction, the bound on its error from the
    /// exchanges with the current reference), ns; `(0, 0)` for the
    /// reference, `None` before an exchange with it.
    pub fn estimate(&self, now: i64) -> Option<(i64, i64)> {
        if self.reference {
            return Some((0, 0));
        }
        let bound = self.current.bound_of(self.correction, now)?;
        Some((self.correction, bound))
    }

    /// Whether this clock may time slaves at the kernel's `now`.
    pub fn trusted(&self, now: i64) -> bool {
        self.estimate(now)
            .is_some_and(|(_, bound)| bound <= Self::TRUSTED_BOUND_NS)
    }
}

/// Timing of the handshake.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How often a master says it is alive.
    pub heartbeat: Duration,
    /// How long a master's silence means it is gone (more than one
    /// heartbeat, so that one late heartbeat does not count).
    pub fail_after: Duration,
    /// How long a starting master listens before it may answer.
    pub settle: Duration,
    /// Most outstanding requests a master keeps (the oldest go first).
    pub max_pending: usize,
}

impl Config {
    /// Heartbeats every `heartbeat`, a silence of 1.5 of them is a
    /// failure, 2 of them to settle.
    pub fn with_heartbeat(heartbeat: Duration) -> Config {
        Config {
            heartbeat,
            fail_after: heartbeat * 3 / 2,
            settle: heartbeat * 2,
            max_pending: 4096,
        }
    }
}

/// What a [`Master`] asks its program to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Publish on [`MASTERS_TAG`].
    Say(MasterMsg),
    /// Publish on the slave's [`reply_tag`]: `t2` and `t3` are on the
    /// clock given to [`Master::on_request`] and [`Master::tick`]; the
    /// binaries give the kernel's and put both on the master's clock at
    /// sending, so that one exchange never mixes two corrections.
    Reply(Reply),
    /// The master now answers (`true`) or no longer does.
    Role(bool),
}

/// Another master, as heard.
#[derive(Debug, Clone, Copy)]
struct Peer {
    rank: u32,
    active: bool,
    last: Instant,
}

/// One master's side of the handshake (see the module's description).
#[derive(Debug)]
pub struct Master {
    id: u32,
    rank: u32,
    cfg: Config,
    started: Instant,
    active: bool,
    peers: HashMap<u32, Peer>,
    /// Requests heard and not known answered, with their arrival time on
    /// this master's clock.
    pending: BTreeMap<(u32, u64), (Request, i64)>,
    /// Per slave, the newest request known answered (by anyone).
    answered: HashMap<u32, u64>,
    next_heartbeat: Instant,
    /// Outstanding requests dropped because `max_pending` was reached.
    pub dropped: u64,
}

impl Master {
    /// A master that starts at `now`, not answering yet.
    pub fn new(id: u32, rank: u32, cfg: Config, now: Instant) -> Master {
        Master {
            id,
            rank,
            cfg,
            started: now,
            active: false,
            peers: HashMap::new(),
            pending: BTreeMap::new(),
            answered: HashMap::new(),
            next_heartbeat: now,
            dropped: 0,
        }
    }

    /// Whether this master answers requests.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Requests kept for a take-over.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The answering master as this one hears it (itself included).
    pub fn active_master(&self, now: Instant) -> Option<u32> {
        if self.active {
            return Some(self.id);
        }
        self.live(now)
            .filter(|(_, p)| p.active)
            .min_by_key(|(_, p)| p.rank)
            .map(|(id, _)| *id)
    }

    fn live(&self, now: Instant) -> impl Iterator<Item = (&u32, &Peer)> {
        let fail = self.cfg.fail_after;
        self.peers
            .iter()
            .filter(move |(_, p)| now.saturating_duration_since(p.last) < fail)
    }

    /// A request arrived at `clock` (ns, see [`Action::Reply`]): the reply
    /// if this master answers, else kept.
    ///
    /// The answering master answers every request it hears, a repeated
    /// one too (a slave asks again when no answer came: the request or
    /// the answer was lost, or filtered; a slave drops an answer it has).
    /// Another master keeps what is newer than what the answering one
    /// reported answered; what is older and was not answered the slave
    /// asks again.
    pub fn on_request(&mut self, req: Request, clock: i64) -> Option<Reply> {
        if self.active {
            let known = self.answered.entry(req.slave).or_insert(0);
            *known = (*known).max(req.seq);
            return Some(self.reply(req, clock));
        }
        if self.answered.get(&req.slave).is_some_and(|s| *s >= req.seq) {
            return None;
        }
        if self.pending.len() >= self.cfg.max_pending {
            self.pending.pop_first();
            self.dropped += 1;
        }
        self.pending.insert((req.slave, req.seq), (req, clock));
        None
    }

    fn reply(&self, req: Request, t2: i64) -> Reply {
        Reply {
            slave: req.slave,
            seq: req.seq,
            t1: req.t1,
            t2,
            t3: t2,
            master: self.id,
        }
    }

    /// A message on [`MASTERS_TAG`] arrived at `now`; returns what to
    /// do at once (a role change).
    pub fn on_heartbeat(&mut self, msg: &MasterMsg, now: Instant) -> Vec<Action> {
        let MasterMsg::Heartbeat {
            master,
            rank,
            active,
            answered,
        } = msg
        else {
            return Vec::new();
        };
        if *master == self.id {
            return Vec::new();
        }
        self.peers.insert(
            *master,
            Peer {
                rank: *rank,
                active: *active,
                last: now,
            },
        );
        for (slave, seq) in answered {
            let known = self.answered.entry(*slave).or_insert(0);
            *known = (*known).max(*seq);
        }
        let answered = &self.answered;
        self.pending
            .retain(|(slave, seq), _| answered.get(slave).is_none_or(|a| seq > a));
        // Two answer: the worse-ranked stops (ties: the higher id).
        if self.active && *active && (*rank, *master) < (self.rank, self.id) {
            self.active = false;
            return vec![Action::Role(false)];
        }
        Vec::new()
    }

    /// Time passes: heartbeats due, and a take-over when the answering
    /// master has gone quiet. `clock` (ns, see [`Action::Reply`]) is the
    /// `t3` of the outstanding requests a take-over answers.
    pub fn tick(&mut self, now: Instant, clock: i64) -> Vec<Action> {
        let mut out = Vec::new();
        if !self.active && self.may_take_over(now) {
            self.active = true;
            out.push(Action::Role(true));
            // Everything outstanding, oldest first, with the time it
            // arrived here (the slave's estimate stays right: t2 is
            // when the request arrived, t3 when it is answered).
            for (_, (req, t2)) in std::mem::take(&mut self.pending) {
                let known = self.answered.entry(req.slave).or_insert(0);
                *known = (*known).max(req.seq);
                let mut r = self.reply(req, t2);
                r.t3 = clock;
                out.push(Action::Reply(r));
            }
        }
        if now >= self.next_heartbeat {
            while self.next_heartbeat <= now {
                self.next_heartbeat += self.cfg.heartbeat;
            }
            let mut answered: Vec<(u32, u64)> = match self.active {
                true => self.answered.iter().map(|(s, q)| (*s, *q)).collect(),
                false => Vec::new(),
            };
            answered.sort_unstable();
            out.push(Action::Say(MasterMsg::Heartbeat {
                master: self.id,
                rank: self.rank,
                active: self.active,
                answered,
            }));
        }
        out
    }

    /// Whether this master should start answering: it has listened long
    /// enough, no live master answers, and none of better rank lives.
    fn may_take_over(&self, now: Instant) -> bool {
        if now.saturating_duration_since(self.started) < self.cfg.settle {
            return false;
        }
        !self
            .live(now)
            .any(|(id, p)| p.active || (p.rank, *id) < (self.rank, self.id))
    }

    /// When [`Master::tick`] next has something to do (after `now`).
    pub fn poll_timeout(&self, now: Instant) -> Instant {
        let mut t = self.next_heartbeat;
        if !self.active {
            let settled = self.started + self.cfg.settle;
            let expiries = self.peers.values().map(|p| p.last + self.cfg.fail_after);
            for e in expiries.chain([settled]).filter(|e| *e > now) {
                t = t.min(e);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests;
