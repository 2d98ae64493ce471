//! Keyed messages: instances, their lifecycle, publisher strength and a
//! DDS writer's identity.
//!
//! A message with [`FLAG_EXT`](crate::frame::FLAG_EXT) in its frame header
//! starts with an [`Ext`] block; the user's payload follows it. The block
//! travels inside the message bytes, so rings, blobs, datagrams and
//! history carry it unchanged; only publishers and subscribers read it.
//!
//! ```text
//! u8 version=1 | u8 parts (KEY 1, STRENGTH 2, ORIGIN 4) | u8 state | u8 0
//! [16 bytes key hash]                                   if KEY
//! [i32 strength, little-endian]                         if STRENGTH
//! [16 bytes DDS writer GUID | 16 bytes address (IPv4-mapped IPv6)
//!  | u16 port | u16 0]                                  if ORIGIN
//! ```
//!
//! **Keys** are compared by their 16-byte hash, computed the way DDS
//! computes a key hash (DDSI-RTPS §9.6.4.8): a key of at most 16 bytes is
//! itself, zero-padded; a longer one is its MD5 digest. For a tag mapped to
//! a DDS topic, the key bytes are the key fields serialized big-endian, so
//! tagwire and DDS name the same instance alike.

use std::net::SocketAddr;

use md5::{Digest, Md5};

use crate::codec::DecodeError;
use crate::ids::NodeAddr;

const VERSION: u8 = 1;
const PART_KEY: u8 = 0x01;
const PART_STRENGTH: u8 = 0x02;
const PART_ORIGIN: u8 = 0x04;
const ORIGIN_LEN: usize = 16 + 16 + 4;

/// An instance of a keyed tag: its key's 16-byte hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(pub [u8; 16]);

impl Key {
    /// The key hash of `key` (at most 16 bytes: itself, zero-padded; longer:
    /// its MD5 digest, as DDS does).
    pub fn of(key: &[u8]) -> Self {
        let mut h = [0u8; 16];
        if key.len() <= 16 {
            h[..key.len()].copy_from_slice(key);
        } else {
            h.copy_from_slice(&Md5::digest(key));
        }
        Key(h)
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// What a message says of its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum InstanceState {
    /// A sample of data (the instance lives).
    #[default]
    Alive,
    /// The instance was disposed (deleted); the payload is empty.
    Disposed,
    /// The publisher will write the instance no more; the payload is empty.
    Unregistered,
    /// Both (a DDS writer that disposes and unregisters at once).
    DisposedUnregistered,
}

impl InstanceState {
    /// DDS STATUS_INFO bits (DISPOSED 1, UNREGISTERED 2).
    pub fn status_bits(self) -> u32 {
        match self {
            Self::Alive => 0,
            Self::Disposed => 1,
            Self::Unregistered => 2,
            Self::DisposedUnregistered => 3,
        }
    }

    /// From DDS STATUS_INFO bits (others ignored).
    pub fn from_status_bits(bits: u32) -> Self {
        match bits & 3 {
            0 => Self::Alive,
            1 => Self::Disposed,
            2 => Self::Unregistered,
            _ => Self::DisposedUnregistered,
        }
    }
}

/// The DDS writer a message came from, when a gateway published it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The DDS writer's GUID (participant prefix and entity id).
    pub guid: [u8; 16],
    /// Its participant's address (its first unicast locator).
    pub addr: SocketAddr,
}

/// The block at the start of a message with `FLAG_EXT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ext {
    /// The instance, for a keyed message.
    pub key: Option<Key>,
    /// Its lifecycle.
    pub state: InstanceState,
    /// The publisher's ownership strength, if it set one.
    pub strength: Option<i32>,
    /// The DDS writer, for a message a gateway published.
    pub origin: Option<Origin>,
}

impl Ext {
    /// The largest encoded block (every part present).
    pub const MAX_LEN: usize = 4 + 16 + 4 + ORIGIN_LEN;

    /// Whether the block says nothing (a plain message needs none).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Its encoded size.
    pub fn len(&self) -> usize {
        4 + self.key.map_or(0, |_| 16)
            + self.strength.map_or(0, |_| 4)
            + self.origin.map_or(0, |_| ORIGIN_LEN)
    }

