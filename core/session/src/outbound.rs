//! The outbound half of a [`Session`]: per tag, the records this node
//! sends to other nodes.
//!
//! ```text
//! handle_record ─▶ filter (scaling, relay) ─▶ batch (≤ batch_limit) ─┐
//!                      │ too large for a batch: alone, as fragments  │ flush
//!                      ▼                                             ▼
//!            best effort / multicast / TCP: numbered, out at once
//!            reliable: pending (in order) ─▶ per node Writer ─▶ Transmit
//!                         ▲ room: window, cwnd, unacked bounds, credit
//!                         └── AckNack (credit) from handle_datagram
//! ```
//!
//! While anything waits in `pending` the tag takes no new record
//! ([`Held`]): at most a batch and a message wait here, everything else in
//! the caller's ring. Batches shrink to one packet after a retransmission
//! and double after each clean stretch, up to `batch_max` (fewer system
//! calls per message on a clean link; whole packets through a short router
//! queue after a loss).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use tagwire_reliable::pacer::{Pacer, PacerConfig};
use tagwire_reliable::{fragment_count, Transmit as WriterTransmit, Writer};
use tagwire_wire::datagram::{
    batch_len, max_fragment_payload, push_batch_entry, tag_group, AckNack, Heartbeat,
    BATCH_ENTRY_OVERHEAD,
};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, Priority, TagName};

use crate::{
    Carrier, Class, Dest, Held, Mode, Offer, SendEvent as Event, SendSession, StreamStats, Transmit,
};

mod item;
mod pacing;
mod tally;
mod timers;
mod window;
pub(crate) use item::{batch_repr, clean, Outgoing};
use item::{message, Payload, Piece};
pub use pacing::{PACED_LEAD, PACED_LEAD_MIN};
use tally::ClassTally;
pub(crate) use timers::{StreamTimer, StreamTimers};
use window::{send_pending, Sending, Unacked};

/// One tag's outbound state.
#[derive(Debug)]
pub(crate) struct Outbound {
    pub(crate) dests: Vec<Dest>,
    pub(crate) reliable: BTreeMap<NodeAddr, RelStream>,
    best: BTreeMap<NodeAddr, Numbered>,
    tcp: BTreeMap<NodeAddr, Numbered>,
    mcast: Option<Numbered>,
    /// In order; while not empty nothing new is taken.
    pub(crate) pending: VecDeque<Pending>,
    /// The batch being filled.
    entries: Vec<u8>,
    pub(crate) count: u16,
    /// Bytes a batch datagram may have now.
    pub(crate) batch_limit: usize,
    /// Retransmissions seen so far, and when the limit may next grow.
    resent: u64,
    grow_at: Option<Instant>,
    /// The last send ticket offered, until its record comes.
    pub(crate) offer: Option<Offer>,
    /// Progress lists of items sent everywhere, for the next items (at
    /// most [`SPARE_SENT`]).
    spare_sent: Vec<Vec<(NodeAddr, u64, usize)>>,
    /// Its reliable streams' pacing (`None`: unpaced).
    pacing: Option<PacerConfig>,
    /// Mean bytes of the records handed in (a moving average), for
    /// [`SendSession::paced_lead`].
    record_bytes: f64,
}

/// Most progress lists an [`Outbound`] keeps for reuse.
const SPARE_SENT: usize = 64;

/// A reliable stream to one node.
#[derive(Debug)]
pub(crate) struct RelStream {
    pub(crate) id: u64,
    pub(crate) addr: SocketAddr,
    pub(crate) writer: Writer,
    /// The receiver's room after what it acknowledged (`None`: no limit).
    pub(crate) credit: Option<u32>,
    /// Its own timers (beside the writer's): the credit probe and the
    /// pace's next release.
    pub(crate) timers: StreamTimers,
    /// Its pacing controller (`None`: unpaced).
    pub(crate) pacer: Option<Pacer>,
    /// Its destination's packet class.
    pub(crate) priority: Priority,
    /// What it sent in each class it had.
    pub(crate) tally: ClassTally,
    /// How late its paced datagrams go, for [`SendSession::paced_lead`].
    pub(crate) late: pacing::Lateness,
}

/// A stream without a window: numbers only (best effort, multicast, TCP).
#[derive(Debug)]
struct Numbered {
    id: u64,
    addr: SocketAddr,
    next_seq: u64,
    priority: Priority,
}

