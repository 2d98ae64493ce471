//! `tagwire::Error` to Python exceptions.
//!
//! The exception classes are defined in Python (`tagwire/errors.py`): one
//! base `tagwire.Error` and one subclass per variant of the Rust enum, some
//! with a second builtin base (`Timeout` is a `TimeoutError`). This module
//! only picks the class for a variant, builds it with the Rust error's
//! `Display` text and sets the variant's fields as attributes.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The Python module holding the exception classes.
const ERRORS_MODULE: &str = "tagwire.errors";

/// The name of the exception class for a Rust error variant.
fn class_name(e: &tagwire::Error) -> &'static str {
    use tagwire::Error as E;
    match e {
        E::DaemonUnreachable { .. } => "DaemonUnreachable",
        E::DaemonTimeout { .. } => "DaemonTimeout",
        E::UnknownTag(_) => "UnknownTag",
        E::TagDestroyed(_) => "TagDestroyed",
        E::InvalidName(_) => "InvalidName",
        E::NoSendAccess(_) => "NoSendAccess",
        E::NotSubscribed(_) => "NotSubscribed",
        E::TooLarge { .. } => "TooLarge",
        E::Overflowed { .. } => "Overflowed",
        E::WindowFull { .. } => "WindowFull",
        E::NoLosslessRoom { .. } => "NoLosslessRoom",
        E::DepthTooLarge { .. } => "DepthTooLarge",
        E::Denied { .. } => "Denied",
        E::ForeignDaemon { .. } => "ForeignDaemon",
        E::Quota { .. } => "Quota",
        E::DeadlineMissed { .. } => "DeadlineMissed",
        E::NotPermitted(_) => "NotPermitted",
        E::Timeout => "Timeout",
        E::PeersUnresponsive(_) => "PeersUnresponsive",
        E::NoPlacement(_) => "NoPlacement",
        E::Refused { .. } => "Refused",
        E::Io(_) => "IoError",
        E::Protocol(_) => "ProtocolError",
    }
}

/// An exception class of `tagwire.errors`, looked up once per process.
fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = MODULE.get_or_try_init(py, || py.import(ERRORS_MODULE).map(Bound::unbind))?;
    Ok(module.bind(py).getattr(name)?.cast_into::<PyType>()?)
}

/// Builds `tagwire.<name>(message)` with the given attributes; if even that
/// fails (the Python half of the package is missing), a `RuntimeError` that
/// says so and keeps the message.
fn make(py: Python<'_>, name: &str, message: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let exc = class(py, name)?.call1((message.clone(),))?;
        for (k, v) in attrs {
            exc.setattr(*k, v.bind(py))?;
        }
        Ok(PyErr::from_value(exc))
    })();
    built.unwrap_or_else(|why| {
        PyRuntimeError::new_err(format!(
            "{message} (and the tagwire.{name} exception class could not be built: {why})"
        ))
    })
}

/// The Python exception for a tagwire error.
pub(crate) fn to_py(py: Python<'_>, e: tagwire::Error) -> PyErr {
    use tagwire::Error as E;
    let message = e.to_string();
    let int = |v: u64| -> Py<PyAny> {
        v.into_pyobject(py)
            .map_or_else(|_| py.None(), |o| o.into_any().unbind())
    };
    let text = |s: &str| -> Py<PyAny> {
        s.into_pyobject(py)
            .map_or_else(|_| py.None(), |o| o.into_any().unbind())
    };
    let secs = |d: std::time::Duration| -> Py<PyAny> {
        d.as_secs_f64()
            .into_pyobject(py)
            .map_or_else(|_| py.None(), |o| o.into_any().unbind())
    };
    let attrs: Vec<(&str, Py<PyAny>)> = match &e {
        E::Overflowed { lost } => vec![("lost", int(*lost))],
        E::TooLarge { len, max } => vec![("length", int(*len as u64)), ("limit", int(*max as u64))],
        E::UnknownTag(t) | E::TagDestroyed(t) | E::NoSendAccess(t) | E::NotSubscribed(t) => {
            vec![("tag", text(t))]
        }
        E::WindowFull { tag, waited } => vec![("tag", text(tag)), ("waited", secs(*waited))],
        E::NoLosslessRoom { tag, max } => vec![("tag", text(tag)), ("limit", int(*max as u64))],
        E::DepthTooLarge { tag, depth, slots } => vec![
            ("tag", text(tag)),
            ("depth", int(u64::from(*depth))),
            ("limit", int(u64::from(*slots))),
        ],
        E::Denied { tag, .. } => vec![("tag", text(tag))],
        E::Quota { what, limit } => vec![("what", text(what)), ("limit", int(*limit))],
        E::DeadlineMissed { tag, key, .. } => vec![
            ("tag", text(tag)),
            (
                // The 16 bytes of `Message.key`.
                "key",
                key.map_or_else(
                    || py.None(),
                    |k| pyo3::types::PyBytes::new(py, &k.0).into_any().unbind(),
                ),
            ),
        ],
        E::ForeignDaemon { socket, uid, .. } => vec![
            ("socket", text(&socket.to_string_lossy())),
            ("uid", int(u64::from(*uid))),
        ],
        E::DaemonUnreachable { socket, .. } | E::DaemonTimeout { socket, .. } => {
            vec![("socket", text(&socket.to_string_lossy()))]
        }
        E::Refused { code, .. } => vec![("code", text(&format!("{code:?}")))],
        _ => Vec::new(),
    };
    make(py, class_name(&e), message, &attrs)
}

/// `tagwire.Closed`: a method called on a closed client, publisher or subscriber.
pub(crate) fn closed(py: Python<'_>, what: &str) -> PyErr {
    make(
        py,
        "Closed",
        format!("this {what} is closed; make a new one"),
        &[],
    )
}

/// `tagwire.BufferTooSmall`: `receive_into` got a buffer shorter than the
/// message, which is kept for the next receive.
pub(crate) fn buffer_too_small(py: Python<'_>, needed: usize, have: usize) -> PyErr {
    let needed_obj = needed
        .into_pyobject(py)
        .map_or_else(|_| py.None(), |o| o.into_any().unbind());
    make(
        py,
        "BufferTooSmall",
        format!(
            "the message has {needed} bytes but the buffer holds only {have}; the message is \
             kept: receive again with a buffer of at least {needed} bytes"
        ),
        &[("needed", needed_obj)],
    )
}

/// A `ValueError` for a bad argument.
pub(crate) fn bad_arg(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// Extension: `?` on a `tagwire::Result` inside a function that has `py`.
pub(crate) trait IntoPy<T> {
    /// Converts the error into the matching Python exception.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for tagwire::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
