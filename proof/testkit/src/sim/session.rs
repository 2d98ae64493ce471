//! The delivery session core ([`tagwire_session::Session`]) as a
//! [`SimNode`]: one receiving socket of a node, its daemon's delivery port
//! or (direct delivery, docs/design.md §6) a client process's own socket.
//!
//! ```text
//!  test: publish(tag, payload) ─▶ ring (this node's publishers) ─┐
//!        session_mut(): set_routes, export_inbound, import_inbound │ while can_accept
//!                                                                  ▼
//!  datagrams ─▶ Session::handle_datagram ──────────────────▶ Session ─▶ poll_transmit ─▶ links
//!  timer ─────▶ Session::handle_timeout, the lossless reader ──┘  │
//!                                                                 ▼
//!                                        poll_deliver ─▶ delivered (tag, origin, seq, checksum)
//!                                        poll_event ──▶ counters
//!                                        lossless reader: unread ─▶ set_credit(room − unread)
//! ```
//!
//! The ring stands for the tag's shared-memory ring read by the daemon's
//! forwarder: records wait there in order while the session holds them
//! back ([`tagwire_session::Held`]), which is the publisher being held
//! back. A lossless subscriber reads one message every `period` and its
//! room is the session's credit, as the daemon's held-back queue is.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use tagwire_session::{
    Carrier as SessionCarrier, Class, Config, Event, Handover, ReceiveEvent, Session,
};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{Carrier, NodeAddr, Pid, SenderInfo, SeqNum, TagName};

use super::node::{Addr, Destination, NodeInit, Outgoing, SimNode};
use super::rng::checksum;

/// A message a session delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    /// Its tag.
    pub tag: TagName,
    /// The node that published it.
    pub origin: NodeAddr,
    /// Its publisher's sequence number.
    pub seq: u64,
    /// Its length.
    pub len: usize,
    /// Its checksum ([`checksum`]).
    pub checksum: u64,
    /// The datagram's source.
    pub from: Addr,
    /// From its publishing to its delivery, in virtual time (the
    /// publisher stamps the time since the run began in its header).
    pub latency: Duration,
}

/// A subscriber that reads slowly and holds the senders back (lossless).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lossless {
    /// Messages it has room for, unread.
    pub room: u64,
    /// It reads one message this often.
    pub period: Duration,
}

/// Counters of a [`SessionNode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionCounters {
    /// Records the session did not take at once (the publisher waited).
    pub held: u64,
    /// Best-effort datagrams reported lost.
    pub best_effort_lost: u64,
    /// Reliable data refused for lack of credit.
    pub refused: u64,
    /// Datagrams that did not decode.
    pub malformed: u64,
    /// Data dropped because its tag's streams moved away.
    pub away: u64,
    /// Datagrams sent, and sent again.
    pub data_sent: u64,
    /// Datagrams sent again.
    pub resent: u64,
    /// Most messages delivered and not yet read by a lossless subscriber.
    pub most_unread: u64,
    /// Most messages one input delivered (a batch, or what a resend
    /// released): the receiver refuses data only once it has no room, so
    /// it may overshoot its room by that much.
    pub most_burst: u64,
    /// Most records waiting in the ring.
    pub most_queued: u64,
}

/// One session on the simulated network (see the module documentation).
pub struct SessionNode {
    session: Session,
    me: Addr,
    /// The run's start, which every node's stamps count from.
    origin: Instant,
    ring: VecDeque<(TagName, FrameHeader, Vec<u8>)>,
    published: BTreeMap<TagName, u64>,
    delivered: Vec<Got>,
    /// How many of `delivered` the lossless subscriber read.
    read: u64,
    lossless: Option<(TagName, Lossless)>,
    next_read: Option<Instant>,
    counters: SessionCounters,
    /// What arrives goes into the ring too (a proxy node's daemon: its
    /// forwarder reads others' samples from its ring and relays them).
    reflect: bool,
    /// A publisher flat out (see [`SessionNode::set_source`]).
    source: Option<Source>,
}

/// A publisher that publishes whenever its ring has room: its tag, its
/// messages' length, and how many records the ring holds (a publisher
/// held back as soon as that many wait).
#[derive(Debug, Clone)]
struct Source {
    tag: TagName,
    len: usize,
    depth: usize,
}

