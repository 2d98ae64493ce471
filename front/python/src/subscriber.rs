//! `Subscriber`: receive, receive_into, receive_batch, iteration, async.
//!
//! The Rust subscriber lives behind a mutex (it must be `Send` to be used
//! with the GIL released, and Python may share the object between threads).
//! Every receive first polls with the GIL held (a message already there
//! costs no GIL release); otherwise it waits with the GIL released, in
//! slices of at most [`SLICE`], so that `close()` from another thread and
//! Ctrl-C (`check_signals`) are noticed between slices.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyStopIteration, PyTypeError};
use pyo3::prelude::*;

use crate::buffer::RawBuf;
use crate::errors::{self, bad_arg};
use crate::message::{Batch, Info, Item, Message, MessageInfo};
use crate::options;

/// The longest a receive waits without the GIL before looking at signals
/// and at `close()`.
const SLICE: Duration = Duration::from_millis(100);

/// What the binding keeps beside the Rust subscriber.
struct State {
    sub: tagwire::Subscriber,
    /// The payload buffer of the poll path (its allocation is reused).
    scratch: Vec<u8>,
    /// Messages received but handed back (a `receive_into` buffer too
    /// small, a cancelled async receive): the next receives return them
    /// first.
    held: VecDeque<(Vec<u8>, Info)>,
    /// A loss report met in the middle of a batch, raised by the next
    /// receive (after the messages before it, which the batch returned).
    pending: Option<tagwire::Error>,
}

/// Why a receive returned without a message.
enum Fail {
    Closed,
    Rust(tagwire::Error),
    Py(PyErr),
}

impl Fail {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Fail::Closed => errors::closed(py, "subscriber"),
            Fail::Rust(e) => errors::to_py(py, e),
            Fail::Py(e) => e,
        }
    }
}

