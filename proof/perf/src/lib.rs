//! # tagwire-perf: measuring tagwire against its floors and its peers
//!
//! Absolute latencies on a shared two-core virtual machine drift by a
//! factor of two or three from one minute to the next, so a tagwire number
//! on its own says little. This crate supplies what the `tagwire perf`
//! benchmarks need to report *ratios* instead, measured in the same run:
//!
//! * [`raw`]: the operating-system floors: a shared-memory ping-pong woken
//!   by futexes (`raw-futex`, the floor for a blocking receive), the same
//!   busy-polling (`raw-spin`, the floor for same-host latency) and UDP on
//!   loopback (`raw-udp`).
//! * [`ddsperf`]: Cyclone DDS's `ddsperf` run as an external peer on a
//!   loopback-only configuration, with its half round trips doubled.
//! * [`stats`]: nearest-rank percentiles per run and median/min/max over
//!   repetitions (interleave the systems, repeat at least three times).
//! * [`report`]: one JSON-lines [`report::Record`] per data point, and text
//!   tables shaped like a paper's figures with `tagwire/<baseline>` ratios.
//! * [`plot`]: PNG charts of the same records.
//! * [`workload`]: tagwire's own sender-based workloads (worker processes), and
//!   [`suite`]: the interleaved, repeated runs behind each `tagwire perf` mode.
//! * [`remote`]: the same across hosts (network namespaces, one daemon each),
//!   beside raw UDP and Cyclone DDS over the same link.
//! * [`peers`]: Zenoh and iceoryx2 run beside tagwire in the same run
//!   (the `tagwire-peers` binary of `proof/peers`).
//! * [`lang`]: the C++, Python and Java bindings' round trips, run by their
//!   own runner programs beside Rust's.
//! * [`table2`]: the ORTE paper's Table 2, a flat-out publisher to a lossless
//!   subscriber between C, Java and Rust runners, each pair against C→C.
//! * [`place`]: solve times of the proxy-placement solvers (`tagwire-place`),
//!   the push-pull paper's Table 3.
//! * [`costs`]: what each API call costs its caller, for timing analysis.
//!
//! Library code never panics on external input (process output, files,
//! sockets): failures come back as `anyhow` errors with context.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod child;
pub mod costs;
pub mod ddsgateway;
pub mod ddsperf;
pub mod footprint;
pub mod lang;
pub mod napa;
pub mod peers;
pub mod place;
pub mod plot;
pub mod priority;
pub mod raw;
pub mod remote;
pub mod report;
pub mod sender_priority;
pub mod soak;
pub mod stats;
pub mod suite;
pub mod table2;
pub mod workload;
