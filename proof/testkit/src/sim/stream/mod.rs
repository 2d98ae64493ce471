//! `tagwire-reliable`'s streams as a [`SimNode`]: the daemon's data path
//! between nodes, without the daemon.
//!
//! A [`StreamNode`] holds one outbound stream per destination it publishes
//! to and one inbound stream per (sender, stream id) it hears from, as the
//! delivery role does (`runtime/daemon/src/delivery/mod.rs`):
//!
//! ```text
//!  publish(to, msg) ─► fragments() ─► DataRepr::encode ─► Writer::send ──► link
//!                       (u16 count)    (FLAG_RELIABLE)    (window; a message
//!                                                          waits for room, the
//!                                                          next one is HeldBack)
//!  link ─► Datagram::decode ─► Data ─► Reader::handle_data ─► Reassembler ─► DeliveryLog
//!                          │            (or BestEffort::handle_seq)
//!                          ├─► Heartbeat ─► Reader::handle_heartbeat (then poll_event)
//!                          └─► AckNack ───► Writer::handle_acknack
//!  timeouts ─► Writer::poll_transmit (resends, heartbeats)
//!              Reader::poll_transmit (AckNacks)
//! ```
//!
//! Every byte crosses the simulated link encoded, so the codecs see what a
//! socket would give them. Deliveries go to a [`DeliveryLog`] shared with
//! the test (and across restarts: it stands for what the application saw).

mod inbound;
mod outbound;

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Instant;

use tagwire_reliable::{
    BestEffortStats, ReaderConfig, ReaderStats, ReassemblerConfig, ReassemblerStats, Writer,
    WriterConfig,
};
use tagwire_wire::datagram::{Body, Datagram};
use tagwire_wire::TagName;
use thiserror::Error;

use super::node::{Addr, NodeInit, Outgoing, SimNode};
use super::rng::SimRng;
use inbound::InStream;
use outbound::OutStream;

/// How a fresh inbound stream picks its first seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderStart {
    /// `Reader::with_start(config, 1)` / `BestEffort::with_start(1)`: the
    /// stream is wanted from its creation, so a lost first datagram is asked
    /// for (reliable) or counted as lost (best effort). What the daemon's
    /// delivery role does for reliable streams, restarted or not.
    FirstSeq,
    /// `Reader::new` / `BestEffort::new`: a late joiner, starting at the
    /// first datagram (or heartbeat) it sees.
    LateJoin,
}

/// Settings of a [`StreamNode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    /// The tag every message is published on.
    pub tag: TagName,
    /// Largest datagram, in bytes; messages are cut to fit.
    pub datagram_size: usize,
    /// Reliable streams (writer/reader) or best effort.
    pub reliable: bool,
    /// Settings of each outbound stream's writer.
    pub writer: WriterConfig,
    /// Settings of each inbound stream's reader.
    pub reader: ReaderConfig,
    /// Settings of each inbound stream's reassembler.
    pub reassembler: ReassemblerConfig,
    /// How new inbound reliable streams start.
    pub reader_start: ReaderStart,
}

impl StreamConfig {
    /// Reliable streams with the cores' defaults on `tag`, 1400-byte
    /// datagrams, readers starting at seq 1.
    pub fn reliable(tag: TagName) -> Self {
        Self {
            tag,
            datagram_size: 1400,
            reliable: true,
            writer: WriterConfig::default(),
            reader: ReaderConfig::default(),
            reassembler: ReassemblerConfig::default(),
            reader_start: ReaderStart::FirstSeq,
        }
    }

    /// [`StreamConfig::reliable`], but best effort.
    pub fn best_effort(tag: TagName) -> Self {
        Self {
            reliable: false,
            ..Self::reliable(tag)
        }
    }
}

/// [`StreamNode::publish`] refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PublishError {
    /// The previous message to `to` still waits for window space: the
    /// application is held back and tries again later.
    #[error("held back: the stream to {to} is full")]
    HeldBack {
        /// The destination.
        to: Addr,
    },
    /// The message needs more than `u16::MAX` fragments.
    #[error("a {len}-byte message needs too many fragments")]
    TooLarge {
        /// Its length.
        len: usize,
    },
    /// The datagram size leaves no room for payload.
    #[error("datagrams of this size carry no payload")]
    NoRoom,
}

