//! `tagwire stats`: the counters a user reads instead of debug logs.
//!
//! A client's `Request::Stats` gets rows of named counters
//! (`tagwire_wire::control::StatsRow`):
//!
//! * **node**: the daemon's totals (`Stats`: malformed input, forwarder
//!   losses, held-back messages, large messages held, …);
//! * **tag**: per tag on this node: records written to its ring, senders and
//!   receivers, large messages kept, and what came from other nodes
//!   (messages delivered, datagrams refused while a lossless subscriber was a
//!   ring behind, best-effort datagrams that never arrived);
//! * **to node**: per reliable stream of a tag to another node: datagrams
//!   sent, resent, acknowledged, and what is unacknowledged now;
//! * **peer**: per other node: its state, and the malformed and refused
//!   datagrams that came from its address;
//! * **subscriber**: per subscriber of every local client: received, lost
//!   to overflow, missing on the way. The daemon asks its clients (a
//!   `Request::Stats` sent *to* them, answered by `Request::Report`) and
//!   waits [`REPORT_WAIT`] for them.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use tagwire_proto::ClientId;
use tagwire_wire::control::{Message, Request, Response, StatsKind, StatsRow};
use tagwire_wire::TagName;

use crate::{lock, Shared};

/// How long a stats request waits for the clients' reports.
pub(crate) const REPORT_WAIT: Duration = Duration::from_millis(300);

/// Keys a [`Tally`] holds at most: counts for more (say, datagrams naming
/// made-up tags) are not kept.
const MAX_KEYS: usize = 4096;

/// Rows one client's report may add.
const MAX_REPORT_ROWS: usize = 4096;

/// Counts kept per key (a tag, or a peer address).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    /// Messages delivered from other nodes.
    pub(crate) delivered: u64,
    /// Datagrams refused (left unacknowledged) while a lossless subscriber
    /// was a ring behind.
    pub(crate) refused: u64,
    /// Best-effort datagrams that never arrived.
    pub(crate) lost: u64,
    /// Malformed datagrams.
    pub(crate) malformed: u64,
    /// Datagrams refused unopened: not from an up peer, or not sealed by
    /// it with the domain key in its current life (`guard`).
    pub(crate) unauthenticated: u64,
    /// Authentic datagrams seen before (replays).
    pub(crate) replayed: u64,
    /// Control connections that failed the handshake.
    pub(crate) unauthenticated_links: u64,
    /// Time the tag's publishers slept at its forwarder's gate while the
    /// tag was paced (held back so that the queue pacing keeps off the
    /// network does not build in the ring), ns.
    pub(crate) paced_held_ns: u64,
}

/// Counts a datagram the guard refused from `from`.
pub(crate) fn refused(shared: &Shared, from: IpAddr, why: crate::guard::Refusal) {
    use crate::guard::Refusal;
    match why {
        Refusal::Unauthenticated => {
            shared.stats.unauthenticated.fetch_add(1, Ordering::Relaxed);
            shared.tallies.peers.add(&from, |c| c.unauthenticated += 1);
        }
        Refusal::Replayed => {
            shared.stats.replayed.fetch_add(1, Ordering::Relaxed);
            shared.tallies.peers.add(&from, |c| c.replayed += 1);
        }
    }
}

/// Counts per key, bounded in keys.
#[derive(Debug)]
pub(crate) struct Tally<K> {
    map: Mutex<HashMap<K, Counts>>,
}

impl<K> Default for Tally<K> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone> Tally<K> {
    /// Adds to `key`'s counts.
    pub(crate) fn add(&self, key: &K, f: impl FnOnce(&mut Counts)) {
        let mut m = lock(&self.map);
        if let Some(c) = m.get_mut(key) {
            f(c);
        } else if m.len() < MAX_KEYS {
            f(m.entry(key.clone()).or_default());
        }
    }

    fn get(&self, key: &K) -> Counts {
        lock(&self.map).get(key).copied().unwrap_or_default()
    }

    fn entries(&self) -> Vec<(K, Counts)> {
        lock(&self.map)
            .iter()
            .map(|(k, c)| (k.clone(), *c))
            .collect()
    }
}

/// What the daemon counts per tag and per peer address.
#[derive(Debug, Default)]
pub(crate) struct Tallies {
    pub(crate) tags: Tally<TagName>,
    pub(crate) peers: Tally<IpAddr>,
}

/// Clients' reports awaited by stats requests, by query id.
#[derive(Debug, Default)]
pub(crate) struct Reports {
    next: AtomicU32,
    open: Mutex<HashMap<u32, Awaited>>,
    arrived: Condvar,
}

#[derive(Debug, Default)]
struct Awaited {
    /// Clients asked and not answered yet.
    from: Vec<ClientId>,
    rows: Vec<StatsRow>,
}

