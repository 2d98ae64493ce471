//! The delivery manager's outbound side: one forwarder thread per global tag
//! with receivers on other nodes, the glue between the tag's ring, the
//! sockets and the tag's [`tagwire_session::Session`] (which decides
//! everything: batches, fragments, reliable windows, numbering, credit,
//! the send ticket's bookkeeping; see its crate documentation).
//!
//! ```text
//!  ring ──read──▶ forwarder thread ──handle_record / flush──▶ Session (tag)
//!   ▲  gate         │      ▲  sleeps in ring.wait / park       │  ▲
//!   │ (holds the    │      │  until poll_timeout               │  │ ACKs
//!   │  publisher)   ▼      │                                   │  │
//!   │          ticket.open/close ◀── offer / handle_direct ────┘  │
//!   │                                                             │
//!   └──── transmits ──▶ UDP socket, multicast socket, TCP ◀───────┘
//!                                         inbound thread: ACK → session
//!                                         (per-tag lock), sends what it
//!                                         frees, unparks the forwarder
//! ```
//!
//! * **Back-pressure.** While the tag has a reliable or TCP destination, a
//!   gate on the ring at the forwarder's read position holds the publisher
//!   back (for its configured time) instead of letting it overwrite what
//!   the session has not taken: the forwarder reads only while
//!   `Session::can_accept`, and a TCP write blocks while the receiver is
//!   slow.
//! * **Send ticket.** While the forwarder is idle (it has read everything
//!   and the session has room) it opens the ticket with the session's
//!   offer: the record's publisher sends the first copies itself, and the
//!   session keeps the record for resends without sending it again.
//! * **No polling.** The forwarder sleeps on the ring's doorbell (new
//!   records) or, while the session holds records back, parked (the
//!   inbound thread unparks it when an acknowledgement makes room), each
//!   until the session's next timer.
//! * **Locks.** The session is behind a per-tag mutex, taken by this thread
//!   and by the inbound thread for this tag's acknowledgements; no socket
//!   is written while it is held.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tagwire_session::{Carrier, Class, Config, Dest, Event, Session, TicketOutcome, Transmit};
use tagwire_shm::{Closed, Gate, ReadOutcome, Ring, TicketDest, TICKET_DESTS};
use tagwire_wire::frame::{FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::TagName;

use crate::acks::{Ack, AckInbox, Offered};
use crate::guard::MEMBER_MASK;
use crate::tcpout::TcpOuts;
use crate::train::Line;
use crate::{lock, Shared};

/// Largest datagram sent: one Ethernet frame's UDP payload (1472 bytes
/// over IPv4, 1452 over IPv6), less a sealed datagram's overhead
/// (`tagwire_auth`'s `TAG_OVERHEAD`, 44) under a domain key. Messages are
/// cut into datagrams this large and small ones batched up to it; runs of
/// them go out in one segmented send (`crate::train`), so the kernel's
/// per-call cost is paid once per up to 64 datagrams, and a loss costs one
/// datagram, never an IP-fragmented 60 KiB one (which is what this was
/// before). Without a key the whole payload is used: an 8 KiB message
/// takes 6 datagrams over IPv4, not 7 (each costs both ends' session and
/// kernel about as much as its bytes).
pub(crate) const fn datagram(keyed: bool, ipv6: bool) -> usize {
    let payload = ETHERNET_MTU - if ipv6 { 40 } else { 20 } - 8;
    if keyed {
        payload - tagwire_auth::datagram::TAG_OVERHEAD
    } else {
        payload
    }
}

/// An Ethernet frame's IP packet.
const ETHERNET_MTU: usize = 1500;

/// Datagrams a reliable stream may have unacknowledged.
const WINDOW: usize = 1024;

/// How long a closing ticket waits for a publisher that holds it (it is
/// between two `sendto`s); past that it is presumed stalled or dead.
const TICKET_PATIENCE: Duration = Duration::from_millis(20);

/// Longest sleep without a timer (route changes and stops wake the
/// forwarder; this only bounds a sleep that missed its wake-up).
const IDLE_WAKE: Duration = Duration::from_millis(250);

/// A forwarder that read a record less than [`BUSY`] ago polls its ring
/// this long before it sleeps: a publisher sending flat out then finds it
/// awake (no wake-up system call per message on its side, no sleep and
/// wake-up on ours, and longer trains of datagrams).
const BUSY_SPIN: Duration = Duration::from_micros(50);

/// See [`BUSY_SPIN`].
const BUSY: Duration = Duration::from_millis(2);

/// Most records a forwarder takes under one lock of its session, and
/// most bytes of them (about one segmented send's worth: what it took is
/// sent before it reads on, so the link and the receiver are kept busy).
const GROUP: usize = 64;

/// See [`GROUP`].
const GROUP_BYTES: usize = 64 << 10;

/// The outbound side's sockets and the routes of acknowledgements.
#[derive(Debug)]
pub(crate) struct Outbound {
    sock: UdpSocket,
    msock: Option<(UdpSocket, u16)>,
    /// Our reliable streams by id: the route whose session owns them.
    acks: Mutex<HashMap<u64, Arc<Route>>>,
    /// Running forwarders by tag.
    routes: Mutex<HashMap<TagName, Arc<Route>>>,
    /// Datagrams sent again after a NACK or a resend timeout.
    pub(crate) retransmitted: AtomicU64,
    /// The kernel refused a segmented send on `sock`: one datagram a call.
    gso_off: AtomicBool,
}

/// A forwarder's instructions and its session.
#[derive(Debug)]
pub(crate) struct Route {
    /// Nodes with receivers and their delivery addresses, resolved under the
    /// state lock by the delivery manager so the forwarder never takes it.
    dests: Mutex<Arc<Vec<Dest>>>,
    stop: AtomicBool,
    tag: TagName,
    session: Mutex<Session>,
    /// The forwarder thread, and whether it is parked waiting for room.
    thread: std::sync::OnceLock<std::thread::Thread>,
    parked: AtomicBool,
    /// The ring it reads (and may sleep on).
    ring: Ring,
    /// A gate attached for the forwarder by `reroute` (see `hold_back`),
    /// which it takes on its next round.
    offered_gate: Mutex<Option<Gate>>,
    /// The forwarder holds a gate of its own.
    gated: AtomicBool,
    /// The ring index the forwarder reads next.
    read_at: AtomicU64,
    /// UDP datagrams the session released, gathered for segmented sends
    /// (under `session`'s lock, after it) and sent after that lock.
    line: Line,
    /// Acknowledgements the inbound thread left to the forwarder.
    acks: AckInbox,
}

impl Outbound {
    /// The outbound side sending on `sock` (from the delivery port) and a
    /// duplicate of the multicast carrier's socket.
    pub(crate) fn new(sock: UdpSocket, msock: Option<&(UdpSocket, u16)>) -> std::io::Result<Self> {
        let msock = match msock {
            Some((m, port)) => Some((m.try_clone()?, *port)),
            None => None,
        };
        Ok(Self {
            gso_off: AtomicBool::new(!tagwire_net::gso::gso_supported(&sock)),
            sock,
            msock,
            acks: Mutex::new(HashMap::new()),
            routes: Mutex::new(HashMap::new()),
            retransmitted: AtomicU64::new(0),
        })
    }

    /// Sets the destinations of every tag: forwarders start, get their new
    /// routes, or stop. `start(tag)` gives a new forwarder its ring and the
    /// index to forward from.
    pub(crate) fn reroute(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        wanted: HashMap<TagName, Vec<Dest>>,
        mut start: impl FnMut(&TagName) -> Option<(Ring, u64)>,
    ) {
        let mut routes = lock(&self.routes);
        routes.retain(|name, r| {
            let keep = wanted.contains_key(name);
            if !keep {
                r.stop.store(true, Ordering::Release);
                r.wake();
            }
            keep
        });
        for (name, dests) in wanted {
            if let Some(r) = routes.get(&name) {
                r.hold_back(&dests);
                *lock(&r.dests) = Arc::new(dests);
                r.wake();
                continue;
            }
            let Some((ring, from)) = start(&name) else {
                continue;
            };
            let size = datagram(shared.guard.is_keyed(), shared.node().0.is_ipv6());
            let config = Config {
                me: shared.node(),
                seed: random_id(),
                datagram: size,
                batch_min: size,
                batch_max: size,
                writer: tagwire_reliable::WriterConfig {
                    window: WINDOW,
                    ..tagwire_reliable::WriterConfig::default()
                },
                // The receiving node's ring has as many slots: repairing a
                // loss never releases more than a caught-up subscriber can
                // queue.
                max_unacked_messages: ring.shape().slots as usize,
                multicast_port: self.msock.as_ref().map(|(_, p)| *p),
                ..Config::default()
            };
            let route = Arc::new(Route {
                dests: Mutex::new(Arc::new(dests)),
                stop: AtomicBool::new(false),
                tag: name.clone(),
                session: Mutex::new(Session::new(config)),
                thread: std::sync::OnceLock::new(),
                parked: AtomicBool::new(false),
                ring: ring.clone(),
                offered_gate: Mutex::new(None),
                gated: AtomicBool::new(false),
                read_at: AtomicU64::new(from),
                line: Line::default(),
                acks: AckInbox::default(),
            });
            route.hold_back(&lock(&route.dests));
            let (s, o, r) = (shared.clone(), self.clone(), route.clone());
            let spawned = std::thread::Builder::new()
                .name("tagwired-forward".into())
                .spawn(move || forward_loop(&s, &o, &r, &ring, from));
            match spawned {
                Ok(_) => {
                    routes.insert(name, route);
                }
                Err(e) => tracing::warn!(error = %e, "cannot start a forwarder"),
            }
        }
    }

    /// An acknowledgement datagram for stream `stream`, if one of our
    /// forwarders owns it: its session takes it (under the tag's lock), what
    /// it frees is sent, and a forwarder waiting for room wakes. False: not
    /// ours.
    pub(crate) fn handle_ack(
        &self,
        shared: &Shared,
        now: Instant,
        stream: u64,
        from: SocketAddr,
        bytes: &[u8],
        only: Option<u64>,
    ) -> bool {
        let Some(route) = lock(&self.acks).get(&stream).cloned() else {
            return false;
        };
        // (From another node's direct receiver: only its own tag's streams.)
        if only.is_some_and(|id| id != tagwire_auth::tag_id(route.tag.as_str())) {
            return false;
        }
        let ack = Ack {
            now,
            from,
            bytes: bytes.to_vec(),
        };
        if route.acks.offer(ack) == Offered::Left {
            // Its forwarder is reading its ring: it takes it under the
            // lock it holds most of the time (`crate::acks`).
            return true;
        }
        self.take_acks_now(shared, &route, now);
        true
    }

    /// Takes `route`'s queued acknowledgements under its session's lock
    /// and sends what they release (the inbound thread, or a forwarder
    /// about to leave them to it), waking a forwarder waiting for room.
    fn take_acks_now(&self, shared: &Shared, route: &Arc<Route>, now: Instant) {
        let (out, events, room) = {
            let mut s = lock(&route.session);
            take_acks(route, &mut s);
            let (out, events) = self.drain(shared, route, &mut s, now);
            (out, events, s.can_accept(&route.tag))
        };
        self.account(shared, route, events);
        // With what the forwarder gathered before: the stream's order.
        self.send_train(route);
        for t in &out {
            self.send_udp(shared, t);
        }
        if room && route.parked.load(Ordering::Acquire) {
            route.wake();
        }
    }

    /// A `tagwire stats` row per reliable stream to another node.
    pub(crate) fn stream_stats(&self) -> Vec<tagwire_session::StreamStats> {
        let routes: Vec<_> = lock(&self.routes).values().cloned().collect();
        routes
            .iter()
            .flat_map(|r| lock(&r.session).stream_stats())
            .collect()
    }

    /// Counts what the session reports; keeps the acknowledgement routes.
    fn account(&self, shared: &Shared, route: &Arc<Route>, events: Vec<Event>) {
        for e in events {
            match e {
                Event::StreamOpened { stream, .. } => {
                    lock(&self.acks).insert(stream, route.clone());
                }
                Event::StreamClosed { stream, .. } => {
                    lock(&self.acks).remove(&stream);
                }
                Event::ScaledOut { count, .. } => {
                    shared.stats.scaled_out.fetch_add(count, Ordering::Relaxed);
                }
                Event::Dropped { .. } => {
                    shared.stats.forward_dropped.fetch_add(1, Ordering::Relaxed);
                }
                Event::DirectKept { .. } => {
                    shared.stats.direct_sent.fetch_add(1, Ordering::Relaxed);
                }
                // Inbound events: this session receives acknowledgements only.
                Event::BestEffortLost { .. }
                | Event::Refused { .. }
                | Event::Malformed { .. }
                | Event::Away { .. }
                | Event::PeerBound { .. }
                | Event::DirectReceived { .. } => {}
            }
        }
    }

    fn send_udp(&self, shared: &Shared, t: &Transmit) {
        if t.class == Class::Resend {
            self.retransmitted.fetch_add(1, Ordering::Relaxed);
        }
        SEALED.with_borrow_mut(|sealed| match t.carrier {
            Carrier::Udp => {
                let _ = self
                    .sock
                    .send_to(shared.guard.seal_to(&t.bytes, sealed, t.dest), t.dest);
            }
            Carrier::Multicast => {
                if let Some((m, _)) = &self.msock {
                    if m.send_to(shared.guard.seal_to(&t.bytes, sealed, t.dest), t.dest)
                        .is_ok()
                    {
                        shared.stats.multicast_sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // Only a forwarder's own records become TCP frames.
            Carrier::Tcp => {
                shared.stats.forward_dropped.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

thread_local! {
    /// A sending thread's buffer for sealed datagrams (`guard`).
    static SEALED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Route {
    /// While `dests` has a reliable or TCP destination, the publisher must
    /// not overwrite what the forwarder has not read: a forwarder without
    /// a gate gets one now, at its read position, for it to take. Called
    /// under the state lock before the grant that made the destination is
    /// answered, so a publisher that starts flat out at once cannot lap a
    /// forwarder the scheduler has not run yet (the forwarder runs nicer
    /// than the daemon; found in CI, where a remote subscriber's first
    /// message was its publisher's 1437th).
    fn hold_back(&self, dests: &[Dest]) {
        if !dests
            .iter()
            .any(|t| t.mode >= tagwire_session::Mode::Reliable)
            || self.gated.load(Ordering::Acquire)
        {
            return;
        }
        let mut offered = lock(&self.offered_gate);
        if offered.is_none() {
            match self.ring.attach_gate(self.read_at.load(Ordering::Acquire)) {
                Ok(g) => *offered = Some(g),
                Err(e) => {
                    tracing::warn!(tag = %self.tag, error = %e, "forwarder runs without back-pressure");
                }
            }
        }
    }

    /// Wakes the forwarder wherever it sleeps: parked (held back), or on
    /// its ring's doorbell (which wakes that ring's sleeping subscribers
    /// too, once per route change or stop: they look and sleep again).
    fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
        self.ring.wake_readers();
    }
}

impl Outbound {
    /// Everything the session has to send, and its events, taken under the
    /// tag's lock: UDP datagrams join the route's train there, in the
    /// session's order whichever thread drains (a datagram gathered by the
    /// forwarder must not be overtaken by a later one the inbound thread
    /// releases: the reader would see a gap, and the writer a loss); the
    /// rest is returned, to be sent after the lock.
    fn drain(
        &self,
        shared: &Shared,
        route: &Route,
        s: &mut Session,
        now: Instant,
    ) -> (Vec<Transmit>, Vec<Event>) {
        let (all, events) = drain(s, now);
        let mut rest = Vec::new();
        let mut train = route.line.gather();
        // (What it sent since: buffers for the session's next datagrams.)
        for b in train.returned() {
            s.recycle(b);
        }
        train.adapt(s.retransmitted(&route.tag), now);
        let keyed = shared.guard.is_keyed();
        for t in all {
            if t.carrier != Carrier::Udp {
                rest.push(t);
                continue;
            }
            if t.class == Class::Resend {
                self.retransmitted.fetch_add(1, Ordering::Relaxed);
            }
            // The datagram's own buffer joins the train (sealed: a buffer
            // of the session's with the sealed bytes).
            let datagram = if keyed {
                let mut b = s.buffer();
                SEALED.with_borrow_mut(|sealed| {
                    b.extend_from_slice(shared.guard.seal_to(&t.bytes, sealed, t.dest));
                });
                s.recycle(t.bytes);
                b
            } else {
                t.bytes
            };
            train.push(t.dest, datagram);
        }
        (rest, events)
    }

    /// Sends what the route's train gathered (or leaves it to the thread
    /// that is sending it: `crate::train`).
    fn send_train(&self, route: &Route) {
        route.line.send_all(&self.sock, &self.gso_off);
    }

    /// Sends the route's full runs, leaving the forming one to grow.
    fn send_ready(&self, route: &Route) {
        route.line.send_ready(&self.sock, &self.gso_off);
    }
}

/// The acknowledgements queued for `route`'s session (under its lock), in
/// the order they arrived; true if there were any.
fn take_acks(route: &Route, s: &mut Session) -> bool {
    let acks = route.acks.take();
    for a in &acks {
        s.handle_datagram(a.now, a.from, &a.bytes);
    }
    !acks.is_empty()
}

/// Everything the session has to send, and its events.
fn drain(s: &mut Session, now: Instant) -> (Vec<Transmit>, Vec<Event>) {
    let mut out = Vec::new();
    while let Some(t) = s.poll_transmit(now) {
        out.push(t);
    }
    let mut events = Vec::new();
    while let Some(e) = s.poll_event() {
        events.push(e);
    }
    (out, events)
}

pub(crate) fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::now_unix_ns());
    h.finish() | 1
}

/// A forwarder's thread-local state.
struct Forwarder<'a> {
    shared: &'a Shared,
    out: &'a Outbound,
    route: &'a Arc<Route>,
    tcp: TcpOuts,
    dests: Arc<Vec<Dest>>,
}

fn forward_loop(shared: &Arc<Shared>, out: &Outbound, route: &Arc<Route>, ring: &Ring, start: u64) {
    let _ = route.thread.set(std::thread::current());
    lower_priority();
    let me = shared.node();
    let tag = &route.tag;
    let mut cur = ring.cursor_from(start, ring.shape().slots);
    let mut gate: Option<Gate> = None;
    let (mut rec, mut blob) = (Vec::new(), Vec::new());
    let mut head = [0u8; HEADER_LEN];
    let mut f = Forwarder {
        shared,
        out,
        route,
        tcp: TcpOuts::default(),
        dests: Arc::new(Vec::new()),
    };
    // The record whose publisher took (or abandoned) our last offer.
    let mut direct: Option<(u64, TicketOutcome)> = None;
    let mut last_read: Option<Instant> = None;
    tracing::debug!(tag = %tag, "forwarder started");
    while !route.stop.load(Ordering::Acquire) && !shared.is_stopping() {
        let dests = lock(&route.dests).clone();
        if !Arc::ptr_eq(&dests, &f.dests) {
            lock(&route.session).set_routes(Instant::now(), tag, dests.to_vec());
            f.tcp.retain(|a| dests.iter().any(|t| t.addr == a));
            f.dests = dests;
        }
        if let Some(g) = lock(&route.offered_gate).take() {
            // (One of its own, if it has one, is further on.)
            gate.get_or_insert(g);
            pass(&gate, cur.position());
        }
        let holds_back = lock(&route.session).holds_back(tag);
        if !holds_back {
            gate = None;
        } else if gate.is_none() {
            // While some node gets a reliable stream, a gate on the ring at
            // our read position holds the publisher back instead of letting
            // it overwrite what the session has not taken yet.
            gate = match ring.attach_gate(cur.position()) {
                Ok(g) => Some(g),
                Err(e) => {
                    tracing::warn!(tag = %tag, error = %e, "forwarder runs without back-pressure");
                    None
                }
            };
        }
        route.gated.store(gate.is_some(), Ordering::Release);
        let mut progressed = false;
        // Acknowledgements wait for us while we read (`crate::acks`).
        route.acks.enter();
        loop {
            // Up to GROUP records under one lock, one clock read and one
            // drain (per record they cost as much as the rest of a small
            // message's path). The ring is read under the lock: a record
            // is read only once the session can take it.
            let mut s = lock(&route.session);
            let acked = take_acks(route, &mut s);
            let now = Instant::now();
            let (mut taken, mut bytes, mut empty) = (0, 0, false);
            // A large message's record, whose body the daemon's state lock
            // gives: handled after this lock.
            let mut large: Option<Option<TicketOutcome>> = None;
            while taken < GROUP && bytes < GROUP_BYTES && s.can_accept(tag) {
                let at = cur.position();
                // The frame header aside, the payload straight into a
                // buffer of the session's, which a message sent alone
                // keeps (no copy of it).
                let mut body = s.buffer();
                let (outcome, len) = ring.read_split(&mut cur, &mut head, &mut body);
                match outcome {
                    ReadOutcome::Record => {}
                    ReadOutcome::Empty | ReadOutcome::Pending => {
                        s.recycle(body);
                        empty = true;
                        break;
                    }
                    ReadOutcome::Lost(n) => {
                        s.recycle(body);
                        shared.stats.forward_lost.fetch_add(n, Ordering::Relaxed);
                        // The record our publisher sent may be among them:
                        // the numbers it used cannot go to another datagram.
                        if direct.take_if(|(i, _)| *i < cur.position()).is_some() {
                            s.abandon_offer(now, tag);
                        }
                        continue;
                    }
                }
                taken += 1;
                bytes += len;
                let this = direct.take_if(|(i, _)| *i == at).map(|(_, o)| o);
                // The record is copied out (taken by the session): its slot
                // may be reused, once a large message it refers to is read
                // too (the daemon keeps that for as long as a gate has not
                // passed it).
                let Ok((header, _)) = FrameHeader::parse(&head[..len.min(HEADER_LEN)]) else {
                    s.recycle(body);
                    pass(&gate, cur.position());
                    shared.stats.forward_lost.fetch_add(1, Ordering::Relaxed);
                    if this.is_some() {
                        s.abandon_offer(now, tag);
                    }
                    continue;
                };
                if header.flags & FLAG_BLOB != 0 {
                    rec.clear();
                    rec.extend_from_slice(&head);
                    rec.extend_from_slice(&body);
                    s.recycle(body);
                    large = Some(this);
                    break;
                }
                pass(&gate, cur.position());
                if this.is_none() && !f.dests.iter().any(|t| t.carries(me, header.sender.node)) {
                    // Came from another node, which sent it everywhere
                    // itself (but to the nodes we proxy for).
                    s.recycle(body);
                    continue;
                }
                // `can_accept` held: the record is taken.
                let _ = match this {
                    Some(outcome) => {
                        let r = s.handle_direct_record(now, tag, &header, &body, outcome);
                        s.recycle(body);
                        r
                    }
                    None => s.handle_record_buf(now, tag, &header, body),
                };
            }
            let (tx, events) = if taken > 0 || acked {
                out.drain(shared, route, &mut s, now)
            } else {
                (Vec::new(), Vec::new())
            };
            drop(s);
            if taken > 0 {
                progressed = true;
                last_read = Some(now);
                out.send_ready(route);
            }
            if tx.iter().any(|t| t.carrier == Carrier::Tcp) {
                // A TCP write may stall: acknowledgements of the UDP
                // streams are not left waiting for it.
                route.acks.leave();
                out.take_acks_now(shared, route, Instant::now());
                f.send(tx, events);
                route.acks.enter();
            } else {
                f.send(tx, events);
            }
            if let Some(this) = large {
                f.large(&rec, &mut blob, this, &gate, cur.position());
                continue;
            }
            if empty || (taken < GROUP && bytes < GROUP_BYTES) {
                break;
            }
        }
        route.acks.leave();
        route.read_at.store(cur.position(), Ordering::Release);
        // Nothing more is ready: send what was batched.
        let now = Instant::now();
        let (tx, events, offer, timeout, room) = {
            let mut s = lock(&route.session);
            // (What was left to us until we left the loop.)
            take_acks(route, &mut s);
            s.flush(now, tag);
            s.handle_timeout(now);
            let offer = (!progressed && gate.is_some())
                .then(|| s.offer(tag, TICKET_DESTS))
                .flatten();
            let (tx, events) = out.drain(shared, route, &mut s, now);
            (tx, events, offer, s.poll_timeout(), s.can_accept(tag))
        };
        f.send(tx, events);
        // Everything the ring held is taken: what was gathered goes now.
        out.send_train(route);
        if progressed && room {
            continue;
        }
        let wait = timeout.map_or(IDLE_WAKE, |t| {
            t.saturating_duration_since(Instant::now()).min(IDLE_WAKE)
        });
        let offered = offer.and_then(|o| {
            // With a domain key the publisher seals each datagram with its
            // tag's key (another node's direct receiver: with its holding's
            // data key, for the grant named above the port) and a counter
            // reserved here (never used twice): the session's five words,
            // then the counter.
            let base = shared.guard.reserve(o.dests.len() as u64);
            let keyed = shared.guard.is_keyed();
            let ds: Vec<TicketDest> = o
                .dests
                .iter()
                .zip(base..)
                .map(|(d, counter)| {
                    let [a, b, c, e, f] = d.to_words();
                    let c = match shared.guard.holder_member(d.addr) {
                        Some(m) => c | (m & MEMBER_MASK) << 16,
                        None => c,
                    };
                    [a, b, c, e, f, if keyed { counter } else { 0 }]
                })
                .collect();
            let index = cur.position();
            ring.ticket().open(index, o.max_len, &ds).then_some(index)
        });
        if room {
            let busy = last_read.is_some_and(|t| t.elapsed() < BUSY);
            let spin = if busy { BUSY_SPIN } else { Duration::ZERO };
            ring.wait(&cur, Some(wait), spin);
        } else {
            // Held back: an acknowledgement (the inbound thread) or a timer
            // makes room.
            route.parked.store(true, Ordering::Release);
            if !lock(&route.session).can_accept(tag) {
                std::thread::park_timeout(wait);
            }
            route.parked.store(false, Ordering::Release);
        }
        if let Some(index) = offered {
            direct = match ring.ticket().close(index, TICKET_PATIENCE) {
                Closed::Unclaimed => None,
                Closed::Sent => Some((index, TicketOutcome::Sent)),
                Closed::Abandoned => Some((index, TicketOutcome::Abandoned)),
            };
        }
    }
    drop(gate);
    let events = {
        let mut s = lock(&route.session);
        s.set_routes(Instant::now(), tag, Vec::new());
        drain(&mut s, Instant::now()).1
    };
    out.account(shared, route, events);
    tracing::debug!(tag = %tag, "forwarder stopped");
}

impl Forwarder<'_> {
    /// A large message's record (`rec`, read up to `position`): its body
    /// from the daemon's blob store, then to the session like any other.
    fn large(
        &mut self,
        rec: &[u8],
        blob: &mut Vec<u8>,
        this: Option<TicketOutcome>,
        gate: &Option<Gate>,
        position: u64,
    ) {
        let (shared, route, tag) = (self.shared, self.route, &self.route.tag);
        let Ok((header, body)) = FrameHeader::parse(rec) else {
            return;
        };
        let origin = header.sender.node;
        if this.is_none() && !self.dests.iter().any(|t| t.carries(shared.node(), origin)) {
            pass(gate, position);
            return;
        }
        let read = crate::blob::read_blob(shared, tag, body, blob);
        pass(gate, position);
        let now = Instant::now();
        let (tx, events) = {
            let mut s = lock(&route.session);
            take_acks(route, &mut s);
            if read.is_none() {
                // Gone without a gate holding it (none while only
                // best-effort nodes receive), or unreadable.
                shared.stats.forward_lost.fetch_add(1, Ordering::Relaxed);
                if this.is_some() {
                    s.abandon_offer(now, tag);
                }
                return;
            }
            // `can_accept` held when it was read: the record is taken.
            let _ = match this {
                Some(outcome) => s.handle_direct_record(now, tag, &header, blob, outcome),
                None => s.handle_record(now, tag, &header, blob),
            };
            self.out.drain(shared, route, &mut s, now)
        };
        self.out.send_ready(route);
        self.send(tx, events);
    }

    /// Sends the session's transmits (TCP frames on this thread's
    /// connections, which may stall: the tag's lock is not held) and
    /// counts its events.
    fn send(&mut self, tx: Vec<Transmit>, events: Vec<Event>) {
        self.out.account(self.shared, self.route, events);
        for t in tx.iter().filter(|t| t.carrier != Carrier::Tcp) {
            self.out.send_udp(self.shared, t);
        }
        let (route, shared) = (self.route, self.shared);
        // A stalled write waits as long as the node is still a destination
        // (the lease removes a dead one) and we run.
        let wanted = |dest: SocketAddr| {
            !route.stop.load(Ordering::Acquire)
                && !shared.is_stopping()
                && lock(&route.dests)
                    .iter()
                    .any(|d| d.addr == dest && d.mode == tagwire_session::Mode::Tcp)
        };
        let lost = self.tcp.send(&shared.guard, &tx, wanted);
        shared
            .stats
            .forward_dropped
            .fetch_add(lost, Ordering::Relaxed);
    }
}

/// Moves the forwarder's gate, if it holds one, past what it has read.
fn pass(gate: &Option<Gate>, position: u64) {
    if let Some(g) = gate {
        g.advance(position);
    }
}

/// How much nicer than the daemon a forwarder thread runs.
const FORWARDER_NICE: i32 = 10;

/// Makes this (forwarder) thread yield to the inbound delivery thread and to
/// clients. With the send ticket the forwarder's wake-up after a message its
/// publisher sent is bookkeeping; measured on two vCPUs the scheduler ran it
/// before the inbound thread woken at the same time, on the same CPU, and
/// each round trip paid for it (remote-rtt 256 B: 1.56-1.64x raw UDP at the
/// daemon's priority, 1.42-1.45x at +10, three alternating runs each). A busy
/// forwarder still gets the CPU whenever its publisher waits for it.
fn lower_priority() {
    let me = rustix::thread::gettid();
    let now = rustix::process::getpriority_process(Some(me)).unwrap_or(0);
    let nicer = (now + FORWARDER_NICE).min(19);
    if let Err(e) = rustix::process::setpriority_process(Some(me), nicer) {
        tracing::debug!(error = %e, "forwarder priority unchanged");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwire_auth::datagram::TAG_OVERHEAD;
    use tagwire_reliable::fragment::fragment_count;
    use tagwire_wire::datagram::max_fragment_payload;

    #[test]
    fn a_datagram_fills_an_ethernet_frame_and_leaves_room_for_a_seal_only_under_a_key() {
        for (ipv6, ip) in [(false, 20), (true, 40)] {
            assert_eq!(datagram(false, ipv6) + 8 + ip, 1500);
            assert_eq!(datagram(true, ipv6) + TAG_OVERHEAD + 8 + ip, 1500);
        }
        // A perf-sized tag's 8 KiB message: 6 datagrams without a key
        // (7 before, with room for a seal kept either way), 7 with one.
        let tag = TagName::new("/perf/12345/tput0").unwrap();
        let frags =
            |keyed| fragment_count(8192, max_fragment_payload(&tag, datagram(keyed, false)));
        assert_eq!(frags(false), 6);
        assert_eq!(frags(true), 7);
    }
}