    /// Appends the block to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let parts = self.key.map_or(0, |_| PART_KEY)
            | self.strength.map_or(0, |_| PART_STRENGTH)
            | self.origin.map_or(0, |_| PART_ORIGIN);
        out.extend_from_slice(&[VERSION, parts, self.state.status_bits() as u8, 0]);
        if let Some(k) = self.key {
            out.extend_from_slice(&k.0);
        }
        if let Some(s) = self.strength {
            out.extend_from_slice(&s.to_le_bytes());
        }
        if let Some(o) = self.origin {
            out.extend_from_slice(&o.guid);
            out.extend_from_slice(&NodeAddr(o.addr.ip()).to_bytes());
            out.extend_from_slice(&o.addr.port().to_le_bytes());
            out.extend_from_slice(&[0, 0]);
        }
    }

    /// Parses the block at the start of `buf`; returns it and its length
    /// (the payload follows). Refused: another version, unknown parts or
    /// state, nonzero reserved bytes, a block cut short.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let short = |n: usize| DecodeError::Truncated {
            needed: n.saturating_sub(buf.len()),
        };
        let head = buf.get(..4).ok_or(short(4))?;
        if head[0] != VERSION {
            return Err(DecodeError::BadVersion(head[0]));
        }
        let (parts, state) = (head[1], head[2]);
        if parts & !(PART_KEY | PART_STRENGTH | PART_ORIGIN) != 0 || state > 3 || head[3] != 0 {
            return Err(DecodeError::Invalid("message extension"));
        }
        let mut at = 4;
        let mut take = |n: usize| -> Result<&[u8], DecodeError> {
            let s = buf.get(at..at + n).ok_or(short(at + n))?;
            at += n;
            Ok(s)
        };
        let mut ext = Ext {
            state: InstanceState::from_status_bits(u32::from(state)),
            ..Ext::default()
        };
        if parts & PART_KEY != 0 {
            let mut k = [0u8; 16];
            k.copy_from_slice(take(16)?);
            ext.key = Some(Key(k));
        }
        if parts & PART_STRENGTH != 0 {
            let s = take(4)?;
            ext.strength = Some(i32::from_le_bytes([s[0], s[1], s[2], s[3]]));
        }
        if parts & PART_ORIGIN != 0 {
            let o = take(ORIGIN_LEN)?;
            let mut guid = [0u8; 16];
            guid.copy_from_slice(&o[..16]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&o[16..32]);
            if o[34..36] != [0, 0] {
                return Err(DecodeError::Invalid("message extension"));
            }
            let port = u16::from_le_bytes([o[32], o[33]]);
            ext.origin = Some(Origin {
                guid,
                addr: SocketAddr::new(NodeAddr::from_bytes(a).0, port),
            });
        }
        Ok((ext, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_keys_are_themselves_long_ones_their_md5() {
        let mut five = [0u8; 16];
        five[3] = 5;
        assert_eq!(Key::of(&5u32.to_be_bytes()), Key(five));
        // MD5("") and of 17 bytes: the digest, not the bytes.
        let long = Key::of(&[7u8; 17]);
        assert_ne!(long.0[..16], [7u8; 16]);
        assert_eq!(Key::of(&[7u8; 17]), long);
        assert_eq!(Key::of(b"the quick brown fox").to_string().len(), 32, "hex");
        // RFC 1321's test vector.
        assert_eq!(
            Key::of(
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
            )
            .to_string(),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    fn ext() -> impl Strategy<Value = Ext> {
        (
            proptest::option::of(any::<[u8; 16]>()),
            0u32..4,
            proptest::option::of(any::<i32>()),
            proptest::option::of((any::<[u8; 16]>(), any::<[u8; 4]>(), any::<u16>())),
        )
            .prop_map(|(key, state, strength, origin)| Ext {
                key: key.map(Key),
                state: InstanceState::from_status_bits(state),
                strength,
                origin: origin.map(|(guid, ip, port)| Origin {
                    guid,
                    addr: SocketAddr::from((ip, port)),
                }),
            })
    }

    proptest! {
        #[test]
        fn round_trips(e in ext(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut b = Vec::new();
            e.encode(&mut b);
            prop_assert_eq!(b.len(), e.len());
            prop_assert!(e.len() <= Ext::MAX_LEN);
            b.extend_from_slice(&tail);
            let (back, n) = Ext::parse(&b).unwrap();
            prop_assert_eq!(back, e);
            prop_assert_eq!(&b[n..], &tail[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Ext::parse(&b);
        }
    }

    #[test]
    fn malformed_blocks_are_refused() {
        let mut b = Vec::new();
        Ext {
            key: Some(Key([1; 16])),
            ..Ext::default()
        }
        .encode(&mut b);
        assert!(Ext::parse(&b[..10]).is_err(), "cut short");
        let mut bad = b.clone();
        bad[0] = 2;
        assert!(Ext::parse(&bad).is_err(), "version");
        let mut bad = b.clone();
        bad[1] |= 0x80;
        assert!(Ext::parse(&bad).is_err(), "unknown part");
        let mut bad = b.clone();
        bad[2] = 4;
        assert!(Ext::parse(&bad).is_err(), "state");
        let mut bad = b;
        bad[3] = 1;
        assert!(Ext::parse(&bad).is_err(), "reserved");
    }
}
