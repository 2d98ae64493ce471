//! Bounded resources (docs/design.md §7): what one user, and the daemon as a
//! whole, may hold. A request past a bound is refused with
//! `ErrorCode::Quota` (the client's `Error::Quota { what, limit }`), and the
//! daemon keeps serving everyone else.
//!
//! | bound | default | why |
//! |---|---|---|
//! | connections per uid / in all | 1024 / 8192 | each costs a descriptor and an outbox of up to 4096 packets (no thread: `local::conns`) |
//! | tags a uid owns / in all | 1024 / 8192 | each costs a descriptor and its ring |
//! | ring bytes in all | 8 GiB | shared memory |
//! | history depth / bytes per tag | 1 M messages / 1 GiB | the daemon's memory |
//! | large-message bytes in all | 4 GiB | memory held in memfds |
//! | large-message descriptors in all | half the descriptor limit past 128 | each kept large message holds its memfd |
//! | rights per client | 4096 | table entries; a subscription's seat (a descriptor) and, when lossless, its gate |
//!
//! At start the daemon raises its descriptor limit to the hard limit, and a
//! new tag must leave 64 descriptors free (`DESCRIPTOR_RESERVE`, counted
//! before its ring is made), a new subscription 32 (before its seat is
//! made): a daemon under a low limit refuses them with a quota error and
//! keeps serving its clients.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::lock;

/// Resource bounds (see the module docs for the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Connections one uid may hold.
    pub connections_per_uid: usize,
    /// Connections in all.
    pub connections: usize,
    /// Tags created on this node one uid may own.
    pub tags_per_uid: usize,
    /// Tags in the table in all.
    pub tags: usize,
    /// Bytes of all rings on this node.
    pub ring_bytes: u64,
    /// Messages a tag's history may keep.
    pub history_depth: u32,
    /// Bytes a tag's history may keep.
    pub history_bytes: u64,
    /// Bytes of large messages (blobs) kept on this node in all.
    pub large_bytes: u64,
    /// Rights (send accesses and subscriptions) one client may hold.
    pub rights_per_client: usize,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            connections_per_uid: 1024,
            connections: 8192,
            tags_per_uid: 1024,
            tags: 8192,
            ring_bytes: 8 << 30,
            history_depth: 1 << 20,
            history_bytes: 1 << 30,
            large_bytes: 4 << 30,
            rights_per_client: 4096,
        }
    }
}

/// A bound a request would pass: what, and the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exceeded {
    pub(crate) what: &'static str,
    pub(crate) limit: u64,
}

impl Exceeded {
    pub(crate) fn new(what: &'static str, limit: impl TryInto<u64>) -> Self {
        Self {
            what,
            limit: limit.try_into().unwrap_or(u64::MAX),
        }
    }

    /// The message of the refusal (the client parses `what` and `limit`
    /// back out of it: `quota: <what> (limit <n>)`).
    pub(crate) fn message(&self) -> String {
        format!(
            "quota: {} (limit {}); release some, or raise the daemon's limit",
            self.what, self.limit
        )
    }
}

/// Live connections per uid.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    by_uid: Mutex<HashMap<u32, usize>>,
}

impl Connections {
    /// Counts a new connection of `uid`, unless a bound is reached.
    pub(crate) fn admit(&self, q: &Quotas, uid: u32) -> Result<(), Exceeded> {
        let mut m = lock(&self.by_uid);
        let total: usize = m.values().sum();
        if total >= q.connections {
            return Err(Exceeded::new("connections to this daemon", q.connections));
        }
        let mine = m.entry(uid).or_default();
        if *mine >= q.connections_per_uid {
            return Err(Exceeded::new(
                "connections of this user",
                q.connections_per_uid,
            ));
        }
        *mine += 1;
        Ok(())
    }

    /// A connection of `uid` closed.
    pub(crate) fn release(&self, uid: u32) {
        let mut m = lock(&self.by_uid);
        if let Some(n) = m.get_mut(&uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&uid);
            }
        }
    }
}

/// Descriptors a new tag must leave free: for clients that connect (each
/// holds one, and a request may carry one), sockets, large messages in
/// flight and the files the daemon opens.
pub(crate) const DESCRIPTOR_RESERVE: u64 = 64;

/// Whether the daemon can afford the descriptors of one more tag (its
/// ring's memfd, and a history's) and still keep [`DESCRIPTOR_RESERVE`]
/// free: counted before the ring is made, so a flood of tags is refused
/// with a clear error instead of failing in `memfd_create` (or in the next
/// client's `accept`).
pub(crate) fn descriptors_for_tag() -> Result<(), Exceeded> {
    descriptors_for(2, DESCRIPTOR_RESERVE)
}

/// Whether the daemon can afford a subscription's seat (a descriptor held
/// while it lasts) and still keep half of [`DESCRIPTOR_RESERVE`] free: a
/// daemon out of descriptors for new tags still takes subscriptions to the
/// tags there are.
pub(crate) fn descriptors_for_seat() -> Result<(), Exceeded> {
    descriptors_for(1, DESCRIPTOR_RESERVE / 2)
}

/// Whether `n` more descriptors leave `reserve` free.
fn descriptors_for(n: u64, reserve: u64) -> Result<(), Exceeded> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    // (Unknown if /proc is not mounted: then not counted.)
    let Ok(open) = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64) else {
        return Ok(());
    };
    if open.saturating_add(n + reserve) > limit {
        return Err(Exceeded::new("descriptors left to the daemon", limit));
    }
    Ok(())
}

/// Descriptors large messages may hold on this daemon in all (each kept
/// one holds its memfd): half of what the descriptor limit leaves past
/// twice [`DESCRIPTOR_RESERVE`], at least 8. A publisher of large messages
/// nobody reads keeps a ring's worth of them per tag; without this bound a
/// few such tags filled the daemon's descriptor table, after which it
/// could neither take a new client nor receive the next message's memfd.
pub(crate) fn large_descriptors() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let budget = limit.saturating_sub(2 * DESCRIPTOR_RESERVE) / 2;
    usize::try_from(budget).unwrap_or(usize::MAX).max(8)
}

/// Raises the soft descriptor limit to the hard one (best effort).
pub(crate) fn raise_descriptor_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    if l.current != l.maximum {
        let raised = Rlimit {
            current: l.maximum,
            maximum: l.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!(error = %e, "descriptor limit unchanged");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_bounded_per_uid_and_in_all_and_released() {
        let q = Quotas {
            connections_per_uid: 2,
            connections: 3,
            ..Quotas::default()
        };
        let c = Connections::default();
        c.admit(&q, 1).unwrap();
        c.admit(&q, 1).unwrap();
        assert_eq!(
            c.admit(&q, 1).unwrap_err(),
            Exceeded::new("connections of this user", 2usize)
        );
        c.admit(&q, 2).unwrap();
        assert_eq!(
            c.admit(&q, 3).unwrap_err().what,
            "connections to this daemon"
        );
        c.release(1);
        c.admit(&q, 3).unwrap();
        assert!(Exceeded::new("x", 5u32)
            .message()
            .contains("quota: x (limit 5)"));
    }
}
