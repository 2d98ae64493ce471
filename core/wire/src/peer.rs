//! Daemon ⇄ daemon messages: the update manager's table replication, liveness,
//! and the discovery beacon.
//!
//! Daemons keep one tag table between them (docs/design.md §2). Each pair of live
//! daemons holds one TCP connection carrying [`PeerMessage`]s, each preceded by
//! its length as a little-endian `u32` (at most [`MAX_PEER_MESSAGE`]):
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 length of what follows (u32)                  |
//! +-------------------------------+---------------+---------------+
//! |       magic "TP" (0x5054)     |  version = 6  |     kind      |
//! +-------------------------------+---------------+---------------+
//! ~ body by kind: 1 Hello, 2 Sync, 3 Op, 4 Applied, 5 Heartbeat,  ~
//! ~ 6 Pull, 7 Pulled, 8 SetQos, 9 QosSet                          ~
//! +---------------------------------------------------------------+
//! ```
//!
//! A [`Beacon`] is a single UDP datagram (multicast) with its own magic "TB":
//! it only says "a daemon lives at this address, on these ports".
//!
//! Table changes travel as [`TableOp`]s stamped with a [`Version`] (a Lamport
//! clock plus the originating node). `tagwire-proto` merges them so that the
//! same set of operations gives the same table whatever order they arrive in.

use crate::codec::{DecodeError, Reader, Writer};
use crate::control::{ErrorCode, HistoryQuery, RingParams};
use crate::ids::{ChannelQos, Domain, Member, NodeAddr, TagName};
use crate::QosChange;

/// Magic of a peer message ("TP" little-endian).
pub const PEER_MAGIC: u16 = 0x5054;
/// Magic of a discovery beacon ("TB" little-endian).
pub const BEACON_MAGIC: u16 = 0x4254;
/// Peer protocol version (7: `ChannelQos` and `QosChange` carry a
/// publisher's pacing; 6: a daemon asks another to change the
/// subscriptions it holds, `SetQos`; 5: `ChannelQos` carries thread
/// scheduling; since 4 a `TableOp::Join` of a right already known, newer
/// than it, restates its `ChannelQos`: how a class changes at run time).
pub const PEER_VERSION: u8 = 7;
/// Largest peer message either side accepts (a full table sync grows with the
/// table).
pub const MAX_PEER_MESSAGE: usize = 16 << 20;

/// A change's place in the global order: Lamport time, ties broken by the node
/// that made it. Totally ordered, so every daemon picks the same winner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Version {
    /// Lamport clock value.
    pub lamport: u64,
    /// The node that made the change.
    pub node: NodeAddr,
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.lamport, self.node.to_bytes()).cmp(&(other.lamport, other.node.to_bytes()))
    }
}

/// Identifies one right (a send access or a subscription) across the system:
/// the daemon that granted it and that daemon's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberKey {
    /// The granting daemon's node.
    pub node: NodeAddr,
    /// Unique among that daemon's grants.
    pub id: u64,
}

/// Which list of a tag a right belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Send access.
    Sender,
    /// Subscription.
    Receiver,
}

/// One change to the global tag table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableOp {
    /// A tag was created.
    TagUp {
        /// Its name.
        name: TagName,
        /// Its domain.
        domain: Domain,
        /// The shape of its ring (the same on every node).
        ring: RingParams,
        /// When.
        version: Version,
    },
    /// A tag was destroyed: rights granted before `version` end with it.
    TagDown {
        /// Its name.
        name: TagName,
        /// When.
        version: Version,
    },
    /// A right was granted (this also asserts that the tag exists). A
    /// `Join` of a right already known and newer than it restates the
    /// right: its `qos` replaces the old one (last writer wins; only the
    /// node that holds the right issues one).
    Join {
        /// The tag.
        name: TagName,
        /// The tag's domain as the granting daemon knows it.
        domain: Domain,
        /// Sender or receiver.
        role: Role,
        /// The right.
        key: MemberKey,
        /// Who holds it.
        member: Member,
        /// What a receiver asks of its connections (senders: the default).
        qos: ChannelQos,
        /// When.
        version: Version,
    },
    /// A right was given back (or its holder died).
    Leave {
        /// The tag.
        name: TagName,
        /// Sender or receiver.
        role: Role,
        /// The right.
        key: MemberKey,
        /// When.
        version: Version,
    },
}

