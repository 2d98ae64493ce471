//! `Publisher`: send access to one tag.
//!
//! `send` reads the caller's buffer in place (the buffer protocol, no copy
//! on the Python side) and writes it once into the tag's ring. It first
//! tries with the GIL held and no wait (the common case: a few hundred
//! nanoseconds); only when the ring is held back by a lossless or remote
//! reliable receiver, or the message takes the daemon's large-message path,
//! does it release the GIL and wait (up to the send timeout).

use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::RawBuf;
use crate::errors::{self, IntoPy};
use crate::options;

struct State {
    publ: tagwire::Publisher,
    /// The send timeout the user set (the Rust publisher's is set to zero
    /// for the first, GIL-held attempt).
    timeout: Duration,
}

/// Send access to one tag (from `Client.publisher`). Closing it (or leaving
/// its `with` block) gives the access back.
#[pyclass(module = "tagwire._tagwire", name = "Publisher", frozen)]
pub(crate) struct PyPublisher {
    state: Mutex<Option<State>>,
    tag: String,
}

impl PyPublisher {
    pub(crate) fn new(publ: tagwire::Publisher) -> Self {
        Self {
            tag: publ.tag().to_owned(),
            state: Mutex::new(Some(State {
                publ,
                timeout: tagwire::DEFAULT_SEND_TIMEOUT,
            })),
        }
    }

    /// The state, locked (waiting with the GIL released if another thread
    /// is in a long send).
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Option<State>> {
        loop {
            match self.state.try_lock() {
                Ok(g) => return g,
                Err(TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(TryLockError::WouldBlock) => py.detach(|| {
                    drop(self.state.lock());
                }),
            }
        }
    }

    fn send_bytes(&self, py: Python<'_>, payload: &[u8]) -> PyResult<u64> {
        self.send_op(py, payload.len(), |p| p.send(payload))
    }

    /// Runs `op` (a send of about `len` bytes): first with the GIL held and
    /// no wait, then, if held back, waiting with the GIL released.
    fn send_op(
        &self,
        py: Python<'_>,
        len: usize,
        op: impl Fn(&mut tagwire::Publisher) -> tagwire::Result<tagwire::SeqNum> + Send + Sync,
    ) -> PyResult<u64> {
        let mut g = self.lock(py);
        let st = g.as_mut().ok_or_else(|| errors::closed(py, "publisher"))?;
        if len <= st.publ.max_fast_message() {
            st.publ.set_send_timeout(Duration::ZERO);
            let r = op(&mut st.publ);
            st.publ.set_send_timeout(st.timeout);
            match r {
                Ok(seq) => return Ok(seq.0),
                // Held back: wait below, without the GIL (nothing was sent).
                Err(tagwire::Error::WindowFull { .. }) if !st.timeout.is_zero() => {}
                Err(e) => return Err(errors::to_py(py, e)),
            }
        }
        let publ = &mut st.publ;
        py.detach(|| op(publ)).map(|s| s.0).py_err(py)
    }

    /// Runs `f` on the bytes of `data` (bytes, or any contiguous buffer).
    fn with_bytes<R>(
        data: &Bound<'_, PyAny>,
        what: &str,
        f: impl FnOnce(&[u8]) -> PyResult<R>,
    ) -> PyResult<R> {
        if let Ok(b) = data.cast::<PyBytes>() {
            return f(b.as_bytes());
        }
        let buf = RawBuf::get(data, what)?;
        let r = f(buf.bytes());
        buf.release(data.py());
        r
    }
}

#[pymethods]
impl PyPublisher {
    /// Sends one message to every subscriber of the tag; returns its
    /// sequence number (1, 2, ...). `data` is any bytes-like object (bytes,
    /// bytearray, memoryview, numpy array, ...) in one contiguous block; it
    /// is read in place, so don't change it from another thread meanwhile.
    /// Up to `max_fast_message` bytes take the shared-memory fast path,
    /// up to `tagwire.MAX_MESSAGE` (256 MiB) in all.
    ///
    /// Raises `BufferError` for a non-contiguous buffer, `tagwire.TooLarge`,
    /// `tagwire.WindowFull` (a lossless or remote reliable receiver held the
    /// send back for the whole send timeout; nothing was sent),
    /// `tagwire.TagDestroyed`, `tagwire.Closed`.
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        Self::with_bytes(data, "send", |d| self.send_bytes(py, d))
    }

