//! A deterministic network simulator: many nodes' real sans-IO cores over
//! simulated links, on a virtual clock, from one seed.
//!
//! docs/design.md §6 puts multi-node behaviour here: a scenario with loss,
//! reordering, duplication, partitions and crashes runs in milliseconds,
//! without root, and replays bit for bit from its seed. Network namespaces
//! ([`Lan`](crate::Lan)) remain the end-to-end proof.
//!
//! # Model
//!
//! * A node is anything that implements [`SimNode`], the sans-IO verbs of
//!   docs/design.md §6: `handle_datagram(now, from, bytes)`,
//!   `handle_timeout(now)`, `poll_transmit(now) -> Option<Outgoing>`,
//!   `poll_timeout()`. Nodes are addressed by [`SocketAddr`](std::net::SocketAddr)
//!   and send real bytes, so decoders run as on a socket. An [`Outgoing`]
//!   names a destination (a node, or a [group](Sim::join) for multicast), a
//!   carrier, a packet class and the bytes: a delivery session core or a
//!   membership core plugs in as it is (one node type, or an enum, or
//!   `Box<dyn SimNode>` for mixed kinds).
//! * Every ordered pair of nodes has a [link](LinkConfig): latency, jitter
//!   (which reorders), bandwidth with a bounded byte queue (tail drop),
//!   loss, duplication, and up/down for partitions, with [`LinkStats`]
//!   accounting for every datagram. Several links may
//!   [share a bottleneck](Sim::share_bottleneck): one queue and
//!   serialiser for all of them, as a switch port two hosts send through.
//! * [`Sim::crash`] drops a node's state; [`Sim::restart`] builds a fresh
//!   one with the node's factory.
//! * Time is a [`Duration`](std::time::Duration) since the start, shown to
//!   nodes as `origin + elapsed` [`Instant`](std::time::Instant)s. Nothing
//!   reads the real clock except for that opaque origin, once per process.
//!
//! # The event loop
//!
//! ```text
//!        ┌──────────── event queue: min-heap on (time, insertion seq) ───────────┐
//!        │  Arrive{from,to,bytes}   Timer{node,generation}   Action(closure)     │
//!        └───────────────────────────────┬──────────────────────────────────────┘
//!                                        │ step(): pop the earliest, clock := its time
//!           ┌────────────────────────────┼──────────────────────────┐
//!           ▼                            ▼                          ▼
//!   link up? node up?            generation current?         closure(&mut Sim)
//!   node.handle_datagram(now,..) node.handle_timeout(now)    (crash, restart, partition,
//!           │                            │                    publish via node_mut, ...)
//!           └──────────────┬─────────────┘                          │
//!                          ▼                                        ▼
//!           flush(node): while let Some(out) = poll_transmit(now)   nodes touched are
//!               for each destination: link.offer(out) ──► Arrive    flushed the same way
//!                 (partition? queue? dup? loss? latency+jitter)     before the next event
//!           then poll_timeout() ──► (re)arm Timer{node, generation+1}
//! ```
//!
//! Events at the same instant run in the order they were scheduled, every
//! random decision comes from one seeded [`SimRng`] drawn in event order,
//! and nodes and links live in ordered maps: the same seed gives the same
//! run, which [`Sim::trace_hash`] summarises (and
//! [`SimConfig::record_trace`] keeps in full).
//!
//! # Replaying a failing seed
//!
//! Property tests run one scenario per seed through [`for_each_seed`]. A
//! failure prints
//!
//! ```text
//! sim_reliable_seeds: seed = 417 failed: message 3 delivered twice
//!   replay: TAGWIRE_SIM_SEED=417 cargo test -p tagwire-testkit sim_reliable_seeds -- --nocapture
//! ```
//!
//! and the replay command runs only that seed, identically. Set
//! `TAGWIRE_SIM_SEEDS=K` to run `K` seeds instead of the default count.
//!
//! # Protocol adapters
//!
//! [`stream`] runs `tagwire-reliable`'s writer, reader, reassembler and
//! best-effort tracker, with `tagwire_wire::datagram` bytes, as a
//! [`SimNode`]. [`member`] runs a daemon's update manager (the membership
//! core and a tag table) over [`conn`], a small TCP-like transport on the
//! simulated datagrams. [`session`] runs the delivery session core
//! (`tagwire-session`, docs/design.md §6) of one node's receiving socket: a
//! daemon's delivery port, or a client process's own socket under direct
//! delivery. [`rtps`] runs the RTPS participant core (`tagwire-rtps`):
//! SPDP over a multicast group, SEDP, reliable and best-effort endpoints.

pub mod conn;
mod engine;
mod link;
pub mod member;
mod node;
mod rng;
pub mod rtps;
pub mod session;
pub mod stream;
mod topology;
mod trace;
mod travel;

pub use engine::{Sim, SimConfig, SimError, SimStats};
pub use link::{BottleneckConfig, BottleneckStats, LinkConfig, LinkStats};
pub use node::{Addr, Destination, Factory, NodeInit, NodeStats, Outgoing, SimNode};
pub use rng::{
    checksum, derive_seed, fnv1a, for_each_seed, seeds, SimRng, FNV_OFFSET, SEEDS_VAR, SEED_VAR,
};
pub use trace::{DropReason, TraceEntry, TraceEvent};
