//! A tag's inbound streams as they move between the receiving sessions of
//! one node (direct delivery, docs/design.md §6): from the node's delivery
//! manager to its sole receiving process and back.
//!
//! The bytes travel in a sealed memfd beside a control message
//! (`Request::Streams`), because a stream's partial messages can be far
//! larger than a control packet. They come from another process, so the
//! decoder trusts nothing: every count is bounded by the bytes that
//! remain, every piece by its message's length and fragment count.
//!
//! ```text
//! u16 magic "TH" | u8 version 1 | u16 stream count
//! per stream:  sender (16) | id u64 | reply: u8 has, 16 ip, u16 port
//!              | u8 reliable | next u64 | u16 partial count
//! per partial: first_seq u64 | frags u16 | msg_len u32 | header (40)
//!              | tag name | u16 piece count
//! per piece:   index u16 | u32 length | bytes
//! ```

use std::net::{IpAddr, SocketAddr};

use crate::codec::{DecodeError, Reader, Writer};
use crate::frame::{FrameHeader, HEADER_LEN};
use crate::ids::{NodeAddr, TagName};

const MAGIC: u16 = 0x4854;
const VERSION: u8 = 1;

/// Most streams one handover carries (the rest are dropped by the
/// encoder and refused by the decoder).
pub const MAX_STREAMS: usize = 1024;

/// Largest encoded handover a receiver reads (partial messages included:
/// two of the largest messages).
pub const MAX_BYTES: u64 = 256 << 20;

/// One inbound stream of a tag (plain data; see
/// `tagwire_session::Handover`, which converts to and from it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    /// The sending node's address.
    pub sender: IpAddr,
    /// The stream id.
    pub id: u64,
    /// Where its acknowledgements go, if known.
    pub reply: Option<SocketAddr>,
    /// Reliable (else best effort).
    pub reliable: bool,
    /// The first seq the new holder delivers.
    pub next: u64,
    /// Messages of which the old holder had some fragments.
    pub partials: Vec<PartialState>,
}

/// A message of which some fragments arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialState {
    /// Stream seq of its first fragment.
    pub first_seq: u64,
    /// Its fragment count.
    pub frags: u16,
    /// Its whole length.
    pub msg_len: u32,
    /// The publisher's frame header.
    pub header: FrameHeader,
    /// Its tag.
    pub tag: TagName,
    /// The fragments that arrived: (index, bytes), indexes ascending.
    pub pieces: Vec<(u16, Vec<u8>)>,
}

/// Encodes `streams` (at most [`MAX_STREAMS`] of them).
pub fn encode(streams: &[StreamState]) -> Vec<u8> {
    let mut w = Writer::new();
    let n = streams.len().min(MAX_STREAMS);
    w.u16(MAGIC).u8(VERSION).u16(n as u16);
    for s in &streams[..n] {
        w.bytes(&NodeAddr(s.sender).to_bytes()).u64(s.id);
        match s.reply {
            Some(a) => {
                w.u8(1).bytes(&NodeAddr(a.ip()).to_bytes()).u16(a.port());
            }
            None => {
                w.u8(0).bytes(&[0; 16]).u16(0);
            }
        }
        let partials = &s.partials[..s.partials.len().min(usize::from(u16::MAX))];
        w.u8(u8::from(s.reliable))
            .u64(s.next)
            .u16(partials.len() as u16);
        for p in partials {
            let mut header = [0u8; HEADER_LEN];
            let _ = p.header.emit(&mut header);
            w.u64(p.first_seq)
                .u16(p.frags)
                .u32(p.msg_len)
                .bytes(&header)
                .str(p.tag.as_str());
            let pieces = &p.pieces[..p.pieces.len().min(usize::from(u16::MAX))];
            w.u16(pieces.len() as u16);
            for (i, b) in pieces {
                w.u16(*i).u32(b.len() as u32).bytes(b);
            }
        }
    }
    w.into_inner()
}

/// Decodes what [`encode`] wrote; malformed input is an error, never a
/// panic, and allocates no more than the input's size.
pub fn decode(buf: &[u8]) -> Result<Vec<StreamState>, DecodeError> {
    let mut r = Reader::new(buf);
    r.preamble(MAGIC, VERSION)?;
    let n = usize::from(r.u16()?);
    if n > MAX_STREAMS {
        return Err(DecodeError::Invalid("handover: too many streams"));
    }
    // A stream takes at least 52 bytes.
    if n * 52 > r.remaining() {
        return Err(DecodeError::Invalid(
            "handover: stream count beyond the input",
        ));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let sender = NodeAddr::from_bytes(r.array()?).0;
        let id = r.u64()?;
        let has = r.u8()?;
        let ip = NodeAddr::from_bytes(r.array()?).0;
        let port = r.u16()?;
        let reply = match has {
            0 => None,
            1 => Some(SocketAddr::new(ip, port)),
            _ => return Err(DecodeError::Invalid("handover: reply flag")),
        };
        let reliable = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::Invalid("handover: reliable flag")),
        };
        let next = r.u64()?;
        let np = usize::from(r.u16()?);
        if np * (8 + 2 + 4 + HEADER_LEN + 2) > r.remaining() {
            return Err(DecodeError::Invalid(
                "handover: partial count beyond the input",
            ));
        }
        let mut partials = Vec::with_capacity(np);
        for _ in 0..np {
            partials.push(decode_partial(&mut r)?);
        }
        out.push(StreamState {
            sender,
            id,
            reply,
            reliable,
            next,
            partials,
        });
    }
    r.finish()?;
    Ok(out)
}

