//! The stateful reliable writer and reader of RTPS (specification §8.4.7
//! to §8.4.12), sans-IO, as a Cyclone DDS peer expects them:
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
//!   the writer's next sample and a transient-local one at its first kept;
//! * where a volatile reader starts: it holds what comes until a
//!   heartbeat says, asking with pre-emptive ACKNACKs; a tagwire writer
//!   names the reader's own start in the heartbeats it addresses to it
//!   ([`ReaderStart`]), another vendor's is followed from the end of its
//!   first heartbeat (docs/dds.md, "Where a volatile reader starts").
//!
//! A sample larger than [`MAX_UNFRAGMENTED`](crate::frag::MAX_UNFRAGMENTED) goes in DATA_FRAG submessages
//! of [`FRAGMENT_SIZE`](crate::frag::FRAGMENT_SIZE) bytes, ten to a datagram, each datagram but the
//! last followed by a HEARTBEAT_FRAG; the writer resends the fragments a
//! NACK_FRAG asks for, and a whole sample an ACKNACK asks for. The reader
//! puts samples back together from fragments in any order (at most 16 at
//! once per writer, each at most `frag::MAX_SAMPLE`) and asks for a sample
//! it has not completed with a NACK_FRAG for its missing fragments.
//!
//! A sample carries its source timestamp (INFO_TS before its DATA) and,
//! for a keyed topic's dispose or unregister, STATUS_INFO and the key
//! instead of the data ([`Change`]).

mod reader;
mod writer;

pub use reader::{Delivery, Reader};
pub use writer::{ReaderStart, Writer};

use crate::plist::{pid, ListBuilder, ParameterList};
use crate::types::Time;

/// STATUS_INFO: the instance was disposed.
pub const DISPOSED: u32 = 0x1;
/// STATUS_INFO: the writer unregistered the instance.
pub const UNREGISTERED: u32 = 0x2;

/// One change to a topic, as a writer writes it and a reader delivers it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Change {
    /// The serialized sample (encapsulation header first); for a dispose
    /// or unregister the serialized key (possibly empty: then only
    /// `key_hash` names the instance).
    pub payload: Vec<u8>,
    /// The source timestamp (INFO_TS), if the writer gave one.
    pub timestamp: Option<Time>,
    /// STATUS_INFO bits ([`DISPOSED`], [`UNREGISTERED`]); 0 is data.
    pub status: u32,
    /// The instance's key hash (PID_KEY_HASH), if sent.
    pub key_hash: Option<[u8; 16]>,
}

impl Change {
    /// A sample of data.
    pub fn data(payload: Vec<u8>) -> Self {
        Self {
            payload,
            ..Self::default()
        }
    }

    /// The inline QoS this change is sent with (STATUS_INFO, KEY_HASH),
    /// if any, as a sentinel-ended list.
    pub(crate) fn inline_qos(&self) -> Option<Vec<u8>> {
        if self.status == 0 && self.key_hash.is_none() {
            return None;
        }
        let mut l = ListBuilder::new();
        if let Some(h) = &self.key_hash {
            l.param(pid::KEY_HASH, h);
        }
        if self.status != 0 {
            // STATUS_INFO is big-endian whatever the list's order.
            l.param(pid::STATUS_INFO, &self.status.to_be_bytes());
        }
        Some(l.finish())
    }

    /// Reads STATUS_INFO and KEY_HASH from a DATA's inline QoS.
    pub(crate) fn read_inline(&mut self, q: Option<&ParameterList<'_>>) {
        let Some(q) = q else { return };
        if let Some(v) = q.get(pid::STATUS_INFO).and_then(|v| v.get(..4)) {
            self.status = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
        }
        if let Some(v) = q.get(pid::KEY_HASH).and_then(|v| v.get(..16)) {
            let mut h = [0u8; 16];
            h.copy_from_slice(v);
            self.key_hash = Some(h);
        }
    }
}

/// The most readers a writer serves, and writers a reader follows.
pub const MAX_MATCHES: usize = 256;
