//! Writing what arrived from other nodes into the local rings, and the
//! messages held back for lossless subscribers a ring behind.

use super::*;

/// Messages of one tag held back for a lossless subscriber, oldest first:
/// each a whole ring record (frame header and payload or blob reference).
#[derive(Debug, Default)]
pub(crate) struct Held {
    records: std::collections::VecDeque<Vec<u8>>,
    bytes: usize,
    /// A `held_drainer` thread is on it.
    drainer: bool,
}

impl Held {
    /// Messages held.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether a ring's worth (`slots` records, or [`HELD_BYTES`]) is held:
    /// then data for the tag is refused until it drains.
    fn full(&self, slots: u32) -> bool {
        self.room(slots) == 0
    }

    /// Messages that may still come before data is refused: the credit
    /// the tag's inbound streams announce to their senders.
    fn room(&self, slots: u32) -> u32 {
        if self.bytes >= HELD_BYTES {
            return 0;
        }
        slots.saturating_sub(u32::try_from(self.records.len()).unwrap_or(u32::MAX))
    }
}

/// Bytes held back for one tag before its data is refused.
const HELD_BYTES: usize = 16 << 20;

/// Whether data for `tag` must wait (a datagram is refused: left unread and
/// unacknowledged, for its sender to resend later): a lossless subscriber
/// here is a ring behind and a ring's worth more is held back already.
pub(super) fn held_full(shared: &Shared, tag: &TagName) -> bool {
    if shared.stats.held_now.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let st = shared.lock();
    st.table.entry(tag).is_some_and(|e| {
        let (Some(ring), Some(h)) = (st.rings.get(&e.id), st.held.get(&e.id)) else {
            return false;
        };
        h.full(ring.shape().slots)
    })
}

