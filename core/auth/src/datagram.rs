//! Sealed datagrams: every datagram between daemons, wrapped.
//!
//! ```text
//!  0       2       3       4                       12                      20
//!  +-------+-------+-------+-----------------------+-----------------------+
//!  | magic | ver=1 | flags | epoch (u64 LE)        | counter (u64 LE)      |
//!  +-------+-------+-------+-----------------------+-----------------------+
//!  | tag id (u64 LE), only when flags & 2: sealed with a per-tag key       |
//!  +-----------------------------------------------------------------------+
//!  | body (the datagram the session made; ciphertext when flags & 1)       |
//!  +-----------------------------------------------------------------------+
//!  | tag (16 bytes, Poly1305)                                              |
//!  +-----------------------------------------------------------------------+
//! ```
//!
//! `magic` is `b"tA"`. The AEAD is ChaCha20-Poly1305 under the sender's
//! key for this epoch ([`crate::DomainKey::datagram_key`]); the nonce is the
//! counter (8 bytes LE, then 4 zero bytes), which the sender never repeats
//! under one key. Without encryption the body stays in clear and is
//! authenticated as associated data with the header (the whole datagram
//! before the tag); with encryption (`flags` bit 0) the header is the
//! associated data and the body is encrypted. Either way a change to any
//! byte, the flags included, fails the tag.
//!
//! Flag bit 3 says the key that sealed it was derived from a domain key of
//! an odd generation: during a key roll (`crate::key`) a receiver holding
//! both generations' keys opens it with the one of that parity.
//!
//! With flag bit 1 the datagram was sealed by a publishing client with its
//! tag's key ([`crate::DomainKey::tag_key`]; the send ticket), and the tag
//! id ([`tag_id`]) tells the receiver which key to try. Such a key can seal
//! only what names that tag: the receiver checks the body's tag after
//! opening.

use std::fmt;

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, CHACHA20_POLY1305};

/// Bytes before the body.
pub const HEADER_LEN: usize = 20;
/// Bytes of the authentication tag, after the body.
pub const TAG_LEN: usize = 16;
/// What sealing adds to a datagram.
pub const OVERHEAD: usize = HEADER_LEN + TAG_LEN;
/// The first two bytes of a sealed datagram.
pub const MAGIC: [u8; 2] = *b"tA";
/// The layout's version.
pub const VERSION: u8 = 1;
/// `flags` bit: the body is encrypted.
pub const FLAG_ENCRYPTED: u8 = 1;
/// `flags` bit: sealed with a per-tag key; a tag id follows the counter.
pub const FLAG_TAG_KEY: u8 = 2;
/// `flags` bit: sealed for a direct receiver's holding
/// ([`crate::direct`]); a tag id follows the counter, as with
/// [`FLAG_TAG_KEY`] (the two are never set together).
pub const FLAG_DIRECT: u8 = 4;
/// `flags` bit: sealed with a key derived from a domain key of an odd
/// generation (see the module docs).
pub const FLAG_ODD: u8 = 8;
/// Bytes of the tag id.
pub const TAG_ID_LEN: usize = 8;
/// What sealing with a tag key adds.
pub const TAG_OVERHEAD: usize = OVERHEAD + TAG_ID_LEN;

/// A tag's id in tagged datagrams: the first 8 bytes (LE) of
/// SHA-256("tagwire tag id" ‖ name).
pub fn tag_id(name: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"tagwire tag id");
    h.update(name.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b)
}

/// Why a datagram was not opened. Nothing of its body may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Shorter than a header and a tag.
    #[error("too short for a sealed datagram")]
    Truncated,
    /// Not a sealed datagram of this version (an unkeyed daemon's, or noise).
    #[error("not a sealed datagram")]
    NotSealed,
    /// Flags this version does not know.
    #[error("unknown flags {0:#x}")]
    UnknownFlags(u8),
    /// Sealed under another epoch than the key's (an older life of the
    /// sender, or one not announced yet).
    #[error("sealed under epoch {found}, expected {expected}")]
    WrongEpoch {
        /// The key's epoch.
        expected: u64,
        /// The datagram's.
        found: u64,
    },
    /// Sealed with a key of a domain key generation the receiver does not
    /// accept (an old one after a roll, or a roll it has not been given).
    #[error("sealed with a key of a generation not accepted here")]
    WrongGeneration,
    /// Sealed with the key of a tag the receiver does not know (or keeps
    /// too many keys of already).
    #[error("unknown tag key {0:#x}")]
    UnknownTag(u64),
    /// The tag does not verify: another key, or a changed byte.
    #[error("authentication failed")]
    Forged,
}

