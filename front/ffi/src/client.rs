//! The client handle: connection to the node's daemon, tags, rights, members.

use std::ffi::c_char;
use std::path::PathBuf;
use std::time::Duration;

use tagwire::{Client, ClientOptions, KeepHistory, Member, RingParams};

use crate::error::{guard, handle, put, str_arg, Failure};
use crate::tw_status;
use crate::types::{domain, opt_str, tw_client_options, tw_member, tw_sender, tw_tag_params};

/// A connection to the node's tagwire daemon. Thread-safe.
pub struct tw_client {
    pub(crate) inner: Client,
}

/// Connects to the node's daemon with the default options
/// ([`tw_client_options_default`](crate::tw_client_options_default)).
#[no_mangle]
pub unsafe extern "C" fn tw_client_connect(out: *mut *mut tw_client) -> tw_status {
    let opts = crate::tw_client_options_default();
    // SAFETY: `opts` is a local; `out` is forwarded.
    unsafe { tw_client_connect_with(&opts, out) }
}

/// Connects to the daemon described by `opts`; `*out` gets the handle, to
/// free with [`tw_client_free`].
#[no_mangle]
pub unsafe extern "C" fn tw_client_connect_with(
    opts: *const tw_client_options,
    out: *mut *mut tw_client,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let o = unsafe { handle(opts, "opts") }?;
        let mut co = ClientOptions::default();
        // SAFETY: forwarded contract of the option strings.
        if let Some(s) = unsafe { opt_str(o.socket, "opts.socket") }? {
            co.socket = PathBuf::from(s);
        }
        // SAFETY: as above.
        if let Some(n) = unsafe { opt_str(o.name, "opts.name") }? {
            co.name = n;
        }
        co.timeout = Duration::from_millis(o.timeout_ms);
        co.autostart = o.autostart;
        let c = Client::with_options(co)?;
        let h = Box::into_raw(Box::new(tw_client { inner: c }));
        // SAFETY: forwarded contract; on failure the handle is freed.
        unsafe { put(out, h, "out") }.inspect_err(|_| {
            // SAFETY: `h` was made just above and never shared.
            drop(unsafe { Box::from_raw(h) });
        })
    })
}

/// Frees a client handle (`NULL` is fine). Publishers and subscribers made
/// from it stay valid.
#[no_mangle]
pub unsafe extern "C" fn tw_client_free(client: *mut tw_client) {
    if !client.is_null() {
        // SAFETY: made by tw_client_connect_with, freed once (the contract).
        drop(unsafe { Box::from_raw(client) });
    }
}

/// This process as the daemon sees it (pid and node address).
#[no_mangle]
pub unsafe extern "C" fn tw_client_me(client: *const tw_client, out: *mut tw_sender) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        unsafe { put(out, tw_sender::from_rust(c.inner.me()), "out") }
    })
}

/// Checks the daemon answers.
#[no_mangle]
pub unsafe extern "C" fn tw_ping(client: *const tw_client) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        Ok(c.inner.ping()?)
    })
}

/// Creates a tag with the daemon's default ring (`TW_DOMAIN_GLOBAL` or
/// `TW_DOMAIN_LOCAL`). Creating an existing tag is not an error;
/// `*created` (may be `NULL`) says whether this call created it.
#[no_mangle]
pub unsafe extern "C" fn tw_create_tag(
    client: *const tw_client,
    name: *const c_char,
    domain: u32,
    created: *mut bool,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe { tw_create_tag_with(client, name, domain, std::ptr::null(), created) }
}

/// Like [`tw_create_tag`] with a ring shape and a history kept from the start
/// (`params` may be `NULL`: all defaults).
#[no_mangle]
pub unsafe extern "C" fn tw_create_tag_with(
    client: *const tw_client,
    name: *const c_char,
    domain_: u32,
    params: *const tw_tag_params,
    created: *mut bool,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        // SAFETY: a non-null `params` points to a tw_tag_params (the contract).
        let p = unsafe { params.as_ref() }.copied().unwrap_or_default();
        let ring = RingParams {
            slots: p.slots,
            slot_payload: p.slot_payload,
        };
        let history = KeepHistory {
            depth: p.history_depth,
            max_bytes: p.history_max_bytes,
        };
        let made = c
            .inner
            .create_tag_keeping(name, domain(domain_)?, ring, history)?;
        if !created.is_null() {
            // SAFETY: non-null, points to a bool (the contract).
            unsafe { put(created, made, "created") }?;
        }
        Ok(())
    })
}

/// Destroys a tag: every publisher and subscriber on it, in every process,
/// gets `TW_ERR_TAG_DESTROYED` from then on.
#[no_mangle]
pub unsafe extern "C" fn tw_destroy_tag(
    client: *const tw_client,
    name: *const c_char,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        Ok(c.inner.destroy_tag(name)?)
    })
}

