//! The client ⇄ daemon control protocol.
//!
//! Carried over the daemon's Unix `SOCK_SEQPACKET` socket, one message per
//! packet (so there is no length prefix). File descriptors (shared-memory
//! segments, blobs) travel beside a message as `SCM_RIGHTS`; the message says
//! when one is expected. The steady-state send and receive paths never use this
//! protocol (docs/design.md §1 row 4): it serves tag creation, rights, listings and
//! tag-table notifications.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        magic "TW" (0x5754)    |  version = 2  |     kind      |
//! +-------------------------------+---------------+---------------+
//! |   request id (u32; echoed in the response, 0 for an update)   |
//! +---------------------------------------------------------------+
//! |   body, by kind: requests 1..=63, responses 64..=127,          |
//! ~   tag-table update 128                                         ~
//! +---------------------------------------------------------------+
//! ```

use crate::codec::{DecodeError, Reader, Writer};

mod encoding;
mod stats;

use crate::ids::{ChannelQos, Domain, Member, NodeAddr, Pid, TagId, TagName};
use crate::{OnNodes, QosChange};
use encoding::*;
pub use stats::{StatsKind, StatsRow, MAX_COUNTERS};

/// First two bytes of every control message ("TW" little-endian).
pub const MAGIC: u16 = 0x5754;
/// Control protocol version (8: `Response::Channels` lists each sender's
/// `ChannelQos`; 7: `ChannelQos` and `QosChange` carry a publisher's
/// pacing; 5: `ChannelQos` carries thread scheduling, and a
/// publisher asks one).
pub const VERSION: u8 = 8;
/// Largest control message either side accepts (a tag listing grows with the
/// table). Receivers size their buffer to each packet, so this costs nothing.
pub const MAX_MESSAGE: usize = 16 << 20;

/// Shape of a tag's shared-memory ring. Zero fields mean "the daemon's default".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingParams {
    /// Number of message slots.
    pub slots: u32,
    /// Bytes of payload one slot holds (messages above this take the blob path).
    pub slot_payload: u32,
}

/// How much of a tag's history a daemon keeps for pulls (the pull buffers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeepHistory {
    /// Messages kept; 0 keeps none.
    pub depth: u32,
    /// Bytes of payload kept at most; 0 means the daemon's default.
    pub max_bytes: u64,
}

