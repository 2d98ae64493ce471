//! A forwarder's thread: it reads its tag's ring, hands the records to the
//! route's session under the tag's lock (taking the acknowledgements
//! queued for it there, `crate::acks`), sends what the session releases
//! and sleeps on the ring or, held back, until an acknowledgement or a
//! timer makes room (see the parent module for the routes and sockets).
//!
//! [`forward_loop`] is the driver; each step it takes is a method of
//! [`Forwarder`]: follow the route's destinations, hold the publisher back
//! with a gate while a reliable node receives, read the ring in groups,
//! settle (flush, timers, maybe offer the send ticket), sleep, close the
//! ticket.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tagwire_session::{
    Carrier, Dest, Offer, SendEvent as Event, SendSession, TicketEntry, TicketOutcome, Transmit,
};
use tagwire_shm::{
    Closed, Cursor, Gate, ReadOutcome, Ring, TicketDest, TICKET_DESTS, TICKET_DEST_WORDS,
};
use tagwire_wire::frame::{FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::Sched;

use super::tuning::TUNING;
use super::{drain, take_acks, Outbound, Route};
use crate::roles::Role;
use crate::tcpout::TcpOuts;
use crate::{lock, Shared};

// The session's ticket entries fill the ring's ticket slots exactly.
const _: () = assert!(TicketEntry::WORDS == TICKET_DEST_WORDS);

pub(super) fn forward_loop(
    shared: &Arc<Shared>,
    out: &Outbound,
    route: &Arc<Route>,
    ring: &Ring,
    start: u64,
) {
    let _ = route.thread.set(std::thread::current());
    tracing::debug!(tag = %route.tag, "forwarder started");
    let mut f = Forwarder::new(shared, out, route, ring, start);
    f.base = match shared.roles.get(Role::Forward) {
        Some(s) => s,
        None => nicer(),
    };
    f.schedule();
    while f.running() {
        f.follow_routes();
        f.hold_back();
        let progressed = f.read_ring();
        f.note_held();
        let idle = f.settle(progressed);
        if progressed && idle.room {
            continue;
        }
        let offered = idle.offer.and_then(|o| f.open_ticket(&o));
        f.sleep(idle.timeout, idle.room);
        if let Some(index) = offered {
            f.close_ticket(index);
        }
    }
    f.stop();
    tracing::debug!(tag = %route.tag, "forwarder stopped");
}

/// How often a forwarder adds the time its publishers were held back to
/// the tag's count (`tagwire stats`).
const HELD_FLUSH: Duration = Duration::from_millis(100);

/// Time a paced tag's publishers slept at the forwarder's gate.
#[derive(Debug, Default)]
struct Held {
    /// A round found a writer waiting at this instant.
    since: Option<Instant>,
    /// Counted and not yet added to the tag's count, ns.
    ns: u64,
    flushed: Option<Instant>,
}

/// A forwarder's thread-local state.
struct Forwarder<'a> {
    shared: &'a Shared,
    out: &'a Outbound,
    route: &'a Arc<Route>,
    ring: &'a Ring,
    tcp: TcpOuts,
    /// The destinations the session was last given.
    dests: Arc<Vec<Dest>>,
    /// Where the forwarder reads the ring next.
    cur: Cursor,
    /// The gate holding the publisher back at `cur`, while the session has
    /// a reliable or TCP destination.
    gate: Option<Gate>,
    /// While the tag is paced: how many records its publisher may be ahead
    /// of what was read (`SendSession::paced_lead`).
    lead: Option<usize>,
    /// The frame header of the record being read.
    head: [u8; HEADER_LEN],
    /// A large message's record, whose body is in the daemon's blob store,
    /// and that body.
    rec: Vec<u8>,
    blob: Vec<u8>,
    /// The record whose publisher took (or abandoned) the last offer.
    direct: Option<(u64, TicketOutcome)>,
    /// When the forwarder last read a record (it spins before sleeping
    /// while that is recent).
    last_read: Option<Instant>,
    /// The policy it runs at while its receivers ask for none (the forward
    /// role's, or [`nicer`]), and the one it runs at now.
    base: Sched,
    applied: Option<Sched>,
    /// How long its publishers were held back while paced.
    held: Held,
}

/// What one group of records read under the session's lock left to do.
#[derive(Default)]
struct Group {
    taken: usize,
    bytes: usize,
    /// The ring had nothing more to read.
    empty: bool,
    /// The group ended at a large message's record, with the outcome of the
    /// offer it was for, if any: its body is read after the lock.
    large: Option<Option<TicketOutcome>>,
}

