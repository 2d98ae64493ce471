//! The delivery manager's outbound side: one forwarder thread per global tag
//! with receivers on other nodes, the glue between the tag's ring, the
//! sockets and the tag's [`tagwire_session::SendSession`] (which decides
//! everything: batches, fragments, reliable windows, numbering, credit,
//! the send ticket's bookkeeping; see its crate documentation).
//!
//! ```text
//!  ring ──read──▶ forwarder thread ──handle_record / flush──▶ SendSession (tag)
//!   ▲  gate         │      ▲  sleeps in ring.wait / park       │  ▲
//!   │ (holds the    │      │  until poll_timeout               │  │ ACKs
//!   │  publisher)   ▼      │                                   │  │
//!   │          ticket.open/close ◀── offer / handle_direct ────┘  │
//!   │                                                             │
//!   └──── transmits ──▶ UDP socket, multicast socket, TCP ◀───────┘
//!                            ACKs: read by a busy forwarder from the
//!                            replies socket, else by the replies watcher
//!                            or (sealed) the inbound thread: ACK → session
//!                            (per-tag lock), sends what it frees, unparks
//!                            the forwarder
//! ```
//!
//! * **Back-pressure.** While the tag has a reliable or TCP destination, a
//!   gate on the ring at the forwarder's read position holds the publisher
//!   back (for its configured time) instead of letting it overwrite what
//!   the session has not taken: the forwarder reads only while
//!   `SendSession::can_accept`, and a TCP write blocks while the receiver is
//!   slow.
//! * **Send ticket.** While the forwarder is idle (it has read everything
//!   and the session has room) it opens the ticket with the session's
//!   offer: the record's publisher sends the first copies itself, and the
//!   session keeps the record for resends without sending it again.
//! * **No polling.** The forwarder sleeps on the ring's doorbell (new
//!   records) or, while the session holds records back, parked (the
//!   thread that takes an acknowledgement unparks it when that makes
//!   room), each until the session's next timer.
//! * **Acknowledgements** reach the delivery port's replies socket, which
//!   busy forwarders read without waiting and a watcher thread sleeps on
//!   only while none is busy (`crate::replies`): while a stream flows they
//!   wake no thread. Sealed ones (under a domain key) reach the inbound
//!   thread.
//! * **Locks.** The session is behind a per-tag mutex, taken by this thread
//!   and by whichever thread takes this tag's acknowledgements; no socket
//!   is written while it is held.

use priority_inheriting_lock::PriorityInheritingLock;
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tagwire_reliable::pacer::PacerConfig;
use tagwire_session::{Carrier, Class, Config, Dest, SendEvent as Event, SendSession, Transmit};
use tagwire_shm::{Gate, Ring};
use tagwire_wire::datagram::AckNack;
use tagwire_wire::{Priority, Sched, TagName};

mod ring_loop;
mod tuning;

use tuning::TUNING;

use crate::acks::{Ack, AckInbox, Offered};
use crate::guard::{Opened, Refusal};
use crate::replies::Replies;
use crate::train::Line;
use crate::{lock, Shared};

/// Largest datagram sent: one Ethernet frame's UDP payload (1472 bytes
/// over IPv4, 1452 over IPv6), less a sealed datagram's overhead
/// (`tagwire_auth`'s `TAG_OVERHEAD`, 44) under a domain key. Messages are
/// cut into datagrams this large and small ones batched up to it; runs of
/// them go out in one segmented send (`crate::train`), so the kernel's
/// per-call cost is paid once per up to 64 datagrams, and a loss costs one
/// datagram, never an IP-fragmented 60 KiB one. Without a key the whole payload is used: an 8 KiB message
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
    /// Acknowledgements steered to a socket of their own (`crate::replies`).
    pub(crate) replies: Option<Replies>,
    /// The best band any leg of this node's tags is sent in
    /// (`Priority::rank`'s first element): trains of worse bands yield to
    /// it (`crate::train`).
    urgent: AtomicU8,
}

/// A forwarder's instructions and its session.
#[derive(Debug)]
pub(crate) struct Route {
    /// Nodes with receivers and their delivery addresses, resolved under the
    /// state lock by the delivery manager so the forwarder never takes it.
    dests: Mutex<Arc<Vec<Dest>>>,
    stop: AtomicBool,
    tag: TagName,
    /// Priority-inheriting: the acknowledgement thread (the delivery role)
    /// and the forwarder (the forward role, lower by default) both take it.
    session: PriorityInheritingLock<SendSession>,
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
    /// The highest policy the tag's receivers on other nodes ask for the
    /// threads that move it (`None`: none beyond the default): the
    /// forwarder runs at it (`ring_loop`).
    sched: Mutex<Option<Sched>>,
}