/// A client's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// First message on a connection.
    Hello {
        /// The client's process id as it believes it (the daemon trusts SO_PEERCRED).
        pid: Pid,
        /// A label for logs (program name).
        name: String,
    },
    /// Create a tag; creating an existing tag succeeds.
    CreateTag {
        /// Tag name.
        name: TagName,
        /// Visibility.
        domain: Domain,
        /// Ring shape; zeros for defaults.
        ring: RingParams,
        /// History this node's daemon keeps of the tag from its creation on
        /// (a depth of 0: none). Applied only by the call that creates the tag.
        history: KeepHistory,
    },
    /// Destroy a tag, revoking every right on it.
    DestroyTag {
        /// Tag name.
        name: TagName,
    },
    /// Get send access; answered with [`Response::TagOpened`] and the segment fd.
    GetSendAccess {
        /// Tag name.
        name: TagName,
        /// What the publisher asks of the connections it feeds: its packet
        /// class and thread policy (the rest is unused).
        qos: ChannelQos,
    },
    /// Give send access back.
    ReleaseSendAccess {
        /// The tag.
        tag: TagId,
    },
    /// Subscribe; answered with [`Response::TagOpened`] and the segment fd.
    Subscribe {
        /// Tag name.
        name: TagName,
        /// Queue depth (history depth) of this subscription.
        depth: u32,
        /// What the subscription asks of the connections feeding it.
        qos: ChannelQos,
        /// A lossless subscription: the daemon holds a lossless gate at the
        /// start position for the client before the grant is visible
        /// ([`TagOpened::gate`]), so no writer laps it before it reads.
        lossless: bool,
    },
    /// Cancel one subscription.
    Unsubscribe {
        /// The tag.
        tag: TagId,
        /// The generation of the subscription's seat in the tag's ring (0:
        /// none), which the daemon retires with it.
        seat: u32,
    },
    /// List the senders and receivers of a tag.
    ListMembers {
        /// Tag name.
        name: TagName,
    },
    /// List every tag.
    ListTags,
    /// Store a message too large for a slot; a memfd holding it is attached.
    PutBlob {
        /// The tag it is published on.
        tag: TagId,
        /// Its length.
        len: u64,
        /// The blob this publisher stored before (0: none), now published
        /// or given up: the daemon stops keeping it for the publisher's
        /// sake (readers may still need it).
        done: u64,
    },
    /// Fetch a stored large message; answered with [`Response::BlobFound`] + fd.
    GetBlob {
        /// The tag.
        tag: TagId,
        /// The blob.
        blob_id: u64,
    },
    /// Liveness check.
    Ping,
    /// List the other nodes this daemon knows.
    ListNodes,
    /// Keep (or, with `depth` 0, stop keeping) a history of a tag's last
    /// messages in this daemon: the admin command of the pull buffers.
    SetHistory {
        /// Tag name.
        name: TagName,
        /// Messages kept.
        depth: u32,
        /// Bytes of payload kept at most (0: the daemon's default).
        max_bytes: u64,
    },
    /// Pull messages from a tag's history; answered with
    /// [`Response::Pulled`] and a memfd holding them.
    Pull {
        /// Tag name.
        name: TagName,
        /// Which messages.
        query: HistoryQuery,
    },
    /// A UDP socket of the daemon's network, bound to its node address, for
    /// the client's publishers to send the first copy of their own messages
    /// from their own thread (the send ticket); answered with
    /// [`Response::Ok`] and the socket's descriptor, or an error from a daemon
    /// without a network.
    SendSocket,
    /// The key this client seals its first copies of `name` with (the send
    /// ticket), on a daemon with a domain key: answered with
    /// [`Response::TagKey`] if the client holds send access to the tag,
    /// [`Response::Ok`] from a daemon without a key.
    TagKey {
        /// The tag.
        name: TagName,
    },
    /// Counters for `tagwire stats`. From a client: this node's counters
    /// and every local subscriber's, answered with [`Response::Stats`]. From
    /// the daemon to a client: report your subscribers' (with
    /// [`Request::Report`], not a response).
    Stats,
    /// A client's counters, answering the daemon's `Stats` numbered `query`.
    Report {
        /// The id of the daemon's `Stats`.
        query: u32,
        /// The client's rows.
        rows: Vec<StatsRow>,
    },
    /// From the daemon to a client: give up your direct delivery of `tag`
    /// (docs/design.md §6). The client stops receiving the tag on its own
    /// socket and answers with [`Request::Streams`] numbered `query` = this
    /// request's id (not a response).
    GiveStreams {
        /// The tag.
        tag: TagId,
    },
    /// A tag's inbound streams, encoded by [`crate::handover::encode`] in a
    /// memfd beside the message. From a client, answering the daemon's
    /// `GiveStreams` numbered `query` (answered with [`Response::Ok`]).
    /// From the daemon to a client (`query` 0): take over the tag's
    /// delivery on your own socket, from these streams on.
    Streams {
        /// The tag.
        tag: TagId,
        /// The `GiveStreams` answered (0: none).
        query: u32,
    },
    /// From a daemon with a domain key to its direct receiver of a tag,
    /// before [`Request::Streams`] (query 0): the holding key it opens the
    /// tag's datagrams and seals its acknowledgements with
    /// (`tagwire_auth::HoldingKey`). Not answered.
    Holding {
        /// The tag.
        tag: TagId,
        /// The key.
        key: [u8; 32],
        /// Whether to encrypt acknowledgements' bodies.
        encrypt: bool,
        /// The key comes from a domain key of an odd generation (a key
        /// roll, `tagwire_auth::KeyFile`).
        odd: bool,
        /// Another generation's key of the holding the client has (a key
        /// roll begins): keep both. Without it, this key alone (a new
        /// holding, or a roll is over).
        also: bool,
    },
    /// The key this client seals its first copies of `name` to the direct
    /// receiver at `to` with (send ticket; the receiver's grant `member`, as
    /// the ticket says): answered with [`Response::TagKey`] if the client
    /// holds send access to the tag and `to` is that grant's socket.
    DirectKey {
        /// The tag.
        name: TagName,
        /// The direct receiver's socket.
        to: std::net::SocketAddr,
        /// Its grant (member id).
        member: u64,
    },
    /// From the daemon to a client that may write a tag: a subscriber's
    /// seat in the tag's ring (its memfd beside the message), which the
    /// client's writers wake and whose gate they read from now on. Not
    /// answered.
    Seat {
        /// The tag.
        tag: TagId,
        /// The seat's generation.
        seat: u32,
    },
    /// List a tag's senders and its receivers with what each asks of the
    /// connections that feed it: answered with `Response::Channels`.
    Channels {
        /// Tag name.
        name: TagName,
    },
    /// Change the packet class or thread policy of subscriptions to a tag:
    /// `change` says whose (a process, or every one) and what, `nodes`
    /// on which nodes. Answered with `Response::Members`, the receivers
    /// whose QoS changed (none when they already had it). Only the node
    /// that holds a subscription restates it (a table operation every
    /// sending node re-routes on): the asked daemon forwards the change
    /// to the others (`peer::PeerMessage::SetQos`).
    SetChannelQos {
        /// Tag name.
        name: TagName,
        /// On which nodes.
        nodes: OnNodes,
        /// Whose subscriptions, and what they get.
        change: QosChange,
    },
}

