//! tagwire-daemon
