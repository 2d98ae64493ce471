//! The delivery manager's outbound side: one forwarder thread per global tag
//! with receivers on other nodes (see `delivery` for the whole picture).
//!
//! The forwarder reads the tag's ring like a subscriber and sends each message
//! published on *this* node once to each node with receivers:
//!
//! * **Batches.** Messages that fit a datagram are packed, as many as are
//!   ready, into one batch datagram (one packet, [`BATCH_DATAGRAM`] bytes,
//!   after a loss, growing to 16 KiB while the link is clean): a publisher of
//!   small messages costs one system call per batch, not per message. A message alone is sent at once, as a batch of one, so batching
//!   adds no latency. Larger messages go alone, cut into fragments of up to
//!   [`DATAGRAM`] bytes.
//! * **Reliable nodes** get a `tagwire_reliable::Writer` stream (window,
//!   heartbeats, resends; at most 4 MiB and a ring's worth of messages
//!   unacknowledged). While a window is
//!   full, the forwarder holds what
//!   it has read (at most a batch and a message) and reads nothing more, so
//!   the ring fills; its gate on the ring then holds the publisher back.
//! * **Best-effort nodes** get sequence numbers only, sent at once, never
//!   resent, never waited for.
//! * **Multicast nodes** share one best-effort stream to the tag's group
//!   (`tag_group`): one datagram reaches them all.
//! * **Send ticket.** While the forwarder is idle (it has read everything
//!   and every reliable window has room) it offers the next record's first
//!   transmission to that record's publisher (`tagwire_shm::Ticket`): the
//!   publisher sends it to the reliable nodes from its own thread, as a batch
//!   of one numbered as the forwarder would have numbered it, before it wakes
//!   us. We then keep the record in each window for resends without sending
//!   it: the message's round trip does not wait for our wake-up.
//! * **TCP nodes** get the same datagrams as frames on a TCP connection
//!   (reliable and ordered by TCP); a slow receiver or a TCP backing off
//!   stalls the write (resumed, never dropped, while the node lives), which
//!   holds the publisher back through the gate like a full window.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tagwire_reliable::{fragment_count, fragments};
use tagwire_shm::{Closed, Gate, ReadOutcome, Ring, TicketDest, TICKET_DESTS};
use tagwire_wire::datagram::{
    batch_len, max_fragment_payload, push_batch_entry, tag_group, BatchRef, DataRef,
    BATCH_ENTRY_OVERHEAD, FLAG_RELIABLE,
};
use tagwire_wire::frame::{BlobRef, FrameHeader, FLAG_BLOB};
use tagwire_wire::{NodeAddr, TagName};

use crate::delivery::{random_id, Delivery, Dest, Mode, OutStream, Route, DATAGRAM, WINDOW_WAIT};
use crate::{lock, Shared};

/// Smallest batch datagram limit: one Ethernet frame (1500-byte MTU less
/// IPv4 and UDP headers), so a batch is never IP-fragmented: a lost packet
/// costs one batch, and a short router queue still passes whole batches
/// (tested through a `tbf` with a 3000-byte queue, where 8 KiB batches, six IP
/// fragments that must all arrive, collapsed).
pub(crate) const BATCH_DATAGRAM: usize = 1472;

/// Largest batch datagram limit, reached while no reliable stream of the
/// forwarder needs a retransmission (fewer system calls per message on a
/// clean link, as Cyclone DDS's 14 KiB datagrams).
const BATCH_DATAGRAM_MAX: usize = 16 * 1024;

/// A clean stretch this long lets the batch limit double.
const BATCH_GROW_AFTER: Duration = Duration::from_millis(200);

/// Bytes a reliable stream may have unacknowledged (besides its window of
/// datagrams): what the receiver may have to buffer and the sender to resend.
const MAX_UNACKED_BYTES: usize = 4 << 20;

/// How long a closing ticket waits for a publisher that holds it (it is
/// between two `sendto`s); past that it is presumed stalled or dead.
const TICKET_PATIENCE: Duration = Duration::from_millis(20);

/// A record offered to its publisher: its index and, per reliable node, the
/// datagram the publisher was told to send.
struct Offer {
    index: u64,
    max_len: usize,
    dests: Vec<(NodeAddr, TicketDest)>,
}

