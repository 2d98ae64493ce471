//! The update manager: keeps this daemon's copy of the global tag table in step
//! with the other daemons', and tells local clients about every change.
//!
//! * To clients: `broadcast` queues updates, in version order (callers hold
//!   the state lock), into each client's bounded outbox (see `Outbox`), drained
//!   by that client's writer thread, so a client that stops reading cannot stall
//!   the daemon: when its outbox is full it is disconnected; its library
//!   reconnects and re-registers.
//! * To peers: `replicate` hands the operations of a local change to the
//!   membership core (`State::peers`, [`tagwire_proto::Membership`]), which
//!   sends them to every live peer and tracks their acknowledgements; the
//!   caller waits until each peer applied them, or gets the names of those
//!   that did not answer within the apply timeout.
//! * From peers: one thread (`run`) feeds what the sockets report
//!   (`peers::Input`) and the time into the core, sleeping until its
//!   next timeout, and consumes the core's events: a peer up gets this
//!   node's `Sync`; a peer's `Sync` and `Op`s are merged by
//!   `TagTable::apply_sync` / `apply_remote` (whose rules make the outcome
//!   independent of arrival order); a peer down (lease expired, link closed,
//!   restarted) loses every right its clients held here.
//! * Locally: `effects` creates the shared-memory ring of a tag first heard
//!   of from a peer, and frees the ring of a destroyed tag.
//!
//! This module calls down only (`peers` for the sockets, `ring`); the local
//! manager calls it.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tagwire_proto::membership::{DownReason, Event, LinkId, OpId, Source};
use tagwire_proto::{replication, TableEvent, TableOp, Update};
use tagwire_wire::control::{HistoryQuery, Message};
use tagwire_wire::peer::PeerMessage;
use tagwire_wire::{NodeAddr, TagName};

use crate::peers::{self, Input};
use crate::{lock, ring, Shared, State};

/// Queues `updates` for every client (never blocks).
pub(crate) fn broadcast(state: &State, updates: &[Update]) {
    for u in updates {
        let bytes = Message::Update(u.clone()).encode();
        for (id, out) in &state.clients {
            match out.tx.try_send((bytes.clone(), None, Vec::new())) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    tracing::warn!(
                        client = id.0,
                        "client not reading its updates; disconnecting it"
                    );
                    let _ = out.conn.shutdown();
                }
                // Its writer is gone; its connection thread is releasing its rights.
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }
}

/// Applies the local consequences of table updates (rings appear and go), then
/// broadcasts them to the clients.
pub(crate) fn effects(shared: &Shared, st: &mut State, updates: &[Update]) {
    for u in updates {
        match &u.event {
            TableEvent::TagCreated { tag, name, .. } => {
                // Peers' publishing clients may seal its datagrams now.
                shared.guard.know_tag(name);
                if st.rings.contains_key(tag) {
                    continue;
                }
                if let Err(q) = crate::quota::descriptors_for_tag() {
                    // (The tag stays in the table; its data does not reach
                    // this node until descriptors are free and it is made
                    // again.)
                    tracing::warn!(tag = %name, "no ring for a peer's tag: {}", q.message());
                    continue;
                }
                let default = shared.config.default_ring;
                let ring = st.table.entry_by_id(*tag).map_or(default, |e| e.ring);
                // The creator's shape, unless it exceeds this daemon's limits.
                let made = ring::create(name, ring).or_else(|_| {
                    tracing::warn!(tag = %name, slots = ring.slots, slot_payload = ring.slot_payload,
                        "a peer's ring shape is too large here; using the default");
                    ring::create(name, default)
                });
                match made {
                    Ok(r) => {
                        st.rings.insert(*tag, r);
                        crate::delivery::ring_added(shared, st, *tag);
                        tracing::info!(tag = %name, "tag created by a peer");
                    }
                    Err(_) => tracing::warn!(tag = %name, "cannot create the ring of a peer's tag"),
                }
            }
            TableEvent::TagDestroyed { tag, .. } => {
                crate::delivery::ring_removed(shared, st, *tag);
                st.rings.remove(tag);
                // The tag's subscriptions ended with it: their seats too.
                for list in st.seats.values_mut() {
                    list.retain(|s| s.tag() != *tag);
                }
                st.seats.retain(|_, list| !list.is_empty());
                st.blobs.remove(tag);
                st.owners.remove(tag);
            }
            _ => {}
        }
    }
    if !updates.is_empty() {
        reroute(shared, st);
    }
    broadcast(st, updates);
}