    /// Sends a sample of instance `key` (bytes-like: at most 16 bytes name
    /// the instance themselves, a longer key its MD5, as a DDS key hash);
    /// returns its sequence number. Subscribers read the key in
    /// `Message.key`; exclusive ownership, deadlines and minimum separation
    /// apply per instance. Raises as `send`.
    fn send_keyed(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        Self::with_bytes(key, "send_keyed", |k| {
            Self::with_bytes(data, "send_keyed", |d| {
                // The instance block goes in front of the payload.
                self.send_op(py, d.len() + tagwire::Ext::MAX_LEN, |p| p.send_keyed(k, d))
            })
        })
    }

    /// Says that instance `key` is deleted (a DDS dispose): subscribers get
    /// an empty message with `state == "disposed"`.
    fn dispose(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        Self::with_bytes(key, "dispose", |k| {
            self.send_op(py, tagwire::Ext::MAX_LEN, |p| p.dispose(k))
        })
    }

    /// Says that this publisher writes instance `key` no more (a DDS
    /// unregister): an exclusive owner gives the instance up at once.
    fn unregister(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        Self::with_bytes(key, "unregister", |k| {
            self.send_op(py, tagwire::Ext::MAX_LEN, |p| p.unregister(k))
        })
    }

    /// This publisher's ownership strength (an int, or None: 0 and not
    /// sent), carried by every message from now on: a subscriber with
    /// `exclusive=True` takes each instance from its strongest live
    /// publisher only.
    fn set_strength(&self, py: Python<'_>, strength: Option<i32>) -> PyResult<()> {
        let mut g = self.lock(py);
        let st = g.as_mut().ok_or_else(|| errors::closed(py, "publisher"))?;
        st.publ.set_strength(strength);
        Ok(())
    }

    /// Offers a deadline (seconds, or None for none): each instance this
    /// publisher writes (messages without a key are one instance) should
    /// get a sample at least that often; `missed_deadlines()` says which
    /// did not.
    #[pyo3(signature = (period))]
    fn offer_deadline(&self, py: Python<'_>, period: Option<f64>) -> PyResult<()> {
        let d = period
            .map(|p| options::seconds("deadline", p))
            .transpose()?;
        let mut g = self.lock(py);
        let st = g.as_mut().ok_or_else(|| errors::closed(py, "publisher"))?;
        st.publ.offer_deadline(d);
        Ok(())
    }

    /// The instances (16-byte keys, None for messages without a key) this
    /// publisher left without a sample for a whole offered deadline period
    /// since the last call, one entry per period missed, oldest first.
    fn missed_deadlines(&self, py: Python<'_>) -> PyResult<Vec<Option<Py<PyBytes>>>> {
        let mut g = self.lock(py);
        let st = g.as_mut().ok_or_else(|| errors::closed(py, "publisher"))?;
        let (missed, _) = st.publ.missed_deadlines();
        Ok(missed
            .into_iter()
            .map(|k| k.map(|k| PyBytes::new(py, &k.0).unbind()))
            .collect())
    }

    /// How long `send` may wait (seconds) when the ring is held back by a
    /// lossless subscriber or a reliable receiver on another node before
    /// raising `tagwire.WindowFull`; 0 fails at once. Default 1 s.
    fn set_send_timeout(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        let d = options::seconds("send timeout", seconds)?;
        let mut g = self.lock(py);
        let st = g.as_mut().ok_or_else(|| errors::closed(py, "publisher"))?;
        st.timeout = d;
        st.publ.set_send_timeout(d);
        Ok(())
    }

    /// Sequence number of the last message sent (0 before the first).
    #[getter]
    fn last_seq(&self, py: Python<'_>) -> PyResult<u64> {
        let g = self.lock(py);
        let st = g.as_ref().ok_or_else(|| errors::closed(py, "publisher"))?;
        Ok(st.publ.last_seq().0)
    }

    /// Largest message (bytes) that takes the shared-memory fast path.
    #[getter]
    fn max_fast_message(&self, py: Python<'_>) -> PyResult<usize> {
        let g = self.lock(py);
        let st = g.as_ref().ok_or_else(|| errors::closed(py, "publisher"))?;
        Ok(st.publ.max_fast_message())
    }

    /// The tag's name.
    #[getter]
    fn tag(&self) -> &str {
        &self.tag
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.lock(py).is_none()
    }

    /// Gives send access back. Idempotent.
    fn close(&self, py: Python<'_>) {
        let state = self.lock(py).take();
        drop(state);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { "closed" } else { "open" };
        format!("<tagwire.Publisher {} ({state})>", self.tag)
    }
}
