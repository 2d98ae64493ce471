//! Data-path datagrams: what daemons exchange on their UDP delivery port.
//!
//! One datagram stream runs from a writer (a publisher's delivery service) to
//! each remote node that has receivers (docs/design.md §2, "Data path across
//! nodes"). The writer picks a random 64-bit `stream` id; every datagram of the
//! stream, in both directions, carries it. `tagwire-reliable` holds the state
//! machines that give these datagrams their meaning (windows, ACK/NACK,
//! fragments); this module only lays out the bytes.
//!
//! Reading and writing are two types per kind, as in smoltcp: a checked
//! *view* over received bytes ([`DataView`], [`BatchView`],
//! [`AckNackView`]), whose `new_checked` validates length, kind and every
//! field once and whose accessors then read in place (the tag and payload
//! borrowed), and a *representation* for building ([`DataRepr`],
//! [`BatchRepr`], [`Heartbeat`], [`AckNack`]), whose `encode` appends the
//! datagram. The byte ranges of the fields are stated once, in [`field`].
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
//! Kind 1, [`DataView`] / [`DataRepr`]: one fragment of one message (58 bytes + tag + payload):
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
//! Kind 4, [`BatchView`] / [`BatchRepr`]: several whole messages of one tag in one datagram
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
//! Kind 3, [`AckNackView`] / [`AckNack`] (reader → writer, 9..=45 bytes):
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

mod repr;
#[cfg(test)]
mod tests;
mod view;

pub use repr::{push_batch_entry, AckNack, BatchRepr, DataRepr, Heartbeat};
pub use view::{AckNackView, BatchView, DataView};

use crate::codec::DecodeError;
use crate::frame::HEADER_LEN;
use crate::ids::TagName;

/// First two bytes of every datagram ("TD" little-endian).
pub const MAGIC: u16 = 0x4454;
/// Datagram protocol version.
pub const VERSION: u8 = 1;
/// Largest UDP payload over IPv4 (65535 − 8 − 20); no datagram is larger.
pub const MAX_DATAGRAM: usize = 65507;
/// Largest message a data stream carries, in bytes (64 MiB).
pub const MAX_MESSAGE: u32 = 64 << 20;
/// Flag bit: the stream is reliable (the reader acknowledges).
pub const FLAG_RELIABLE: u8 = 0x01;
/// Flag bit: a publisher sent this first copy from its own thread and
/// socket (the send ticket, `tagwire_shm::Ticket`), not from its node's
/// delivery port. The stream is still its node's: a receiver files the
/// datagram under the stream of that id from the same address, and answers
/// where the stream's other datagrams come from, not to this one's source.
pub const FLAG_DIRECT: u8 = 0x02;
/// Flag bit of a data datagram: the message is cut evenly, so that every
/// data datagram of a stream of equal messages has the same length (what
/// lets a sender hand the kernel many of them in one segmented send):
/// fragment `frag` holds bytes `frag·s .. min((frag+1)·s, msg_len)` with
/// `s = ⌈msg_len / frags⌉` ([`even_piece`]), and every fragment carries
/// exactly `s` bytes: [`DataRepr::encode`] pads a shorter piece (the last)
/// with zeros, [`DataView`] drops them again and refuses any other length.
pub const FLAG_EVEN: u8 = 0x04;
/// Bytes before the body: magic, version, kind, stream.
pub const COMMON_LEN: usize = field::STREAM.end;
/// Bytes of a data datagram before its tag name and payload.
pub const DATA_FIXED_LEN: usize = field::DATA_TAG_LEN + 1;
/// Bytes of a batch datagram before its tag name and entries.
pub const BATCH_FIXED_LEN: usize = field::BATCH_TAG_LEN + 1;
/// Bytes each batch entry adds beside its payload.
pub const BATCH_ENTRY_OVERHEAD: usize = HEADER_LEN + 4;
/// Most missing seqs one [`AckNack`] can name (its bitmap is 32 bytes).
pub const MAX_MISSING_SPAN: u64 = 8 * MAX_BITMAP as u64;
/// The first four bytes of every acknowledgement datagram (magic, version,
/// kind): a receiving socket can tell its acknowledgements apart by them
/// alone (`tagwire_net::delivery_sockets` steers them).
pub const ACKNACK_PREFIX: [u8; 4] = {
    let m = MAGIC.to_le_bytes();
    [m[0], m[1], VERSION, KIND_ACKNACK]
};

