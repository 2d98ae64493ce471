//! Results with strings or variable parts (tags, nodes, pulled messages): an
//! opaque list the caller reads by index and frees once. Views into a list
//! stay valid until it is freed.

use std::ffi::{c_char, CString};

use tagwire::{Domain, Member, NodeState};

use crate::client::tw_client;
use crate::error::{guard, handle, put, str_arg, Failure};
use crate::tw_status;
use crate::types::{
    tw_history_query, tw_member, tw_node_addr, tw_sender, unix_ns, TW_DOMAIN_GLOBAL,
    TW_DOMAIN_LOCAL, TW_NODE_CONNECTING, TW_NODE_DEAD, TW_NODE_UP,
};

/// Tags with their senders and receivers ([`tw_tags`], [`tw_local_view`]).
pub struct tw_tag_list {
    tags: Vec<Tag>,
}

struct Tag {
    name: CString,
    domain: u32,
    senders: Vec<tw_member>,
    receivers: Vec<tw_member>,
}

/// One tag of a [`tw_tag_list`]; pointers into the list.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tw_tag_info {
    /// The tag's name.
    pub name: *const c_char,
    /// `TW_DOMAIN_GLOBAL` or `TW_DOMAIN_LOCAL`.
    pub domain: u32,
    /// Its senders.
    pub senders: *const tw_member,
    /// How many.
    pub sender_count: usize,
    /// Its receivers.
    pub receivers: *const tw_member,
    /// How many.
    pub receiver_count: usize,
}

/// The nodes the daemon knows: this one first.
pub struct tw_node_list {
    nodes: Vec<Node>,
}

struct Node {
    node: tw_node_addr,
    name: CString,
    state: u32,
    last_heard_ms: u64,
    source: CString,
}

/// One node of a [`tw_node_list`]; pointers into the list.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tw_node_info {
    /// Its address.
    pub node: tw_node_addr,
    /// Its name.
    pub name: *const c_char,
    /// `TW_NODE_CONNECTING`, `TW_NODE_UP` or `TW_NODE_DEAD`.
    pub state: u32,
    /// Milliseconds since last heard from (`UINT64_MAX`: never).
    pub last_heard_ms: u64,
    /// How it was found ("list", "beacon", …).
    pub source: *const c_char,
}

/// Messages pulled from a tag's history, oldest first.
pub struct tw_message_list {
    messages: Vec<tagwire::Message>,
}

/// One message of a [`tw_message_list`]; the payload points into the list.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tw_message_view {
    /// The payload.
    pub payload: *const u8,
    /// Its length.
    pub len: usize,
    /// The publisher's sequence number.
    pub seq: u64,
    /// Who sent it.
    pub sender: tw_sender,
    /// When it was sent, ns since the Unix epoch.
    pub timestamp_ns: u64,
}

/// Lists every tag with its senders and receivers (asks the daemon).
#[no_mangle]
pub unsafe extern "C" fn tw_tags(
    client: *const tw_client,
    out: *mut *mut tw_tag_list,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        let tags = c
            .inner
            .tags()?
            .into_iter()
            .map(|t| Tag::new(t.name.as_str(), t.domain, &t.senders, &t.receivers))
            .collect();
        // SAFETY: checked non-null above.
        unsafe { put(out, Box::into_raw(Box::new(tw_tag_list { tags })), "out") }
    })
}

/// The library's own copy of a tag's entry (its local tag table, kept up to
/// date by its update thread), without asking the daemon: a list of one tag,
/// or of none when this process does not know the tag.
#[no_mangle]
pub unsafe extern "C" fn tw_local_view(
    client: *const tw_client,
    name: *const c_char,
    out: *mut *mut tw_tag_list,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        let tags = c
            .inner
            .local_view(name)?
            .map(|e| Tag::new(e.name.as_str(), e.domain, &e.senders, &e.receivers))
            .into_iter()
            .collect();
        // SAFETY: checked non-null above.
        unsafe { put(out, Box::into_raw(Box::new(tw_tag_list { tags })), "out") }
    })
}

impl Tag {
    fn new(name: &str, domain: Domain, senders: &[Member], receivers: &[Member]) -> Self {
        Tag {
            name: text(name),
            domain: match domain {
                Domain::Global => TW_DOMAIN_GLOBAL,
                Domain::Local => TW_DOMAIN_LOCAL,
            },
            senders: senders.iter().map(tw_member::from_rust).collect(),
            receivers: receivers.iter().map(tw_member::from_rust).collect(),
        }
    }
}

/// How many tags (0 for `NULL`).
#[no_mangle]
pub unsafe extern "C" fn tw_tag_list_len(list: *const tw_tag_list) -> usize {
    // SAFETY: forwarded contract.
    unsafe { list.as_ref() }.map_or(0, |l| l.tags.len())
}

