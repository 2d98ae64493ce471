//! Checked views over received datagrams: validated once, read in place.

use super::{
    even_piece, field, kind_checked, le, need, tag_at, AckNack, BATCH_FIXED_LEN, DATA_FIXED_LEN,
    FLAG_EVEN, KIND_ACKNACK, KIND_BATCH, KIND_DATA, MAX_BITMAP, MAX_MESSAGE,
};
use crate::codec::{DecodeError, Reader};
use crate::frame::{FrameHeader, HEADER_LEN};

/// A data datagram (kind 1), checked: one fragment of one message. The
/// fixed fields are read from the bytes; the tag and the payload borrow
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataView<'a> {
    buf: &'a [u8],
    /// Parsed once: its version byte is checked.
    header: FrameHeader,
    tag: &'a str,
    /// The fragment's bytes (an evenly cut one's padding dropped).
    payload: &'a [u8],
}

impl<'a> DataView<'a> {
    /// Checks `buf` as a whole data datagram: common header, kind, every
    /// field in range (fragment index below count, first seq ≥ 1, message
    /// ≤ [`MAX_MESSAGE`], payload no longer than the message, an evenly cut
    /// fragment exactly its length) and a valid tag name.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, DecodeError> {
        kind_checked(buf, KIND_DATA)?;
        need(buf, DATA_FIXED_LEN)?;
        let (header, _) = FrameHeader::parse(&buf[field::HEADER])?;
        let (tag, end) = tag_at(buf, field::DATA_TAG_LEN)?;
        let mut view = Self {
            buf,
            header,
            tag,
            payload: &buf[end..],
        };
        let (frag, frags, msg_len) = (view.frag(), view.frags(), view.msg_len());
        if frags == 0 {
            return Err(DecodeError::Invalid("fragment count 0"));
        }
        if frag >= frags {
            return Err(DecodeError::Invalid("fragment index ≥ count"));
        }
        if view.seq() <= u64::from(frag) {
            return Err(DecodeError::Invalid(
                "fragment before the stream's first seq",
            ));
        }
        if msg_len > MAX_MESSAGE {
            return Err(DecodeError::Invalid("message longer than 64 MiB"));
        }
        if view.flags() & FLAG_EVEN != 0 {
            // Every fragment carries `step` bytes, the padding dropped here.
            let (range, step) = even_piece(msg_len as usize, frags, frag);
            if view.payload.len() != step {
                return Err(DecodeError::Invalid(
                    "evenly cut fragment of the wrong length",
                ));
            }
            view.payload = &view.payload[..range.len()];
        }
        if view.payload.len() > msg_len as usize {
            return Err(DecodeError::Invalid("fragment longer than its message"));
        }
        Ok(view)
    }

    /// The stream id.
    pub fn stream(&self) -> u64 {
        u64::from_le_bytes(le(self.buf, field::STREAM.start))
    }

    /// Per-stream datagram sequence number (≥ 1, > `frag`).
    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(le(self.buf, field::SEQ.start))
    }

    /// Flag bits ([`super::FLAG_RELIABLE`], [`super::FLAG_DIRECT`],
    /// [`FLAG_EVEN`]).
    pub fn flags(&self) -> u8 {
        self.buf[field::FLAGS]
    }

    /// Index of this fragment, `< frags`.
    pub fn frag(&self) -> u16 {
        u16::from_le_bytes(le(self.buf, field::FRAG.start))
    }

    /// Number of fragments of the message, ≥ 1.
    pub fn frags(&self) -> u16 {
        u16::from_le_bytes(le(self.buf, field::FRAGS.start))
    }

    /// Length of the whole message, ≤ [`MAX_MESSAGE`].
    pub fn msg_len(&self) -> u32 {
        u32::from_le_bytes(le(self.buf, field::MSG_LEN.start))
    }

    /// Seq of the message's first fragment (`seq - frag`, ≥ 1).
    pub fn first_seq(&self) -> u64 {
        self.seq() - u64::from(self.frag())
    }

    /// The original publisher's frame header.
    pub fn header(&self) -> FrameHeader {
        self.header
    }

    /// The tag the message was published on (a valid tag name).
    pub fn tag(&self) -> &'a str {
        self.tag
    }

    /// This fragment's bytes.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The whole datagram.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
}

/// A batch datagram (kind 4), checked: whole messages of one tag, every
/// entry whole and the entries filling the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchView<'a> {
    buf: &'a [u8],
    tag: &'a str,
    entries: &'a [u8],
}

