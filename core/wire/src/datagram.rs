//! Data-path datagrams: what daemons exchange on their UDP delivery port.
//!
//! One datagram stream runs from a writer (a publisher's delivery service) to
//! each remote node that has receivers (docs/design.md §2, "Data path across
//! nodes"). The writer picks a random 64-bit `stream` id; every datagram of the
//! stream, in both directions, carries it. `tagwire-reliable` holds the state
//! machines that give these datagrams their meaning (windows, ACK/NACK,
//! fragments); this module only lays out the bytes.
//!
//! Common header (12 bytes), little-endian like every tagwire codec:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        magic "TD" (0x4454)    |  version = 1  |  kind 1..=4   |
//! +-------------------------------+---------------+---------------+
//! |              stream id (u64, chosen by the writer)            |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! ~                        body, by kind                          ~
//! ```
//!
//! Kind 1, [`DataRef`]: one fragment of one message (58 bytes + tag + payload):
//!
//! ```text
//! +---------------------------------------------------------------+
//! |     seq (u64): per-stream datagram number, from 1, +1 each    |
//! +                                                               +
//! |                                                               |
//! +---------------+-------------------------------+---------------+
//! |  flags (u8)   |        frag (u16, index)      | frags (u16 ..
//! +---------------+-------------------------------+---------------+
//!  .. count ≥ 1)  |        msg_len (u32, whole message, ≤ 64 MiB) ..
//! +---------------+-----------------------------------------------+
//!  ..             |  FrameHeader (40 bytes: pid, node, publisher  ..
//! +---------------+                                               +
//! ~   seq, timestamp; see `frame`), repeated in every fragment    ~
//! +---------------+-----------------------------------------------+
//! | tag len (u8)  |  tag name (UTF-8, a valid `TagName`)          ~
//! +---------------+-----------------------------------------------+
//! ~  fragment payload: the rest of the datagram (≤ msg_len bytes) ~
//! +---------------------------------------------------------------+
//! ```
//!
//! A message cut into `frags` fragments uses `frags` consecutive `seq`s, so the
//! message's first datagram is `seq - frag`.
//!
//! Kind 4, [`BatchRef`]: several whole messages of one tag in one datagram
//! (a forwarder that finds many small messages ready packs them; the reader
//! sequences datagrams, so a batch is acknowledged and resent as one):
//!
//! ```text
//! seq (u64) | flags (u8) | count (u16, ≥ 1) | tag len (u8) | tag name
//! then `count` entries: FrameHeader (40 bytes) | len (u32) | len bytes
//! ```
//!
//! The entries fill the datagram exactly.
//!
//! Kind 2, [`Heartbeat`] (writer → reader, 16 bytes): `first` (u64, oldest seq
//! the writer still holds) then `last` (u64, last seq sent); `first > last`
//! means nothing is unacknowledged.
//!
//! Kind 3, [`AckNack`] (reader → writer, 9..=45 bytes):
//!
//! ```text
//! +---------------------------------------------------------------+
//! |   ack_through (u64): every seq ≤ this was received            |
//! +                                                               +
//! |                                                               |
//! +---------------+-----------------------------------------------+
//! | bitmap bytes  |  bitmap (0..=32 bytes): bit i (LSB first) set  ~
//! |   (u8 ≤ 32)   |  ⇒ seq ack_through + 1 + i is missing          ~
//! +---------------+-----------------------------------------------+
//! |  credit (u32, optional): messages the receiver takes after     |
//! |  ack_through; absent: no limit                                 |
//! +---------------------------------------------------------------+
//! ```
//!
//! The credit is the receiver's room for a lossless subscriber
//! (`tagwire-session`): the writer sends no more unacknowledged messages
//! than it says. It is sent only while limited, so a reader without
//! lossless subscribers sends what decoders before the field accept.

use std::borrow::Cow;

use crate::codec::{DecodeError, Reader};
use crate::frame::{FrameHeader, HEADER_LEN};
use crate::ids::TagName;

/// First two bytes of every datagram ("TD" little-endian).
pub const MAGIC: u16 = 0x4454;
/// Datagram protocol version.
pub const VERSION: u8 = 1;
/// Largest UDP payload over IPv4 (65535 − 8 − 20); no datagram is larger.
pub const MAX_DATAGRAM: usize = 65507;
/// Largest message a data stream carries, in bytes (64 MiB).
pub const MAX_MESSAGE: u32 = 64 << 20;
/// [`DataRef::flags`] bit: the stream is reliable (the reader acknowledges).
pub const FLAG_RELIABLE: u8 = 0x01;
/// [`DataRef::flags`] bit: a publisher sent this first copy from its own
/// thread and socket (the send ticket, `tagwire_shm::Ticket`), not from its
/// node's delivery port. The stream is still its node's: a receiver files the
/// datagram under the stream of that id from the same address, and answers
/// where the stream's other datagrams come from, not to this one's source.
pub const FLAG_DIRECT: u8 = 0x02;
/// [`DataRef::flags`] bit: the message is cut evenly, so that every data
/// datagram of a stream of equal messages has the same length (what lets a
/// sender hand the kernel many of them in one segmented send): fragment
/// `frag` holds bytes `frag·s .. min((frag+1)·s, msg_len)` with
/// `s = ⌈msg_len / frags⌉` ([`even_piece`]), and every fragment carries
/// exactly `s` bytes: [`DataRef::encode`] pads a shorter piece (the last)
/// with zeros, decoding drops them again and refuses any other length.
pub const FLAG_EVEN: u8 = 0x04;
/// Bytes before the body: magic, version, kind, stream.
pub const COMMON_LEN: usize = 12;
/// Bytes of a data datagram before its tag name and payload.
pub const DATA_FIXED_LEN: usize = COMMON_LEN + 8 + 1 + 2 + 2 + 4 + HEADER_LEN + 1;
/// Most missing seqs one [`AckNack`] can name (its bitmap is 32 bytes).
pub const MAX_MISSING_SPAN: u64 = 256;