impl Outbound {
    /// The outbound side sending on `sock` (from the delivery port), a
    /// duplicate of the multicast carrier's socket, and the replies socket
    /// where the kernel steers acknowledgements to one.
    pub(crate) fn new(
        sock: UdpSocket,
        msock: Option<&(UdpSocket, u16)>,
        replies: Option<Replies>,
    ) -> std::io::Result<Self> {
        let msock = match msock {
            Some((m, port)) => Some((m.try_clone()?, *port)),
            None => None,
        };
        Ok(Self {
            replies,
            gso_off: AtomicBool::new(!tagwire_net::gso::gso_supported(&sock)),
            sock,
            msock,
            acks: Mutex::new(HashMap::new()),
            routes: Mutex::new(HashMap::new()),
            retransmitted: AtomicU64::new(0),
            urgent: AtomicU8::new(0),
        })
    }

    /// Sets the destinations of every tag: forwarders start, get their new
    /// routes, or stop. `start(tag)` gives a new forwarder its ring and the
    /// index to forward from.
    pub(crate) fn reroute(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        wanted: HashMap<TagName, (Vec<Dest>, Option<PacerConfig>)>,
        asked: &HashMap<TagName, Sched>,
        mut start: impl FnMut(&TagName) -> Option<(Ring, u64)>,
    ) {
        let urgent = wanted
            .values()
            .flat_map(|(d, _)| d)
            .map(|d| d.priority.rank().0)
            .fold(0, u8::max);
        self.urgent.store(urgent, Ordering::Relaxed);
        let mut routes = lock(&self.routes);
        routes.retain(|name, r| {
            let keep = wanted.contains_key(name);
            if !keep {
                r.stop.store(true, Ordering::Release);
                r.wake();
            }
            keep
        });
        // (Sessions are locked after the routes table is let go.)
        let mut repaced = Vec::new();
        for (name, (dests, pacing)) in wanted {
            if let Some(r) = routes.get(&name) {
                *lock(&r.sched) = asked.get(&name).copied();
                repaced.push((r.clone(), pacing));
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
                batch: tagwire_session::Batching::fixed(size),
                writer: tagwire_reliable::WriterConfig {
                    window: TUNING.window,
                    ..tagwire_reliable::WriterConfig::default()
                },
                // The receiving node's ring has as many slots: repairing a
                // loss never releases more than a caught-up subscriber can
                // queue.
                max_unacked_messages: ring.shape().slots as usize,
                multicast_port: self.msock.as_ref().map(|(_, p)| *p),
                pacing,
                ..Config::default()
            };
            let route = Arc::new(Route {
                dests: Mutex::new(Arc::new(dests)),
                stop: AtomicBool::new(false),
                tag: name.clone(),
                session: PriorityInheritingLock::new(SendSession::new(config)),
                thread: std::sync::OnceLock::new(),
                parked: AtomicBool::new(false),
                ring: ring.clone(),
                offered_gate: Mutex::new(None),
                gated: AtomicBool::new(false),
                read_at: AtomicU64::new(from),
                line: Line::default(),
                acks: AckInbox::default(),
                sched: Mutex::new(asked.get(&name).copied()),
            });
            route.hold_back(&lock(&route.dests));
            let (s, o, r) = (shared.clone(), self.clone(), route.clone());
            let spawned = std::thread::Builder::new()
                .name("tagwired-forward".into())
                .spawn(move || ring_loop::forward_loop(&s, &o, &r, &ring, from));
            match spawned {
                Ok(_) => {
                    routes.insert(name, route);
                }
                Err(e) => tracing::warn!(error = %e, "cannot start a forwarder"),
            }
        }
        drop(routes);
        for (r, pacing) in repaced {
            r.session.lock().set_pacing(Instant::now(), &r.tag, pacing);
            r.wake();
        }
    }

    /// An acknowledgement of stream `stream`, decoded by the thread that
    /// read it, if one of our forwarders owns it: its session takes it
    /// (under the tag's lock), what it frees is sent, and a forwarder
    /// waiting for room wakes. False: not ours.
    pub(crate) fn handle_ack(
        &self,
        shared: &Shared,
        now: Instant,
        stream: u64,
        ack: AckNack,
        only: Option<u64>,
    ) -> bool {
        let Some(route) = lock(&self.acks).get(&stream).cloned() else {
            return false;
        };
        // (From another node's direct receiver: only its own tag's streams.)
        if only.is_some_and(|id| id != tagwire_auth::tag_id(route.tag.as_str())) {
            return false;
        }
        let ack = Ack { now, stream, ack };
        if route.acks.offer(ack) == Offered::Left {
            // Its forwarder is reading its ring: it takes it under the
            // lock it holds most of the time (`crate::acks`).
            return true;
        }
        self.take_acks_now(shared, &route, now);
        true
    }

    /// Reads the acknowledgements steered to the replies socket and hands
    /// each to its stream's forwarder (`crate::replies`; a busy
    /// forwarder's, without waiting). Call without any session's lock.
    pub(crate) fn read_replies(&self, shared: &Shared) {
        if let Some(r) = &self.replies {
            r.poll(|from, bytes| self.reply(shared, from, bytes));
        }
    }

    /// [`Replies::enter`]: a forwarder begins reading its ring.
    pub(crate) fn replies_enter(&self) {
        if let Some(r) = &self.replies {
            r.enter();
        }
    }

    /// [`Replies::leave`]. Call without any session's lock.
    pub(crate) fn replies_leave(&self, shared: &Shared) {
        if let Some(r) = &self.replies {
            r.leave(|from, bytes| self.reply(shared, from, bytes));
        }
    }