/// Which messages of a history to pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryQuery {
    /// The last `n` messages.
    Last(u32),
    /// Messages whose (per-publisher) sequence number is at least this.
    Since(u64),
    /// Messages sent within `[from_ns, to_ns]` (publisher's clock, ns since
    /// the Unix epoch).
    Between {
        /// Start, inclusive.
        from_ns: u64,
        /// End, inclusive.
        to_ns: u64,
    },
}

impl HistoryQuery {
    pub(crate) fn encode(&self, w: &mut Writer) {
        match *self {
            HistoryQuery::Last(n) => {
                w.u8(0).u32(n);
            }
            HistoryQuery::Since(s) => {
                w.u8(1).u64(s);
            }
            HistoryQuery::Between { from_ns, to_ns } => {
                w.u8(2).u64(from_ns).u64(to_ns);
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match r.u8()? {
            0 => HistoryQuery::Last(r.u32()?),
            1 => HistoryQuery::Since(r.u64()?),
            2 => HistoryQuery::Between {
                from_ns: r.u64()?,
                to_ns: r.u64()?,
            },
            v => {
                return Err(DecodeError::Unknown {
                    what: "history query",
                    value: u32::from(v),
                })
            }
        })
    }
}

/// A peer node's state, as its daemon's neighbour sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Known (node list or beacon) but not connected yet.
    Connecting,
    /// Connected and heard from within the lease.
    Up,
    /// Silent for longer than the lease.
    Dead,
}

/// One row of a node listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSummary {
    /// The node's address.
    pub node: NodeAddr,
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: NodeState,
    /// Milliseconds since it was last heard from (`u64::MAX`: never).
    pub last_heard_ms: u64,
    /// How it was found: the node list, a beacon, or it connected to us.
    pub source: String,
}

/// Error classes the daemon reports; each maps to one client error variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// No tag of that name (or id).
    UnknownTag,
    /// The tag name is not valid.
    InvalidName,
    /// The client does not hold send access.
    NoSendAccess,
    /// The client is not subscribed.
    NotSubscribed,
    /// The stored large message was evicted before it was fetched.
    BlobGone,
    /// The request was malformed or missing its file descriptor.
    BadRequest,
    /// The daemon failed (e.g. out of memory for a segment).
    Internal,
    /// The change was made here, but some peer daemons did not confirm it in
    /// time (the message names them).
    PeersUnresponsive,
    /// `Proxy::Auto` cannot be placed: no topology, the tag or node is not
    /// in it, or no node meets the delay bound (the message says which).
    NoPlacement,
    /// Every large message the tag may keep is still needed by a reader
    /// that must lose nothing: the publisher waits and tries again.
    BlobsHeld,
    /// The daemon's policy does not grant the client this right on the tag
    /// (the message says which rule applies and what would grant it).
    Denied,
    /// A resource bound was reached (`quota: <what> (limit <n>)`).
    Quota,
    /// The client may not ask for this itself (a real-time thread policy
    /// without `CAP_SYS_NICE` or the matching limit; the message says what
    /// would grant it).
    NotPermitted,
    /// A code this build does not know.
    Unknown(u16),
}