const KIND_DATA: u8 = 1;
const KIND_HEARTBEAT: u8 = 2;
const KIND_ACKNACK: u8 = 3;
const KIND_BATCH: u8 = 4;
/// The first four bytes of every [`AckNack`] datagram (magic, version,
/// kind): a receiving socket can be told apart its acknowledgements by
/// them alone (`tagwire_net::delivery_sockets` steers them).
pub const ACKNACK_PREFIX: [u8; 4] = {
    let m = MAGIC.to_le_bytes();
    [m[0], m[1], VERSION, KIND_ACKNACK]
};
/// Bytes of a batch datagram before its tag name and entries.
pub const BATCH_FIXED_LEN: usize = COMMON_LEN + 8 + 1 + 2 + 1;
/// Bytes each batch entry adds beside its payload.
pub const BATCH_ENTRY_OVERHEAD: usize = HEADER_LEN + 4;
const MAX_BITMAP: usize = 32;

/// Bytes of a batch datagram of `tag` whose entries take `entries` bytes
/// (a message of `n` bytes takes `BATCH_ENTRY_OVERHEAD + n`).
pub fn batch_len(tag: &TagName, entries: usize) -> usize {
    BATCH_FIXED_LEN + tag.as_str().len() + entries
}

/// The multicast group that carries `tag` (multicast carrier): one of
/// 239.255.75.1 ..= 239.255.75.254, from a hash of the name (FNV-1a), so
/// every node computes the same. Tags may share a group; receivers keep only
/// the tags they joined for.
pub fn tag_group(tag: &TagName) -> std::net::Ipv4Addr {
    let mut h: u32 = 0x811c_9dc5;
    for b in tag.as_str().bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    std::net::Ipv4Addr::new(239, 255, 75, (h % 254) as u8 + 1)
}

/// The bytes of fragment `frag` of a `msg_len`-byte message cut evenly
/// into `frags` ([`FLAG_EVEN`]): its range in the message, and the length
/// every fragment of it has on the wire (the last one padded to it).
pub fn even_piece(msg_len: usize, frags: u16, frag: u16) -> (std::ops::Range<usize>, usize) {
    let step = msg_len.div_ceil(usize::from(frags.max(1)));
    let start = (usize::from(frag) * step).min(msg_len);
    (start..msg_len.min(start + step), step)
}

/// How many payload bytes fit in one data datagram of at most `datagram_size`
/// bytes for this tag (0 if not even the fixed part fits).
pub fn max_fragment_payload(tag: &TagName, datagram_size: usize) -> usize {
    datagram_size
        .min(MAX_DATAGRAM)
        .saturating_sub(DATA_FIXED_LEN + tag.as_str().len())
}

/// One decoded datagram: the stream it belongs to and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The writer-chosen stream id.
    pub stream: u64,
    /// The kind-specific body.
    pub body: Body<'a>,
}

/// The body of a [`Datagram`], by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// Kind 1: one fragment of a message.
    Data(DataRef<'a>),
    /// Kind 2: the writer's window.
    Heartbeat(Heartbeat),
    /// Kind 3: the reader's acknowledgement.
    AckNack(AckNack),
    /// Kind 4: several whole messages.
    Batch(BatchRef<'a>),
}

/// A batch datagram: whole messages of one tag. `entries` holds them as
/// encoded by [`push_batch_entry`] (validated when decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRef<'a> {
    /// Per-stream datagram sequence number (≥ 1).
    pub seq: u64,
    /// Flag bits ([`FLAG_RELIABLE`]).
    pub flags: u8,
    /// Number of messages, ≥ 1.
    pub count: u16,
    /// The tag the messages were published on.
    pub tag: Cow<'a, TagName>,
    /// The encoded entries.
    pub entries: &'a [u8],
}

/// Appends one message to a batch's entries.
pub fn push_batch_entry(entries: &mut Vec<u8>, header: &FrameHeader, payload: &[u8]) {
    let mut h = [0u8; HEADER_LEN];
    // The array is exactly HEADER_LEN long, so `emit` cannot fail.
    let _ = header.emit(&mut h);
    entries.extend_from_slice(&h);
    // Batched messages fit a datagram, far below u32::MAX.
    entries.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    entries.extend_from_slice(payload);
}

