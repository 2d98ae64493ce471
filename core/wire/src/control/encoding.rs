//! The byte layout of control messages: request, response and table-update
//! bodies (the parent module has the types, the header and `Message`).

use super::*;

pub(super) const KIND_UPDATE: u8 = 128;

pub(super) fn request_kind(r: &Request) -> u8 {
    match r {
        Request::Hello { .. } => 1,
        Request::CreateTag { .. } => 2,
        Request::DestroyTag { .. } => 3,
        Request::GetSendAccess { .. } => 4,
        Request::ReleaseSendAccess { .. } => 5,
        Request::Subscribe { .. } => 6,
        Request::Unsubscribe { .. } => 7,
        Request::ListMembers { .. } => 8,
        Request::ListTags => 9,
        Request::PutBlob { .. } => 10,
        Request::GetBlob { .. } => 11,
        Request::Ping => 12,
        Request::ListNodes => 13,
        Request::SetHistory { .. } => 14,
        Request::Pull { .. } => 15,
        Request::SendSocket => 16,
        Request::Stats => 17,
        Request::Report { .. } => 18,
        Request::TagKey { .. } => 19,
        Request::GiveStreams { .. } => 20,
        Request::Streams { .. } => 21,
        Request::Seat { .. } => 22,
        Request::Holding { .. } => 23,
        Request::DirectKey { .. } => 24,
        Request::Channels { .. } => 25,
        Request::SetChannelQos { .. } => 26,
    }
}

pub(super) fn encode_request(r: &Request, w: &mut Writer) {
    match r {
        Request::Hello { pid, name } => {
            w.u32(pid.0).str(name);
        }
        Request::CreateTag {
            name,
            domain,
            ring,
            history,
        } => {
            w.str(name.as_str()).u8(domain.to_u8());
            encode_ring(ring, w);
            w.u32(history.depth).u64(history.max_bytes);
        }
        Request::DestroyTag { name }
        | Request::ListMembers { name }
        | Request::Channels { name }
        | Request::TagKey { name } => {
            w.str(name.as_str());
        }
        Request::GetSendAccess { name, qos } => {
            w.str(name.as_str());
            qos.encode(w);
        }
        Request::Holding {
            tag,
            key,
            encrypt,
            odd,
            also,
        } => {
            let bits = u8::from(*encrypt) | u8::from(*odd) << 1 | u8::from(*also) << 2;
            w.u32(tag.0).bytes(key).u8(bits);
        }
        Request::DirectKey { name, to, member } => {
            w.str(name.as_str())
                .bytes(&NodeAddr(to.ip()).to_bytes())
                .u16(to.port())
                .u64(*member);
        }
        Request::ReleaseSendAccess { tag } | Request::GiveStreams { tag } => {
            w.u32(tag.0);
        }
        Request::Streams { tag, query: v }
        | Request::Unsubscribe { tag, seat: v }
        | Request::Seat { tag, seat: v } => {
            w.u32(tag.0).u32(*v);
        }
        Request::Subscribe {
            name,
            depth,
            qos,
            lossless,
        } => {
            w.str(name.as_str()).u32(*depth);
            qos.encode(w);
            w.u8(u8::from(*lossless));
        }
        Request::ListTags
        | Request::Ping
        | Request::ListNodes
        | Request::SendSocket
        | Request::Stats => {}
        Request::Report { query, rows } => {
            w.u32(*query);
            stats::encode_rows(rows, w);
        }
        Request::PutBlob { tag, len, done } => {
            w.u32(tag.0).u64(*len).u64(*done);
        }
        Request::GetBlob { tag, blob_id } => {
            w.u32(tag.0).u64(*blob_id);
        }
        Request::SetHistory {
            name,
            depth,
            max_bytes,
        } => {
            w.str(name.as_str()).u32(*depth).u64(*max_bytes);
        }
        Request::Pull { name, query } => {
            w.str(name.as_str());
            query.encode(w);
        }
        Request::SetChannelQos {
            name,
            nodes,
            change,
        } => {
            w.str(name.as_str());
            nodes.encode(w);
            change.encode(w);
        }
    }
}