/// Something to send: one message (fragmented if needed) or a batch.
enum Outgoing {
    Message {
        header: FrameHeader,
        message: Vec<u8>,
    },
    Batch {
        count: u16,
        entries: Vec<u8>,
    },
}

/// The same, borrowed (the common case sends without copying).
#[derive(Clone, Copy)]
enum OutRef<'a> {
    Message {
        header: &'a FrameHeader,
        message: &'a [u8],
    },
    Batch {
        count: u16,
        entries: &'a [u8],
    },
}

impl Outgoing {
    fn as_ref(&self) -> OutRef<'_> {
        match self {
            Outgoing::Message { header, message } => OutRef::Message { header, message },
            Outgoing::Batch { count, entries } => OutRef::Batch {
                count: *count,
                entries,
            },
        }
    }
}

/// Read but not yet in every reliable window, with the nodes that have it.
struct Pending {
    out: Outgoing,
    done: Vec<NodeAddr>,
}

/// A best-effort stream to one node: sequence numbers only (the receiver
/// keeps the newest and counts the gaps), no window, no resends.
struct BestEffortOut {
    id: u64,
    dest: SocketAddr,
    next_seq: u64,
}

/// A forwarder's per-thread state.
struct Forwarder<'a> {
    shared: &'a Shared,
    d: &'a Delivery,
    route: &'a Route,
    tag: &'a TagName,
    streams: HashMap<NodeAddr, Arc<Mutex<OutStream>>>,
    best: HashMap<NodeAddr, BestEffortOut>,
    /// The stream to the tag's multicast group, while a node wants it.
    mcast: Option<BestEffortOut>,
    tcp: HashMap<NodeAddr, TcpOut>,
    /// In order; while not empty nothing new is sent reliably.
    pending: VecDeque<Pending>,
    /// The batch being filled.
    count: u16,
    entries: Vec<u8>,
    /// Bytes a batch datagram may have now: one packet after a loss, twice
    /// as much after each clean stretch, up to `BATCH_DATAGRAM_MAX`.
    batch_limit: usize,
    /// Retransmissions of our reliable streams seen so far, and when the
    /// limit may next grow.
    resent: u64,
    grow_at: Instant,
    /// Messages a reliable stream may have unacknowledged: the ring's slot
    /// count, which the receiving node's ring has too, so repairing a loss
    /// never releases more than a caught-up subscriber can queue.
    max_unacked: usize,
    /// Encoding buffer.
    buf: Vec<u8>,
    /// Nodes a scaled or relayed sample skips, and the nodes an emitted
    /// message has reached (reused: no allocation per sample).
    skip: Vec<NodeAddr>,
    done: Vec<NodeAddr>,
    /// The record whose publisher took (or abandoned) our last offer.
    direct: Option<(Offer, Closed)>,
}

