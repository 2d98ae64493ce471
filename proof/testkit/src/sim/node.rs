//! What a protocol core must offer to run in the simulator.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tagwire_wire::Carrier;

/// A node's address: a socket address, as real cores name their peers.
pub type Addr = SocketAddr;

/// Where an [`Outgoing`] datagram goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Destination {
    /// One node.
    Unicast(Addr),
    /// Every member of a group (see [`Sim::join`](super::Sim::join)) other
    /// than the sender, each copy over its own link, as a switch floods
    /// multicast.
    Group(Addr),
}

/// A datagram a node wants sent: what a sans-IO core's `poll_transmit`
/// yields. `carrier` and `class` are what a delivery session core decides
/// beside the bytes (docs/design.md §6); the simulator records them in its trace
/// and per-class link counters, and carries every carrier as datagrams over
/// the same links (a stream carrier's framing is the core's business).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Where to.
    pub destination: Destination,
    /// The carrier the core chose.
    pub carrier: Carrier,
    /// Packet class (0 = default); links count datagrams per class.
    pub class: u8,
    /// The datagram.
    pub bytes: Vec<u8>,
}

impl Outgoing {
    /// A class-0 UDP datagram to one node.
    pub fn unicast(to: Addr, bytes: Vec<u8>) -> Self {
        Self {
            destination: Destination::Unicast(to),
            carrier: Carrier::Udp,
            class: 0,
            bytes,
        }
    }

    /// A class-0 multicast datagram to a group.
    pub fn group(group: Addr, bytes: Vec<u8>) -> Self {
        Self {
            destination: Destination::Group(group),
            carrier: Carrier::Multicast,
            class: 0,
            bytes,
        }
    }
}

/// A protocol core as the simulator drives it: the sans-IO verbs of
/// docs/design.md §6. Time only comes in as `now`; a node must not read the real
/// clock, use threads or keep global state, or runs stop being reproducible.
///
/// After every `handle_*` call (and after test code touched the node) the
/// simulator drains [`SimNode::poll_transmit`] until it returns `None`, then
/// asks [`SimNode::poll_timeout`] and calls [`SimNode::handle_timeout`] at
/// that instant (an instant in the past means "now").
pub trait SimNode {
    /// A datagram arrived from `from`.
    fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]);

    /// The instant last returned by [`SimNode::poll_timeout`] has come.
    fn handle_timeout(&mut self, now: Instant);

    /// The next datagram to send, if any.
    fn poll_transmit(&mut self, now: Instant) -> Option<Outgoing>;

    /// When [`SimNode::handle_timeout`] should next be called, if ever
    /// without new input.
    fn poll_timeout(&self) -> Option<Instant>;
}

impl<T: SimNode + ?Sized> SimNode for Box<T> {
    fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]) {
        (**self).handle_datagram(now, from, bytes);
    }

    fn handle_timeout(&mut self, now: Instant) {
        (**self).handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Outgoing> {
        (**self).poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (**self).poll_timeout()
    }
}

/// What a node factory is given to build an instance, at the start and at
/// every restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInit {
    /// The node's address.
    pub addr: Addr,
    /// 0 for the first instance, +1 per restart.
    pub incarnation: u32,
    /// The virtual time of its creation.
    pub now: Instant,
    /// The same, as virtual time since the start of the run: what a node
    /// that stamps a wall clock (a daemon's incarnation, its table's
    /// Lamport clock) reads.
    pub elapsed: Duration,
    /// A seed for the instance's own randomness (ids, nonces), derived from
    /// the simulation's seed, the address and the incarnation.
    pub seed: u64,
}

/// Builds a node's state, at the start and at every restart.
pub type Factory<N> = Box<dyn FnMut(&NodeInit) -> N>;

/// Counters of one node, kept by the simulator across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeStats {
    /// Datagrams handed to the node.
    pub received: u64,
    /// Datagrams the node emitted (a group datagram counts once).
    pub transmitted: u64,
    /// Timeouts delivered.
    pub timeouts: u64,
    /// Crashes.
    pub crashes: u64,
    /// Restarts.
    pub restarts: u64,
}