pub(super) fn decode_request(kind: u8, r: &mut Reader<'_>) -> Result<Request, DecodeError> {
    Ok(match kind {
        1 => Request::Hello {
            pid: Pid(r.u32()?),
            name: r.str()?.to_owned(),
        },
        2 => Request::CreateTag {
            name: TagName::decode(r)?,
            domain: Domain::from_u8(r.u8()?)?,
            ring: decode_ring(r)?,
            history: KeepHistory {
                depth: r.u32()?,
                max_bytes: r.u64()?,
            },
        },
        3 => Request::DestroyTag {
            name: TagName::decode(r)?,
        },
        4 => Request::GetSendAccess {
            name: TagName::decode(r)?,
            qos: ChannelQos::decode(r)?,
        },
        5 => Request::ReleaseSendAccess {
            tag: TagId(r.u32()?),
        },
        6 => Request::Subscribe {
            name: TagName::decode(r)?,
            depth: r.u32()?,
            qos: ChannelQos::decode(r)?,
            lossless: r.u8()? != 0,
        },
        7 => Request::Unsubscribe {
            tag: TagId(r.u32()?),
            seat: r.u32()?,
        },
        8 => Request::ListMembers {
            name: TagName::decode(r)?,
        },
        9 => Request::ListTags,
        10 => Request::PutBlob {
            tag: TagId(r.u32()?),
            len: r.u64()?,
            done: r.u64()?,
        },
        11 => Request::GetBlob {
            tag: TagId(r.u32()?),
            blob_id: r.u64()?,
        },
        12 => Request::Ping,
        13 => Request::ListNodes,
        14 => Request::SetHistory {
            name: TagName::decode(r)?,
            depth: r.u32()?,
            max_bytes: r.u64()?,
        },
        15 => Request::Pull {
            name: TagName::decode(r)?,
            query: HistoryQuery::decode(r)?,
        },
        16 => Request::SendSocket,
        17 => Request::Stats,
        18 => Request::Report {
            query: r.u32()?,
            rows: stats::decode_rows(r)?,
        },
        19 => Request::TagKey {
            name: TagName::decode(r)?,
        },
        20 => Request::GiveStreams {
            tag: TagId(r.u32()?),
        },
        21 => Request::Streams {
            tag: TagId(r.u32()?),
            query: r.u32()?,
        },
        23 => {
            let tag = TagId(r.u32()?);
            let key = r.array()?;
            let bits = decode_bits(r, 3)?;
            Request::Holding {
                tag,
                key,
                encrypt: bits & 1 != 0,
                odd: bits & 2 != 0,
                also: bits & 4 != 0,
            }
        }
        24 => Request::DirectKey {
            name: TagName::decode(r)?,
            to: std::net::SocketAddr::new(NodeAddr::from_bytes(r.array()?).0, r.u16()?),
            member: r.u64()?,
        },
        22 => Request::Seat {
            tag: TagId(r.u32()?),
            seat: r.u32()?,
        },
        25 => Request::Channels {
            name: TagName::decode(r)?,
        },
        26 => Request::SetChannelQos {
            name: TagName::decode(r)?,
            nodes: OnNodes::decode(r)?,
            change: QosChange::decode(r)?,
        },
        k => {
            return Err(DecodeError::Unknown {
                what: "request kind",
                value: u32::from(k),
            })
        }
    })
}

pub(super) fn response_kind(r: &Response) -> u8 {
    match r {
        Response::Ok => 64,
        Response::Welcome { .. } => 65,
        Response::TagCreated { .. } => 66,
        Response::TagOpened(_) => 67,
        Response::Members { .. } => 68,
        Response::Tags { .. } => 69,
        Response::BlobStored { .. } => 70,
        Response::BlobFound { .. } => 71,
        Response::Pong => 72,
        Response::Error { .. } => 73,
        Response::Nodes { .. } => 74,
        Response::Pulled { .. } => 75,
        Response::Stats { .. } => 76,
        Response::TagKey { .. } => 77,
        Response::Channels { .. } => 78,
    }
}

