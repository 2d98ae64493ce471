//! tagwire-perf