/// Tag `i` of the list.
#[no_mangle]
pub unsafe extern "C" fn tw_tag_list_get(
    list: *const tw_tag_list,
    i: usize,
    out: *mut tw_tag_info,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { handle(list, "list") }?;
        let t = l.tags.get(i).ok_or_else(|| out_of_range(i, l.tags.len()))?;
        let info = tw_tag_info {
            name: t.name.as_ptr(),
            domain: t.domain,
            senders: t.senders.as_ptr(),
            sender_count: t.senders.len(),
            receivers: t.receivers.as_ptr(),
            receiver_count: t.receivers.len(),
        };
        // SAFETY: forwarded contract.
        unsafe { put(out, info, "out") }
    })
}

/// Frees a tag list (`NULL` is fine).
#[no_mangle]
pub unsafe extern "C" fn tw_tag_list_free(list: *mut tw_tag_list) {
    if !list.is_null() {
        // SAFETY: made by tw_tags, freed once (the contract).
        drop(unsafe { Box::from_raw(list) });
    }
}

/// Lists the nodes the daemon knows, this one first (asks the daemon).
#[no_mangle]
pub unsafe extern "C" fn tw_nodes(
    client: *const tw_client,
    out: *mut *mut tw_node_list,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        let nodes = c
            .inner
            .nodes()?
            .into_iter()
            .map(|n| Node {
                node: tw_node_addr::from_rust(n.node),
                name: text(&n.name),
                state: match n.state {
                    NodeState::Connecting => TW_NODE_CONNECTING,
                    NodeState::Up => TW_NODE_UP,
                    NodeState::Dead => TW_NODE_DEAD,
                },
                last_heard_ms: n.last_heard_ms,
                source: text(&n.source),
            })
            .collect();
        // SAFETY: checked non-null above.
        unsafe { put(out, Box::into_raw(Box::new(tw_node_list { nodes })), "out") }
    })
}

/// How many nodes (0 for `NULL`).
#[no_mangle]
pub unsafe extern "C" fn tw_node_list_len(list: *const tw_node_list) -> usize {
    // SAFETY: forwarded contract.
    unsafe { list.as_ref() }.map_or(0, |l| l.nodes.len())
}

/// Node `i` of the list.
#[no_mangle]
pub unsafe extern "C" fn tw_node_list_get(
    list: *const tw_node_list,
    i: usize,
    out: *mut tw_node_info,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { handle(list, "list") }?;
        let n = l
            .nodes
            .get(i)
            .ok_or_else(|| out_of_range(i, l.nodes.len()))?;
        let info = tw_node_info {
            node: n.node,
            name: n.name.as_ptr(),
            state: n.state,
            last_heard_ms: n.last_heard_ms,
            source: n.source.as_ptr(),
        };
        // SAFETY: forwarded contract.
        unsafe { put(out, info, "out") }
    })
}

/// Frees a node list (`NULL` is fine).
#[no_mangle]
pub unsafe extern "C" fn tw_node_list_free(list: *mut tw_node_list) {
    if !list.is_null() {
        // SAFETY: made by tw_nodes, freed once (the contract).
        drop(unsafe { Box::from_raw(list) });
    }
}

/// Pulls messages from a tag's history (see `tw_set_history`), oldest first:
/// from this node's daemon if it keeps one, else from the fullest history a
/// live peer keeps.
#[no_mangle]
pub unsafe extern "C" fn tw_pull(
    client: *const tw_client,
    name: *const c_char,
    query: *const tw_history_query,
    out: *mut *mut tw_message_list,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(client, "client") }?;
        // SAFETY: forwarded contract.
        let name = unsafe { str_arg(name, "name") }?;
        // SAFETY: forwarded contract.
        let q = unsafe { handle(query, "query") }?.to_rust()?;
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        let messages = c.inner.pull(name, q)?;
        // SAFETY: checked non-null above.
        unsafe {
            put(
                out,
                Box::into_raw(Box::new(tw_message_list { messages })),
                "out",
            )
        }
    })
}

/// How many messages (0 for `NULL`).
#[no_mangle]
pub unsafe extern "C" fn tw_message_list_len(list: *const tw_message_list) -> usize {
    // SAFETY: forwarded contract.
    unsafe { list.as_ref() }.map_or(0, |l| l.messages.len())
}

/// Message `i` of the list.
#[no_mangle]
pub unsafe extern "C" fn tw_message_list_get(
    list: *const tw_message_list,
    i: usize,
    out: *mut tw_message_view,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let l = unsafe { handle(list, "list") }?;
        let m = l
            .messages
            .get(i)
            .ok_or_else(|| out_of_range(i, l.messages.len()))?;
        let view = tw_message_view {
            payload: m.payload.as_ptr(),
            len: m.payload.len(),
            seq: m.seq.0,
            sender: tw_sender::from_rust(m.sender),
            timestamp_ns: unix_ns(m.timestamp),
        };
        // SAFETY: forwarded contract.
        unsafe { put(out, view, "out") }
    })
}

/// Frees a message list (`NULL` is fine).
#[no_mangle]
pub unsafe extern "C" fn tw_message_list_free(list: *mut tw_message_list) {
    if !list.is_null() {
        // SAFETY: made by tw_pull, freed once (the contract).
        drop(unsafe { Box::from_raw(list) });
    }
}

fn text(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

fn out_of_range(i: usize, len: usize) -> Failure {
    Failure::invalid(format!("index {i} out of range (the list has {len})"))
}
