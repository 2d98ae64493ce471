//! Messages too large for a shared-memory slot.
//!
//! The publisher writes such a message into a memfd it creates and hands the
//! descriptor to the daemon; the ring slot carries only a reference. Readers ask
//! the daemon for the descriptor and `pread` from it (never `mmap`: a publisher
//! that shrank the file could otherwise fault them). The daemon copies nothing; it
//! keeps the most recent descriptors per tag, bounded in count and bytes, so slow
//! readers may find a blob gone and count it as lost.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;

/// Recently published large messages of one tag.
#[derive(Debug, Default)]
pub struct BlobStore {
    next_id: u64,
    bytes: u64,
    kept: VecDeque<(u64, u64, OwnedFd)>,
}

impl BlobStore {
    /// Stores `fd` (holding `len` bytes); evicts the oldest beyond the bounds.
    pub fn put(&mut self, fd: OwnedFd, len: u64, max_count: usize, max_bytes: u64) -> u64 {
        self.next_id += 1;
        self.kept.push_back((self.next_id, len, fd));
        self.bytes += len;
        while self.kept.len() > max_count.max(1) || (self.bytes > max_bytes && self.kept.len() > 1)
        {
            if let Some((_, l, _)) = self.kept.pop_front() {
                self.bytes -= l;
            }
        }
        self.next_id
    }

    /// The descriptor and length of blob `id`, if still kept.
    pub fn get(&self, id: u64) -> Option<(&OwnedFd, u64)> {
        self.kept
            .iter()
            .find(|(i, _, _)| *i == id)
            .map(|(_, l, f)| (f, *l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd() -> OwnedFd {
        rustix::fs::memfd_create("b", rustix::fs::MemfdFlags::CLOEXEC).unwrap()
    }

    #[test]
    fn oldest_blobs_are_evicted_by_count_and_bytes() {
        let mut s = BlobStore::default();
        let a = s.put(fd(), 10, 2, 100);
        let b = s.put(fd(), 10, 2, 100);
        let c = s.put(fd(), 10, 2, 100);
        assert!(s.get(a).is_none());
        assert!(s.get(b).is_some() && s.get(c).is_some());
        let d = s.put(fd(), 95, 2, 100);
        assert!(s.get(c).is_none(), "byte bound evicts");
        assert_eq!(s.get(d).map(|(_, l)| l), Some(95));
    }
}
