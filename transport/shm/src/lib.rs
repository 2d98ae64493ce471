//! # tagwire-shm: same-node delivery through shared memory
//!
//! docs/design.md §2, "Data path on one node": publishing to N local subscribers
//! costs one copy, not N (one write into a broadcast ring that every subscriber
//! reads with its own cursor, and a futex doorbell woken only when someone sleeps).
//! This crate is that mechanism and nothing else; it knows no tags, no daemon and
//! no frame layout.
//!
//! * [`Segment`]: a `memfd` mapping. The daemon creates it (so nothing is left in
//!   `/dev/shm` after a crash and access follows the tag's rights) and passes the
//!   descriptor to clients; it is sealed against resizing, so a faulty client cannot
//!   shrink it under the others' feet.
//! * [`Ring`]: a broadcast ring of fixed-size slots in a segment. Any number of
//!   writers claim slots with one `fetch_add`, mark the slot's claim word and
//!   commit with one stamp store; a reader validates each copy against the
//!   slot's claim word (seqlock-style), so a
//!   reader that falls a whole lap behind detects the overwrite instead of
//!   returning torn data. Readers keep
//!   their cursor in their own memory: a reader that dies leaves nothing behind.
//! * [`Gate`]: a reader that must not lose records (the daemon's forwarder of
//!   a reliable remote stream) holds a gate; gated writers wait for it, for a
//!   bounded time, instead of overwriting what it has not read. This is how a
//!   full network window pushes back on the publisher.
//! * [`Ticket`]: the daemon's forwarder, while idle, offers the next record's
//!   first network transmission to that record's writer, which sends it from
//!   its own thread: the forwarder's wake-up is off the message's path.
//! * The doorbell: a futex word that a publisher bumps and wakes only when a
//!   sleeper count is non-zero, so a publisher whose subscribers are busy (or
//!   spinning) pays neither a system call nor a write to the sleepers' line.
//! * [`Seat`]: what one subscriber writes (its sleeper count, its lossless
//!   gate), in a small segment of its own that the daemon gives to it and to
//!   the tag's writers. A subscriber maps the records and the control
//!   segment read-only.
//!
//! **Trust.** A writer can write everything it maps; a subscriber only its
//! seat. A reader therefore
//! copies the shape (slot count, sizes) out of the header once, validates it against
//! the file size, and never re-reads it; lengths read from slots are clamped.
//! A hostile writer can corrupt *messages* on the tag it has mapped, never make a
//! reader access memory outside the mapping; a hostile subscriber can lie only
//! about itself.

mod backoff;
mod ring;
mod segment;
pub mod sync;

pub use ring::{
    Claim, Closed, Cursor, Gate, Peek, ReadOutcome, Ring, RingError, RingShape, Seat, Ticket,
    TicketDest, GATES, MAX_SEATS, TICKET_DESTS, TICKET_DEST_WORDS,
};
pub use segment::{Segment, ShmError};