/// A sealed datagram's header, as claimed by its bytes (trusted only once
/// [`DatagramKey::open`] verified the tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedHeader {
    /// The sender's epoch.
    pub epoch: u64,
    /// The sender's counter (the nonce).
    pub counter: u64,
    /// Whether the body is encrypted.
    pub encrypted: bool,
    /// The tag whose key sealed it (flag bit 1, or 2), if any.
    pub tag: Option<u64>,
    /// Sealed for a direct receiver's holding (flag bit 2).
    pub direct: bool,
    /// Sealed with a key of an odd domain key generation (flag bit 3).
    pub odd: bool,
}

impl SealedHeader {
    /// Reads the header of `datagram` without verifying anything.
    pub fn peek(datagram: &[u8]) -> Result<Self, OpenError> {
        if datagram.len() < OVERHEAD {
            return Err(OpenError::Truncated);
        }
        let (Some(magic), Some(&version), Some(&flags)) =
            (datagram.get(..2), datagram.get(2), datagram.get(3))
        else {
            return Err(OpenError::Truncated);
        };
        if magic != MAGIC || version != VERSION {
            return Err(OpenError::NotSealed);
        }
        if flags & !(FLAG_ENCRYPTED | FLAG_TAG_KEY | FLAG_DIRECT | FLAG_ODD) != 0
            || flags & (FLAG_TAG_KEY | FLAG_DIRECT) == FLAG_TAG_KEY | FLAG_DIRECT
        {
            return Err(OpenError::UnknownFlags(flags));
        }
        let direct = flags & FLAG_DIRECT != 0;
        let tagged = direct || flags & FLAG_TAG_KEY != 0;
        if tagged && datagram.len() < TAG_OVERHEAD {
            return Err(OpenError::Truncated);
        }
        Ok(Self {
            epoch: u64_at(datagram, 4),
            counter: u64_at(datagram, 12),
            encrypted: flags & FLAG_ENCRYPTED != 0,
            tag: tagged.then(|| u64_at(datagram, HEADER_LEN)),
            direct,
            odd: flags & FLAG_ODD != 0,
        })
    }

    /// Bytes before the body.
    pub fn len(&self) -> usize {
        if self.tag.is_some() {
            HEADER_LEN + TAG_ID_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Whether this header is empty (never: it has at least [`HEADER_LEN`]).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// One sender life's datagram key ([`crate::DomainKey::datagram_key`]).
/// Its `Debug` does not print the key.
#[derive(Clone)]
pub struct DatagramKey {
    aead: LessSafeKey,
    epoch: u64,
    odd: bool,
}

impl fmt::Debug for DatagramKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatagramKey")
            .field("epoch", &self.epoch)
            .field("odd", &self.odd)
            .finish_non_exhaustive()
    }
}

impl DatagramKey {
    pub(crate) fn new(key: &[u8; 32], epoch: u64) -> Self {
        Self {
            aead: LessSafeKey::new(
                // (A 32-byte key is what ChaCha20-Poly1305 takes: never Err.)
                UnboundKey::new(&CHACHA20_POLY1305, key)
                    .unwrap_or_else(|_| unreachable!("ChaCha20-Poly1305 takes 32-byte keys")),
            ),
            epoch,
            odd: false,
        }
    }

    /// A tag key from the bytes its daemon handed over
    /// ([`crate::DomainKey::tag_key_bytes`]), for life `epoch` (of an even
    /// generation: see [`DatagramKey::with_odd`]).
    pub fn from_tag_key(key: &[u8; 32], epoch: u64) -> Self {
        Self::new(key, epoch)
    }

    /// The same key, derived from a domain key of an odd generation or not
    /// ([`FLAG_ODD`]).
    pub fn with_odd(mut self, odd: bool) -> Self {
        self.odd = odd;
        self
    }

    /// Whether it was derived from a domain key of an odd generation.
    pub fn odd(&self) -> bool {
        self.odd
    }

    /// The epoch this key seals under.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// `body` sealed with `counter`, which must never repeat under this key
    /// (the caller keeps one counter per key).
    pub fn seal(&self, counter: u64, encrypt: bool, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(body.len() + OVERHEAD);
        self.seal_into(counter, encrypt, body, &mut out);
        out
    }

    /// [`DatagramKey::seal`] into `out` (cleared first), reusing its memory.
    pub fn seal_into(&self, counter: u64, encrypt: bool, body: &[u8], out: &mut Vec<u8>) {
        self.seal_as(counter, encrypt, None, body, out);
    }