impl Group {
    /// The group stopped at its bounds, not at the ring's end or the
    /// session's room: more may be ready at once.
    fn full(&self) -> bool {
        !self.empty && (self.taken >= TUNING.group || self.bytes >= TUNING.group_bytes)
    }
}

/// One record read from the ring.
enum Record {
    /// Nothing (more) to read.
    Empty,
    /// Overwritten before it was read (counted).
    Lost,
    /// A record of `len` bytes taken: handed to the session, skipped, or
    /// (`large`) a large message's, whose body comes after the lock.
    Taken {
        len: usize,
        large: Option<Option<TicketOutcome>>,
    },
}

/// What settling left: the session's next timer, whether it has room for
/// another record, and an offer to open the ticket with.
struct Idle {
    timeout: Option<Instant>,
    room: bool,
    offer: Option<Offer>,
}

/// A forwarder reading its ring: while one is, acknowledgements of its
/// streams wait for it (`crate::acks`) and it reads those steered to the
/// replies socket (`crate::replies`). Left on drop (without any session's
/// lock held).
struct Reading<'a> {
    shared: &'a Shared,
    out: &'a Outbound,
    route: &'a Route,
}

impl<'a> Reading<'a> {
    fn enter(shared: &'a Shared, out: &'a Outbound, route: &'a Route) -> Self {
        route.acks.enter();
        out.replies_enter();
        Self { shared, out, route }
    }

    /// Runs `f` as if not reading: acknowledgements meanwhile go to the
    /// thread that receives them.
    fn pause<T>(&self, f: impl FnOnce() -> T) -> T {
        self.leave();
        let r = f();
        self.route.acks.enter();
        self.out.replies_enter();
        r
    }

