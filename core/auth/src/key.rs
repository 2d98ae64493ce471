//! The domain key, its file format and what HKDF derives from it.
//!
//! The file is text, so it can be copied and compared by eye:
//!
//! ```text
//! tagwire-domain-key-v1
//! 64 hexadecimal digits (the 32 key bytes)
//! ```
//!
//! Lines starting with `#` and blank lines are ignored. Reading the file
//! (and refusing one others can read) is the runtime's job; this module
//! only parses and prints the text.

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
    /// Something follows the key line.
    #[error("unexpected text after the key")]
    Trailing,
}

/// The domain key: the same on every node of a domain. Never used directly;
/// see the derivations below. Its `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct DomainKey([u8; KEY_LEN]);

impl fmt::Debug for DomainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DomainKey(..)")
    }
}

impl DomainKey {
    /// A key from its bytes (the caller's randomness: this crate has none).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// Parses a key file's text.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        if lines.next() != Some(KEY_HEADER) {
            return Err(KeyError::BadHeader);
        }
        let hex = lines.next().ok_or(KeyError::Missing)?;
        if lines.next().is_some() {
            return Err(KeyError::Trailing);
        }
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
        Ok(Self(key))
    }

    /// The key file's text (header line, hex line, both ending in `\n`).
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(KEY_HEADER.len() + 2 + KEY_LEN * 2);
        s.push_str(KEY_HEADER);
        s.push('\n');
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        s.push('\n');
        s
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
        DatagramKey::new(&key, epoch)
    }

    /// The key a publishing client of `tag` on the daemon at `node` in life
    /// `epoch` seals its own first copies with (the send ticket): a client
    /// gets only the keys of tags it may publish on, and what it seals
    /// must name that tag.
    pub fn tag_key(&self, node: IpAddr, epoch: u64, tag: &str) -> DatagramKey {
        DatagramKey::new(&self.tag_key_bytes(node, epoch, tag), epoch)
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
        let hk = Hkdf::<Sha256>::new(Some(SALT), &self.0);
        let info: Vec<u8> = parts.concat();
        let mut out = [0u8; KEY_LEN];
        // 32 bytes is far below HKDF-SHA256's limit of 255 * 32: cannot fail.
        let _ = hk.expand(&info, &mut out);
        out
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

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
        assert_eq!(DomainKey::parse(&more), Err(KeyError::Trailing));
        assert_eq!(format!("{k:?}"), "DomainKey(..)");
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
