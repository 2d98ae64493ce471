//! Byte cursors in either byte order: an RTPS submessage says its own
//! (the E flag), a parameter list its encapsulation's.

use crate::RtpsError;

/// Reads from a byte slice in one byte order, never past its end.
#[derive(Debug, Clone)]
pub(crate) struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
    le: bool,
}

impl<'a> Cur<'a> {
    pub(crate) fn new(buf: &'a [u8], le: bool) -> Self {
        Self { buf, pos: 0, le }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], RtpsError> {
        if self.remaining() < n {
            return Err(RtpsError::Truncated {
                what: "field",
                needed: n - self.remaining(),
            });
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], RtpsError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, RtpsError> {
        let a = self.array::<2>()?;
        Ok(if self.le {
            u16::from_le_bytes(a)
        } else {
            u16::from_be_bytes(a)
        })
    }

    pub(crate) fn u32(&mut self) -> Result<u32, RtpsError> {
        let a = self.array::<4>()?;
        Ok(if self.le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    }

    pub(crate) fn i32(&mut self) -> Result<i32, RtpsError> {
        Ok(self.u32()? as i32)
    }
}

/// Writes little-endian (what tagwire sends; readers follow the E flag).
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub(crate) buf: Vec<u8>,
}

impl Out {
    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub(crate) fn i32(&mut self, v: i32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    /// Zero bytes up to the next multiple of 4 (counted from the start).
    pub(crate) fn pad4(&mut self) -> &mut Self {
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
        self
    }
}
