//! The daemon's authoritative tag table.

use std::collections::{BTreeMap, HashMap, HashSet};

use thiserror::Error;

use tagwire_wire::control::{RingParams, TableEvent, TagSummary, Update};
use tagwire_wire::peer::{MemberKey, Role, TableOp, Version};
use tagwire_wire::{ChannelQos, Domain, Member, NodeAddr, Priority, TagId, TagName};

/// A daemon-local id for one client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

/// Why a table operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TableError {
    /// No such tag.
    #[error("unknown tag {0}")]
    UnknownTag(String),
    /// The client holds no send access on the tag.
    #[error("client holds no send access on tag {0}")]
    NoSendAccess(String),
    /// The client has no subscription on the tag.
    #[error("client is not subscribed to tag {0}")]
    NotSubscribed(String),
}

/// Who holds a right, as this daemon sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// One of this daemon's clients.
    Local(ClientId),
    /// A process on another node (its daemon told us).
    Remote,
}

/// One send access or subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Right {
    /// Its system-wide identity.
    pub key: MemberKey,
    /// Who holds it here.
    pub holder: Holder,
    /// The holder's process, node and join time.
    pub member: Member,
    /// What a receiver asks of the connections that feed it.
    pub qos: ChannelQos,
    /// When it was granted.
    pub version: Version,
}

/// One tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its id (this daemon's; other daemons number their tags themselves).
    pub id: TagId,
    /// Its name.
    pub name: TagName,
    /// Its domain.
    pub domain: Domain,
    /// Ring shape chosen at creation.
    pub ring: RingParams,
    /// The latest operation that asserted the tag exists.
    pub created: Version,
    senders: Vec<Right>,
    receivers: Vec<Right>,
}

impl Entry {
    /// Current senders.
    pub fn senders(&self) -> impl Iterator<Item = &Member> {
        self.senders.iter().map(|r| &r.member)
    }

    /// Current receivers.
    pub fn receivers(&self) -> impl Iterator<Item = &Member> {
        self.receivers.iter().map(|r| &r.member)
    }

    /// Current rights of one role.
    pub fn rights(&self, role: Role) -> &[Right] {
        match role {
            Role::Sender => &self.senders,
            Role::Receiver => &self.receivers,
        }
    }

    fn list(&mut self, role: Role) -> &mut Vec<Right> {
        match role {
            Role::Sender => &mut self.senders,
            Role::Receiver => &mut self.receivers,
        }
    }

    fn summary(&self) -> TagSummary {
        TagSummary {
            tag: self.id,
            name: self.name.clone(),
            domain: self.domain,
            senders: self.senders().copied().collect(),
            receivers: self.receivers().copied().collect(),
        }
    }
}

/// What one change did: the updates for local clients, and the operations to
/// send to peer daemons (none for a `Local` tag, or when nothing changed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// For this daemon's clients, in version order.
    pub updates: Vec<Update>,
    /// For the peer daemons.
    pub ops: Vec<TableOp>,
}

fn joined(role: Role, tag: TagId, member: Member) -> TableEvent {
    match role {
        Role::Sender => TableEvent::SenderJoined { tag, member },
        Role::Receiver => TableEvent::ReceiverJoined { tag, member },
    }
}

fn left(role: Role, tag: TagId, member: Member) -> TableEvent {
    match role {
        Role::Sender => TableEvent::SenderLeft { tag, member },
        Role::Receiver => TableEvent::ReceiverLeft { tag, member },
    }
}

fn missing(role: Role, name: String) -> TableError {
    match role {
        Role::Sender => TableError::NoSendAccess(name),
        Role::Receiver => TableError::NotSubscribed(name),
    }
}

/// One daemon's copy of the global table. See the crate docs.
#[derive(Debug, Default)]
pub struct TagTable {
    node: NodeAddr,
    clock: u64,
    next_key: u64,
    version: u64,
    next_id: u32,
    remote_ring: RingParams,
    tags: BTreeMap<TagName, Entry>,
    names: HashMap<TagId, TagName>,
    /// Per name, the latest destroy seen: rights and creations older than it
    /// are dead wherever they arrive from.
    graves: HashMap<TagName, Version>,
    /// Peers' operations refused for a version too far ahead.
    refused_ahead: u64,
}

/// How far ahead of this table's Lamport clock a peer's version may be
/// (2^42, about 51 days of the microseconds a daemon's clock starts at):
/// further is a forgery or a broken clock, and accepting it would push
/// the clock towards wrapping and make the name undestroyable for ever
/// (a `TagDown` at `u64::MAX` would outrank every later creation).
pub const MAX_AHEAD: u64 = 1 << 42;

impl TagTable {
    /// An empty table at version 0, for a daemon on the loopback node.
    pub fn new() -> Self {
        Self::for_node(NodeAddr::LOCALHOST, RingParams::default(), 0)
    }

    /// An empty table for the daemon of `node`; tags that other daemons create
    /// get rings of shape `remote_ring` here. The Lamport clock and the right
    /// counter start at `start`: a daemon passes the wall clock in µs, so that
    /// after a restart its changes and rights are newer than its previous
    /// life's (which peers may still remember).
    pub fn for_node(node: NodeAddr, remote_ring: RingParams, start: u64) -> Self {
        Self {
            node,
            remote_ring,
            clock: start,
            next_key: start,
            ..Self::default()
        }
    }

