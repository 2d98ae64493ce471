//! A virtual network of sessions for the tests: nodes at 10.0.0.i:7000,
//! transmits delivered after a latency, with seeded loss, duplication and
//! reordering, on a virtual clock. Publishers' records wait in a queue per
//! node and are handed in while the session takes them, as the daemon's
//! forwarder reads its ring.

#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tagwire_session::{Carrier, Class, Config, Delivery, Dest, Event, Mode, Session, Transmit};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum, TagName};

pub const PORT: u16 = 7000;
pub const MCAST_PORT: u16 = 7400;

pub fn ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1))
}

pub fn node(i: usize) -> NodeAddr {
    NodeAddr(ip(i))
}

pub fn addr(i: usize) -> SocketAddr {
    SocketAddr::new(ip(i), PORT)
}

pub fn tag() -> TagName {
    TagName::new("/t/data").unwrap()
}

pub fn dest(i: usize, mode: Mode) -> Dest {
    Dest {
        priority: Default::default(),
        node: node(i),
        addr: addr(i),
        mode,
        every: 1,
        relay: false,
    }
}

/// The header publisher `origin` gives its `seq`-th message.
pub fn header(origin: usize, seq: u64) -> FrameHeader {
    FrameHeader {
        flags: 0,
        sender: SenderInfo {
            pid: Pid(100 + origin as u32),
            node: node(origin),
        },
        stream: 1,
        seq: SeqNum(seq),
        timestamp_ns: seq * 1000,
    }
}

/// A message whose bytes say which one it is (checked on delivery).
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize * 31 + i) as u8).collect()
}

#[derive(Debug, Clone, Copy)]
pub struct Link {
    pub latency: Duration,
    /// Extra random delay up to this (reorders).
    pub jitter: Duration,
    /// Per mille.
    pub loss: u32,
    pub duplicate: u32,
}

impl Default for Link {
    fn default() -> Self {
        Self {
            latency: Duration::from_micros(200),
            jitter: Duration::ZERO,
            loss: 0,
            duplicate: 0,
        }
    }
}

pub struct Node {
    pub session: Session,
    /// Records waiting to be handed in: (tag, header, payload).
    pub ring: VecDeque<(TagName, FrameHeader, Vec<u8>)>,
    pub delivered: Vec<Delivery>,
    pub events: Vec<Event>,
    /// Everything this node transmitted, with the time.
    pub sent: Vec<(Instant, Transmit)>,
    /// Hand the node's deliveries back in as records (a proxy's daemon:
    /// its forwarder reads what arrived from other nodes from its ring).
    pub reflect: bool,
    /// A lossless subscriber that has read this many of the deliveries,
    /// with room for this many unread: the session's credit follows it
    /// after every delivery, as the daemon's held-back queue does.
    pub lossless: Option<(u64, u64)>,
    /// Most deliveries unread at once.
    pub most_unread: u64,
}

struct InFlight {
    at: Instant,
    order: u64,
    to: usize,
    from: SocketAddr,
    bytes: Vec<u8>,
}

pub struct Net {
    pub nodes: Vec<Node>,
    pub link: Link,
    pub now: Instant,
    pub t0: Instant,
    rng: u64,
    order: u64,
    flight: BTreeMap<(Instant, u64), InFlight>,
    /// Per (from, to): last TCP arrival (TCP keeps order).
    tcp_last: BTreeMap<(usize, usize), Instant>,
    pub dropped: u64,
    /// How long after a session's timer is due the runtime acts on it (a
    /// thread woken late).
    pub timer_late: Duration,
}

impl Net {
    pub fn new(n: usize, link: Link, seed: u64, config: impl Fn(usize) -> Config) -> Self {
        let nodes = (0..n)
            .map(|i| Node {
                session: Session::new(Config {
                    me: node(i),
                    seed: seed.wrapping_mul(31).wrapping_add(i as u64 + 1),
                    multicast_port: Some(MCAST_PORT),
                    ..config(i)
                }),
                ring: VecDeque::new(),
                delivered: Vec::new(),
                events: Vec::new(),
                sent: Vec::new(),
                reflect: false,
                lossless: None,
                most_unread: 0,
            })
            .collect();
        let t0 = Instant::now();
        Self {
            nodes,
            link,
            now: t0,
            t0,
            rng: seed | 1,
            order: 0,
            flight: BTreeMap::new(),
            tcp_last: BTreeMap::new(),
            dropped: 0,
            timer_late: Duration::ZERO,
        }
    }

    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn chance(&mut self, per_mille: u32) -> bool {
        per_mille > 0 && self.rand() % 1000 < u64::from(per_mille)
    }

    /// Queues `count` messages of `len(seq)` bytes published at node `at`.
    pub fn publish(
        &mut self,
        at: usize,
        seqs: impl IntoIterator<Item = u64>,
        len: impl Fn(u64) -> usize,
    ) {
        for seq in seqs {
            self.nodes[at]
                .ring
                .push_back((tag(), header(at, seq), payload(seq, len(seq))));
        }
    }