/// An item not yet in every reliable window.
#[derive(Debug)]
pub(crate) struct Pending {
    out: Outgoing,
    /// Datagrams it takes.
    datagrams: usize,
    /// Nodes that do not take it.
    skip: Vec<NodeAddr>,
    /// Datagrams sent so far per (node, stream id).
    sent: Vec<(NodeAddr, u64, usize)>,
}

impl Outbound {
    fn new(batch_min: usize, pacing: Option<PacerConfig>) -> Self {
        Self {
            dests: Vec::new(),
            reliable: BTreeMap::new(),
            best: BTreeMap::new(),
            tcp: BTreeMap::new(),
            mcast: None,
            pending: VecDeque::new(),
            entries: Vec::new(),
            count: 0,
            batch_limit: batch_min,
            resent: 0,
            grow_at: None,
            offer: None,
            spare_sent: Vec::new(),
            pacing,
            record_bytes: 0.0,
        }
    }

    /// Numbers an item of `datagrams` datagrams on every stream without a
    /// window that takes it (best effort, TCP, multicast), opening the
    /// streams it needs: each stream's id, address, the item's first seq
    /// and the carrier.
    fn number(
        &mut self,
        tag: &TagName,
        skip: &[NodeAddr],
        datagrams: usize,
        ids: &mut crate::StreamIds,
        mcast_port: Option<u16>,
    ) -> Vec<(u64, SocketAddr, u64, Carrier, Priority)> {
        let mut numbered = Vec::new();
        // (By index, not collected: no allocation per item.)
        for k in 0..self.dests.len() {
            let t = self.dests[k];
            if skip.contains(&t.node) {
                continue;
            }
            let (map, carrier) = match t.mode {
                Mode::BestEffort => (&mut self.best, Carrier::Udp),
                Mode::Tcp => (&mut self.tcp, Carrier::Tcp),
                Mode::Reliable | Mode::Multicast => continue,
            };
            let s = map.entry(t.node).or_insert_with(|| Numbered {
                // TCP streams need no id (one connection per node).
                id: if carrier == Carrier::Tcp {
                    1
                } else {
                    ids.next()
                },
                addr: t.addr,
                next_seq: 1,
                priority: t.priority,
            });
            numbered.push((s.id, s.addr, s.next_seq, carrier, s.priority));
            s.next_seq += datagrams as u64;
        }
        let multicast = self
            .dests
            .iter()
            .filter(|t| t.mode == Mode::Multicast && !skip.contains(&t.node))
            .map(|t| t.priority)
            .reduce(crate::plan::highest);
        if let (Some(priority), Some(port)) = (multicast, mcast_port) {
            let s = self.mcast.get_or_insert_with(|| Numbered {
                id: ids.next(),
                addr: SocketAddr::from((tag_group(tag), port)),
                next_seq: 1,
                priority,
            });
            // (The group's class follows the highest of its nodes'.)
            s.priority = priority;
            numbered.push((s.id, s.addr, s.next_seq, Carrier::Multicast, s.priority));
            s.next_seq += datagrams as u64;
        }
        numbered
    }
}

impl SendSession {
    /// Sets where `tag`'s samples go from this node (an empty list ends
    /// them). Streams to nodes that left, or whose mode changed, end; items
    /// waiting only for them are done. A node whose address alone changed
    /// (its stream moved between its delivery manager and a sole
    /// receiving process, docs/design.md §6) keeps its streams and numbers:
    /// what its reliable stream holds unacknowledged goes again to the new
    /// address, whose session took the stream over
    /// ([`crate::ReceiveSession::import_inbound`]).
    pub fn set_routes(&mut self, now: Instant, tag: &TagName, dests: Vec<Dest>) {
        if dests.is_empty() {
            if let Some(o) = self.out.remove(tag) {
                for (node, s) in o.reliable {
                    self.close_stream(tag, node, s.id);
                }
            }
            return;
        }
        let (batch_min, pacing) = (self.config.batch.min, self.config.pacing);
        let o = self
            .out
            .entry(tag.clone())
            .or_insert_with(|| Outbound::new(batch_min, pacing));
        let addr_of = |mode: Mode, node: &NodeAddr| {
            dests
                .iter()
                .find(|t| t.mode == mode && t.node == *node)
                .map(|t| (t.addr, t.priority))
        };
        let mut closed = Vec::new();
        o.reliable.retain(|n, s| match addr_of(Mode::Reliable, n) {
            Some((addr, priority)) => {
                if priority != s.priority {
                    s.tally.change(s.priority, s.datagrams());
                    s.priority = priority;
                }
                if addr != s.addr {
                    s.addr = addr;
                    s.writer.retarget(now);
                    s.credit = None;
                    s.timers = StreamTimers::default();
                    // Another path: its estimates start again.
                    s.pacer = o.pacing.map(Pacer::new);
                    s.writer.set_paced(s.pacer.is_some());
                }
                true
            }
            None => {
                closed.push((*n, s.id));
                false
            }
        });
        o.best.retain(|n, s| match addr_of(Mode::BestEffort, n) {
            Some((addr, priority)) => {
                s.addr = addr;
                s.priority = priority;
                true
            }
            None => false,
        });
        // A TCP connection is to one address.
        o.tcp.retain(|n, s| match addr_of(Mode::Tcp, n) {
            Some((addr, priority)) if addr == s.addr => {
                s.priority = priority;
                true
            }
            _ => false,
        });
        if !dests.iter().any(|t| t.mode == Mode::Multicast) {
            o.mcast = None;
        }
        o.dests = dests;
        for (node, id) in closed {
            self.close_stream(tag, node, id);
        }
        // What waited for a node that left goes to the new ones now: no
        // timer of a closed stream would move it (found by the simulator:
        // a proxy's death left its publisher held for good).
        self.pump(now, tag);
    }