impl SessionNode {
    /// A session at `init.addr` (its node: that address's IP), seeded from
    /// `init`, with `config` otherwise.
    pub fn new(init: &NodeInit, config: Config) -> Self {
        let me = NodeAddr(init.addr.ip());
        Self {
            session: Session::new(Config {
                me,
                seed: init.seed,
                ..config
            }),
            me: init.addr,
            origin: init.now - init.elapsed,
            ring: VecDeque::new(),
            published: BTreeMap::new(),
            delivered: Vec::new(),
            read: 0,
            lossless: None,
            next_read: None,
            counters: SessionCounters::default(),
            reflect: false,
            source: None,
        }
    }

    /// The core, e.g. to set routes or hand streams over (what it then
    /// sends is collected by the simulator).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The core.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Publishes `payload` on `tag` from this node (numbered 1, 2, … per
    /// tag): it waits in the ring until the session takes it.
    pub fn publish(&mut self, now: Instant, tag: &TagName, payload: Vec<u8>) -> u64 {
        let n = self.stamp(now, tag, payload);
        self.pump(now);
        n
    }

    /// Puts a record of `payload` on `tag` into the ring, numbered and
    /// stamped `now`.
    fn stamp(&mut self, now: Instant, tag: &TagName, payload: Vec<u8>) -> u64 {
        let seq = self.published.entry(tag.clone()).or_insert(0);
        *seq += 1;
        let header = FrameHeader {
            flags: 0,
            sender: SenderInfo {
                pid: Pid(1000 + u32::from(self.me.port())),
                node: NodeAddr(self.me.ip()),
            },
            stream: 1,
            seq: SeqNum(*seq),
            timestamp_ns: (now - self.origin).as_nanos() as u64,
        };
        let n = *seq;
        self.ring.push_back((tag.clone(), header, payload));
        self.counters.most_queued = self.counters.most_queued.max(self.ring.len() as u64);
        n
    }

    /// Publishes `len`-byte messages on `tag` flat out from now on: a new
    /// one whenever fewer than `depth` records wait in the ring (each
    /// stamped as it is published, so its latency counts the ring);
    /// `depth` 0 stops.
    pub fn set_source(&mut self, now: Instant, tag: &TagName, len: usize, depth: usize) {
        self.source = (depth > 0).then(|| Source {
            tag: tag.clone(),
            len,
            depth,
        });
        self.pump(now);
    }

    /// Records still waiting in the ring.
    pub fn queued(&self) -> usize {
        self.ring.len()
    }

    /// Messages published on `tag` so far.
    pub fn published(&self, tag: &TagName) -> u64 {
        self.published.get(tag).copied().unwrap_or(0)
    }

    /// Everything delivered so far.
    pub fn delivered(&self) -> &[Got] {
        &self.delivered
    }

    /// Takes what was delivered so far (what a subscriber that moves to
    /// another socket read here).
    pub fn take_delivered(&mut self) -> Vec<Got> {
        self.read = 0;
        std::mem::take(&mut self.delivered)
    }

    /// Gives `tag`'s inbound streams up (direct delivery's switch, see
    /// [`Session::export_inbound`]): returns what the subscriber read here
    /// and the streams' state for the node's other socket.
    pub fn hand_over(&mut self, now: Instant, tag: &TagName) -> (Vec<Got>, Vec<Handover>) {
        self.collect(now);
        let streams = self.session.export_inbound(tag);
        (self.take_delivered(), streams)
    }

    /// Takes `tag`'s inbound streams over from the node's other socket.
    pub fn take_over(&mut self, now: Instant, tag: &TagName, streams: Vec<Handover>) {
        self.session.import_inbound(now, tag, streams);
        self.collect(now);
        self.update_credit(now);
    }

    /// Hands what arrives back in as records (a proxy node: see
    /// `Dest::relay`).
    pub fn set_reflect(&mut self, on: bool) {
        self.reflect = on;
    }

    /// Makes the subscriber of `tag` here lossless (see [`Lossless`]).
    pub fn set_lossless(&mut self, now: Instant, tag: &TagName, l: Lossless) {
        self.lossless = Some((tag.clone(), l));
        self.update_credit(now);
    }

    /// The counters.
    pub fn counters(&self) -> SessionCounters {
        self.counters
    }