impl TableOp {
    /// The op's version.
    pub fn version(&self) -> Version {
        match self {
            TableOp::TagUp { version, .. }
            | TableOp::TagDown { version, .. }
            | TableOp::Join { version, .. }
            | TableOp::Leave { version, .. } => *version,
        }
    }

    /// The tag it concerns.
    pub fn name(&self) -> &TagName {
        match self {
            TableOp::TagUp { name, .. }
            | TableOp::TagDown { name, .. }
            | TableOp::Join { name, .. }
            | TableOp::Leave { name, .. } => name,
        }
    }
}

/// What one daemon says to a peer over their TCP connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerMessage {
    /// First message each way.
    Hello {
        /// The sender's node address (what it stamps on messages).
        node: NodeAddr,
        /// A name for people (host name or the node list's name).
        name: String,
        /// Changes each time the daemon starts, so a peer can tell a restart.
        incarnation: u64,
        /// UDP port of the sender's delivery manager.
        delivery_port: u16,
    },
    /// Everything the sender knows that the receiver must merge: every tag's
    /// latest create/destroy and every right the sender's clients hold.
    Sync {
        /// The operations.
        ops: Vec<TableOp>,
    },
    /// One change, to be applied and acknowledged with [`PeerMessage::Applied`].
    Op {
        /// Correlates the acknowledgement.
        id: u64,
        /// The change.
        op: TableOp,
    },
    /// The receiver applied op `id`.
    Applied {
        /// The op's id.
        id: u64,
    },
    /// Liveness, sent when nothing else was sent for a while.
    Heartbeat,
    /// Asks for messages from the receiver's history of a tag (a client on
    /// the sender's node pulls a history kept elsewhere); answered with
    /// [`PeerMessage::Pulled`].
    Pull {
        /// Correlates the answer.
        id: u64,
        /// The tag.
        name: TagName,
        /// Which messages.
        query: HistoryQuery,
    },
    /// The answer to [`PeerMessage::Pull`].
    Pulled {
        /// The request's id.
        id: u64,
        /// Whether the tag keeps a history on the answering node.
        found: bool,
        /// Messages in `records`.
        count: u32,
        /// The messages, oldest first, each `[u32 LE length][frame header +
        /// payload]` (as a local pull's memfd holds them).
        records: Vec<u8>,
    },
    /// Asks the receiver to change the packet class or thread policy of
    /// the subscriptions to a tag that it holds (an admin command given on
    /// the sender's node; the sender checked that its caller may);
    /// answered with [`PeerMessage::QosSet`] once the restated rights are
    /// replicated.
    SetQos {
        /// Correlates the answer.
        id: u64,
        /// The tag.
        name: TagName,
        /// Whose subscriptions, and what they get.
        change: QosChange,
    },
    /// The answer to [`PeerMessage::SetQos`]: the receivers whose QoS
    /// changed, or why none did.
    QosSet {
        /// The request's id.
        id: u64,
        /// The changed receivers, or the refusal's code and reason.
        outcome: Result<Vec<Member>, (ErrorCode, String)>,
    },
}

/// A discovery datagram, multicast periodically by every daemon with discovery on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beacon {
    /// The daemon's node address.
    pub node: NodeAddr,
    /// A name for people.
    pub name: String,
    /// Changes each time the daemon starts.
    pub incarnation: u64,
    /// TCP port of its update manager.
    pub control_port: u16,
    /// UDP port of its delivery manager.
    pub delivery_port: u16,
}

const HELLO: u8 = 1;
const SYNC: u8 = 2;
const OP: u8 = 3;
const APPLIED: u8 = 4;
const HEARTBEAT: u8 = 5;
const PULL: u8 = 6;
const PULLED: u8 = 7;
const SET_QOS: u8 = 8;
const QOS_SET: u8 = 9;

const OP_TAG_UP: u8 = 1;
const OP_TAG_DOWN: u8 = 2;
const OP_JOIN: u8 = 3;
const OP_LEAVE: u8 = 4;

