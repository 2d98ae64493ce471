//! The update manager: keeps this daemon's copy of the global tag table in step
//! with the other daemons', and tells local clients about every change.
//!
//! * To clients: `broadcast` queues updates, in version order (callers hold
//!   the state lock), into each client's bounded outbox (see `Outbox`), drained
//!   by that client's writer thread, so a client that stops reading cannot stall
//!   the daemon: when its outbox is full it is disconnected; its library
//!   reconnects and re-registers.
//! * To peers: `replicate` sends the operations of a local change to every
//!   live peer over its link (`crate::peers`) and waits until each has applied
//!   it, or names those that did not answer within the apply timeout. Peers'
//!   operations are merged by `TagTable::apply_remote`, whose rules make the
//!   outcome independent of arrival order.
//! * Locally: `effects` creates the shared-memory ring of a tag first heard
//!   of from a peer, and frees the ring of a destroyed tag.

use std::sync::mpsc::TrySendError;
use std::time::Instant;

use tagwire_proto::{TableEvent, TableOp, Update};
use tagwire_wire::control::Message;
use tagwire_wire::peer::PeerMessage;

use crate::{local, lock, Shared, State};

/// Queues `updates` for every client (never blocks).
pub(crate) fn broadcast(state: &State, updates: &[Update]) {
    for u in updates {
        let bytes = Message::Update(u.clone()).encode();
        for (id, out) in &state.clients {
            match out.tx.try_send((bytes.clone(), None)) {
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
                if st.rings.contains_key(tag) {
                    continue;
                }
                let default = shared.config.default_ring;
                let ring = st.table.entry_by_id(*tag).map_or(default, |e| e.ring);
                // The creator's shape, unless it exceeds this daemon's limits.
                let made = local::create_ring(name, ring).or_else(|_| {
                    tracing::warn!(tag = %name, slots = ring.slots, slot_payload = ring.slot_payload,
                        "a peer's ring shape is too large here; using the default");
                    local::create_ring(name, default)
                });
                match made {
                    Ok(r) => {
                        st.rings.insert(*tag, r);
                        tracing::info!(tag = %name, "tag created by a peer");
                    }
                    Err(_) => tracing::warn!(tag = %name, "cannot create the ring of a peer's tag"),
                }
            }
            TableEvent::TagDestroyed { tag, .. } => {
                st.rings.remove(tag);
                st.blobs.remove(tag);
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

/// Sends `ops` to every live peer and waits until all applied them. On timeout,
/// returns a message naming the peers that did not confirm.
pub(crate) fn replicate(shared: &Shared, ops: Vec<TableOp>) -> Result<(), String> {
    let Some(net) = &shared.config.net else {
        return Ok(());
    };
    if ops.is_empty() {
        return Ok(());
    }
    let links = shared.lock().peers.up_links();
    if links.is_empty() {
        return Ok(());
    }
    let mut ids = Vec::with_capacity(ops.len());
    for op in ops {
        let id = shared
            .acks
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let waiting: std::collections::HashSet<_> = links.iter().filter_map(|l| l.peer()).collect();
        lock(&shared.acks.pending).insert(id, waiting);
        ids.push(id);
        let msg = PeerMessage::Op { id, op };
        for l in &links {
            if l.send(&msg).is_err() {
                // The link's thread notices, declares the peer gone and
                // releases our wait for it.
                l.kill();
            }
        }
    }
    let deadline = Instant::now() + net.apply_timeout;
    let mut pending = lock(&shared.acks.pending);
    loop {
        let missing: std::collections::BTreeSet<_> = ids
            .iter()
            .filter_map(|id| pending.get(id))
            .flatten()
            .copied()
            .collect();
        let now = Instant::now();
        if missing.is_empty() || now >= deadline {
            for id in &ids {
                pending.remove(id);
            }
            if missing.is_empty() {
                return Ok(());
            }
            drop(pending);
            let st = shared.lock();
            let names: Vec<String> = missing
                .iter()
                .map(|n| match st.peers.peers.get(n) {
                    Some(p) if p.name != n.to_string() => format!("{n} ({})", p.name),
                    _ => n.to_string(),
                })
                .collect();
            return Err(format!(
                "the daemons on {} did not apply the change within {:?}",
                names.join(", "),
                net.apply_timeout
            ));
        }
        pending = shared
            .acks
            .changed
            .wait_timeout(pending, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}