/// Re-resolves the forwarders' routes: after a table change, and when a
/// peer comes up or is declared dead (a dead node gets nothing, and a
/// proxy node is used only while it is up; see `plan`).
pub(crate) fn reroute(shared: &Shared, st: &State) {
    if let (Some(d), Some(me)) = (
        shared.delivery.get(),
        shared.this.get().and_then(std::sync::Weak::upgrade),
    ) {
        d.reroute(&me, st);
    }
}

/// Outcomes of replications, for the client threads waiting in `replicate`:
/// op id → `None` while pending, then the peers that did not apply it.
#[derive(Debug, Default)]
pub(crate) struct Replications {
    outcomes: Mutex<HashMap<OpId, Option<Vec<NodeAddr>>>>,
    changed: Condvar,
}

impl Replications {
    fn finish(&self, id: OpId, missing: Vec<NodeAddr>) {
        let mut o = lock(&self.outcomes);
        if let Some(slot) = o.get_mut(&id) {
            *slot = Some(missing);
        }
        self.changed.notify_all();
    }
}

/// Sends `ops` to every live peer and waits until all applied them. On timeout,
/// returns a message naming the peers that did not confirm.
pub(crate) fn replicate(shared: &Shared, ops: Vec<TableOp>) -> Result<(), String> {
    let Some(net) = &shared.config.net else {
        return Ok(());
    };
    let Some(me) = shared.this.get().and_then(std::sync::Weak::upgrade) else {
        return Ok(());
    };
    if ops.is_empty() {
        return Ok(());
    }
    let reps = &shared.replications;
    let ids: Vec<OpId> = {
        let mut st = shared.lock();
        let now = Instant::now();
        let ids: Vec<OpId> = ops
            .into_iter()
            .filter_map(|op| st.peers.begin_replication(now, op))
            .collect();
        // Registered before the ops leave, so no outcome comes first.
        let mut o = lock(&reps.outcomes);
        for id in &ids {
            o.insert(*id, None);
        }
        drop(o);
        peers::flush(&me, &mut st);
        ids
    };
    if ids.is_empty() {
        return Ok(());
    }
    // A new apply deadline: the update manager recomputes its sleep.
    shared.net.input(Input::Wake);
    // The core expires the wait after the apply timeout; this bound only
    // guards against an update manager that is gone (the daemon stops).
    let watchdog = Instant::now() + net.apply_timeout * 2 + Duration::from_secs(1);
    let mut o = lock(&reps.outcomes);
    loop {
        let done = ids.iter().all(|id| o.get(id).is_some_and(Option::is_some));
        let now = Instant::now();
        if done || now >= watchdog || shared.is_stopping() {
            let missing: BTreeSet<NodeAddr> = ids
                .iter()
                .filter_map(|id| o.remove(id).flatten())
                .flatten()
                .collect();
            drop(o);
            if done && missing.is_empty() {
                return Ok(());
            }
            let st = shared.lock();
            let names: Vec<String> = missing
                .iter()
                .map(|n| match st.peers.name(*n) {
                    Some(name) if name != n.to_string() => format!("{n} ({name})"),
                    _ => n.to_string(),
                })
                .collect();
            return Err(format!(
                "the daemons on {} did not apply the change within {:?}",
                if names.is_empty() {
                    "some peers".to_owned()
                } else {
                    names.join(", ")
                },
                net.apply_timeout
            ));
        }
        o = reps
            .changed
            .wait_timeout(o, watchdog - now)
            .map_or_else(|e| e.into_inner().0, |(g, _)| g);
    }
}