impl<'a> BatchRef<'a> {
    /// Appends the whole datagram to `out`.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        out.reserve(batch_len(&self.tag, self.entries.len()));
        let tag = self.tag.as_str().as_bytes();
        common(out, KIND_BATCH, stream);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.push(self.flags);
        out.extend_from_slice(&self.count.to_le_bytes());
        out.push(u8::try_from(tag.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(tag);
        out.extend_from_slice(self.entries);
    }

    /// The messages, in order: each publisher's header and payload.
    pub fn messages(&self) -> impl Iterator<Item = (FrameHeader, &'a [u8])> + 'a {
        let mut r = Reader::new(self.entries);
        std::iter::from_fn(move || batch_entry(&mut r).ok())
    }
}

fn batch_entry<'a>(r: &mut Reader<'a>) -> Result<(FrameHeader, &'a [u8]), DecodeError> {
    let (header, _) = FrameHeader::parse(r.bytes(HEADER_LEN)?)?;
    let len = r.u32()? as usize;
    Ok((header, r.bytes(len)?))
}

/// A data datagram: one fragment of one message; the payload borrows the
/// datagram's bytes (decode) or the caller's message (encode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataRef<'a> {
    /// Per-stream datagram sequence number (≥ 1, > `frag`).
    pub seq: u64,
    /// Flag bits ([`FLAG_RELIABLE`]).
    pub flags: u8,
    /// Index of this fragment, `< frags`.
    pub frag: u16,
    /// Number of fragments of the message, ≥ 1.
    pub frags: u16,
    /// Length of the whole message, ≤ [`MAX_MESSAGE`].
    pub msg_len: u32,
    /// The original publisher's frame header.
    pub header: FrameHeader,
    /// The tag the message was published on (owned when decoded).
    pub tag: Cow<'a, TagName>,
    /// This fragment's bytes.
    pub payload: &'a [u8],
}

impl DataRef<'_> {
    /// Seq of the message's first fragment (`seq - frag`, never underflows in
    /// a decoded datagram).
    pub fn first_seq(&self) -> u64 {
        self.seq.saturating_sub(u64::from(self.frag))
    }

    /// Appends the whole datagram (common header included) to `out`.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        let tag = self.tag.as_str().as_bytes();
        out.reserve(DATA_FIXED_LEN + tag.len() + self.payload.len());
        common(out, KIND_DATA, stream);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.push(self.flags);
        out.extend_from_slice(&self.frag.to_le_bytes());
        out.extend_from_slice(&self.frags.to_le_bytes());
        out.extend_from_slice(&self.msg_len.to_le_bytes());
        let mut header = [0u8; HEADER_LEN];
        // The array is exactly HEADER_LEN long, so `emit` cannot fail.
        let _ = self.header.emit(&mut header);
        out.extend_from_slice(&header);
        // A TagName is at most 255 bytes (MAX_TAG_NAME), so it fits a u8.
        out.push(u8::try_from(tag.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(tag);
        out.extend_from_slice(self.payload);
        if self.flags & FLAG_EVEN != 0 {
            let (_, step) = even_piece(self.msg_len as usize, self.frags, self.frag);
            out.resize(out.len() + step.saturating_sub(self.payload.len()), 0);
        }
    }
}

/// Writer → reader: the span of the writer's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Oldest seq the writer still holds.
    pub first: u64,
    /// Last seq sent (`first > last`: nothing unacknowledged).
    pub last: u64,
}

impl Heartbeat {
    /// Appends the whole datagram to `out`.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        common(out, KIND_HEARTBEAT, stream);
        out.extend_from_slice(&self.first.to_le_bytes());
        out.extend_from_slice(&self.last.to_le_bytes());
    }
}

/// Reader → writer: cumulative acknowledgement plus the seqs it lacks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AckNack {
    /// Every seq ≤ this was received.
    pub ack_through: u64,
    /// Seqs the reader lacks, ascending, each in
    /// `ack_through + 1 ..= ack_through + MAX_MISSING_SPAN`.
    pub missing: Vec<u64>,
    /// Messages the reader takes after `ack_through` (`None`: no limit).
    pub credit: Option<u32>,
}

impl AckNack {
    /// Appends the whole datagram to `out`. Seqs in `missing` outside the
    /// bitmap's span ([`MAX_MISSING_SPAN`] after `ack_through`) are not sent;
    /// the writer learns about them from a later AckNack.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        let mut bitmap = [0u8; MAX_BITMAP];
        let mut used = 0;
        for &s in &self.missing {
            if s <= self.ack_through {
                continue;
            }
            let i = s - self.ack_through - 1;
            if i >= MAX_MISSING_SPAN {
                continue;
            }
            // i < 256, so both casts are lossless.
            let (byte, bit) = ((i / 8) as usize, (i % 8) as u32);
            bitmap[byte] |= 1 << bit;
            used = used.max(byte + 1);
        }
        common(out, KIND_ACKNACK, stream);
        out.extend_from_slice(&self.ack_through.to_le_bytes());
        // used ≤ 32.
        out.push(used as u8);
        out.extend_from_slice(&bitmap[..used]);
        if let Some(c) = self.credit {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
}

impl<'a> Datagram<'a> {
    /// Decodes one datagram; a data payload borrows from `buf`.
    pub fn decode(buf: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_known(buf, None)
    }

