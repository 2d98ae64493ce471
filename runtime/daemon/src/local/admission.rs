//! The local manager's admission checks: the access policy and the quotas a
//! request must pass before anything is made (see `policy` and `quota`).

use super::*;
use crate::quota::Exceeded;

/// The policy's answer for `client` doing `right` on tag `name` (`Err`:
/// the refusal to send).
pub(super) fn permit(
    shared: &Shared,
    st: &State,
    client: &Client,
    name: &TagName,
    right: Right,
) -> Result<(), (Response, Option<OwnedFd>)> {
    let owner = st
        .table
        .entry(name)
        .and_then(|e| st.owners.get(&e.id).copied());
    shared
        .policy
        .check(&client.cred, owner, name, right)
        .map_err(|why| {
            tracing::debug!(client = client.id.0, uid = client.cred.uid, tag = %name, "denied: {why}");
            error(ErrorCode::Denied, why)
        })
}

/// Whether `client` may create one more tag with a ring of `ring`.
pub(super) fn room_for_tag(
    shared: &Shared,
    st: &State,
    client: &Client,
    ring: RingParams,
) -> Result<(), Exceeded> {
    let q = &shared.config.quotas;
    let uid = client.cred.uid;
    if st.owners.values().filter(|&&o| o == uid).count() >= q.tags_per_uid {
        return Err(Exceeded::new("tags this user created", q.tags_per_uid));
    }
    if st.table.entries().count() >= q.tags {
        return Err(Exceeded::new("tags on this daemon", q.tags));
    }
    let bytes = |r: RingParams| u64::from(r.slots) * u64::from(r.slot_payload);
    let used: u64 = st
        .table
        .entries()
        .filter(|e| st.rings.contains_key(&e.id))
        .map(|e| bytes(e.ring))
        .sum();
    if used.saturating_add(bytes(ring)) > q.ring_bytes {
        return Err(Exceeded::new("ring bytes on this daemon", q.ring_bytes));
    }
    crate::quota::descriptors_for_tag()
}

/// Whether `len` more bytes of large messages fit the daemon's bound; past
/// it, every store first drops what no reader can need.
pub(super) fn large_bytes_within(
    shared: &Shared,
    st: &mut State,
    len: u64,
) -> Result<(), Exceeded> {
    let limit = shared.config.quotas.large_bytes;
    let total = |st: &State| st.blobs.values().map(blob::BlobStore::bytes).sum::<u64>();
    if total(st).saturating_add(len) <= limit {
        return Ok(());
    }
    let State { blobs, rings, .. } = st;
    for (tag, store) in blobs.iter_mut() {
        if let Some(ring) = rings.get(tag) {
            store.sweep(blob::RingState::of(ring), |i| blob::look(ring, i));
        }
    }
    if total(st).saturating_add(len) > limit {
        return Err(Exceeded::new("large-message bytes on this daemon", limit));
    }
    Ok(())
}

/// Whether `client` may hold one more right (send access or subscription).
pub(super) fn rights_within(shared: &Shared, st: &State, client: &Client) -> Result<(), Exceeded> {
    let limit = shared.config.quotas.rights_per_client;
    let held = st
        .table
        .entries()
        .flat_map(|e| {
            e.rights(Role::Sender)
                .iter()
                .chain(e.rights(Role::Receiver))
        })
        .filter(|r| r.holder == tagwire_proto::Holder::Local(client.id))
        .count();
    if held >= limit {
        return Err(Exceeded::new("rights this client holds", limit));
    }
    Ok(())
}

/// Whether a history of `depth` messages and `max_bytes` is within bounds.
pub(super) fn history_within(shared: &Shared, depth: u32, max_bytes: u64) -> Result<(), Exceeded> {
    let q = &shared.config.quotas;
    if depth > q.history_depth {
        return Err(Exceeded::new("history depth", q.history_depth));
    }
    if max_bytes > q.history_bytes {
        return Err(Exceeded::new("history bytes", q.history_bytes));
    }
    Ok(())
}

/// Who the process at the other end of `conn` is: its uid and groups (the
/// kernel's word, `SO_PEERCRED`; the supplementary groups from `/proc`,
/// read while it is connected, so its pid is its own).
pub(super) fn cred_of(pid: u32, uid: u32, gid: u32) -> Cred {
    let mut gids = vec![gid];
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        if let Some(line) = status.lines().find(|l| l.starts_with("Groups:")) {
            gids.extend(
                line["Groups:".len()..]
                    .split_whitespace()
                    .filter_map(|g| g.parse::<u32>().ok()),
            );
        }
    }
    Cred { uid, gids }
}