    /// Whether [`SendSession::handle_record`] takes a record of `tag` now.
    pub fn can_accept(&self, tag: &TagName) -> bool {
        self.out.get(tag).is_none_or(|o| o.pending.is_empty())
    }

    /// Whether `tag` has a reliable or TCP destination (whose back-pressure
    /// the caller must pass on to the publisher).
    pub fn holds_back(&self, tag: &TagName) -> bool {
        self.out
            .get(tag)
            .is_some_and(|o| o.dests.iter().any(|t| t.mode >= Mode::Reliable))
    }

    /// One record this node's ring holds (`header` as the publisher wrote
    /// it, `payload` the whole message): batched, or sent alone (as
    /// fragments) when larger than a batch. Best-effort, multicast and TCP
    /// destinations get it now; reliable ones in order, as their windows
    /// allow. [`Held`]: not taken (something still waits for a window).
    pub fn handle_record(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: &[u8],
    ) -> Result<(), Held> {
        self.record(now, tag, header, Payload::Slice(payload))
    }

    /// [`SendSession::handle_record`] with the payload in a buffer of the
    /// caller's (say, read from its ring straight into one from
    /// [`SendSession::buffer`]): a message sent alone (fragmented) keeps the
    /// buffer, not a copy; otherwise the buffer goes back to the spare
    /// ones.
    pub fn handle_record_buf(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: Vec<u8>,
    ) -> Result<(), Held> {
        self.record(now, tag, header, Payload::Buf(payload))
    }

    fn record(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: Payload<'_>,
    ) -> Result<(), Held> {
        let me = self.config.me;
        let Some(o) = self.out.get_mut(tag) else {
            payload.recycle(&mut self.spare);
            return Ok(());
        };
        if !o.pending.is_empty() {
            payload.recycle(&mut self.spare);
            return Err(Held);
        }
        o.offer = None;
        o.note_record(now, payload.as_slice().len());
        let (seq, origin) = (header.seq.0, header.sender.node);
        if !o.dests.iter().any(|t| t.forwards_from(me, origin)) {
            // Another node's sample, which it sent everywhere itself.
            payload.recycle(&mut self.spare);
            return Ok(());
        }
        self.adapt_batch(now, tag);
        let Some(o) = self.out.get_mut(tag) else {
            payload.recycle(&mut self.spare);
            return Ok(());
        };
        if o.dests.iter().any(|t| !t.forwards(me, origin, seq)) {
            self.record_alone(now, tag, header, payload);
            return Ok(());
        }
        self.record_batched(now, tag, header, payload);
        Ok(())
    }

    /// A record some destinations do not take (scaling, or relaying
    /// another node's sample): alone, to the nodes that take it.
    fn record_alone(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: Payload<'_>,
    ) {
        let me = self.config.me;
        let (seq, origin) = (header.seq.0, header.sender.node);
        let Some(o) = self.out.get(tag) else {
            payload.recycle(&mut self.spare);
            return;
        };
        let skip = left_out(&o.dests, me, header);
        let scaled = o
            .dests
            .iter()
            .filter(|t| t.forwards_from(me, origin) && !t.forwards(me, origin, seq))
            .count() as u64;
        if scaled > 0 {
            self.events.push_back(Event::ScaledOut {
                tag: tag.clone(),
                count: scaled,
            });
        }
        if skip.len() < self.out.get(tag).map_or(0, |o| o.dests.len()) {
            self.flush(now, tag);
            let m = message(header, payload, &mut self.spare);
            self.emit(now, tag, skip, m);
        } else {
            payload.recycle(&mut self.spare);
        }
    }