fn decode_partial(r: &mut Reader<'_>) -> Result<PartialState, DecodeError> {
    let first_seq = r.u64()?;
    let frags = r.u16()?;
    let msg_len = r.u32()?;
    let (header, _) = FrameHeader::parse(r.bytes(HEADER_LEN)?)?;
    let tag = TagName::decode(r)?;
    let count = usize::from(r.u16()?);
    if frags == 0 || count > usize::from(frags) {
        return Err(DecodeError::Invalid("handover: piece count"));
    }
    let mut pieces: Vec<(u16, Vec<u8>)> = Vec::with_capacity(count.min(r.remaining() / 6));
    let mut total = 0u64;
    for _ in 0..count {
        let index = r.u16()?;
        let len = r.u32()? as usize;
        let bytes = r.bytes(len)?;
        total += len as u64;
        if index >= frags || pieces.last().is_some_and(|(i, _)| *i >= index) {
            return Err(DecodeError::Invalid("handover: piece index"));
        }
        if total > u64::from(msg_len) {
            return Err(DecodeError::Invalid(
                "handover: pieces longer than the message",
            ));
        }
        pieces.push((index, bytes.to_vec()));
    }
    Ok(PartialState {
        first_seq,
        frags,
        msg_len,
        header,
        tag,
        pieces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Pid, SenderInfo, SeqNum};
    use proptest::prelude::*;

    fn partial() -> impl Strategy<Value = PartialState> {
        (
            any::<u64>(),
            1u16..8,
            any::<u32>(),
            proptest::collection::btree_map(
                0u16..8,
                proptest::collection::vec(any::<u8>(), 0..20),
                0..4,
            ),
        )
            .prop_map(|(first_seq, frags, pid, pieces)| {
                let pieces: Vec<(u16, Vec<u8>)> =
                    pieces.into_iter().filter(|(i, _)| *i < frags).collect();
                let msg_len = pieces.iter().map(|(_, b)| b.len() as u32).sum::<u32>() + 3;
                PartialState {
                    first_seq,
                    frags,
                    msg_len,
                    header: FrameHeader {
                        flags: 0,
                        sender: SenderInfo {
                            pid: Pid(pid),
                            node: NodeAddr::LOCALHOST,
                        },
                        stream: 2,
                        seq: SeqNum(first_seq),
                        timestamp_ns: 9,
                    },
                    tag: TagName::new("/a/b").unwrap(),
                    pieces,
                }
            })
    }

    fn stream() -> impl Strategy<Value = StreamState> {
        (
            any::<[u8; 4]>(),
            any::<u64>(),
            proptest::option::of(any::<u16>()),
            any::<bool>(),
            any::<u64>(),
            proptest::collection::vec(partial(), 0..3),
        )
            .prop_map(|(ip, id, reply, reliable, next, partials)| StreamState {
                sender: IpAddr::from(ip),
                id,
                reply: reply.map(|p| SocketAddr::new(IpAddr::from(ip), p)),
                reliable,
                next,
                partials,
            })
    }

    proptest! {
        #[test]
        fn what_is_encoded_decodes_the_same(streams in proptest::collection::vec(stream(), 0..5)) {
            let bytes = encode(&streams);
            let back = decode(&bytes).unwrap();
            // IPv4 senders come back as IPv4 (NodeAddr keeps the family).
            prop_assert_eq!(back, streams);
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn a_cut_or_flipped_encoding_never_panics(
            streams in proptest::collection::vec(stream(), 1..3),
            cut in any::<usize>(),
            flip in any::<(usize, u8)>(),
        ) {
            let whole = encode(&streams);
            // Every proper prefix of a valid encoding is refused.
            let at = cut % whole.len();
            prop_assert!(decode(&whole[..at]).is_err());
            // A flipped byte may still decode (a count flipped lower
            // asks for fewer bytes), cut or not: it must not panic.
            let mut bytes = whole;
            let i = flip.0 % bytes.len();
            bytes[i] ^= flip.1;
            let _ = decode(&bytes);
            bytes.truncate(at);
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn pieces_out_of_order_or_beyond_the_message_are_refused() {
        let mut p = StreamState {
            sender: IpAddr::from([10, 0, 0, 1]),
            id: 3,
            reply: None,
            reliable: true,
            next: 5,
            partials: vec![PartialState {
                first_seq: 5,
                frags: 3,
                msg_len: 4,
                header: FrameHeader {
                    flags: 0,
                    sender: SenderInfo {
                        pid: Pid(1),
                        node: NodeAddr::LOCALHOST,
                    },
                    stream: 0,
                    seq: SeqNum(1),
                    timestamp_ns: 0,
                },
                tag: TagName::new("/t").unwrap(),
                pieces: vec![(1, vec![1, 2]), (0, vec![3])],
            }],
        };
        assert!(decode(&encode(std::slice::from_ref(&p))).is_err());
        p.partials[0].pieces = vec![(0, vec![1, 2, 3]), (1, vec![4, 5])];
        assert!(decode(&encode(std::slice::from_ref(&p))).is_err());
        p.partials[0].pieces = vec![(0, vec![1, 2]), (2, vec![4, 5])];
        assert_eq!(decode(&encode(std::slice::from_ref(&p))).unwrap(), vec![p]);
    }
}