pub(super) fn encode_response(r: &Response, w: &mut Writer) {
    match r {
        Response::Ok | Response::Pong => {}
        Response::Welcome {
            node,
            daemon_pid,
            client_pid,
            table_version,
        } => {
            w.bytes(&node.to_bytes())
                .u32(daemon_pid.0)
                .u32(client_pid.0)
                .u64(*table_version);
        }
        Response::TagCreated { tag, created } => {
            w.u32(tag.0).u8(u8::from(*created));
        }
        Response::TagOpened(o) => {
            w.u32(o.tag.0).str(o.name.as_str()).u8(o.domain.to_u8());
            encode_ring(&o.ring, w);
            w.u64(o.start);
            match o.gate {
                None => {
                    w.u8(0);
                }
                Some(g) => {
                    w.u8(1).u8(g.index).u32(g.pid);
                }
            }
        }
        Response::Members { senders, receivers } => {
            encode_members(senders, w);
            encode_members(receivers, w);
        }
        Response::Channels { senders, receivers } => {
            encode_channels(senders, w);
            encode_channels(receivers, w);
        }
        Response::Tags { version, tags } => {
            w.u64(*version).count(tags.len());
            for t in tags {
                w.u32(t.tag.0).str(t.name.as_str()).u8(t.domain.to_u8());
                encode_members(&t.senders, w);
                encode_members(&t.receivers, w);
            }
        }
        Response::BlobStored { blob_id } => {
            w.u64(*blob_id);
        }
        Response::BlobFound { len } => {
            w.u64(*len);
        }
        Response::Pulled { count, len } => {
            w.u32(*count).u64(*len);
        }
        Response::Error { code, message } => {
            w.u16(code.to_u16()).str(message);
        }
        Response::Stats { rows } => stats::encode_rows(rows, w),
        Response::TagKey {
            epoch,
            key,
            encrypt,
            odd,
        } => {
            w.u64(*epoch)
                .bytes(key)
                .u8(u8::from(*encrypt) | u8::from(*odd) << 1);
        }
        Response::Nodes { nodes } => {
            w.count(nodes.len());
            for n in nodes {
                let state = match n.state {
                    NodeState::Connecting => 0,
                    NodeState::Up => 1,
                    NodeState::Dead => 2,
                };
                w.bytes(&n.node.to_bytes())
                    .str(&n.name)
                    .u8(state)
                    .u64(n.last_heard_ms)
                    .str(&n.source);
            }
        }
    }
}

pub(super) fn decode_response(kind: u8, r: &mut Reader<'_>) -> Result<Response, DecodeError> {
    Ok(match kind {
        64 => Response::Ok,
        65 => Response::Welcome {
            node: NodeAddr::from_bytes(r.array()?),
            daemon_pid: Pid(r.u32()?),
            client_pid: Pid(r.u32()?),
            table_version: r.u64()?,
        },
        66 => Response::TagCreated {
            tag: TagId(r.u32()?),
            created: decode_bool(r)?,
        },
        67 => Response::TagOpened(TagOpened {
            tag: TagId(r.u32()?),
            name: TagName::decode(r)?,
            domain: Domain::from_u8(r.u8()?)?,
            ring: decode_ring(r)?,
            start: r.u64()?,
            gate: match r.u8()? {
                0 => None,
                _ => Some(HeldGate {
                    index: r.u8()?,
                    pid: r.u32()?,
                }),
            },
        }),
        68 => Response::Members {
            senders: decode_members(r)?,
            receivers: decode_members(r)?,
        },
        78 => Response::Channels {
            senders: decode_channels(r)?,
            receivers: decode_channels(r)?,
        },
        69 => {
            let version = r.u64()?;
            // Each summary is at least id + empty name + domain + two counts.
            let n = r.count(4 + 2 + 1 + 4 + 4)?;
            let mut tags = Vec::with_capacity(n);
            for _ in 0..n {
                tags.push(TagSummary {
                    tag: TagId(r.u32()?),
                    name: TagName::decode(r)?,
                    domain: Domain::from_u8(r.u8()?)?,
                    senders: decode_members(r)?,
                    receivers: decode_members(r)?,
                });
            }
            Response::Tags { version, tags }
        }
        70 => Response::BlobStored { blob_id: r.u64()? },
        71 => Response::BlobFound { len: r.u64()? },
        75 => Response::Pulled {
            count: r.u32()?,
            len: r.u64()?,
        },
        76 => Response::Stats {
            rows: stats::decode_rows(r)?,
        },
        77 => {
            let epoch = r.u64()?;
            let key = r.array()?;
            let bits = decode_bits(r, 2)?;
            Response::TagKey {
                epoch,
                key,
                encrypt: bits & 1 != 0,
                odd: bits & 2 != 0,
            }
        }
        72 => Response::Pong,
        73 => Response::Error {
            code: ErrorCode::from_u16(r.u16()?),
            message: r.str()?.to_owned(),
        },
        74 => {
            // node(16) + name(2) + state(1) + heard(8) + source(2)
            let n = r.count(29)?;
            let mut nodes = Vec::with_capacity(n);
            for _ in 0..n {
                nodes.push(NodeSummary {
                    node: NodeAddr::from_bytes(r.array()?),
                    name: r.str()?.to_owned(),
                    state: match r.u8()? {
                        0 => NodeState::Connecting,
                        1 => NodeState::Up,
                        2 => NodeState::Dead,
                        v => {
                            return Err(DecodeError::Unknown {
                                what: "node state",
                                value: u32::from(v),
                            })
                        }
                    },
                    last_heard_ms: r.u64()?,
                    source: r.str()?.to_owned(),
                });
            }
            Response::Nodes { nodes }
        }
        k => {
            return Err(DecodeError::Unknown {
                what: "response kind",
                value: u32::from(k),
            })
        }
    })
}

