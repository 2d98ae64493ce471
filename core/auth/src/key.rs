//! The domain key, its file format and what HKDF derives from it.
//!
//! The file is text, so it can be copied and compared by eye:
//!
//! ```text
//! tagwire-domain-key-v1
//! 64 hexadecimal digits (the 32 key bytes)
//! generation 3                                  (optional, 0 when absent)
//! next <64 hexadecimal digits> at <unix time>   (optional: a key roll)
//! ```
//!
//! Lines starting with `#` and blank lines are ignored. Reading the file
//! (and refusing one others can read) is the runtime's job; this module
//! only parses and prints the text.
//!
//! # Key roll
//!
//! A key has a **generation**; a roll brings the next one ([`KeyFile`]'s
//! `next`) and the time (Unix seconds, every node's own clock) at which
//! every node starts sealing with it. Every key derived from a domain key
//! carries the parity of its generation, and every sealed datagram says it
//! in a flag bit ([`crate::datagram::FLAG_ODD`]), so a receiver that holds
//! both keys knows which one to open it with, without trying. What a node
//! accepts and seals with at a given time is [`KeyFile::schedule`]: from the
//! moment the file names a next key, both keys open; at the switch time
//! the next one seals; [`ROLL_GRACE`] later the old one stops opening
//! (nodes' clocks may differ by less than that).

use std::fmt;
use std::net::IpAddr;

use hkdf::Hkdf;
use sha2::Sha256;

use crate::datagram::DatagramKey;

/// Bytes in a domain key.
pub const KEY_LEN: usize = 32;

/// The first line of a key file.
pub const KEY_HEADER: &str = "tagwire-domain-key-v1";

/// HKDF salt: names the protocol and its version, so a key shared with
/// another program derives different keys here.
const SALT: &[u8] = b"tagwire auth v1";

/// What is wrong with a key file's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The first line is not [`KEY_HEADER`].
    #[error("not a tagwire key file (the first line must be `{KEY_HEADER}`)")]
    BadHeader,
    /// No key line after the header.
    #[error("the key line is missing")]
    Missing,
    /// The key line is not 64 hexadecimal digits.
    #[error("the key must be {} hexadecimal digits", KEY_LEN * 2)]
    BadKey,
    /// A line after the key that is not `generation N` or `next KEY at TIME`.
    #[error("unexpected text after the key: {0:?} (expected `generation N` or `next KEY at UNIX-SECONDS`)")]
    Trailing(String),
    /// The generation is not a number below 2³², or the next key's is not
    /// one more (a roll goes one generation at a time).
    #[error("bad generation")]
    BadGeneration,
}

/// How long after a roll's switch time a node still opens what the old
/// key sealed: the most the nodes' clocks (and the moments the new file
/// reached them) may differ by.
pub const ROLL_GRACE: u64 = 60;

/// The domain key: the same on every node of a domain, and its generation
/// (see the module docs on key rolls). Never used directly; see the
/// derivations below. Its `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct DomainKey {
    bytes: [u8; KEY_LEN],
    generation: u32,
}

impl fmt::Debug for DomainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DomainKey(generation {}, ..)", self.generation)
    }
}