    /// Peers' operations refused so far because their version was more
    /// than [`MAX_AHEAD`] ahead of this table's clock.
    pub fn refused_ahead(&self) -> u64 {
        self.refused_ahead
    }

    /// Current version (number of changes applied).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Number of tags.
    pub fn len(&self) -> usize {
        self.tags.len()
    }

    /// True when there are no tags.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Looks a tag up by name.
    pub fn entry(&self, name: &TagName) -> Option<&Entry> {
        self.tags.get(name)
    }

    /// Looks a tag up by id.
    pub fn entry_by_id(&self, id: TagId) -> Option<&Entry> {
        self.names.get(&id).and_then(|n| self.tags.get(n))
    }

    /// Every tag.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.tags.values()
    }

    /// Creates a tag. Creating an existing tag is not an error: it returns the
    /// existing id and no change.
    pub fn create(&mut self, name: TagName, domain: Domain, ring: RingParams) -> (TagId, Change) {
        if let Some(e) = self.tags.get(&name) {
            return (e.id, Change::default());
        }
        let version = self.tick();
        let mut change = Change::default();
        let id = self.raise(&name, domain, ring, version, &mut change.updates);
        if domain == Domain::Global {
            change.ops.push(TableOp::TagUp {
                name,
                domain,
                ring,
                version,
            });
        }
        (id, change)
    }

    /// Destroys a tag; returns its last state and the change.
    pub fn destroy(&mut self, name: &TagName) -> Result<(Entry, Change), TableError> {
        let last = self
            .tags
            .get(name)
            .cloned()
            .ok_or_else(|| TableError::UnknownTag(name.to_string()))?;
        let version = self.tick();
        let op = TableOp::TagDown {
            name: name.clone(),
            version,
        };
        let mut change = Change::default();
        self.apply_op(&op, Holder::Remote, &mut change.updates);
        if last.domain == Domain::Global {
            change.ops.push(op);
        }
        Ok((last, change))
    }

    /// Records that `client` holds send access (a client may hold it several times,
    /// e.g. from two threads; each grant needs its own release).
    pub fn add_sender(
        &mut self,
        tag: TagId,
        client: ClientId,
        member: Member,
    ) -> Result<Change, TableError> {
        self.add_sender_with(tag, client, member, ChannelQos::default())
    }

    /// [`TagTable::add_sender`] with what the publisher asks of the
    /// connections it feeds (its packet class and thread policy).
    pub fn add_sender_with(
        &mut self,
        tag: TagId,
        client: ClientId,
        member: Member,
        qos: ChannelQos,
    ) -> Result<Change, TableError> {
        self.grant(Role::Sender, tag, client, member, qos)
    }

    /// Releases one send access held by `client`.
    pub fn remove_sender(&mut self, tag: TagId, client: ClientId) -> Result<Change, TableError> {
        self.release(Role::Sender, tag, client)
    }

    /// Records a subscription of `client`.
    pub fn add_receiver(
        &mut self,
        tag: TagId,
        client: ClientId,
        member: Member,
    ) -> Result<Change, TableError> {
        self.add_receiver_with(tag, client, member, ChannelQos::default())
    }

    /// Subscribes `client`, asking `qos` of the connections that feed it.
    pub fn add_receiver_with(
        &mut self,
        tag: TagId,
        client: ClientId,
        member: Member,
        qos: ChannelQos,
    ) -> Result<Change, TableError> {
        self.grant(Role::Receiver, tag, client, member, qos)
    }

    /// Gives this node's subscriptions to `tag` that `pick` chooses the
    /// packet class `priority` ([`TagTable::set_receiver_qos`]).
    pub fn set_receiver_priority(
        &mut self,
        tag: TagId,
        pick: impl Fn(&Right) -> bool,
        priority: Priority,
    ) -> Result<(Vec<Member>, Change), TableError> {
        self.set_receiver_qos(tag, pick, |q| ChannelQos { priority, ..q })
    }

    /// Gives this node's subscriptions to `tag` that `pick` chooses the
    /// QoS `new_qos` makes of theirs (a packet class, a thread policy),
    /// each by a newer `Join` of the same right for the peers (last writer
    /// wins; this node holds the rights, so its statement survives syncs).
    /// Returns the receivers whose QoS changed (none when they had it
    /// already); `NotSubscribed` when this node holds no subscription
    /// `pick` chooses.
    pub fn set_receiver_qos(
        &mut self,
        tag: TagId,
        pick: impl Fn(&Right) -> bool,
        new_qos: impl Fn(ChannelQos) -> ChannelQos,
    ) -> Result<(Vec<Member>, Change), TableError> {
        self.set_qos(Role::Receiver, tag, pick, new_qos)
    }

    /// [`TagTable::set_receiver_qos`] for the rights of either role: a
    /// publisher's send right carries a class and a policy too (the least
    /// its node sends the tag at), restated alike (`NoSendAccess` when this
    /// node holds no send right `pick` chooses). A sender's restatement
    /// raises no event: only its own node's routes depend on it.
    pub fn set_qos(
        &mut self,
        role: Role,
        tag: TagId,
        pick: impl Fn(&Right) -> bool,
        new_qos: impl Fn(ChannelQos) -> ChannelQos,
    ) -> Result<(Vec<Member>, Change), TableError> {
        let e = self.entry_mut(tag)?;
        let chosen: Vec<Right> = e
            .rights(role)
            .iter()
            .filter(|r| matches!(r.holder, Holder::Local(_)) && pick(r))
            .copied()
            .collect();
        if chosen.is_empty() {
            let name = e.name.to_string();
            return Err(match role {
                Role::Receiver => TableError::NotSubscribed(name),
                Role::Sender => TableError::NoSendAccess(name),
            });
        }
        let (name, domain) = (e.name.clone(), e.domain);
        let mut change = Change::default();
        let mut members = Vec::new();
        for (r, qos) in chosen
            .into_iter()
            .map(|r| (r, new_qos(r.qos)))
            .filter(|(r, qos)| *qos != r.qos)
        {
            let version = self.tick();
            let op = TableOp::Join {
                name: name.clone(),
                domain,
                role,
                key: r.key,
                member: r.member,
                qos,
                version,
            };
            self.apply_op(&op, r.holder, &mut change.updates);
            if domain == Domain::Global {
                change.ops.push(op);
            }
            members.push(r.member);
        }
        Ok((members, change))
    }

    /// Cancels one subscription of `client`.
    pub fn remove_receiver(&mut self, tag: TagId, client: ClientId) -> Result<Change, TableError> {
        self.release(Role::Receiver, tag, client)
    }

    /// True when `client` holds send access on `tag`.
    pub fn is_sender(&self, tag: TagId, client: ClientId) -> bool {
        self.held(Role::Sender, tag, client)
    }

    /// True when `client` is subscribed to `tag`.
    pub fn is_receiver(&self, tag: TagId, client: ClientId) -> bool {
        self.held(Role::Receiver, tag, client)
    }

    /// Drops every right `client` held (it disconnected or died).
    pub fn remove_client(&mut self, client: ClientId) -> Change {
        let mut held = Vec::new();
        for e in self.tags.values() {
            for role in [Role::Sender, Role::Receiver] {
                for r in e.rights(role) {
                    if r.holder == Holder::Local(client) {
                        held.push((e.id, role));
                    }
                }
            }
        }
        let mut change = Change::default();
        for (tag, role) in held {
            if let Ok(c) = self.release(role, tag, client) {
                change.updates.extend(c.updates);
                change.ops.extend(c.ops);
            }
        }
        change
    }

    /// Applies an operation from a peer daemon. Operations commute: any order of
    /// the same set gives the same table (rights of one node arrive in the order
    /// that node made them, which is all a Leave needs).
    pub fn apply_remote(&mut self, op: &TableOp) -> Vec<Update> {
        if op.version().lamport > self.clock.saturating_add(MAX_AHEAD) {
            self.refused_ahead += 1;
            return Vec::new();
        }
        self.clock = self.clock.max(op.version().lamport);
        let mut updates = Vec::new();
        self.apply_op(op, Holder::Remote, &mut updates);
        updates
    }

    /// Applies a peer's full state ([`TagTable::sync_ops`] on its side): its
    /// rights replace whatever we held for that node before.
    pub fn apply_sync(&mut self, from: NodeAddr, ops: &[TableOp]) -> Vec<Update> {
        let mut updates = Vec::new();
        let mut keep = HashSet::new();
        for op in ops {
            if let TableOp::Join { key, .. } = op {
                if key.node == from {
                    keep.insert(*key);
                }
            }
            updates.extend(self.apply_remote(op));
        }
        updates.extend(self.retain_rights(|r| r.key.node != from || keep.contains(&r.key)));
        updates
    }

    /// Removes every right granted by `node`'s daemon (it was declared dead).
    pub fn drop_node(&mut self, node: NodeAddr) -> Vec<Update> {
        self.retain_rights(|r| r.key.node != node || r.holder != Holder::Remote)
    }

    /// What a peer needs to catch up with us: every global tag's creation, every
    /// destroy we remember, and every right our own clients hold.
    pub fn sync_ops(&self) -> Vec<TableOp> {
        let mut ops = Vec::new();
        for e in self.tags.values().filter(|e| e.domain == Domain::Global) {
            ops.push(TableOp::TagUp {
                name: e.name.clone(),
                domain: e.domain,
                ring: e.ring,
                version: e.created,
            });
            for role in [Role::Sender, Role::Receiver] {
                for r in e.rights(role) {
                    if let Holder::Local(_) = r.holder {
                        ops.push(join_op(e, role, r));
                    }
                }
            }
        }
        // In name order: the same table makes the same bytes (a simulated
        // run replays exactly).
        let mut graves: Vec<_> = self.graves.iter().collect();
        graves.sort_by(|a, b| a.0.cmp(b.0));
        for (name, version) in graves {
            ops.push(TableOp::TagDown {
                name: name.clone(),
                version: *version,
            });
        }
        ops
    }

    /// Every tag, for listings and client snapshots.
    pub fn summaries(&self) -> Vec<TagSummary> {
        self.tags.values().map(Entry::summary).collect()
    }

    fn held(&self, role: Role, tag: TagId, client: ClientId) -> bool {
        self.entry_by_id(tag).is_some_and(|e| {
            e.rights(role)
                .iter()
                .any(|r| r.holder == Holder::Local(client))
        })
    }

    fn grant(
        &mut self,
        role: Role,
        tag: TagId,
        client: ClientId,
        member: Member,
        qos: ChannelQos,
    ) -> Result<Change, TableError> {
        let (name, domain) = {
            let e = self.entry_mut(tag)?;
            (e.name.clone(), e.domain)
        };
        self.next_key += 1;
        let key = MemberKey {
            node: self.node,
            id: self.next_key,
        };
        let version = self.tick();
        let op = TableOp::Join {
            name,
            domain,
            role,
            key,
            member,
            qos,
            version,
        };
        let mut change = Change::default();
        self.apply_op(&op, Holder::Local(client), &mut change.updates);
        if domain == Domain::Global {
            change.ops.push(op);
        }
        Ok(change)
    }

    fn release(&mut self, role: Role, tag: TagId, client: ClientId) -> Result<Change, TableError> {
        let e = self.entry_mut(tag)?;
        let key = e
            .rights(role)
            .iter()
            .rev()
            .find(|r| r.holder == Holder::Local(client))
            .map(|r| r.key)
            .ok_or_else(|| missing(role, e.name.to_string()))?;
        let (name, domain) = (e.name.clone(), e.domain);
        let version = self.tick();
        let op = TableOp::Leave {
            name,
            role,
            key,
            version,
        };
        let mut change = Change::default();
        self.apply_op(&op, Holder::Remote, &mut change.updates);
        if domain == Domain::Global {
            change.ops.push(op);
        }
        Ok(change)
    }

    /// The merge rules (the same for local and remote operations):
    /// * a tag exists while its latest existence assertion (a creation or a
    ///   grant) is newer than its latest destroy;
    /// * a destroy removes every right granted before it;
    /// * anything older than the latest destroy of its tag is ignored.
    fn apply_op(&mut self, op: &TableOp, holder: Holder, out: &mut Vec<Update>) {
        let grave = self.graves.get(op.name()).copied();
        let dead = |v: Version| grave.is_some_and(|g| v <= g);
        match op {
            TableOp::TagUp {
                name,
                domain,
                ring,
                version,
            } => {
                if !dead(*version) {
                    // The creator's shape; the daemon falls back to its own
                    // default if it cannot make a ring that large.
                    self.raise(name, *domain, *ring, *version, out);
                }
            }
            TableOp::TagDown { name, version } => {
                let g = self.graves.entry(name.clone()).or_default();
                *g = (*g).max(*version);
                let Some(e) = self.tags.get_mut(name) else {
                    return;
                };
                if e.created < *version {
                    let id = e.id;
                    self.tags.remove(name);
                    self.names.remove(&id);
                    let ev = TableEvent::TagDestroyed {
                        tag: id,
                        name: name.clone(),
                    };
                    out.push(self.bump(ev));
                    return;
                }
                let id = e.id;
                let mut gone = Vec::new();
                for role in [Role::Sender, Role::Receiver] {
                    e.list(role).retain(|r| {
                        let keep = r.version > *version;
                        if !keep {
                            gone.push(left(role, id, r.member));
                        }
                        keep
                    });
                }
                for ev in gone {
                    out.push(self.bump(ev));
                }
            }
            TableOp::Join {
                name,
                domain,
                role,
                key,
                member,
                qos,
                version,
            } => {
                if dead(*version) {
                    return;
                }
                let ring = self.remote_ring;
                let id = self.raise(name, *domain, ring, *version, out);
                let Some(e) = self.tags.get_mut(name) else {
                    return;
                };
                if let Some(r) = e.list(*role).iter_mut().find(|r| r.key == *key) {
                    // A newer statement of a right already here restates
                    // its QoS (last writer wins); an older or equal one is
                    // old news.
                    if *version <= r.version {
                        return;
                    }
                    r.version = *version;
                    if r.qos == *qos {
                        return;
                    }
                    r.qos = *qos;
                    // A sender's class and policy matter to its own node's
                    // routes only, which its restatement re-plans.
                    if *role == Role::Sender {
                        return;
                    }
                    let ev = TableEvent::ReceiverQos {
                        tag: id,
                        member: r.member,
                        qos: *qos,
                    };
                    out.push(self.bump(ev));
                    return;
                }
                e.list(*role).push(Right {
                    key: *key,
                    holder,
                    member: *member,
                    qos: *qos,
                    version: *version,
                });
                out.push(self.bump(joined(*role, id, *member)));
            }
            TableOp::Leave {
                name, role, key, ..
            } => {
                let Some(e) = self.tags.get_mut(name) else {
                    return;
                };
                let id = e.id;
                let list = e.list(*role);
                if let Some(i) = list.iter().position(|r| r.key == *key) {
                    let r = list.remove(i);
                    out.push(self.bump(left(*role, id, r.member)));
                }
            }
        }
    }

    /// Makes sure the tag exists (its creation is at least `version`), and
    /// returns its id.
    fn raise(
        &mut self,
        name: &TagName,
        domain: Domain,
        ring: RingParams,
        version: Version,
        out: &mut Vec<Update>,
    ) -> TagId {
        if let Some(e) = self.tags.get_mut(name) {
            e.created = e.created.max(version);
            return e.id;
        }
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let id = TagId(self.next_id);
        self.names.insert(id, name.clone());
        self.tags.insert(
            name.clone(),
            Entry {
                id,
                name: name.clone(),
                domain,
                ring,
                created: version,
                senders: Vec::new(),
                receivers: Vec::new(),
            },
        );
        out.push(self.bump(TableEvent::TagCreated {
            tag: id,
            name: name.clone(),
            domain,
        }));
        id
    }

    fn retain_rights(&mut self, keep: impl Fn(&Right) -> bool) -> Vec<Update> {
        let mut gone = Vec::new();
        for e in self.tags.values_mut() {
            let id = e.id;
            for role in [Role::Sender, Role::Receiver] {
                e.list(role).retain(|r| {
                    let k = keep(r);
                    if !k {
                        gone.push(left(role, id, r.member));
                    }
                    k
                });
            }
        }
        gone.into_iter().map(|ev| self.bump(ev)).collect()
    }

    fn tick(&mut self) -> Version {
        self.clock += 1;
        Version {
            lamport: self.clock,
            node: self.node,
        }
    }

    fn entry_mut(&mut self, tag: TagId) -> Result<&mut Entry, TableError> {
        let name = self
            .names
            .get(&tag)
            .ok_or_else(|| TableError::UnknownTag(format!("#{tag}")))?;
        self.tags
            .get_mut(name)
            .ok_or_else(|| TableError::UnknownTag(format!("#{tag}")))
    }

    fn bump(&mut self, event: TableEvent) -> Update {
        self.version += 1;
        Update {
            version: self.version,
            event,
        }
    }
}

