//! The data frame header: who sent a message, its sequence number and time.
//!
//! Every message payload travels behind this fixed 40-byte header, in a
//! shared-memory slot and in every data datagram between nodes.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   version=1   |     flags     |     publisher stream (u16)    |
//! +---------------+---------------+-------------------------------+
//! |                         sender pid                            |
//! +---------------------------------------------------------------+
//! |                 sequence number (u64, per publisher)          |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! |          timestamp (u64, ns since the Unix epoch)             |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! |        sender node address (16 bytes, IPv4-mapped IPv6)       |
//! ~                                                               ~
//! +---------------------------------------------------------------+
//! |  payload ...  (or, if flags & BLOB: blob id u64, length u64)  |
//! ```
//!
//! The sender pid, node and publisher stream name one publisher (a process
//! may publish on a tag through several publishers): its sequence numbers
//! count up by one from 1, so a receiver sees any message missing between
//! two it got.
//!
//! A message too large for a shared-memory slot is stored out of line by the
//! daemon (a *blob*: the slower path of docs/design.md §2, with no change to
//! the call); the slot then carries [`BlobRef`] instead of the payload.

use crate::codec::{DecodeError, Reader, Writer};
use crate::ids::{NodeAddr, Pid, SenderInfo, SeqNum};

/// Size of [`FrameHeader`] on the wire.
pub const HEADER_LEN: usize = 40;

const VERSION: u8 = 1;

/// Flag: the payload is a [`BlobRef`], not the message.
pub const FLAG_BLOB: u8 = 0x01;

/// Flag: the message starts with an [`Ext`](crate::instance::Ext) block
/// (key, instance state, strength, DDS origin), its payload after it.
pub const FLAG_EXT: u8 = 0x02;

/// The fixed header in front of every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Flag bits ([`FLAG_BLOB`]).
    pub flags: u8,
    /// Who sent the message.
    pub sender: SenderInfo,
    /// Which of the sending process's publishers (a number the process
    /// gives each): with `sender`, it names one sequence of numbers.
    pub stream: u16,
    /// The publisher's sequence number.
    pub seq: SeqNum,
    /// Send time, ns since the Unix epoch.
    pub timestamp_ns: u64,
}

impl FrameHeader {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    /// Returns `None` if `out` is shorter than that.
    pub fn emit(&self, out: &mut [u8]) -> Option<()> {
        let out = out.get_mut(..HEADER_LEN)?;
        out[0] = VERSION;
        out[1] = self.flags;
        out[2..4].copy_from_slice(&self.stream.to_le_bytes());
        out[4..8].copy_from_slice(&self.sender.pid.0.to_le_bytes());
        out[8..16].copy_from_slice(&self.seq.0.to_le_bytes());
        out[16..24].copy_from_slice(&self.timestamp_ns.to_le_bytes());
        out[24..40].copy_from_slice(&self.sender.node.to_bytes());
        Some(())
    }

    /// Parses a header and returns it with the payload that follows.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), DecodeError> {
        let mut r = Reader::new(buf);
        let version = r.u8()?;
        if version != VERSION {
            return Err(DecodeError::BadVersion(version));
        }
        let flags = r.u8()?;
        let stream = r.u16()?;
        let pid = Pid(r.u32()?);
        let seq = SeqNum(r.u64()?);
        let timestamp_ns = r.u64()?;
        let node = NodeAddr::from_bytes(r.array()?);
        let header = FrameHeader {
            flags,
            sender: SenderInfo { pid, node },
            stream,
            seq,
            timestamp_ns,
        };
        Ok((header, &buf[HEADER_LEN..]))
    }
}

/// The payload of a frame with [`FLAG_BLOB`]: where the daemon keeps the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobRef {
    /// The daemon's id for the stored message.
    pub blob_id: u64,
    /// The message length in bytes.
    pub len: u64,
}

impl BlobRef {
    /// Encoded size.
    pub const LEN: usize = 16;

    /// Encodes the reference.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut w = Writer::new();
        w.u64(self.blob_id).u64(self.len);
        let mut out = [0u8; 16];
        out.copy_from_slice(&w.into_inner());
        out
    }

    /// Decodes a reference; the whole input must be consumed.
    pub fn parse(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let blob_id = r.u64()?;
        let len = r.u64()?;
        r.finish()?;
        Ok(BlobRef { blob_id, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn header_round_trips(flags: u8, pid: u32, stream: u16, seq: u64, ts: u64, node: [u8; 16], payload: Vec<u8>) {
            let h = FrameHeader {
                flags,
                sender: SenderInfo { pid: Pid(pid), node: NodeAddr::from_bytes(node) },
                stream,
                seq: SeqNum(seq),
                timestamp_ns: ts,
            };
            let mut buf = vec![0u8; HEADER_LEN];
            h.emit(&mut buf).unwrap();
            buf.extend_from_slice(&payload);
            let (back, rest) = FrameHeader::parse(&buf).unwrap();
            prop_assert_eq!(back, h);
            prop_assert_eq!(rest, &payload[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes: Vec<u8>) {
            let _ = FrameHeader::parse(&bytes);
            let _ = BlobRef::parse(&bytes);
        }
    }

    #[test]
    fn short_buffers_are_rejected() {
        assert!(matches!(
            FrameHeader::parse(&[1, 0, 0]),
            Err(DecodeError::Truncated { .. })
        ));
        assert_eq!(
            FrameHeader::parse(&[9; 40]).unwrap_err(),
            DecodeError::BadVersion(9)
        );
        let h = FrameHeader {
            flags: 0,
            sender: SenderInfo::default(),
            stream: 0,
            seq: SeqNum(1),
            timestamp_ns: 0,
        };
        assert!(h.emit(&mut [0u8; 39]).is_none());
    }
}
