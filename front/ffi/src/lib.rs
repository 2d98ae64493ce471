//! # The C ABI of tagwire (`libtagwire_c`)
//!
//! A thin layer of `extern "C"` functions over the [`tagwire`] client crate,
//! for C, for the header-only C++ API (`include/tagwire.hpp`, which also holds
//! the paper's `DistTag_IPC` class) and for the Java binding. The header
//! `include/tagwire.h` is generated from this crate by cbindgen; a test fails
//! when the checked-in header and the code drift apart.
//!
//! ## Conventions
//! - **Handles** are opaque pointers: [`tw_client`], [`tw_publisher`],
//!   [`tw_subscriber`] and the result lists. Each is made by one function and
//!   freed by its `_free` function (which accepts `NULL`). A publisher or
//!   subscriber keeps its client's connection alive, so the client may be freed
//!   first.
//! - **Errors:** every call that can fail returns a [`tw_status`] (`TW_OK` = 0)
//!   and, on failure, leaves a message saying what to do in a thread-local
//!   buffer that [`tw_last_error`] returns. Nothing from the caller is trusted:
//!   null pointers, invalid UTF-8, unknown enum values and sizes give
//!   `TW_ERR_INVALID_ARGUMENT`, and a Rust panic never crosses the boundary
//!   (`TW_ERR_INTERNAL`).
//! - **Threads:** a `tw_client*` may be used from any number of threads at
//!   once. A `tw_publisher*` or `tw_subscriber*` may move between threads but is
//!   used by one thread at a time (as the Rust `&mut self` methods are).
//! - **Time:** timeouts are nanoseconds in an `int64_t`; negative waits for
//!   ever, 0 polls. Timestamps are nanoseconds since the Unix epoch.
//! - **Enums passed in** are plain `uint32_t` values with `TW_*` constants, so
//!   a wrong value from C is an error, not undefined behaviour.

#![allow(non_camel_case_types)]
// Every exported function checks its pointers; the few that take a handle
// document that it must come from this library.
#![allow(clippy::missing_safety_doc)]

mod client;
mod endpoint;
mod error;
mod lists;
mod types;

pub use client::*;
pub use endpoint::*;
pub use error::*;
pub use lists::*;
pub use types::*;

/// The library's version, as a NUL-terminated string ("0.2.0").
#[no_mangle]
pub extern "C" fn tw_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
