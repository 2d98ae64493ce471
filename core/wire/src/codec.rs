//! Little-endian cursor helpers shared by the codecs, and the decode error.
//!
//! All multi-byte integers on tagwire's wire are little-endian (every platform we
//! target is). Strings are a `u16` byte length followed by UTF-8 bytes; lists are a
//! `u32` count followed by the items, with the count checked against the bytes
//! that remain so a hostile count cannot make us allocate.

use thiserror::Error;

/// Why a byte string could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended before the structure did.
    #[error("truncated input: needed {needed} more bytes")]
    Truncated {
        /// How many bytes were missing at the point of failure.
        needed: usize,
    },
    /// The magic number is not tagwire's.
    #[error("bad magic {0:#06x}: not a tagwire message")]
    BadMagic(u16),
    /// A protocol version this build does not speak.
    #[error("unsupported protocol version {0}")]
    BadVersion(u8),
    /// A message kind or enum value this build does not know.
    #[error("unknown {what} value {value}")]
    Unknown {
        /// Which field held the value.
        what: &'static str,
        /// The value found.
        value: u32,
    },
    /// A field holds a value outside its valid range.
    #[error("invalid {0}")]
    Invalid(&'static str),
    /// Bytes were left over after a complete message.
    #[error("{0} trailing bytes after message")]
    Trailing(usize),
}

/// Reads little-endian values from a byte slice, never past its end.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Reads the `magic` (u16) and `version` (u8) that open every tagwire
    /// message, failing with [`DecodeError::BadMagic`] / [`DecodeError::BadVersion`].
    pub fn preamble(&mut self, magic: u16, version: u8) -> Result<(), DecodeError> {
        let m = self.u16()?;
        if m != magic {
            return Err(DecodeError::BadMagic(m));
        }
        let v = self.u8()?;
        if v != version {
            return Err(DecodeError::BadVersion(v));
        }
        Ok(())
    }

    /// Fails with [`DecodeError::Trailing`] if anything is left.
    pub fn finish(self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated {
                needed: n - self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// A `u8`.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A `u16`-length-prefixed UTF-8 string.
    pub fn str(&mut self) -> Result<&'a str, DecodeError> {
        let len = usize::from(self.u16()?);
        std::str::from_utf8(self.bytes(len)?).map_err(|_| DecodeError::Invalid("utf-8 string"))
    }

    /// A `u32` item count, checked against the bytes left given each item's
    /// minimum encoded size, so a forged count cannot force a huge allocation.
    pub fn count(&mut self, min_item_size: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        let need = n.saturating_mul(min_item_size.max(1));
        if need > self.buf.len() {
            return Err(DecodeError::Truncated {
                needed: need - self.buf.len(),
            });
        }
        Ok(n)
    }
}

/// Appends little-endian values to a `Vec<u8>`.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes written.
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Appends a string; strings longer than `u16::MAX` bytes are cut at a
    /// character boundary (no tagwire string field may be that long: names are
    /// at most 255 bytes and messages are for people).
    pub fn str(&mut self, s: &str) -> &mut Self {
        let mut end = s.len().min(usize::from(u16::MAX));
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        // `end` ≤ u16::MAX by construction.
        self.u16(end as u16);
        self.bytes(&s.as_bytes()[..end])
    }

    /// Appends a list count.
    pub fn count(&mut self, n: usize) -> &mut Self {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX))
    }
}
