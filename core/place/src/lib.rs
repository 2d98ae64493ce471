//! # tagwire-place: where to put the proxies
//!
//! In the push-pull model (Rajkumar & Juvva) a publisher of tag t on node P
//! sends every T seconds (rate f = 1/T, K bytes a message) and a
//! subscription s on node S asks for every n-th sample (period T′ = n·T,
//! rate f′ = f/n). A **proxy** on some node X does the down-scaling: the
//! full-rate stream travels P→X, the scaled one X→S, along shortest paths
//! (hop count, ties to the lower node index, see [`Topology::path`]). With
//! one period per hop, the end-to-end delay is
//!
//! ```text
//! δ = hops(P,X)·T + hops(X,S)·T′        feasible iff δ ≤ D (s's delay bound)
//! ```
//!
//! This crate chooses the proxy nodes: every subscription's delay bound met,
//! every link's bandwidth and every node's proxy CPU respected, at least
//! cost. It is a pure library (no I/O beyond parsing a string), used offline
//! by `tagwire place` and `tagwire perf place`.
//!
//! ## Model
//!
//! * Units: seconds, bytes, **bytes** per second; CPU in fractions of one
//!   CPU. A link's bandwidth is **one capacity shared by both directions**.
//! * A proxy costs `cpu_per_msg` seconds of CPU for every message it
//!   receives or sends (default 5 µs); a node offers `cpu_capacity` of a CPU
//!   to proxies (default 0.5). Every subscription's proxy counts, also for
//!   n = 1 (it is then a relay).
//! * [`CostModel::Unicast`] (the paper's): each subscription has its own
//!   flow, bandwidth `K·(hops(P,X)·f + hops(X,S)·f′)` per subscription.
//!   [`CostModel::Shared`] (what tagwire's delivery does): one full-rate
//!   copy per (tag, proxy node) serves every subscription of the tag there.
//!   See [`cost`] for the exact accounting.
//! * [`Objective`]: bandwidth (bytes/s summed over links, the paper's
//!   TotalCost), CPU, or a weighted sum of the two.
//!
//! ## Solvers
//!
//! * [`exhaustive`]: the paper's Appendix A algorithm, one proxy per tag,
//!   every node tried; [`exhaustive::candidates`] is the appendix's table
//!   (δ of each subscription and TotalCost per candidate node), and
//!   [`exhaustive::solve`] searches all tags jointly under the capacities.
//! * [`milp`]: a mixed-integer program over all tags (a proxy per
//!   subscription, or per tag with [`Options::one_proxy_per_tag`], which is
//!   then the exhaustive search's problem). Solved with `good_lp` and its
//!   pure-Rust `microlp` backend, chosen over HiGHS because it builds in
//!   seconds without a C++ toolchain (HiGHS: about 8 minutes here, plus
//!   cmake and libclang) and was as fast or faster on every generated
//!   instance measured; a 100-node / 50-tag / 200-subscription instance
//!   solves in tens of milliseconds, up to about 0.6 s when link
//!   capacities bind hard (1.7 s before the presolve described in [`milp`]).
//!   The measurements are in the [`milp`] module documentation and
//!   `bench/results/place.txt`.
//!
//! Both return a [`Placement`]: per subscription its proxy, δ and bound;
//! the totals; the constraints with zero slack ([`Placement::binding`]);
//! the capacities that moved the optimum away from the capacity-free one
//! ([`Placement::displaced_by`]); and the delay bounds that keep a proxy
//! from a cheaper node ([`Placement::held_back_by`]). When no placement exists they return
//! [`PlaceError::Infeasible`] saying why: per subscription the best δ
//! achievable when no node meets its bound, per tag the closest node when
//! no single proxy serves all its subscriptions, or the capacities the
//! cheapest delay-feasible placement overloads. Nothing here panics on input.
//!
//! ## Topology file (TOML)
//!
//! ```toml
//! [defaults]              # all optional
//! cpu_capacity = 0.5      # per node, fraction of one CPU
//! cpu_per_msg = 5e-6      # per tag, CPU seconds per message a proxy handles
//! bandwidth = 1.25e8      # per link, bytes/s (default: unlimited)
//!
//! [[node]]
//! name = "n1"
//! cpu_capacity = 0.25     # optional, overrides the default
//! address = "10.0.0.1"    # optional: the node's IP, for tagwired --topology
//!
//! [[node]]
//! name = "n2"
//!
//! [[link]]
//! a = "n1"
//! b = "n2"
//! bandwidth = 1e6         # optional, bytes/s, both directions together
//!
//! [[tag]]
//! name = "/sensor"
//! publisher = "n1"
//! period = 0.01           # seconds; or rate = 100.0 (messages/s)
//! size = 1000             # bytes per message
//!
//! [[subscription]]
//! name = "far"            # optional, default "TAG@NODE"
//! tag = "/sensor"
//! node = "n2"
//! scale = 4               # every 4th sample (default 1)
//! delay_bound = 0.05      # seconds
//! ```
//!
//! Unknown fields, unknown nodes or tags, duplicate names, a disconnected
//! graph, `scale = 0` and non-positive periods, sizes or bandwidths are
//! [`TopologyError`]s naming the offending entry.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod cost;
pub mod exhaustive;
mod explain;
pub mod generate;
pub mod milp;
mod topology;

pub use cost::{seconds, Assignment, CostModel, Limit, Load, Objective, Options, Placement};
pub use explain::{Infeasible, Miss, PlaceError, Reason};
pub use topology::{
    Link, LinkId, Node, NodeId, SubId, Subscription, Tag, TagId, Topology, TopologyBuilder,
    TopologyError, DEFAULT_CPU_CAPACITY, DEFAULT_CPU_PER_MSG,
};

/// Which solver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// [`exhaustive::solve`].
    Exhaustive,
    /// [`milp::solve`].
    Milp,
}

/// Solves with the chosen solver.
pub fn solve(topo: &Topology, solver: Solver, opts: &Options) -> Result<Placement, PlaceError> {
    match solver {
        Solver::Exhaustive => exhaustive::solve(topo, opts),
        Solver::Milp => milp::solve(topo, opts),
    }
}