fn join_op(e: &Entry, role: Role, r: &Right) -> TableOp {
    TableOp::Join {
        name: e.name.clone(),
        domain: e.domain,
        role,
        key: r.key,
        member: r.member,
        qos: r.qos,
        version: r.version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwire_wire::{NodeAddr, Pid, SenderInfo};

    fn member(pid: u32) -> Member {
        Member {
            who: SenderInfo {
                pid: Pid(pid),
                node: NodeAddr::LOCALHOST,
            },
            since_unix_ns: u64::from(pid),
        }
    }

    fn name(s: &str) -> TagName {
        TagName::new(s).unwrap()
    }

    #[test]
    fn creating_an_existing_tag_returns_the_same_id_without_an_update() {
        let mut t = TagTable::new();
        let (a, u) = t.create(name("/a"), Domain::Global, RingParams::default());
        assert_eq!(u.updates.len(), 1);
        assert_eq!(u.ops.len(), 1);
        let (b, u2) = t.create(name("/a"), Domain::Local, RingParams::default());
        assert_eq!(a, b);
        assert_eq!(u2, Change::default());
        assert_eq!(t.version(), 1);
    }

    #[test]
    fn rights_are_tracked_per_client_and_released_once_each() {
        let mut t = TagTable::new();
        let (id, _) = t.create(name("/a"), Domain::Global, RingParams::default());
        t.add_sender(id, ClientId(1), member(10)).unwrap();
        t.add_sender(id, ClientId(1), member(10)).unwrap();
        assert!(t.is_sender(id, ClientId(1)));
        assert!(!t.is_sender(id, ClientId(2)));
        t.remove_sender(id, ClientId(1)).unwrap();
        assert!(t.is_sender(id, ClientId(1)));
        t.remove_sender(id, ClientId(1)).unwrap();
        assert_eq!(
            t.remove_sender(id, ClientId(1)),
            Err(TableError::NoSendAccess("/a".into()))
        );
        assert_eq!(
            t.remove_receiver(id, ClientId(1)),
            Err(TableError::NotSubscribed("/a".into()))
        );
        assert!(matches!(
            t.add_receiver(TagId(99), ClientId(1), member(1)),
            Err(TableError::UnknownTag(_))
        ));
    }

    #[test]
    fn a_dead_client_loses_every_right_and_each_loss_is_an_update() {
        let mut t = TagTable::new();
        let (a, _) = t.create(name("/a"), Domain::Global, RingParams::default());
        let (b, _) = t.create(name("/b"), Domain::Global, RingParams::default());
        t.add_sender(a, ClientId(1), member(1)).unwrap();
        t.add_receiver(b, ClientId(1), member(1)).unwrap();
        t.add_receiver(b, ClientId(2), member(2)).unwrap();
        let v = t.version();
        let ups = t.remove_client(ClientId(1)).updates;
        assert_eq!(ups.len(), 2);
        assert_eq!(ups.last().unwrap().version, v + 2);
        assert_eq!(t.entry(&name("/b")).unwrap().receivers().count(), 1);
        assert_eq!(t.entry(&name("/a")).unwrap().senders().count(), 0);
    }

    #[test]
    fn destroy_removes_the_tag_and_its_id() {
        let mut t = TagTable::new();
        let (a, _) = t.create(name("/a"), Domain::Global, RingParams::default());
        let (e, u) = t.destroy(&name("/a")).unwrap();
        assert_eq!(e.id, a);
        assert!(matches!(
            u.updates[0].event,
            TableEvent::TagDestroyed { .. }
        ));
        assert!(t.entry_by_id(a).is_none());
        assert!(t.destroy(&name("/a")).is_err());
        let (a2, _) = t.create(name("/a"), Domain::Global, RingParams::default());
        assert_ne!(a, a2, "ids are not reused, so stale handles cannot alias");
    }

    mod replication {
        use super::*;
        use proptest::prelude::*;
        use std::collections::VecDeque;

        const NODES: usize = 3;

        #[derive(Debug, Clone)]
        enum Act {
            Create(usize, u8),
            Destroy(usize, u8),
            Send(usize, u8, u8),
            Unsend(usize, u8, u8),
            Sub(usize, u8, u8),
            Unsub(usize, u8, u8),
            /// Give a client's subscriptions one of four classes.
            Class(usize, u8, u8, u8),
            Drop(usize, u8),
            /// Deliver the oldest pending op from one node to another.
            Deliver(usize, usize),
        }

        fn act() -> impl Strategy<Value = Act> {
            let n = 0..NODES;
            prop_oneof![
                (n.clone(), 0..3u8).prop_map(|(k, t)| Act::Create(k, t)),
                (n.clone(), 0..3u8).prop_map(|(k, t)| Act::Destroy(k, t)),
                (n.clone(), 0..3u8, 0..2u8).prop_map(|(k, t, c)| Act::Send(k, t, c)),
                (n.clone(), 0..3u8, 0..2u8).prop_map(|(k, t, c)| Act::Unsend(k, t, c)),
                (n.clone(), 0..3u8, 0..2u8).prop_map(|(k, t, c)| Act::Sub(k, t, c)),
                (n.clone(), 0..3u8, 0..2u8).prop_map(|(k, t, c)| Act::Unsub(k, t, c)),
                (n.clone(), 0..3u8, 0..2u8, 0..8u8).prop_map(|(k, t, c, p)| Act::Class(k, t, c, p)),
                (n.clone(), 0..2u8).prop_map(|(k, c)| Act::Drop(k, c)),
                (n.clone(), n.clone()).prop_map(|(a, b)| Act::Deliver(a, b)),
                (n.clone(), n).prop_map(|(a, b)| Act::Deliver(a, b)),
            ]
        }

        fn node(k: usize) -> NodeAddr {
            NodeAddr(std::net::IpAddr::from([10, 0, 0, k as u8 + 1]))
        }

        fn local(t: &mut TagTable, k: usize, a: &Act) -> Vec<TableOp> {
            let who = |c: u8| Member {
                who: SenderInfo {
                    pid: Pid(k as u32 * 10 + u32::from(c)),
                    node: node(k),
                },
                since_unix_ns: 1,
            };
            let id = |t: &TagTable, n: u8| t.entry(&name(&format!("/t{n}"))).map(|e| e.id);
            let c = match *a {
                Act::Create(_, n) => {
                    t.create(
                        name(&format!("/t{n}")),
                        Domain::Global,
                        RingParams::default(),
                    )
                    .1
                }
                Act::Destroy(_, n) => t
                    .destroy(&name(&format!("/t{n}")))
                    .map(|(_, c)| c)
                    .unwrap_or_default(),
                Act::Send(_, n, c) => id(t, n)
                    .and_then(|i| t.add_sender(i, ClientId(c.into()), who(c)).ok())
                    .unwrap_or_default(),
                Act::Unsend(_, n, c) => id(t, n)
                    .and_then(|i| t.remove_sender(i, ClientId(c.into())).ok())
                    .unwrap_or_default(),
                Act::Sub(_, n, c) => id(t, n)
                    .and_then(|i| t.add_receiver(i, ClientId(c.into()), who(c)).ok())
                    .unwrap_or_default(),
                Act::Unsub(_, n, c) => id(t, n)
                    .and_then(|i| t.remove_receiver(i, ClientId(c.into())).ok())
                    .unwrap_or_default(),
                Act::Class(_, n, c, p) => id(t, n)
                    .and_then(|i| {
                        let holder = Holder::Local(ClientId(c.into()));
                        // Classes 0..=3 alone; 4..=7 with a policy too.
                        let class = Priority::from_u8(p & 3).ok()?;
                        let sched = (p > 3).then_some(tagwire_wire::Sched::Fifo(p));
                        t.set_receiver_qos(
                            i,
                            |r| r.holder == holder,
                            |q| ChannelQos {
                                priority: class,
                                sched: sched.unwrap_or(q.sched),
                                ..q
                            },
                        )
                        .ok()
                    })
                    .map(|(_, c)| c)
                    .unwrap_or_default(),
                Act::Drop(_, c) => t.remove_client(ClientId(c.into())),
                Act::Deliver(..) => Change::default(),
            };
            c.ops
        }

        type View = Vec<(
            String,
            Vec<(u32, [u8; 16])>,
            Vec<(u32, [u8; 16], u8, [u8; 2])>,
        )>;

        /// Each tag's senders, and its receivers with their class and policy.
        fn view(t: &TagTable) -> View {
            let key = |m: &Member| (m.who.pid.0, m.who.node.to_bytes());
            t.entries()
                .map(|e| {
                    let mut s: Vec<_> = e.senders().map(key).collect();
                    let mut r: Vec<_> = e
                        .rights(Role::Receiver)
                        .iter()
                        .map(|r| {
                            (
                                r.member.who.pid.0,
                                r.member.who.node.to_bytes(),
                                r.qos.priority.to_u8(),
                                r.qos.sched.to_bytes(),
                            )
                        })
                        .collect();
                    s.sort_unstable();
                    r.sort_unstable();
                    (e.name.to_string(), s, r)
                })
                .collect()
        }

        proptest! {
            /// Daemons that make concurrent, conflicting changes (creating,
            /// destroying and joining the same tags at once, changing their
            /// subscriptions' classes) and receive each
            /// other's operations in any interleaving (each link in order) end
            /// with the same table.
            #[test]
            fn daemons_converge_whatever_the_interleaving(acts in proptest::collection::vec(act(), 0..80)) {
                let mut tables: Vec<TagTable> = (0..NODES)
                    .map(|k| TagTable::for_node(node(k), RingParams::default(), 0))
                    .collect();
                let mut links: Vec<Vec<VecDeque<TableOp>>> =
                    vec![vec![VecDeque::new(); NODES]; NODES];
                for a in &acts {
                    match *a {
                        Act::Deliver(from, to) => {
                            if let Some(op) = links[from][to].pop_front() {
                                tables[to].apply_remote(&op);
                            }
                        }
                        Act::Create(k, ..) | Act::Destroy(k, ..) | Act::Send(k, ..)
                        | Act::Unsend(k, ..) | Act::Sub(k, ..) | Act::Unsub(k, ..)
                        | Act::Class(k, ..) | Act::Drop(k, ..) => {
                            for op in local(&mut tables[k], k, a) {
                                for (to, link) in links[k].iter_mut().enumerate() {
                                    if to != k {
                                        link.push_back(op.clone());
                                    }
                                }
                            }
                        }
                    }
                }
                for from_links in &mut links {
                    for (to, link) in from_links.iter_mut().enumerate() {
                        while let Some(op) = link.pop_front() {
                            tables[to].apply_remote(&op);
                        }
                    }
                }
                let first = view(&tables[0]);
                for t in &tables[1..] {
                    prop_assert_eq!(&view(t), &first);
                }
            }

            /// A daemon that missed operations (it was partitioned) catches up
            /// from its peers' sync messages alone.
            #[test]
            fn a_partitioned_daemon_catches_up_from_sync(acts in proptest::collection::vec(act(), 0..60)) {
                let mut tables: Vec<TagTable> = (0..NODES)
                    .map(|k| TagTable::for_node(node(k), RingParams::default(), 0))
                    .collect();
                // Nodes 0 and 1 exchange everything at once; node 2 hears nothing.
                for a in &acts {
                    let k = match *a {
                        Act::Create(k, ..) | Act::Destroy(k, ..) | Act::Send(k, ..)
                        | Act::Unsend(k, ..) | Act::Sub(k, ..) | Act::Unsub(k, ..)
                        | Act::Class(k, ..) | Act::Drop(k, ..) => k.min(1),
                        Act::Deliver(..) => continue,
                    };
                    for op in local(&mut tables[k], k, a) {
                        tables[1 - k].apply_remote(&op);
                    }
                }
                let s0 = tables[0].sync_ops();
                let s1 = tables[1].sync_ops();
                tables[2].apply_sync(node(0), &s0);
                tables[2].apply_sync(node(1), &s1);
                prop_assert_eq!(view(&tables[2]), view(&tables[0]));
                prop_assert_eq!(view(&tables[1]), view(&tables[0]));
            }
        }

        #[test]
        fn a_dead_node_loses_its_rights_everywhere() {
            let mut a = TagTable::for_node(node(0), RingParams::default(), 0);
            let mut b = TagTable::for_node(node(1), RingParams::default(), 0);
            let (id, c) = a.create(name("/x"), Domain::Global, RingParams::default());
            for op in &c.ops {
                b.apply_remote(op);
            }
            let c = a
                .add_receiver(
                    id,
                    ClientId(1),
                    Member {
                        who: SenderInfo {
                            pid: Pid(5),
                            node: node(0),
                        },
                        since_unix_ns: 1,
                    },
                )
                .unwrap();
            for op in &c.ops {
                b.apply_remote(op);
            }
            assert_eq!(b.entry(&name("/x")).unwrap().receivers().count(), 1);
            let ups = b.drop_node(node(0));
            assert_eq!(ups.len(), 1);
            assert!(matches!(ups[0].event, TableEvent::ReceiverLeft { .. }));
            assert_eq!(b.entry(&name("/x")).unwrap().receivers().count(), 0);
            // Our own clients' rights survive the loss of another node.
            assert_eq!(a.drop_node(node(1)).len(), 0);
        }

        #[test]
        fn a_class_change_is_a_newer_join_that_only_the_holding_node_issues() {
            let mut a = TagTable::for_node(node(0), RingParams::default(), 0);
            let mut b = TagTable::for_node(node(1), RingParams::default(), 0);
            let (id, c) = a.create(name("/x"), Domain::Global, RingParams::default());
            let member = Member {
                who: SenderInfo {
                    pid: Pid(5),
                    node: node(0),
                },
                since_unix_ns: 1,
            };
            let sub = a.add_receiver(id, ClientId(1), member).unwrap();
            for op in c.ops.iter().chain(&sub.ops) {
                b.apply_remote(op);
            }
            let mine = |r: &Right| r.holder == Holder::Local(ClientId(1));
            let (changed, ch) = a
                .set_receiver_priority(id, mine, Priority::Critical)
                .unwrap();
            assert_eq!(changed, vec![member]);
            assert_eq!(ch.ops.len(), 1);
            assert!(matches!(
                ch.updates[..],
                [Update { event: TableEvent::ReceiverQos { qos, .. }, .. }] if qos.priority == Priority::Critical
            ));
            // Asking again for the class it has changes nothing.
            let (again, none) = a
                .set_receiver_priority(id, mine, Priority::Critical)
                .unwrap();
            assert!(again.is_empty() && none == Change::default());
            // The peer takes the newer statement, and not the older one after it.
            let ups = b.apply_remote(&ch.ops[0]);
            assert!(matches!(
                ups[..],
                [Update {
                    event: TableEvent::ReceiverQos { .. },
                    ..
                }]
            ));
            assert!(b.apply_remote(&sub.ops[0]).is_empty());
            let class = |t: &TagTable| {
                t.entry(&name("/x")).unwrap().rights(Role::Receiver)[0]
                    .qos
                    .priority
            };
            assert_eq!(class(&b), Priority::Critical);
            // A node without the subscription cannot change it.
            let bid = b.entry(&name("/x")).unwrap().id;
            assert!(matches!(
                b.set_receiver_priority(bid, |_| true, Priority::Low),
                Err(TableError::NotSubscribed(_))
            ));
            // A daemon that missed it learns it from the holder's sync.
            let mut late = TagTable::for_node(node(2), RingParams::default(), 0);
            late.apply_sync(node(0), &a.sync_ops());
            assert_eq!(class(&late), Priority::Critical);
        }

        #[test]
        fn a_publishers_class_is_restated_like_a_subscriptions_without_an_event() {
            let mut a = TagTable::for_node(node(0), RingParams::default(), 0);
            let mut b = TagTable::for_node(node(1), RingParams::default(), 0);
            let (id, c) = a.create(name("/p"), Domain::Global, RingParams::default());
            let member = Member {
                who: SenderInfo {
                    pid: Pid(6),
                    node: node(0),
                },
                since_unix_ns: 1,
            };
            let send = a.add_sender(id, ClientId(1), member).unwrap();
            for op in c.ops.iter().chain(&send.ops) {
                b.apply_remote(op);
            }
            let high = |q: ChannelQos| ChannelQos {
                priority: Priority::High,
                ..q
            };
            // No subscription to change: the senders are another list.
            assert!(matches!(
                a.set_qos(Role::Receiver, id, |_| true, high),
                Err(TableError::NotSubscribed(_))
            ));
            let (changed, ch) = a.set_qos(Role::Sender, id, |_| true, high).unwrap();
            assert_eq!(changed, vec![member]);
            assert_eq!(ch.ops.len(), 1);
            assert!(ch.updates.is_empty(), "{:?}", ch.updates);
            assert!(b.apply_remote(&ch.ops[0]).is_empty());
            let class = |t: &TagTable| {
                t.entry(&name("/p")).unwrap().rights(Role::Sender)[0]
                    .qos
                    .priority
            };
            assert_eq!((class(&a), class(&b)), (Priority::High, Priority::High));
            let bid = b.entry(&name("/p")).unwrap().id;
            assert!(matches!(
                b.set_qos(Role::Sender, bid, |_| true, high),
                Err(TableError::NoSendAccess(_))
            ));
        }

        #[test]
        fn local_tags_are_never_replicated() {
            let mut a = TagTable::for_node(node(0), RingParams::default(), 0);
            let (id, c) = a.create(name("/l"), Domain::Local, RingParams::default());
            assert!(c.ops.is_empty());
            let who = Member {
                who: SenderInfo {
                    pid: Pid(5),
                    node: node(0),
                },
                since_unix_ns: 1,
            };
            assert!(a.add_sender(id, ClientId(1), who).unwrap().ops.is_empty());
            assert!(a.sync_ops().is_empty());
        }
    }

    #[test]
    fn a_version_far_ahead_of_the_clock_is_refused_and_the_clock_never_wraps() {
        let peer = NodeAddr("10.0.0.9".parse().unwrap());
        let mut t = TagTable::for_node(NodeAddr::LOCALHOST, RingParams::default(), 1_000);
        let (id, _) = t.create(name("/alive"), Domain::Global, RingParams::default());
        let forged = TableOp::TagDown {
            name: name("/alive"),
            version: Version {
                lamport: u64::MAX,
                node: peer,
            },
        };
        assert!(t.apply_remote(&forged).is_empty());
        assert!(t.apply_sync(peer, std::slice::from_ref(&forged)).is_empty());
        assert_eq!(t.refused_ahead(), 2);
        assert!(t.entry(&name("/alive")).is_some_and(|e| e.id == id));
        // A genuine peer a little ahead is taken, and our next change is newer.
        let ahead = TableOp::TagUp {
            name: name("/other"),
            domain: Domain::Global,
            ring: RingParams::default(),
            version: Version {
                lamport: 1_000 + MAX_AHEAD / 2,
                node: peer,
            },
        };
        assert!(!t.apply_remote(&ahead).is_empty());
        let (_, c) = t.create(name("/mine"), Domain::Global, RingParams::default());
        assert!(c
            .ops
            .iter()
            .all(|o| o.version().lamport > 1_000 + MAX_AHEAD / 2));
    }
}
