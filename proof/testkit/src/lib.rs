//! Test support for tagwire: simulated networks and real multi-host networks
//! on one Linux machine.
//!
//! Two tools, for two kinds of proof (docs/design.md §6):
//!
//! - [`sim`]: a deterministic network simulator. Many nodes' real sans-IO
//!   cores run over simulated links (latency, jitter, bandwidth, loss,
//!   duplication, partitions, crashes) on a virtual clock, from one seed:
//!   multi-node behaviour is specified and explored there, without root, in
//!   milliseconds, and every failure replays from its printed seed.
//! - Network namespaces (the rest of this page): the end-to-end proof with
//!   real sockets and kernels.
//!
//! Tagwire's daemons find each other with UDP multicast beacons, replicate the tag
//! table over the LAN and must survive links that fail or slow down. A loopback
//! interface shows none of that: every "node" shares one address, one routing table
//! and one multicast group membership. This crate builds a small LAN out of Linux
//! network namespaces instead, so each simulated node has its own `eth0`, its own
//! address, its own multicast route and a link that a test can cut or shape.
//!
//! # Topology
//!
//! [`Lan::new(n)`](Lan::new) creates one *switch* namespace holding a Linux bridge
//! (`br0`, multicast snooping off so multicast is simply flooded) and `n` *host*
//! namespaces. Each host is joined to the bridge by a veth pair whose host side is
//! called `eth0`; both ends are created directly inside their namespaces, so the
//! root namespace never sees them. Every namespace has `lo` up, and every host has a
//! route `224.0.0.0/4 dev eth0`, so multicast works without a default route.
//!
//! Each `Lan` takes a /24 out of `10.200.0.0`–`10.255.255.0` that no other live
//! `Lan` holds, in this process or any other: the choice is made under a file lock
//! (`/run/tagwire-testkit.lock`) by looking at the namespaces that exist. Namespace
//! names are `twk<pid>-<subnet>s` for the switch and `twk<pid>-<subnet>h<i>` for
//! host `i`; the pid lets [`cleanup_stale`] remove what a killed test process left
//! behind (the first `Lan::new` of every process calls it).
//!
//! # Using it from a test
//!
//! Network namespaces need root (CI runs the suite as root). A test first asks
//! [`skip_reason`]; when the machine cannot run it, the test prints the reason and
//! passes, so a developer's unprivileged `cargo test` stays green:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! if let Some(reason) = tagwire_testkit::skip_reason() {
//!     println!("skipped: {reason}");
//!     return Ok(());
//! }
//! let lan = tagwire_testkit::Lan::new(2)?;
//! let addr = lan.host(1).addr();
//! // A socket stays in the namespace it was created in, whichever thread uses it.
//! let socket = lan
//!     .host(1)
//!     .spawn(move || std::net::UdpSocket::bind((addr, 0)))?
//!     .join()
//!     .map_err(|_| "thread panicked")??;
//! # let _ = socket;
//! # Ok(())
//! # }
//! ```
//!
//! There are three ways into a host:
//!
//! - [`Host::spawn`] runs a closure on a new thread inside the namespace; threads it
//!   spawns inherit the namespace, so an in-process daemon per host is one call.
//! - [`Host::enter_current_thread`] moves the calling thread (for code that owns its
//!   threads).
//! - [`Host::command`] runs a program there through `ip netns exec`, for
//!   multi-process tests of the real binaries.
//!
//! Faults: [`Host::link_down`] / [`Host::link_up`] cut and restore the host's link
//! on both ends of its veth pair; [`Host::shape`] puts a token bucket on the host's
//! egress and [`Host::unshape`] removes it.
//!
//! # Invariants
//!
//! - Nothing is configured in the root namespace; a `Lan` is invisible from it.
//! - Dropping a [`Lan`] deletes every namespace it created (and with them the veths
//!   and the bridge), ignoring errors; it never panics.
//! - Library code never panics on the outcome of a command: failures are an
//!   [`Error`] naming the command and carrying its stderr.

mod netns;
pub mod sim;

pub use netns::{cleanup_stale, skip_reason, Error, Host, Lan};