impl Reports {
    /// Files client `from`'s answer to query `query` (ignored unless that
    /// client was asked and has not answered).
    pub(crate) fn deposit(&self, query: u32, from: ClientId, mut rows: Vec<StatsRow>) {
        let mut open = lock(&self.open);
        let Some(a) = open.get_mut(&query) else {
            return;
        };
        let Some(i) = a.from.iter().position(|c| *c == from) else {
            return;
        };
        a.from.swap_remove(i);
        rows.truncate(MAX_REPORT_ROWS);
        rows.retain(|r| r.kind == StatsKind::Subscriber);
        a.rows.extend(rows);
        self.arrived.notify_all();
    }
}

/// Answers a client's `Request::Stats`: the daemon's rows, then those its
/// other clients report within [`REPORT_WAIT`].
pub(crate) fn collect(shared: &Shared, asker: ClientId) -> Response {
    let r = &shared.reports;
    let query = r.next.fetch_add(1, Ordering::Relaxed).max(1);
    let (mut rows, asked) = {
        let st = shared.lock();
        let rows = daemon_rows(shared, &st);
        let ask = Message::Request {
            id: query,
            body: Request::Stats,
        }
        .encode();
        // Awaited before asked: a quick answer must find the query open.
        let others: Vec<ClientId> = st
            .clients
            .keys()
            .filter(|id| **id != asker)
            .copied()
            .collect();
        lock(&r.open).insert(
            query,
            Awaited {
                from: others.clone(),
                rows: Vec::new(),
            },
        );
        let asked: Vec<ClientId> = others
            .into_iter()
            .filter(|id| {
                let sent = st
                    .clients
                    .get(id)
                    .is_some_and(|out| out.tx.try_send((ask.clone(), None, Vec::new())).is_ok());
                if !sent {
                    if let Some(a) = lock(&r.open).get_mut(&query) {
                        a.from.retain(|c| c != id);
                    }
                }
                sent
            })
            .collect();
        (rows, asked)
    };
    let deadline = Instant::now() + REPORT_WAIT;
    let mut open = lock(&r.open);
    while !asked.is_empty() && open.get(&query).is_some_and(|a| !a.from.is_empty()) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        open = r
            .arrived
            .wait_timeout(open, left)
            .map_or_else(|e| e.into_inner().0, |(g, _)| g);
    }
    if let Some(a) = open.remove(&query) {
        rows.extend(a.rows);
    }
    Response::Stats { rows }
}