    /// Seals `body` as `tag`'s key ([`FLAG_TAG_KEY`], the tag id in the
    /// header): for a tag key only.
    pub fn seal_tagged_into(
        &self,
        counter: u64,
        encrypt: bool,
        tag: u64,
        body: &[u8],
        out: &mut Vec<u8>,
    ) {
        self.seal_as(counter, encrypt, Some((tag, FLAG_TAG_KEY)), body, out);
    }

    /// Seals `body` for a direct receiver's holding ([`FLAG_DIRECT`], the
    /// tag id in the header): for the keys of [`crate::direct`] only.
    pub fn seal_direct_into(
        &self,
        counter: u64,
        encrypt: bool,
        tag: u64,
        body: &[u8],
        out: &mut Vec<u8>,
    ) {
        self.seal_as(counter, encrypt, Some((tag, FLAG_DIRECT)), body, out);
    }

    fn seal_as(
        &self,
        counter: u64,
        encrypt: bool,
        tag: Option<(u64, u8)>,
        body: &[u8],
        out: &mut Vec<u8>,
    ) {
        out.clear();
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        let mut flags = if encrypt { FLAG_ENCRYPTED } else { 0 };
        if self.odd {
            flags |= FLAG_ODD;
        }
        if let Some((_, bit)) = tag {
            flags |= bit;
        }
        out.push(flags);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&counter.to_le_bytes());
        if let Some((t, _)) = tag {
            out.extend_from_slice(&t.to_le_bytes());
        }
        let head = out.len();
        out.extend_from_slice(body);
        let nonce = nonce(counter);
        let sealed = if encrypt {
            let (header, body) = out.split_at_mut(head);
            self.aead
                .seal_in_place_separate_tag(nonce, Aad::from(&*header), body)
        } else {
            self.aead
                .seal_in_place_separate_tag(nonce, Aad::from(&out[..]), &mut [])
        };
        // ChaCha20-Poly1305 refuses only inputs above 256 GiB: a datagram
        // is at most 64 KiB, so `sealed` is always Ok.
        if let Ok(tag) = sealed {
            out.extend_from_slice(tag.as_ref());
        }
    }

    /// Verifies `datagram` (decrypting its body in place when encrypted) and
    /// returns its header and body. Checks the generation's parity and the
    /// epoch before the tag.
    pub fn open<'a>(&self, datagram: &'a mut [u8]) -> Result<(SealedHeader, &'a [u8]), OpenError> {
        let header = SealedHeader::peek(datagram)?;
        if header.odd != self.odd {
            return Err(OpenError::WrongGeneration);
        }
        if header.epoch != self.epoch {
            return Err(OpenError::WrongEpoch {
                expected: self.epoch,
                found: header.epoch,
            });
        }
        let end = datagram.len() - TAG_LEN;
        let head = header.len();
        let (sealed, tag) = datagram.split_at_mut(end);
        let tag = Tag::try_from(&*tag).map_err(|_| OpenError::Truncated)?;
        let nonce = nonce(header.counter);
        let verified = if header.encrypted {
            let (head, body) = sealed.split_at_mut(head);
            self.aead
                .open_in_place_separate_tag(nonce, Aad::from(&*head), tag, body, 0..)
                .map(|_| ())
        } else {
            self.aead
                .open_in_place_separate_tag(nonce, Aad::from(&*sealed), tag, &mut [], 0..)
                .map(|_| ())
        };
        verified.map_err(|_| OpenError::Forged)?;
        Ok((header, &sealed[head..]))
    }
}

fn nonce(counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&counter.to_le_bytes());
    Nonce::assume_unique_for_key(n)
}

