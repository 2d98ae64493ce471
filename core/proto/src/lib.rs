//! tagwire-proto
