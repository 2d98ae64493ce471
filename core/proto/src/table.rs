//! The daemon's authoritative tag table.

use std::collections::{BTreeMap, HashMap};

use thiserror::Error;

use tagwire_wire::control::{RingParams, TableEvent, TagSummary, Update};
use tagwire_wire::{Domain, Member, TagId, TagName};

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

/// One tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its id.
    pub id: TagId,
    /// Its name.
    pub name: TagName,
    /// Its domain.
    pub domain: Domain,
    /// Ring shape chosen at creation.
    pub ring: RingParams,
    senders: Vec<(ClientId, Member)>,
    receivers: Vec<(ClientId, Member)>,
}

impl Entry {
    /// Current senders.
    pub fn senders(&self) -> impl Iterator<Item = &Member> {
        self.senders.iter().map(|(_, m)| m)
    }

    /// Current receivers.
    pub fn receivers(&self) -> impl Iterator<Item = &Member> {
        self.receivers.iter().map(|(_, m)| m)
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

/// Which list of a tag an operation touches.
#[derive(Debug, Clone, Copy)]
enum Role {
    Sender,
    Receiver,
}

impl Role {
    fn members(self, e: &mut Entry) -> &mut Vec<(ClientId, Member)> {
        match self {
            Role::Sender => &mut e.senders,
            Role::Receiver => &mut e.receivers,
        }
    }

    fn joined(self, tag: TagId, member: Member) -> TableEvent {
        match self {
            Role::Sender => TableEvent::SenderJoined { tag, member },
            Role::Receiver => TableEvent::ReceiverJoined { tag, member },
        }
    }

    fn left(self, tag: TagId, member: Member) -> TableEvent {
        match self {
            Role::Sender => TableEvent::SenderLeft { tag, member },
            Role::Receiver => TableEvent::ReceiverLeft { tag, member },
        }
    }

    fn missing(self, name: String) -> TableError {
        match self {
            Role::Sender => TableError::NoSendAccess(name),
            Role::Receiver => TableError::NotSubscribed(name),
        }
    }
}

/// The authoritative table. See the crate docs.
#[derive(Debug, Default)]
pub struct TagTable {
    version: u64,
    next_id: u32,
    tags: BTreeMap<TagName, Entry>,
    names: HashMap<TagId, TagName>,
}

impl TagTable {
    /// An empty table at version 0.
    pub fn new() -> Self {
        Self::default()
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

    /// Creates a tag. Creating an existing tag is not an error: it returns the
    /// existing id and no update.
    pub fn create(
        &mut self,
        name: TagName,
        domain: Domain,
        ring: RingParams,
    ) -> (TagId, Option<Update>) {
        if let Some(e) = self.tags.get(&name) {
            return (e.id, None);
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
                senders: Vec::new(),
                receivers: Vec::new(),
            },
        );
        (
            id,
            Some(self.bump(TableEvent::TagCreated {
                tag: id,
                name,
                domain,
            })),
        )
    }

    /// Destroys a tag; returns its last state and the update.
    pub fn destroy(&mut self, name: &TagName) -> Result<(Entry, Update), TableError> {
        let entry = self
            .tags
            .remove(name)
            .ok_or_else(|| TableError::UnknownTag(name.to_string()))?;
        self.names.remove(&entry.id);
        let update = self.bump(TableEvent::TagDestroyed {
            tag: entry.id,
            name: entry.name.clone(),
        });
        Ok((entry, update))
    }

    /// Records that `client` holds send access (a client may hold it several times,
    /// e.g. from two threads; each grant needs its own release).
    pub fn add_sender(
        &mut self,
        tag: TagId,
        client: ClientId,
        member: Member,
    ) -> Result<Update, TableError> {
        self.add(Role::Sender, tag, client, member)
    }

    /// Releases one send access held by `client`.
    pub fn remove_sender(&mut self, tag: TagId, client: ClientId) -> Result<Update, TableError> {
        self.remove(Role::Sender, tag, client)
    }

    /// Records a subscription of `client`.
    pub fn add_receiver(
        &mut self,
        tag: TagId,
        client: ClientId,
        member: Member,
    ) -> Result<Update, TableError> {
        self.add(Role::Receiver, tag, client, member)
    }

    /// Cancels one subscription of `client`.
    pub fn remove_receiver(&mut self, tag: TagId, client: ClientId) -> Result<Update, TableError> {
        self.remove(Role::Receiver, tag, client)
    }

    fn add(
        &mut self,
        role: Role,
        tag: TagId,
        client: ClientId,
        member: Member,
    ) -> Result<Update, TableError> {
        let e = self.entry_mut(tag)?;
        role.members(e).push((client, member));
        Ok(self.bump(role.joined(tag, member)))
    }

    fn remove(&mut self, role: Role, tag: TagId, client: ClientId) -> Result<Update, TableError> {
        let e = self.entry_mut(tag)?;
        let name = e.name.to_string();
        let list = role.members(e);
        let i = list
            .iter()
            .rposition(|(c, _)| *c == client)
            .ok_or_else(|| role.missing(name))?;
        let (_, member) = list.remove(i);
        Ok(self.bump(role.left(tag, member)))
    }

    /// True when `client` holds send access on `tag`.
    pub fn is_sender(&self, tag: TagId, client: ClientId) -> bool {
        self.entry_by_id(tag)
            .is_some_and(|e| e.senders.iter().any(|(c, _)| *c == client))
    }

    /// True when `client` is subscribed to `tag`.
    pub fn is_receiver(&self, tag: TagId, client: ClientId) -> bool {
        self.entry_by_id(tag)
            .is_some_and(|e| e.receivers.iter().any(|(c, _)| *c == client))
    }

    /// Drops every right `client` held (it disconnected or died).
    pub fn remove_client(&mut self, client: ClientId) -> Vec<Update> {
        let mut events = Vec::new();
        for e in self.tags.values_mut() {
            e.senders.retain(|(c, m)| {
                let keep = *c != client;
                if !keep {
                    events.push(TableEvent::SenderLeft {
                        tag: e.id,
                        member: *m,
                    });
                }
                keep
            });
            e.receivers.retain(|(c, m)| {
                let keep = *c != client;
                if !keep {
                    events.push(TableEvent::ReceiverLeft {
                        tag: e.id,
                        member: *m,
                    });
                }
                keep
            });
        }
        events.into_iter().map(|ev| self.bump(ev)).collect()
    }

    /// Every tag, for listings and client snapshots.
    pub fn summaries(&self) -> Vec<TagSummary> {
        self.tags.values().map(Entry::summary).collect()
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
        assert!(u.is_some());
        let (b, u2) = t.create(name("/a"), Domain::Local, RingParams::default());
        assert_eq!(a, b);
        assert!(u2.is_none());
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
        let ups = t.remove_client(ClientId(1));
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
        assert!(matches!(u.event, TableEvent::TagDestroyed { .. }));
        assert!(t.entry_by_id(a).is_none());
        assert!(t.destroy(&name("/a")).is_err());
        let (a2, _) = t.create(name("/a"), Domain::Global, RingParams::default());
        assert_ne!(a, a2, "ids are not reused, so stale handles cannot alias");
    }
}
