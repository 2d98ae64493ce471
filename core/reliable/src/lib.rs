//! # tagwire-reliable: delivery between nodes, without I/O
//!
//! A publisher's messages reach a remote node over one datagram stream per
//! node (docs/design.md §2, "Data path across nodes"). This crate holds the state
//! machines of that stream; `tagwire_wire::datagram` holds its bytes. It is
//! layer 1 of docs/design.md §3: no sockets, threads or clock reads — time comes in
//! as `now: Instant` arguments, datagrams come in and go out as byte slices,
//! so a whole lossy network can be simulated in a unit test on a virtual
//! clock (see `tests/lossy_channel.rs`).
//!
//! The send path reads top to bottom:
//!
//! 1. [`fragment::fragments`] cuts a message into ranges that fit a datagram;
//!    each becomes a `Data` datagram with its own stream seq, so fragment
//!    `frag` of a message whose first datagram is `s` has seq `s + frag`.
//! 2. [`Writer::send`] gives each datagram the next seq (from 1), keeps its
//!    bytes until the reader acknowledges them, and hands them back for
//!    sending at once. At most `window` datagrams are unacknowledged;
//!    [`Writer::occupancy`] is the O(1) reading a pacing controller uses.
//! 3. [`Writer::poll_transmit`] yields retransmissions (asked for by a NACK,
//!    or after `resend_after` without news) and heartbeats (every
//!    `heartbeat_period` while anything is unacknowledged).
//!
//! and the receive path mirrors it:
//!
//! 1. [`Reader::handle_data`] accepts each datagram once. The next one in
//!    order is delivered from the caller's own buffer ([`Arrival::Deliver`]);
//!    only datagrams that arrive ahead of a gap are copied, into a bounded
//!    buffer that [`Reader::poll_event`] drains in order (drain it after
//!    [`Reader::handle_heartbeat`] too: a heartbeat that gives up on a gap
//!    makes what was buffered after it deliverable).
//! 2. [`Reader::poll_transmit`] produces `AckNack`s: every `ack_every`
//!    datagrams, promptly (but rate-limited) when a gap appears, and after
//!    every heartbeat, which is what recovers a lost last datagram.
//! 3. [`Reassembler`] turns the in-order datagrams back into messages.
//!
//! Unreliable streams skip the writer and reader: [`BestEffort`] keeps only
//! newer seqs and counts losses, and the [`Reassembler`] copes with missing
//! and duplicated fragments on its own.
//!
//! ## Invariants
//!
//! * A [`Reader`] delivers each seq at most once, in strictly increasing
//!   order, and (reliable stream, writer alive) every seq from its start on.
//!   Its start is fixed by the first datagram or heartbeat it sees, or by
//!   [`Reader::with_start`]: a late joiner asks for nothing older.
//! * A [`Writer`] never holds more than `window` datagrams, frees them only on
//!   a cumulative acknowledgement, and queues each for retransmission at most
//!   once at a time.
//! * A [`Reassembler`] yields a message only when every fragment arrived with
//!   the same fragment count, length, frame header and tag and the pieces add
//!   up to exactly the length; never the same message twice (within its
//!   memory of completed messages); and holds at most `max_partials` partial
//!   messages and `max_bytes` bytes, evicting the oldest.
//! * Every input may come from an attacker: nothing here panics or allocates
//!   in proportion to a number read off the wire.

pub mod fragment;
pub mod pacer;
mod prefetch;
pub mod reader;
pub mod writer;

pub use fragment::{
    fragment_count, fragments, PartialMessage, Reassembled, Reassembler, ReassemblerConfig,
    ReassemblerStats,
};
pub use reader::{Arrival, BestEffort, BestEffortStats, Reader, ReaderConfig, ReaderStats};
pub use writer::{AckReport, Transmit, WindowFull, Writer, WriterConfig, WriterStats};
