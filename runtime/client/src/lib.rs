//! # tagwire: distribution tags for real-time programs
//!
//! Programs exchange messages through **distribution tags**, named channels such
//! as `/robot/laser`. A publisher never names its subscribers and a subscriber
//! never names its publishers, yet every message says who sent it (process id and
//! node address), and either side may ask who is on a tag.
//!
//! ```no_run
//! use std::time::Duration;
//! use tagwire::{Client, Domain, SubscribeOptions};
//!
//! let tw = Client::connect()?;                       // talks to the local tagwired
//! tw.create_tag("/robot/laser", Domain::Global)?;    // idempotent
//! let mut sub = tw.subscribe("/robot/laser", SubscribeOptions::default())?;
//! let mut publ = tw.publisher("/robot/laser")?;      // send access
//! publ.send(b"scan 1")?;
//! let msg = sub.receive(Some(Duration::from_secs(1)))?;
//! println!("{} bytes, seq {}, from {}", msg.payload.len(), msg.seq, msg.sender);
//! # Ok::<(), tagwire::Error>(())
//! ```
//!
//! ## How it works (docs/design.md §2)
//! This crate is the client library of the model: the **local request service**
//! (blocking calls to the node's daemon with a timeout), the **update thread**
//! (applies tag-table changes pushed by the daemon to the local replica, and
//! reconnects and re-registers when the daemon restarts), and the **delivery
//! service**. The steady-state path never talks to the daemon: [`Publisher::send`]
//! writes the message once into the tag's shared-memory ring, whatever the number
//! of subscribers, and [`Subscriber::receive`] reads it from there, sleeping on a
//! futex that publishers only touch with a system call when someone sleeps.
//! Messages larger than a ring slot (64 KiB by default) take a slower path
//! through the daemon, with no change to the call.

mod autostart;
mod client;
mod clock;
mod direct;
mod error;
mod gaps;
mod instances;
mod offered;
mod options;
mod publisher;
mod pull;
mod socket_spin;
mod subscriber;

use std::time::SystemTime;

pub use client::{Channels, Client, ClientOptions, Processes};
pub use error::Error;
pub use publisher::{Publisher, DEFAULT_SEND_TIMEOUT};
pub use subscriber::{
    MessageInfo, PublishOptions, SubscribeOptions, Subscriber, DEFAULT_DEPTH, FLOW_POLL,
    MAX_LOSSLESS,
};
pub use tagwire_instances::Counts as Filtered;
pub use tagwire_proto::ReplicaEntry;
pub use tagwire_wire::control::{
    HistoryQuery, KeepHistory, NodeState, NodeSummary, RingParams, StatsKind, StatsRow, TagSummary,
};
pub use tagwire_wire::instance::{Ext, InstanceState, Key, Origin};
pub use tagwire_wire::{
    Carrier, ChannelQos, Domain, Member, NodeAddr, Pacing, Pid, Priority, Proxy, Reliability,
    Sched, SenderInfo, SeqNum, TagName,
};

/// Runs the calling thread at `sched` (for the thread that publishes or
/// calls `receive` on a prioritised channel; the library's own threads
/// follow [`SubscribeOptions::sched`]). A real-time policy or a nice below
/// 0 without the privilege for it: [`Error::NotPermitted`], saying what
/// would grant it.
pub fn set_thread_sched(sched: Sched) -> Result<()> {
    tagwire_sched::apply(sched).map_err(sched_error)
}

/// Locks this process's memory, now and as it grows (`mlockall`), as a
/// real-time application does: every page is mapped when its mapping is
/// made (a tag's ring when the publisher or subscriber opens it), so a
/// send or receive never takes a page fault, which could wait for the
/// kernel's memory map lock held by a lower-priority thread of the process
/// (mapping or unmapping another tag's ring). Costs the rings' full size
/// in resident memory. Without `CAP_IPC_LOCK` or a large enough
/// `ulimit -l`: [`Error::NotPermitted`].
pub fn lock_memory() -> Result<()> {
    tagwire_sched::lock_memory().map_err(sched_error)
}

fn sched_error(e: tagwire_sched::SchedError) -> Error {
    match e {
        tagwire_sched::SchedError::NotPermitted { .. } => Error::NotPermitted(e.to_string()),
        tagwire_sched::SchedError::Os { .. } => Error::Io(e.to_string()),
    }
}

/// Largest message [`Publisher::send`] accepts (the blob path); above this,
/// [`Error::TooLarge`].
pub const MAX_MESSAGE: usize = 256 << 20;

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The bytes sent.
    pub payload: Vec<u8>,
    /// The publisher's sequence number (per publisher, from 1).
    pub seq: SeqNum,
    /// Who sent it.
    pub sender: SenderInfo,
    /// Which of the sender's publishers of the tag (with `sender`, the
    /// publisher `seq` counts for).
    pub stream: u16,
    /// When it was sent (the publisher's clock; for a DDS sample, its
    /// writer's source timestamp).
    pub timestamp: SystemTime,
    /// The instance, for a keyed message ([`Publisher::send_keyed`]).
    pub key: Option<Key>,
    /// The instance's state: [`InstanceState::Alive`] for data; a dispose or
    /// unregister comes with an empty payload.
    pub state: InstanceState,
    /// The publisher's ownership strength, if it set one.
    pub strength: Option<i32>,
    /// The DDS writer, for a sample a DDS gateway published (`sender` is
    /// then the gateway).
    pub origin: Option<Origin>,
}

impl Message {
    /// The message made of `payload` and what [`MessageInfo`] says of it.
    pub fn from_parts(payload: Vec<u8>, info: MessageInfo) -> Self {
        Self {
            payload,
            seq: info.seq,
            sender: info.sender,
            stream: info.stream,
            timestamp: info.timestamp,
            key: info.key,
            state: info.state,
            strength: info.strength,
            origin: info.origin,
        }
    }

    /// What [`Subscriber::receive_into`] would say of it.
    pub fn info(&self) -> MessageInfo {
        MessageInfo {
            seq: self.seq,
            sender: self.sender,
            stream: self.stream,
            timestamp: self.timestamp,
            key: self.key,
            state: self.state,
            strength: self.strength,
            origin: self.origin,
        }
    }
}

/// The frame header `h` of a message whose bytes (blob fetched) are in
/// `buf`, as the message's description: its extension block, if any,
/// read and taken off the front of `buf`.
pub(crate) fn describe(
    h: &tagwire_wire::frame::FrameHeader,
    buf: &mut Vec<u8>,
) -> Result<MessageInfo> {
    let mut ext = Ext::default();
    if h.flags & tagwire_wire::frame::FLAG_EXT != 0 {
        let (e, n) = Ext::parse(buf)
            .map_err(|e| Error::Protocol(format!("corrupt message extension: {e}")))?;
        buf.drain(..n);
        ext = e;
    }
    Ok(MessageInfo {
        seq: h.seq,
        sender: h.sender,
        stream: h.stream,
        timestamp: std::time::UNIX_EPOCH + std::time::Duration::from_nanos(h.timestamp_ns),
        key: ext.key,
        state: ext.state,
        strength: ext.strength,
        origin: ext.origin,
    })
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