/// The u64 LE at `at` (the caller checked the length).
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        v.copy_from_slice(s);
    }
    u64::from_le_bytes(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DomainKey;
    use proptest::prelude::*;

    #[test]
    fn datagrams_are_those_of_rustcryptos_chacha20_poly1305_byte_for_byte() {
        use chacha20poly1305::aead::{AeadInPlace, KeyInit};
        let raw = [0x3c; 32];
        let k = DatagramKey::new(&raw, 9);
        let other =
            chacha20poly1305::ChaCha20Poly1305::new(chacha20poly1305::Key::from_slice(&raw));
        for encrypt in [false, true] {
            let body = b"a body of some length, 0123456789";
            let mine = k.seal(77, encrypt, body);
            // The same header, sealed by the other implementation.
            let mut theirs = mine[..HEADER_LEN].to_vec();
            theirs.extend_from_slice(body);
            let mut n = [0u8; 12];
            n[..8].copy_from_slice(&77u64.to_le_bytes());
            let n = chacha20poly1305::Nonce::from_slice(&n);
            let tag = if encrypt {
                let (h, b) = theirs.split_at_mut(HEADER_LEN);
                other.encrypt_in_place_detached(n, h, b).unwrap()
            } else {
                other
                    .encrypt_in_place_detached(n, &theirs, &mut [])
                    .unwrap()
            };
            theirs.extend_from_slice(&tag);
            assert_eq!(mine, theirs, "encrypt = {encrypt}");
            assert_eq!(k.open(&mut theirs).unwrap().1, body);
        }
    }

    fn key(byte: u8, epoch: u64) -> DatagramKey {
        DomainKey::from_bytes([byte; 32]).datagram_key("10.0.0.1".parse().unwrap(), epoch)
    }

    #[test]
    fn sealed_datagrams_open_to_their_body_in_both_modes() {
        let k = key(1, 9);
        for encrypt in [false, true] {
            let mut d = k.seal(42, encrypt, b"hello");
            assert_eq!(d.len(), 5 + OVERHEAD);
            assert_eq!(&d[HEADER_LEN..HEADER_LEN + 5] == b"hello", !encrypt);
            let (h, body) = k.open(&mut d).unwrap();
            assert_eq!(body, b"hello");
            assert_eq!(
                h,
                SealedHeader {
                    epoch: 9,
                    counter: 42,
                    encrypted: encrypt,
                    tag: None,
                    direct: false,
                    odd: false,
                }
            );
        }
    }

    #[test]
    fn an_odd_generations_key_says_so_and_opens_only_its_parity() {
        let d = DomainKey::from_bytes([1; 32]);
        let node = "10.0.0.1".parse().unwrap();
        let odd = d.clone().with_generation(3).datagram_key(node, 9);
        let even = d.with_generation(2).datagram_key(node, 9);
        assert!(odd.odd() && !even.odd());
        let mut dg = odd.seal(5, false, b"x");
        assert_eq!(dg[3] & FLAG_ODD, FLAG_ODD);
        assert!(SealedHeader::peek(&dg).unwrap().odd);
        // The same bytes, the parity refused before any cryptography.
        assert_eq!(even.open(&mut dg.clone()), Err(OpenError::WrongGeneration));
        assert_eq!(odd.open(&mut dg.clone()).unwrap().1, b"x");
        // The flag is authenticated: clearing it fails the tag.
        dg[3] &= !FLAG_ODD;
        assert_eq!(even.open(&mut dg), Err(OpenError::Forged));
    }

    #[test]
    fn wrong_key_and_wrong_epoch_are_refused() {
        let mut d = key(1, 9).seal(1, false, b"x");
        assert_eq!(key(2, 9).open(&mut d.clone()), Err(OpenError::Forged));
        assert_eq!(
            key(1, 10).open(&mut d),
            Err(OpenError::WrongEpoch {
                expected: 10,
                found: 9
            })
        );
    }

    #[test]
    fn short_and_foreign_bytes_are_refused_before_any_crypto() {
        let k = key(1, 1);
        assert_eq!(k.open(&mut [0u8; 10]), Err(OpenError::Truncated));
        assert_eq!(k.open(&mut [0u8; 64]), Err(OpenError::NotSealed));
        let mut d = k.seal(1, false, b"x");
        d[3] = 0x80;
        assert_eq!(k.open(&mut d), Err(OpenError::UnknownFlags(0x80)));
    }

    #[test]
    fn tagged_datagrams_carry_their_tag_id_and_open_only_with_that_key() {
        let k = key(1, 9);
        let id = tag_id("/robot/cmd");
        assert_ne!(id, tag_id("/robot/cmd2"));
        for encrypt in [false, true] {
            let mut d = Vec::new();
            k.seal_tagged_into(3, encrypt, id, b"tagged", &mut d);
            assert_eq!(d.len(), 6 + TAG_OVERHEAD);
            let mut copy = d.clone();
            let (h, body) = k.open(&mut copy).unwrap();
            assert_eq!((h.tag, body), (Some(id), &b"tagged"[..]));
            // The id is authenticated: changing it fails the tag.
            d[HEADER_LEN] ^= 1;
            assert_eq!(k.open(&mut d), Err(OpenError::Forged));
        }
    }

    proptest! {
        #[test]
        fn any_changed_byte_is_refused(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            encrypt: bool,
            at: prop::sample::Index,
            flip in 1u8..=255,
        ) {
            let k = key(3, 5);
            let mut d = k.seal(7, encrypt, &body);
            let i = at.index(d.len());
            d[i] ^= flip;
            prop_assert!(k.open(&mut d).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut b = bytes;
            prop_assert!(key(3, 5).open(&mut b).is_err());
        }
    }
}
