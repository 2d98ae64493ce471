//! Messages too large for a shared-memory slot.
//!
//! The publisher writes such a message into a memfd it creates and hands the
//! descriptor to the daemon; the ring slot carries only a reference. Readers ask
//! the daemon for the descriptor and `pread` from it (never `mmap`: a publisher
//! that shrank the file could otherwise fault them). The daemon copies nothing.
//!
//! **How long a blob is kept.** A blob's record goes through the ring like any
//! other, so the blob follows its record:
//!
//! ```text
//!   ring  ..., r-1 | r: header + BlobRef{id} | r+1, ...        head H
//!                    ^ lowest gate G: gated readers (lossless subscribers,
//!                      the forwarder of a reliable stream) need r and later
//! ```
//!
//! * **Held** (never evicted): while a gate is on the ring, a blob whose record
//!   is at or after the lowest gate, or whose record is not in the ring yet
//!   (its publisher is still publishing it). A publisher that finds the
//!   store full of held blobs waits (`Full`, `ErrorCode::BlobsHeld`), as it
//!   waits for a gate in the ring: a lossless reader never loses a large
//!   message to eviction.
//! * **Kept** while its record is in the ring and the store is within its
//!   bounds (count and bytes), so a reader without a gate that keeps within
//!   the ring's depth finds it; past the bounds the oldest unheld blob goes
//!   first, and a reader that comes for it later counts it lost.
//! * **Useless**, evicted at once: its record was overwritten, or its
//!   publisher is done with it (published or gave up) and no record in the
//!   ring refers to it.
//!
//! The daemon learns where records are by looking at the ring (`BlobStore::scan`):
//! only the records written since the last look, at each store.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;

use tagwire_proto::ClientId;
use tagwire_shm::{Peek, Ring};
use tagwire_wire::frame::{BlobRef, FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::{TagId, TagName};

use crate::quota::Exceeded;

use crate::Shared;

/// Who stored a blob: a local publisher's client, or the delivery manager
/// (a message from another node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A local client.
    Client(ClientId),
    /// The delivery manager.
    Inbound,
}

/// What the ring holds at one record index, for [`BlobStore::scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// A record that refers to this blob.
    Blob(u64),
    /// A record that refers to no blob.
    Other,
    /// Claimed but not committed yet (or not claimed).
    NotYet,
    /// Overwritten.
    Gone,
}

/// Where the ring is, at a store: its head, lowest gate and slot count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingState {
    /// The next record index.
    pub(crate) head: u64,
    /// The slowest gated reader's position, if a gate is held.
    pub(crate) lowest_gate: Option<u64>,
    /// Records the ring holds.
    pub(crate) slots: u64,
}

/// Bounds of one tag's store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Blobs kept.
    pub(crate) count: usize,
    /// Bytes kept.
    pub(crate) bytes: u64,
}

/// Blobs a client may have stored and not published yet (one per
/// publishing thread, say): beyond that its oldest counts as given up, so a
/// client cannot pin the store by storing without publishing.
const IN_FLIGHT_PER_CLIENT: usize = 16;

/// The store is full of blobs gated readers still need: try again later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full;

#[derive(Debug)]
struct Blob {
    id: u64,
    len: u64,
    fd: OwnedFd,
    owner: Owner,
    /// Its owner is done with it: published (or given up).
    done: bool,
    /// The index of the newest record seen to refer to it.
    at: Option<u64>,
}

/// Recently published large messages of one tag.
#[derive(Debug, Default)]
pub struct BlobStore {
    next_id: u64,
    bytes: u64,
    kept: VecDeque<Blob>,
    /// Records before this index have been looked at.
    scanned_to: u64,
}

impl BlobStore {
    /// Notes that `owner` is done with blob `id` (published it or gave up).
    pub(crate) fn done(&mut self, owner: Owner, id: u64) {
        if let Some(b) = self
            .kept
            .iter_mut()
            .find(|b| b.id == id && b.owner == owner)
        {
            b.done = true;
        }
    }

    /// Notes that `owner` is gone: it publishes none of its blobs any more.
    pub(crate) fn owner_gone(&mut self, owner: Owner) {
        for b in self.kept.iter_mut().filter(|b| b.owner == owner) {
            b.done = true;
        }
    }