    /// The replies watcher's thread: until the daemon stops.
    pub(crate) fn watch_replies(&self, shared: &Shared) {
        let Some(r) = &self.replies else {
            return;
        };
        while !shared.is_stopping() {
            r.watch(TUNING.replies_watch, |from, bytes| {
                self.reply(shared, from, bytes)
            });
        }
    }

    /// One datagram from the replies socket: opened like any datagram
    /// (`Guard::open`), and taken only if it is an acknowledgement.
    fn reply(&self, shared: &Shared, from: SocketAddr, bytes: &mut [u8]) {
        use tagwire_wire::datagram::{Body, Datagram};
        let now = Instant::now();
        if bytes.len() >= crate::replies::REPLY_BUFFER {
            // Cut: longer than any acknowledgement.
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            shared.tallies.peers.add(&from.ip(), |c| c.malformed += 1);
            return;
        }
        let (raw, opened) = match shared.guard.open(from, bytes) {
            Ok(o) => o,
            Err(why) => return crate::stats::refused(shared, from.ip(), why),
        };
        let only = match opened {
            Opened::Node => None,
            Opened::Holder(tag) => Some(tag),
            // A publisher's key seals data only.
            Opened::Tag(_) => {
                return crate::stats::refused(shared, from.ip(), Refusal::Unauthenticated)
            }
        };
        match Datagram::decode(raw) {
            Ok(Datagram {
                stream,
                body: Body::AckNack(a),
            }) => {
                self.handle_ack(shared, now, stream, a.to_acknack(), only);
            }
            // (Its prefix says acknowledgement; its body does not.)
            _ => {
                shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
                shared.tallies.peers.add(&from.ip(), |c| c.malformed += 1);
            }
        }
    }

    /// Takes `route`'s queued acknowledgements under its session's lock
    /// and sends what they release (the inbound thread, or a forwarder
    /// about to leave them to it), waking a forwarder waiting for room.
    fn take_acks_now(&self, shared: &Shared, route: &Arc<Route>, now: Instant) {
        let (out, events, room) = {
            let mut s = route.session.lock();
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
            .flat_map(|r| r.session.lock().stream_stats())
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
            }
        }
    }

    fn send_udp(&self, shared: &Shared, t: &Transmit) {
        if t.class == Class::Resend {
            self.retransmitted.fetch_add(1, Ordering::Relaxed);
        }
        SEALED.with_borrow_mut(|sealed| match t.carrier {
            Carrier::Udp => {
                let b = shared.guard.seal_to(&t.bytes, sealed, t.dest);
                let _ = send_classed(&self.sock, t.dest, b, t.priority);
            }
            Carrier::Multicast => {
                if let Some((m, _)) = &self.msock {
                    let b = shared.guard.seal_to(&t.bytes, sealed, t.dest);
                    if send_classed(m, t.dest, b, t.priority).is_ok() {
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

/// One datagram to `dest` in packet class `priority` (its TOS byte).
fn send_classed(
    sock: &UdpSocket,
    dest: SocketAddr,
    bytes: &[u8],
    priority: Priority,
) -> std::io::Result<usize> {
    tagwire_net::gso::send_parts_classed(sock, dest, &[bytes], bytes.len(), priority.tos())
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
        s: &mut SendSession,
        now: Instant,
    ) -> (Vec<Transmit>, Vec<Event>) {
        let mut rest = Vec::new();
        let mut train = route.line.gather();
        // (What it sent since: buffers for the session's next datagrams.)
        for b in train.returned() {
            s.recycle_transmit(b);
        }
        train.adapt(s.retransmitted(&route.tag), now);
        train.yield_to(self.urgent.load(Ordering::Relaxed));
        let keyed = shared.guard.is_keyed();
        // Straight from the session into the train (no list of them).
        while let Some(t) = s.poll_transmit(now) {
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
                s.recycle_transmit(t.bytes);
                b.into()
            } else {
                t.bytes
            };
            train.push(t.dest, t.priority.tos(), datagram);
        }
        let mut events = Vec::new();
        while let Some(e) = s.poll_event() {
            events.push(e);
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
fn take_acks(route: &Route, s: &mut SendSession) -> bool {
    let acks = route.acks.take();
    for a in &acks {
        s.handle_ack(a.now, a.stream, &a.ack);
    }
    !acks.is_empty()
}

/// Everything the session has to send, and its events.
fn drain(s: &mut SendSession, now: Instant) -> (Vec<Transmit>, Vec<Event>) {
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

    /// The acknowledgement thread (the delivery role) and the forwarder
    /// (the forward role, lower by default) share a route's session: its
    /// lock must inherit priority like the state's (whose behaviour
    /// `state_lock_tests` checks). A plain mutex here fails this test's
    /// build.
    #[test]
    fn a_routes_session_lock_inherits_priority() {
        fn guard(
            r: &Route,
        ) -> priority_inheriting_lock::PriorityInheritingLockGuard<'_, SendSession> {
            r.session.lock()
        }
        let _ = guard;
    }
}