    /// A record every destination takes: into the batch being filled if
    /// it fits a batch, else alone (as fragments when large).
    fn record_batched(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: Payload<'_>,
    ) {
        let Some(o) = self.out.get_mut(tag) else {
            payload.recycle(&mut self.spare);
            return;
        };
        let need = BATCH_ENTRY_OVERHEAD + payload.len();
        let budget = o.batch_limit.saturating_sub(batch_len(tag, 0));
        // No batch carries more messages than a receiver's credit: it could
        // only go whole into an empty window, past the credit.
        let most = o
            .reliable
            .values()
            .filter_map(|s| s.credit)
            .min()
            .map_or(usize::from(u16::MAX), |c| {
                (c as usize).clamp(1, usize::from(u16::MAX))
            });
        if need <= budget {
            if o.entries.len() + need > budget || usize::from(o.count) >= most {
                self.flush(now, tag);
            }
            let Some(o) = self.out.get_mut(tag) else {
                payload.recycle(&mut self.spare);
                return;
            };
            if o.entries.is_empty() {
                // A buffer given back, or one allocation per batch, not
                // one per doubling.
                if o.entries.capacity() == 0 {
                    if let Some(mut b) = self.spare.pop() {
                        b.clear();
                        o.entries = b;
                    }
                }
                o.entries.reserve(budget);
            }
            push_batch_entry(&mut o.entries, &clean(header), payload.as_slice());
            o.count += 1;
            payload.recycle(&mut self.spare);
            return;
        }
        self.flush(now, tag);
        let m = message(header, payload, &mut self.spare);
        self.emit(now, tag, Vec::new(), m);
    }

    /// Sends what `tag` has batched (call when nothing more is ready).
    pub fn flush(&mut self, now: Instant, tag: &TagName) {
        let Some(o) = self.out.get_mut(tag) else {
            return;
        };
        if o.count == 0 {
            return;
        }
        let count = std::mem::replace(&mut o.count, 0);
        let entries = std::mem::take(&mut o.entries);
        self.emit(now, tag, Vec::new(), Outgoing::Batch { count, entries });
        // A publisher that never lets the ring run dry keeps the caller
        // handing records in: the limit still follows the link.
        self.adapt_batch(now, tag);
    }

    /// Datagrams `tag`'s reliable streams sent again so far: a runtime
    /// that sends datagrams in runs shortens them after a retransmission,
    /// as the session shortens its batches when `batch_max` lets them grow
    /// past `batch_min`.
    pub fn retransmitted(&self, tag: &TagName) -> u64 {
        self.out.get(tag).map_or(0, |o| {
            o.reliable
                .values()
                .map(|s| s.writer.stats().retransmitted)
                .sum()
        })
    }

    /// Counters of every outbound reliable stream.
    pub fn stream_stats(&self) -> Vec<StreamStats> {
        let mut rows = Vec::new();
        for (tag, o) in &self.out {
            for (node, s) in &o.reliable {
                rows.push(StreamStats {
                    tag: tag.clone(),
                    node: *node,
                    addr: s.addr,
                    stream: s.id,
                    writer: s.writer.stats(),
                    unacked: s.writer.occupancy() as u64,
                    unacked_bytes: s.writer.held_bytes() as u64,
                    cwnd: s.writer.cwnd() as u64,
                    credit: s.credit,
                    pacing: s.pacer.as_ref().map(Pacer::stats),
                    priority: s.priority,
                    by_class: s.tally.totals(s.priority, s.datagrams()),
                });
            }
        }
        rows
    }