    /// Looks at the records written since the last look (those of the
    /// last lap at most) and notes which blobs they refer to. A record not
    /// committed yet is looked at again next time.
    pub(crate) fn scan(&mut self, ring: RingState, mut look: impl FnMut(u64) -> Seen) {
        let from = self.scanned_to.max(ring.head.saturating_sub(ring.slots));
        let mut first_pending = None;
        for i in from..ring.head {
            match look(i) {
                Seen::Blob(id) => {
                    if let Some(b) = self.kept.iter_mut().rev().find(|b| b.id == id) {
                        b.at = Some(b.at.map_or(i, |a| a.max(i)));
                    }
                }
                Seen::NotYet => {
                    first_pending.get_or_insert(i);
                }
                Seen::Other | Seen::Gone => {}
            }
        }
        self.scanned_to = first_pending.unwrap_or(ring.head);
    }

    /// Stores `fd` (holding `len` bytes) for `owner`, after a
    /// [`BlobStore::scan`] at `ring`: evicts what no reader can need, then,
    /// past the limits, the oldest blobs that are not held. Fails with
    /// [`Full`] when that is not enough (the caller waits and tries again).
    pub(crate) fn put(
        &mut self,
        fd: OwnedFd,
        len: u64,
        owner: Owner,
        limits: Limits,
        ring: RingState,
    ) -> Result<u64, Full> {
        self.make_room(owner, len, limits, ring)?;
        Ok(self.insert(fd, len, owner))
    }

    /// [`BlobStore::put`] that never fails: stores beyond the limits when
    /// everything kept is held (the delivery manager's messages from other
    /// nodes, whose number its held-back queue bounds).
    pub(crate) fn put_anyway(
        &mut self,
        fd: OwnedFd,
        len: u64,
        owner: Owner,
        limits: Limits,
        ring: RingState,
    ) -> u64 {
        let _ = self.make_room(owner, len, limits, ring);
        self.insert(fd, len, owner)
    }

    /// The descriptor and length of blob `id`, if still kept.
    pub fn get(&self, id: u64) -> Option<(&OwnedFd, u64)> {
        self.kept
            .iter()
            .find(|b| b.id == id)
            .map(|b| (&b.fd, b.len))
    }

    /// Bytes kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Looks at the ring and evicts what no reader can need any more.
    pub(crate) fn sweep(&mut self, ring: RingState, look: impl FnMut(u64) -> Seen) {
        self.scan(ring, look);
        let before = self.kept.len();
        self.kept.retain(|b| !useless(b, ring));
        if self.kept.len() != before {
            self.bytes = self.kept.iter().map(|b| b.len).sum();
        }
    }

    /// Evicts the oldest blob that no gated reader holds and whose
    /// publisher is done with it, to free its descriptor for another
    /// tag's message (a reader without a gate that comes for it later
    /// counts it lost). Whether there was one.
    pub(crate) fn evict_oldest(&mut self, ring: RingState) -> bool {
        let Some(i) = self
            .kept
            .iter()
            .position(|b| !held(b, ring) && (b.done || b.at.is_some()))
        else {
            return false;
        };
        if let Some(b) = self.kept.remove(i) {
            self.bytes -= b.len;
        }
        true
    }

    /// Blobs kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    fn insert(&mut self, fd: OwnedFd, len: u64, owner: Owner) -> u64 {
        self.next_id += 1;
        self.kept.push_back(Blob {
            id: self.next_id,
            len,
            fd,
            owner,
            done: false,
            at: None,
        });
        self.bytes += len;
        self.next_id
    }

    fn make_room(
        &mut self,
        owner: Owner,
        len: u64,
        limits: Limits,
        ring: RingState,
    ) -> Result<(), Full> {
        if let Owner::Client(_) = owner {
            let mut in_flight = self
                .kept
                .iter_mut()
                .rev()
                .filter(|b| b.owner == owner && !b.done);
            if let Some(b) = in_flight.nth(IN_FLIGHT_PER_CLIENT - 1) {
                b.done = true;
            }
        }
        let before = self.kept.len();
        self.kept.retain(|b| !useless(b, ring));
        if self.kept.len() != before {
            self.bytes = self.kept.iter().map(|b| b.len).sum();
        }
        let over = |s: &Self| {
            s.kept.len() + 1 > limits.count.max(1)
                || (s.bytes + len > limits.bytes && !s.kept.is_empty())
        };
        while over(self) {
            let Some(i) = self.kept.iter().position(|b| !held(b, ring)) else {
                return Err(Full);
            };
            if let Some(b) = self.kept.remove(i) {
                self.bytes -= b.len;
            }
        }
        Ok(())
    }
}

