//! # tagwire-session: the delivery session between nodes, without I/O
//!
//! Everything that crosses a host boundary on the data path is decided
//! here and only moved by the runtime (docs/design.md §6, quinn-proto style),
//! in two roles that share the codecs and the reliable core:
//!
//! * a [`SendSession`] owns the streams from this node's publishers to
//!   other nodes, per tag, destination node and carrier (routes, scaling,
//!   batching, fragments, reliable windows, the send ticket);
//! * a [`ReceiveSession`] owns the streams from other nodes (reassembly,
//!   order, loss counting, credit, acknowledgements);
//! * a [`Session`] is both for one node (the simulator, the fuzz targets, a
//!   process that sends and receives on one socket), acknowledgements
//!   routed from its receiving role to its sending one.
//!
//! Where each role's work is: `send` (the sending session and its events),
//! `outbound` (per tag: routes, filtering, batching, numbering, and in
//! `outbound/window.rs` the reliable windows), `ticket` (what a publisher
//! sends itself); `receive` (the receiving session and its events),
//! `inbound` (per datagram: order, loss, reassembly, credit,
//! acknowledgements), `handover` (streams moving between receiving
//! sessions of one node); `node` (both roles as one [`Session`]).
//!
//! ```text
//!             set_routes(now, tag, [Dest])     set_credit(tag, room)
//!                          │                            │
//!  ring records ──▶ handle_record(now, tag, hdr, msg)   │
//!  (this node's    offer / handle_direct_record         │
//!   publishers)    flush(now, tag)                      │
//!                          │                            │
//!                ┌─────────▼────────────────────────────▼──────────┐
//!                │ outbound, per tag           inbound, per stream  │
//!                │  scaling / relay filter      (sender ip, id)     │
//!                │  batch ≤ 1 packet..16 KiB    Reader (reliable)   │
//!                │  fragments ≤ 60 KiB          BestEffort (gaps)   │
//!                │  per node: Writer window,    Reassembler         │
//!                │   congestion, credit         credit in AckNack   │
//!                │  best-effort / mcast / tcp                       │
//!                │   numbering                                      │
//!                └──┬──────────────┬──────────────┬──────────────┬──┘
//!  datagrams ───────┘ handle_datagram(now, from, bytes)          │
//!                     │              │              │            │
//!          poll_transmit(now)   poll_deliver()   poll_event()  poll_timeout()
//!          dest, carrier,       tag, sender's    streams,      when to call
//!          class, bytes         header, payload  losses, …     handle_timeout
//! ```
//!
//! No clock reads, sockets, threads or locks: time comes in as `now`,
//! bytes come in as slices and go out as [`Transmit`]s, addresses are
//! `SocketAddr`s. A runtime (or a simulator) drives it:
//!
//! 1. feed inputs: [`SendSession::handle_record`] for each record this
//!    node's publishers wrote (while [`SendSession::can_accept`]), then
//!    [`SendSession::flush`] once nothing more is ready (a lone message goes
//!    out at once: batching only packs what is already queued);
//!    [`ReceiveSession::handle_datagram`] for each datagram received (an
//!    acknowledgement comes back from it, for [`SendSession::handle_ack`]);
//! 2. drain `poll_transmit`, [`ReceiveSession::poll_deliver`] and
//!    `poll_event` after every input;
//! 3. sleep until `poll_timeout` or the next input, then call
//!    `handle_timeout` and drain again.
//!
//! A node may run one [`Session`] for everything, or its roles apart (the
//! daemon runs a sending session per tag it forwards, on that tag's
//! thread, and a receiving session per socket): a sending session ignores
//! acknowledgements of streams it does not own.
//!
//! ## What the session guarantees
//!
//! * **Reliable** destinations get every record handed in, in order, once,
//!   through a `tagwire_reliable::Writer` per node, or
//!   [`SendSession::handle_record`] says [`Held`]: the window, the congestion
//!   window, the bounds on unacknowledged messages and bytes, or the
//!   receiver's credit is full, and the caller keeps the record (and its
//!   publisher, through the ring's gate) waiting. Nothing reliable is
//!   dropped inside.
//! * **Receiver credit.** A receiving session told its room for a tag
//!   ([`ReceiveSession::set_credit`], in messages: a lossless subscriber's ring
//!   and held-back queue) puts it in every acknowledgement
//!   (`AckNack::credit`); the sender keeps its unacknowledged messages
//!   within it, so data is not sent to be refused. At zero room the
//!   receiver refuses data ([`ReceiveEvent::Refused`], not acknowledged, not
//!   NACKed) and the sender holds; a heartbeat probes while it waits, and
//!   room coming back is announced at once.
//! * **Best effort** and **multicast** datagrams are numbered per stream;
//!   the receiver delivers only newer ones and reports every gap
//!   ([`ReceiveEvent::BestEffortLost`]).
//! * **Scaling and relay** follow the routes ([`Dest::forwards`]): the session
//!   filters every n-th sample and a proxy relays others' samples.
//! * **Send ticket** bookkeeping: [`SendSession::offer`] says what a publisher
//!   may send itself (a batch of one per reliable node, numbered as the
//!   session would), [`SendSession::handle_direct_record`] keeps such a
//!   record for resends without sending it again, [`SendSession::abandon_offer`]
//!   retires the streams whose numbers an unrecorded record used.
//! * Every input may come from an attacker: malformed datagrams are
//!   [`ReceiveEvent::Malformed`], never a panic.

