//! Status codes, the thread-local error message, and the guard every exported
//! function runs its body in (argument errors and panics become statuses).

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call returned: `TW_OK`, or the kind of error. One code per
/// `tagwire::Error` variant, plus the ABI's own (`TW_ERR_INVALID_ARGUMENT`,
/// `TW_ERR_BUFFER_TOO_SMALL`, `TW_ERR_INTERNAL`). [`tw_last_error`] says
/// more.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tw_status {
    /// Success.
    TW_OK = 0,
    /// No daemon answers on the socket (start `tagwire daemon`, or autostart).
    TW_ERR_DAEMON_UNREACHABLE = 1,
    /// The daemon did not answer a request in time.
    TW_ERR_DAEMON_TIMEOUT = 2,
    /// No such tag.
    TW_ERR_UNKNOWN_TAG = 3,
    /// The tag was destroyed while in use.
    TW_ERR_TAG_DESTROYED = 4,
    /// Not a valid tag name.
    TW_ERR_INVALID_NAME = 5,
    /// The caller holds no send access on the tag.
    TW_ERR_NO_SEND_ACCESS = 6,
    /// The caller is not subscribed to the tag.
    TW_ERR_NOT_SUBSCRIBED = 7,
    /// The message is larger than tagwire accepts.
    TW_ERR_TOO_LARGE = 8,
    /// The subscriber fell behind; `tw_message_info.lost` messages were
    /// dropped (oldest first). Receive again for the next one.
    TW_ERR_OVERFLOWED = 9,
    /// A send waited its whole send timeout for a full window; nothing was sent.
    TW_ERR_WINDOW_FULL = 10,
    /// Every lossless gate of the tag's ring on this node is taken.
    TW_ERR_NO_LOSSLESS_ROOM = 11,
    /// No message within the receive timeout.
    TW_ERR_TIMEOUT = 12,
    /// Peer daemons did not confirm a table change in time.
    TW_ERR_PEERS_UNRESPONSIVE = 13,
    /// A `TW_PROXY_AUTO` subscription cannot be placed.
    TW_ERR_NO_PLACEMENT = 14,
    /// The daemon refused the request for another reason.
    TW_ERR_REFUSED = 15,
    /// A local resource failed (shared memory, descriptors).
    TW_ERR_IO = 16,
    /// The daemon sent something this library does not understand.
    TW_ERR_PROTOCOL = 17,
    /// A null pointer, invalid UTF-8 or an unknown enum value was passed.
    TW_ERR_INVALID_ARGUMENT = 18,
    /// The caller's buffer is too small; the size needed was reported and
    /// nothing was lost (call again with a larger buffer).
    TW_ERR_BUFFER_TOO_SMALL = 19,
    /// A bug in tagwire (a panic was caught at the boundary); please report it.
    TW_ERR_INTERNAL = 20,
    /// A subscription's depth exceeds the tag's ring slots.
    TW_ERR_DEPTH_TOO_LARGE = 21,
    /// The daemon's access policy does not grant this right on the tag.
    TW_ERR_DENIED = 22,
    /// The socket's daemon runs as another user (neither root nor the caller's).
    TW_ERR_FOREIGN_DAEMON = 23,
    /// A resource bound of the daemon was reached.
    TW_ERR_QUOTA = 24,
    /// An instance got no sample for a deadline period (receive again).
    TW_ERR_DEADLINE_MISSED = 25,
    /// The process may not ask for a thread policy (a real-time one, or a
    /// nice below 0) without `CAP_SYS_NICE` or the matching limit.
    TW_ERR_NOT_PERMITTED = 26,
}

impl tw_status {
    /// The status for a client error.
    pub(crate) fn of(e: &tagwire::Error) -> Self {
        use tagwire::Error as E;
        match e {
            E::DaemonUnreachable { .. } => Self::TW_ERR_DAEMON_UNREACHABLE,
            E::DaemonTimeout { .. } => Self::TW_ERR_DAEMON_TIMEOUT,
            E::UnknownTag(_) => Self::TW_ERR_UNKNOWN_TAG,
            E::TagDestroyed(_) => Self::TW_ERR_TAG_DESTROYED,
            E::InvalidName(_) => Self::TW_ERR_INVALID_NAME,
            E::NoSendAccess(_) => Self::TW_ERR_NO_SEND_ACCESS,
            E::NotSubscribed(_) => Self::TW_ERR_NOT_SUBSCRIBED,
            E::TooLarge { .. } => Self::TW_ERR_TOO_LARGE,
            E::Overflowed { .. } => Self::TW_ERR_OVERFLOWED,
            E::WindowFull { .. } => Self::TW_ERR_WINDOW_FULL,
            E::NoLosslessRoom { .. } => Self::TW_ERR_NO_LOSSLESS_ROOM,
            E::DepthTooLarge { .. } => Self::TW_ERR_DEPTH_TOO_LARGE,
            E::Denied { .. } => Self::TW_ERR_DENIED,
            E::ForeignDaemon { .. } => Self::TW_ERR_FOREIGN_DAEMON,
            E::Quota { .. } => Self::TW_ERR_QUOTA,
            E::DeadlineMissed { .. } => Self::TW_ERR_DEADLINE_MISSED,
            E::NotPermitted(_) => Self::TW_ERR_NOT_PERMITTED,
            E::Timeout => Self::TW_ERR_TIMEOUT,
            E::PeersUnresponsive(_) => Self::TW_ERR_PEERS_UNRESPONSIVE,
            E::NoPlacement(_) => Self::TW_ERR_NO_PLACEMENT,
            E::Refused { .. } => Self::TW_ERR_REFUSED,
            E::Io(_) => Self::TW_ERR_IO,
            E::Protocol(_) => Self::TW_ERR_PROTOCOL,
        }
    }

