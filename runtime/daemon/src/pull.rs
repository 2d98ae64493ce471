//! The pull manager (push-pull model): tags with a history get a keeper
//! thread that reads the tag's ring like a subscriber and keeps its last
//! messages in a [`History`] (bounded by count and bytes; large messages
//! are fetched from the blob store). The history holds every message that
//! reaches this node's ring, so it outlives the publishers. The keeper
//! holds a gate on the ring (as a forwarder does for a reliable stream):
//! a publisher on this node that gets a lap ahead of it waits instead of
//! overwriting a message not yet kept. Messages arriving from other nodes
//! are written without a gate; if they lap the keeper, its `lost` counts
//! them.
//!
//! A pull first catches the keeper up with the ring (under the keeper's
//! lock), so it covers everything published before it was asked: a
//! subscriber that subscribes and then pulls sees no gap between the two
//! (its library drops the overlap). The answer travels in a sealed memfd
//! of records `[u32 LE length][frame header + payload]`. A pull for a tag
//! this node keeps no history of is asked of every live peer
//! (`peers::pull_remote`, the same records in a `PeerMessage::Pulled`).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tagwire_proto::History;
use tagwire_shm::{Cursor, Gate, ReadOutcome, Ring};
use tagwire_wire::control::HistoryQuery;
use tagwire_wire::frame::{FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::TagName;

use crate::{lock, Shared};

/// Payload bytes a history keeps when the admin command names no bound.
pub const DEFAULT_HISTORY_BYTES: usize = 16 << 20;

/// The keepers of this daemon, by tag.
#[derive(Debug, Default)]
pub(crate) struct Keepers {
    map: Mutex<HashMap<TagName, Arc<Keeper>>>,
}

#[derive(Debug)]
pub(crate) struct Keeper {
    ring: Ring,
    state: Mutex<KeeperState>,
    stop: AtomicBool,
}

#[derive(Debug)]
struct KeeperState {
    cursor: Cursor,
    history: History,
    /// Messages the ring overwrote before the keeper read them.
    lost: u64,
    buf: Vec<u8>,
    blob: Vec<u8>,
    /// Holds publishers on this node back rather than let them overwrite a
    /// message the keeper has not copied (a history loses nothing local).
    gate: Option<Gate>,
}

impl Keepers {
    /// Starts, resizes (or with `depth` 0 stops) the history of `tag`,
    /// whose ring is `ring` (a private mapping the keeper owns). Not called
    /// under the state lock (a keeper takes that lock to read blobs).
    pub(crate) fn set(
        &self,
        shared: &Arc<Shared>,
        tag: &TagName,
        ring: Option<Ring>,
        depth: usize,
        max_bytes: usize,
    ) -> Result<(), String> {
        let mut map = lock(&self.map);
        if depth == 0 {
            if let Some(k) = map.remove(tag) {
                k.stop.store(true, Ordering::Release);
            }
            return Ok(());
        }
        if let Some(k) = map.get(tag) {
            lock(&k.state).history.set_limits(depth, max_bytes);
            return Ok(());
        }
        let ring = ring.ok_or_else(|| format!("tag {tag} has no ring on this node"))?;
        let cursor = ring.cursor_from(ring.head_index(), ring.shape().slots);
        let gate = ring
            .attach_gate(cursor.position())
            .map_err(|e| tracing::warn!(tag = %tag, error = %e, "history kept without a gate: a fast publisher may lap it"))
            .ok();
        let keeper = Arc::new(Keeper {
            ring,
            state: Mutex::new(KeeperState {
                cursor,
                history: History::new(depth, max_bytes),
                lost: 0,
                buf: Vec::new(),
                blob: Vec::new(),
                gate,
            }),
            stop: AtomicBool::new(false),
        });
        let (s, k, t) = (shared.clone(), keeper.clone(), tag.clone());
        shared
            .roles
            .spawn(crate::roles::Role::Local, "tagwired-pull", move || {
                keep(&s, &k, &t)
            })
            .map_err(|e| format!("cannot start the history keeper: {e}"))?;
        map.insert(tag.clone(), keeper);
        Ok(())
    }

    /// Stops the keeper of a destroyed tag.
    pub(crate) fn drop_tag(&self, tag: &TagName) {
        if let Some(k) = lock(&self.map).remove(tag) {
            k.stop.store(true, Ordering::Release);
        }
    }

    /// The messages `query` selects, as a sealed memfd of records, with
    /// their count and length; `None` if the tag keeps no history here.
    pub(crate) fn pull(
        &self,
        shared: &Shared,
        tag: &TagName,
        query: HistoryQuery,
    ) -> Option<std::io::Result<(u32, u64, OwnedFd)>> {
        let (count, out) = self.records(shared, tag, query, usize::MAX)?;
        Some(sealed(&out).map(|fd| (count, out.len() as u64, fd)))
    }

    /// The messages `query` selects as records `[u32 LE length][frame
    /// header + payload]`, oldest first, and their count; the oldest are
    /// left out beyond `max_len` bytes. `None` if the tag keeps no history
    /// here.
    pub(crate) fn records(
        &self,
        shared: &Shared,
        tag: &TagName,
        query: HistoryQuery,
        max_len: usize,
    ) -> Option<(u32, Vec<u8>)> {
        let keeper = lock(&self.map).get(tag).cloned()?;
        let mut st = lock(&keeper.state);
        st.catch_up(shared, &keeper.ring, tag);
        let picked: Vec<_> = st.history.query(query).collect();
        let record_len = |p: &[u8]| 4 + HEADER_LEN + p.len();
        let mut total: usize = picked.iter().map(|(_, p)| record_len(p)).sum();
        let mut skip = 0;
        while total > max_len && skip < picked.len() {
            total -= record_len(picked[skip].1);
            skip += 1;
        }
        let mut out = Vec::with_capacity(total);
        let mut count = 0u32;
        let mut h = [0u8; HEADER_LEN];
        for (header, payload) in &picked[skip..] {
            let mut header = **header;
            header.flags &= !FLAG_BLOB;
            let _ = header.emit(&mut h);
            // Payloads in a history are at most its byte bound, far below 4 GiB.
            out.extend_from_slice(&((HEADER_LEN + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&h);
            out.extend_from_slice(payload);
            count += 1;
        }
        Some((count, out))
    }
}

impl KeeperState {
    /// Moves everything the ring holds past the cursor into the history.
    fn catch_up(&mut self, shared: &Shared, ring: &Ring, tag: &TagName) {
        loop {
            match ring.read(&mut self.cursor, &mut self.buf) {
                ReadOutcome::Record => {}
                ReadOutcome::Lost(n) => {
                    self.lost += n;
                    continue;
                }
                ReadOutcome::Empty | ReadOutcome::Pending => {
                    if let Some(g) = &self.gate {
                        g.advance(self.cursor.position());
                    }
                    return;
                }
            }
            let Ok((header, body)) = FrameHeader::parse(&self.buf) else {
                continue;
            };
            if header.flags & FLAG_BLOB != 0 {
                if crate::blob::read_blob(shared, tag, body, &mut self.blob).is_some() {
                    self.history.push(header, &self.blob);
                }
            } else {
                self.history.push(header, body);
            }
        }
    }
}

fn keep(shared: &Shared, k: &Keeper, tag: &TagName) {
    while !k.stop.load(Ordering::Acquire) && !shared.is_stopping() {
        let cursor = {
            let mut st = lock(&k.state);
            st.catch_up(shared, &k.ring, tag);
            st.cursor.clone()
        };
        k.ring
            .wait(&cursor, Some(Duration::from_millis(100)), Duration::ZERO);
    }
}

pub(crate) fn sealed(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    tagwire_unix::sealed_memfd("tagwire-pull", bytes)
}