/// Smallest encoded op (a TagDown with a one-byte name), for list-count checks.
const MIN_OP_LEN: usize = 1 + 2 + 2 + VERSION_LEN;
const VERSION_LEN: usize = 8 + 16;

impl PeerMessage {
    /// Encodes the message with its length prefix, ready for the stream.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(0).u16(PEER_MAGIC).u8(PEER_VERSION);
        match self {
            PeerMessage::Hello {
                node,
                name,
                incarnation,
                delivery_port,
            } => {
                w.u8(HELLO)
                    .bytes(&node.to_bytes())
                    .str(name)
                    .u64(*incarnation)
                    .u16(*delivery_port);
            }
            PeerMessage::Sync { ops } => {
                w.u8(SYNC).count(ops.len());
                for op in ops {
                    encode_op(&mut w, op);
                }
            }
            PeerMessage::Op { id, op } => {
                w.u8(OP).u64(*id);
                encode_op(&mut w, op);
            }
            PeerMessage::Applied { id } => {
                w.u8(APPLIED).u64(*id);
            }
            PeerMessage::Heartbeat => {
                w.u8(HEARTBEAT);
            }
            PeerMessage::Pull { id, name, query } => {
                w.u8(PULL).u64(*id).str(name.as_str());
                query.encode(&mut w);
            }
            PeerMessage::Pulled {
                id,
                found,
                count,
                records,
            } => {
                w.u8(PULLED)
                    .u64(*id)
                    .u8(u8::from(*found))
                    .u32(*count)
                    .u32(records.len() as u32)
                    .bytes(records);
            }
            PeerMessage::SetQos { id, name, change } => {
                w.u8(SET_QOS).u64(*id).str(name.as_str());
                change.encode(&mut w);
            }
            PeerMessage::QosSet { id, outcome } => {
                w.u8(QOS_SET).u64(*id);
                match outcome {
                    Ok(changed) => {
                        w.u16(0).count(changed.len());
                        for m in changed {
                            m.encode(&mut w);
                        }
                    }
                    Err((code, why)) => {
                        w.u16(code.to_u16()).str(why);
                    }
                }
            }
        }
        let mut out = w.into_inner();
        let len = (out.len() - 4) as u32;
        out[..4].copy_from_slice(&len.to_le_bytes());
        out
    }

    /// Reads the length prefix at the start of `buf`: `Some(n)` when a whole
    /// message of `n` body bytes follows the 4 prefix bytes... or is still to
    /// come; errors when the prefix announces more than [`MAX_PEER_MESSAGE`].
    pub fn frame_len(prefix: [u8; 4]) -> Result<usize, DecodeError> {
        let n = u32::from_le_bytes(prefix) as usize;
        if n > MAX_PEER_MESSAGE {
            return Err(DecodeError::Invalid("peer message length"));
        }
        Ok(n)
    }

    /// Decodes one message body (the bytes after the length prefix).
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        r.preamble(PEER_MAGIC, PEER_VERSION)?;
        let kind = r.u8()?;
        let msg = match kind {
            HELLO => PeerMessage::Hello {
                node: NodeAddr::from_bytes(r.array()?),
                name: r.str()?.to_owned(),
                incarnation: r.u64()?,
                delivery_port: r.u16()?,
            },
            SYNC => {
                let n = r.count(MIN_OP_LEN)?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(decode_op(&mut r)?);
                }
                PeerMessage::Sync { ops }
            }
            OP => PeerMessage::Op {
                id: r.u64()?,
                op: decode_op(&mut r)?,
            },
            APPLIED => PeerMessage::Applied { id: r.u64()? },
            HEARTBEAT => PeerMessage::Heartbeat,
            PULL => PeerMessage::Pull {
                id: r.u64()?,
                name: TagName::decode(&mut r)?,
                query: HistoryQuery::decode(&mut r)?,
            },
            PULLED => {
                let id = r.u64()?;
                let found = match r.u8()? {
                    0 => false,
                    1 => true,
                    v => {
                        return Err(DecodeError::Unknown {
                            what: "pull answer flag",
                            value: u32::from(v),
                        })
                    }
                };
                let count = r.u32()?;
                let len = r.u32()? as usize;
                PeerMessage::Pulled {
                    id,
                    found,
                    count,
                    records: r.bytes(len)?.to_vec(),
                }
            }
            SET_QOS => PeerMessage::SetQos {
                id: r.u64()?,
                name: TagName::decode(&mut r)?,
                change: QosChange::decode(&mut r)?,
            },
            QOS_SET => {
                let id = r.u64()?;
                let outcome = match r.u16()? {
                    0 => {
                        let n = r.count(Member::ENCODED_LEN)?;
                        let mut changed = Vec::with_capacity(n);
                        for _ in 0..n {
                            changed.push(Member::decode(&mut r)?);
                        }
                        Ok(changed)
                    }
                    code => Err((ErrorCode::from_u16(code), r.str()?.to_owned())),
                };
                PeerMessage::QosSet { id, outcome }
            }
            k => {
                return Err(DecodeError::Unknown {
                    what: "peer message kind",
                    value: u32::from(k),
                })
            }
        };
        r.finish()?;
        Ok(msg)
    }
}

