//! Publisher and subscriber handles: the steady-state path.

use std::ffi::c_char;
use std::time::Duration;

use tagwire::{MessageInfo, Publisher, Subscriber};

use crate::client::tw_client;
use crate::error::{guard, handle, handle_mut, put, str_arg, Failure};
use crate::tw_status;
use crate::types::{timeout, tw_history_query, tw_message_info, tw_subscribe_options};

/// Send access to one tag. One thread at a time.
pub struct tw_publisher {
    inner: Publisher,
    /// Missed offered deadlines taken from `inner`, not handed out yet.
    missed: std::collections::VecDeque<Option<tagwire::Key>>,
}

/// A subscription to one tag. One thread at a time.
pub struct tw_subscriber {
    inner: Subscriber,
    /// The last payload read (reused: no allocation per message).
    scratch: Vec<u8>,
    /// A message read but not handed out because the caller's buffer was too
    /// small: the next receive returns it.
    pending: Option<MessageInfo>,
}

/// Gets send access to a tag; `*out` gets the publisher, to free with
/// [`tw_publisher_free`] (which releases the access).
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_new(
    client: *const tw_client,
    name: *const c_char,
    out: *mut *mut tw_publisher,
) -> tw_status {
    // SAFETY: forwarded contract (no options: the defaults).
    unsafe { tw_publisher_new_with(client, name, std::ptr::null(), out) }
}

/// [`tw_publisher_new`] with what the publisher asks of its node: a
/// packet class and a forwarder policy (`options` `NULL`: the defaults).
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_new_with(
    client: *const tw_client,
    name: *const c_char,
    options: *const crate::types::tw_publish_options,
    out: *mut *mut tw_publisher,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        // SAFETY: a non-null `options` points to a tw_publish_options.
        let opts = match unsafe { options.as_ref() } {
            Some(o) => o.to_rust()?,
            None => tagwire::PublishOptions::default(),
        };
        let p = c.inner.publisher_with(name, opts)?;
        // SAFETY: checked non-null above.
        unsafe {
            put(
                out,
                Box::into_raw(Box::new(tw_publisher {
                    inner: p,
                    missed: Default::default(),
                })),
                "out",
            )
        }
    })
}

/// Releases send access and frees the handle (`NULL` is fine).
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_free(publisher: *mut tw_publisher) {
    if !publisher.is_null() {
        // SAFETY: made by tw_publisher_new, freed once (the contract).
        drop(unsafe { Box::from_raw(publisher) });
    }
}

/// Sends `len` bytes to every subscriber of the tag; `*seq` (may be `NULL`)
/// gets the message's sequence number. `TW_ERR_WINDOW_FULL` when a reliable
/// or lossless receiver held it back for the send timeout (nothing was sent).
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_send(
    publisher: *mut tw_publisher,
    data: *const u8,
    len: usize,
    seq: *mut u64,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe {
        send_op(publisher, seq, |p| {
            Ok(p.send(bytes_arg(data, len, "data")?)?)
        })
    }
}

/// `len` bytes at `data` (`NULL` allowed when `len` is 0).
///
/// # Safety
/// `data` holds `len` readable bytes during the call that uses the slice.
unsafe fn bytes_arg<'a>(data: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        Ok(&[])
    } else if data.is_null() {
        Err(Failure::invalid(format!("{what} is NULL")))
    } else {
        // SAFETY: `data` holds `len` readable bytes (the contract).
        Ok(unsafe { std::slice::from_raw_parts(data, len) })
    }
}

/// Runs a send on `publisher`, its sequence number into `*seq` (if not
/// `NULL`).
///
/// # Safety
/// `publisher` is NULL or from `tw_publisher_new`; `seq` is NULL or
/// writable.
unsafe fn send_op(
    publisher: *mut tw_publisher,
    seq: *mut u64,
    op: impl FnOnce(&mut Publisher) -> Result<tagwire::SeqNum, Failure>,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle_mut(publisher, "publisher") }?;
        let s = op(&mut p.inner)?;
        if !seq.is_null() {
            // SAFETY: non-null out pointer (the contract).
            unsafe { put(seq, s.0, "seq") }?;
        }
        Ok(())
    })
}

/// Sends `len` bytes as a sample of instance `key` (`key_len` bytes: at most
/// 16 name the instance themselves, a longer key its MD5, as a DDS key
/// hash); as `tw_publisher_send` otherwise. Subscribers read the key in
/// `tw_message_info.key`; exclusive ownership, deadlines and minimum
/// separation apply per instance.
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_send_keyed(
    publisher: *mut tw_publisher,
    key: *const u8,
    key_len: usize,
    data: *const u8,
    len: usize,
    seq: *mut u64,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe {
        send_op(publisher, seq, |p| {
            Ok(p.send_keyed(
                bytes_arg(key, key_len, "key")?,
                bytes_arg(data, len, "data")?,
            )?)
        })
    }
}

