//! What the core hands the runtime: transmits, events, refusals.

use std::net::SocketAddr;

use thiserror::Error;

use tagwire_wire::control::{ErrorCode, HistoryQuery};
use tagwire_wire::peer::{PeerMessage, TableOp};
use tagwire_wire::{Member, NodeAddr, QosChange, TagName};

use super::{LinkId, OpId, Source};

/// Something the runtime must do with its sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// Write `msg` on `link`, after everything queued on it before.
    Send {
        /// The link.
        link: LinkId,
        /// The message.
        msg: PeerMessage,
    },
    /// Open a connection to `node`'s update manager at `addr`, then call
    /// [`super::Membership::handle_connected`] (with `dialed: Some(node)`) or
    /// [`super::Membership::handle_dial_failed`].
    Dial {
        /// The node.
        node: NodeAddr,
        /// Its control address.
        addr: SocketAddr,
    },
    /// Close `link`, after writing what was queued on it. The core has
    /// already forgotten it; a later [`super::Membership::handle_closed`] for it is
    /// ignored.
    Close {
        /// The link.
        link: LinkId,
    },
}

/// Why a peer went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReason {
    /// Nothing heard from it for the lease.
    LeaseExpired,
    /// Its link closed.
    LinkClosed,
    /// It started again (a larger incarnation): this was its previous life.
    Restarted,
    /// It broke the protocol; its link was closed.
    Protocol(MembershipError),
}

/// What the core tells the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A node was learnt of (list, beacon or an inbound `Hello`).
    Discovered {
        /// The node.
        node: NodeAddr,
        /// Its name.
        name: String,
        /// How.
        source: Source,
    },
    /// A peer is up on `link`. The runtime builds this node's `Sync` and
    /// hands it to [`super::Membership::send_sync`]; ops replicated meanwhile wait
    /// behind it.
    PeerUp {
        /// The peer.
        peer: NodeAddr,
        /// Its link.
        link: LinkId,
        /// Its name.
        name: String,
        /// Where its delivery manager listens.
        delivery: SocketAddr,
        /// Its incarnation.
        incarnation: u64,
        /// A previous incarnation of it was known: it restarted.
        restarted: bool,
    },
    /// A peer is down: the runtime drops every right its clients held.
    /// Replications no longer wait for it.
    PeerDown {
        /// The peer.
        peer: NodeAddr,
        /// Why.
        reason: DownReason,
    },
    /// A peer's full state, to merge (`TagTable::apply_sync`).
    Sync {
        /// The peer.
        peer: NodeAddr,
        /// Its ops.
        ops: Vec<TableOp>,
    },
    /// A peer's change, to apply and then [`super::Membership::acknowledge`].
    Op {
        /// The peer.
        peer: NodeAddr,
        /// Its link (acknowledge on it).
        link: LinkId,
        /// The op's id.
        id: u64,
        /// The change.
        op: TableOp,
    },
    /// Every peer the op was sent to applied it (or went down).
    Replicated {
        /// The op.
        id: OpId,
    },
    /// The apply timeout passed before these peers applied the op.
    ReplicationTimedOut {
        /// The op.
        id: OpId,
        /// Who did not answer.
        missing: Vec<NodeAddr>,
    },
    /// A peer asks for messages from this node's history of a tag; answer
    /// with [`super::Membership::answer_pull`].
    Pull {
        /// The peer.
        peer: NodeAddr,
        /// Its link.
        link: LinkId,
        /// The request.
        id: u64,
        /// The tag.
        name: TagName,
        /// Which messages.
        query: HistoryQuery,
    },
    /// A peer's answer to [`super::Membership::pull`].
    Pulled {
        /// The peer.
        peer: NodeAddr,
        /// The request.
        id: u64,
        /// `(count, records)` when the peer keeps a history of the tag.
        answer: Option<(u32, Vec<u8>)>,
    },
    /// A peer asks this node to change the subscriptions to a tag that it
    /// holds; answer with [`super::Membership::answer_set_qos`].
    SetQos {
        /// The peer.
        peer: NodeAddr,
        /// Its link.
        link: LinkId,
        /// The request.
        id: u64,
        /// The tag.
        name: TagName,
        /// Whose subscriptions, and what they get.
        change: QosChange,
    },
    /// A peer's answer to [`super::Membership::set_qos`].
    QosSet {
        /// The peer.
        peer: NodeAddr,
        /// The request.
        id: u64,
        /// The changed receivers, or the refusal's code and reason.
        outcome: Result<Vec<Member>, (ErrorCode, String)>,
    },
}

/// Input the core refused. The link it came on is closed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MembershipError {
    /// No such link (already closed, or never opened).
    #[error("no link {0:?}")]
    UnknownLink(LinkId),
    /// A message other than `Hello` came first.
    #[error("{0} before Hello")]
    BeforeHello(&'static str),
    /// A second `Hello` on a link.
    #[error("second Hello on a link")]
    SecondHello,
    /// A node not on the node list (only listed nodes are admitted).
    #[error("node {0} is not on the node list")]
    NotListed(NodeAddr),
    /// A peer claims this node's own address.
    #[error("a peer claims our own address {0}")]
    OwnAddress(NodeAddr),
    /// We dialed one node and another answered.
    #[error("dialed {dialed}, but {answered} answered")]
    WrongPeer {
        /// Whom we dialed.
        dialed: NodeAddr,
        /// Who said Hello.
        answered: NodeAddr,
    },
    /// A second link to a live peer of the same incarnation.
    #[error("a second link to live peer {0}")]
    DuplicateLink(NodeAddr),
    /// A link from an earlier incarnation than the one known.
    #[error("stale link from {node}: incarnation {offered} < {known}")]
    StaleIncarnation {
        /// The node.
        node: NodeAddr,
        /// The incarnation known.
        known: u64,
        /// The incarnation its Hello carried.
        offered: u64,
    },
    /// A new link did not say `Hello` within the lease.
    #[error("no Hello within the lease")]
    HelloTimeout,
}

/// Counters of refused or ignored input (never logged per message).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Input refused with a [`MembershipError`].
    pub rejected: u64,
    /// Beacons ignored (our own are not counted): unlisted nodes.
    pub ignored_beacons: u64,
    /// `Applied`s for no op waiting on that peer.
    pub stray_acks: u64,
    /// Peers declared dead for silence.
    pub leases_expired: u64,
}
