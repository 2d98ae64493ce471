//! A small reliable, ordered, connection-oriented transport over the
//! simulator's datagrams: what a kernel's TCP gives the membership core,
//! which speaks over one stream per pair of daemons (docs/design.md §6,
//! `runtime/daemon/src/peers.rs`).
//!
//! [`Conns`] is one node's endpoint: sans-IO like everything the simulator
//! drives. The node feeds it datagrams and time, drains
//! [`Conns::poll_transmit`] into its own `poll_transmit`, and reads what
//! happened from [`Conns::poll_event`].
//!
//! ```text
//!   dialer                                   acceptor (always listening)
//!   connect() ── SYN{src=a} ──────────────────► new conn b (SYN received)
//!     (resent every RTO,         ◄── SYNACK{src=b,dst=a} ── (resent every RTO
//!      DialFailed after            Connected                 and for a repeated
//!      connect_timeout)                                      SYN; dropped after
//!              ── ACK (or DATA) ──────────────────────────►  connect_timeout)
//!                                                           Accepted
//!   send(bytes) ─► DATA{seq=n, ack} ─────────► in order: Data{bytes}
//!                  (window of segments;        early: kept until the gap fills
//!                   go-back-N resend on RTO,   old: dropped, acknowledged again
//!                   RTO doubling to max_rto)
//!               ◄───────────── ACK{ack=n+1} ── (every DATA is acknowledged)
//!   close() ───► DATA{FIN} ──────────────────► Closed{Eof}; the conn is gone
//!   (the conn lingers until the FIN is acked)
//!   anything for an unknown conn ────────────► RST ──► Closed{Reset} /
//!                                                       DialFailed{Refused}
//!   unacknowledged data, nothing heard for give_up ──► Closed{TimedOut} (+ RST)
//! ```
//!
//! Connection ids are random per endpoint instance (from the node's seed),
//! so a restarted node never mistakes an old connection for its own: its
//! peers' next segments on an old connection meet an RST, as they would
//! meet a rebooted kernel's.
//!
//! # What it does not model
//!
//! No congestion control, slow start or receive window (the sender keeps
//! at most [`ConnConfig::window`] segments in flight; the receiver keeps
//! whatever arrives early within twice that); no RTT estimation (a fixed
//! initial RTO with exponential backoff); no delayed or selective
//! acknowledgements; no Nagle; no keepalive (a silent connection with
//! nothing to send is never declared broken; the membership core's
//! heartbeats make sure there is always something); no half-close (a
//! closing side discards what still arrives; a side that hears the FIN
//! tears its connection down at once, dropping what it had not sent); no
//! TIME_WAIT; a listening socket is always there (no backlog limit).
//! Segments are counted in segments, not bytes.

mod segment;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use segment::{Kind, Segment};

use super::node::Addr;
use super::rng::SimRng;

/// Settings of a [`Conns`] endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnConfig {
    /// Most payload bytes per segment.
    pub mss: usize,
    /// Most segments in flight (sent, not yet acknowledged) per connection.
    pub window: usize,
    /// The first retransmission timeout.
    pub rto: Duration,
    /// The largest retransmission timeout (the backoff doubles up to it).
    pub max_rto: Duration,
    /// A dial with no answer for this long fails.
    pub connect_timeout: Duration,
    /// A connection with unacknowledged data that hears nothing for this
    /// long is broken: closed at this end (an RST is sent, in case the other
    /// end still listens).
    pub give_up: Duration,
}

impl Default for ConnConfig {
    /// 1000-byte segments, 32 in flight, RTO 20 ms up to 160 ms, dials fail
    /// after 500 ms (the daemon's `connect_timeout`), connections break
    /// after 1 s of silence.
    fn default() -> Self {
        Self {
            mss: 1000,
            window: 32,
            rto: Duration::from_millis(20),
            max_rto: Duration::from_millis(160),
            connect_timeout: Duration::from_millis(500),
            give_up: Duration::from_secs(1),
        }
    }
}

/// One connection of one endpoint (ids are random and never reused by an
/// endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// Why a dial failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialError {
    /// No answer within [`ConnConfig::connect_timeout`].
    TimedOut,
    /// The other end answered with an RST.
    Refused,
}

