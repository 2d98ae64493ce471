//! A client's local copy of the tag table.

use std::collections::BTreeMap;

use tagwire_wire::control::{TableEvent, TagSummary, Update};
use tagwire_wire::{Domain, Member, TagId, TagName};

/// One tag as a client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaEntry {
    /// Its name.
    pub name: TagName,
    /// Its domain.
    pub domain: Domain,
    /// Its senders.
    pub senders: Vec<Member>,
    /// Its receivers.
    pub receivers: Vec<Member>,
}

/// A client's copy of the tag table. Every operation is idempotent, so replaying
/// an update that a snapshot already contains changes nothing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replica {
    version: u64,
    tags: BTreeMap<TagId, ReplicaEntry>,
}

impl Replica {
    /// An empty replica.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the contents with a snapshot taken at `version`.
    pub fn reset(&mut self, version: u64, snapshot: Vec<TagSummary>) {
        self.version = version;
        self.tags = snapshot
            .into_iter()
            .map(|s| {
                (
                    s.tag,
                    ReplicaEntry {
                        name: s.name,
                        domain: s.domain,
                        senders: s.senders,
                        receivers: s.receivers,
                    },
                )
            })
            .collect();
    }

    /// Highest version applied.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Applies one update. Returns false when the update is older than the
    /// replica (already reflected) and was ignored.
    pub fn apply(&mut self, update: &Update) -> bool {
        if update.version <= self.version {
            return false;
        }
        self.version = update.version;
        match &update.event {
            TableEvent::TagCreated { tag, name, domain } => {
                self.tags.entry(*tag).or_insert_with(|| ReplicaEntry {
                    name: name.clone(),
                    domain: *domain,
                    senders: Vec::new(),
                    receivers: Vec::new(),
                });
            }
            TableEvent::TagDestroyed { tag, .. } => {
                self.tags.remove(tag);
            }
            TableEvent::SenderJoined { tag, member } => {
                if let Some(e) = self.tags.get_mut(tag) {
                    e.senders.push(*member);
                }
            }
            TableEvent::SenderLeft { tag, member } => {
                if let Some(e) = self.tags.get_mut(tag) {
                    remove_one(&mut e.senders, member);
                }
            }
            TableEvent::ReceiverJoined { tag, member } => {
                if let Some(e) = self.tags.get_mut(tag) {
                    e.receivers.push(*member);
                }
            }
            TableEvent::ReceiverLeft { tag, member } => {
                if let Some(e) = self.tags.get_mut(tag) {
                    remove_one(&mut e.receivers, member);
                }
            }
            // (A client's replica keeps who is on a tag, not what each
            // receiver asks of its connections.)
            TableEvent::ReceiverQos { .. } => {}
        }
        true
    }

    /// A tag by id.
    pub fn get(&self, tag: TagId) -> Option<&ReplicaEntry> {
        self.tags.get(&tag)
    }

    /// A tag by name.
    pub fn find(&self, name: &TagName) -> Option<(TagId, &ReplicaEntry)> {
        self.tags
            .iter()
            .find(|(_, e)| &e.name == name)
            .map(|(id, e)| (*id, e))
    }

    /// Every tag.
    pub fn iter(&self) -> impl Iterator<Item = (TagId, &ReplicaEntry)> {
        self.tags.iter().map(|(id, e)| (*id, e))
    }
}