fn daemon_rows(shared: &Shared, st: &crate::State) -> Vec<StatsRow> {
    let s = &shared.stats;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let d = shared.delivery.get();
    let keys = shared.guard.keys();
    // A counter of the delivery port's replies socket (`crate::replies`; 0
    // without one).
    let replies = |f: fn(&crate::replies::Replies) -> u64| {
        d.and_then(|d| d.outbound.replies.as_ref()).map_or(0, f)
    };
    let node = shared
        .config
        .net
        .as_ref()
        .map_or_else(|| shared.config.node.to_string(), |net| net.name.clone());
    let mut rows = vec![StatsRow::new(StatsKind::Node, "", node)
        .with("malformed_datagrams", n(&s.bad_datagrams))
        .with("malformed_peer_messages", n(&s.bad_peer_messages))
        .with("malformed_beacons", n(&s.bad_beacons))
        .with("unauthenticated_datagrams", n(&s.unauthenticated))
        .with("replayed_datagrams", n(&s.replayed))
        .with("unauthenticated_links", n(&s.unauthenticated_links))
        .with("refused_syncs", n(&s.refused_syncs))
        .with("refused_ahead_ops", st.table.refused_ahead())
        .with("unknown_tag_datagrams", n(&s.unknown_tag))
        .with("forward_lost", n(&s.forward_lost))
        .with("forward_dropped", n(&s.forward_dropped))
        .with("best_effort_lost", n(&s.best_effort_lost))
        .with("resent", d.map_or(0, |d| n(&d.outbound.retransmitted)))
        .with("acks_steered", replies(|r| r.read.load(Ordering::Relaxed)))
        .with(
            "ack_watch_wakeups",
            replies(|r| r.woken.load(Ordering::Relaxed)),
        )
        .with("refused_datagrams", n(&s.held_back))
        .with("held_now", n(&s.held_now))
        .with("held", n(&s.held))
        .with("large_held_back", n(&s.blobs_held))
        .with("inbound_failed", n(&s.inbound_failed))
        .with("direct_sent", n(&s.direct_sent))
        .with("direct_received", n(&s.direct_received))
        .with("scaled_out", n(&s.scaled_out))
        .with("multicast_sent", n(&s.multicast_sent))
        .with("tcp_frames", n(&s.tcp_frames))
        .with("state_hold_max_us", n(&s.state_hold_max_ns) / 1000)
        // The domain key generation it seals with, and how many keys it
        // opens with (2 during a key roll, 0 without a key).
        .with(
            "key_generation",
            keys.as_ref()
                .map_or(0, |k| u64::from(k.active.generation())),
        )
        .with(
            "keys_accepted",
            keys.as_ref()
                .map_or(0, |k| k.accepted.iter().count() as u64),
        )];
    let mut entries: Vec<_> = st.table.entries().collect();
    entries.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    for e in entries {
        let c = shared.tallies.tags.get(&e.name);
        rows.push(
            StatsRow::new(StatsKind::Tag, e.name.as_str(), "")
                .with("records", st.rings.get(&e.id).map_or(0, |r| r.head_index()))
                .with("senders", e.senders().count() as u64)
                .with("receivers", e.receivers().count() as u64)
                .with(
                    "large_kept",
                    st.blobs.get(&e.id).map_or(0, |b| b.len() as u64),
                )
                .with(
                    "held_now",
                    st.sinks.get(&e.id).map_or(0, |s| s.held_len() as u64),
                )
                .with("paced_held_us", c.paced_held_ns / 1000)
                .with("from_network", c.delivered)
                .with("refused_datagrams", c.refused)
                .with("best_effort_lost", c.lost),
        );
    }
    if let Some(d) = d {
        rows.extend(d.stream_rows());
    }
    let summaries = st.peers.summaries(Instant::now());
    for p in &summaries {
        let c = shared.tallies.peers.get(&p.node.0);
        let state = match p.state {
            tagwire_wire::control::NodeState::Connecting => 0,
            tagwire_wire::control::NodeState::Up => 1,
            tagwire_wire::control::NodeState::Dead => 2,
        };
        rows.push(
            StatsRow::new(StatsKind::Peer, "", format!("{} {}", p.name, p.node))
                .with("up", u64::from(state == 1))
                .with("last_heard_ms", p.last_heard_ms)
                .with("malformed_datagrams", c.malformed)
                .with("refused_datagrams", c.refused)
                .with("unauthenticated_datagrams", c.unauthenticated)
                .with("replayed_datagrams", c.replayed)
                .with("unauthenticated_links", c.unauthenticated_links),
        );
    }
    // Addresses that are no peer but sent something refused.
    let mut strangers: Vec<_> = shared
        .tallies
        .peers
        .entries()
        .into_iter()
        .filter(|(ip, _)| !summaries.iter().any(|p| p.node.0 == *ip))
        .collect();
    strangers.sort_by_key(|(ip, _)| *ip);
    for (ip, c) in strangers {
        rows.push(
            StatsRow::new(StatsKind::Peer, "", format!("(not a peer) {ip}"))
                .with("up", 0)
                .with("malformed_datagrams", c.malformed)
                .with("refused_datagrams", c.refused)
                .with("unauthenticated_datagrams", c.unauthenticated)
                .with("replayed_datagrams", c.replayed)
                .with("unauthenticated_links", c.unauthenticated_links),
        );
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_keeps_a_bounded_number_of_keys() {
        let t: Tally<u32> = Tally::default();
        for k in 0..(MAX_KEYS as u32 + 5) {
            t.add(&k, |c| c.malformed += 1);
        }
        t.add(&0, |c| c.malformed += 1);
        assert_eq!(t.get(&0).malformed, 2);
        assert_eq!(t.get(&(MAX_KEYS as u32 + 1)).malformed, 0, "not kept");
        assert_eq!(lock(&t.map).len(), MAX_KEYS);
    }

    #[test]
    fn reports_are_taken_once_from_asked_clients_and_only_subscriber_rows() {
        let r = Reports::default();
        lock(&r.open).insert(
            7,
            Awaited {
                from: vec![ClientId(1), ClientId(2)],
                rows: Vec::new(),
            },
        );
        let row = |k| StatsRow::new(k, "/t", "pid 1").with("received", 3);
        r.deposit(
            7,
            ClientId(1),
            vec![row(StatsKind::Subscriber), row(StatsKind::Node)],
        );
        r.deposit(7, ClientId(1), vec![row(StatsKind::Subscriber)]);
        r.deposit(7, ClientId(9), vec![row(StatsKind::Subscriber)]);
        r.deposit(8, ClientId(2), vec![row(StatsKind::Subscriber)]);
        let open = lock(&r.open);
        let a = &open[&7];
        assert_eq!(
            a.rows.len(),
            1,
            "once, from an asked client, its subscriber rows"
        );
        assert_eq!(a.from, vec![ClientId(2)]);
    }
}