impl ErrorCode {
    pub(crate) fn to_u16(self) -> u16 {
        match self {
            ErrorCode::UnknownTag => 1,
            ErrorCode::InvalidName => 2,
            ErrorCode::NoSendAccess => 3,
            ErrorCode::NotSubscribed => 4,
            ErrorCode::BlobGone => 5,
            ErrorCode::BadRequest => 6,
            ErrorCode::Internal => 7,
            ErrorCode::PeersUnresponsive => 8,
            ErrorCode::NoPlacement => 9,
            ErrorCode::BlobsHeld => 10,
            ErrorCode::Denied => 11,
            ErrorCode::Quota => 12,
            ErrorCode::NotPermitted => 13,
            ErrorCode::Unknown(v) => v,
        }
    }

    pub(crate) fn from_u16(v: u16) -> Self {
        match v {
            1 => ErrorCode::UnknownTag,
            2 => ErrorCode::InvalidName,
            3 => ErrorCode::NoSendAccess,
            4 => ErrorCode::NotSubscribed,
            5 => ErrorCode::BlobGone,
            6 => ErrorCode::BadRequest,
            7 => ErrorCode::Internal,
            8 => ErrorCode::PeersUnresponsive,
            9 => ErrorCode::NoPlacement,
            10 => ErrorCode::BlobsHeld,
            11 => ErrorCode::Denied,
            12 => ErrorCode::Quota,
            13 => ErrorCode::NotPermitted,
            v => ErrorCode::Unknown(v),
        }
    }
}

/// What the daemon tells a client about an opened tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagOpened {
    /// The tag's id.
    pub tag: TagId,
    /// Its name.
    pub name: TagName,
    /// Its domain.
    pub domain: Domain,
    /// The actual ring shape (defaults resolved).
    pub ring: RingParams,
    /// The ring's record index when the right was granted: a subscriber reads
    /// from here, so nothing published after the daemon counted it is missed.
    pub start: u64,
    /// For a lossless subscription: the gate the daemon holds at `start` for
    /// the client, to take over (`None`: the client attaches its own).
    pub gate: Option<HeldGate>,
}

/// A ring gate the daemon holds for a client (see [`TagOpened::gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldGate {
    /// The gate's index in the ring.
    pub index: u8,
    /// The client's pid as the daemon wrote it into the gate.
    pub pid: u32,
}

/// One row of a tag listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSummary {
    /// The tag's id.
    pub tag: TagId,
    /// Its name.
    pub name: TagName,
    /// Its domain.
    pub domain: Domain,
    /// Its senders.
    pub senders: Vec<Member>,
    /// Its receivers.
    pub receivers: Vec<Member>,
}

/// The daemon's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Done, nothing to return.
    Ok,
    /// Answer to [`Request::Hello`].
    Welcome {
        /// The node address this daemon stamps on messages.
        node: NodeAddr,
        /// The daemon's pid.
        daemon_pid: Pid,
        /// The pid the daemon saw for this client (SO_PEERCRED).
        client_pid: Pid,
        /// Current tag-table version.
        table_version: u64,
    },
    /// Answer to [`Request::CreateTag`].
    TagCreated {
        /// The tag's id.
        tag: TagId,
        /// False when the tag already existed.
        created: bool,
    },
    /// A tag's segment (fd attached) and shape.
    TagOpened(TagOpened),
    /// Senders and receivers of a tag.
    Members {
        /// Senders.
        senders: Vec<Member>,
        /// Receivers.
        receivers: Vec<Member>,
    },
    /// A tag's senders and its receivers, each with its `ChannelQos` (a
    /// sender's: the class, policy and pacing its publisher asked).
    Channels {
        /// Senders and what each asks for.
        senders: Vec<(Member, ChannelQos)>,
        /// Receivers and what each asks for.
        receivers: Vec<(Member, ChannelQos)>,
    },
    /// Every tag, as of table version `version`.
    Tags {
        /// Table version the snapshot reflects.
        version: u64,
        /// The tags.
        tags: Vec<TagSummary>,
    },
    /// A large message was stored under this id.
    BlobStored {
        /// Its id.
        blob_id: u64,
    },
    /// A large message (fd attached).
    BlobFound {
        /// Its length.
        len: u64,
    },
    /// Answer to [`Request::Pull`]: `count` messages in the attached memfd,
    /// `len` bytes of records `[u32 LE length][frame header + payload]`,
    /// oldest first.
    Pulled {
        /// Messages.
        count: u32,
        /// Bytes.
        len: u64,
    },
    /// Answer to [`Request::Ping`].
    Pong,
    /// Answer to [`Request::ListNodes`]: this node first, then its peers.
    Nodes {
        /// The nodes.
        nodes: Vec<NodeSummary>,
    },
    /// Answer to [`Request::Stats`].
    Stats {
        /// The node's rows, then its subscribers'.
        rows: Vec<StatsRow>,
    },
    /// Answer to [`Request::TagKey`]: the tag's key for the daemon's
    /// current life.
    TagKey {
        /// The daemon's life (the key's epoch).
        epoch: u64,
        /// The key.
        key: [u8; 32],
        /// Whether to encrypt bodies too.
        encrypt: bool,
        /// The key comes from a domain key of an odd generation (a key
        /// roll: seal with `tagwire_auth::DatagramKey::with_odd`).
        odd: bool,
    },
    /// The request failed.
    Error {
        /// What class of failure.
        code: ErrorCode,
        /// A message for a person.
        message: String,
    },
}

