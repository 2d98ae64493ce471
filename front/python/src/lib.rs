//! `tagwire._tagwire`: the compiled half of the Python package `tagwire`,
//! a thin binding of the Rust client crate `tagwire`.
//!
//! The Python half (`python/tagwire/`) re-exports these classes, defines the
//! exception hierarchy (`tagwire.errors`, raised from here by
//! [`errors::to_py`]) and the asyncio helpers (`tagwire._aio`).
//!
//! Threads: every call that may wait (a receive, a request to the daemon, a
//! send held back by a lossless subscriber) releases the GIL while it waits,
//! so other Python threads run meanwhile. Each publisher and subscriber
//! keeps its Rust endpoint behind a mutex, so sharing one between threads
//! is safe (calls on it are serialised).

mod buffer;
mod client;
mod errors;
mod message;
mod options;
mod publisher;
mod subscriber;

use pyo3::prelude::*;

/// The compiled half of `tagwire`; import `tagwire` instead.
#[pymodule]
fn _tagwire(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::PyClient>()?;
    m.add_class::<publisher::PyPublisher>()?;
    m.add_class::<subscriber::PySubscriber>()?;
    m.add_class::<message::Message>()?;
    m.add_class::<message::MessageInfo>()?;
    m.add_class::<message::Sender>()?;
    m.add_class::<message::Batch>()?;
    m.add_class::<message::BatchIter>()?;
    m.add_class::<message::Member>()?;
    m.add_class::<message::TagInfo>()?;
    m.add_class::<message::NodeInfo>()?;
    m.add_class::<options::Last>()?;
    m.add_class::<options::Since>()?;
    m.add_class::<options::Between>()?;
    m.add("MAX_MESSAGE", tagwire::MAX_MESSAGE)?;
    m.add("MAX_LOSSLESS", tagwire::MAX_LOSSLESS)?;
    m.add(
        "DEFAULT_SEND_TIMEOUT",
        tagwire::DEFAULT_SEND_TIMEOUT.as_secs_f64(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
