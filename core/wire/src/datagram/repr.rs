//! What a sender builds: the fields of each datagram kind, and their
//! encoding at the offsets [`super::field`] states.

use super::{
    batch_len, even_piece, field, kind_checked, le, need, open, put, COMMON_LEN, DATA_FIXED_LEN,
    FLAG_EVEN, HEARTBEAT_LEN, KIND_ACKNACK, KIND_BATCH, KIND_DATA, KIND_HEARTBEAT, MAX_BITMAP,
    MAX_MISSING_SPAN,
};
use crate::codec::DecodeError;
use crate::frame::{FrameHeader, HEADER_LEN};
use crate::ids::TagName;

/// A data datagram to send: one fragment of one message, borrowing the
/// tag and the caller's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRepr<'a> {
    /// Per-stream datagram sequence number (≥ 1, > `frag`).
    pub seq: u64,
    /// Flag bits ([`super::FLAG_RELIABLE`], [`super::FLAG_DIRECT`],
    /// [`FLAG_EVEN`]).
    pub flags: u8,
    /// Index of this fragment, `< frags`.
    pub frag: u16,
    /// Number of fragments of the message, ≥ 1.
    pub frags: u16,
    /// Length of the whole message, ≤ [`super::MAX_MESSAGE`].
    pub msg_len: u32,
    /// The original publisher's frame header.
    pub header: FrameHeader,
    /// The tag the message is published on.
    pub tag: &'a TagName,
    /// This fragment's bytes.
    pub payload: &'a [u8],
}

impl DataRepr<'_> {
    /// Appends the whole datagram (common header included) to `out`; an
    /// evenly cut fragment ([`FLAG_EVEN`]) padded to its length.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        let tag = self.tag.as_str().as_bytes();
        let start = open(out, KIND_DATA, stream, DATA_FIXED_LEN);
        let o = &mut out[start..];
        put(o, field::SEQ, &self.seq.to_le_bytes());
        o[field::FLAGS] = self.flags;
        put(o, field::FRAG, &self.frag.to_le_bytes());
        put(o, field::FRAGS, &self.frags.to_le_bytes());
        put(o, field::MSG_LEN, &self.msg_len.to_le_bytes());
        // The range is exactly HEADER_LEN long, so `emit` cannot fail.
        let _ = self.header.emit(&mut o[field::HEADER]);
        // A TagName is at most 255 bytes (MAX_TAG_NAME), so it fits a u8.
        o[field::DATA_TAG_LEN] = u8::try_from(tag.len()).unwrap_or(u8::MAX);
        out.extend_from_slice(tag);
        out.extend_from_slice(self.payload);
        if self.flags & FLAG_EVEN != 0 {
            let (_, step) = even_piece(self.msg_len as usize, self.frags, self.frag);
            out.resize(out.len() + step.saturating_sub(self.payload.len()), 0);
        }
    }
}

/// A batch datagram to send: whole messages of one tag, `entries` holding
/// them as [`push_batch_entry`] encodes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRepr<'a> {
    /// Per-stream datagram sequence number (≥ 1).
    pub seq: u64,
    /// Flag bits ([`super::FLAG_RELIABLE`], [`super::FLAG_DIRECT`]).
    pub flags: u8,
    /// Number of messages in `entries`, ≥ 1.
    pub count: u16,
    /// The tag the messages are published on.
    pub tag: &'a TagName,
    /// The encoded entries.
    pub entries: &'a [u8],
}

impl BatchRepr<'_> {
    /// Appends the whole datagram to `out`.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        out.reserve(batch_len(self.tag, self.entries.len()));
        let tag = self.tag.as_str().as_bytes();
        let start = open(out, KIND_BATCH, stream, super::BATCH_FIXED_LEN);
        let o = &mut out[start..];
        put(o, field::SEQ, &self.seq.to_le_bytes());
        o[field::FLAGS] = self.flags;
        put(o, field::COUNT, &self.count.to_le_bytes());
        o[field::BATCH_TAG_LEN] = u8::try_from(tag.len()).unwrap_or(u8::MAX);
        out.extend_from_slice(tag);
        out.extend_from_slice(self.entries);
    }
}