impl Beacon {
    /// Encodes the beacon datagram.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u16(BEACON_MAGIC)
            .u8(PEER_VERSION)
            .u8(0)
            .bytes(&self.node.to_bytes())
            .str(&self.name)
            .u64(self.incarnation)
            .u16(self.control_port)
            .u16(self.delivery_port);
        w.into_inner()
    }

    /// Decodes a beacon datagram.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        r.preamble(BEACON_MAGIC, PEER_VERSION)?;
        let _reserved = r.u8()?;
        let b = Beacon {
            node: NodeAddr::from_bytes(r.array()?),
            name: r.str()?.to_owned(),
            incarnation: r.u64()?,
            control_port: r.u16()?,
            delivery_port: r.u16()?,
        };
        r.finish()?;
        Ok(b)
    }
}

fn encode_version(w: &mut Writer, v: Version) {
    w.u64(v.lamport).bytes(&v.node.to_bytes());
}

fn decode_version(r: &mut Reader<'_>) -> Result<Version, DecodeError> {
    Ok(Version {
        lamport: r.u64()?,
        node: NodeAddr::from_bytes(r.array()?),
    })
}

fn encode_key(w: &mut Writer, k: MemberKey) {
    w.bytes(&k.node.to_bytes()).u64(k.id);
}

fn decode_key(r: &mut Reader<'_>) -> Result<MemberKey, DecodeError> {
    Ok(MemberKey {
        node: NodeAddr::from_bytes(r.array()?),
        id: r.u64()?,
    })
}

fn role_byte(role: Role) -> u8 {
    match role {
        Role::Sender => 1,
        Role::Receiver => 2,
    }
}

fn decode_role(r: &mut Reader<'_>) -> Result<Role, DecodeError> {
    match r.u8()? {
        1 => Ok(Role::Sender),
        2 => Ok(Role::Receiver),
        v => Err(DecodeError::Unknown {
            what: "role",
            value: u32::from(v),
        }),
    }
}

fn decode_name(r: &mut Reader<'_>) -> Result<TagName, DecodeError> {
    TagName::new(r.str()?).map_err(|_| DecodeError::Invalid("tag name"))
}

fn encode_op(w: &mut Writer, op: &TableOp) {
    match op {
        TableOp::TagUp {
            name,
            domain,
            ring,
            version,
        } => {
            w.u8(OP_TAG_UP)
                .str(name.as_str())
                .u8(domain.to_u8())
                .u32(ring.slots)
                .u32(ring.slot_payload);
            encode_version(w, *version);
        }
        TableOp::TagDown { name, version } => {
            w.u8(OP_TAG_DOWN).str(name.as_str());
            encode_version(w, *version);
        }
        TableOp::Join {
            name,
            domain,
            role,
            key,
            member,
            qos,
            version,
        } => {
            w.u8(OP_JOIN)
                .str(name.as_str())
                .u8(domain.to_u8())
                .u8(role_byte(*role));
            encode_key(w, *key);
            member.encode(w);
            qos.encode(w);
            encode_version(w, *version);
        }
        TableOp::Leave {
            name,
            role,
            key,
            version,
        } => {
            w.u8(OP_LEAVE).str(name.as_str()).u8(role_byte(*role));
            encode_key(w, *key);
            encode_version(w, *version);
        }
    }
}