/// Makes room for one more large message's descriptor within
/// [`crate::quota::large_descriptors`] over every tag's store (`blobs`,
/// their rings in `rings`): first what no reader can need, then the
/// oldest kept that no gated reader holds, of the stores that keep the
/// most. Refused when everything kept is held.
pub(crate) fn descriptors_within(
    blobs: &mut HashMap<TagId, BlobStore>,
    rings: &HashMap<TagId, Ring>,
) -> Result<(), Exceeded> {
    let budget = crate::quota::large_descriptors();
    let mut kept: usize = blobs.values().map(BlobStore::len).sum();
    if kept < budget {
        return Ok(());
    }
    let mut stores: Vec<(RingState, &mut BlobStore)> = blobs
        .iter_mut()
        .filter_map(|(tag, s)| {
            let ring = rings.get(tag)?;
            s.sweep(RingState::of(ring), |i| look(ring, i));
            Some((RingState::of(ring), s))
        })
        .collect();
    kept = stores.iter().map(|(_, s)| s.len()).sum();
    stores.sort_by_key(|(_, s)| std::cmp::Reverse(s.len()));
    for (ring, store) in &mut stores {
        while kept >= budget && store.evict_oldest(*ring) {
            kept -= 1;
        }
    }
    if kept >= budget {
        return Err(Exceeded::new(
            "large-message descriptors on this daemon",
            budget,
        ));
    }
    Ok(())
}

impl Limits {
    /// The limits `config` sets for a tag whose ring has `slots`.
    pub(crate) fn of(config: &crate::Config, slots: u32) -> Self {
        Self {
            count: config.blobs_per_tag.unwrap_or(slots as usize),
            bytes: config.blob_bytes_per_tag,
        }
    }
}

impl RingState {
    /// Where `ring` is now (freeing the gates of processes that are gone).
    pub(crate) fn of(ring: &Ring) -> Self {
        Self {
            head: ring.head_index(),
            lowest_gate: ring.lowest_gate(),
            slots: u64::from(ring.shape().slots),
        }
    }
}

/// What `ring` holds at record `index` (only its header and blob reference
/// are copied).
pub(crate) fn look(ring: &Ring, index: u64) -> Seen {
    let mut p = [0u8; HEADER_LEN + BlobRef::LEN];
    match ring.peek(index, &mut p) {
        Peek::Record(len) => match FrameHeader::parse(&p[..len.min(p.len())]) {
            Ok((h, body)) if h.flags & FLAG_BLOB != 0 => {
                BlobRef::parse(body).map_or(Seen::Other, |r| Seen::Blob(r.blob_id))
            }
            _ => Seen::Other,
        },
        Peek::NotYet => Seen::NotYet,
        Peek::Gone => Seen::Gone,
    }
}

/// The blob id a whole ring record refers to, if any.
pub(crate) fn blob_of(record: &[u8]) -> Option<u64> {
    match FrameHeader::parse(record) {
        Ok((h, body)) if h.flags & FLAG_BLOB != 0 => BlobRef::parse(body).ok().map(|r| r.blob_id),
        _ => None,
    }
}

/// A gated reader still needs it.
fn held(b: &Blob, ring: RingState) -> bool {
    let Some(gate) = ring.lowest_gate else {
        return false;
    };
    match b.at {
        Some(r) => r >= gate,
        None => !b.done,
    }
}

/// No reader can reach it any more: its record was overwritten, or its
/// owner is done with it and no record in the ring refers to it.
fn useless(b: &Blob, ring: RingState) -> bool {
    match b.at {
        // Record r's slot is taken by record r + slots, once claimed.
        Some(r) => r + ring.slots < ring.head,
        None => b.done,
    }
}