mod handover;
mod inbound;
mod node;
mod outbound;
pub mod plan;
mod receive;
mod route;
mod send;
mod ticket;

use std::net::SocketAddr;
use std::time::Duration;

use thiserror::Error;

use tagwire_reliable::pacer::{PacerConfig, PacerStats};
use tagwire_reliable::{ReaderConfig, ReassemblerConfig, WriterConfig, WriterStats};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, Priority, TagName};

pub use handover::{Handover, MAX_HANDOVER_STREAMS};
pub use node::Session;
pub use outbound::{PACED_LEAD, PACED_LEAD_MIN};
pub use plan::Mode;
pub use receive::{ReceiveEvent, ReceiveSession};
pub use route::Dest;
pub use send::{SendEvent, SendSession};
pub use ticket::{DirectCopy, TicketEntry};

/// Settings of a [`SendSession`] and a [`ReceiveSession`] (each reads its
/// own).
#[derive(Debug, Clone)]
pub struct Config {
    /// This node: samples it published go to every destination; others'
    /// only to the nodes it relays for.
    pub me: NodeAddr,
    /// Seeds the stream ids (64-bit, distinct per session).
    pub seed: u64,
    /// Largest fragment datagram (a message larger than a batch is cut into
    /// datagrams of at most this many bytes).
    pub datagram: usize,
    /// How large batches of small messages grow.
    pub batch: Batching,
    /// Reliable streams' windows.
    pub writer: WriterConfig,
    /// Reliable streams' readers.
    pub reader: ReaderConfig,
    /// Reliable streams' pacing (NAPA, `tagwire_reliable::pacer`): each
    /// stream's datagrams go at the interval its controller sets from the
    /// measured round trip and delivery rate, so that the path's queue
    /// stays short; `None`: a stream sends as fast as its windows allow.
    /// [`SendSession::set_pacing`] changes it per tag.
    pub pacing: Option<PacerConfig>,
    /// Reassembly bounds per inbound stream.
    pub reassembler: ReassemblerConfig,
    /// Messages a reliable stream may have unacknowledged (the daemon: the
    /// ring's slot count, so repairing a loss never releases more than a
    /// caught-up subscriber's ring holds).
    pub max_unacked_messages: usize,
    /// Bytes a reliable stream may have unacknowledged.
    pub max_unacked_bytes: usize,
    /// The multicast carrier's port (`None`: multicast destinations get
    /// nothing).
    pub multicast_port: Option<u16>,
    /// An inbound stream silent this long is forgotten.
    pub idle_stream: Duration,
    /// Most inbound streams one sending node may have here at once: data
    /// that would begin another is dropped (reliable data unacknowledged,
    /// so a well-behaved sender sends it again once a stream has gone).
    pub max_peer_streams: usize,
    /// Most bytes of partial messages one sending node may have reserved
    /// here at once, all its streams together (each stream is bounded by
    /// `reassembler` too): a fragment that would begin another message
    /// beyond it waits (reliable: unacknowledged, sent again; best effort:
    /// dropped and counted). Messages begun always finish.
    pub max_peer_reassembly: usize,
    /// Inbound best-effort streams start at the first datagram that comes
    /// (a TCP connection's session: a new connection carries on its
    /// sender's numbering, and TCP itself loses nothing). Otherwise they
    /// are wanted from seq 1 and every number missed is counted lost.
    pub start_at_first: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            me: NodeAddr::LOCALHOST,
            seed: 1,
            datagram: 60 * 1024,
            batch: Batching::default(),
            writer: WriterConfig {
                window: 1024,
                ..WriterConfig::default()
            },
            // One acknowledgement per burst of at least `ACK_EVERY`
            // datagrams (a writer held back below that asks with a
            // heartbeat): each one costs the receiver a send, the sender's
            // forwarder the session's lock and, where no busy forwarder
            // reads it from the daemon's replies socket, a thread's
            // wake-up. Measured on remote throughput: 64 against 16, 8 KiB
            // 309-311k msg/s against 265-277k, 256 B 3.27-3.30M against
            // 2.89-2.91M, lossless alike (bench/results/stop34/
            // ab5-ack-every.txt, each side's threads left to the
            // scheduler); 256 against 64, with each host's threads on one
            // CPU (`tagwire perf --pin`, where the sending CPU pays each
            // wake-up of the inbound thread, ~11 us), 3.5k acknowledgements
            // a second against 7.6k at 8 KiB, 8 KiB +6 % and 256 B +12 %
            // (medians of 6 and 3 alternated runs). 512 is no better: 8 KiB
            // +6 % alternated (4 of 4) but no better in the full run with
            // the peers after it, 256 B lossless lower in 2 of 3
            // (bench/results/stop40/ab-throughput). A writer whose
            // congestion window is smaller asks when it is full.
            reader: ReaderConfig {
                ack_every: ACK_EVERY,
                ..ReaderConfig::default()
            },
            reassembler: ReassemblerConfig::default(),
            pacing: None,
            max_unacked_messages: 256,
            max_unacked_bytes: 4 << 20,
            multicast_port: None,
            idle_stream: Duration::from_secs(60),
            max_peer_streams: 1024,
            max_peer_reassembly: 2 * ReassemblerConfig::default().max_bytes,
            start_at_first: false,
        }
    }
}

