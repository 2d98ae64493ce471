//! # tagwire-wire: vocabulary and codecs
//!
//! This crate is the bottom of the tagwire stack (docs/design.md §3, layer 1). It holds
//! the identifiers every other crate speaks in ([`TagName`], [`Pid`], [`NodeAddr`],
//! [`SeqNum`], [`TagId`], [`SenderInfo`]) and the byte layouts that cross a process
//! boundary:
//!
//! * [`frame`]: the fixed header written in front of every message payload in a
//!   shared-memory slot and in every data datagram;
//! * [`control`]: the client ⇄ daemon control protocol carried over the daemon's
//!   Unix socket (requests, responses and tag-table notifications).
//!
//! It is *sans-IO*: no sockets, no threads, no clocks. Every decoder takes a byte
//! slice that may come from an attacker and returns a [`DecodeError`] instead of
//! panicking; property tests check `decode(encode(x)) == x` and that arbitrary bytes
//! never panic, and `proof/fuzz` has a fuzz target per decoder.

mod change;
pub mod codec;
pub mod control;
pub mod datagram;
pub mod frame;
pub mod handover;
mod ids;
pub mod instance;
mod pacing;
pub mod peer;
mod priority;
mod sched;

pub use change::{OnNodes, QosChange};
pub use codec::DecodeError;
pub use ids::{
    Carrier, ChannelQos, Domain, Member, NameError, NodeAddr, Pid, Proxy, Reliability, SenderInfo,
    SeqNum, TagId, TagName, MAX_TAG_NAME,
};
pub use pacing::Pacing;
pub use priority::Priority;
pub use sched::Sched;
