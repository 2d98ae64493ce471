//! The one place the ring's atomics come from, so that a `loom` model can swap
//! them in (iceoryx2's approach). Today this re-exports `std`; the loom model of
//! the ring is not written yet.

pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