impl State {
    /// Takes the next held message or loss report, or polls the ring once;
    /// the payload of a polled message is left in `scratch`.
    fn poll(&mut self) -> Result<Option<Polled>, tagwire::Error> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        if let Some((payload, info)) = self.held.pop_front() {
            return Ok(Some(Polled::Held(payload, info)));
        }
        match self
            .sub
            .receive_into(Some(Duration::ZERO), &mut self.scratch)
        {
            Ok(i) => Ok(Some(Polled::Scratch(Info::of(&i)))),
            Err(tagwire::Error::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits up to `slice` for the next message (held ones first).
    fn wait(&mut self, slice: Duration) -> Result<Option<(Vec<u8>, Info)>, tagwire::Error> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        if let Some(h) = self.held.pop_front() {
            return Ok(Some(h));
        }
        match self.sub.receive_into(Some(slice), &mut self.scratch) {
            Ok(i) => Ok(Some((self.scratch.clone(), Info::of(&i)))),
            Err(tagwire::Error::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Adds every message available now to `data`/`items`, up to `max` in
    /// all. A loss report or failure after the first message ends the batch
    /// and is kept for the next receive.
    fn drain(&mut self, max: usize, data: &mut Vec<u8>, items: &mut Vec<Item>) {
        while items.len() < max {
            if self.pending.is_some() {
                return;
            }
            if let Some((payload, info)) = self.held.pop_front() {
                push(data, items, &payload, info);
                continue;
            }
            match self
                .sub
                .receive_into(Some(Duration::ZERO), &mut self.scratch)
            {
                Ok(i) => push(data, items, &self.scratch, Info::of(&i)),
                Err(tagwire::Error::Timeout) => return,
                // Raised again by the next receive, the ring being empty.
                Err(tagwire::Error::TagDestroyed(_)) => return,
                Err(e) => {
                    self.pending = Some(e);
                    return;
                }
            }
        }
    }
}

fn push(data: &mut Vec<u8>, items: &mut Vec<Item>, payload: &[u8], info: Info) {
    items.push(Item {
        start: data.len(),
        len: payload.len(),
        info,
    });
    data.extend_from_slice(payload);
}

/// How long the next wait may be: what is left until `deadline` (None:
/// for ever), at most [`SLICE`].
fn remaining(deadline: Option<Instant>) -> Duration {
    deadline.map_or(SLICE, |d| {
        d.saturating_duration_since(Instant::now()).min(SLICE)
    })
}

/// A message taken by a poll: in the scratch buffer or a held one.
enum Polled {
    Scratch(Info),
    Held(Vec<u8>, Info),
}

/// What a receive does with the message once it has one (with the GIL).
enum Deliver<R> {
    Done(R),
    /// Keep the message for the next receive and raise this.
    Keep(PyErr),
}

/// A subscription to one tag (from `Client.subscribe`). Receive with
/// `receive`, `receive_into`, `receive_batch`, `for msg in sub` or
/// `async for msg in sub`. Closing it (or leaving its `with` block)
/// unsubscribes.
#[pyclass(module = "tagwire._tagwire", name = "Subscriber", frozen, dict)]
pub(crate) struct PySubscriber {
    state: Mutex<Option<State>>,
    closed: AtomicBool,
    tag: String,
}

impl PySubscriber {
    pub(crate) fn new(sub: tagwire::Subscriber) -> Self {
        Self {
            tag: sub.tag().to_owned(),
            state: Mutex::new(Some(State {
                sub,
                scratch: Vec::new(),
                held: VecDeque::new(),
                pending: None,
            })),
            closed: AtomicBool::new(false),
        }
    }

    /// The state, locked. If another thread holds it (waiting in a
    /// receive), waits for it with the GIL released.
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

    /// The state for a quick call (`available`, `purge`, counters), or
    /// `Closed`.
    fn with_state<R>(&self, py: Python<'_>, f: impl FnOnce(&mut State) -> R) -> PyResult<R> {
        let mut g = self.lock(py);
        match g.as_mut() {
            Some(st) if !self.closed.load(Ordering::Acquire) => Ok(f(st)),
            _ => Err(errors::closed(py, "subscriber")),
        }
    }

    /// The next message, waiting up to `timeout` (None: for ever), handed
    /// to `deliver` with the GIL held.
    fn next<R>(
        &self,
        py: Python<'_>,
        timeout: Option<Duration>,
        mut deliver: impl FnMut(&[u8], &Info) -> Deliver<R>,
    ) -> Result<R, Fail> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Fail::Closed);
        }
        // 1. Poll with the GIL held (unless another thread is receiving).
        if let Ok(mut g) = self.state.try_lock() {
            let st = g.as_mut().ok_or(Fail::Closed)?;
            let polled = st.poll().map_err(Fail::Rust)?;
            let (r, keep) = match &polled {
                None => (None, None),
                Some(Polled::Scratch(info)) => match deliver(&st.scratch, info) {
                    Deliver::Done(r) => (Some(r), None),
                    Deliver::Keep(e) => (None, Some((st.scratch.clone(), *info, e))),
                },
                Some(Polled::Held(payload, info)) => match deliver(payload, info) {
                    Deliver::Done(r) => (Some(r), None),
                    Deliver::Keep(e) => (None, Some((payload.clone(), *info, e))),
                },
            };
            if let Some((payload, info, e)) = keep {
                st.held.push_front((payload, info));
                return Err(Fail::Py(e));
            }
            if let Some(r) = r {
                return Ok(r);
            }
            if timeout.is_some_and(|t| t.is_zero()) {
                // A poll, done.
                return Err(Fail::Rust(tagwire::Error::Timeout));
            }
        }
        // 2. Wait with the GIL released, a slice at a time. A timeout too
        // large to represent is "for ever".
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(Fail::Closed);
            }
            let slice = remaining(deadline);
            let got = py.detach(|| {
                let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let st = g.as_mut().ok_or(Fail::Closed)?;
                st.wait(slice).map_err(Fail::Rust)
            })?;
            let Some((payload, info)) = got else {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(Fail::Rust(tagwire::Error::Timeout));
                }
                py.check_signals().map_err(Fail::Py)?;
                continue;
            };
            return match deliver(&payload, &info) {
                Deliver::Done(r) => Ok(r),
                Deliver::Keep(e) => {
                    if let Some(st) = self.lock(py).as_mut() {
                        st.held.push_front((payload, info));
                    }
                    Err(Fail::Py(e))
                }
            };
        }
    }

    fn receive_message(&self, py: Python<'_>, timeout: Option<Duration>) -> Result<Message, Fail> {
        self.next(py, timeout, |payload, info| {
            Deliver::Done(Message::new(py, payload, info))
        })
    }
}