    /// The constant's name without the `TW_` prefix.
    fn name(self) -> &'static CStr {
        match self {
            Self::TW_OK => c"OK",
            Self::TW_ERR_DAEMON_UNREACHABLE => c"ERR_DAEMON_UNREACHABLE",
            Self::TW_ERR_DAEMON_TIMEOUT => c"ERR_DAEMON_TIMEOUT",
            Self::TW_ERR_UNKNOWN_TAG => c"ERR_UNKNOWN_TAG",
            Self::TW_ERR_TAG_DESTROYED => c"ERR_TAG_DESTROYED",
            Self::TW_ERR_INVALID_NAME => c"ERR_INVALID_NAME",
            Self::TW_ERR_NO_SEND_ACCESS => c"ERR_NO_SEND_ACCESS",
            Self::TW_ERR_NOT_SUBSCRIBED => c"ERR_NOT_SUBSCRIBED",
            Self::TW_ERR_TOO_LARGE => c"ERR_TOO_LARGE",
            Self::TW_ERR_OVERFLOWED => c"ERR_OVERFLOWED",
            Self::TW_ERR_WINDOW_FULL => c"ERR_WINDOW_FULL",
            Self::TW_ERR_NO_LOSSLESS_ROOM => c"ERR_NO_LOSSLESS_ROOM",
            Self::TW_ERR_TIMEOUT => c"ERR_TIMEOUT",
            Self::TW_ERR_PEERS_UNRESPONSIVE => c"ERR_PEERS_UNRESPONSIVE",
            Self::TW_ERR_NO_PLACEMENT => c"ERR_NO_PLACEMENT",
            Self::TW_ERR_REFUSED => c"ERR_REFUSED",
            Self::TW_ERR_IO => c"ERR_IO",
            Self::TW_ERR_PROTOCOL => c"ERR_PROTOCOL",
            Self::TW_ERR_INVALID_ARGUMENT => c"ERR_INVALID_ARGUMENT",
            Self::TW_ERR_BUFFER_TOO_SMALL => c"ERR_BUFFER_TOO_SMALL",
            Self::TW_ERR_INTERNAL => c"ERR_INTERNAL",
            Self::TW_ERR_DEPTH_TOO_LARGE => c"ERR_DEPTH_TOO_LARGE",
            Self::TW_ERR_DENIED => c"ERR_DENIED",
            Self::TW_ERR_FOREIGN_DAEMON => c"ERR_FOREIGN_DAEMON",
            Self::TW_ERR_QUOTA => c"ERR_QUOTA",
            Self::TW_ERR_DEADLINE_MISSED => c"ERR_DEADLINE_MISSED",
            Self::TW_ERR_NOT_PERMITTED => c"ERR_NOT_PERMITTED",
        }
    }
}

/// A failed call: its status and the message for [`tw_last_error`].
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: tw_status,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: tw_status::TW_ERR_INVALID_ARGUMENT,
            message: message.into(),
        }
    }

    pub(crate) fn too_small(needed: usize, had: usize) -> Self {
        Self {
            status: tw_status::TW_ERR_BUFFER_TOO_SMALL,
            message: format!(
                "buffer of {had} too small: {needed} needed; call again with a larger one"
            ),
        }
    }
}

impl From<tagwire::Error> for Failure {
    fn from(e: tagwire::Error) -> Self {
        Self {
            status: tw_status::of(&e),
            message: e.to_string(),
        }
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last(message: &str) {
    // A NUL inside a message would end the C string early: replace it.
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Empties the message, without allocating when it is empty already (the
/// steady-state send and receive succeed, and pay one thread-local read).
fn clear_last() {
    LAST.with(|l| {
        if !l.borrow().is_empty() {
            *l.borrow_mut() = CString::default();
        }
    });
}

/// Runs an exported function's body: a failure (or a panic) becomes its
/// status and the thread's last error message; success clears the message.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> tw_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            clear_last();
            tw_status::TW_OK
        }
        Ok(Err(f)) => {
            set_last(&f.message);
            f.status
        }
        Err(_) => {
            set_last("tagwire panicked inside a C call; this is a bug, please report it");
            tw_status::TW_ERR_INTERNAL
        }
    }
}

/// The message of the last call on this thread that failed (empty after a
/// call that succeeded). Valid until the next tagwire call on this thread;
/// never `NULL`.
#[no_mangle]
pub extern "C" fn tw_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// The name of a status ("OK", "ERR_TIMEOUT", …); never `NULL`, static.
#[no_mangle]
pub extern "C" fn tw_status_name(status: tw_status) -> *const c_char {
    status.name().as_ptr()
}

/// Reads a C string argument as UTF-8.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string (the ABI's contract);
    // it is only read, and only during this call.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not valid UTF-8")))
}

/// Dereferences a handle argument.
pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: a non-null handle was made by this library and not freed (the
    // ABI's contract).
    unsafe { p.as_ref() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// Dereferences a handle argument used by one thread at a time.
pub(crate) unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: as `handle`, and the ABI says one thread at a time.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// Writes a result through an out pointer.
pub(crate) unsafe fn put<T>(p: *mut T, v: T, what: &str) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null, and the caller passes a pointer to writable memory
    // for one `T` (the ABI's contract).
    unsafe { p.write(v) };
    Ok(())
}