    fn leave(&self) {
        self.route.acks.leave();
        self.out.replies_leave(self.shared);
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

impl<'a> Forwarder<'a> {
    fn new(
        shared: &'a Shared,
        out: &'a Outbound,
        route: &'a Arc<Route>,
        ring: &'a Ring,
        start: u64,
    ) -> Self {
        Self {
            shared,
            out,
            route,
            ring,
            tcp: TcpOuts::default(),
            dests: Arc::new(Vec::new()),
            cur: ring.cursor_from(start, ring.shape().slots),
            gate: None,
            lead: None,
            head: [0u8; HEADER_LEN],
            rec: Vec::new(),
            blob: Vec::new(),
            direct: None,
            last_read: None,
            base: Sched::default(),
            applied: None,
            held: Held::default(),
        }
    }

    /// Counts the time the tag's publishers sleep at a paced gate: from a
    /// round that found one waiting to the next round (the forwarder
    /// runs a round on every release and every record), added to the
    /// tag's count every [`HELD_FLUSH`].
    fn note_held(&mut self) {
        if self.lead.is_none() && self.held.since.is_none() && self.held.ns == 0 {
            // (Unpaced, and nothing left to count.)
            return;
        }
        let now = Instant::now();
        if let Some(since) = self.held.since.take() {
            let ns = now.saturating_duration_since(since).as_nanos();
            self.held.ns = self
                .held
                .ns
                .saturating_add(u64::try_from(ns).unwrap_or(u64::MAX));
        }
        if self.lead.is_some() && self.gate.is_some() && self.ring.writers_waiting() {
            self.held.since = Some(now);
        }
        if self.held.ns > 0
            && self
                .held
                .flushed
                .is_none_or(|t| now.saturating_duration_since(t) >= HELD_FLUSH)
        {
            self.flush_held();
            self.held.flushed = Some(now);
        }
    }

    fn flush_held(&mut self) {
        let ns = std::mem::take(&mut self.held.ns);
        if ns > 0 {
            self.shared
                .tallies
                .tags
                .add(&self.route.tag, |c| c.paced_held_ns += ns);
        }
    }

    /// Runs this thread at the higher of `base` and what the tag's
    /// receivers on other nodes ask (`Route::sched`), when that changed.
    fn schedule(&mut self) {
        let want = match *lock(&self.route.sched) {
            Some(asked) => self.base.max(asked),
            None => self.base,
        };
        if self.applied == Some(want) {
            return;
        }
        self.applied = Some(want);
        if let Err(e) = tagwire_sched::apply(want) {
            tracing::warn!(tag = %self.route.tag, "the forwarder runs below {want}: {e}");
        }
    }

    fn running(&self) -> bool {
        !self.route.stop.load(Ordering::Acquire) && !self.shared.is_stopping()
    }

    /// Gives the session the route's destinations when they changed, and
    /// drops the TCP connections of nodes no longer among them.
    fn follow_routes(&mut self) {
        let dests = lock(&self.route.dests).clone();
        if Arc::ptr_eq(&dests, &self.dests) {
            return;
        }
        self.schedule();
        self.route
            .session
            .lock()
            .set_routes(Instant::now(), &self.route.tag, dests.to_vec());
        self.tcp.retain(|a| dests.iter().any(|t| t.addr == a));
        self.dests = dests;
    }

    /// While some node gets a reliable stream, a gate on the ring at the
    /// read position holds the publisher back instead of letting it
    /// overwrite what the session has not taken yet; otherwise none.
    fn hold_back(&mut self) {
        let route = self.route;
        if let Some(g) = lock(&route.offered_gate).take() {
            // (One of its own, if it has one, is further on.)
            self.gate.get_or_insert(g);
            self.pass();
        }
        let holds_back = route.session.lock().holds_back(&route.tag);
        if !holds_back {
            self.gate = None;
        } else if self.gate.is_none() {
            self.gate = match self.ring.attach_gate(self.cur.position()) {
                Ok(g) => Some(g),
                Err(e) => {
                    tracing::warn!(tag = %route.tag, error = %e, "forwarder runs without back-pressure");
                    None
                }
            };
        }
        route.gated.store(self.gate.is_some(), Ordering::Release);
    }

    /// Reads the ring group by group while the session takes records, and
    /// sends what each group released; true if any record was taken.
    fn read_ring(&mut self) -> bool {
        let (shared, out, route) = (self.shared, self.out, self.route);
        let reading = Reading::enter(shared, out, route);
        let mut progressed = false;
        loop {
            out.read_replies(shared);
            let (group, tx, events) = {
                let mut s = route.session.lock();
                let acked = take_acks(route, &mut s);
                let now = Instant::now();
                let group = self.read_group(&mut s, now);
                let (tx, events) = if group.taken > 0 || acked {
                    out.drain(shared, route, &mut s, now)
                } else {
                    (Vec::new(), Vec::new())
                };
                if group.taken > 0 {
                    self.last_read = Some(now);
                }
                (group, tx, events)
            };
            if group.taken > 0 {
                progressed = true;
                out.send_ready(route);
            }
            if tx.iter().any(|t| t.carrier == Carrier::Tcp) {
                // A TCP write may stall: acknowledgements of the UDP
                // streams are not left waiting for it.
                reading.pause(|| {
                    out.take_acks_now(shared, route, Instant::now());
                    self.send(tx, events);
                });
            } else {
                self.send(tx, events);
            }
            if let Some(this) = group.large {
                self.large(this);
                continue;
            }
            if !group.full() {
                break;
            }
        }
        drop(reading);
        route.read_at.store(self.cur.position(), Ordering::Release);
        progressed
    }

    /// Up to a group's worth of records into the session, under its lock
    /// (the ring is read under it: a record is read only once the session
    /// can take it).
    fn read_group(&mut self, s: &mut SendSession, now: Instant) -> Group {
        let mut g = Group::default();
        let lead = s.paced_lead(&self.route.tag);
        if lead != self.lead {
            // (It follows the session's own backlog too, not only what
            // is read: the publisher may write again once that is short.)
            self.lead = lead;
            self.pass();
        }
        while g.taken < TUNING.group
            && g.bytes < TUNING.group_bytes
            && s.can_accept(&self.route.tag)
        {
            match self.read_record(s, now) {
                Record::Empty => {
                    g.empty = true;
                    break;
                }
                Record::Lost => {}
                Record::Taken { len, large } => {
                    g.taken += 1;
                    g.bytes += len;
                    if large.is_some() {
                        g.large = large;
                        break;
                    }
                }
            }
        }
        g
    }

    /// Reads the next record and hands it to the session (which has room
    /// for it), unless it came from another node that sent it everywhere
    /// itself, or it is a large message's (see [`Group::large`]).
    fn read_record(&mut self, s: &mut SendSession, now: Instant) -> Record {
        let tag = &self.route.tag;
        let at = self.cur.position();
        // The frame header aside, the payload straight into a buffer of
        // the session's, which a message sent alone keeps (no copy of it).
        let mut body = s.buffer();
        let (outcome, len) = self
            .ring
            .read_split(&mut self.cur, &mut self.head, &mut body);
        match outcome {
            ReadOutcome::Record => {}
            ReadOutcome::Empty | ReadOutcome::Pending => {
                s.recycle(body);
                return Record::Empty;
            }
            ReadOutcome::Lost(n) => {
                s.recycle(body);
                self.shared
                    .stats
                    .forward_lost
                    .fetch_add(n, Ordering::Relaxed);
                // The record our publisher sent may be among them: the
                // numbers it used cannot go to another datagram.
                let position = self.cur.position();
                if self.direct.take_if(|(i, _)| *i < position).is_some() {
                    s.abandon_offer(now, tag);
                }
                return Record::Lost;
            }
        }
        let this = self.direct.take_if(|(i, _)| *i == at).map(|(_, o)| o);
        // The record is copied out (taken by the session): its slot may be
        // reused, once a large message it refers to is read too (the daemon
        // keeps that for as long as a gate has not passed it).
        let Ok((header, _)) = FrameHeader::parse(&self.head[..len.min(HEADER_LEN)]) else {
            s.recycle(body);
            self.pass();
            self.shared
                .stats
                .forward_lost
                .fetch_add(1, Ordering::Relaxed);
            if this.is_some() {
                s.abandon_offer(now, tag);
            }
            return Record::Taken { len, large: None };
        };
        if header.flags & FLAG_BLOB != 0 {
            self.rec.clear();
            self.rec.extend_from_slice(&self.head);
            self.rec.extend_from_slice(&body);
            s.recycle(body);
            return Record::Taken {
                len,
                large: Some(this),
            };
        }
        if this.is_none() && !self.sends_on(header.sender.node) {
            self.pass();
            s.recycle(body);
            return Record::Taken { len, large: None };
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
        // The gate passes it with the lead the session has now that it
        // holds it (a paced tag's next record may have to wait; an unpaced
        // tag's lead is looked at once a group, not once a record).
        if self.lead.is_some() {
            self.lead = s.paced_lead(tag);
        }
        self.pass();
        Record::Taken { len, large: None }
    }

    /// Whether a record from `origin` goes to any destination: one from
    /// another node was sent everywhere by that node itself, but to the
    /// nodes this one proxies for.
    fn sends_on(&self, origin: tagwire_wire::NodeAddr) -> bool {
        let me = self.shared.node();
        self.dests.iter().any(|t| t.forwards_from(me, origin))
    }

    /// Nothing more is ready: what was batched goes now, the session's
    /// timers run, and an idle forwarder holding a gate (nothing read this
    /// round) gets the session's offer for the ticket.
    fn settle(&mut self, progressed: bool) -> Idle {
        let route = self.route;
        let now = Instant::now();
        let (tx, events, idle) = {
            let mut s = route.session.lock();
            // (What was left to us until we stopped reading.)
            take_acks(route, &mut s);
            s.flush(now, &route.tag);
            s.handle_timeout(now);
            let offer = (!progressed && self.gate.is_some())
                .then(|| s.offer(now, &route.tag, TICKET_DESTS))
                .flatten();
            let (tx, events) = self.out.drain(self.shared, route, &mut s, now);
            let idle = Idle {
                timeout: s.poll_timeout(),
                room: s.can_accept(&route.tag),
                offer,
            };
            (tx, events, idle)
        };
        self.send(tx, events);
        // Everything the ring held is taken: what was gathered goes now.
        self.out.send_train(route);
        idle
    }

    /// Opens the ticket for the next record with the session's offer;
    /// the index it is for, if opened. With a domain key the publisher
    /// seals each datagram with its tag's key (another node's direct
    /// receiver: with its holding's data key, for the grant the entry
    /// names) and a counter reserved here, never used twice.
    fn open_ticket(&self, offer: &Offer) -> Option<u64> {
        let guard = &self.shared.guard;
        let base = guard.reserve(offer.dests.len() as u64);
        let keyed = guard.is_keyed();
        let odd = guard.sealing_odd();
        let entries: Vec<TicketDest> = offer
            .dests
            .iter()
            .zip(base..)
            .map(|(d, counter)| {
                TicketEntry {
                    dest: *d,
                    member: guard.holder_member(d.addr).unwrap_or(0),
                    counter: if keyed { counter } else { 0 },
                    odd,
                }
                .to_words()
            })
            .collect();
        let index = self.cur.position();
        self.ring
            .ticket()
            .open(index, offer.max_len, &entries)
            .then_some(index)
    }

    /// Sleeps until the session's next timer (at most
    /// [`Tuning::idle_wake`](super::tuning::Tuning::idle_wake)): on the ring
    /// while the session has room (spinning first while busy), else parked
    /// until an acknowledgement makes room.
    fn sleep(&self, timeout: Option<Instant>, room: bool) {
        let wait = timeout.map_or(TUNING.idle_wake, |t| {
            t.saturating_duration_since(Instant::now())
                .min(TUNING.idle_wake)
        });
        if room {
            let busy = self.last_read.is_some_and(|t| t.elapsed() < TUNING.busy);
            // A real-time forwarder never spins: it would keep a thread of
            // its own priority (the connection's prober, echo, inbound
            // thread) off the processor for the spin, which the scheduler's
            // wake-up preemption does not end among equals.
            let real_time = self.applied.is_some_and(Sched::is_real_time);
            let spin = if busy && !real_time {
                TUNING.busy_spin
            } else {
                Duration::ZERO
            };
            self.ring.wait(&self.cur, Some(wait), spin);
            return;
        }
        // Held back: the thread that takes an acknowledgement, or a timer,
        // makes room.
        let route = self.route;
        route.parked.store(true, Ordering::Release);
        if !route.session.lock().can_accept(&route.tag) {
            std::thread::park_timeout(wait);
        }
        route.parked.store(false, Ordering::Release);
    }

    /// Closes the ticket opened for record `index`: whether its publisher
    /// sent it, is read with the record.
    fn close_ticket(&mut self, index: u64) {
        self.direct = match self.ring.ticket().close(index, TUNING.ticket_patience) {
            Closed::Unclaimed => None,
            Closed::Sent => Some((index, TicketOutcome::Sent)),
            Closed::Abandoned => Some((index, TicketOutcome::Abandoned)),
        };
    }

    /// The route is gone: the session closes its streams.
    fn stop(mut self) {
        self.note_held();
        self.flush_held();
        self.gate = None;
        let route = self.route;
        let events = {
            let mut s = route.session.lock();
            s.set_routes(Instant::now(), &route.tag, Vec::new());
            drain(&mut s, Instant::now()).1
        };
        self.out.account(self.shared, route, events);
        // No node gets the tag from here any more: what a TCP connection
        // has not sent is dropped, not delivered after a later forwarder's
        // frames (a partition that took every receiving node down).
        self.tcp.retain(|_| false);
    }

    /// Moves the gate, if there is one, past what has been read.
    fn pass(&self) {
        if let Some(g) = &self.gate {
            // A paced stream's publisher waits, not the ring (unpaced: the
            // whole ring, a plain gate).
            let lead = self.lead.map_or(u64::MAX, |l| l as u64);
            g.advance_within(self.cur.position(), lead);
        }
    }

    /// A large message's record (read into `rec`): its body from the
    /// daemon's blob store, then to the session like any other.
    fn large(&mut self, this: Option<TicketOutcome>) {
        let (shared, route, tag) = (self.shared, self.route, &self.route.tag);
        let Ok((header, body)) = FrameHeader::parse(&self.rec) else {
            return;
        };
        if this.is_none() && !self.sends_on(header.sender.node) {
            self.pass();
            return;
        }
        let read = crate::blob::read_blob(shared, tag, body, &mut self.blob);
        let now = Instant::now();
        let (tx, events) = {
            let mut s = route.session.lock();
            take_acks(route, &mut s);
            if read.is_none() {
                // Gone without a gate holding it (none while only
                // best-effort nodes receive), or unreadable.
                shared.stats.forward_lost.fetch_add(1, Ordering::Relaxed);
                if this.is_some() {
                    s.abandon_offer(now, tag);
                }
                drop(s);
                self.pass();
                return;
            }
            // `can_accept` held when it was read: the record is taken.
            let _ = match this {
                Some(outcome) => s.handle_direct_record(now, tag, &header, &self.blob, outcome),
                None => s.handle_record(now, tag, &header, &self.blob),
            };
            // (As `read_record`: the lead with the message taken.)
            if self.lead.is_some() {
                self.lead = s.paced_lead(tag);
            }
            self.out.drain(shared, route, &mut s, now)
        };
        self.pass();
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

/// A forwarder's policy without a forward role's: nicer than the thread
/// that started it, so that it yields to the inbound delivery thread and to
/// clients ([`Tuning::nice`](super::tuning::Tuning::nice) says why).
fn nicer() -> Sched {
    let me = rustix::thread::gettid();
    let now = rustix::process::getpriority_process(Some(me)).unwrap_or(0);
    let nice = (now + TUNING.nice).clamp(-20, 19);
    Sched::Other {
        nice: i8::try_from(nice).unwrap_or(19),
    }
}
