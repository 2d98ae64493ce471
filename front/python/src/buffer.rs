//! Any Python object with the buffer protocol (bytes, bytearray,
//! memoryview, numpy arrays, ...) as a flat run of bytes, without a copy.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;

/// A contiguous buffer exported by a Python object: its bytes in C order,
/// whatever the element type (a float64 array is its 8-byte items).
pub(crate) struct RawBuf {
    buf: PyUntypedBuffer,
    len: usize,
}

impl RawBuf {
    /// Gets the buffer of `obj`; `TypeError` if it has none, `BufferError`
    /// if its memory is not one contiguous C-order block.
    pub(crate) fn get(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        let buf = PyUntypedBuffer::get(obj).map_err(|e| {
            if e.is_instance_of::<PyTypeError>(obj.py()) {
                PyTypeError::new_err(format!(
                    "{what} takes a bytes-like object (bytes, bytearray, memoryview, a numpy \
                     array), not {}",
                    obj.get_type()
                        .name()
                        .map_or_else(|_| "this".into(), |n| n.to_string())
                ))
            } else {
                e
            }
        })?;
        if !buf.is_c_contiguous() {
            let e = PyBufferError::new_err(format!(
                "{what} needs a contiguous buffer (C order), and this one has strides {:?}: \
                 pass bytes(view), or numpy.ascontiguousarray(a)",
                buf.strides()
            ));
            buf.release(obj.py());
            return Err(e);
        }
        let len = buf.len_bytes();
        Ok(Self { buf, len })
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the exporter forbids writing.
    pub(crate) fn readonly(&self) -> bool {
        self.buf.readonly()
    }

    /// The bytes. Another Python thread may write to a mutable buffer while
    /// we read it (as with any C extension reading a buffer): don't.
    pub(crate) fn bytes(&self) -> &[u8] {
        let p = self.buf.buf_ptr().cast::<u8>().cast_const();
        if self.len == 0 || p.is_null() {
            return &[];
        }
        // SAFETY: the exporter guarantees `len` readable bytes at `p`, in one
        // block (checked contiguous), until the buffer is released, which
        // `&self` outlives.
        unsafe { std::slice::from_raw_parts(p, self.len) }
    }

    /// Copies `src` to the start of the buffer.
    ///
    /// # Safety
    /// The buffer must be writable and `src.len() <= self.len()`.
    pub(crate) unsafe fn write(&self, src: &[u8]) {
        let p = self.buf.buf_ptr().cast::<u8>();
        if src.is_empty() || p.is_null() {
            return;
        }
        // SAFETY: by the caller, `p` has room for `src`; our `src` is our
        // own memory, so the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) }
    }

    /// Gives the buffer back to its exporter.
    pub(crate) fn release(self, py: Python<'_>) {
        self.buf.release(py);
    }
}