/// A change to the global tag table, pushed by the daemon to its clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// Table version after the change (strictly increasing).
    pub version: u64,
    /// What changed.
    pub event: TableEvent,
}

/// One tag-table change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableEvent {
    /// A tag was created.
    TagCreated {
        /// Id.
        tag: TagId,
        /// Name.
        name: TagName,
        /// Domain.
        domain: Domain,
    },
    /// A tag was destroyed: every right on it is gone.
    TagDestroyed {
        /// Id.
        tag: TagId,
        /// Name.
        name: TagName,
    },
    /// A sender got send access.
    SenderJoined {
        /// Tag.
        tag: TagId,
        /// Who.
        member: Member,
    },
    /// A sender released send access (or died).
    SenderLeft {
        /// Tag.
        tag: TagId,
        /// Who.
        member: Member,
    },
    /// A receiver subscribed.
    ReceiverJoined {
        /// Tag.
        tag: TagId,
        /// Who.
        member: Member,
    },
    /// A receiver unsubscribed (or died).
    ReceiverLeft {
        /// Tag.
        tag: TagId,
        /// Who.
        member: Member,
    },
    /// A receiver's `ChannelQos` changed (`Request::SetChannelQos`).
    ReceiverQos {
        /// Tag.
        tag: TagId,
        /// Who.
        member: Member,
        /// What it asks for now.
        qos: ChannelQos,
    },
}

/// Any control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Client → daemon.
    Request {
        /// Correlates the response.
        id: u32,
        /// The request.
        body: Request,
    },
    /// Daemon → client, answering request `id`.
    Response {
        /// The request's id.
        id: u32,
        /// The response.
        body: Response,
    },
    /// Daemon → client, unsolicited.
    Update(Update),
}