const KIND_DATA: u8 = 1;
const KIND_HEARTBEAT: u8 = 2;
const KIND_ACKNACK: u8 = 3;
const KIND_BATCH: u8 = 4;
const MAX_BITMAP: usize = 32;
/// Bytes of a heartbeat datagram.
const HEARTBEAT_LEN: usize = field::LAST.end;

/// Where each field sits, in bytes from the start of the datagram: the one
/// statement of the layout drawn above, used by the views, the encoders and
/// [`peek_tag`].
pub mod field {
    use std::ops::Range;

    use crate::frame::HEADER_LEN;

    /// Magic "TD" (u16).
    pub const MAGIC: Range<usize> = 0..2;
    /// Protocol version (u8).
    pub const VERSION: usize = 2;
    /// Kind (u8).
    pub const KIND: usize = 3;
    /// Stream id (u64).
    pub const STREAM: Range<usize> = 4..12;

    /// Data and batch: the datagram's seq (u64).
    pub const SEQ: Range<usize> = 12..20;
    /// Data and batch: flag bits (u8).
    pub const FLAGS: usize = 20;

    /// Data: fragment index (u16).
    pub const FRAG: Range<usize> = 21..23;
    /// Data: fragment count (u16).
    pub const FRAGS: Range<usize> = 23..25;
    /// Data: whole message length (u32).
    pub const MSG_LEN: Range<usize> = 25..29;
    /// Data: the publisher's frame header.
    pub const HEADER: Range<usize> = 29..29 + HEADER_LEN;
    /// Data: tag name length (u8); the name and then the payload follow.
    pub const DATA_TAG_LEN: usize = HEADER.end;

    /// Batch: message count (u16).
    pub const COUNT: Range<usize> = 21..23;
    /// Batch: tag name length (u8); the name and then the entries follow.
    pub const BATCH_TAG_LEN: usize = 23;

    /// Heartbeat: oldest seq held (u64).
    pub const FIRST: Range<usize> = 12..20;
    /// Heartbeat: last seq sent (u64).
    pub const LAST: Range<usize> = 20..28;

    /// Acknowledgement: cumulative seq (u64).
    pub const ACK_THROUGH: Range<usize> = 12..20;
    /// Acknowledgement: bitmap length (u8); the bitmap, then the optional
    /// credit (u32), follow.
    pub const BITMAP_LEN: usize = 20;
}

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

/// One received datagram, checked: the stream it belongs to and a view of
/// what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The writer-chosen stream id.
    pub stream: u64,
    /// The kind-specific body.
    pub body: Body<'a>,
}