fn remove_one(v: &mut Vec<Member>, m: &Member) {
    if let Some(i) = v.iter().position(|x| x == m) {
        v.remove(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientId, TagTable};
    use proptest::prelude::*;
    use tagwire_wire::control::RingParams;
    use tagwire_wire::{NodeAddr, Pid, SenderInfo};

    #[derive(Debug, Clone)]
    enum Op {
        Create(u8),
        Destroy(u8),
        Send(u8, u8),
        Unsend(u8, u8),
        Sub(u8, u8),
        Unsub(u8, u8),
        Drop(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..4u8).prop_map(Op::Create),
            (0..4u8).prop_map(Op::Destroy),
            (0..4u8, 0..3u8).prop_map(|(t, c)| Op::Send(t, c)),
            (0..4u8, 0..3u8).prop_map(|(t, c)| Op::Unsend(t, c)),
            (0..4u8, 0..3u8).prop_map(|(t, c)| Op::Sub(t, c)),
            (0..4u8, 0..3u8).prop_map(|(t, c)| Op::Unsub(t, c)),
            (0..3u8).prop_map(Op::Drop),
        ]
    }

    fn run(table: &mut TagTable, op: &Op) -> Vec<Update> {
        let name = |t: u8| TagName::new(&format!("/t{t}")).unwrap();
        let id = |table: &TagTable, t: u8| table.entry(&name(t)).map(|e| e.id);
        let member = |c: u8| Member {
            who: SenderInfo {
                pid: Pid(u32::from(c)),
                node: NodeAddr::LOCALHOST,
            },
            since_unix_ns: 7,
        };
        match *op {
            Op::Create(t) => {
                table
                    .create(name(t), Domain::Global, RingParams::default())
                    .1
                    .updates
            }
            Op::Destroy(t) => table
                .destroy(&name(t))
                .map(|(_, c)| c.updates)
                .unwrap_or_default(),
            Op::Send(t, c) => id(table, t)
                .and_then(|i| table.add_sender(i, ClientId(c.into()), member(c)).ok())
                .map(|c| c.updates)
                .unwrap_or_default(),
            Op::Unsend(t, c) => id(table, t)
                .and_then(|i| table.remove_sender(i, ClientId(c.into())).ok())
                .map(|c| c.updates)
                .unwrap_or_default(),
            Op::Sub(t, c) => id(table, t)
                .and_then(|i| table.add_receiver(i, ClientId(c.into()), member(c)).ok())
                .map(|c| c.updates)
                .unwrap_or_default(),
            Op::Unsub(t, c) => id(table, t)
                .and_then(|i| table.remove_receiver(i, ClientId(c.into())).ok())
                .map(|c| c.updates)
                .unwrap_or_default(),
            Op::Drop(c) => table.remove_client(ClientId(c.into())).updates,
        }
    }

    fn sorted(r: &Replica) -> Vec<(TagId, ReplicaEntry)> {
        r.iter()
            .map(|(id, e)| {
                let mut e = e.clone();
                e.senders.sort_by_key(|m| m.who.pid);
                e.receivers.sort_by_key(|m| m.who.pid);
                (id, e)
            })
            .collect()
    }

    proptest! {
        /// A replica that takes a snapshot part-way through and then receives
        /// every update (including ones the snapshot already holds) ends equal
        /// to the authoritative table.
        #[test]
        fn replicas_converge_on_the_table(ops in proptest::collection::vec(op(), 0..60), split in 0usize..60) {
            let mut table = TagTable::new();
            let mut updates = Vec::new();
            let mut snapshot = None;
            for (i, o) in ops.iter().enumerate() {
                if i == split.min(ops.len()) {
                    snapshot = Some((table.version(), table.summaries(), updates.len()));
                }
                updates.extend(run(&mut table, o));
            }
            let (v, snap, from) = snapshot.unwrap_or((table.version(), table.summaries(), updates.len()));
            let mut late = Replica::new();
            late.reset(v, snap);
            // Replay from a little before the snapshot: duplicates must be ignored.
            for u in &updates[from.saturating_sub(3)..] {
                late.apply(u);
            }
            let mut full = Replica::new();
            for u in &updates {
                full.apply(u);
            }
            let mut truth = Replica::new();
            truth.reset(table.version(), table.summaries());
            prop_assert_eq!(sorted(&late), sorted(&truth));
            prop_assert_eq!(sorted(&full), sorted(&truth));
        }
    }
}