impl<'a> BatchView<'a> {
    /// Checks `buf` as a whole batch datagram: common header, kind, seq
    /// ≥ 1, count ≥ 1 and equal to the entries it holds, a valid tag name.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, DecodeError> {
        kind_checked(buf, KIND_BATCH)?;
        need(buf, BATCH_FIXED_LEN)?;
        let (tag, end) = tag_at(buf, field::BATCH_TAG_LEN)?;
        let view = Self {
            buf,
            tag,
            entries: &buf[end..],
        };
        if view.seq() == 0 {
            return Err(DecodeError::Invalid("batch seq 0"));
        }
        if view.count() == 0 {
            return Err(DecodeError::Invalid("empty batch"));
        }
        let mut e = Reader::new(view.entries);
        for _ in 0..view.count() {
            batch_entry(&mut e)?;
        }
        e.finish()?;
        Ok(view)
    }

    /// The stream id.
    pub fn stream(&self) -> u64 {
        u64::from_le_bytes(le(self.buf, field::STREAM.start))
    }

    /// Per-stream datagram sequence number (≥ 1).
    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(le(self.buf, field::SEQ.start))
    }

    /// Flag bits ([`super::FLAG_RELIABLE`], [`super::FLAG_DIRECT`]).
    pub fn flags(&self) -> u8 {
        self.buf[field::FLAGS]
    }

    /// Number of messages, ≥ 1.
    pub fn count(&self) -> u16 {
        u16::from_le_bytes(le(self.buf, field::COUNT.start))
    }

    /// The tag the messages were published on (a valid tag name).
    pub fn tag(&self) -> &'a str {
        self.tag
    }

    /// The encoded entries ([`super::push_batch_entry`]).
    pub fn entries(&self) -> &'a [u8] {
        self.entries
    }

    /// The messages, in order: each publisher's header and payload.
    pub fn messages(&self) -> impl Iterator<Item = (FrameHeader, &'a [u8])> + 'a {
        let mut r = Reader::new(self.entries);
        std::iter::from_fn(move || batch_entry(&mut r).ok())
    }

    /// The whole datagram.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
}

fn batch_entry<'a>(r: &mut Reader<'a>) -> Result<(FrameHeader, &'a [u8]), DecodeError> {
    let (header, _) = FrameHeader::parse(r.bytes(HEADER_LEN)?)?;
    let len = r.u32()? as usize;
    Ok((header, r.bytes(len)?))
}

/// An acknowledgement datagram (kind 3), checked: a bitmap of at most 32
/// bytes naming no seq past `u64::MAX`, then nothing or a whole credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckNackView<'a> {
    buf: &'a [u8],
}

impl<'a> AckNackView<'a> {
    /// Checks `buf` as a whole acknowledgement datagram.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, DecodeError> {
        kind_checked(buf, KIND_ACKNACK)?;
        need(buf, field::BITMAP_LEN + 1)?;
        let len = usize::from(buf[field::BITMAP_LEN]);
        if len > MAX_BITMAP {
            return Err(DecodeError::Invalid("ack bitmap longer than 32 bytes"));
        }
        let end = field::BITMAP_LEN + 1 + len;
        need(buf, end)?;
        match buf.len() - end {
            0 | 4 => {}
            n if n < 4 => return Err(DecodeError::Truncated { needed: 4 - n }),
            n => return Err(DecodeError::Trailing(n - 4)),
        }
        let view = Self { buf };
        // (Every seq the bitmap speaks of, named missing or not: see
        // `known_through`.)
        if view.ack_through().checked_add(8 * len as u64).is_none() {
            return Err(DecodeError::Invalid("ack bitmap past u64::MAX"));
        }
        Ok(view)
    }

    /// The stream id.
    pub fn stream(&self) -> u64 {
        u64::from_le_bytes(le(self.buf, field::STREAM.start))
    }

    /// Every seq ≤ this was received.
    pub fn ack_through(&self) -> u64 {
        u64::from_le_bytes(le(self.buf, field::ACK_THROUGH.start))
    }

    /// The seqs the reader lacks, ascending.
    pub fn missing(&self) -> impl Iterator<Item = u64> + 'a {
        let base = self.ack_through();
        self.offsets().map(move |off| base + off)
    }

    /// Messages the reader takes after `ack_through` (`None`: no limit).
    pub fn credit(&self) -> Option<u32> {
        let at = field::BITMAP_LEN + 1 + self.bitmap().len();
        (self.buf.len() == at + 4).then(|| u32::from_le_bytes(le(self.buf, at)))
    }

    /// How far the reader's statement goes (see
    /// [`AckNack::known_through`]): the last seq named missing, or the end
    /// of a bitmap whose last byte names none.
    pub fn known_through(&self) -> u64 {
        let base = self.ack_through();
        let bitmap = self.bitmap();
        match bitmap.last() {
            None => base,
            // (Checked at decoding: no offset runs past u64::MAX.)
            Some(0) => base.saturating_add(8 * bitmap.len() as u64),
            Some(_) => self
                .last_named()
                .map_or(base, |off| base.saturating_add(off)),
        }
    }

    /// The representation: what [`AckNack::encode`] would write again.
    pub fn to_acknack(&self) -> AckNack {
        AckNack {
            ack_through: self.ack_through(),
            missing: self.missing().collect(),
            credit: self.credit(),
            known_through: self.known_through(),
        }
    }

    fn bitmap(&self) -> &'a [u8] {
        let len = usize::from(self.buf[field::BITMAP_LEN]);
        &self.buf[field::BITMAP_LEN + 1..field::BITMAP_LEN + 1 + len]
    }

    /// Offsets after `ack_through` of the seqs the bitmap names (from 1).
    fn offsets(&self) -> impl Iterator<Item = u64> + 'a {
        self.bitmap().iter().enumerate().flat_map(|(byte, &b)| {
            (0..8u64)
                .filter(move |bit| b & (1 << bit) != 0)
                .map(move |bit| byte as u64 * 8 + bit + 1)
        })
    }

    fn last_named(&self) -> Option<u64> {
        self.offsets().last()
    }
}
