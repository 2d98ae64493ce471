//! The connection layer's datagram: one segment.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |       magic "TC" (0x4354)     |     kind      |     flags     |
//! +-------------------------------+---------------+---------------+
//! |                 source connection id (u64)                    |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! |        destination connection id (u64; 0 in a SYN)            |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! |           seq (u64): the segment's number, from 1             |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! |     ack (u64): the next segment number the sender expects     |
//! +                                                               +
//! |                                                               |
//! +---------------------------------------------------------------+
//! ~                      payload (DATA only)                      ~
//! +---------------------------------------------------------------+
//! ```
//!
//! All integers little-endian. kind: 1 SYN, 2 SYNACK, 3 DATA, 4 ACK,
//! 5 RST; flags: bit 0 FIN (a DATA segment that ends the stream).

/// Magic of a segment ("TC" little-endian).
pub(super) const MAGIC: u16 = 0x4354;
const HEADER: usize = 2 + 1 + 1 + 8 + 8 + 8 + 8;
const FLAG_FIN: u8 = 1;

/// What a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Syn,
    SynAck,
    Data,
    Ack,
    Rst,
}

impl Kind {
    fn to_u8(self) -> u8 {
        match self {
            Kind::Syn => 1,
            Kind::SynAck => 2,
            Kind::Data => 3,
            Kind::Ack => 4,
            Kind::Rst => 5,
        }
    }

    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => Kind::Syn,
            2 => Kind::SynAck,
            3 => Kind::Data,
            4 => Kind::Ack,
            5 => Kind::Rst,
            _ => return None,
        })
    }
}

/// One segment, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Segment {
    pub(super) kind: Kind,
    pub(super) fin: bool,
    pub(super) src: u64,
    pub(super) dst: u64,
    pub(super) seq: u64,
    pub(super) ack: u64,
    pub(super) payload: Vec<u8>,
}

impl Segment {
    /// A segment without payload.
    pub(super) fn control(kind: Kind, src: u64, dst: u64, ack: u64) -> Self {
        Self {
            kind,
            fin: false,
            src,
            dst,
            seq: 0,
            ack,
            payload: Vec::new(),
        }
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.payload.len());
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.push(self.kind.to_u8());
        out.push(if self.fin { FLAG_FIN } else { 0 });
        for v in [self.src, self.dst, self.seq, self.ack] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.payload);
        out
    }

    /// `None` for anything that is not a well-formed segment.
    pub(super) fn decode(bytes: &[u8]) -> Option<Self> {
        let header = bytes.get(..HEADER)?;
        if u16::from_le_bytes([header[0], header[1]]) != MAGIC {
            return None;
        }
        let kind = Kind::from_u8(header[2])?;
        let flags = header[3];
        if flags & !FLAG_FIN != 0 {
            return None;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&header[4 + 8 * i..12 + 8 * i]);
            u64::from_le_bytes(w)
        };
        let payload = bytes[HEADER..].to_vec();
        if kind != Kind::Data && (!payload.is_empty() || flags != 0) {
            return None;
        }
        Some(Self {
            kind,
            fin: flags & FLAG_FIN != 0,
            src: word(0),
            dst: word(1),
            seq: word(2),
            ack: word(3),
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_round_trip_and_garbage_is_refused() {
        let s = Segment {
            kind: Kind::Data,
            fin: true,
            src: 7,
            dst: u64::MAX,
            seq: 3,
            ack: 9,
            payload: vec![1, 2, 3],
        };
        assert_eq!(Segment::decode(&s.encode()), Some(s));
        let a = Segment::control(Kind::Ack, 1, 2, 5);
        assert_eq!(Segment::decode(&a.encode()), Some(a.clone()));
        let mut bad = a.encode();
        bad.push(0);
        assert_eq!(Segment::decode(&bad), None, "payload on an ACK");
        assert_eq!(Segment::decode(&[0x54, 0x43, 1]), None);
        assert_eq!(Segment::decode(&[0u8; HEADER]), None);
    }
}
