//! tagwire-unix