pub(super) fn encode_update(u: &Update, w: &mut Writer) {
    w.u64(u.version);
    match &u.event {
        TableEvent::TagCreated { tag, name, domain } => {
            w.u8(1).u32(tag.0).str(name.as_str()).u8(domain.to_u8());
        }
        TableEvent::TagDestroyed { tag, name } => {
            w.u8(2).u32(tag.0).str(name.as_str());
        }
        TableEvent::SenderJoined { tag, member } => member_event(w, 3, *tag, member),
        TableEvent::SenderLeft { tag, member } => member_event(w, 4, *tag, member),
        TableEvent::ReceiverJoined { tag, member } => member_event(w, 5, *tag, member),
        TableEvent::ReceiverLeft { tag, member } => member_event(w, 6, *tag, member),
        TableEvent::ReceiverQos { tag, member, qos } => {
            member_event(w, 7, *tag, member);
            qos.encode(w);
        }
    }
}

pub(super) fn member_event(w: &mut Writer, code: u8, tag: TagId, member: &Member) {
    w.u8(code).u32(tag.0);
    member.encode(w);
}

pub(super) fn decode_update(r: &mut Reader<'_>) -> Result<Update, DecodeError> {
    let version = r.u64()?;
    let code = r.u8()?;
    let event = match code {
        1 => TableEvent::TagCreated {
            tag: TagId(r.u32()?),
            name: TagName::decode(r)?,
            domain: Domain::from_u8(r.u8()?)?,
        },
        2 => TableEvent::TagDestroyed {
            tag: TagId(r.u32()?),
            name: TagName::decode(r)?,
        },
        3..=6 => {
            let tag = TagId(r.u32()?);
            let member = Member::decode(r)?;
            match code {
                3 => TableEvent::SenderJoined { tag, member },
                4 => TableEvent::SenderLeft { tag, member },
                5 => TableEvent::ReceiverJoined { tag, member },
                _ => TableEvent::ReceiverLeft { tag, member },
            }
        }
        7 => TableEvent::ReceiverQos {
            tag: TagId(r.u32()?),
            member: Member::decode(r)?,
            qos: ChannelQos::decode(r)?,
        },
        c => {
            return Err(DecodeError::Unknown {
                what: "table event",
                value: u32::from(c),
            })
        }
    };
    Ok(Update { version, event })
}

pub(super) fn encode_ring(ring: &RingParams, w: &mut Writer) {
    w.u32(ring.slots).u32(ring.slot_payload);
}

pub(super) fn decode_ring(r: &mut Reader<'_>) -> Result<RingParams, DecodeError> {
    Ok(RingParams {
        slots: r.u32()?,
        slot_payload: r.u32()?,
    })
}

pub(super) fn encode_members(members: &[Member], w: &mut Writer) {
    w.count(members.len());
    for m in members {
        m.encode(w);
    }
}

pub(super) fn decode_members(r: &mut Reader<'_>) -> Result<Vec<Member>, DecodeError> {
    let n = r.count(Member::ENCODED_LEN)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(Member::decode(r)?);
    }
    Ok(out)
}

/// Members each with its `ChannelQos` (a tag's channels).
pub(super) fn encode_channels(channels: &[(Member, ChannelQos)], w: &mut Writer) {
    w.count(channels.len());
    for (m, qos) in channels {
        m.encode(w);
        qos.encode(w);
    }
}

pub(super) fn decode_channels(
    r: &mut Reader<'_>,
) -> Result<Vec<(Member, ChannelQos)>, DecodeError> {
    // A member and a ChannelQos take at least 28 + 12 bytes.
    let n = r.count(Member::ENCODED_LEN + 12)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push((Member::decode(r)?, ChannelQos::decode(r)?));
    }
    Ok(out)
}

/// A byte of `n` flag bits (the lowest); any higher bit set is refused.
pub(super) fn decode_bits(r: &mut Reader<'_>, n: u32) -> Result<u8, DecodeError> {
    let b = r.u8()?;
    if u32::from(b) >> n != 0 {
        return Err(DecodeError::Invalid("flag bits"));
    }
    Ok(b)
}

pub(super) fn decode_bool(r: &mut Reader<'_>) -> Result<bool, DecodeError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::Invalid("boolean")),
    }
}