    /// An acknowledgement of stream `id`, decoded once by whoever received
    /// it (a [`crate::ReceiveSession`] returns the ones it is given): true if
    /// the stream is this session's. Frees its window, takes the
    /// receiver's credit and sends what now fits.
    pub fn handle_ack(&mut self, now: Instant, id: u64, a: &AckNack) -> bool {
        let Some(tag) = self.owned.get(&id).cloned() else {
            return false;
        };
        let Some(o) = self.out.get_mut(&tag) else {
            return false;
        };
        let Some(s) = o.reliable.values_mut().find(|s| s.id == id) else {
            return false;
        };
        // (A receiver without room names no missing datagrams; the writer
        // resends what it names, and while the credit is 0 its timer only
        // asks.)
        let report = s
            .writer
            .handle_acknack(now, a.ack_through, a.known_through, &a.missing);
        if let Some(p) = &mut s.pacer {
            // Held out of order is delivered: a hole does not hold back the
            // estimates of what went through with it, nor count as queue.
            p.on_sack(now, a.ack_through, a.known_through, &a.missing);
            p.on_ack(now, a.ack_through, s.writer.in_flight(), report.lost > 0);
        }
        s.writer.set_paused(a.credit == Some(0));
        s.credit = a.credit;
        if a.credit.is_none_or(|c| c > 0) {
            s.timers.stop(StreamTimer::Probe);
        }
        self.pump(now, &tag);
        true
    }

    /// Resends, heartbeats and credit probes due at `now`, one at a time.
    pub(crate) fn poll_outbound(&mut self, now: Instant) -> Option<Transmit> {
        for o in self.out.values_mut() {
            for s in o.reliable.values_mut() {
                if let Some(t) = s.writer.poll_transmit(now) {
                    let mut bytes = crate::spare_buffer(&mut self.spare);
                    let class = match t {
                        WriterTransmit::Data { bytes: b, .. } => {
                            bytes.extend_from_slice(b);
                            Class::Resend
                        }
                        WriterTransmit::Heartbeat { first, last } => {
                            Heartbeat { first, last }.encode(s.id, &mut bytes);
                            Class::Control
                        }
                    };
                    return Some(Transmit {
                        dest: s.addr,
                        carrier: Carrier::Udp,
                        class,
                        priority: s.priority,
                        bytes: bytes.into(),
                    });
                }
                if s.timers.is_due(StreamTimer::Probe, now) {
                    // Held back by the receiver's credit with nothing
                    // unacknowledged: no heartbeat runs, so ask.
                    s.timers.set(
                        StreamTimer::Probe,
                        now + self.config.writer.heartbeat_period,
                    );
                    let WriterTransmit::Heartbeat { first, last } = s.writer.heartbeat() else {
                        continue;
                    };
                    let mut bytes = crate::spare_buffer(&mut self.spare);
                    Heartbeat { first, last }.encode(s.id, &mut bytes);
                    return Some(Transmit {
                        dest: s.addr,
                        carrier: Carrier::Udp,
                        class: Class::Control,
                        priority: s.priority,
                        bytes: bytes.into(),
                    });
                }
            }
        }
        None
    }

    /// The earliest outbound timer.
    pub(crate) fn outbound_timeout(&self) -> Option<Instant> {
        self.out
            .values()
            .flat_map(|o| o.reliable.values())
            .flat_map(|s| [s.writer.poll_timeout(), s.timers.next()])
            .flatten()
            .min()
    }

    /// Moves every tag's waiting items on as far as the windows allow.
    pub(crate) fn pump_all(&mut self, now: Instant) {
        let tags: Vec<TagName> = self
            .out
            .iter()
            .filter(|(_, o)| !o.pending.is_empty())
            .map(|(t, _)| t.clone())
            .collect();
        for tag in tags {
            self.pump(now, &tag);
        }
    }

    /// Sends to every destination but those in `skip`: numbered ones at
    /// once, reliable ones in order after anything waiting.
    pub(crate) fn emit(&mut self, now: Instant, tag: &TagName, skip: Vec<NodeAddr>, out: Outgoing) {
        let max = max_fragment_payload(tag, self.config.datagram);
        let datagrams = match &out {
            Outgoing::Batch { .. } => 1,
            Outgoing::Message { message, .. } => fragment_count(message.len(), max),
        };
        if u16::try_from(datagrams).is_err() {
            self.events.push_back(Event::Dropped { tag: tag.clone() });
            return;
        }
        let mcast_port = self.config.multicast_port;
        let Some(o) = self.out.get_mut(tag) else {
            return;
        };
        let numbered = o.number(tag, &skip, datagrams, &mut self.ids, mcast_port);
        let reliable = o
            .dests
            .iter()
            .any(|t| t.mode == Mode::Reliable && !skip.contains(&t.node));
        for (id, addr, first, carrier, priority) in numbered {
            for index in 0..datagrams {
                let mut bytes = crate::spare_buffer(&mut self.spare);
                let piece = Piece {
                    tag,
                    out: &out,
                    index,
                    max,
                };
                piece.encode(id, first + index as u64, 0, &mut bytes);
                self.transmits.push_back(Transmit {
                    dest: addr,
                    carrier,
                    class: Class::Data,
                    priority,
                    bytes: bytes.into(),
                });
            }
        }
        let Some(o) = self.out.get_mut(tag) else {
            return;
        };
        if reliable {
            let sent = o.spare_sent.pop().unwrap_or_default();
            o.pending.push_back(Pending {
                out,
                datagrams,
                skip,
                sent,
            });
            self.pump(now, tag);
        } else {
            crate::keep_spare(&mut self.spare, out.into_bytes());
        }
    }

