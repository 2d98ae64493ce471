//! Looking at one record without a cursor (the daemon finds which large
//! messages the records still in the ring refer to).

use super::*;

/// What [`Ring::peek`] found at a record index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peek {
    /// The record is there; this is its whole length (the prefix holds
    /// as much of it as fits).
    Record(usize),
    /// Not claimed or not committed yet.
    NotYet,
    /// Overwritten by a later lap.
    Gone,
}

impl Ring {
    /// Copies the first `prefix.len()` bytes of record `index` into
    /// `prefix` without a cursor and without waiting (the daemon looks up
    /// which large messages the records still in the ring refer to). Only a
    /// committed record still in its slot is copied, validated like a read.
    pub fn peek(&self, index: u64, prefix: &mut [u8]) -> Peek {
        if index >= MAX_INDEX {
            return Peek::NotYet;
        }
        let slot = self.slot(index);
        let stamp = self.stamp(slot);
        let want = 2 * index + 2;
        let s1 = stamp.load(Ordering::Acquire);
        if s1 < want {
            return Peek::NotYet;
        }
        if s1 > want {
            return Peek::Gone;
        }
        let len = (self.len_word(slot).load(Ordering::Relaxed) as usize).min(self.max_record());
        let n = len.min(prefix.len());
        // SAFETY: `n` is at most the slot's capacity and `prefix`'s length; a
        // concurrent overwrite is detected below and the copy discarded.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data(slot), prefix.as_mut_ptr(), n);
        }
        fence(Ordering::Acquire);
        if self.claim_word(slot).load(Ordering::Relaxed) != index as u32
            || stamp.load(Ordering::Relaxed) != want
        {
            return Peek::Gone;
        }
        Peek::Record(len)
    }
}
