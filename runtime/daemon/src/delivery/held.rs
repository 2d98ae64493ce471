//! Writing what arrived from other nodes into the local rings, and the
//! messages held back for lossless subscribers a ring behind.

use std::sync::atomic::AtomicBool;

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

/// A tag's ring as the inbound path writes it, with its held-back queue:
/// reached without the daemon's lock (each inbound thread keeps the sinks
/// it wrote to, [`SinkCache`], and looks again only after a ring came or
/// went). Lock order: the daemon's lock before a sink's, never after.
#[derive(Debug)]
pub(crate) struct Sink {
    ring: Ring,
    held: Mutex<Held>,
    /// The tag's ring is gone (its held-back messages are dropped).
    gone: AtomicBool,
}

impl Sink {
    /// Messages held back now.
    pub(crate) fn held_len(&self) -> usize {
        lock(&self.held).len()
    }

    /// The tag's credit: the room left in its held-back queue while
    /// anything is held there, `None` otherwise.
    fn room(&self) -> Option<u32> {
        let h = lock(&self.held);
        (!h.records.is_empty()).then(|| h.room(self.ring.shape().slots))
    }
}

/// A ring was added to `st.rings` for tag `id`: the inbound path may write it.
pub(crate) fn ring_added(shared: &Shared, st: &mut State, id: TagId) {
    let Some(ring) = st.rings.get(&id) else {
        return;
    };
    let sink = Arc::new(Sink {
        ring: ring.clone(),
        held: Mutex::new(Held::default()),
        gone: AtomicBool::new(false),
    });
    if let Some(old) = st.sinks.insert(id, sink) {
        forget(shared, &old);
    }
    shared.sinks_gen.fetch_add(1, Ordering::Release);
}

/// Tag `id`'s ring is going: what was held back for it is dropped.
pub(crate) fn ring_removed(shared: &Shared, st: &mut State, id: TagId) {
    if let Some(old) = st.sinks.remove(&id) {
        forget(shared, &old);
    }
    shared.sinks_gen.fetch_add(1, Ordering::Release);
}

fn forget(shared: &Shared, sink: &Sink) {
    sink.gone.store(true, Ordering::Release);
    let mut h = lock(&sink.held);
    let n = h.records.len() as u64;
    h.records.clear();
    h.bytes = 0;
    shared.stats.held_now.fetch_sub(n, Ordering::Relaxed);
}

/// An inbound thread's sinks by tag name.
#[derive(Debug, Default)]
pub(super) struct SinkCache {
    gen: u64,
    by_name: HashMap<TagName, (TagId, Arc<Sink>)>,
}

impl SinkCache {
    /// The credit of `tag` now (see `Sink::room`; `None` for a tag that is
    /// gone), without the daemon's lock but after a ring came or went.
    pub(super) fn room(&mut self, shared: &Shared, tag: &TagName) -> Option<u32> {
        self.get(shared, tag).and_then(|(_, s)| s.room())
    }

    /// The sink of `tag`, taking the daemon's lock only when a ring came or
    /// went since the last look, or the tag is new to this thread.
    fn get(&mut self, shared: &Shared, tag: &TagName) -> Option<(TagId, Arc<Sink>)> {
        let gen = shared.sinks_gen.load(Ordering::Acquire);
        if gen != self.gen {
            self.by_name.clear();
            self.gen = gen;
        }
        if let Some(s) = self.by_name.get(tag) {
            return Some(s.clone());
        }
        let st = shared.lock();
        let found = st
            .table
            .entry(tag)
            .and_then(|e| Some((e.id, st.sinks.get(&e.id)?.clone())));
        drop(st);
        let found = found?;
        // (Bounded: names of tags in the table.)
        self.by_name.insert(tag.clone(), found.clone());
        Some(found)
    }
}

/// Whether `tag` holds nothing back: everything its inbound streams
/// delivered is in its ring (a tag that is gone holds nothing).
pub(super) fn held_empty(shared: &Shared, cache: &mut SinkCache, tag: &TagName) -> bool {
    cache
        .get(shared, tag)
        .is_none_or(|(_, s)| s.held_len() == 0)
}

/// Whether data for `tag` must wait (a datagram is refused: left unread and
/// unacknowledged, for its sender to resend later): a lossless subscriber
/// here is a ring behind and a ring's worth more is held back already.
pub(super) fn held_full(shared: &Shared, cache: &mut SinkCache, tag: &TagName) -> bool {
    if shared.stats.held_now.load(Ordering::Relaxed) == 0 {
        return false;
    }
    cache
        .get(shared, tag)
        .is_some_and(|(_, s)| lock(&s.held).full(s.ring.shape().slots))
}

