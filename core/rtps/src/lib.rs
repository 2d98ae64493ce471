//! # tagwire-rtps: RTPS 2.x messages, sans-IO
//!
//! docs/design.md §1 rows 10–11 and issue 20: tagwire speaks RTPS so that DDS
//! applications (Cyclone DDS, Fast DDS, ROS 2) exchange data with its tags.
//! This crate is the bottom of that: the RTPS message codec. It knows no
//! sockets, threads or clocks; bytes go in and out.
//!
//! * [`Message::parse`] reads a datagram: the 20-byte header, then every
//!   submessage in its own byte order (the E flag). It borrows from the
//!   datagram (payloads and parameter lists are slices of it) and rejects
//!   what Cyclone DDS rejects as malformed (a length that is not a multiple
//!   of 4 before another submessage, a set of more than 256 numbers, a
//!   sequence-number set based below 1, DATA with both data and key, an
//!   `octetsToInlineQos` that is not a multiple of 4). Unknown submessages
//!   are kept as [`Submessage::Unknown`] and skipped by whoever reads them.
//! * [`MessageBuilder`] writes one: little-endian, each submessage padded
//!   to 4 bytes.
//! * [`plist`]: parameter lists (discovery data and inline QoS).
//! * [`discovery`]: what SPDP and SEDP announce (participants, endpoints),
//!   read and written; [`qos`]: endpoints' QoS with the specification's
//!   defaults, and the request-offered matching of a reader with a writer
//!   that says why a pair does not match (type names are compared as
//!   strings: XTypes type information is not used).
//! * [`spdp`]: participant discovery as a state machine (announce, answer,
//!   leases, leaving), time passed in.
//! * [`reliable`]: the stateful reliable writer and reader (heartbeats,
//!   ACKNACKs, resends, GAPs), time passed in.
//! * [`sedp`]: endpoint discovery over the built-in reliable endpoints.
//! * [`participant`]: all of it as one domain participant: local writers
//!   and readers by topic, matched with the remote ones, samples in and out.
//!
//! Every decoder takes bytes that may come from an attacker on the network:
//! it returns an [`RtpsError`] and never panics (`proof/fuzz` target
//! `rtps_decode`). The wire facts come from the OMG RTPS 2.x specification
//! (sections cited where they are used) and from what Cyclone DDS sends
//! and accepts (captured packets under `tests/`).

mod cursor;
pub mod discovery;
pub mod frag;
mod message;
pub mod participant;
pub mod plist;
pub mod qos;
pub mod reliable;
pub mod sedp;
pub mod spdp;
mod types;

pub use message::{
    Data, DataFrag, Header, Message, MessageBuilder, Submessage, SubmessageId, HEADER_LEN,
};
pub use types::{
    EntityId, FragmentNumberSet, Guid, GuidPrefix, Locator, NumberSet, SequenceNumber,
    SequenceNumberSet, Time, MAX_SET_BITS,
};

use thiserror::Error;

/// A datagram a state machine wants sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where to.
    pub to: Locator,
    /// The datagram.
    pub bytes: Vec<u8>,
}

/// Why bytes are not an RTPS message this crate accepts.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RtpsError {
    /// Not an RTPS message at all (shorter than its header, or no `RTPS`
    /// magic): ignore it.
    #[error("not an RTPS message")]
    NotRtps,
    /// A major version other than 2.
    #[error("RTPS version {0}.{1} is not spoken here")]
    Version(u8, u8),
    /// The bytes ended before a field did.
    #[error("truncated {what}: {needed} bytes missing")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// How many bytes were missing.
        needed: usize,
    },
    /// A field holds a value the protocol does not allow.
    #[error("malformed: {0}")]
    Invalid(&'static str),
}