impl DomainKey {
    /// A key of generation 0 from its bytes (the caller's randomness: this
    /// crate has none).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        Self {
            bytes,
            generation: 0,
        }
    }

    /// The same key as generation `generation`.
    pub fn with_generation(mut self, generation: u32) -> Self {
        self.generation = generation;
        self
    }

    /// Its generation.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Whether its generation is odd: the flag every key derived from it
    /// seals with ([`crate::datagram::FLAG_ODD`]).
    pub fn odd(&self) -> bool {
        self.generation & 1 == 1
    }

    /// Parses a key file's text: the key in use (see [`KeyFile::parse`]
    /// for the whole file, a roll's next key included).
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        KeyFile::parse(text).map(|f| f.current)
    }

    /// The text of a key file holding this key alone.
    pub fn to_text(&self) -> String {
        KeyFile {
            current: self.clone(),
            next: None,
        }
        .to_text()
    }

    /// The pre-shared key of every control link's Noise handshake.
    pub fn link_psk(&self) -> [u8; KEY_LEN] {
        self.expand(&[b"link psk"])
    }

    /// The key that seals the datagrams of the daemon at `node` in its
    /// life `epoch` (its incarnation).
    pub fn datagram_key(&self, node: IpAddr, epoch: u64) -> DatagramKey {
        let addr = match node {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        let key = self.expand(&[b"datagram", &addr, &epoch.to_le_bytes()]);
        DatagramKey::new(&key, epoch).with_odd(self.odd())
    }

    /// The key a publishing client of `tag` on the daemon at `node` in life
    /// `epoch` seals its own first copies with (the send ticket): a client
    /// gets only the keys of tags it may publish on, and what it seals
    /// must name that tag.
    pub fn tag_key(&self, node: IpAddr, epoch: u64, tag: &str) -> DatagramKey {
        DatagramKey::new(&self.tag_key_bytes(node, epoch, tag), epoch).with_odd(self.odd())
    }

    /// [`DomainKey::tag_key`]'s bytes, to hand to the client
    /// ([`DatagramKey::from_tag_key`] on its side).
    pub fn tag_key_bytes(&self, node: IpAddr, epoch: u64, tag: &str) -> [u8; KEY_LEN] {
        let addr = match node {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        self.expand(&[b"tag datagram", &addr, &epoch.to_le_bytes(), tag.as_bytes()])
    }

    /// HKDF-SHA256 (RFC 5869) with this key as input keying material and
    /// `info` the concatenation of `parts`.
    pub(crate) fn expand(&self, parts: &[&[u8]]) -> [u8; KEY_LEN] {
        let hk = Hkdf::<Sha256>::new(Some(SALT), &self.bytes);
        let info: Vec<u8> = parts.concat();
        let mut out = [0u8; KEY_LEN];
        // 32 bytes is far below HKDF-SHA256's limit of 255 * 32: cannot fail.
        let _ = hk.expand(&info, &mut out);
        out
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn parse_hex(hex: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let digits = hex.as_bytes();
    if digits.len() != KEY_LEN * 2 {
        return Err(KeyError::BadKey);
    }
    let mut key = [0u8; KEY_LEN];
    for (out, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
        let (Some(hi), Some(lo)) = (nibble(pair[0]), nibble(pair[1])) else {
            return Err(KeyError::BadKey);
        };
        *out = hi << 4 | lo;
    }
    Ok(key)
}

fn push_hex(s: &mut String, bytes: &[u8; KEY_LEN]) {
    for b in bytes {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 15)]));
    }
}

/// A key file: the key in use and, during a roll, the next one and when
/// every node switches to it (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    /// The key in use (before the roll's switch).
    pub current: DomainKey,
    /// The next key (generation `current`'s + 1) and the switch time, in
    /// Unix seconds.
    pub next: Option<(DomainKey, u64)>,
}