/// Appends one message to a batch's entries: its frame header, its length
/// (u32) and its bytes.
pub fn push_batch_entry(entries: &mut Vec<u8>, header: &FrameHeader, payload: &[u8]) {
    let mut h = [0u8; HEADER_LEN];
    // The array is exactly HEADER_LEN long, so `emit` cannot fail.
    let _ = header.emit(&mut h);
    entries.extend_from_slice(&h);
    // Batched messages fit a datagram, far below u32::MAX.
    entries.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    entries.extend_from_slice(payload);
}

/// Writer → reader (kind 2): the span of the writer's window. Sixteen
/// bytes of body, so it is its own view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Oldest seq the writer still holds.
    pub first: u64,
    /// Last seq sent (`first > last`: nothing unacknowledged).
    pub last: u64,
}

impl Heartbeat {
    /// Checks `buf` as a whole heartbeat datagram and reads it.
    pub fn parse(buf: &[u8]) -> Result<Self, DecodeError> {
        kind_checked(buf, KIND_HEARTBEAT)?;
        need(buf, HEARTBEAT_LEN)?;
        if buf.len() > HEARTBEAT_LEN {
            return Err(DecodeError::Trailing(buf.len() - HEARTBEAT_LEN));
        }
        Ok(Self {
            first: u64::from_le_bytes(le(buf, field::FIRST.start)),
            last: u64::from_le_bytes(le(buf, field::LAST.start)),
        })
    }

    /// Appends the whole datagram to `out`.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        let start = open(out, KIND_HEARTBEAT, stream, HEARTBEAT_LEN);
        let o = &mut out[start..];
        put(o, field::FIRST, &self.first.to_le_bytes());
        put(o, field::LAST, &self.last.to_le_bytes());
    }
}

/// Reader → writer (kind 3): cumulative acknowledgement plus the seqs it
/// lacks; [`super::AckNackView::to_acknack`] reads one back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AckNack {
    /// Every seq ≤ this was received.
    pub ack_through: u64,
    /// Seqs the reader lacks, ascending, each in
    /// `ack_through + 1 ..= ack_through + MAX_MISSING_SPAN`.
    pub missing: Vec<u64>,
    /// Messages the reader takes after `ack_through` (`None`: no limit).
    pub credit: Option<u32>,
    /// How far the reader's statement goes: every seq in
    /// `ack_through + 1 ..= known_through` is named in `missing` or was
    /// received (held out of order). At most `ack_through +`
    /// [`MAX_MISSING_SPAN`]; `ack_through` or below: nothing beyond the
    /// named seqs.
    ///
    /// Carried by the bitmap's length, so that older nodes read the same
    /// datagram unchanged: a bitmap whose last byte names no seq is whole
    /// bytes of received seqs; otherwise the statement ends at the last
    /// seq named (what an older reader's bitmap always meant). Decoded, it
    /// is the most the encoding can say: at most what was encoded, rounded
    /// down to a whole byte of the bitmap or to the last missing seq.
    pub known_through: u64,
}

impl AckNack {
    /// Appends the whole datagram to `out`. Seqs in `missing` outside the
    /// bitmap's span ([`MAX_MISSING_SPAN`] after `ack_through`) are not sent;
    /// the writer learns about them from a later AckNack.
    pub fn encode(&self, stream: u64, out: &mut Vec<u8>) {
        let mut bitmap = [0u8; MAX_BITMAP];
        // Whole bytes of seqs the reader holds (see `known_through`).
        let known = self.known_through.saturating_sub(self.ack_through) / 8;
        let mut used = known.min(MAX_BITMAP as u64) as usize;
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
        let start = open(out, KIND_ACKNACK, stream, field::BITMAP_LEN + 1);
        let o = &mut out[start..];
        put(o, field::ACK_THROUGH, &self.ack_through.to_le_bytes());
        // used ≤ 32.
        o[field::BITMAP_LEN] = used as u8;
        out.extend_from_slice(&bitmap[..used]);
        if let Some(c) = self.credit {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
}

const _: () = assert!(COMMON_LEN == 12 && DATA_FIXED_LEN == 70);