/// Says that instance `key` is deleted (a DDS dispose): subscribers get an
/// empty message in state `TW_STATE_DISPOSED`.
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_dispose(
    publisher: *mut tw_publisher,
    key: *const u8,
    key_len: usize,
    seq: *mut u64,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe {
        send_op(publisher, seq, |p| {
            Ok(p.dispose(bytes_arg(key, key_len, "key")?)?)
        })
    }
}

/// Says that this publisher writes instance `key` no more (a DDS
/// unregister): an exclusive owner gives the instance up at once.
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_unregister(
    publisher: *mut tw_publisher,
    key: *const u8,
    key_len: usize,
    seq: *mut u64,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe {
        send_op(publisher, seq, |p| {
            Ok(p.unregister(bytes_arg(key, key_len, "key")?)?)
        })
    }
}

/// Offers a deadline of `period_ns` (0: none): each instance this publisher
/// writes (messages without a key are one instance) should get a sample at
/// least that often; [`tw_publisher_missed_deadline`] says which did not.
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_offer_deadline(
    publisher: *mut tw_publisher,
    period_ns: u64,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle_mut(publisher, "publisher") }?;
        p.inner
            .offer_deadline((period_ns > 0).then(|| Duration::from_nanos(period_ns)));
        p.missed.clear();
        Ok(())
    })
}

/// Takes the oldest instance this publisher left without a sample for a
/// whole offered deadline period (one per period missed): `*missed` true,
/// the 16 bytes at `key` and `*has_key` as in `tw_message_info` (`has_key`
/// false: messages sent without a key); `*missed` false when there is none.
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_missed_deadline(
    publisher: *mut tw_publisher,
    key: *mut u8,
    has_key: *mut bool,
    missed: *mut bool,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle_mut(publisher, "publisher") }?;
        if key.is_null() || has_key.is_null() || missed.is_null() {
            return Err(Failure::invalid("key, has_key or missed is NULL"));
        }
        if p.missed.is_empty() {
            p.missed.extend(p.inner.missed_deadlines().0);
        }
        let next = p.missed.pop_front();
        let bytes = next.flatten().map_or([0; 16], |k| k.0);
        // SAFETY: checked non-null above; `key` holds 16 writable bytes
        // (the contract).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), key, 16);
            put(missed, next.is_some(), "missed")?;
            put(has_key, next.flatten().is_some(), "has_key")
        }
    })
}

/// Sets this publisher's ownership strength, carried by every message from
/// now on (`has` false: none, which counts as 0): a subscriber with
/// `exclusive` takes each instance from its strongest live publisher only.
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_set_strength(
    publisher: *mut tw_publisher,
    has: bool,
    strength: i32,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle_mut(publisher, "publisher") }?;
        p.inner.set_strength(has.then_some(strength));
        Ok(())
    })
}

/// How long a send may wait for a full window (ns; default 1 s).
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_set_send_timeout(
    publisher: *mut tw_publisher,
    ns: u64,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle_mut(publisher, "publisher") }?;
        p.inner.set_send_timeout(Duration::from_nanos(ns));
        Ok(())
    })
}

/// The sequence number of the last message sent (0 before the first; 0 for `NULL`).
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_last_seq(publisher: *const tw_publisher) -> u64 {
    // SAFETY: forwarded contract.
    unsafe { publisher.as_ref() }.map_or(0, |p| p.inner.last_seq().0)
}

/// The largest message that takes the shared-memory fast path (0 for `NULL`).
#[no_mangle]
pub unsafe extern "C" fn tw_publisher_max_fast_message(publisher: *const tw_publisher) -> usize {
    // SAFETY: forwarded contract.
    unsafe { publisher.as_ref() }.map_or(0, |p| p.inner.max_fast_message())
}

/// Subscribes to a tag (`opts` may be `NULL`: the defaults); only messages
/// sent after this call are received. Free with [`tw_subscriber_free`].
#[no_mangle]
pub unsafe extern "C" fn tw_subscribe(
    client: *const tw_client,
    name: *const c_char,
    opts: *const tw_subscribe_options,
    out: *mut *mut tw_subscriber,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe { subscribe(client, name, opts, None, out) }
}

/// Subscribes, then pulls `query` from the tag's history: the subscriber
/// receives those messages first and then live ones, with no gap and no
/// duplicate (a late joiner catching up).
#[no_mangle]
pub unsafe extern "C" fn tw_subscribe_with_history(
    client: *const tw_client,
    name: *const c_char,
    opts: *const tw_subscribe_options,
    query: *const tw_history_query,
    out: *mut *mut tw_subscriber,
) -> tw_status {
    // SAFETY: a non-null `query` points to a query (the contract).
    match unsafe { query.as_ref() } {
        // SAFETY: forwarded contract.
        Some(q) => unsafe { subscribe(client, name, opts, Some(*q), out) },
        None => guard(|| Err(Failure::invalid("query is NULL"))),
    }
}

