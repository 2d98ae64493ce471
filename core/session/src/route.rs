//! A destination of a tag's samples, as the runtime resolves it from the
//! routing plan ([`crate::plan`]) and the nodes' delivery addresses.

use std::net::SocketAddr;

use tagwire_wire::{NodeAddr, Priority};

use crate::plan::Mode;

/// A node with receivers of a tag: its delivery address (UDP, and TCP on
/// the same port number) and how it gets its copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dest {
    /// The node.
    pub node: NodeAddr,
    /// Its delivery address.
    pub addr: SocketAddr,
    /// Its carrier and reliability.
    pub mode: Mode,
    /// Temporal scaling by the publisher's proxy: the node takes only
    /// samples whose sequence number is a multiple of this (1: all). The gcd
    /// of what its receivers ask (a receiver filtering for itself asks 1), so
    /// every wanted sample is sent; each subscriber still drops the rest.
    pub every: u32,
    /// This node is the node's proxy (see [`crate::plan`]): it also gets
    /// the samples other nodes published, except its own.
    pub relay: bool,
    /// The packet class of its datagrams.
    pub priority: Priority,
}

impl Dest {
    /// Whether this node (`me`) sends the node the sample `origin`
    /// published, numbered `seq`: it forwards `origin`'s samples there
    /// ([`Dest::forwards_from`]) and the scaling keeps this one.
    pub fn forwards(&self, me: NodeAddr, origin: NodeAddr, seq: u64) -> bool {
        self.forwards_from(me, origin) && (self.every <= 1 || seq % u64::from(self.every) == 0)
    }

    /// Whether this node (`me`) sends the node any of `origin`'s samples:
    /// its own, and others' where it is the node's proxy (but never the
    /// node's own back to it). Scaling aside: see [`Dest::forwards`].
    pub fn forwards_from(&self, me: NodeAddr, origin: NodeAddr) -> bool {
        origin == me || (self.relay && origin != self.node)
    }
}