/// One message handed to the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// When.
    pub at: Instant,
    /// The receiving node.
    pub receiver: Addr,
    /// The receiving node's incarnation.
    pub incarnation: u32,
    /// The sending node.
    pub from: Addr,
    /// The stream id.
    pub stream: u64,
    /// The sender's message number on that stream (from 1; the frame
    /// header's publisher seq).
    pub msg: u64,
    /// Stream seq of the message's first fragment.
    pub first_seq: u64,
    /// Payload length.
    pub len: usize,
    /// [`checksum`](super::checksum) of the payload.
    pub checksum: u64,
}

/// The messages delivered, shared between the test and the nodes (and kept
/// across a node's restarts).
#[derive(Debug, Clone, Default)]
pub struct DeliveryLog(Rc<RefCell<Vec<Delivery>>>);

impl DeliveryLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a delivery.
    pub fn push(&self, d: Delivery) {
        self.0.borrow_mut().push(d);
    }

    /// Deliveries so far.
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }

    /// Whether nothing was delivered.
    pub fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }

    /// A copy of the deliveries so far.
    pub fn snapshot(&self) -> Vec<Delivery> {
        self.0.borrow().clone()
    }
}

/// Counters of a [`StreamNode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamStats {
    /// Messages accepted by [`StreamNode::publish`].
    pub published: u64,
    /// Publish attempts refused with [`PublishError::HeldBack`].
    pub held_back: u64,
    /// Datagrams sent for the first time (fragments).
    pub datagrams: u64,
    /// Datagrams that did not decode.
    pub decode_errors: u64,
    /// AckNacks for a stream this node does not have.
    pub unknown_stream: u64,
    /// Datagrams of a kind or reliability this node does not handle.
    pub ignored: u64,
}

/// A node running `tagwire-reliable` streams (see the module doc).
#[derive(Debug)]
pub struct StreamNode {
    addr: Addr,
    incarnation: u32,
    config: StreamConfig,
    ids: SimRng,
    out: BTreeMap<Addr, OutStream>,
    inbound: BTreeMap<(Addr, u64), InStream>,
    /// The application's messages not yet accepted, retried on every event.
    outbox: VecDeque<(Addr, Vec<u8>)>,
    transmits: VecDeque<Outgoing>,
    log: DeliveryLog,
    stats: StreamStats,
}

impl StreamNode {
    /// A fresh node (call from the simulator's factory).
    pub fn new(init: &NodeInit, config: StreamConfig, log: DeliveryLog) -> Self {
        Self {
            addr: init.addr,
            incarnation: init.incarnation,
            config,
            ids: SimRng::new(init.seed),
            out: BTreeMap::new(),
            inbound: BTreeMap::new(),
            outbox: VecDeque::new(),
            transmits: VecDeque::new(),
            log,
            stats: StreamStats::default(),
        }
    }

    /// Publishes `payload` to `to` now; returns its message number.
    pub fn publish(&mut self, now: Instant, to: Addr, payload: &[u8]) -> Result<u64, PublishError> {
        let ids = &mut self.ids;
        let config = &self.config;
        let stream = self
            .out
            .entry(to)
            .or_insert_with(|| OutStream::new(ids.next_u64(), config));
        match stream.publish(now, to, payload, config, &mut self.transmits) {
            Ok((msg, datagrams)) => {
                self.stats.published += 1;
                self.stats.datagrams += datagrams;
                Ok(msg)
            }
            Err(e) => {
                if matches!(e, PublishError::HeldBack { .. }) {
                    self.stats.held_back += 1;
                }
                Err(e)
            }
        }
    }

    /// Queues `payload` for `to`: the application publishes it now if it
    /// can, else retries on every later event until accepted, in queue
    /// order.
    pub fn enqueue(&mut self, now: Instant, to: Addr, payload: Vec<u8>) {
        self.outbox.push_back((to, payload));
        self.service(now);
    }