/// Why an open connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The other end closed it (its FIN arrived, after all its data).
    Eof,
    /// The other end reset it (it no longer knows the connection).
    Reset,
    /// Nothing heard for [`ConnConfig::give_up`] while data waited.
    TimedOut,
}

/// What an endpoint tells its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnEvent {
    /// Our dial to `remote` succeeded.
    Connected {
        /// The connection.
        conn: ConnId,
        /// Whom we dialed.
        remote: Addr,
    },
    /// `remote` connected to us.
    Accepted {
        /// The connection.
        conn: ConnId,
        /// Who.
        remote: Addr,
    },
    /// Our dial to `remote` failed; `conn` is gone.
    DialFailed {
        /// The connection that was being opened.
        conn: ConnId,
        /// Whom we dialed.
        remote: Addr,
        /// Why.
        error: DialError,
    },
    /// Bytes of the stream, in order, each exactly once.
    Data {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// The connection ended; `conn` is gone. Not reported for a connection
    /// this end closed itself.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
}

/// Counters of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConnStats {
    /// Segments sent, retransmissions and control segments included.
    pub segments_sent: u64,
    /// DATA (and SYN) segments sent again after an RTO.
    pub retransmitted: u64,
    /// DATA segments received that were delivered already.
    pub duplicates: u64,
    /// DATA segments received ahead of a gap (kept until it fills).
    pub out_of_order: u64,
    /// RSTs sent.
    pub resets_sent: u64,
    /// Datagrams that were not segments, or named no connection of ours.
    pub ignored: u64,
    /// Connections broken for silence.
    pub timed_out: u64,
}

/// One node's connections (see the module doc).
#[derive(Debug)]
pub struct Conns {
    config: ConnConfig,
    ids: SimRng,
    conns: BTreeMap<ConnId, Conn>,
    /// Open connections by (remote address, remote id): a repeated SYN
    /// finds the connection it opened.
    by_remote: BTreeMap<(Addr, u64), ConnId>,
    transmits: VecDeque<(Addr, Vec<u8>)>,
    events: VecDeque<ConnEvent>,
    stats: ConnStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Dialing: SYN sent, no answer yet.
    SynSent { deadline: Instant },
    /// Accepting: SYNACK sent, the dialer's first ACK (or data) not heard
    /// yet; not reported to the node until then, as `accept()` would not.
    SynReceived { deadline: Instant },
    /// Both ways open.
    Open,
    /// We closed it: our FIN waits for its acknowledgement.
    Closing,
}

#[derive(Debug)]
struct Conn {
    remote: Addr,
    /// The other end's id (unknown while dialing).
    remote_id: u64,
    state: State,
    // Send side.
    next_seq: u64,
    /// Segments not sent yet (beyond the window).
    queued: VecDeque<Pending>,
    /// Segments sent and not yet acknowledged, oldest first.
    unacked: VecDeque<Pending>,
    rto_at: Option<Instant>,
    backoff: u32,
    /// Since when unacknowledged data has made no progress.
    stalled_since: Option<Instant>,
    // Receive side.
    expected: u64,
    early: BTreeMap<u64, Pending>,
}

#[derive(Debug, Clone)]
struct Pending {
    seq: u64,
    fin: bool,
    payload: Vec<u8>,
}

impl Conns {
    /// An endpoint whose connection ids come from `seed`.
    pub fn new(config: ConnConfig, seed: u64) -> Self {
        Self {
            config,
            ids: SimRng::new(seed),
            conns: BTreeMap::new(),
            by_remote: BTreeMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: ConnStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ConnConfig {
        &self.config
    }

    /// The counters.
    pub fn stats(&self) -> ConnStats {
        self.stats
    }

    /// Connections this endpoint holds (dialing, open or closing).
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Whether `conn` is open (dialed and answered, or accepted).
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.state == State::Open)
    }

    /// Every connection's state, for failure messages.
    pub fn describe(&self) -> String {
        format!("{:?}", self.conns)
    }

    /// Segments of `conn` sent or queued and not yet acknowledged.
    pub fn outstanding(&self, conn: ConnId) -> usize {
        self.conns
            .get(&conn)
            .map_or(0, |c| c.queued.len() + c.unacked.len())
    }

