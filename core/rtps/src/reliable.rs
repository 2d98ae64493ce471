//! The stateful reliable writer and reader of RTPS (specification §8.4.7
//! to §8.4.12), sans-IO, as a Cyclone DDS peer expects them (see
//! `shared/rtps-notes.md` §7):
//!
//! * the **writer** sends each sample once to every matched reader's
//!   locators with a HEARTBEAT piggybacked, heartbeats while anything is
//!   unacknowledged (count strictly increasing), sends a newly matched
//!   reader a HEARTBEAT addressed to it at once, answers an ACKNACK by
//!   resending the samples asked for (addressed, reader id set) and a GAP
//!   for those it no longer keeps, and keeps at most `depth` samples;
//! * the **reader** delivers each writer's samples once and in order,
//!   answers a HEARTBEAT that asks for it with an ACKNACK whose base is the
//!   first sample it lacks and whose bits are the others it lacks (count
//!   strictly increasing), skips what a GAP or a heartbeat's first number
//!   says will not come and counts it lost, and starts a volatile match at
//!   the writer's next sample and a transient-local one at its first kept.
//!
//! A sample larger than [`MAX_UNFRAGMENTED`](crate::frag::MAX_UNFRAGMENTED) goes in DATA_FRAG submessages
//! of [`FRAGMENT_SIZE`](crate::frag::FRAGMENT_SIZE) bytes, ten to a datagram, each datagram but the
//! last followed by a HEARTBEAT_FRAG; the writer resends the fragments a
//! NACK_FRAG asks for, and a whole sample an ACKNACK asks for. The reader
//! puts samples back together from fragments in any order (at most 16 at
//! once per writer, each at most `frag::MAX_SAMPLE`) and asks for a sample
//! it has not completed with its ACKNACK (it sends no NACK_FRAG).

mod reader;
mod writer;

pub use reader::{Delivery, Reader};
pub use writer::Writer;

/// The most readers a writer serves, and writers a reader follows.
pub const MAX_MATCHES: usize = 256;