    /// [`Datagram::decode`], where a data or batch datagram naming `known`
    /// borrows it instead of building (allocating and validating) a tag
    /// name of its own: a receiver passes the tag its last datagram named,
    /// and a stream's datagrams cost no allocation each.
    pub fn decode_known(buf: &'a [u8], known: Option<&'a TagName>) -> Result<Self, DecodeError> {
        if buf.len() > MAX_DATAGRAM {
            return Err(DecodeError::Invalid("datagram longer than MAX_DATAGRAM"));
        }
        let mut r = Reader::new(buf);
        r.preamble(MAGIC, VERSION)?;
        let kind = r.u8()?;
        let stream = r.u64()?;
        let body = match kind {
            KIND_DATA => Body::Data(decode_data(&mut r, known)?),
            KIND_HEARTBEAT => {
                let hb = Heartbeat {
                    first: r.u64()?,
                    last: r.u64()?,
                };
                r.finish()?;
                Body::Heartbeat(hb)
            }
            KIND_ACKNACK => {
                let an = decode_acknack(&mut r)?;
                r.finish()?;
                Body::AckNack(an)
            }
            KIND_BATCH => Body::Batch(decode_batch(&mut r, known)?),
            k => {
                return Err(DecodeError::Unknown {
                    what: "datagram kind",
                    value: u32::from(k),
                })
            }
        };
        Ok(Datagram { stream, body })
    }

    /// Appends the encoded datagram to `out` (which may hold other bytes:
    /// buffers are meant to be reused).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match &self.body {
            Body::Data(d) => d.encode(self.stream, out),
            Body::Heartbeat(h) => h.encode(self.stream, out),
            Body::AckNack(a) => a.encode(self.stream, out),
            Body::Batch(b) => b.encode(self.stream, out),
        }
    }
}

/// The tag a data or batch datagram names, read without decoding the rest
/// (`None` for heartbeats and acknowledgements); an error for bytes
/// [`Datagram::decode`] would refuse before the tag.
pub fn peek_tag(buf: &[u8]) -> Result<Option<&str>, DecodeError> {
    let mut r = Reader::new(buf);
    r.preamble(MAGIC, VERSION)?;
    let kind = r.u8()?;
    let _stream = r.u64()?;
    match kind {
        // seq, flags, fragment, fragments, message length, frame header
        KIND_DATA => {
            r.bytes(8 + 1 + 2 + 2 + 4 + HEADER_LEN)?;
        }
        // seq, flags, count
        KIND_BATCH => {
            r.bytes(8 + 1 + 2)?;
        }
        KIND_HEARTBEAT | KIND_ACKNACK => return Ok(None),
        k => {
            return Err(DecodeError::Unknown {
                what: "datagram kind",
                value: u32::from(k),
            })
        }
    }
    let tag_len = usize::from(r.u8()?);
    std::str::from_utf8(r.bytes(tag_len)?)
        .map(Some)
        .map_err(|_| DecodeError::Invalid("tag name"))
}

fn common(out: &mut Vec<u8>, kind: u8, stream: u64) {
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&stream.to_le_bytes());
}

/// The tag name of `bytes`: `known` when it is that name (borrowed,
/// nothing allocated or validated again), else a new one, validated.
fn tag_name<'a>(bytes: &[u8], known: Option<&'a TagName>) -> Result<Cow<'a, TagName>, DecodeError> {
    if let Some(k) = known.filter(|k| k.as_str().as_bytes() == bytes) {
        return Ok(Cow::Borrowed(k));
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| TagName::new(s).ok())
        .map(Cow::Owned)
        .ok_or(DecodeError::Invalid("tag name"))
}

fn decode_data<'a>(
    r: &mut Reader<'a>,
    known: Option<&'a TagName>,
) -> Result<DataRef<'a>, DecodeError> {
    let seq = r.u64()?;
    let flags = r.u8()?;
    let frag = r.u16()?;
    let frags = r.u16()?;
    let msg_len = r.u32()?;
    let (header, _) = FrameHeader::parse(r.bytes(HEADER_LEN)?)?;
    let tag_len = usize::from(r.u8()?);
    let tag = tag_name(r.bytes(tag_len)?, known)?;
    let payload = r.bytes(r.remaining())?;
    if frags == 0 {
        return Err(DecodeError::Invalid("fragment count 0"));
    }
    if frag >= frags {
        return Err(DecodeError::Invalid("fragment index ≥ count"));
    }
    if seq <= u64::from(frag) {
        return Err(DecodeError::Invalid(
            "fragment before the stream's first seq",
        ));
    }
    if msg_len > MAX_MESSAGE {
        return Err(DecodeError::Invalid("message longer than 64 MiB"));
    }
    let payload = if flags & FLAG_EVEN != 0 {
        // Every fragment carries `step` bytes, the padding dropped here.
        let (range, step) = even_piece(msg_len as usize, frags, frag);
        if payload.len() != step {
            return Err(DecodeError::Invalid(
                "evenly cut fragment of the wrong length",
            ));
        }
        &payload[..range.len()]
    } else {
        payload
    };
    if payload.len() > msg_len as usize {
        return Err(DecodeError::Invalid("fragment longer than its message"));
    }
    Ok(DataRef {
        seq,
        flags,
        frag,
        frags,
        msg_len,
        header,
        tag,
        payload,
    })
}