    /// Messages queued and not yet accepted.
    pub fn queued(&self) -> usize {
        self.outbox.len()
    }

    /// Whether every message was accepted and every datagram acknowledged
    /// (best effort: sent).
    pub fn is_idle(&self) -> bool {
        self.outbox.is_empty() && self.out.values().all(OutStream::is_idle)
    }

    /// The writer of the stream to `to`, if reliable and created.
    pub fn writer(&self, to: Addr) -> Option<&Writer> {
        self.out.get(&to)?.writer()
    }

    /// Reader counters of the (first) reliable stream from `from`.
    pub fn reader_stats(&self, from: Addr) -> Option<ReaderStats> {
        self.streams_from(from).find_map(InStream::reader_stats)
    }

    /// Best-effort counters of the (first) best-effort stream from `from`.
    pub fn best_effort_stats(&self, from: Addr) -> Option<BestEffortStats> {
        self.streams_from(from)
            .find_map(InStream::best_effort_stats)
    }

    /// Reassembler counters of the (first) stream from `from`.
    pub fn reassembler_stats(&self, from: Addr) -> Option<ReassemblerStats> {
        self.streams_from(from)
            .next()
            .map(InStream::reassembler_stats)
    }

    /// The counters.
    pub fn stats(&self) -> StreamStats {
        self.stats
    }

    fn streams_from(&self, from: Addr) -> impl Iterator<Item = &InStream> {
        self.inbound
            .range((from, 0)..=(from, u64::MAX))
            .map(|(_, s)| s)
    }

    /// Everything that may have become due: resends, heartbeats, pending
    /// fragments, the application's queue, AckNacks.
    fn service(&mut self, now: Instant) {
        for (&to, s) in &mut self.out {
            self.stats.datagrams += s.service(now, to, &self.config, &mut self.transmits);
        }
        while let Some((to, payload)) = self.outbox.pop_front() {
            if self.publish(now, to, &payload).is_err() {
                // Held back (or never publishable): retried on the next event.
                self.outbox.push_front((to, payload));
                break;
            }
        }
        for (&(from, id), s) in &mut self.inbound {
            s.service(now, from, id, &mut self.transmits);
        }
    }
}

impl SimNode for StreamNode {
    fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]) {
        let Ok(g) = Datagram::decode(bytes) else {
            self.stats.decode_errors += 1;
            return;
        };
        let here = inbound::Here {
            receiver: self.addr,
            incarnation: self.incarnation,
            from,
            stream: g.stream,
            log: &self.log,
        };
        match g.body {
            Body::Data(d) => {
                let config = &self.config;
                let s = self
                    .inbound
                    .entry((from, g.stream))
                    .or_insert_with(|| InStream::new(config, d.flags()));
                if !s.handle_data(now, &here, &d, bytes) {
                    self.stats.ignored += 1;
                }
            }
            Body::Heartbeat(h) => {
                let config = &self.config;
                let s = self.inbound.entry((from, g.stream)).or_insert_with(|| {
                    InStream::new(config, tagwire_wire::datagram::FLAG_RELIABLE)
                });
                if !s.handle_heartbeat(now, &here, h.first, h.last) {
                    self.stats.ignored += 1;
                }
            }
            Body::AckNack(a) => match self.out.get_mut(&from) {
                Some(s) if s.id() == g.stream => {
                    let missing: Vec<u64> = a.missing().collect();
                    s.handle_acknack(now, a.ack_through(), a.known_through(), &missing)
                }
                _ => self.stats.unknown_stream += 1,
            },
            // No writer here batches; a batch is a datagram this node
            // does not expect.
            Body::Batch(_) => self.stats.ignored += 1,
        }
        self.service(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.service(now);
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Outgoing> {
        self.transmits.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let out = self.out.values().filter_map(OutStream::poll_timeout);
        let inb = self.inbound.values().filter_map(InStream::poll_timeout);
        out.chain(inb).min()
    }
}