/// Reads the blob that a record's body `body` (a `BlobRef`) names on
/// `tag` into `out`, from the descriptor the daemon keeps for it; None if
/// the reference is malformed or names no blob any more.
pub(crate) fn read_blob(
    shared: &Shared,
    tag: &TagName,
    body: &[u8],
    out: &mut Vec<u8>,
) -> Option<()> {
    let r = BlobRef::parse(body).ok()?;
    let fd = {
        let st = shared.lock();
        let e = st.table.entry(tag)?;
        let (fd, _) = st.blobs.get(&e.id)?.get(r.blob_id)?;
        fd.try_clone().ok()?
    };
    let len = usize::try_from(r.len).ok()?;
    out.clear();
    out.resize(len, 0);
    let mut done = 0;
    while done < len {
        let n = rustix::io::pread(&fd, &mut out[done..], done as u64).ok()?;
        if n == 0 {
            return None;
        }
        done += n;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd() -> OwnedFd {
        rustix::fs::memfd_create("b", rustix::fs::MemfdFlags::CLOEXEC).unwrap()
    }

    const C: Owner = Owner::Client(ClientId(1));
    const LIMITS: Limits = Limits {
        count: 2,
        bytes: 100,
    };

    fn ring(head: u64, lowest_gate: Option<u64>) -> RingState {
        RingState {
            head,
            lowest_gate,
            slots: 8,
        }
    }

    /// Publishes blob `id` at the ring's head (the caller's record list).
    fn publish(records: &mut Vec<Seen>, s: &mut BlobStore, id: u64) {
        records.push(Seen::Blob(id));
        s.done(C, id);
    }

    fn scan(s: &mut BlobStore, records: &[Seen], gate: Option<u64>) -> RingState {
        let r = ring(records.len() as u64, gate);
        s.scan(r, |i| records[i as usize]);
        r
    }

    #[test]
    fn the_oldest_published_blob_no_gate_holds_goes_for_a_descriptor() {
        let big = Limits {
            count: 10,
            bytes: 1000,
        };
        let mut s = BlobStore::default();
        let mut records = Vec::new();
        for _ in 0..3 {
            let id = store(&mut s, &records, None, C, 10, big).unwrap();
            publish(&mut records, &mut s, id);
        }
        // One in flight (stored, not published yet).
        let in_flight = store(&mut s, &records, None, C, 10, big).unwrap();
        // A gate at record 1 holds blobs 2 and 3: only blob 1 may go.
        let r = scan(&mut s, &records, Some(1));
        assert!(s.evict_oldest(r));
        assert_eq!((s.len(), s.bytes()), (3, 30));
        assert!(s.get(1).is_none() && s.get(2).is_some());
        assert!(!s.evict_oldest(r), "held or in flight: kept");
        // Without the gate, the oldest published next; never the one in
        // flight.
        let r = scan(&mut s, &records, None);
        assert!(s.evict_oldest(r) && s.evict_oldest(r));
        assert!(!s.evict_oldest(r));
        assert!(s.get(in_flight).is_some());
    }

    /// Looks at the ring, then stores a blob.
    fn store(
        s: &mut BlobStore,
        records: &[Seen],
        gate: Option<u64>,
        owner: Owner,
        len: u64,
        limits: Limits,
    ) -> Result<u64, Full> {
        let r = scan(s, records, gate);
        s.put(fd(), len, owner, limits, r)
    }

    #[test]
    fn without_a_gate_the_oldest_blobs_are_evicted_by_count_and_bytes() {
        let mut s = BlobStore::default();
        let mut recs = Vec::new();
        let mut ids = Vec::new();
        for _ in 0..3 {
            let r = scan(&mut s, &recs, None);
            let id = s.put(fd(), 10, C, LIMITS, r).unwrap();
            publish(&mut recs, &mut s, id);
            ids.push(id);
        }
        assert!(s.get(ids[0]).is_none());
        assert!(s.get(ids[1]).is_some() && s.get(ids[2]).is_some());
        let r = scan(&mut s, &recs, None);
        let big = s.put(fd(), 95, C, LIMITS, r).unwrap();
        assert!(s.get(ids[2]).is_none(), "the byte bound evicts");
        assert_eq!(s.get(big).map(|(_, l)| l), Some(95));
    }

    #[test]
    fn a_blob_a_gated_reader_has_not_passed_is_held_and_the_store_says_full() {
        let mut s = BlobStore::default();
        let mut recs = Vec::new();
        let a = store(&mut s, &recs, Some(0), C, 10, LIMITS).unwrap();
        publish(&mut recs, &mut s, a);
        let b = store(&mut s, &recs, Some(0), C, 10, LIMITS).unwrap();
        publish(&mut recs, &mut s, b);
        // The gate is still at 0: both records are ahead of it.
        let r = scan(&mut s, &recs, Some(0));
        assert_eq!(s.put(fd(), 10, C, LIMITS, r), Err(Full));
        assert!(s.get(a).is_some() && s.get(b).is_some());
        // The reader passed a: a makes room.
        let r = scan(&mut s, &recs, Some(1));
        let c = s.put(fd(), 10, C, LIMITS, r).unwrap();
        assert!(s.get(a).is_none() && s.get(b).is_some() && s.get(c).is_some());
    }

    #[test]
    fn a_blob_not_published_yet_is_held_until_its_publisher_is_done() {
        let mut s = BlobStore::default();
        let other = Owner::Client(ClientId(2));
        let recs = vec![Seen::Other; 3];
        let a = store(&mut s, &recs, Some(3), other, 10, LIMITS).unwrap();
        let _b = store(&mut s, &recs, Some(3), C, 10, LIMITS).unwrap();
        // `a` is in flight (its publisher waits for ring room, say).
        let r = scan(&mut s, &recs, Some(3));
        assert_eq!(s.put(fd(), 10, C, LIMITS, r), Err(Full));
        assert!(s.get(a).is_some());
        // Given up (or its client gone): useless, evicted at once.
        s.owner_gone(other);
        let r = scan(&mut s, &recs, Some(3));
        assert!(s.put(fd(), 10, C, LIMITS, r).is_ok());
        assert!(s.get(a).is_none());
    }

    #[test]
    fn a_record_committed_after_a_pending_one_is_seen_and_the_pending_one_looked_at_again() {
        let mut s = BlobStore::default();
        let a = s.put(fd(), 10, C, LIMITS, ring(0, Some(0))).unwrap();
        let b = s.put(fd(), 10, C, LIMITS, ring(0, Some(0))).unwrap();
        // Two writers: index 0 (blob a) is claimed, not committed; index 1
        // (blob b) is committed.
        let mut recs = vec![Seen::NotYet, Seen::Blob(b)];
        s.done(C, b);
        scan(&mut s, &recs, Some(0));
        recs[0] = Seen::Blob(a);
        s.done(C, a);
        let r = scan(&mut s, &recs, Some(0));
        assert_eq!(s.put(fd(), 10, C, LIMITS, r), Err(Full), "both held");
        // The reader passed both.
        let r = scan(&mut s, &recs, Some(2));
        assert!(s.put(fd(), 10, C, LIMITS, r).is_ok());
    }

    #[test]
    fn an_overwritten_records_blob_is_evicted_at_once() {
        let mut s = BlobStore::default();
        let mut recs = Vec::new();
        let limits = Limits {
            count: 100,
            bytes: 1000,
        };
        let a = store(&mut s, &recs, None, C, 10, limits).unwrap();
        publish(&mut recs, &mut s, a);
        scan(&mut s, &recs, None);
        recs.extend([Seen::Other; 7]);
        let r = scan(&mut s, &recs, None);
        s.put(fd(), 10, C, limits, r).unwrap();
        assert!(s.get(a).is_some(), "a ring of 8 still holds its record");
        recs.push(Seen::Other);
        let r = scan(&mut s, &recs, None);
        s.put(fd(), 10, C, limits, r).unwrap();
        assert!(s.get(a).is_none(), "its record was lapped");
    }

    #[test]
    fn a_client_storing_without_publishing_cannot_pin_the_store() {
        let mut s = BlobStore::default();
        let limits = Limits {
            count: 1000,
            bytes: 1 << 30,
        };
        let recs: Vec<Seen> = Vec::new();
        let first = store(&mut s, &recs, Some(0), C, 1, limits).unwrap();
        for _ in 0..IN_FLIGHT_PER_CLIENT {
            let r = scan(&mut s, &recs, Some(0));
            s.put(fd(), 1, C, limits, r).unwrap();
        }
        assert!(s.get(first).is_none(), "the oldest counted as given up");
        assert_eq!(s.len(), IN_FLIGHT_PER_CLIENT);
    }

    #[test]
    fn the_delivery_manager_stores_beyond_the_limits_when_everything_is_held() {
        let mut s = BlobStore::default();
        let r = ring(0, Some(0));
        let a = s.put_anyway(fd(), 60, Owner::Inbound, LIMITS, r);
        let b = s.put_anyway(fd(), 60, Owner::Inbound, LIMITS, r);
        let c = s.put_anyway(fd(), 60, Owner::Inbound, LIMITS, r);
        assert!(s.get(a).is_some() && s.get(b).is_some() && s.get(c).is_some());
    }
}