impl Message {
    /// Encodes the message.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        let (kind, id) = match self {
            Message::Request { id, body } => (request_kind(body), *id),
            Message::Response { id, body } => (response_kind(body), *id),
            Message::Update(_) => (KIND_UPDATE, 0),
        };
        w.u16(MAGIC).u8(VERSION).u8(kind).u32(id);
        match self {
            Message::Request { body, .. } => encode_request(body, &mut w),
            Message::Response { body, .. } => encode_response(body, &mut w),
            Message::Update(u) => encode_update(u, &mut w),
        }
        w.into_inner()
    }

    /// Decodes one message; the whole input must be consumed.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        r.preamble(MAGIC, VERSION)?;
        let kind = r.u8()?;
        let id = r.u32()?;
        let msg = match kind {
            1..=63 => Message::Request {
                id,
                body: decode_request(kind, &mut r)?,
            },
            64..=127 => Message::Response {
                id,
                body: decode_response(kind, &mut r)?,
            },
            KIND_UPDATE => Message::Update(decode_update(&mut r)?),
            k => {
                return Err(DecodeError::Unknown {
                    what: "message kind",
                    value: u32::from(k),
                })
            }
        };
        r.finish()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SenderInfo;
    use crate::{Priority, Sched};
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = TagName> {
        "(/[a-z0-9_]{1,12}){1,4}".prop_map(|s| TagName::new(&s).unwrap())
    }

    fn member() -> impl Strategy<Value = Member> {
        (any::<u32>(), any::<[u8; 16]>(), any::<u64>()).prop_map(|(p, n, t)| Member {
            who: SenderInfo {
                pid: Pid(p),
                node: NodeAddr::from_bytes(n),
            },
            since_unix_ns: t,
        })
    }

    fn domain() -> impl Strategy<Value = Domain> {
        prop_oneof![Just(Domain::Global), Just(Domain::Local)]
    }

    fn ring() -> impl Strategy<Value = RingParams> {
        (any::<u32>(), any::<u32>()).prop_map(|(slots, slot_payload)| RingParams {
            slots,
            slot_payload,
        })
    }

    fn request() -> impl Strategy<Value = Request> {
        prop_oneof![
            (any::<u32>(), "[ -~]{0,40}").prop_map(|(p, n)| Request::Hello {
                pid: Pid(p),
                name: n
            }),
            (name(), domain(), ring(), any::<u32>(), any::<u64>()).prop_map(
                |(name, domain, ring, depth, max_bytes)| Request::CreateTag {
                    name,
                    domain,
                    ring,
                    history: KeepHistory { depth, max_bytes },
                }
            ),
            name().prop_map(|name| Request::DestroyTag { name }),
            (name(), crate::ids::arb_qos())
                .prop_map(|(name, qos)| Request::GetSendAccess { name, qos }),
            any::<u32>().prop_map(|t| Request::ReleaseSendAccess { tag: TagId(t) }),
            (name(), any::<u32>(), crate::ids::arb_qos(), any::<bool>()).prop_map(
                |(name, depth, qos, lossless)| Request::Subscribe {
                    name,
                    depth,
                    qos,
                    lossless
                }
            ),
            (any::<u32>(), any::<u32>()).prop_map(|(t, seat)| Request::Unsubscribe {
                tag: TagId(t),
                seat
            }),
            (
                any::<u32>(),
                any::<[u8; 32]>(),
                any::<bool>(),
                any::<bool>(),
                any::<bool>()
            )
                .prop_map(|(t, key, encrypt, odd, also)| Request::Holding {
                    tag: TagId(t),
                    key,
                    encrypt,
                    odd,
                    also,
                }),
            (name(), any::<[u8; 16]>(), any::<u16>(), any::<u64>()).prop_map(
                |(name, ip, port, member)| Request::DirectKey {
                    name,
                    to: std::net::SocketAddr::new(NodeAddr::from_bytes(ip).0, port),
                    member,
                }
            ),
            (any::<u32>(), any::<u32>()).prop_map(|(t, seat)| Request::Seat {
                tag: TagId(t),
                seat
            }),
            name().prop_map(|name| Request::Channels { name }),
            (
                name(),
                proptest::option::of(1..u32::MAX),
                proptest::option::of(0u8..68),
                proptest::option::of(any::<[u8; 2]>()),
                (0u8..3, any::<[u8; 16]>(), any::<bool>()),
            )
                .prop_map(|(name, pid, v, s, (n, addr, publishers))| {
                    Request::SetChannelQos {
                        name,
                        nodes: match n {
                            0 => OnNodes::This,
                            1 => OnNodes::Node(NodeAddr::from_bytes(addr)),
                            _ => OnNodes::Every,
                        },
                        change: QosChange {
                            publishers,
                            pid: pid.map(Pid),
                            // The four named classes, then every raw DSCP.
                            priority: v.map(|v| {
                                if v < 4 {
                                    Priority::from_u8(v).unwrap()
                                } else {
                                    Priority::Dscp(v - 4)
                                }
                            }),
                            sched: s.map(|s| {
                                Sched::from_bytes(s).unwrap_or(Sched::Fifo(s[1] % 99 + 1))
                            }),
                            pacing: s.map(|s| match s[0] % 4 {
                                0 => crate::Pacing::Daemon,
                                1 => crate::Pacing::Off,
                                2 => crate::Pacing::Adaptive,
                                _ => crate::Pacing::Fixed(u64::from(s[1]) + 1),
                            }),
                        },
                    }
                }),
            name().prop_map(|name| Request::ListMembers { name }),
            Just(Request::ListTags),
            (any::<u32>(), any::<u64>()).prop_map(|(t, len)| Request::PutBlob {
                tag: TagId(t),
                len,
                done: len / 3,
            }),
            (any::<u32>(), any::<u64>()).prop_map(|(t, b)| Request::GetBlob {
                tag: TagId(t),
                blob_id: b
            }),
            Just(Request::Ping),
            Just(Request::ListNodes),
            Just(Request::SendSocket),
            name().prop_map(|name| Request::TagKey { name }),
            any::<u32>().prop_map(|t| Request::GiveStreams { tag: TagId(t) }),
            (any::<u32>(), any::<u32>()).prop_map(|(t, query)| Request::Streams {
                tag: TagId(t),
                query
            }),
            Just(Request::Stats),
            (any::<u32>(), rows()).prop_map(|(query, rows)| Request::Report { query, rows }),
            (name(), any::<u32>(), any::<u64>()).prop_map(|(name, depth, max_bytes)| {
                Request::SetHistory {
                    name,
                    depth,
                    max_bytes,
                }
            }),
            (name(), query()).prop_map(|(name, query)| Request::Pull { name, query }),
        ]
    }

    fn rows() -> impl Strategy<Value = Vec<StatsRow>> {
        let row = (
            any::<u8>(),
            "[a-z/]{0,12}",
            "[a-z0-9. ]{0,12}",
            proptest::collection::vec(("[a-z_]{1,10}", any::<u64>()), 0..6),
        )
            .prop_map(|(k, tag, who, counters)| StatsRow {
                kind: StatsKind::from_u8(k),
                tag,
                who,
                counters,
            });
        proptest::collection::vec(row, 0..5)
    }

    fn query() -> impl Strategy<Value = HistoryQuery> {
        prop_oneof![
            any::<u32>().prop_map(HistoryQuery::Last),
            any::<u64>().prop_map(HistoryQuery::Since),
            (any::<u64>(), any::<u64>())
                .prop_map(|(from_ns, to_ns)| HistoryQuery::Between { from_ns, to_ns }),
        ]
    }

    fn error_code() -> impl Strategy<Value = ErrorCode> {
        any::<u16>().prop_map(ErrorCode::from_u16)
    }

    fn response() -> impl Strategy<Value = Response> {
        let members = || proptest::collection::vec(member(), 0..4);
        prop_oneof![
            Just(Response::Ok),
            Just(Response::Pong),
            (
                any::<u64>(),
                any::<[u8; 32]>(),
                any::<bool>(),
                any::<bool>()
            )
                .prop_map(|(epoch, key, encrypt, odd)| Response::TagKey {
                    epoch,
                    key,
                    encrypt,
                    odd,
                }),
            proptest::collection::vec(
                (
                    any::<[u8; 16]>(),
                    "[a-z]{0,8}",
                    0..3u8,
                    any::<u64>(),
                    "[a-z]{0,6}"
                ),
                0..4
            )
            .prop_map(|v| Response::Nodes {
                nodes: v
                    .into_iter()
                    .map(|(n, name, st, heard, source)| NodeSummary {
                        node: NodeAddr::from_bytes(n),
                        name,
                        state: [NodeState::Connecting, NodeState::Up, NodeState::Dead]
                            [usize::from(st)],
                        last_heard_ms: heard,
                        source,
                    })
                    .collect()
            }),
            rows().prop_map(|rows| Response::Stats { rows }),
            (any::<[u8; 16]>(), any::<u32>(), any::<u32>(), any::<u64>()).prop_map(
                |(n, d, c, v)| Response::Welcome {
                    node: NodeAddr::from_bytes(n),
                    daemon_pid: Pid(d),
                    client_pid: Pid(c),
                    table_version: v
                }
            ),
            (any::<u32>(), any::<bool>()).prop_map(|(t, created)| Response::TagCreated {
                tag: TagId(t),
                created
            }),
            (any::<u32>(), name(), domain(), ring()).prop_map(|(t, name, domain, ring)| {
                Response::TagOpened(TagOpened {
                    tag: TagId(t),
                    name,
                    domain,
                    ring,
                    start: u64::from(t) * 3,
                    gate: (t % 2 == 1).then_some(HeldGate {
                        index: (t % 8) as u8,
                        pid: t / 3,
                    }),
                })
            }),
            (members(), members())
                .prop_map(|(senders, receivers)| Response::Members { senders, receivers }),
            (
                proptest::collection::vec((member(), crate::ids::arb_qos()), 0..5),
                proptest::collection::vec((member(), crate::ids::arb_qos()), 0..5)
            )
                .prop_map(|(senders, receivers)| Response::Channels { senders, receivers }),
            (
                any::<u64>(),
                proptest::collection::vec(
                    (any::<u32>(), name(), domain(), members(), members()),
                    0..4
                )
            )
                .prop_map(|(version, v)| {
                    Response::Tags {
                        version,
                        tags: v
                            .into_iter()
                            .map(|(t, name, domain, senders, receivers)| TagSummary {
                                tag: TagId(t),
                                name,
                                domain,
                                senders,
                                receivers,
                            })
                            .collect(),
                    }
                }),
            any::<u64>().prop_map(|blob_id| Response::BlobStored { blob_id }),
            any::<u64>().prop_map(|len| Response::BlobFound { len }),
            (any::<u32>(), any::<u64>()).prop_map(|(count, len)| Response::Pulled { count, len }),
            (error_code(), "[ -~]{0,60}")
                .prop_map(|(code, message)| Response::Error { code, message }),
        ]
    }

    fn event() -> impl Strategy<Value = TableEvent> {
        prop_oneof![
            (any::<u32>(), name(), domain()).prop_map(|(t, name, domain)| TableEvent::TagCreated {
                tag: TagId(t),
                name,
                domain
            }),
            (any::<u32>(), name()).prop_map(|(t, name)| TableEvent::TagDestroyed {
                tag: TagId(t),
                name
            }),
            (any::<u32>(), member()).prop_map(|(t, member)| TableEvent::SenderJoined {
                tag: TagId(t),
                member
            }),
            (any::<u32>(), member()).prop_map(|(t, member)| TableEvent::SenderLeft {
                tag: TagId(t),
                member
            }),
            (any::<u32>(), member()).prop_map(|(t, member)| TableEvent::ReceiverJoined {
                tag: TagId(t),
                member
            }),
            (any::<u32>(), member()).prop_map(|(t, member)| TableEvent::ReceiverLeft {
                tag: TagId(t),
                member
            }),
            (any::<u32>(), member(), crate::ids::arb_qos()).prop_map(|(t, member, qos)| {
                TableEvent::ReceiverQos {
                    tag: TagId(t),
                    member,
                    qos,
                }
            }),
        ]
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (1..u32::MAX, request()).prop_map(|(id, body)| Message::Request { id, body }),
            (1..u32::MAX, response()).prop_map(|(id, body)| Message::Response { id, body }),
            (any::<u64>(), event())
                .prop_map(|(version, event)| Message::Update(Update { version, event })),
        ]
    }

    proptest! {
        #[test]
        fn every_message_round_trips(m in message()) {
            let bytes = m.encode();
            prop_assert_eq!(Message::decode(&bytes).unwrap(), m);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes: Vec<u8>) {
            let _ = Message::decode(&bytes);
        }

        #[test]
        fn mutated_messages_never_panic(m in message(), pos: usize, byte: u8, cut: usize) {
            let mut bytes = m.encode();
            let i = pos % bytes.len();
            bytes[i] = byte;
            let _ = Message::decode(&bytes);
            bytes.truncate(cut % (bytes.len() + 1));
            let _ = Message::decode(&bytes);
        }
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        let mut w = Writer::new();
        w.u16(MAGIC).u8(VERSION).u8(68).u32(1).u32(u32::MAX);
        assert!(matches!(
            Message::decode(&w.into_inner()),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn bad_headers_are_named() {
        assert_eq!(
            Message::decode(&[0, 0, 1, 64, 0, 0, 0, 0]),
            Err(DecodeError::BadMagic(0))
        );
        assert_eq!(
            Message::decode(&[0x54, 0x57, 9, 64, 0, 0, 0, 0]),
            Err(DecodeError::BadVersion(9))
        );
        assert!(matches!(
            Message::decode(&[0x54, 0x57, VERSION, 200, 0, 0, 0, 0]),
            Err(DecodeError::Unknown { .. })
        ));
        let mut ok = Message::Response {
            id: 1,
            body: Response::Ok,
        }
        .encode();
        ok.push(0);
        assert_eq!(Message::decode(&ok), Err(DecodeError::Trailing(1)));
    }
}
