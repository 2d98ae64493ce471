//! tagwire