impl KeyFile {
    /// Parses a key file's text.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        if lines.next() != Some(KEY_HEADER) {
            return Err(KeyError::BadHeader);
        }
        let mut current = DomainKey::from_bytes(parse_hex(lines.next().ok_or(KeyError::Missing)?)?);
        let mut next = None;
        let mut generation = None;
        for line in lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                ["generation", n] if generation.is_none() && next.is_none() => {
                    generation = Some(n.parse::<u32>().map_err(|_| KeyError::BadGeneration)?);
                }
                ["next", hex, "at", time] if next.is_none() => {
                    let at = time
                        .parse::<u64>()
                        .map_err(|_| KeyError::Trailing(line.to_owned()))?;
                    next = Some((DomainKey::from_bytes(parse_hex(hex)?), at));
                }
                _ => return Err(KeyError::Trailing(line.to_owned())),
            }
        }
        current.generation = generation.unwrap_or(0);
        let next = match next {
            Some((key, at)) => {
                let g = current
                    .generation
                    .checked_add(1)
                    .ok_or(KeyError::BadGeneration)?;
                Some((key.with_generation(g), at))
            }
            None => None,
        };
        Ok(Self { current, next })
    }

    /// The file's text (every line ending in `\n`; the generation line only
    /// when it is not 0, so a generation-0 key's file is the same as
    /// before key rolls existed).
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(256);
        s.push_str(KEY_HEADER);
        s.push('\n');
        push_hex(&mut s, &self.current.bytes);
        s.push('\n');
        if self.current.generation != 0 {
            s.push_str(&format!("generation {}\n", self.current.generation));
        }
        if let Some((key, at)) = &self.next {
            s.push_str("next ");
            push_hex(&mut s, &key.bytes);
            s.push_str(&format!(" at {at}\n"));
        }
        s
    }

    /// This file with `key` as the next one, switched to at `at`. A roll
    /// whose switch time has passed by `now` is finished first (its next
    /// key becomes the current one), so rolls can follow each other; a
    /// roll still to come is replaced.
    pub fn roll(&self, key: [u8; KEY_LEN], at: u64, now: u64) -> Self {
        let current = match &self.next {
            Some((next, switch)) if *switch <= now => next.clone(),
            _ => self.current.clone(),
        };
        let g = current.generation.wrapping_add(1);
        Self {
            current,
            next: Some((DomainKey::from_bytes(key).with_generation(g), at)),
        }
    }

    /// What a node does at `now` (Unix seconds): the keys it opens with
    /// and the one it seals with.
    pub fn schedule(&self, now: u64) -> (Accepted, DomainKey) {
        match &self.next {
            None => (Accepted::one(self.current.clone()), self.current.clone()),
            Some((next, at)) if now < *at => (
                Accepted::two(self.current.clone(), next.clone()),
                self.current.clone(),
            ),
            Some((next, at)) if now < at.saturating_add(ROLL_GRACE) => (
                Accepted::two(self.current.clone(), next.clone()),
                next.clone(),
            ),
            Some((next, _)) => (Accepted::one(next.clone()), next.clone()),
        }
    }

    /// When [`KeyFile::schedule`] next changes after `now`, if ever.
    pub fn next_change(&self, now: u64) -> Option<u64> {
        let (_, at) = self.next.as_ref()?;
        [*at, at.saturating_add(ROLL_GRACE)]
            .into_iter()
            .find(|&t| t > now)
    }
}

/// The domain keys a node opens with: at most one of each generation
/// parity (two only during a roll).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted([Option<DomainKey>; 2]);

impl Accepted {
    /// Only `key`.
    pub fn one(key: DomainKey) -> Self {
        let mut keys = [None, None];
        let i = usize::from(key.odd());
        keys[i] = Some(key);
        Self(keys)
    }

    /// `a` and `b` (a roll's two keys, of consecutive generations; were
    /// they of the same parity, `b` alone).
    pub fn two(a: DomainKey, b: DomainKey) -> Self {
        let mut s = Self::one(a);
        let i = usize::from(b.odd());
        s.0[i] = Some(b);
        s
    }

    /// The key of generation parity `odd`, if accepted.
    pub fn get(&self, odd: bool) -> Option<&DomainKey> {
        self.0[usize::from(odd)].as_ref()
    }

    /// Every accepted key.
    pub fn iter(&self) -> impl Iterator<Item = &DomainKey> {
        self.0.iter().flatten()
    }
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_text_round_trips_and_bad_text_is_refused() {
        let k = DomainKey::from_bytes([0xa5; KEY_LEN]);
        assert_eq!(DomainKey::parse(&k.to_text()), Ok(k.clone()));
        let commented = format!("# lab key\n\n{}", k.to_text());
        assert_eq!(DomainKey::parse(&commented), Ok(k.clone()));
        assert_eq!(DomainKey::parse(""), Err(KeyError::BadHeader));
        assert_eq!(DomainKey::parse(KEY_HEADER), Err(KeyError::Missing));
        let short = format!("{KEY_HEADER}\nabcd\n");
        assert_eq!(DomainKey::parse(&short), Err(KeyError::BadKey));
        let bad = format!("{KEY_HEADER}\n{}\n", "zz".repeat(KEY_LEN));
        assert_eq!(DomainKey::parse(&bad), Err(KeyError::BadKey));
        let more = format!("{}more\n", k.to_text());
        assert_eq!(
            DomainKey::parse(&more),
            Err(KeyError::Trailing("more".into()))
        );
        assert_eq!(format!("{k:?}"), "DomainKey(generation 0, ..)");
    }