    /// Dials `remote`: [`ConnEvent::Connected`] or [`ConnEvent::DialFailed`]
    /// follows.
    pub fn connect(&mut self, now: Instant, remote: Addr) -> ConnId {
        let id = self.fresh_id();
        let mut c = Conn::new(
            remote,
            0,
            State::SynSent {
                deadline: now + self.config.connect_timeout,
            },
        );
        c.rto_at = Some(now + self.config.rto);
        self.conns.insert(id, c);
        self.emit(remote, Segment::control(Kind::Syn, id.0, 0, 0));
        id
    }

    /// Appends `bytes` to `conn`'s stream. `false` when the connection is
    /// not open (gone, dialing or closing): the bytes are dropped.
    pub fn send(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) -> bool {
        let mss = self.config.mss.max(1);
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        if c.state != State::Open {
            return false;
        }
        for chunk in bytes.chunks(mss) {
            let seq = c.next_seq;
            c.next_seq += 1;
            c.queued.push_back(Pending {
                seq,
                fin: false,
                payload: chunk.to_vec(),
            });
        }
        self.push_out(now, conn);
        true
    }

    /// Closes `conn` after what was queued on it: the other end reads the
    /// rest, then [`CloseReason::Eof`]. No event follows here. A dial in
    /// progress is abandoned.
    pub fn close(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        match c.state {
            State::SynSent { .. } | State::SynReceived { .. } => {
                self.remove(conn);
            }
            State::Closing => {}
            State::Open => {
                let seq = c.next_seq;
                c.next_seq += 1;
                c.queued.push_back(Pending {
                    seq,
                    fin: true,
                    payload: Vec::new(),
                });
                c.state = State::Closing;
                self.push_out(now, conn);
            }
        }
    }

    /// Resets `conn` at once: an RST goes out, nothing queued is sent, no
    /// event follows here.
    pub fn reset(&mut self, conn: ConnId) {
        if let Some(c) = self.remove(conn) {
            if c.remote_id != 0 {
                self.send_rst(c.remote, conn.0, c.remote_id);
            }
        }
    }

