//! Replication acknowledgements: which peers have yet to apply which op.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use tagwire_wire::NodeAddr;

use super::{Event, OpId};

/// Ops waiting for their `Applied`s, by id (ids grow, so the map is also in
/// the order the ops were sent).
#[derive(Debug, Default)]
pub(super) struct Acks {
    pending: BTreeMap<OpId, Pending>,
}

#[derive(Debug)]
struct Pending {
    waiting: BTreeSet<NodeAddr>,
    deadline: Instant,
}

impl Acks {
    /// Starts waiting for `peers` (never empty: an op nobody must apply is
    /// not tracked) until `deadline`.
    pub(super) fn begin(&mut self, id: OpId, peers: BTreeSet<NodeAddr>, deadline: Instant) {
        self.pending.insert(
            id,
            Pending {
                waiting: peers,
                deadline,
            },
        );
    }

    /// `node` applied `id`. `false` when no such wait exists (late, or a
    /// peer acknowledging what it was never sent).
    pub(super) fn applied(
        &mut self,
        id: OpId,
        node: NodeAddr,
        events: &mut VecDeque<Event>,
    ) -> bool {
        let Some(p) = self.pending.get_mut(&id) else {
            return false;
        };
        if !p.waiting.remove(&node) {
            return false;
        }
        if p.waiting.is_empty() {
            self.pending.remove(&id);
            events.push_back(Event::Replicated { id });
        }
        true
    }

    /// `node` is gone: nothing waits for it any more.
    pub(super) fn gone(&mut self, node: NodeAddr, events: &mut VecDeque<Event>) {
        let mut done = Vec::new();
        for (id, p) in &mut self.pending {
            if p.waiting.remove(&node) && p.waiting.is_empty() {
                done.push(*id);
            }
        }
        for id in done {
            self.pending.remove(&id);
            events.push_back(Event::Replicated { id });
        }
    }

    /// Expires every wait whose deadline has come, naming who did not answer.
    pub(super) fn expire(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        let expired: Vec<OpId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(p) = self.pending.remove(&id) {
                events.push_back(Event::ReplicationTimedOut {
                    id,
                    missing: p.waiting.into_iter().collect(),
                });
            }
        }
    }

    /// The earliest deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// Ops still waiting.
    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }
}