/// Writes messages from another node into the tag's local ring (one lock
/// for all of them). What a lossless subscriber has no room for yet waits
/// in the tag's `Held` queue (`drain_held` writes it later), behind which
/// everything newer waits too, so the order stays the publishers'.
pub(super) fn deliver<'m>(
    shared: &Shared,
    tag: &TagName,
    msgs: impl Iterator<Item = (FrameHeader, &'m [u8])>,
) -> Option<(TagId, Option<u32>)> {
    let mut st = shared.lock();
    let Some(id) = st.table.entry(tag).map(|e| e.id) else {
        shared.stats.unknown_tag.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    // Behind messages already held, everything waits: the order stays.
    let mut holding = st.held.get(&id).is_some_and(|h| !h.records.is_empty());
    let mut n = 0;
    for (header, payload) in msgs {
        deliver_one(shared, &mut st, id, header, payload, &mut holding);
        n += 1;
    }
    shared.tallies.tags.add(tag, |c| c.delivered += n);
    // One wake-up for the lot.
    let ring = st.rings.get(&id)?;
    ring.wake_readers();
    let room = st
        .held
        .get(&id)
        .filter(|h| !h.records.is_empty())
        .map(|h| h.room(ring.shape().slots));
    Some((id, room))
}

fn deliver_one(
    shared: &Shared,
    st: &mut State,
    id: TagId,
    mut header: FrameHeader,
    payload: &[u8],
    holding: &mut bool,
) {
    let Some(ring) = st.rings.get(&id) else {
        return;
    };
    let mut h = [0u8; HEADER_LEN];
    let blob;
    let mut blob_written = None;
    let body: &[u8] = if payload.len() + HEADER_LEN <= ring.max_record() {
        header.flags = 0;
        payload
    } else {
        let Some(fd) = blob_fd(payload) else {
            shared.stats.inbound_failed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let limits = Limits::of(&shared.config, ring.shape().slots);
        let at = RingState::of(ring);
        let store = st.blobs.entry(id).or_default();
        store.scan(at, |i| blob::look(ring, i));
        let blob_id = store.put_anyway(fd, payload.len() as u64, Owner::Inbound, limits, at);
        blob_written = Some(blob_id);
        blob = BlobRef {
            blob_id,
            len: payload.len() as u64,
        }
        .to_bytes();
        header.flags = FLAG_BLOB;
        &blob
    };
    let _ = header.emit(&mut h);
    if !*holding {
        match ring.publish_lossless_quietly(&[&h, body]) {
            Ok(None) => *holding = true,
            written => {
                // In the ring (or refused as malformed): the store keeps
                // it for as long as its record is there.
                if written.is_err() {
                    shared.stats.inbound_failed.fetch_add(1, Ordering::Relaxed);
                }
                if let (Some(b), Some(store)) = (blob_written, st.blobs.get_mut(&id)) {
                    store.done(Owner::Inbound, b);
                }
                return;
            }
        }
    }
    let held = st.held.entry(id).or_default();
    held.records.push_back([&h[..], body].concat());
    held.bytes += HEADER_LEN + body.len();
    if !held.drainer {
        if let Some(me) = shared.this.get().and_then(std::sync::Weak::upgrade) {
            held.drainer = std::thread::Builder::new()
                .name("tagwired-held".into())
                .spawn(move || held_drainer(&me, id))
                .is_ok();
        }
    }
    shared.stats.held_now.fetch_add(1, Ordering::Relaxed);
    shared.stats.held.fetch_add(1, Ordering::Relaxed);
}

/// Moves a tag's held-back messages into its ring as its lossless
/// subscribers make room: sleeps on the ring's gate bell (a subscriber rings
/// it once it has read a refill step past what is held back), then wakes the
/// inbound threads, which announce the room to the senders at once. Ends
/// when nothing is held for the tag.
fn held_drainer(shared: &Arc<Shared>, id: TagId) {
    loop {
        let ring = {
            let mut st = shared.lock();
            let holding = st.held.get(&id).is_some_and(|h| !h.records.is_empty());
            match st.rings.get(&id) {
                Some(r) if holding && !shared.is_stopping() => r.clone(),
                _ => {
                    if let Some(h) = st.held.get_mut(&id) {
                        h.drainer = false;
                    }
                    return;
                }
            }
        };
        // (The bound only lets the loop see a stopping daemon or a tag
        // that went away.)
        if !ring.wait_lossless_room(MAX_SLEEP) {
            continue;
        }
        drain_held(shared);
        if let Some(d) = shared.delivery.get() {
            d.room_made();
        }
    }
}

/// Writes what lossless subscribers now have room for of the messages held
/// back for them (and forgets those of tags that are gone). Free while
/// nothing is held.
/// Returns each tag it looked at with its room now (`None`: nothing held).
pub(crate) fn drain_held(shared: &Shared) -> Vec<(TagId, Option<u32>)> {
    let mut rooms = Vec::new();
    if shared.stats.held_now.load(Ordering::Relaxed) == 0 {
        return rooms;
    }
    let mut st = shared.lock();
    let State {
        rings, held, blobs, ..
    } = &mut *st;
    let mut written = 0u64;
    let mut dropped = 0u64;
    held.retain(|id, h| {
        let Some(ring) = rings.get(id) else {
            dropped += h.records.len() as u64;
            return false;
        };
        let mut n = 0u64;
        while let Some(r) = h.records.front() {
            if let Ok(None) = ring.publish_lossless_quietly(&[r]) {
                break;
            }
            if let (Some(b), Some(store)) = (blob::blob_of(r), blobs.get_mut(id)) {
                store.done(Owner::Inbound, b);
            }
            h.bytes -= r.len();
            h.records.pop_front();
            n += 1;
        }
        if n > 0 {
            ring.wake_readers();
        }
        written += n;
        let empty = h.records.is_empty();
        rooms.push((*id, (!empty).then(|| h.room(ring.shape().slots))));
        !empty
    });
    shared
        .stats
        .held_now
        .fetch_sub(written + dropped, Ordering::Relaxed);
    rooms
}

fn blob_fd(payload: &[u8]) -> Option<OwnedFd> {
    let fd = rustix::fs::memfd_create(
        "tagwire-blob",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    let mut f = std::fs::File::from(fd);
    f.write_all(payload).ok()?;
    rustix::fs::fcntl_add_seals(
        &f,
        SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE | SealFlags::SEAL,
    )
    .ok()?;
    Some(OwnedFd::from(f))
}