/// The body of a [`Datagram`], by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// Kind 1: one fragment of a message.
    Data(DataView<'a>),
    /// Kind 2: the writer's window.
    Heartbeat(Heartbeat),
    /// Kind 3: the reader's acknowledgement.
    AckNack(AckNackView<'a>),
    /// Kind 4: several whole messages.
    Batch(BatchView<'a>),
}

impl<'a> Datagram<'a> {
    /// Checks one datagram of any kind; the views borrow `buf`.
    pub fn decode(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let (kind, stream) = common_checked(buf)?;
        let body = match kind {
            KIND_DATA => Body::Data(DataView::new_checked(buf)?),
            KIND_HEARTBEAT => Body::Heartbeat(Heartbeat::parse(buf)?),
            KIND_ACKNACK => Body::AckNack(AckNackView::new_checked(buf)?),
            KIND_BATCH => Body::Batch(BatchView::new_checked(buf)?),
            k => return Err(unknown_kind(k)),
        };
        Ok(Datagram { stream, body })
    }

    /// A data or batch datagram's seq, flags and tag name (`None` for
    /// heartbeats and acknowledgements).
    pub fn data(&self) -> Option<(u64, u8, &'a str)> {
        match &self.body {
            Body::Data(d) => Some((d.seq(), d.flags(), d.tag())),
            Body::Batch(b) => Some((b.seq(), b.flags(), b.tag())),
            Body::Heartbeat(_) | Body::AckNack(_) => None,
        }
    }
}

/// The tag a data or batch datagram names, read without checking the rest
/// (`None` for heartbeats and acknowledgements); an error for bytes
/// [`Datagram::decode`] would refuse before the tag.
pub fn peek_tag(buf: &[u8]) -> Result<Option<&str>, DecodeError> {
    let (kind, _) = common_checked(buf)?;
    let at = match kind {
        KIND_DATA => field::DATA_TAG_LEN,
        KIND_BATCH => field::BATCH_TAG_LEN,
        KIND_HEARTBEAT | KIND_ACKNACK => return Ok(None),
        k => return Err(unknown_kind(k)),
    };
    tag_at(buf, at).map(|(tag, _)| Some(tag))
}

/// The kind and stream of `buf`, once its common header is checked (length,
/// magic, version).
fn common_checked(buf: &[u8]) -> Result<(u8, u64), DecodeError> {
    if buf.len() > MAX_DATAGRAM {
        return Err(DecodeError::Invalid("datagram longer than MAX_DATAGRAM"));
    }
    need(buf, COMMON_LEN)?;
    let magic = u16::from_le_bytes(le(buf, field::MAGIC.start));
    if magic != MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    if buf[field::VERSION] != VERSION {
        return Err(DecodeError::BadVersion(buf[field::VERSION]));
    }
    Ok((
        buf[field::KIND],
        u64::from_le_bytes(le(buf, field::STREAM.start)),
    ))
}

/// `buf`'s common header, checked and of kind `kind`; its stream.
fn kind_checked(buf: &[u8], kind: u8) -> Result<u64, DecodeError> {
    match common_checked(buf)? {
        (k, stream) if k == kind => Ok(stream),
        (k, _) => Err(unknown_kind(k)),
    }
}

fn unknown_kind(k: u8) -> DecodeError {
    DecodeError::Unknown {
        what: "datagram kind",
        value: u32::from(k),
    }
}

/// An error unless `buf` holds at least `len` bytes.
fn need(buf: &[u8], len: usize) -> Result<(), DecodeError> {
    if buf.len() < len {
        return Err(DecodeError::Truncated {
            needed: len - buf.len(),
        });
    }
    Ok(())
}

/// The tag name whose length byte is at `at`, validated, and the offset
/// just past it.
fn tag_at(buf: &[u8], at: usize) -> Result<(&str, usize), DecodeError> {
    need(buf, at + 1)?;
    let end = at + 1 + usize::from(buf[at]);
    need(buf, end)?;
    let name = std::str::from_utf8(&buf[at + 1..end])
        .ok()
        .filter(|s| TagName::check(s).is_ok())
        .ok_or(DecodeError::Invalid("tag name"))?;
    Ok((name, end))
}

/// The `N` bytes at `at` (the caller has checked they are there).
fn le<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&buf[at..at + N]);
    a
}

/// Writes `bytes` over `out[range]`.
fn put(out: &mut [u8], range: std::ops::Range<usize>, bytes: &[u8]) {
    out[range].copy_from_slice(bytes);
}

/// Appends `len` zero bytes to `out` with the common header of `kind` and
/// `stream` written over the first ones; returns where they start.
fn open(out: &mut Vec<u8>, kind: u8, stream: u64, len: usize) -> usize {
    let start = out.len();
    out.resize(start + len, 0);
    let o = &mut out[start..];
    put(o, field::MAGIC, &MAGIC.to_le_bytes());
    o[field::VERSION] = VERSION;
    o[field::KIND] = kind;
    put(o, field::STREAM, &stream.to_le_bytes());
    start
}