/// The limits of a batch datagram (small messages packed together): one
/// packet after a retransmission, doubling after each clean stretch up to
/// `max` (fewer datagrams per message on a clean link; whole packets through
/// a short router queue after a loss). `min == max` fixes the size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// The limit after a retransmission (default 1472: one packet).
    pub min: usize,
    /// The limit after clean stretches (default 16 KiB).
    pub max: usize,
    /// A clean stretch (default 200 ms).
    pub grow_after: Duration,
}

impl Batching {
    /// Batches of exactly `size` bytes at most, never adapted.
    pub fn fixed(size: usize) -> Self {
        Self {
            min: size,
            max: size,
            ..Self::default()
        }
    }
}

impl Default for Batching {
    fn default() -> Self {
        Self {
            min: 1472,
            max: 16 * 1024,
            grow_after: Duration::from_millis(200),
        }
    }
}

/// How a [`Transmit`] travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Carrier {
    /// A UDP datagram to `dest`.
    Udp,
    /// A UDP datagram to the tag's multicast group (`dest`).
    Multicast,
    /// A frame on the TCP connection to `dest` (the runtime frames it and
    /// keeps the connection; TCP makes it reliable and ordered).
    Tcp,
}

/// What a [`Transmit`] carries (the runtime may map it to a priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// A datagram's first transmission.
    Data,
    /// A datagram sent again (NACK or timer).
    Resend,
    /// A heartbeat or an acknowledgement.
    Control,
}

/// Bytes to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where to.
    pub dest: SocketAddr,
    /// How.
    pub carrier: Carrier,
    /// What kind of packet.
    pub class: Class,
    /// Its packet class on the network (its stream's destination's; a
    /// runtime sets the TOS byte from it).
    pub priority: Priority,
    /// One whole datagram.
    pub bytes: TxBuf,
}

/// A [`Transmit`]'s bytes: a buffer of its own, or one a reliable stream's
/// window shares with it (a datagram's first transmission: sent without a
/// copy, kept there for resends). Reads as `&[u8]`; give it back with
/// [`SendSession::recycle_transmit`] once sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxBuf {
    /// Its own.
    Own(Vec<u8>),
    /// Shared with a window: never written while shared.
    Shared(std::sync::Arc<Vec<u8>>),
}

impl std::ops::Deref for TxBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            TxBuf::Own(v) => v,
            TxBuf::Shared(a) => a,
        }
    }
}

impl From<Vec<u8>> for TxBuf {
    fn from(v: Vec<u8>) -> Self {
        TxBuf::Own(v)
    }
}

impl TxBuf {
    /// The buffer, if nothing else holds it (its own, or a shared one the
    /// window let go of).
    pub fn into_vec(self) -> Option<Vec<u8>> {
        match self {
            TxBuf::Own(v) => Some(v),
            TxBuf::Shared(a) => std::sync::Arc::try_unwrap(a).ok(),
        }
    }
}

/// A whole message from another node, in its stream's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The tag it was published on.
    pub tag: TagName,
    /// The datagram's source.
    pub from: SocketAddr,
    /// The publisher's frame header (pid, node, sequence number, time).
    pub header: FrameHeader,
    /// The message.
    pub payload: Vec<u8>,
}