    /// Hands waiting records in while the session takes them, then
    /// collects what it delivered and reported.
    fn pump(&mut self, now: Instant) {
        let mut fed: Vec<TagName> = Vec::new();
        // (A source publishes at most this many per input: to a destination
        // that never holds it back, it would publish for ever.)
        let mut budget = 4096;
        loop {
            if let Some(src) = &self.source {
                if self.ring.len() < src.depth && budget > 0 {
                    budget -= 1;
                    let (tag, len) = (src.tag.clone(), src.len);
                    self.stamp(now, &tag, vec![7; len]);
                }
            }
            let Some((tag, header, payload)) = self.ring.front() else {
                break;
            };
            if !self.session.can_accept(tag) {
                break;
            }
            if self
                .session
                .handle_record(now, tag, header, payload)
                .is_err()
            {
                self.counters.held += 1;
                break;
            }
            if !fed.contains(tag) {
                fed.push(tag.clone());
            }
            self.ring.pop_front();
        }
        if self.ring.front().is_some() && fed.is_empty() {
            self.counters.held += 1;
        }
        for tag in fed {
            self.session.flush(now, &tag);
        }
        self.collect(now);
    }

    fn collect(&mut self, now: Instant) {
        let mut any = false;
        let mut burst = 0u64;
        while let Some(d) = self.session.poll_deliver() {
            any = true;
            burst += 1;
            if self.reflect {
                self.ring
                    .push_back((d.tag.clone(), d.header, d.payload.clone()));
            }
            self.delivered.push(Got {
                checksum: checksum(&d.payload),
                len: d.payload.len(),
                origin: d.header.sender.node,
                seq: d.header.seq.0,
                tag: d.tag,
                from: d.from,
                latency: (now - self.origin)
                    .saturating_sub(Duration::from_nanos(d.header.timestamp_ns)),
            });
        }
        while let Some(e) = self.session.poll_event() {
            let c = &mut self.counters;
            match e {
                Event::Receive(ReceiveEvent::BestEffortLost { count, .. }) => {
                    c.best_effort_lost += count
                }
                Event::Receive(ReceiveEvent::Refused { .. }) => c.refused += 1,
                Event::Receive(ReceiveEvent::Malformed { .. }) => c.malformed += 1,
                Event::Receive(ReceiveEvent::Away { .. }) => c.away += 1,
                _ => {}
            }
        }
        self.counters.most_burst = self.counters.most_burst.max(burst);
        if any {
            self.update_credit(now);
        }
    }

    /// The lossless subscriber's room is the session's credit.
    fn update_credit(&mut self, now: Instant) {
        let Some((tag, l)) = self.lossless.clone() else {
            return;
        };
        let unread = self.delivered.len() as u64 - self.read;
        self.counters.most_unread = self.counters.most_unread.max(unread);
        let room = u32::try_from(l.room.saturating_sub(unread)).unwrap_or(u32::MAX);
        self.session.set_credit(now, &tag, Some(room));
        if unread > 0 && self.next_read.is_none() {
            self.next_read = Some(now + l.period);
        }
    }

    fn read_due(&mut self, now: Instant) {
        let Some((_, l)) = self.lossless.clone() else {
            return;
        };
        while self.next_read.is_some_and(|t| t <= now) {
            let unread = self.delivered.len() as u64 - self.read;
            if unread == 0 {
                self.next_read = None;
                break;
            }
            self.read += 1;
            self.next_read = (unread > 1).then(|| now + l.period);
        }
        self.update_credit(now);
    }
}

impl SimNode for SessionNode {
    fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]) {
        self.session.handle_datagram(now, from, bytes);
        self.collect(now);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.session.poll_timeout().is_some_and(|t| t <= now) {
            self.session.handle_timeout(now);
        }
        self.read_due(now);
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Outgoing> {
        let t = self.session.poll_transmit(now)?;
        let class = match t.class {
            Class::Data => 0,
            Class::Resend => 1,
            Class::Control => 2,
        };
        if t.class != Class::Control {
            self.counters.data_sent += 1;
        }
        if t.class == Class::Resend {
            self.counters.resent += 1;
        }
        let (destination, carrier) = match t.carrier {
            SessionCarrier::Udp => (Destination::Unicast(t.dest), Carrier::Udp),
            SessionCarrier::Multicast => (Destination::Group(t.dest), Carrier::Multicast),
            // Carried as datagrams like the rest (the simulator has no
            // stream transport for data): scenarios here use UDP.
            SessionCarrier::Tcp => (Destination::Unicast(t.dest), Carrier::Tcp),
        };
        Some(Outgoing {
            destination,
            carrier,
            class,
            bytes: t.bytes.to_vec(),
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.session.poll_timeout(), self.next_read]
            .into_iter()
            .flatten()
            .min()
    }
}

impl std::fmt::Debug for SessionNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionNode")
            .field("me", &self.me)
            .field("queued", &self.ring.len())
            .field("delivered", &self.delivered.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}