    /// Hands each node's ready records in (while taken), flushes, moves
    /// transmits into the network and collects outputs.
    pub fn step(&mut self) {
        let now = self.now;
        for i in 0..self.nodes.len() {
            let n = &mut self.nodes[i];
            let mut fed = false;
            while let Some((t, h, p)) = n.ring.front() {
                if n.session.handle_record(now, t, h, p).is_err() {
                    break;
                }
                n.ring.pop_front();
                fed = true;
            }
            if fed {
                n.session.flush(now, &tag());
            }
        }
        for i in 0..self.nodes.len() {
            while let Some(t) = self.nodes[i].session.poll_transmit(now) {
                self.nodes[i].sent.push((now, t.clone()));
                self.route(i, t);
            }
            while let Some(d) = self.nodes[i].session.poll_deliver() {
                if self.nodes[i].reflect {
                    self.nodes[i]
                        .ring
                        .push_back((d.tag.clone(), d.header, d.payload.clone()));
                }
                self.nodes[i].delivered.push(d);
            }
            let n = &mut self.nodes[i];
            if let Some((read, room)) = n.lossless {
                let unread = n.delivered.len() as u64 - read;
                n.most_unread = n.most_unread.max(unread);
                let credit = room.saturating_sub(unread) as u32;
                n.session.set_credit(now, &tag(), Some(credit));
                while let Some(t) = self.nodes[i].session.poll_transmit(now) {
                    self.nodes[i].sent.push((now, t.clone()));
                    self.route(i, t);
                }
            }
            while let Some(e) = self.nodes[i].session.poll_event() {
                self.nodes[i].events.push(e);
            }
        }
    }

    fn route(&mut self, from: usize, t: Transmit) {
        let targets: Vec<usize> = match t.carrier {
            Carrier::Multicast => (0..self.nodes.len()).filter(|&i| i != from).collect(),
            _ => (0..self.nodes.len())
                .filter(|&i| ip(i) == t.dest.ip())
                .collect(),
        };
        for to in targets {
            let mut at = self.now + self.link.latency;
            if t.carrier == Carrier::Tcp {
                let last = self.tcp_last.entry((from, to)).or_insert(at);
                at = at.max(*last);
                *last = at;
            } else {
                if self.chance(self.link.loss) {
                    self.dropped += 1;
                    continue;
                }
                if !self.link.jitter.is_zero() {
                    let j = self.rand() % (self.link.jitter.as_nanos() as u64 + 1);
                    at += Duration::from_nanos(j);
                }
                if self.chance(self.link.duplicate) {
                    self.send_at(at + self.link.latency, from, to, t.bytes.to_vec());
                }
            }
            self.send_at(at, from, to, t.bytes.to_vec());
        }
    }

    fn send_at(&mut self, at: Instant, from: usize, to: usize, bytes: Vec<u8>) {
        self.order += 1;
        let f = InFlight {
            at,
            order: self.order,
            to,
            from: addr(from),
            bytes,
        };
        self.flight.insert((at, self.order), f);
    }

    /// Runs until `done` holds or `limit` of virtual time passed; returns
    /// whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Net) -> bool) -> bool {
        let end = self.now + limit;
        loop {
            self.step();
            if done(self) {
                return true;
            }
            let timer = self
                .nodes
                .iter()
                .filter_map(|n| n.session.poll_timeout())
                .min();
            let arrival = self.flight.keys().next().map(|k| k.0);
            let Some(next) = [timer, arrival].into_iter().flatten().min() else {
                // Nothing in flight and no timer: only the test can move.
                return done(self);
            };
            let next = next.max(self.now);
            // A timer (not an arrival) is acted on `timer_late` after it.
            let next = if arrival.is_none_or(|a| a > next) {
                next + self.timer_late
            } else {
                next
            };
            if next > end {
                self.now = end;
                self.step();
                return done(self);
            }
            self.now = next;
            while let Some(e) = self.flight.first_entry() {
                if e.key().0 > self.now {
                    break;
                }
                let f = e.remove();
                let (now, from) = (self.now, f.from);
                self.nodes[f.to]
                    .session
                    .handle_datagram(now, from, &f.bytes);
            }
            for n in &mut self.nodes {
                if n.session.poll_timeout().is_some_and(|t| t <= self.now) {
                    n.session.handle_timeout(self.now);
                }
            }
        }
    }

    /// Transmits of `class` node `i` sent (after `since`).
    pub fn count(&self, i: usize, class: Class, since: Instant) -> usize {
        self.nodes[i]
            .sent
            .iter()
            .filter(|(at, t)| *at >= since && t.class == class)
            .count()
    }
}

/// Checks node `i` received exactly `seqs` of publisher `origin`, in order,
/// each whole.
pub fn check_delivered(n: &Node, origin: usize, seqs: &[u64], len: impl Fn(u64) -> usize) {
    let got: Vec<&Delivery> = n
        .delivered
        .iter()
        .filter(|d| d.header.sender.node == node(origin))
        .collect();
    let got_seqs: Vec<u64> = got.iter().map(|d| d.header.seq.0).collect();
    assert_eq!(got_seqs, seqs, "lost, repeated or reordered");
    for d in got {
        let seq = d.header.seq.0;
        assert_eq!(d.header, header(origin, seq), "header of {seq}");
        assert!(
            d.payload == payload(seq, len(seq)),
            "payload of {seq} corrupt"
        );
        assert_eq!(d.tag, tag());
    }
}