/// Makes this node's daemon keep the last `depth` messages of a tag (at most
/// `max_bytes`, 0: its default) for `tw_pull`; `depth` 0 stops.
#[no_mangle]
pub unsafe extern "C" fn tw_set_history(
    client: *const tw_client,
    name: *const c_char,
    depth: u32,
    max_bytes: u64,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        Ok(c.inner.set_history(name, depth, max_bytes)?)
    })
}

/// Gives this node's subscriptions to a tag (those of process `pid`; 0:
/// every process) the packet class `priority` (a `TW_PRIORITY_*` value or
/// `TW_PRIORITY_DSCP | n`) at run time: every sending node's streams carry
/// it from their next datagram, losing nothing. `*changed` (may be `NULL`):
/// how many subscriptions changed class. `TW_ERR_DENIED` unless the caller
/// is root, the tag's owner, allowed to destroy the tag, or of the
/// subscriber's user; `TW_ERR_NOT_SUBSCRIBED` when no such subscription is
/// held on this node.
#[no_mangle]
pub unsafe extern "C" fn tw_set_channel_qos(
    client: *const tw_client,
    name: *const c_char,
    pid: u32,
    priority: u32,
    changed: *mut usize,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        let class = crate::types::priority(priority)?;
        let list = c
            .inner
            .set_channel_qos(name, (pid != 0).then_some(pid), class)?;
        if !changed.is_null() {
            // SAFETY: non-null, and the caller passes a writable `size_t`.
            unsafe { put(changed, list.len(), "changed") }?;
        }
        Ok(())
    })
}

/// Gives this node's subscriptions to a tag (those of process `pid`; 0:
/// every process) the thread policy `sched` (a `TW_SCHED_*` code, as
/// `tw_subscribe_options.sched`) at run time: the sending nodes'
/// forwarders and this node's inbound threads run at it from their next
/// wake-up. `*changed` (may be `NULL`): how many subscriptions changed.
/// `TW_ERR_NOT_PERMITTED` for a real-time policy this process may not run
/// at itself; otherwise as `tw_set_channel_qos`.
#[no_mangle]
pub unsafe extern "C" fn tw_set_channel_sched(
    client: *const tw_client,
    name: *const c_char,
    pid: u32,
    sched: u32,
    changed: *mut usize,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        let policy = crate::types::sched(sched)?;
        let list = c
            .inner
            .set_channel_sched(name, (pid != 0).then_some(pid), policy)?;
        if !changed.is_null() {
            // SAFETY: non-null, and the caller passes a writable `size_t`.
            unsafe { put(changed, list.len(), "changed") }?;
        }
        Ok(())
    })
}

/// Gives the subscriptions to a tag that `subscribers` chooses the class
/// `priority` and the thread policy `sched` at run time, on any node (each
/// `TW_KEEP` to leave it; otherwise as in `tw_set_channel_qos` and
/// `tw_set_channel_sched`). `subscribers`: `"PID@NODE"`, `"@NODE"` (every
/// process there), `"PID"` or `"here"` (this node), `"all"` or `NULL`
/// (every node's); NODE is a node's address. Another node's subscriptions
/// only root, the tag's owner or a user allowed to destroy the tag may
/// change (`TW_ERR_DENIED`); a node that is down or does not answer:
/// `TW_ERR_PEERS_UNRESPONSIVE`. `*changed` (may be `NULL`): how many
/// subscriptions changed.
#[no_mangle]
pub unsafe extern "C" fn tw_change_channels(
    client: *const tw_client,
    name: *const c_char,
    subscribers: *const c_char,
    priority: u32,
    sched: u32,
    changed: *mut usize,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, name, whose) = unsafe { chosen(client, name, subscribers, "subscribers") }?;
        let (class, policy) = kept(priority, sched)?;
        let list = c.inner.change_channels(name, whose, class, policy)?;
        if !changed.is_null() {
            // SAFETY: non-null, and the caller passes a writable `size_t`.
            unsafe { put(changed, list.len(), "changed") }?;
        }
        Ok(())
    })
}

/// `tw_change_channels` for the send rights of the publishers that
/// `publishers` chooses (spelled as `subscribers` there; `NULL`: every
/// node's): their nodes send the tag in at least the class `priority` and
/// run its forwarder at least at `sched` (each `TW_KEEP` to leave it), at
/// run time, from any node. None chosen: `TW_ERR_NO_SEND_ACCESS`.
/// `*changed` (may be `NULL`): how many publishers changed.
#[no_mangle]
pub unsafe extern "C" fn tw_change_publishers(
    client: *const tw_client,
    name: *const c_char,
    publishers: *const c_char,
    priority: u32,
    sched: u32,
    changed: *mut usize,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, name, whose) = unsafe { chosen(client, name, publishers, "publishers") }?;
        let (class, policy) = kept(priority, sched)?;
        let list = c.inner.change_publishers(name, whose, class, policy)?;
        if !changed.is_null() {
            // SAFETY: non-null, and the caller passes a writable `size_t`.
            unsafe { put(changed, list.len(), "changed") }?;
        }
        Ok(())
    })
}

