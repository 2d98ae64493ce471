//! Changing the packet class or thread policy of subscriptions that
//! another node holds (`tagwire qos TAG --subscriber PID@NODE`, from any
//! node, as the channel-prioritisation paper's admin command does).
//!
//! Only the node that holds a subscription restates it (its right's
//! `Join` is that node's to issue: a restatement from anyone else would be
//! undone by the holder's next sync). So the asked daemon checks its
//! caller (root, the daemon's user, the tag's owner or whoever the policy
//! lets destroy the tag; a real-time policy only for a caller that may run
//! at it: `local::channels`), then asks the holding node with a
//! `PeerMessage::SetQos`. That node trusts its peer as it trusts the
//! peer's table operations (authenticated with the domain key when there
//! is one), restates the chosen subscriptions, and answers with
//! `PeerMessage::QosSet` once every live peer applied the restatement: so
//! when the admin command returns, every sending node already carries the
//! new class.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use tagwire_proto::membership::{LinkId, OpId};
use tagwire_wire::control::ErrorCode;
use tagwire_wire::{Member, NodeAddr, QosChange, TagName};

use crate::restate::{restate, Refusal};
use crate::{lock, peers, Shared, State};

/// What the holding node answered: the receivers it changed, or why not.
type Outcome = Result<Vec<Member>, Refusal>;

/// Changes asked of other nodes, waiting for their answers.
#[derive(Debug, Default)]
pub(crate) struct QosAsks {
    /// By request id: the node asked, and its answer once it came.
    pending: Mutex<HashMap<u64, (NodeAddr, Option<Outcome>)>>,
    changed: Condvar,
    next: AtomicU64,
}

impl QosAsks {
    /// `node` answered request `id`.
    pub(crate) fn answered(&self, id: u64, node: NodeAddr, outcome: Outcome) {
        let mut p = lock(&self.pending);
        if let Some((asked, slot)) = p.get_mut(&id) {
            if *asked == node {
                *slot = Some(outcome);
            }
        }
        self.changed.notify_all();
    }

    /// `node` is down: what waits for it will not be answered.
    pub(crate) fn gone(&self, node: NodeAddr) {
        let mut p = lock(&self.pending);
        for (asked, slot) in p.values_mut() {
            if *asked == node && slot.is_none() {
                *slot = Some(Err((
                    ErrorCode::PeersUnresponsive,
                    "the node went down before it answered; ask again once `tagwire nodes` \
                     shows it up"
                        .to_owned(),
                )));
            }
        }
        self.changed.notify_all();
    }
}

/// Asks `node` to give the subscriptions to `name` it holds that `change`
/// chooses their new class or policy, and waits for its answer (bounded:
/// the node's own wait for its peers, the apply timeout, and a second).
pub(crate) fn ask(shared: &Shared, node: NodeAddr, name: &TagName, change: QosChange) -> Outcome {
    let unreachable = |why: String| Err((ErrorCode::PeersUnresponsive, why));
    let Some(net) = shared.config.net.as_ref() else {
        return Err((
            ErrorCode::BadRequest,
            format!("this daemon runs alone (no --node): it cannot reach node {node}"),
        ));
    };
    let Some(me) = shared.this.get().and_then(std::sync::Weak::upgrade) else {
        return unreachable("this daemon is stopping".to_owned());
    };
    let asks = &shared.qos_asks;
    let id = asks.next.fetch_add(1, Ordering::Relaxed);
    {
        let mut st = shared.lock();
        // Registered before the request leaves, so no answer comes first.
        lock(&asks.pending).insert(id, (node, None));
        if !st.peers.set_qos(node, id, name, change) {
            lock(&asks.pending).remove(&id);
            return unreachable(format!(
                "node {node} is not up (see `tagwire nodes`): its subscriptions are changed \
                 through its own daemon"
            ));
        }
        peers::flush(&me, &mut st);
    }
    let wait = net.apply_timeout * 2 + Duration::from_secs(1);
    let deadline = Instant::now() + wait;
    let mut p = lock(&asks.pending);
    loop {
        if p.get(&id).is_some_and(|(_, o)| o.is_some()) {
            if let Some((_, Some(outcome))) = p.remove(&id) {
                return outcome;
            }
        }
        let now = Instant::now();
        if now >= deadline || shared.is_stopping() {
            p.remove(&id);
            return unreachable(format!("node {node} did not answer within {wait:?}"));
        }
        p = asks
            .changed
            .wait_timeout(p, deadline - now)
            .map_or_else(|e| e.into_inner().0, |(g, _)| g);
    }
}

/// A peer's change this node made, whose answer waits until every live
/// peer applied the restated rights.
#[derive(Debug)]
pub(crate) struct Answering {
    link: LinkId,
    id: u64,
    waiting: BTreeSet<OpId>,
    changed: Vec<Member>,
    missing: BTreeSet<NodeAddr>,
}

/// Serves a peer's `SetQos` (on the update manager's thread, under the
/// state lock): restates the chosen subscriptions this node holds, starts
/// replicating the restatement, and answers when it is applied (at once
/// when it was refused, or nothing needs replicating).
pub(crate) fn serve(
    shared: &Shared,
    st: &mut State,
    (link, id): (LinkId, u64),
    name: &TagName,
    change: QosChange,
) {
    // The asking node checked its caller (the module docs).
    match restate(shared, st, name, change, |_| true) {
        Err(refused) => st.peers.answer_set_qos(link, id, Err(refused)),
        Ok((changed, ops)) => {
            let now = Instant::now();
            let waiting: BTreeSet<OpId> = ops
                .into_iter()
                .filter_map(|op| st.peers.begin_replication(now, op))
                .collect();
            if waiting.is_empty() {
                st.peers.answer_set_qos(link, id, Ok(changed));
            } else {
                st.answering.push(Answering {
                    link,
                    id,
                    waiting,
                    changed,
                    missing: BTreeSet::new(),
                });
            }
        }
    }
}

/// Op `op` was applied by every live peer but `missing`: the answers that
/// waited only for it go out.
pub(crate) fn replicated(st: &mut State, op: OpId, missing: &[NodeAddr]) {
    let mut done = Vec::new();
    st.answering.retain_mut(|a| {
        if a.waiting.remove(&op) {
            a.missing.extend(missing.iter().copied());
        }
        let finished = a.waiting.is_empty();
        if finished {
            done.push((
                a.link,
                a.id,
                std::mem::take(&mut a.changed),
                std::mem::take(&mut a.missing),
            ));
        }
        !finished
    });
    for (link, id, changed, missing) in done {
        let outcome = match missing.is_empty() {
            true => Ok(changed),
            false => {
                let nodes: Vec<String> = missing.iter().map(ToString::to_string).collect();
                Err((
                    ErrorCode::PeersUnresponsive,
                    format!(
                        "changed {} subscriptions, but nodes {} did not confirm it",
                        changed.len(),
                        nodes.join(", ")
                    ),
                ))
            }
        };
        st.peers.answer_set_qos(link, id, outcome);
    }
}