fn decode_batch<'a>(
    r: &mut Reader<'a>,
    known: Option<&'a TagName>,
) -> Result<BatchRef<'a>, DecodeError> {
    let seq = r.u64()?;
    let flags = r.u8()?;
    let count = r.u16()?;
    let tag_len = usize::from(r.u8()?);
    let tag = tag_name(r.bytes(tag_len)?, known)?;
    if seq == 0 {
        return Err(DecodeError::Invalid("batch seq 0"));
    }
    if count == 0 {
        return Err(DecodeError::Invalid("empty batch"));
    }
    let entries = r.bytes(r.remaining())?;
    // Every entry must be whole and the entries must fill the datagram.
    let mut e = Reader::new(entries);
    for _ in 0..count {
        batch_entry(&mut e)?;
    }
    e.finish()?;
    Ok(BatchRef {
        seq,
        flags,
        count,
        tag,
        entries,
    })
}

fn decode_acknack(r: &mut Reader<'_>) -> Result<AckNack, DecodeError> {
    let ack_through = r.u64()?;
    let len = usize::from(r.u8()?);
    if len > MAX_BITMAP {
        return Err(DecodeError::Invalid("ack bitmap longer than 32 bytes"));
    }
    let bitmap = r.bytes(len)?;
    let mut missing = Vec::new();
    for (byte, &b) in bitmap.iter().enumerate() {
        for bit in 0..8 {
            if b & (1 << bit) == 0 {
                continue;
            }
            let offset = (byte * 8 + bit) as u64 + 1;
            let seq = ack_through
                .checked_add(offset)
                .ok_or(DecodeError::Invalid("missing seq past u64::MAX"))?;
            missing.push(seq);
        }
    }
    let credit = match r.remaining() {
        0 => None,
        _ => Some(r.u32()?),
    };
    Ok(AckNack {
        ack_through,
        missing,
        credit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{NodeAddr, Pid, SenderInfo, SeqNum};
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = TagName> {
        "(/[a-z0-9_]{1,12}){1,4}".prop_map(|s| TagName::new(&s).unwrap())
    }

    fn header() -> impl Strategy<Value = FrameHeader> {
        (
            any::<u8>(),
            any::<u32>(),
            any::<[u8; 16]>(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(flags, pid, node, seq, ts)| FrameHeader {
                flags,
                sender: SenderInfo {
                    pid: Pid(pid),
                    node: NodeAddr::from_bytes(node),
                },
                stream: 0,
                seq: SeqNum(seq),
                timestamp_ns: ts,
            })
    }

    /// An owned data datagram: (stream, seq, flags, frag, frags, header, tag,
    /// payload, extra message length).
    type DataParts = (u64, u64, u8, u16, u16, FrameHeader, TagName, Vec<u8>, u32);

    fn data_parts() -> impl Strategy<Value = DataParts> {
        (
            any::<u64>(),
            1u64..u64::MAX / 2,
            any::<u8>(),
            1u16..=u16::MAX,
            header(),
            name(),
            proptest::collection::vec(any::<u8>(), 0..300),
            0u32..1000,
        )
            .prop_flat_map(|(stream, seq, flags, frags, h, tag, payload, extra)| {
                (0..frags).prop_map(move |frag| {
                    (
                        stream,
                        seq + u64::from(frag),
                        // (Evenly cut fragments have lengths of their own:
                        // `even_cuts_round_trip`.)
                        flags & !FLAG_EVEN,
                        frag,
                        frags,
                        h,
                        tag.clone(),
                        payload.clone(),
                        extra,
                    )
                })
            })
    }

    fn encode_data(p: &DataParts) -> Vec<u8> {
        let (stream, seq, flags, frag, frags, header, tag, payload, extra) = p;
        let d = DataRef {
            seq: *seq,
            flags: *flags,
            frag: *frag,
            frags: *frags,
            msg_len: payload.len() as u32 + extra,
            header: *header,
            tag: Cow::Borrowed(tag),
            payload,
        };
        let mut out = vec![0xAA; 3];
        d.encode(*stream, &mut out);
        out.split_off(3)
    }

    fn acknack() -> impl Strategy<Value = AckNack> {
        (
            0u64..u64::MAX - 300,
            proptest::collection::btree_set(1u64..=MAX_MISSING_SPAN, 0..40),
            proptest::option::of(any::<u32>()),
        )
            .prop_map(|(ack_through, offs, credit)| AckNack {
                ack_through,
                missing: offs.into_iter().map(|o| ack_through + o).collect(),
                credit,
            })
    }

    fn any_datagram() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            data_parts().prop_map(|p| encode_data(&p)),
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(s, first, last)| {
                let mut out = Vec::new();
                Heartbeat { first, last }.encode(s, &mut out);
                out
            }),
            (any::<u64>(), acknack()).prop_map(|(s, a)| {
                let mut out = Vec::new();
                a.encode(s, &mut out);
                out
            }),
            batch_parts().prop_map(|p| encode_batch(&p)),
        ]
    }

    type BatchParts = (u64, u64, u8, TagName, Vec<(FrameHeader, Vec<u8>)>);

    fn batch_parts() -> impl Strategy<Value = BatchParts> {
        (
            any::<u64>(),
            1..u64::MAX,
            any::<u8>(),
            name(),
            proptest::collection::vec(
                (header(), proptest::collection::vec(any::<u8>(), 0..64)),
                1..12,
            ),
        )
    }

    fn encode_batch(p: &BatchParts) -> Vec<u8> {
        let (stream, seq, flags, tag, msgs) = p;
        let mut entries = Vec::new();
        for (h, m) in msgs {
            push_batch_entry(&mut entries, h, m);
        }
        let mut out = Vec::new();
        BatchRef {
            seq: *seq,
            flags: *flags,
            count: msgs.len() as u16,
            tag: Cow::Borrowed(tag),
            entries: &entries,
        }
        .encode(*stream, &mut out);
        out
    }

    proptest! {
        #[test]
        fn batch_round_trips(p in batch_parts()) {
            let bytes = encode_batch(&p);
            let d = Datagram::decode(&bytes).unwrap();
            let (stream, seq, flags, tag, msgs) = p;
            prop_assert_eq!(d.stream, stream);
            let Body::Batch(b) = d.body else { panic!("not a batch") };
            prop_assert_eq!((b.seq, b.flags, b.count as usize), (seq, flags, msgs.len()));
            prop_assert_eq!(b.tag.as_ref(), &tag);
            prop_assert_eq!(peek_tag(&bytes).unwrap(), Some(tag.as_str()));
            let got: Vec<(FrameHeader, Vec<u8>)> =
                b.messages().map(|(h, m)| (h, m.to_vec())).collect();
            prop_assert_eq!(got, msgs);
        }

        #[test]
        fn a_batch_whose_count_disagrees_with_its_entries_is_rejected(p in batch_parts(), more: bool) {
            let mut bytes = encode_batch(&p);
            // count sits after the common header, seq and flags.
            let at = COMMON_LEN + 8 + 1;
            let n = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
            let wrong = if more { n.wrapping_add(1) } else { n - 1 };
            bytes[at..at + 2].copy_from_slice(&wrong.to_le_bytes());
            prop_assert!(Datagram::decode(&bytes).is_err());
        }

        #[test]
        fn even_cuts_round_trip(
            msg in proptest::collection::vec(any::<u8>(), 0..5000),
            frags in 1u16..40,
        ) {
            let tag = TagName::new("/even").unwrap();
            let mut back = Vec::new();
            let mut lens = Vec::new();
            for frag in 0..frags {
                let (range, _) = even_piece(msg.len(), frags, frag);
                let d = DataRef {
                    seq: 1 + u64::from(frag),
                    flags: FLAG_EVEN | FLAG_RELIABLE,
                    frag,
                    frags,
                    msg_len: msg.len() as u32,
                    header: FrameHeader {
                        flags: 0,
                        sender: SenderInfo::default(),
                        stream: 0,
                        seq: SeqNum(9),
                        timestamp_ns: 5,
                    },
                    tag: Cow::Borrowed(&tag),
                    payload: &msg[range],
                };
                let mut out = Vec::new();
                d.encode(7, &mut out);
                lens.push(out.len());
                let g = Datagram::decode(&out).unwrap();
                let Body::Data(got) = &g.body else { panic!("not data") };
                back.extend_from_slice(got.payload);
                // Decoded and encoded again: the same bytes.
                let mut again = Vec::new();
                g.encode(&mut again);
                prop_assert_eq!(&again, &out);
                // A byte more is refused, and a byte less unless the
                // pieces are empty.
                out.push(0);
                prop_assert!(Datagram::decode(&out).is_err());
                out.truncate(out.len() - 2);
                prop_assert!(Datagram::decode(&out).is_err() || msg.len() < usize::from(frags));
            }
            prop_assert_eq!(back, msg);
            // Every datagram of the message has one length.
            lens.dedup();
            prop_assert_eq!(lens.len(), 1);
        }

        #[test]
        fn data_round_trips(p in data_parts()) {
            let bytes = encode_data(&p);
            let d = Datagram::decode(&bytes).unwrap();
            let (stream, seq, flags, frag, frags, header, tag, payload, extra) = p;
            prop_assert_eq!(d.stream, stream);
            let Body::Data(d) = d.body else { panic!("not data") };
            prop_assert_eq!(d.seq, seq);
            prop_assert_eq!(d.flags, flags);
            prop_assert_eq!(d.frag, frag);
            prop_assert_eq!(d.frags, frags);
            prop_assert_eq!(d.msg_len, payload.len() as u32 + extra);
            prop_assert_eq!(d.header, header);
            prop_assert_eq!(d.tag.as_ref(), &tag);
            prop_assert_eq!(peek_tag(&bytes).unwrap(), Some(tag.as_str()));
            prop_assert_eq!(d.payload, &payload[..]);
            prop_assert_eq!(d.first_seq(), seq - u64::from(frag));
            prop_assert_eq!(
                bytes.len(),
                DATA_FIXED_LEN + tag.as_str().len() + payload.len()
            );
        }

        #[test]
        fn heartbeat_round_trips(stream: u64, first: u64, last: u64) {
            let g = Datagram { stream, body: Body::Heartbeat(Heartbeat { first, last }) };
            let mut out = Vec::new();
            g.encode(&mut out);
            prop_assert_eq!(Datagram::decode(&out).unwrap(), g);
            prop_assert_eq!(peek_tag(&out).unwrap(), None);
        }

        #[test]
        fn acknack_round_trips(stream: u64, a in acknack()) {
            let g = Datagram { stream, body: Body::AckNack(a) };
            let mut out = Vec::new();
            g.encode(&mut out);
            prop_assert!(out.len() <= COMMON_LEN + 9 + MAX_BITMAP + 4);
            prop_assert_eq!(Datagram::decode(&out).unwrap(), g);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes: Vec<u8>, known in name()) {
            let _ = Datagram::decode(&bytes);
            let _ = Datagram::decode_known(&bytes, Some(&known));
        }

        /// Decoding with a known tag gives what decoding without one gives
        /// (same datagram or same error), borrowing the known name when the
        /// datagram names it; a name that is not the known one is still
        /// validated (`bad` is not a tag name).
        #[test]
        fn decoding_with_a_known_tag_decodes_alike(
            p in data_parts(),
            b in batch_parts(),
            other in name(),
            bad in prop_oneof![Just("no-slash"), Just("/a//b"), Just("/x\u{7}")],
        ) {
            // (Where the name starts: after the fixed fields and its length.)
            let data_at = COMMON_LEN + 8 + 1 + 2 + 2 + 4 + HEADER_LEN + 1;
            let batch_at = COMMON_LEN + 8 + 1 + 2 + 1;
            for (bytes, tag, at) in [
                (encode_data(&p), p.6.clone(), data_at),
                (encode_batch(&b), b.3.clone(), batch_at),
            ] {
                let plain = Datagram::decode(&bytes).unwrap();
                for known in [&tag, &other] {
                    let d = Datagram::decode_known(&bytes, Some(known)).unwrap();
                    prop_assert_eq!(&d, &plain);
                    let borrowed = match &d.body {
                        Body::Data(x) => matches!(x.tag, Cow::Borrowed(_)),
                        Body::Batch(x) => matches!(x.tag, Cow::Borrowed(_)),
                        _ => false,
                    };
                    prop_assert_eq!(borrowed, known == &tag);
                }
                // The same datagram naming an invalid tag of the same length.
                let name = tag.as_str();
                prop_assert_eq!(&bytes[at..at + name.len()], name.as_bytes());
                let mut forged = bytes.clone();
                let mut wrong = bad.as_bytes().to_vec();
                wrong.resize(name.len(), b'x');
                forged[at..at + name.len()].copy_from_slice(&wrong);
                if TagName::new(std::str::from_utf8(&wrong).unwrap()).is_err() {
                    prop_assert!(Datagram::decode_known(&forged, Some(&tag)).is_err());
                    prop_assert!(Datagram::decode(&forged).is_err());
                }
            }
        }

        #[test]
        fn truncated_datagrams_are_errors(bytes in any_datagram(), cut: usize) {
            let data = bytes[..2] == MAGIC.to_le_bytes() && bytes[3] == KIND_DATA;
            let cut = cut % bytes.len();
            let r = Datagram::decode(&bytes[..cut]);
            // A data datagram cut inside its payload is a shorter, valid
            // fragment; everything else must fail.
            let min_data = bytes.len() - match Datagram::decode(&bytes) {
                Ok(Datagram { body: Body::Data(d), .. }) => d.payload.len(),
                _ => 0,
            };
            // An AckNack cut just before its credit is one without credit.
            let credit_cut = matches!(
                Datagram::decode(&bytes),
                Ok(Datagram { body: Body::AckNack(AckNack { credit: Some(_), .. }), .. })
            ) && cut == bytes.len() - 4;
            if (data && cut >= min_data) || credit_cut {
                prop_assert!(r.is_ok());
            } else {
                prop_assert!(r.is_err());
            }
        }

        #[test]
        fn mutated_datagrams_never_panic(bytes in any_datagram(), pos: usize, byte: u8) {
            let mut bytes = bytes;
            let i = pos % bytes.len();
            bytes[i] = byte;
            let _ = Datagram::decode(&bytes);
        }
    }

    fn sample_data(frag: u16, frags: u16, msg_len: u32, payload: &[u8]) -> Vec<u8> {
        let tag = TagName::new("/robot/laser").unwrap();
        let d = DataRef {
            seq: 10,
            flags: FLAG_RELIABLE,
            frag,
            frags,
            msg_len,
            header: FrameHeader {
                flags: 0,
                sender: SenderInfo::default(),
                stream: 0,
                seq: SeqNum(1),
                timestamp_ns: 0,
            },
            tag: Cow::Borrowed(&tag),
            payload,
        };
        let mut out = Vec::new();
        d.encode(7, &mut out);
        out
    }

    #[test]
    fn every_tag_has_a_stable_administratively_scoped_group() {
        let a = TagName::new("/robot/laser").unwrap();
        let g = tag_group(&a);
        assert_eq!(g, tag_group(&TagName::new("/robot/laser").unwrap()));
        assert_eq!(&g.octets()[..3], &[239, 255, 75]);
        let groups: std::collections::HashSet<_> = (0..200)
            .map(|i| tag_group(&TagName::new(&format!("/t/{i}")).unwrap()))
            .collect();
        assert!(groups.len() > 100, "names spread over the groups");
        assert!(groups.iter().all(|g| (1..=254).contains(&g.octets()[3])));
    }

    #[test]
    fn inconsistent_fragments_are_rejected() {
        assert!(Datagram::decode(&sample_data(0, 1, 3, b"abc")).is_ok());
        let invalid = |b: Vec<u8>| matches!(Datagram::decode(&b), Err(DecodeError::Invalid(_)));
        assert!(invalid(sample_data(0, 0, 3, b"abc")));
        assert!(invalid(sample_data(2, 2, 3, b"abc")));
        assert!(invalid(sample_data(0, 1, 2, b"abc")));
        assert!(invalid(sample_data(0, 1, MAX_MESSAGE + 1, b"abc")));
        // seq 10 with frag 10 would put the message's first seq at 0.
        assert!(invalid(sample_data(10, 11, 3, b"abc")));
    }

    #[test]
    fn bad_headers_and_bitmaps_are_named() {
        let mut hb = Vec::new();
        Heartbeat { first: 1, last: 2 }.encode(5, &mut hb);
        let mut bad = hb.clone();
        bad[0] = 0;
        assert!(matches!(
            Datagram::decode(&bad),
            Err(DecodeError::BadMagic(_))
        ));
        bad = hb.clone();
        bad[2] = 9;
        assert_eq!(Datagram::decode(&bad), Err(DecodeError::BadVersion(9)));
        bad = hb.clone();
        bad[3] = 99;
        assert!(matches!(
            Datagram::decode(&bad),
            Err(DecodeError::Unknown { .. })
        ));
        hb.push(0);
        assert_eq!(Datagram::decode(&hb), Err(DecodeError::Trailing(1)));

        let mut an = Vec::new();
        common(&mut an, KIND_ACKNACK, 5);
        an.extend_from_slice(&0u64.to_le_bytes());
        an.push(33);
        an.extend_from_slice(&[0xff; 33]);
        assert!(matches!(
            Datagram::decode(&an),
            Err(DecodeError::Invalid(_))
        ));
        let mut wrap = Vec::new();
        common(&mut wrap, KIND_ACKNACK, 5);
        wrap.extend_from_slice(&u64::MAX.to_le_bytes());
        wrap.extend_from_slice(&[1, 1]);
        assert!(Datagram::decode(&wrap).is_err());
        assert!(Datagram::decode(&vec![0; MAX_DATAGRAM + 1]).is_err());
    }

    #[test]
    fn out_of_span_missing_seqs_are_not_encoded() {
        let a = AckNack {
            ack_through: 10,
            missing: vec![5, 11, 266, 267],
            credit: None,
        };
        let mut out = Vec::new();
        a.encode(1, &mut out);
        let Body::AckNack(back) = Datagram::decode(&out).unwrap().body else {
            panic!("not an acknack")
        };
        assert_eq!(back.missing, vec![11, 266]);
    }

    #[test]
    fn acknacks_and_only_acknacks_begin_with_their_prefix() {
        let mut out = Vec::new();
        AckNack::default().encode(9, &mut out);
        assert_eq!(out[..4], ACKNACK_PREFIX);
        assert_eq!(&ACKNACK_PREFIX[..2], b"TD");
        for kind in [KIND_DATA, KIND_HEARTBEAT, KIND_BATCH] {
            let mut other = Vec::new();
            common(&mut other, kind, 9);
            assert_ne!(other[..4], ACKNACK_PREFIX);
        }
    }

    #[test]
    fn an_acknack_without_credit_is_the_old_encoding_and_credit_is_a_trailing_u32() {
        let mut old = Vec::new();
        common(&mut old, KIND_ACKNACK, 5);
        old.extend_from_slice(&7u64.to_le_bytes());
        old.extend_from_slice(&[1, 0b101]);
        let a = AckNack {
            ack_through: 7,
            missing: vec![8, 10],
            credit: None,
        };
        let mut out = Vec::new();
        a.encode(5, &mut out);
        assert_eq!(out, old, "no credit: byte for byte what older nodes send");
        let limited = AckNack {
            credit: Some(300),
            ..a
        };
        out.clear();
        limited.encode(5, &mut out);
        assert_eq!(&out[..old.len()], &old[..]);
        assert_eq!(&out[old.len()..], &300u32.to_le_bytes());
        let Body::AckNack(back) = Datagram::decode(&out).unwrap().body else {
            panic!("not an acknack")
        };
        assert_eq!(back, limited);
        // A partial credit field is malformed.
        out.pop();
        assert!(Datagram::decode(&out).is_err());
    }

    #[test]
    fn fragment_payload_budget_fills_a_datagram() {
        let tag = TagName::new("/robot/laser").unwrap();
        let n = max_fragment_payload(&tag, MAX_DATAGRAM);
        let payload = vec![1u8; n];
        let bytes = sample_data(0, 1, n as u32, &payload);
        assert_eq!(bytes.len(), MAX_DATAGRAM);
        assert!(Datagram::decode(&bytes).is_ok());
        assert_eq!(max_fragment_payload(&tag, 10), 0);
    }
}