#[pymethods]
impl PySubscriber {
    /// The next message, oldest first. `timeout` in seconds: None (default)
    /// waits for ever, 0 polls. The GIL is released while waiting.
    ///
    /// Raises `tagwire.Timeout` (also a `TimeoutError`) when none came in
    /// time, `tagwire.Overflowed` when this subscriber fell more than its
    /// depth behind (its `.lost` says how many were dropped; receive again
    /// for the next one), `tagwire.TagDestroyed`, `tagwire.Closed`.
    #[pyo3(signature = (timeout=None))]
    fn receive(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Message> {
        let t = options::timeout(timeout)?;
        self.receive_message(py, t).map_err(|f| f.into_py(py))
    }

    /// Like `receive`, but writes the payload at the start of `buffer`
    /// (a writable, contiguous buffer: bytearray, memoryview, numpy array)
    /// and returns a `MessageInfo` whose `length` says how many bytes it
    /// wrote. No allocation per message. When the message is longer than
    /// the buffer, raises `tagwire.BufferTooSmall` (its `.needed` is the
    /// length) and keeps the message for the next receive.
    #[pyo3(signature = (buffer, timeout=None))]
    fn receive_into(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<MessageInfo> {
        let t = options::timeout(timeout)?;
        let buf = RawBuf::get(buffer, "receive_into")?;
        if buf.readonly() {
            return Err(PyTypeError::new_err(
                "receive_into needs a writable buffer (a bytearray, a memoryview of one, \
                 a numpy array), not a read-only one such as bytes",
            ));
        }
        let r = self
            .next(py, t, |payload, info| {
                if payload.len() > buf.len() {
                    return Deliver::Keep(errors::buffer_too_small(py, payload.len(), buf.len()));
                }
                // SAFETY: the buffer is writable, contiguous and at least
                // `payload.len()` bytes long, and stays exported until
                // `buf` is released below; `payload` is our own memory.
                unsafe { buf.write(payload) };
                Deliver::Done(MessageInfo::new(payload.len(), info))
            })
            .map_err(|f| f.into_py(py));
        buf.release(py);
        r
    }

    /// Every message available, up to `max`, in one `Batch`, waiting at
    /// most `timeout` seconds (None: for ever) for the first one, with one
    /// GIL release for the whole call. The fast way to take many messages.
    /// A loss report (`Overflowed`) or other failure met after the first
    /// message ends the batch and is raised by the next receive.
    #[pyo3(signature = (max=1024, timeout=None))]
    fn receive_batch(&self, py: Python<'_>, max: usize, timeout: Option<f64>) -> PyResult<Batch> {
        if max == 0 {
            return Err(bad_arg("max must be at least 1"));
        }
        let t = options::timeout(timeout)?;
        let deadline = t.and_then(|t| Instant::now().checked_add(t));
        // The first message (held ones first, then the ring): waiting for it
        // and draining the rest happen in one GIL release when it comes in
        // time; `next` would take a second release for the rest.
        let mut data = Vec::new();
        let mut items = Vec::new();
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(errors::closed(py, "subscriber"));
            }
            let slice = remaining(deadline);
            let got: Result<bool, Fail> = py.detach(|| {
                let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let st = g.as_mut().ok_or(Fail::Closed)?;
                let Some((payload, info)) = st.wait(slice).map_err(Fail::Rust)? else {
                    return Ok(false);
                };
                data.reserve((payload.len() * max.min(256)).min(1 << 20));
                push(&mut data, &mut items, &payload, info);
                st.drain(max, &mut data, &mut items);
                Ok(true)
            });
            match got {
                Ok(true) => return Ok(Batch::new(data, items)),
                Ok(false) if deadline.is_some_and(|d| Instant::now() >= d) => {
                    return Err(errors::to_py(py, tagwire::Error::Timeout));
                }
                Ok(false) => py.check_signals()?,
                Err(f) => return Err(f.into_py(py)),
            }
        }
    }

    /// True when a receive would return at once (a message or a loss report).
    fn available(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_state(py, |st| {
            st.pending.is_some() || !st.held.is_empty() || st.sub.available()
        })
    }

    /// Drops every queued message; returns how many.
    fn purge(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_state(py, |st| {
            let held = std::mem::take(&mut st.held).len() as u64;
            held + st.sub.purge()
        })
    }

    /// Messages lost to overflow so far.
    #[getter]
    fn lost(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_state(py, |st| st.sub.lost())
    }

    /// Messages received so far.
    #[getter]
    fn received(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_state(py, |st| st.sub.received())
    }

    /// The tag's name.
    #[getter]
    fn tag(&self) -> &str {
        &self.tag
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Unsubscribes. Idempotent. A receive waiting in another thread
    /// raises `tagwire.Closed` (an iteration ends) within 0.1 s.
    fn close(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let this = slf.get();
        if this.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let state = this.lock(py).take();
        drop(state);
        // Stop the async worker thread, if any.
        py.import("tagwire._aio")?
            .call_method1("on_close", (slf,))?;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(slf: &Bound<'_, Self>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        Self::close(slf)?;
        Ok(false)
    }

    /// `for msg in sub`: blocking receives. The loop ends when the tag is
    /// destroyed or the subscriber is closed (e.g. from another thread);
    /// `Overflowed` is raised (the subscription stays valid: iterate again).
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Message> {
        match self.receive_message(py, None) {
            Ok(m) => Ok(m),
            Err(Fail::Closed | Fail::Rust(tagwire::Error::TagDestroyed(_))) => {
                Err(PyStopIteration::new_err(()))
            }
            Err(f) => Err(f.into_py(py)),
        }
    }

    /// `await sub.receive_async(timeout=None)`: `receive` for asyncio. The
    /// wait runs in this subscriber's worker thread, so the event loop is
    /// never blocked; a cancelled wait loses no message (one that arrives
    /// anyway is kept for the next receive).
    #[pyo3(signature = (timeout=None))]
    fn receive_async<'py>(
        slf: &Bound<'py, Self>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        options::timeout(timeout)?;
        slf.py()
            .import("tagwire._aio")?
            .call_method1("receive_async", (slf, timeout))
    }

    /// `async for msg in sub`: like `for`, without blocking the event loop.
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("tagwire._aio")?
            .call_method1("anext", (slf,))
    }

    /// Internal (the asyncio helpers): hands a message back, to be returned
    /// by the next receive.
    fn _requeue(&self, py: Python<'_>, message: &Bound<'_, Message>) -> PyResult<()> {
        let parts = message.get().parts(py);
        self.with_state(py, |st| st.held.push_front(parts))
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!("<tagwire.Subscriber {} ({state})>", self.tag)
    }
}