pub(crate) fn forward_loop(
    shared: &Arc<Shared>,
    d: &Arc<Delivery>,
    route: &Route,
    tag: &TagName,
    ring: &Ring,
    start: u64,
) {
    lower_priority();
    let me = shared.node();
    let mut cur = ring.cursor_from(start, ring.shape().slots);
    // While some node gets a reliable stream, a gate on the ring at our read
    // position holds the publisher back (for its configured time) instead of
    // letting it overwrite what we have not handed to every window yet.
    let mut gate: Option<Gate> = None;
    let mut rec = Vec::new();
    let mut blob = Vec::new();
    let mut f = Forwarder {
        shared,
        d,
        route,
        tag,
        streams: HashMap::new(),
        best: HashMap::new(),
        mcast: None,
        tcp: HashMap::new(),
        pending: VecDeque::new(),
        count: 0,
        entries: Vec::new(),
        batch_limit: BATCH_DATAGRAM,
        resent: 0,
        grow_at: Instant::now() + BATCH_GROW_AFTER,
        max_unacked: ring.shape().slots as usize,
        buf: Vec::new(),
        skip: Vec::new(),
        done: Vec::new(),
        direct: None,
    };
    tracing::debug!(tag = %tag, "forwarder started");
    while !route.stop.load(Ordering::Acquire) && !shared.is_stopping() {
        let dests = lock(&route.dests).clone();
        f.retain(&dests);
        f.adapt_batch();
        if !dests.iter().any(|t| t.mode >= Mode::Reliable) {
            gate = None;
        } else if gate.is_none() {
            gate = match ring.attach_gate(cur.position()) {
                Ok(g) => Some(g),
                Err(e) => {
                    tracing::warn!(tag = %tag, error = %e, "forwarder runs without back-pressure");
                    None
                }
            };
        }
        if !f.retry(&dests) {
            // Waiting for acknowledgements (the inbound thread applies them).
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let mut progressed = false;
        while f.pending.is_empty() {
            let at = cur.position();
            match ring.read(&mut cur, &mut rec) {
                ReadOutcome::Record => {}
                ReadOutcome::Empty | ReadOutcome::Pending => break,
                ReadOutcome::Lost(n) => {
                    shared.stats.forward_lost.fetch_add(n, Ordering::Relaxed);
                    f.passed(cur.position());
                    continue;
                }
            }
            // (`read` reports a loss on its own, so this record is `at`.)
            let direct = match f.direct.take() {
                Some((o, c)) if o.index == at => Some((o, c)),
                other => {
                    f.direct = other;
                    None
                }
            };
            progressed = true;
            // The record is copied out (sent, batched or held): its slot may
            // be reused, once a large message it refers to is read too (the
            // daemon keeps that for as long as a gate has not passed it).
            let parsed = FrameHeader::parse(&rec);
            if !matches!(&parsed, Ok((h, _)) if h.flags & FLAG_BLOB != 0) {
                pass(&gate, cur.position());
            }
            let Ok((header, body)) = parsed else {
                shared.stats.forward_lost.fetch_add(1, Ordering::Relaxed);
                if let Some((o, _)) = direct {
                    f.restart(o);
                }
                continue;
            };
            let origin = header.sender.node;
            if direct.is_none() && !dests.iter().any(|t| t.carries(me, origin)) {
                // Came from another node, which sent it everywhere itself
                // (but to the nodes we proxy for).
                pass(&gate, cur.position());
                continue;
            }
            let message: &[u8] = if header.flags & FLAG_BLOB != 0 {
                let read = read_blob(shared, tag, body, &mut blob);
                pass(&gate, cur.position());
                match read {
                    Some(()) => &blob,
                    None => {
                        // Gone without a gate holding it (none while only
                        // best-effort nodes receive), or unreadable.
                        shared.stats.forward_lost.fetch_add(1, Ordering::Relaxed);
                        if let Some((o, _)) = direct {
                            f.restart(o);
                        }
                        continue;
                    }
                }
            } else {
                body
            };
            match direct {
                Some((offer, closed)) => f.take_direct(&dests, me, &header, message, offer, closed),
                None => f.take(&dests, me, &header, message),
            }
        }
        // Nothing more is ready: send what was batched.
        f.flush(&dests);
        if !progressed && f.pending.is_empty() {
            let offer = gate
                .as_ref()
                .and_then(|_| f.offer(ring, &dests, cur.position()));
            ring.wait(&cur, Some(Duration::from_millis(50)), Duration::ZERO);
            if let Some(o) = offer {
                match ring.ticket().close(o.index, TICKET_PATIENCE) {
                    Closed::Unclaimed => {}
                    c => f.direct = Some((o, c)),
                }
            }
        }
    }
    drop(gate);
    for s in f.streams.values() {
        d.drop_stream(lock(s).id);
    }
    tracing::debug!(tag = %tag, "forwarder stopped");
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

impl Forwarder<'_> {
    /// Drops the streams of nodes that left (or changed address or mode).
    fn retain(&mut self, dests: &[Dest]) {
        let d = self.d;
        self.streams.retain(|n, s| {
            let keep = dests
                .iter()
                .any(|t| t.mode == Mode::Reliable && t.node == *n && lock(s).dest == t.addr);
            if !keep {
                d.drop_stream(lock(s).id);
            }
            keep
        });
        self.best.retain(|n, s| {
            dests
                .iter()
                .any(|t| t.mode == Mode::BestEffort && t.node == *n && s.dest == t.addr)
        });
        if !dests.iter().any(|t| t.mode == Mode::Multicast) {
            self.mcast = None;
        }
        self.tcp.retain(|n, s| {
            dests
                .iter()
                .any(|t| t.mode == Mode::Tcp && t.node == *n && s.dest == t.addr)
        });
    }

    /// One packet per batch after a retransmission; twice the size after
    /// each clean stretch (best-effort-only routes give no feedback: they
    /// stay at one packet).
    fn adapt_batch(&mut self) {
        let now = Instant::now();
        if self.streams.is_empty() {
            self.batch_limit = BATCH_DATAGRAM;
            return;
        }
        let resent: u64 = self
            .streams
            .values()
            .map(|s| lock(s).writer.stats().retransmitted)
            .sum();
        let was = self.batch_limit;
        if resent != self.resent {
            self.resent = resent;
            self.batch_limit = BATCH_DATAGRAM;
            self.grow_at = now + BATCH_GROW_AFTER;
        } else if now >= self.grow_at {
            self.batch_limit = (self.batch_limit * 2).min(BATCH_DATAGRAM_MAX);
            self.grow_at = now + BATCH_GROW_AFTER;
        }
        if self.batch_limit != was {
            tracing::debug!(tag = %self.tag, bytes = self.batch_limit, resent, "batch datagram limit");
        }
    }

    /// Bytes of entries the current batch datagram has room for.
    fn budget(&self) -> usize {
        self.batch_limit.saturating_sub(batch_len(self.tag, 0))
    }

    /// Offers record `index` (the next we read) to its publisher, if every
    /// reliable node can take it now: its stream has sent before (so the
    /// node knows where to answer), has room for a batch datagram, and does
    /// not scale the tag down.
    fn offer(&mut self, ring: &Ring, dests: &[Dest], index: u64) -> Option<Offer> {
        let mut offered = Vec::new();
        for t in dests.iter().filter(|t| t.mode == Mode::Reliable) {
            let s = self.streams.get(&t.node)?;
            let s = lock(s);
            let w = &s.writer;
            let room = w.occupancy() < w.window()
                && w.held_messages() < self.max_unacked
                && w.held_bytes() + self.batch_limit <= MAX_UNACKED_BYTES;
            if t.every > 1 || w.next_seq() <= 1 || !room || offered.len() == TICKET_DESTS {
                return None;
            }
            offered.push((
                t.node,
                TicketDest {
                    addr: s.dest,
                    stream: s.id,
                    seq: w.next_seq(),
                },
            ));
        }
        let ds: Vec<TicketDest> = offered.iter().map(|(_, d)| *d).collect();
        ring.ticket()
            .open(index, self.batch_limit, &ds)
            .then_some(Offer {
                index,
                max_len: self.batch_limit,
                dests: offered,
            })
    }

    /// The cursor moved to `position` past lost records. If the record our
    /// publisher sent was among them, the sequence numbers it used cannot be
    /// given to another datagram: its streams start afresh (the loss is
    /// counted already).
    fn passed(&mut self, position: u64) {
        if let Some((o, _)) = self.direct.take_if(|(o, _)| o.index < position) {
            self.restart(o);
        }
    }

    /// Starts afresh the streams of an offer whose record we cannot put in
    /// their windows (lost from the ring, or unreadable): the numbers its
    /// publisher may have used must not go to another datagram.
    fn restart(&mut self, o: Offer) {
        for (node, td) in o.dests {
            if self
                .streams
                .get(&node)
                .is_some_and(|s| lock(s).id == td.stream)
            {
                if let Some(s) = self.streams.remove(&node) {
                    self.d.drop_stream(lock(&s).id);
                }
            }
        }
    }

    /// The record our publisher sent (`Sent`) or may have sent (`Abandoned`)
    /// to the reliable nodes of `offer`: it goes into each of their windows
    /// as the batch of one the publisher was told to send, with the same
    /// number, even if the node no longer wants it (the number is used);
    /// after an abandoned claim we send that datagram too (a copy the
    /// publisher did send is a duplicate the reader drops). Other nodes get
    /// the record as usual, alone. A record too large for the offer cannot
    /// have been sent by an honest publisher: it is sent as usual.
    fn take_direct(
        &mut self,
        dests: &[Dest],
        me: NodeAddr,
        header: &FrameHeader,
        message: &[u8],
        offer: Offer,
        closed: Closed,
    ) {
        let len = batch_len(self.tag, BATCH_ENTRY_OVERHEAD + message.len());
        if len > offer.max_len || header.flags & FLAG_BLOB != 0 {
            self.take(dests, me, header, message);
            return;
        }
        self.flush(dests);
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        push_batch_entry(&mut entries, header, message);
        let mut skip = self.left_out(dests, me, header);
        let now = Instant::now();
        for (node, td) in &offer.dests {
            let Some(s) = self.streams.get(node) else {
                continue;
            };
            let mut s = lock(s);
            if s.id != td.stream || s.writer.next_seq() != td.seq {
                continue;
            }
            let (id, dest) = (s.id, s.dest);
            let batch = BatchRef {
                seq: 0,
                flags: FLAG_RELIABLE,
                count: 1,
                tag: std::borrow::Cow::Borrowed(self.tag),
                entries: &entries,
            };
            let kept = s
                .writer
                .send_counted(now, 1, |seq, o| BatchRef { seq, ..batch }.encode(id, o));
            if let Ok((_, bytes)) = kept {
                if closed == Closed::Abandoned {
                    let _ = self.d.sock.send_to(bytes, dest);
                }
                self.shared
                    .stats
                    .direct_sent
                    .fetch_add(1, Ordering::Relaxed);
                // (Once: `skip.len()` below counts the nodes left out.)
                if !skip.contains(node) {
                    skip.push(*node);
                }
            }
        }
        if skip.len() < dests.len() {
            self.emit(
                dests,
                &skip,
                OutRef::Batch {
                    count: 1,
                    entries: &entries,
                },
            );
        }
        self.skip = skip;
        entries.clear();
        self.entries = entries;
    }

    /// The nodes that do not take this sample (scaling, or a relayed sample
    /// of their own), in the reused `skip` buffer (hand it back after use).
    fn left_out(&mut self, dests: &[Dest], me: NodeAddr, header: &FrameHeader) -> Vec<NodeAddr> {
        let (seq, origin) = (header.seq.0, header.sender.node);
        let mut skip = std::mem::take(&mut self.skip);
        skip.clear();
        skip.extend(
            dests
                .iter()
                .filter(|t| !t.takes(me, origin, seq))
                .map(|t| t.node),
        );
        skip
    }

    /// Sends held items in order; true when none is left.
    fn retry(&mut self, dests: &[Dest]) -> bool {
        while let Some(mut p) = self.pending.pop_front() {
            if !self.send_reliable(dests, p.out.as_ref(), &mut p.done) {
                self.pending.push_front(p);
                return false;
            }
        }
        true
    }

    /// One message read from the ring: into the batch, or (too large for a
    /// datagram) sent as fragments after the batch. A sample some nodes do
    /// not take (temporal scaling by this proxy, or a relayed sample their
    /// own node published) goes alone to those that do; one no node takes is
    /// not sent.
    fn take(&mut self, dests: &[Dest], me: NodeAddr, header: &FrameHeader, message: &[u8]) {
        let (seq, origin) = (header.seq.0, header.sender.node);
        if dests.iter().any(|t| !t.takes(me, origin, seq)) {
            let skip = self.left_out(dests, me, header);
            let scaled = dests
                .iter()
                .filter(|t| t.carries(me, origin) && !t.takes(me, origin, seq))
                .count();
            self.shared
                .stats
                .scaled_out
                .fetch_add(scaled as u64, Ordering::Relaxed);
            if skip.len() < dests.len() {
                self.flush(dests);
                self.emit(dests, &skip, OutRef::Message { header, message });
            }
            self.skip = skip;
            return;
        }
        let need = BATCH_ENTRY_OVERHEAD + message.len();
        let budget = self.budget();
        if need <= budget {
            if self.entries.len() + need > budget || self.count == u16::MAX {
                self.flush(dests);
            }
            push_batch_entry(&mut self.entries, header, message);
            self.count += 1;
            return;
        }
        self.flush(dests);
        self.emit(dests, &[], OutRef::Message { header, message });
    }

    /// Sends the batch being filled, if any.
    fn flush(&mut self, dests: &[Dest]) {
        if self.count == 0 {
            return;
        }
        let entries = std::mem::take(&mut self.entries);
        let count = std::mem::replace(&mut self.count, 0);
        self.emit(
            dests,
            &[],
            OutRef::Batch {
                count,
                entries: &entries,
            },
        );
        self.entries = entries;
        self.entries.clear();
        // A publisher that never lets the ring run dry keeps us in the read
        // loop: the limit must still follow the link between batches.
        self.adapt_batch();
    }

    /// Sends to every node but those in `skip`: best-effort ones at once,
    /// reliable ones in order after anything held (held too if a window is
    /// full).
    fn emit(&mut self, dests: &[Dest], skip: &[NodeAddr], out: OutRef<'_>) {
        let sends = |t: &&Dest| !skip.contains(&t.node);
        for t in dests
            .iter()
            .filter(sends)
            .filter(|t| t.mode == Mode::BestEffort)
        {
            let s = self.best.entry(t.node).or_insert_with(|| BestEffortOut {
                id: random_id(),
                dest: t.addr,
                next_seq: 1,
            });
            let (d, id, dest) = (self.d, s.id, s.dest);
            encode_out(self.tag, id, &mut s.next_seq, out, &mut self.buf, |b| {
                let _ = d.sock.send_to(b, dest);
                true
            });
        }
        if let (true, Some((m, port))) = (
            dests
                .iter()
                .filter(sends)
                .any(|t| t.mode == Mode::Multicast),
            &self.d.msock,
        ) {
            let s = self.mcast.get_or_insert_with(|| BestEffortOut {
                id: random_id(),
                dest: SocketAddr::from((tag_group(self.tag), *port)),
                next_seq: 1,
            });
            let (stats, id, dest) = (&self.shared.stats, s.id, s.dest);
            encode_out(self.tag, id, &mut s.next_seq, out, &mut self.buf, |b| {
                if m.send_to(b, dest).is_ok() {
                    stats.multicast_sent.fetch_add(1, Ordering::Relaxed);
                }
                true
            });
        }
        for t in dests.iter().filter(sends).filter(|t| t.mode == Mode::Tcp) {
            let s = self.tcp.entry(t.node).or_insert_with(|| TcpOut {
                dest: t.addr,
                conn: None,
                retry_at: Instant::now(),
                next_seq: 1,
            });
            // A stalled write waits as long as the node is still a
            // destination (the lease removes a dead one) and we run.
            let (route, shared, node) = (self.route, self.shared, t.node);
            let wanted = || {
                !route.stop.load(Ordering::Acquire)
                    && !shared.is_stopping()
                    && lock(&route.dests)
                        .iter()
                        .any(|t| t.node == node && t.mode == Mode::Tcp)
            };
            if !s.send(self.tag, out, &mut self.buf, wanted) {
                self.shared
                    .stats
                    .forward_dropped
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        // Reliable nodes skipped count as done: a held item is retried with
        // the whole list.
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        done.extend_from_slice(skip);
        if self.pending.is_empty() && self.send_reliable(dests, out, &mut done) {
            self.done = done;
            return;
        }
        let out = match out {
            OutRef::Message { header, message } => Outgoing::Message {
                header: *header,
                message: message.to_vec(),
            },
            OutRef::Batch { count, entries } => Outgoing::Batch {
                count,
                entries: entries.to_vec(),
            },
        };
        self.pending.push_back(Pending { out, done });
    }

    /// Sends to every reliable node not yet in `done`; true when all have it.
    fn send_reliable(&mut self, dests: &[Dest], out: OutRef<'_>, done: &mut Vec<NodeAddr>) -> bool {
        let mut all = true;
        for t in dests.iter().filter(|t| t.mode == Mode::Reliable) {
            if done.contains(&t.node) {
                continue;
            }
            let d = self.d;
            let s = self
                .streams
                .entry(t.node)
                .or_insert_with(|| d.stream_to(self.tag, t.addr));
            if send_on_stream(self.shared, self.d, s, self.tag, out, self.max_unacked) {
                done.push(t.node);
            } else {
                all = false;
            }
        }
        all
    }
}

/// Sends on a reliable stream. Returns false, having sent nothing, when the
/// window lacks room for all its datagrams (the caller retries later); a
/// message with more fragments than the whole window is sent fragment by
/// fragment, waiting for room (up to `WINDOW_WAIT` per fragment).
fn send_on_stream(
    shared: &Shared,
    d: &Delivery,
    stream: &Mutex<OutStream>,
    tag: &TagName,
    out: OutRef<'_>,
    max_unacked: usize,
) -> bool {
    let (header, message) = match out {
        OutRef::Batch { count, entries } => {
            let mut s = lock(stream);
            // (A batch larger than either bound goes once the window is empty.)
            let busy = s.writer.occupancy() > 0;
            if busy
                && (s.writer.held_bytes() + entries.len() > MAX_UNACKED_BYTES
                    || s.writer.held_messages() + usize::from(count) > max_unacked)
            {
                return false;
            }
            let (id, dest) = (s.id, s.dest);
            let batch = BatchRef {
                seq: 0,
                flags: FLAG_RELIABLE,
                count,
                tag: std::borrow::Cow::Borrowed(tag),
                entries,
            };
            let sent = s
                .writer
                .send_counted(Instant::now(), usize::from(count), |seq, o| {
                    BatchRef {
                        seq,
                        ..batch.clone()
                    }
                    .encode(id, o)
                });
            return match sent {
                Ok((_, bytes)) => {
                    let _ = d.sock.send_to(bytes, dest);
                    true
                }
                Err(_) => false,
            };
        }
        OutRef::Message { header, message } => (header, message),
    };
    let max = max_fragment_payload(tag, DATAGRAM);
    let n = fragment_count(message.len(), max);
    let Ok(count) = u16::try_from(n) else {
        shared.stats.forward_dropped.fetch_add(1, Ordering::Relaxed);
        return true;
    };
    {
        let s = lock(stream);
        let free = s.writer.window() - s.writer.occupancy().min(s.writer.window());
        if free < n && n <= s.writer.window() {
            return false;
        }
        if s.writer.held_bytes() + message.len() > MAX_UNACKED_BYTES
            && message.len() <= MAX_UNACKED_BYTES
        {
            return false;
        }
    }
    let mut h = *header;
    h.flags &= !FLAG_BLOB;
    for (i, range) in fragments(message.len(), max).enumerate() {
        let deadline = Instant::now() + WINDOW_WAIT;
        loop {
            let mut s = lock(stream);
            let (id, dest) = (s.id, s.dest);
            let data = DataRef {
                seq: 0,
                flags: FLAG_RELIABLE,
                frag: i as u16,
                frags: count,
                msg_len: message.len() as u32,
                header: h,
                tag: std::borrow::Cow::Borrowed(tag),
                payload: &message[range.clone()],
            };
            let sent = s.writer.send(Instant::now(), |seq, out| {
                DataRef {
                    seq,
                    ..data.clone()
                }
                .encode(id, out)
            });
            match sent {
                Ok((_, bytes)) => {
                    let _ = d.sock.send_to(bytes, dest);
                    break;
                }
                Err(_) if Instant::now() < deadline => {
                    drop(s);
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(_) => {
                    shared.stats.forward_dropped.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
            }
        }
    }
    true
}

/// Encodes `out` for a stream without a window (best-effort datagrams, TCP
/// frames): a batch as one datagram, a message as fragments, numbered from
/// `next_seq`; `emit` takes each encoding in turn and says whether to go on.
fn encode_out(
    tag: &TagName,
    id: u64,
    next_seq: &mut u64,
    out: OutRef<'_>,
    buf: &mut Vec<u8>,
    mut emit: impl FnMut(&[u8]) -> bool,
) -> bool {
    match out {
        OutRef::Batch { count, entries } => {
            buf.clear();
            BatchRef {
                seq: *next_seq,
                flags: 0,
                count,
                tag: std::borrow::Cow::Borrowed(tag),
                entries,
            }
            .encode(id, buf);
            *next_seq += 1;
            emit(buf)
        }
        OutRef::Message { header, message } => {
            let max = max_fragment_payload(tag, DATAGRAM);
            let Ok(count) = u16::try_from(fragment_count(message.len(), max)) else {
                return false;
            };
            let mut h = *header;
            h.flags &= !FLAG_BLOB;
            for (i, range) in fragments(message.len(), max).enumerate() {
                buf.clear();
                DataRef {
                    seq: *next_seq,
                    flags: 0,
                    frag: i as u16,
                    frags: count,
                    msg_len: message.len() as u32,
                    header: h,
                    tag: std::borrow::Cow::Borrowed(tag),
                    payload: &message[range],
                }
                .encode(id, buf);
                *next_seq += 1;
                if !emit(buf) {
                    return false;
                }
            }
            true
        }
    }
}

/// The TCP carrier to one node: frames of a u32 LE length and a datagram
/// (as best-effort ones, but TCP makes them reliable and ordered). A write
/// blocks while the receiver is slow, which stops the forwarder, fills the
/// ring and holds the publisher back through the gate, like a full window.
struct TcpOut {
    dest: SocketAddr,
    conn: Option<std::net::TcpStream>,
    /// No connection attempt before this (after a failure).
    retry_at: Instant,
    next_seq: u64,
}

/// How often a stalled TCP write checks whether its node is still wanted.
const TCP_WRITE_POLL: Duration = Duration::from_millis(100);

impl TcpOut {
    /// Sends `out`; false if it was lost (no connection, it broke, or the
    /// node stopped being `wanted` while a write was stalled). A stall,
    /// however long (TCP backing off on a lossy link), loses nothing.
    fn send(
        &mut self,
        tag: &TagName,
        out: OutRef<'_>,
        buf: &mut Vec<u8>,
        wanted: impl Fn() -> bool,
    ) -> bool {
        if self.conn.is_none() {
            if Instant::now() < self.retry_at {
                return false;
            }
            match std::net::TcpStream::connect_timeout(&self.dest, Duration::from_secs(1)) {
                Ok(c) => {
                    let _ = tagwire_net::tune_link(&c);
                    let _ = c.set_write_timeout(Some(TCP_WRITE_POLL));
                    self.conn = Some(c);
                }
                Err(e) => {
                    tracing::debug!(dest = %self.dest, error = %e, "TCP data connection failed");
                    self.retry_at = Instant::now() + Duration::from_millis(500);
                    return false;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let sent = encode_out(tag, 1, &mut self.next_seq, out, buf, |b| {
            let len = (b.len() as u32).to_le_bytes();
            write_fully(conn, &len, &wanted)
                .and_then(|()| write_fully(conn, b, &wanted))
                .is_ok()
        });
        if !sent {
            // A frame may be half written: this connection is unusable.
            self.conn = None;
        }
        sent
    }
}

/// Writes all of `bytes`, resuming after each write timeout while `wanted`.
fn write_fully(
    conn: &mut std::net::TcpStream,
    mut bytes: &[u8],
    wanted: &impl Fn() -> bool,
) -> std::io::Result<()> {
    use std::io::{ErrorKind, Write};
    while !bytes.is_empty() {
        match conn.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !wanted() {
                    return Err(e);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(crate) fn read_blob(
    shared: &Shared,
    tag: &TagName,
    body: &[u8],
    out: &mut Vec<u8>,
) -> Option<()> {
    let r = BlobRef::parse(body).ok()?;
    let fd = {
        let st = shared.lock();
        let e = st.table.entry(tag)?;
        let (fd, _) = st.blobs.get(&e.id)?.get(r.blob_id)?;
        fd.try_clone().ok()?
    };
    let len = usize::try_from(r.len).ok()?;
    out.clear();
    out.resize(len, 0);
    let mut done = 0;
    while done < len {
        let n = rustix::io::pread(&fd, &mut out[done..], done as u64).ok()?;
        if n == 0 {
            return None;
        }
        done += n;
    }
    Some(())
}