fn decode_op(r: &mut Reader<'_>) -> Result<TableOp, DecodeError> {
    let kind = r.u8()?;
    Ok(match kind {
        OP_TAG_UP => TableOp::TagUp {
            name: decode_name(r)?,
            domain: Domain::from_u8(r.u8()?)?,
            ring: RingParams {
                slots: r.u32()?,
                slot_payload: r.u32()?,
            },
            version: decode_version(r)?,
        },
        OP_TAG_DOWN => TableOp::TagDown {
            name: decode_name(r)?,
            version: decode_version(r)?,
        },
        OP_JOIN => TableOp::Join {
            name: decode_name(r)?,
            domain: Domain::from_u8(r.u8()?)?,
            role: decode_role(r)?,
            key: decode_key(r)?,
            member: Member::decode(r)?,
            qos: ChannelQos::decode(r)?,
            version: decode_version(r)?,
        },
        OP_LEAVE => TableOp::Leave {
            name: decode_name(r)?,
            role: decode_role(r)?,
            key: decode_key(r)?,
            version: decode_version(r)?,
        },
        k => {
            return Err(DecodeError::Unknown {
                what: "table op",
                value: u32::from(k),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Pid, SenderInfo};
    use proptest::prelude::*;

    fn node() -> impl Strategy<Value = NodeAddr> {
        any::<[u8; 4]>().prop_map(|b| NodeAddr(std::net::IpAddr::from(b)))
    }

    fn name() -> impl Strategy<Value = TagName> {
        "/[a-z]{1,8}(/[a-z0-9]{1,4}){0,2}".prop_map(|s| TagName::new(&s).unwrap())
    }

    fn version() -> impl Strategy<Value = Version> {
        (any::<u64>(), node()).prop_map(|(lamport, node)| Version { lamport, node })
    }

    fn key() -> impl Strategy<Value = MemberKey> {
        (node(), any::<u64>()).prop_map(|(node, id)| MemberKey { node, id })
    }

    fn member() -> impl Strategy<Value = Member> {
        (any::<u32>(), node(), any::<u64>()).prop_map(|(p, node, t)| Member {
            who: SenderInfo { pid: Pid(p), node },
            since_unix_ns: t,
        })
    }

    fn role() -> impl Strategy<Value = Role> {
        prop_oneof![Just(Role::Sender), Just(Role::Receiver)]
    }

    fn domain() -> impl Strategy<Value = Domain> {
        prop_oneof![Just(Domain::Global), Just(Domain::Local)]
    }

    fn op() -> impl Strategy<Value = TableOp> {
        prop_oneof![
            (name(), domain(), any::<(u32, u32)>(), version()).prop_map(
                |(name, domain, (slots, slot_payload), version)| TableOp::TagUp {
                    name,
                    domain,
                    ring: RingParams {
                        slots,
                        slot_payload
                    },
                    version
                }
            ),
            (name(), version()).prop_map(|(name, version)| TableOp::TagDown { name, version }),
            (
                name(),
                domain(),
                role(),
                key(),
                member(),
                crate::ids::arb_qos(),
                version()
            )
                .prop_map(|(name, domain, role, key, member, qos, version)| {
                    TableOp::Join {
                        name,
                        domain,
                        role,
                        key,
                        member,
                        qos,
                        version,
                    }
                }),
            (name(), role(), key(), version()).prop_map(|(name, role, key, version)| {
                TableOp::Leave {
                    name,
                    role,
                    key,
                    version,
                }
            }),
        ]
    }

    fn message() -> impl Strategy<Value = PeerMessage> {
        prop_oneof![
            (node(), "[a-z]{0,12}", any::<u64>(), any::<u16>()).prop_map(
                |(node, name, incarnation, delivery_port)| PeerMessage::Hello {
                    node,
                    name,
                    incarnation,
                    delivery_port
                }
            ),
            proptest::collection::vec(op(), 0..8).prop_map(|ops| PeerMessage::Sync { ops }),
            (any::<u64>(), op()).prop_map(|(id, op)| PeerMessage::Op { id, op }),
            any::<u64>().prop_map(|id| PeerMessage::Applied { id }),
            Just(PeerMessage::Heartbeat),
            (any::<u64>(), name(), any::<u32>()).prop_map(|(id, name, n)| PeerMessage::Pull {
                id,
                name,
                query: HistoryQuery::Last(n)
            }),
            (any::<u64>(), name(), any::<u64>(), any::<u64>()).prop_map(|(id, name, a, b)| {
                PeerMessage::Pull {
                    id,
                    name,
                    query: HistoryQuery::Between {
                        from_ns: a,
                        to_ns: b,
                    },
                }
            }),
            (
                any::<u64>(),
                any::<bool>(),
                any::<u32>(),
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|(id, found, count, records)| PeerMessage::Pulled {
                    id,
                    found,
                    count,
                    records
                }),
            (
                any::<u64>(),
                name(),
                proptest::option::of(1..u32::MAX),
                proptest::option::of(0u8..4),
                proptest::option::of(1u8..100),
                any::<bool>(),
            )
                .prop_map(|(id, name, pid, class, rt, publishers)| {
                    PeerMessage::SetQos {
                        id,
                        name,
                        change: QosChange {
                            publishers,
                            pid: pid.map(Pid),
                            priority: class.map(|c| crate::Priority::from_u8(c).unwrap()),
                            sched: rt.map(crate::Sched::Fifo),
                            pacing: rt.map(|r| match r % 3 {
                                0 => crate::Pacing::Off,
                                1 => crate::Pacing::Adaptive,
                                _ => crate::Pacing::Fixed(u64::from(r) << 20),
                            }),
                        },
                    }
                }),
            (
                any::<u64>(),
                proptest::collection::vec(member(), 0..4),
                proptest::option::of((1u16..20, "[a-z ]{0,30}")),
            )
                .prop_map(|(id, changed, refused)| PeerMessage::QosSet {
                    id,
                    outcome: match refused {
                        Some((code, why)) => Err((ErrorCode::from_u16(code), why)),
                        None => Ok(changed),
                    },
                }),
        ]
    }

    proptest! {
        #[test]
        fn peer_messages_round_trip(m in message()) {
            let bytes = m.encode();
            let n = PeerMessage::frame_len(bytes[..4].try_into().unwrap()).unwrap();
            prop_assert_eq!(n, bytes.len() - 4);
            prop_assert_eq!(PeerMessage::decode(&bytes[4..]).unwrap(), m);
        }

        #[test]
        fn truncated_peer_messages_are_errors(m in message(), cut in any::<prop::sample::Index>()) {
            let bytes = m.encode();
            let body = &bytes[4..];
            let cut = cut.index(body.len());
            prop_assert!(PeerMessage::decode(&body[..cut]).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = PeerMessage::decode(&b);
            let _ = Beacon::decode(&b);
            let mut with_magic = vec![0x54, 0x50, PEER_VERSION];
            with_magic.extend_from_slice(&b);
            let _ = PeerMessage::decode(&with_magic);
        }

        #[test]
        fn beacons_round_trip(node in node(), name in "[a-z0-9-]{0,20}", inc in any::<u64>(),
                              c in any::<u16>(), d in any::<u16>()) {
            let b = Beacon { node, name, incarnation: inc, control_port: c, delivery_port: d };
            prop_assert_eq!(Beacon::decode(&b.encode()).unwrap(), b);
        }
    }

    #[test]
    fn versions_order_by_clock_then_node() {
        let a = NodeAddr("10.0.0.1".parse().unwrap());
        let b = NodeAddr("10.0.0.2".parse().unwrap());
        let v = |lamport, node| Version { lamport, node };
        assert!(v(1, b) < v(2, a));
        assert!(v(2, a) < v(2, b));
        assert_eq!(v(2, a).cmp(&v(2, a)), std::cmp::Ordering::Equal);
    }

    #[test]
    fn an_oversized_length_prefix_is_refused() {
        let n = (MAX_PEER_MESSAGE as u32 + 1).to_le_bytes();
        assert!(PeerMessage::frame_len(n).is_err());
    }
}