unsafe fn subscribe(
    client: *const tw_client,
    name: *const c_char,
    opts: *const tw_subscribe_options,
    query: Option<tw_history_query>,
    out: *mut *mut tw_subscriber,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        // SAFETY: a non-null `opts` points to options (the contract).
        let o = unsafe { opts.as_ref() }
            .copied()
            .unwrap_or_else(|| crate::tw_subscribe_options_default())
            .to_rust()?;
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        let s = match query {
            None => c.inner.subscribe(name, o)?,
            Some(q) => c.inner.subscribe_with_history(name, o, q.to_rust()?)?,
        };
        let h = tw_subscriber {
            inner: s,
            scratch: Vec::new(),
            pending: None,
        };
        // SAFETY: checked non-null above.
        unsafe { put(out, Box::into_raw(Box::new(h)), "out") }
    })
}

/// Unsubscribes and frees the handle (`NULL` is fine).
#[no_mangle]
pub unsafe extern "C" fn tw_subscriber_free(subscriber: *mut tw_subscriber) {
    if !subscriber.is_null() {
        // SAFETY: made by tw_subscribe, freed once (the contract).
        drop(unsafe { Box::from_raw(subscriber) });
    }
}

/// Receives the next message into `buf` (`cap` bytes), waiting at most
/// `timeout_ns` (negative: for ever, 0: poll); `*info` gets its length,
/// sequence number, sender and timestamp. A message larger than `cap` gives
/// `TW_ERR_BUFFER_TOO_SMALL` with `info->len` the size needed, and is kept:
/// the next receive returns it. `TW_ERR_OVERFLOWED` reports `info->lost`
/// dropped messages (receive again for the next one); `TW_ERR_TIMEOUT`,
/// `TW_ERR_TAG_DESTROYED`.
#[no_mangle]
pub unsafe extern "C" fn tw_subscriber_receive(
    subscriber: *mut tw_subscriber,
    buf: *mut u8,
    cap: usize,
    timeout_ns: i64,
    info: *mut tw_message_info,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle_mut(subscriber, "subscriber") }?;
        if info.is_null() {
            return Err(Failure::invalid("info is NULL"));
        }
        let got = match s.pending.take() {
            Some(i) => i,
            None => match s.inner.receive_into(timeout(timeout_ns), &mut s.scratch) {
                Ok(i) => i,
                Err(tagwire::Error::Overflowed { lost }) => {
                    let report = tw_message_info {
                        lost,
                        ..Default::default()
                    };
                    // SAFETY: checked non-null above.
                    unsafe { put(info, report, "info") }?;
                    return Err(tagwire::Error::Overflowed { lost }.into());
                }
                Err(e) => return Err(e.into()),
            },
        };
        let len = s.scratch.len();
        // SAFETY: checked non-null above.
        unsafe { put(info, tw_message_info::from_rust(&got, len), "info") }?;
        if len > cap {
            s.pending = Some(got);
            return Err(Failure::too_small(len, cap));
        }
        if len > 0 {
            if buf.is_null() {
                s.pending = Some(got);
                return Err(Failure::invalid("buf is NULL"));
            }
            // SAFETY: `buf` holds `cap` ≥ len writable bytes (the contract).
            unsafe { std::ptr::copy_nonoverlapping(s.scratch.as_ptr(), buf, len) };
        }
        Ok(())
    })
}

/// True when a receive would return at once (a message or a loss report).
#[no_mangle]
pub unsafe extern "C" fn tw_subscriber_available(subscriber: *const tw_subscriber) -> bool {
    // SAFETY: forwarded contract.
    unsafe { subscriber.as_ref() }.is_some_and(|s| s.pending.is_some() || s.inner.available())
}

/// Drops every unread message; returns how many.
#[no_mangle]
pub unsafe extern "C" fn tw_subscriber_purge(subscriber: *mut tw_subscriber) -> u64 {
    // SAFETY: forwarded contract.
    match unsafe { subscriber.as_mut() } {
        Some(s) => u64::from(s.pending.take().is_some()) + s.inner.purge(),
        None => 0,
    }
}

/// Messages lost to overflow so far (0 for `NULL`).
#[no_mangle]
pub unsafe extern "C" fn tw_subscriber_lost(subscriber: *const tw_subscriber) -> u64 {
    // SAFETY: forwarded contract.
    unsafe { subscriber.as_ref() }.map_or(0, |s| s.inner.lost())
}

/// Messages received so far (0 for `NULL`).
#[no_mangle]
pub unsafe extern "C" fn tw_subscriber_received(subscriber: *const tw_subscriber) -> u64 {
    // SAFETY: forwarded contract.
    unsafe { subscriber.as_ref() }.map_or(0, |s| s.inner.received())
}