/// Starts the thread that drives the membership core (see the module docs).
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
    let Some(inputs) = shared.net.take_receiver() else {
        return Err(std::io::Error::other("the update manager runs already"));
    };
    let s = shared.clone();
    shared
        .roles
        .spawn(crate::roles::Role::Update, "tagwired-update", move || {
            run(&s, &inputs)
        })
        .map(|_| ())
}

/// A peer's pull, answered outside the state lock (reading a history takes
/// the keeper's and, for large messages, the state lock).
struct PullRequest {
    link: LinkId,
    id: u64,
    name: TagName,
    query: HistoryQuery,
}

/// Feeds inputs and time to the core until the daemon stops; sleeps until
/// the next input or the core's next timeout, whichever comes first.
fn run(shared: &Arc<Shared>, inputs: &Receiver<Input>) {
    loop {
        let next = shared.lock().peers.poll_timeout();
        let input = match next {
            Some(t) => inputs.recv_timeout(t.saturating_duration_since(Instant::now())),
            None => inputs.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let input = match input {
            Ok(Input::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Ok(i) => Some(i),
            Err(RecvTimeoutError::Timeout) => None,
        };
        let mut st = shared.lock();
        let now = Instant::now();
        if let Some(i) = input {
            feed(shared, &mut st, now, i);
        }
        // Everything queued meanwhile goes in before the timers: a thread
        // that could not run for a while (a loaded machine) must not declare
        // a peer silent whose heartbeat waits in the queue.
        let mut stop = false;
        while let Ok(i) = inputs.try_recv() {
            if matches!(i, Input::Stop) {
                stop = true;
                break;
            }
            feed(shared, &mut st, now, i);
        }
        if st.peers.poll_timeout().is_some_and(|t| t <= now) {
            st.peers.handle_timeout(now);
        }
        let pulls = consume(shared, &mut st);
        peers::flush(shared, &mut st);
        drop(st);
        for p in pulls {
            answer(shared, p);
        }
        if stop || shared.is_stopping() {
            break;
        }
    }
    peers::close_all(shared);
}

/// Hands one input to the core.
fn feed(shared: &Arc<Shared>, st: &mut State, now: Instant, input: Input) {
    match input {
        Input::Connected {
            stream,
            remote,
            dialed,
            secure,
        } => {
            let link = st.peers.handle_connected(now, remote, dialed);
            if !peers::open(shared, link, stream, secure) {
                st.peers.handle_closed(now, link);
            }
        }
        Input::DialFailed(node) => st.peers.handle_dial_failed(now, node),
        Input::Message(link, msg) => {
            // A peer speaks for the address it connects from (docs/design.md §7).
            if let PeerMessage::Hello { node, .. } = &msg {
                let from = st.peers.link_remote(link).map(|r| r.ip());
                if from.is_some_and(|ip| ip != node.0) {
                    shared
                        .stats
                        .bad_peer_messages
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(?link, %node, ?from, "Hello for another address; link closed");
                    st.peers.handle_closed(now, link);
                    peers::forget(shared, link);
                    return;
                }
            }
            if let Err(e) = st.peers.handle_message(now, link, msg) {
                shared
                    .stats
                    .bad_peer_messages
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(?link, error = %e, "peer message refused; link closed");
            }
        }
        Input::Closed(link) => {
            st.peers.handle_closed(now, link);
            peers::forget(shared, link);
        }
        Input::Beacon(from, b) => st.peers.handle_beacon(now, from, &b),
        Input::Wake | Input::Stop => {}
    }
}

/// Acts on the core's events; returns the pulls to answer.
fn consume(shared: &Arc<Shared>, st: &mut State) -> Vec<PullRequest> {
    let mut pulls = Vec::new();
    while let Some(e) = st.peers.poll_event() {
        match e {
            Event::Discovered { node, name, source } => {
                if source == Source::Beacon {
                    tracing::info!(%node, name, "node discovered");
                }
            }
            Event::PeerUp {
                peer,
                ref name,
                restarted,
                ..
            } => {
                tracing::info!(node = %peer, name, restarted, "peer up");
                shared.guard.set_up(peer.0, true);
                reroute(shared, st);
                table_event(st, &e);
            }
            Event::PeerDown { peer, ref reason } => {
                match reason {
                    DownReason::LeaseExpired => {
                        tracing::warn!(node = %peer, "peer silent for its lease: declared dead");
                    }
                    r => tracing::debug!(node = %peer, reason = ?r, "peer down"),
                }
                shared.pulls.gone(peer);
                shared.qos_asks.gone(peer);
                shared.guard.set_up(peer.0, false);
                let ups = table_event(st, &e);
                tracing::info!(node = %peer, released = ups.len(), "peer link closed; its rights are gone");
                effects(shared, st, &ups);
                if ups.is_empty() {
                    reroute(shared, st);
                }
            }
            Event::Sync { peer, ref ops } if !sync_fits(shared, ops) => {
                shared.stats.refused_syncs.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(node = %peer, ops = ops.len(), "peer's Sync exceeds this daemon's bounds; ignored");
            }
            Event::Sync { .. } | Event::Op { .. } => {
                let ups = table_event(st, &e);
                effects(shared, st, &ups);
            }
            Event::Replicated { id } => {
                crate::remote_qos::replicated(st, id, &[]);
                shared.replications.finish(id, Vec::new());
            }
            Event::ReplicationTimedOut { id, missing } => {
                crate::remote_qos::replicated(st, id, &missing);
                shared.replications.finish(id, missing);
            }
            Event::Pull {
                link,
                id,
                name,
                query,
                ..
            } => pulls.push(PullRequest {
                link,
                id,
                name,
                query,
            }),
            Event::Pulled { peer, id, answer } => shared.pulls.answered(id, peer, answer),
            Event::SetQos {
                link,
                id,
                ref name,
                change,
                ..
            } => crate::remote_qos::serve(shared, st, (link, id), name, change),
            Event::QosSet { peer, id, outcome } => shared.qos_asks.answered(id, peer, outcome),
        }
    }
    pulls
}

/// Table operations one `Sync` may carry: every tag this daemon may hold
/// (`Quotas::tags`) created and destroyed, and a bounded number of rights.
const MAX_SYNC_RIGHTS: usize = 1 << 18;

/// Whether a peer's `Sync` stays within this daemon's bounds: no more tags
/// than it may hold in all, no more rights than `MAX_SYNC_RIGHTS`.
fn sync_fits(shared: &Shared, ops: &[TableOp]) -> bool {
    let tags = ops
        .iter()
        .filter(|o| matches!(o, TableOp::TagUp { .. }))
        .count();
    tags <= shared.config.quotas.tags
        && ops.len() <= 2 * shared.config.quotas.tags + MAX_SYNC_RIGHTS
}

/// The table's part of a membership event (`tagwire_proto::replication`).
fn table_event(st: &mut State, e: &Event) -> Vec<Update> {
    let State { table, peers, .. } = st;
    replication::apply(table, peers, Instant::now(), e).unwrap_or_default()
}

/// Answers a peer's pull from this node's history.
fn answer(shared: &Arc<Shared>, p: PullRequest) {
    // Room for the message's own fields within a peer frame.
    let max = tagwire_wire::peer::MAX_PEER_MESSAGE - 64;
    let found = shared.keepers.records(shared, &p.name, p.query, max);
    let mut st = shared.lock();
    st.peers.answer_pull(p.link, p.id, found);
    peers::flush(shared, &mut st);
}