/// Paces the tag's reliable streams of the publishers that `publishers`
/// chooses (as in `tw_change_publishers`) as `pacing` says
/// (`TW_PACING_*`, with `rate` in bytes per second for
/// `TW_PACING_FIXED`), at run time, from any node: their nodes' streams
/// follow from their next datagram. `*changed` (may be `NULL`): how many
/// publishers' pacing changed (none if they had it already).
#[no_mangle]
pub unsafe extern "C" fn tw_change_pacing(
    client: *const tw_client,
    name: *const c_char,
    publishers: *const c_char,
    pacing: u32,
    rate: u64,
    changed: *mut usize,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, name, whose) = unsafe { chosen(client, name, publishers, "publishers") }?;
        let pacing = crate::types::pacing(pacing, rate)?;
        let list = c.inner.change_pacing(name, whose, pacing)?;
        if !changed.is_null() {
            // SAFETY: non-null, and the caller passes a writable `size_t`.
            unsafe { put(changed, list.len(), "changed") }?;
        }
        Ok(())
    })
}

/// A class and a policy, each `None` for `TW_KEEP`.
fn kept(
    priority: u32,
    sched: u32,
) -> Result<(Option<tagwire::Priority>, Option<tagwire::Sched>), Failure> {
    let keep = |v: u32| v != crate::types::TW_KEEP;
    let class = match keep(priority) {
        true => Some(crate::types::priority(priority)?),
        false => None,
    };
    let policy = match keep(sched) {
        true => Some(crate::types::sched(sched)?),
        false => None,
    };
    Ok((class, policy))
}

/// The client, the tag's name and the processes a run-time change chooses
/// (`NULL`: every node's).
///
/// # Safety
/// As for the functions that call it: `client` from `tw_client_connect`,
/// `name` and `whose` NUL-terminated strings (`whose` may be `NULL`).
unsafe fn chosen<'a>(
    client: *const tw_client,
    name: *const c_char,
    whose: *const c_char,
    what: &str,
) -> Result<(&'a tw_client, &'a str, tagwire::Processes), Failure> {
    // SAFETY: forwarded contract.
    let c = unsafe { handle(client, "client") }?;
    // SAFETY: forwarded contract.
    let name = unsafe { str_arg(name, "name") }?;
    // SAFETY: forwarded contract.
    let whose = match unsafe { opt_str(whose, what) }? {
        None => tagwire::Processes::everywhere(),
        Some(s) => s
            .parse()
            .map_err(|e: String| Failure::invalid(format!("{what} {s:?}: {e}")))?,
    };
    Ok((c, name, whose))
}

/// The processes holding send access to a tag: up to `cap` into `out`
/// (`NULL` with `cap` 0 just counts), the total into `*count`. More than
/// `cap`: `TW_ERR_BUFFER_TOO_SMALL`, with `*count` the size needed.
#[no_mangle]
pub unsafe extern "C" fn tw_senders(
    client: *const tw_client,
    name: *const c_char,
    out: *mut tw_member,
    cap: usize,
    count: *mut usize,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe { members(client, name, out, cap, count, true) }
}

/// The processes subscribed to a tag, as [`tw_senders`].
#[no_mangle]
pub unsafe extern "C" fn tw_receivers(
    client: *const tw_client,
    name: *const c_char,
    out: *mut tw_member,
    cap: usize,
    count: *mut usize,
) -> tw_status {
    // SAFETY: forwarded contract.
    unsafe { members(client, name, out, cap, count, false) }
}

unsafe fn members(
    client: *const tw_client,
    name: *const c_char,
    out: *mut tw_member,
    cap: usize,
    count: *mut usize,
    senders: bool,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        let list = if senders {
            c.inner.senders(name)?
        } else {
            c.inner.receivers(name)?
        };
        // SAFETY: forwarded contract.
        unsafe { fill(&list, out, cap, count) }
    })
}

/// Copies members into a caller's array, reporting the count.
pub(crate) unsafe fn fill(
    list: &[Member],
    out: *mut tw_member,
    cap: usize,
    count: *mut usize,
) -> Result<(), Failure> {
    // SAFETY: forwarded contract.
    unsafe { put(count, list.len(), "count") }?;
    if list.len() > cap {
        return Err(Failure::too_small(list.len(), cap));
    }
    if !list.is_empty() && out.is_null() {
        return Err(Failure::invalid("out is NULL"));
    }
    for (i, m) in list.iter().enumerate() {
        // SAFETY: `out` holds `cap` ≥ list.len() elements (the contract).
        unsafe { out.add(i).write(tw_member::from_rust(m)) };
    }
    Ok(())
}
