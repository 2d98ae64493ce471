//! A forwarder's thread: it reads its tag's ring, hands the records to the
//! route's session under the tag's lock (taking the acknowledgements
//! queued for it there, `crate::acks`), sends what the session releases
//! and sleeps on the ring or, held back, until an acknowledgement or a
//! timer makes room (see the parent module for the routes and sockets).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tagwire_session::{Carrier, Dest, Event, TicketOutcome, Transmit};
use tagwire_shm::{Closed, Gate, ReadOutcome, Ring, TicketDest, TICKET_DESTS};
use tagwire_wire::frame::{FrameHeader, FLAG_BLOB, HEADER_LEN};

use super::{drain, take_acks, Outbound, Route};
use crate::guard::MEMBER_MASK;
use crate::tcpout::TcpOuts;
use crate::{lock, Shared};

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

/// A forwarder's thread-local state.
struct Forwarder<'a> {
    shared: &'a Shared,
    out: &'a Outbound,
    route: &'a Arc<Route>,
    tcp: TcpOuts,
    dests: Arc<Vec<Dest>>,
}

pub(super) fn forward_loop(
    shared: &Arc<Shared>,
    out: &Outbound,
    route: &Arc<Route>,
    ring: &Ring,
    start: u64,
) {
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
        // Acknowledgements wait for us while we read (`crate::acks`), and
        // we read those steered to the replies socket (`crate::replies`).
        route.acks.enter();
        out.replies_enter();
        loop {
            out.read_replies(shared);
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
                out.replies_leave(shared);
                out.take_acks_now(shared, route, Instant::now());
                f.send(tx, events);
                route.acks.enter();
                out.replies_enter();
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
        out.replies_leave(shared);
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