/// Something a [`Session`] tells the runtime: its sending role's events
/// or its receiving role's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// From the sending role.
    Send(SendEvent),
    /// From the receiving role.
    Receive(ReceiveEvent),
}

/// [`SendSession::handle_record`] did not take the record: a reliable
/// destination cannot take more now. Keep it, read nothing more, and hand
/// it in again once [`SendSession::can_accept`] (after acknowledgements or
/// timeouts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("held: a reliable destination's window or credit is full")]
pub struct Held;

/// How a send ticket offered with [`SendSession::offer`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketOutcome {
    /// The publisher sent the record to every destination offered.
    Sent,
    /// The publisher claimed it and stalled: some copies may be out; the
    /// session sends them (a copy that did go out is a duplicate the
    /// reader drops).
    Abandoned,
}

/// One destination of a send ticket: the datagram the publisher sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferDest {
    /// The node.
    pub node: NodeAddr,
    /// Its delivery address.
    pub addr: SocketAddr,
    /// The stream id.
    pub stream: u64,
    /// The datagram's sequence number on that stream.
    pub seq: u64,
    /// The stream's packet class (the publisher sends its copy with this
    /// TOS byte too).
    pub priority: Priority,
}

/// What a publisher may send itself (see [`SendSession::offer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The largest datagram the publisher may send the record in (a
    /// lone message goes whole up to the session's `datagram` size,
    /// whatever the batch limit).
    pub max_len: usize,
    /// One batch of one message per reliable node.
    pub dests: Vec<OfferDest>,
}

/// Counters and state of one outbound reliable stream (`tagwire stats`).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamStats {
    /// Its tag.
    pub tag: TagName,
    /// Its destination node and address.
    pub node: NodeAddr,
    /// The node's delivery address.
    pub addr: SocketAddr,
    /// Its id.
    pub stream: u64,
    /// The window's counters.
    pub writer: WriterStats,
    /// Datagrams unacknowledged.
    pub unacked: u64,
    /// Their bytes.
    pub unacked_bytes: u64,
    /// The congestion window.
    pub cwnd: u64,
    /// The receiver's last credit (`None`: unlimited).
    pub credit: Option<u32>,
    /// The pacing controller's estimates (`None`: not paced).
    pub pacing: Option<PacerStats>,
    /// The packet class its datagrams carry now.
    pub priority: Priority,
    /// Datagrams (first sends and resends) put out in each class it has
    /// had, in the order it first had them.
    pub by_class: Vec<(Priority, u64)>,
}

/// `bytes` in a buffer from `spare` (see [`ReceiveSession::recycle`]), or a new one.
pub(crate) fn copied(spare: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
    let mut buf = spare_buffer(spare);
    buf.extend_from_slice(bytes);
    buf
}

/// An empty buffer: the last one given back to `spare`, or a new one.
pub(crate) fn spare_buffer(spare: &mut Vec<Vec<u8>>) -> Vec<u8> {
    let mut buf = spare.pop().unwrap_or_default();
    buf.clear();
    buf
}

/// Keeps `buf` in `spare` for [`copied`] if there is room and it is not
/// too large (see [`ReceiveSession::recycle`]).
pub(crate) fn keep_spare(spare: &mut Vec<Vec<u8>>, buf: Vec<u8>) {
    let cap = buf.capacity();
    if spare.len() < SPARE_BUFFERS && cap > 0 && cap <= SPARE_CAPACITY {
        spare.push(buf);
    }
}

/// Datagrams a reliable stream's reader takes before it must
/// acknowledge, by default (see [`Config::reader`]; a quarter of the
/// window of 1024).
pub const ACK_EVERY: u32 = 256;

/// Most buffers [`ReceiveSession::recycle`] keeps.
pub const SPARE_BUFFERS: usize = 256;

/// Largest buffer [`ReceiveSession::recycle`] keeps, bytes.
pub const SPARE_CAPACITY: usize = 64 << 10;

/// The ids a session gives its streams: distinct per session (the seed)
/// and per stream, and hard to guess for another host.
#[derive(Debug)]
pub(crate) struct StreamIds {
    seed: u64,
    /// How many were handed out.
    issued: u64,
}

impl StreamIds {
    /// The next id.
    pub(crate) fn next(&mut self) -> u64 {
        self.issued += 1;
        stream_id(self.seed, self.issued)
    }
}

/// Stream id number `n` of a session seeded `seed`: odd (0 is never an id),
/// and distinct for distinct `n` but for a 2⁻⁶³ chance (splitmix64 is a
/// bijection; the low bit is forced).
fn stream_id(seed: u64, n: u64) -> u64 {
    splitmix64(seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