    /// Sends waiting items, in order, to their reliable nodes as far as
    /// each node's window, bounds and credit allow.
    pub(crate) fn pump(&mut self, now: Instant, tag: &TagName) {
        let bounds = Unacked {
            messages: self.config.max_unacked_messages,
            bytes: self.config.max_unacked_bytes,
        };
        let (datagram, period) = (self.config.datagram, self.config.writer.heartbeat_period);
        let max = max_fragment_payload(tag, datagram);
        let mut opened = Vec::new();
        while let Some(o) = self.out.get_mut(tag) {
            let Some(p) = o.pending.front_mut() else {
                break;
            };
            let mut cx = Sending {
                tag,
                now,
                max,
                bounds,
                probe_after: period,
                spare: &mut self.spare,
                transmits: &mut self.transmits,
            };
            let mut all = true;
            for t in o.dests.iter().filter(|t| t.mode == Mode::Reliable) {
                if p.skip.contains(&t.node) {
                    continue;
                }
                let s = o.reliable.entry(t.node).or_insert_with(|| {
                    let id = self.ids.next();
                    opened.push((t.node, id));
                    let mut writer = Writer::new(self.config.writer);
                    writer.set_paced(o.pacing.is_some());
                    RelStream {
                        id,
                        addr: t.addr,
                        writer,
                        credit: None,
                        timers: StreamTimers::default(),
                        pacer: o.pacing.map(Pacer::new),
                        priority: t.priority,
                        tally: ClassTally::default(),
                        late: pacing::Lateness::default(),
                    }
                });
                all &= send_pending(s, t.node, p, &mut cx);
            }
            if !all {
                break;
            }
            if let Some(p) = o.pending.pop_front() {
                crate::keep_spare(cx.spare, p.out.into_bytes());
                if o.spare_sent.len() < SPARE_SENT {
                    let mut sent = p.sent;
                    sent.clear();
                    o.spare_sent.push(sent);
                }
            }
        }
        for (node, id) in opened {
            self.owned.insert(id, tag.clone());
            self.events.push_back(Event::StreamOpened {
                tag: tag.clone(),
                node,
                stream: id,
            });
        }
    }

    /// One packet per batch after a retransmission; twice the size after
    /// each clean stretch (best-effort-only routes give no feedback: they
    /// stay at one packet).
    fn adapt_batch(&mut self, now: Instant, tag: &TagName) {
        let (min, max, after) = (
            self.config.batch.min,
            self.config.batch.max,
            self.config.batch.grow_after,
        );
        let Some(o) = self.out.get_mut(tag) else {
            return;
        };
        if o.reliable.is_empty() {
            o.batch_limit = min;
            o.grow_at = None;
            return;
        }
        let resent: u64 = o
            .reliable
            .values()
            .map(|s| s.writer.stats().retransmitted)
            .sum();
        let grow_at = *o.grow_at.get_or_insert(now + after);
        if resent != o.resent {
            o.resent = resent;
            o.batch_limit = min;
            o.grow_at = Some(now + after);
        } else if now >= grow_at {
            o.batch_limit = (o.batch_limit * 2).min(max).max(min);
            o.grow_at = Some(now + after);
        }
    }

    pub(crate) fn close_stream(&mut self, tag: &TagName, node: NodeAddr, id: u64) {
        self.owned.remove(&id);
        self.events.push_back(Event::StreamClosed {
            tag: tag.clone(),
            node,
            stream: id,
        });
    }
}

/// The nodes that do not take this sample (scaling, or a relayed sample
/// of their own).
pub(crate) fn left_out(dests: &[Dest], me: NodeAddr, header: &FrameHeader) -> Vec<NodeAddr> {
    let (seq, origin) = (header.seq.0, header.sender.node);
    dests
        .iter()
        .filter(|t| !t.forwards(me, origin, seq))
        .map(|t| t.node)
        .collect()
}
