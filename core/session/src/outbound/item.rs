//! What one outbound item is (a message, fragmented when large, or a
//! batch of small ones) and how its datagrams are encoded.

use tagwire_reliable::fragment_count;
use tagwire_wire::datagram::{even_piece, BatchRepr, DataRepr, FLAG_EVEN, FLAG_RELIABLE};
use tagwire_wire::frame::{FrameHeader, FLAG_BLOB};
use tagwire_wire::TagName;

/// A message (fragmented when large) or a batch.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Message {
        header: FrameHeader,
        message: Vec<u8>,
    },
    Batch {
        count: u16,
        entries: Vec<u8>,
    },
}

/// Datagram `index` of an item: the whole batch, or one piece of a
/// message cut into pieces of at most `max` payload bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Piece<'a> {
    pub(super) tag: &'a TagName,
    pub(super) out: &'a Outgoing,
    pub(super) index: usize,
    pub(super) max: usize,
}

impl Piece<'_> {
    /// Messages this datagram counts for (a batch: all of them; a
    /// message: its first piece) and its payload bytes.
    pub(super) fn size(&self) -> (usize, usize) {
        match self.out {
            Outgoing::Batch { count, entries } => (usize::from(*count), entries.len()),
            Outgoing::Message { message, .. } => {
                (usize::from(self.index == 0), self.max.min(message.len()))
            }
        }
    }

    /// Encodes the datagram for stream `stream`, numbered `seq`, into `buf`.
    pub(super) fn encode(&self, stream: u64, seq: u64, flags: u8, buf: &mut Vec<u8>) {
        let (tag, i, max) = (self.tag, self.index, self.max);
        match self.out {
            Outgoing::Batch { count, entries } => BatchRepr {
                seq,
                flags,
                count: *count,
                tag,
                entries,
            }
            .encode(stream, buf),
            Outgoing::Message { header, message } => {
                // `emit` checked the count fits a u16.
                let frags = fragment_count(message.len(), max.max(1)) as u16;
                // Cut evenly (`encode` pads the last piece): every datagram of
                // a stream of equal messages has one length, so the runtime
                // can hand many to the kernel in one segmented send.
                let (range, flags) = if frags > 1 {
                    (
                        even_piece(message.len(), frags, i as u16).0,
                        flags | FLAG_EVEN,
                    )
                } else {
                    (0..message.len(), flags)
                };
                DataRepr {
                    seq,
                    flags,
                    frag: i as u16,
                    frags,
                    // A message ≤ MAX_MESSAGE (the caller's ring bounds it).
                    msg_len: message.len() as u32,
                    header: *header,
                    tag,
                    payload: &message[range],
                }
                .encode(stream, buf)
            }
        }
    }
}

pub(crate) fn batch_repr<'a>(
    tag: &'a TagName,
    seq: u64,
    count: u16,
    entries: &'a [u8],
) -> BatchRepr<'a> {
    BatchRepr {
        seq,
        flags: FLAG_RELIABLE,
        count,
        tag,
        entries,
    }
}

/// The header as sent: a large message's ring record flag means nothing
/// on the wire.
pub(crate) fn clean(header: &FrameHeader) -> FrameHeader {
    let mut h = *header;
    h.flags &= !FLAG_BLOB;
    h
}

/// A record's payload as the caller hands it in: borrowed (copied when
/// kept), or in a buffer of its own (kept as it is).
pub(super) enum Payload<'a> {
    Slice(&'a [u8]),
    Buf(Vec<u8>),
}

impl Payload<'_> {
    pub(super) fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Slice(s) => s,
            Payload::Buf(b) => b,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Done with: a buffer goes back to `spare`.
    pub(super) fn recycle(self, spare: &mut Vec<Vec<u8>>) {
        if let Payload::Buf(b) = self {
            crate::keep_spare(spare, b);
        }
    }
}

/// A message sent alone: its payload's own buffer, or a copy in a spare one.
pub(super) fn message(
    header: &FrameHeader,
    payload: Payload<'_>,
    spare: &mut Vec<Vec<u8>>,
) -> Outgoing {
    Outgoing::Message {
        header: clean(header),
        message: match payload {
            Payload::Slice(s) => crate::copied(spare, s),
            Payload::Buf(b) => b,
        },
    }
}

impl Outgoing {
    /// Its bytes, for the next message or batch.
    pub(super) fn into_bytes(self) -> Vec<u8> {
        match self {
            Outgoing::Message { message, .. } => message,
            Outgoing::Batch { entries, .. } => entries,
        }
    }
}