    #[test]
    fn a_key_file_with_a_roll_round_trips_and_says_when_each_key_works() {
        let k = DomainKey::from_bytes([1; KEY_LEN]).with_generation(6);
        let file = KeyFile {
            current: k.clone(),
            next: None,
        }
        .roll([2; KEY_LEN], 1000, 10);
        let text = file.to_text();
        assert!(text.contains("generation 6\n"), "{text}");
        assert!(text.contains(" at 1000\n"), "{text}");
        assert_eq!(KeyFile::parse(&text), Ok(file.clone()));
        let next = DomainKey::from_bytes([2; KEY_LEN]).with_generation(7);
        assert_eq!(file.next, Some((next.clone(), 1000)));
        assert!(!k.odd() && next.odd());
        // Before the switch: both open, the old one seals.
        let (acc, seal) = file.schedule(999);
        assert_eq!((acc.get(false), acc.get(true)), (Some(&k), Some(&next)));
        assert_eq!(seal, k);
        // From the switch, for the grace: both open, the new one seals.
        let (acc, seal) = file.schedule(1000 + ROLL_GRACE - 1);
        assert_eq!(acc.iter().count(), 2);
        assert_eq!(seal, next);
        // Then the new one alone.
        let (acc, seal) = file.schedule(1000 + ROLL_GRACE);
        assert_eq!((acc.get(false), acc.get(true)), (None, Some(&next)));
        assert_eq!(seal, next);
        assert_eq!(file.next_change(0), Some(1000));
        assert_eq!(file.next_change(1000), Some(1000 + ROLL_GRACE));
        assert_eq!(file.next_change(1000 + ROLL_GRACE), None);
        // Rolling again after the switch starts from the new key.
        let again = file.roll([3; KEY_LEN], 5000, 2000);
        assert_eq!(again.current, next);
        assert_eq!(again.next.as_ref().map(|(k, _)| k.generation()), Some(8));
        // Rolling again before it replaces the roll to come.
        let instead = file.roll([3; KEY_LEN], 5000, 10);
        assert_eq!(instead.current, k);
        // A file without a roll keeps the old text.
        let plain = DomainKey::from_bytes([9; KEY_LEN]);
        assert_eq!(plain.to_text().lines().count(), 2);
        assert_eq!(KeyFile::parse(&plain.to_text()).unwrap().next, None);
    }

    #[test]
    fn malformed_roll_lines_are_refused() {
        let base = DomainKey::from_bytes([1; KEY_LEN]).to_text();
        let hex = "ab".repeat(KEY_LEN);
        for (extra, want) in [
            ("generation x\n".to_owned(), KeyError::BadGeneration),
            (
                "generation 4294967296\n".to_owned(),
                KeyError::BadGeneration,
            ),
            (
                "generation 4294967295\nnext HEX at 5\n".replace("HEX", &hex),
                KeyError::BadGeneration,
            ),
            (
                format!("next {hex} at soon\n"),
                KeyError::Trailing(format!("next {hex} at soon")),
            ),
            ("next abc at 5\n".to_owned(), KeyError::BadKey),
            (
                format!("next {hex} at 5\ngeneration 2\n"),
                KeyError::Trailing("generation 2".into()),
            ),
            (
                format!("next {hex} at 5\nnext {hex} at 6\n"),
                KeyError::Trailing(format!("next {hex} at 6")),
            ),
        ] {
            assert_eq!(
                KeyFile::parse(&format!("{base}{extra}")),
                Err(want),
                "{extra}"
            );
        }
    }

    #[test]
    fn derived_keys_differ_by_purpose_node_and_epoch() {
        let k = DomainKey::from_bytes([7; KEY_LEN]);
        let other = DomainKey::from_bytes([8; KEY_LEN]);
        assert_ne!(k.link_psk(), other.link_psk());
        assert_ne!(k.link_psk(), [7; KEY_LEN]);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let body = b"same body";
        let seal = |key: &DatagramKey| key.seal(1, false, body);
        assert_ne!(seal(&k.datagram_key(a, 1)), seal(&k.datagram_key(b, 1)));
        assert_ne!(
            seal(&k.datagram_key(a, 1))[..],
            seal(&k.datagram_key(a, 2))[..]
        );
        assert_eq!(seal(&k.datagram_key(a, 1)), seal(&k.datagram_key(a, 1)));
    }
}