    /// A datagram arrived from `from`.
    pub fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]) {
        let Some(seg) = Segment::decode(bytes) else {
            self.stats.ignored += 1;
            return;
        };
        if seg.kind == Kind::Syn {
            self.handle_syn(now, from, &seg);
            return;
        }
        let id = ConnId(seg.dst);
        // An RST we answer to an unknown connection carries no source id.
        let rst_any = seg.kind == Kind::Rst && seg.src == 0;
        let known = self.conns.get(&id).is_some_and(|c| {
            c.remote == from
                && (c.remote_id == seg.src || rst_any || matches!(c.state, State::SynSent { .. }))
        });
        if !known {
            self.stats.ignored += 1;
            if seg.kind != Kind::Rst {
                self.send_rst(from, 0, seg.src);
            }
            return;
        }
        if seg.kind == Kind::Rst {
            self.handle_rst(id);
            return;
        }
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if let State::SynSent { .. } = c.state {
            // A SYNACK, or data whose SYNACK was lost: either answers the dial.
            c.remote_id = seg.src;
            c.state = State::Open;
            c.rto_at = None;
            c.backoff = 0;
            self.by_remote.insert((from, seg.src), id);
            self.events.push_back(ConnEvent::Connected {
                conn: id,
                remote: from,
            });
        } else if matches!(c.state, State::SynReceived { .. })
            && matches!(seg.kind, Kind::Ack | Kind::Data)
        {
            // The handshake is complete: accept() returns.
            c.state = State::Open;
            c.rto_at = None;
            c.backoff = 0;
            self.events.push_back(ConnEvent::Accepted {
                conn: id,
                remote: from,
            });
        }
        match seg.kind {
            Kind::SynAck => {
                // A repeated SYNACK: our SYN's answer was heard; say so.
                self.send_ack(id);
            }
            Kind::Ack => self.handle_ack(now, id, seg.ack),
            Kind::Data => {
                self.handle_ack(now, id, seg.ack);
                self.handle_data(id, seg);
            }
            Kind::Syn | Kind::Rst => {}
        }
        self.push_out(now, id);
    }

    /// Retransmissions, dial and silence deadlines. Call at (or after)
    /// [`Conns::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.next_deadline(&self.config).is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.expire(now, id);
        }
    }

    /// The next datagram to send: (destination, bytes).
    pub fn poll_transmit(&mut self) -> Option<(Addr, Vec<u8>)> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ConnEvent> {
        self.events.pop_front()
    }

    /// When [`Conns::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(|c| c.next_deadline(&self.config))
            .min()
    }

    // ----- internals --------------------------------------------------------

    fn fresh_id(&mut self) -> ConnId {
        loop {
            let id = self.ids.next_u64();
            if id != 0 && !self.conns.contains_key(&ConnId(id)) {
                return ConnId(id);
            }
        }
    }

    fn handle_syn(&mut self, now: Instant, from: Addr, seg: &Segment) {
        if seg.src == 0 {
            self.stats.ignored += 1;
            return;
        }
        let id = match self.by_remote.get(&(from, seg.src)) {
            // A repeated SYN: our SYNACK was lost.
            Some(id) => *id,
            None => {
                let id = self.fresh_id();
                let deadline = now + self.config.connect_timeout;
                let mut c = Conn::new(from, seg.src, State::SynReceived { deadline });
                c.rto_at = Some(now + self.config.rto);
                self.conns.insert(id, c);
                self.by_remote.insert((from, seg.src), id);
                id
            }
        };
        let ack = self.conns.get(&id).map_or(1, |c| c.expected);
        self.emit(from, Segment::control(Kind::SynAck, id.0, seg.src, ack));
    }

    fn handle_rst(&mut self, id: ConnId) {
        let Some(c) = self.remove(id) else {
            return;
        };
        match c.state {
            State::SynSent { .. } => self.events.push_back(ConnEvent::DialFailed {
                conn: id,
                remote: c.remote,
                error: DialError::Refused,
            }),
            State::Open => self.events.push_back(ConnEvent::Closed {
                conn: id,
                reason: CloseReason::Reset,
            }),
            State::Closing | State::SynReceived { .. } => {}
        }
    }

    /// The other end expects segment `ack` next: everything before it
    /// arrived.
    fn handle_ack(&mut self, now: Instant, id: ConnId, ack: u64) {
        let rto = self.config.rto;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let before = c.unacked.len();
        while c.unacked.front().is_some_and(|p| p.seq < ack) {
            c.unacked.pop_front();
        }
        if c.unacked.len() == before {
            return;
        }
        c.backoff = 0;
        if c.unacked.is_empty() {
            c.rto_at = None;
            c.stalled_since = None;
        } else {
            c.rto_at = Some(now + rto);
            c.stalled_since = Some(now);
        }
        if c.state == State::Closing && c.unacked.is_empty() && c.queued.is_empty() {
            // Our FIN is acknowledged: the connection is over.
            self.remove(id);
        }
    }

    fn handle_data(&mut self, id: ConnId, seg: Segment) {
        let window = self.config.window as u64;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if seg.seq < c.expected {
            self.stats.duplicates += 1;
        } else if seg.seq > c.expected {
            if seg.seq < c.expected + 2 * window && !c.early.contains_key(&seg.seq) {
                self.stats.out_of_order += 1;
                c.early.insert(
                    seg.seq,
                    Pending {
                        seq: seg.seq,
                        fin: seg.fin,
                        payload: seg.payload,
                    },
                );
            } else {
                self.stats.duplicates += 1;
            }
        } else {
            let mut next = Some(Pending {
                seq: seg.seq,
                fin: seg.fin,
                payload: seg.payload,
            });
            let mut eof = false;
            while let Some(p) = next.take() {
                c.expected = p.seq + 1;
                if p.fin {
                    eof = true;
                    break;
                }
                if c.state == State::Open && !p.payload.is_empty() {
                    self.events.push_back(ConnEvent::Data {
                        conn: id,
                        bytes: p.payload,
                    });
                }
                next = c.early.remove(&c.expected);
            }
            if eof {
                let closing = c.state == State::Closing;
                self.send_ack(id);
                if !closing {
                    // The other end is done: so are we (no half-close).
                    self.remove(id);
                    self.events.push_back(ConnEvent::Closed {
                        conn: id,
                        reason: CloseReason::Eof,
                    });
                }
                return;
            }
        }
        self.send_ack(id);
    }

    /// A deadline of `id` passed: dial timeout, silence, or retransmission.
    fn expire(&mut self, now: Instant, id: ConnId) {
        let config = self.config;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        match c.state {
            State::SynSent { deadline } if now >= deadline => {
                let remote = c.remote;
                self.remove(id);
                self.events.push_back(ConnEvent::DialFailed {
                    conn: id,
                    remote,
                    error: DialError::TimedOut,
                });
                return;
            }
            State::SynReceived { deadline } if now >= deadline => {
                // The dialer went away during the handshake.
                self.remove(id);
                self.stats.timed_out += 1;
                return;
            }
            _ => {}
        }
        if c.stalled_since.is_some_and(|t| now >= t + config.give_up) {
            let (state, remote, remote_id) = (c.state, c.remote, c.remote_id);
            self.remove(id);
            self.stats.timed_out += 1;
            self.send_rst(remote, id.0, remote_id);
            if state == State::Open {
                self.events.push_back(ConnEvent::Closed {
                    conn: id,
                    reason: CloseReason::TimedOut,
                });
            }
            return;
        }
        if c.rto_at.is_some_and(|t| now >= t) {
            c.backoff = (c.backoff + 1).min(16);
            let wait = config
                .rto
                .saturating_mul(1 << c.backoff.min(16))
                .min(config.max_rto);
            c.rto_at = Some(now + wait);
            let (remote, remote_id, ack) = (c.remote, c.remote_id, c.expected);
            let resend: Vec<Segment> = match c.state {
                State::SynSent { .. } => vec![Segment::control(Kind::Syn, id.0, 0, 0)],
                State::SynReceived { .. } => {
                    vec![Segment::control(Kind::SynAck, id.0, remote_id, ack)]
                }
                State::Open | State::Closing => c
                    .unacked
                    .iter()
                    .map(|p| data(id, remote_id, p, ack))
                    .collect(),
            };
            for s in resend {
                self.stats.retransmitted += 1;
                self.emit(remote, s);
            }
        }
    }

    /// Sends queued segments while the window has room.
    fn push_out(&mut self, now: Instant, id: ConnId) {
        let window = self.config.window.max(1);
        let rto = self.config.rto;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if matches!(c.state, State::SynSent { .. } | State::SynReceived { .. }) {
            return;
        }
        let mut out = Vec::new();
        while c.unacked.len() < window {
            let Some(p) = c.queued.pop_front() else {
                break;
            };
            out.push(data(id, c.remote_id, &p, c.expected));
            if c.unacked.is_empty() {
                c.rto_at = Some(now + rto);
                c.stalled_since = Some(now);
            }
            c.unacked.push_back(p);
        }
        let remote = c.remote;
        for s in out {
            self.emit(remote, s);
        }
    }

    fn send_ack(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get(&id) {
            let s = Segment::control(Kind::Ack, id.0, c.remote_id, c.expected);
            self.emit(c.remote, s);
        }
    }

    fn send_rst(&mut self, to: Addr, src: u64, dst: u64) {
        self.stats.resets_sent += 1;
        self.emit(to, Segment::control(Kind::Rst, src, dst, 0));
    }

    fn emit(&mut self, to: Addr, seg: Segment) {
        self.stats.segments_sent += 1;
        self.transmits.push_back((to, seg.encode()));
    }

    fn remove(&mut self, id: ConnId) -> Option<Conn> {
        let c = self.conns.remove(&id)?;
        if self.by_remote.get(&(c.remote, c.remote_id)) == Some(&id) {
            self.by_remote.remove(&(c.remote, c.remote_id));
        }
        Some(c)
    }
}

impl Conn {
    fn new(remote: Addr, remote_id: u64, state: State) -> Self {
        Self {
            remote,
            remote_id,
            state,
            next_seq: 1,
            queued: VecDeque::new(),
            unacked: VecDeque::new(),
            rto_at: None,
            backoff: 0,
            stalled_since: None,
            expected: 1,
            early: BTreeMap::new(),
        }
    }

    fn next_deadline(&self, config: &ConnConfig) -> Option<Instant> {
        let dial = match self.state {
            State::SynSent { deadline } | State::SynReceived { deadline } => Some(deadline),
            State::Open | State::Closing => None,
        };
        let give_up = self.stalled_since.map(|t| t + config.give_up);
        [dial, give_up, self.rto_at].into_iter().flatten().min()
    }
}

fn data(id: ConnId, remote_id: u64, p: &Pending, ack: u64) -> Segment {
    Segment {
        kind: Kind::Data,
        fin: p.fin,
        src: id.0,
        dst: remote_id,
        seq: p.seq,
        ack,
        payload: p.payload.clone(),
    }
}