/// Writes messages from another node into the tag's local ring, without
/// the daemon's lock (but for the store of a message larger than a slot).
/// What a lossless subscriber has no room for yet waits in the tag's `Held`
/// queue (its drainer writes it later), behind which everything newer waits
/// too, so the order stays the publishers'. Returns the tag and its room
/// while anything is held.
pub(super) fn deliver<'m>(
    shared: &Shared,
    cache: &mut SinkCache,
    tag: &TagName,
    msgs: impl Iterator<Item = (FrameHeader, &'m [u8])>,
) -> Option<(TagId, Option<u32>)> {
    let Some((id, sink)) = cache.get(shared, tag) else {
        shared.stats.unknown_tag.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    let mut n = 0;
    for (header, payload) in msgs {
        deliver_one(shared, id, &sink, header, payload);
        n += 1;
    }
    shared.tallies.tags.add(tag, |c| c.delivered += n);
    // One wake-up for the lot.
    sink.ring.wake_readers();
    Some((id, sink.room()))
}

fn deliver_one(
    shared: &Shared,
    id: TagId,
    sink: &Arc<Sink>,
    mut header: FrameHeader,
    payload: &[u8],
) {
    let ring = &sink.ring;
    let mut h = [0u8; HEADER_LEN];
    let blob;
    let mut blob_written = None;
    let body: &[u8] = if payload.len() + HEADER_LEN <= ring.max_record() {
        header.flags &= !FLAG_BLOB;
        payload
    } else {
        let Some(fd) = blob_fd(payload) else {
            shared.stats.inbound_failed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let limits = Limits::of(&shared.config, ring.shape().slots);
        let at = RingState::of(ring);
        let mut st = shared.lock();
        // (Stored whatever the bound says: what comes from other nodes is
        // bounded by the held-back queue; the room is made for the next.)
        let State { blobs, rings, .. } = &mut *st;
        let _ = blob::descriptors_within(blobs, rings);
        let store = st.blobs.entry(id).or_default();
        store.scan(at, |i| blob::look(ring, i));
        let blob_id = store.put_anyway(fd, payload.len() as u64, Owner::Inbound, limits, at);
        drop(st);
        blob_written = Some(blob_id);
        blob = BlobRef {
            blob_id,
            len: payload.len() as u64,
        }
        .to_bytes();
        header.flags |= FLAG_BLOB;
        &blob
    };
    let _ = header.emit(&mut h);
    let mut held = lock(&sink.held);
    if sink.gone.load(Ordering::Acquire) {
        return;
    }
    // Behind messages already held, everything waits: the order stays.
    if held.records.is_empty() {
        match ring.publish_lossless_quietly(&[&h, body]) {
            Ok(None) => {}
            written => {
                drop(held);
                // In the ring (or refused as malformed): the store keeps
                // it for as long as its record is there.
                if written.is_err() {
                    shared.stats.inbound_failed.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(b) = blob_written {
                    if let Some(store) = shared.lock().blobs.get_mut(&id) {
                        store.done(Owner::Inbound, b);
                    }
                }
                return;
            }
        }
    }
    held.records.push_back([&h[..], body].concat());
    held.bytes += HEADER_LEN + body.len();
    if !held.drainer {
        if let Some(me) = shared.this.get().and_then(std::sync::Weak::upgrade) {
            let sink = sink.clone();
            held.drainer = shared
                .roles
                .spawn(Role::Delivery, "tagwired-held", move || {
                    held_drainer(&me, &sink)
                })
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
fn held_drainer(shared: &Arc<Shared>, sink: &Sink) {
    loop {
        {
            let mut h = lock(&sink.held);
            if h.records.is_empty() || sink.gone.load(Ordering::Acquire) || shared.is_stopping() {
                h.drainer = false;
                return;
            }
        }
        // (The bound only lets the loop see a stopping daemon or a tag
        // that went away.)
        if !sink.ring.wait_lossless_room(MAX_SLEEP) {
            continue;
        }
        drain_held(shared);
        if let Some(d) = shared.delivery.get() {
            d.room_made();
        }
    }
}

/// Writes what lossless subscribers now have room for of the messages held
/// back for them. Free while nothing is held.
/// Returns each tag it looked at with its room now (`None`: nothing held).
pub(crate) fn drain_held(shared: &Shared) -> Vec<(TagId, Option<u32>)> {
    let mut rooms = Vec::new();
    if shared.stats.held_now.load(Ordering::Relaxed) == 0 {
        return rooms;
    }
    let holding: Vec<(TagId, Arc<Sink>)> = {
        let st = shared.lock();
        st.sinks
            .iter()
            .filter(|(_, s)| !lock(&s.held).records.is_empty())
            .map(|(id, s)| (*id, s.clone()))
            .collect()
    };
    let mut done_blobs = Vec::new();
    for (id, sink) in holding {
        let mut h = lock(&sink.held);
        if sink.gone.load(Ordering::Acquire) {
            continue;
        }
        let mut n = 0u64;
        while let Some(r) = h.records.front() {
            if let Ok(None) = sink.ring.publish_lossless_quietly(&[r]) {
                break;
            }
            if let Some(b) = blob::blob_of(r) {
                done_blobs.push((id, b));
            }
            let len = r.len();
            h.bytes -= len;
            h.records.pop_front();
            n += 1;
        }
        if n > 0 {
            sink.ring.wake_readers();
        }
        shared.stats.held_now.fetch_sub(n, Ordering::Relaxed);
        let empty = h.records.is_empty();
        rooms.push((id, (!empty).then(|| h.room(sink.ring.shape().slots))));
    }
    if !done_blobs.is_empty() {
        let mut st = shared.lock();
        for (id, b) in done_blobs {
            if let Some(store) = st.blobs.get_mut(&id) {
                store.done(Owner::Inbound, b);
            }
        }
    }
    rooms
}

fn blob_fd(payload: &[u8]) -> Option<OwnedFd> {
    tagwire_unix::sealed_memfd("tagwire-blob", payload).ok()
}
