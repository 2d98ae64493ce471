//! What happened during a run, as a hash (always) and a list (on demand).

use std::net::SocketAddr;
use std::time::Duration;

use super::node::Addr;
use super::rng::{fnv1a, nanos, FNV_OFFSET};

/// Why the simulator dropped a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The link was down (a partition).
    Partition,
    /// The link's queue was full.
    Queue,
    /// Lost on the wire.
    Loss,
    /// It arrived at a crashed node.
    NodeDown,
    /// No node has the destination address.
    Unroutable,
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TraceEvent {
    /// A node emitted a datagram, offered to the link `from → to`.
    Sent {
        /// Sender.
        from: Addr,
        /// Receiver (one per group member for a group datagram).
        to: Addr,
        /// Bytes.
        len: usize,
        /// Packet class.
        class: u8,
    },
    /// A datagram (copy) was dropped.
    Dropped {
        /// Sender.
        from: Addr,
        /// Receiver.
        to: Addr,
        /// Why.
        why: DropReason,
    },
    /// A datagram was handed to its receiver.
    Delivered {
        /// Sender.
        from: Addr,
        /// Receiver.
        to: Addr,
        /// [`checksum`](super::checksum) of its bytes.
        digest: u64,
    },
    /// A node's timeout fired.
    Timeout {
        /// The node.
        node: Addr,
    },
    /// A node crashed.
    Crashed {
        /// The node.
        node: Addr,
    },
    /// A node restarted as a fresh instance.
    Restarted {
        /// The node.
        node: Addr,
        /// Its new incarnation.
        incarnation: u32,
    },
    /// A scheduled action ran.
    Action,
}

/// One entry of a recorded trace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceEntry {
    /// Virtual time since the simulation's start.
    pub at: Duration,
    /// What happened.
    pub event: TraceEvent,
}

/// A run's trace: a hash over every event (cheap, always on) and, when
/// asked for, the events themselves.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    pub(crate) hash: u64,
    pub(crate) len: u64,
    pub(crate) entries: Option<Vec<TraceEntry>>,
}

impl Trace {
    pub(crate) fn new() -> Self {
        Self {
            hash: FNV_OFFSET,
            len: 0,
            entries: None,
        }
    }

    pub(crate) fn push(&mut self, at: Duration, event: TraceEvent) {
        let mut h = fnv1a(self.hash, &nanos(at).to_le_bytes());
        h = match &event {
            TraceEvent::Sent {
                from,
                to,
                len,
                class,
            } => {
                let h = addrs(fnv1a(h, &[1, *class]), from, to);
                fnv1a(h, &(*len as u64).to_le_bytes())
            }
            TraceEvent::Dropped { from, to, why } => addrs(fnv1a(h, &[2, *why as u8]), from, to),
            TraceEvent::Delivered { from, to, digest } => {
                fnv1a(addrs(fnv1a(h, &[3]), from, to), &digest.to_le_bytes())
            }
            TraceEvent::Timeout { node } => addr(fnv1a(h, &[4]), node),
            TraceEvent::Crashed { node } => addr(fnv1a(h, &[5]), node),
            TraceEvent::Restarted { node, incarnation } => {
                fnv1a(addr(fnv1a(h, &[6]), node), &incarnation.to_le_bytes())
            }
            TraceEvent::Action => fnv1a(h, &[7]),
        };
        self.hash = h;
        self.len += 1;
        if let Some(entries) = &mut self.entries {
            entries.push(TraceEntry { at, event });
        }
    }
}

fn addrs(h: u64, a: &Addr, b: &Addr) -> u64 {
    addr(addr(h, a), b)
}

fn addr(h: u64, a: &Addr) -> u64 {
    let h = match a {
        SocketAddr::V4(v4) => fnv1a(h, &v4.ip().octets()),
        SocketAddr::V6(v6) => fnv1a(h, &v6.ip().octets()),
    };
    fnv1a(h, &a.port().to_le_bytes())
}
