//! The readers' side of the ring: cursors, reads (and their validation
//! against a writer of a later lap), the depth a reader keeps, and sleeping
//! on the doorbell (see the ring's module docs for the protocol).

use std::time::{Duration, Instant};

use rustix::thread::futex;

use super::*;

/// How long a reader that cannot register as a sleeper naps.
const NAP: Duration = Duration::from_millis(5);

impl Ring {
    /// A cursor at the current end of the ring (sees only records published after
    /// this call), keeping at most `depth` unread records (clamped to the slot count).
    pub fn cursor(&self, depth: u32) -> Cursor {
        Cursor {
            next: self.head_index_clamped(),
            depth: u64::from(depth.clamp(1, self.shape.slots)),
            pending_since: None,
            idle: false,
        }
    }

    /// A cursor at record index `position` (e.g. where a reader registered),
    /// keeping at most `depth` unread records.
    pub fn cursor_from(&self, position: u64, depth: u32) -> Cursor {
        Cursor {
            next: position,
            depth: u64::from(depth.clamp(1, self.shape.slots)),
            pending_since: None,
            idle: false,
        }
    }

    /// Copies the next record for `cur` into `out` (replacing its contents).
    ///
    /// A waiting reader polls only the stamp of the slot it wants (see
    /// [`Ring::available`]); once the record is committed, the read copies it
    /// and re-reads the slot's claim word to validate the copy.
    pub fn read(&self, cur: &mut Cursor, out: &mut Vec<u8>) -> ReadOutcome {
        self.read_split(cur, &mut [], out).0
    }

    /// Like [`Ring::read`], but copies the record's first `prefix.len()`
    /// bytes into `prefix` and only the rest into `rest`: a reader that
    /// parses a fixed header keeps the payload at the start of its buffer
    /// without moving it afterwards. With [`ReadOutcome::Record`] comes the
    /// record's length: when it is shorter than `prefix`, only that much of
    /// `prefix` was written and `rest` is empty. (0 with the other outcomes.)
    pub fn read_split(
        &self,
        cur: &mut Cursor,
        prefix: &mut [u8],
        rest: &mut Vec<u8>,
    ) -> (ReadOutcome, usize) {
        if cur.next >= MAX_INDEX {
            return (ReadOutcome::Empty, 0);
        }
        let slot = self.slot(cur.next);
        let stamp = self.stamp(slot);
        let want = 2 * cur.next + 2;
        let s1 = stamp.load(Ordering::Acquire);
        if s1 < want {
            // A reader that keeps up finds its record not there yet once per
            // record: that first time it does not load `head` (a line every
            // writer updates, whose every load by a reader costs the next
            // writer a transfer). A writer that claimed the record and died
            // or stalled is noticed on the read after. Being beyond the
            // depth is seen from a slot, so it is reported at once.
            if !cur.idle && cur.pending_since.is_none() && !self.beyond_depth(cur) {
                cur.idle = true;
                return (ReadOutcome::Empty, 0);
            }
            let head = self.head_index_clamped();
            if cur.next >= head {
                cur.pending_since = None;
                return (ReadOutcome::Empty, 0);
            }
            if head - cur.next > cur.depth {
                return (self.drop_beyond_depth(cur, head), 0);
            }
            return (self.pending(cur, head), 0);
        }
        if s1 > want {
            return (self.skip_overwritten(cur), 0);
        }
        if self.beyond_depth(cur) {
            let head = self.head_index_clamped();
            return (self.drop_beyond_depth(cur, head), 0);
        }
        let len = (self.len_word(slot).load(Ordering::Relaxed) as usize).min(self.max_record());
        let split = len.min(prefix.len());
        rest.clear();
        rest.reserve(len - split);
        // SAFETY: `len` is clamped to the slot's capacity; `prefix` holds `split`
        // bytes and `rest` has room for the other `len - split`. A concurrent
        // overwrite is detected by the validation below, in which case the
        // copied bytes are discarded.
        unsafe {
            let src = self.data(slot);
            std::ptr::copy_nonoverlapping(src, prefix.as_mut_ptr(), split);
            std::ptr::copy_nonoverlapping(src.add(split), rest.as_mut_ptr(), len - split);
            rest.set_len(len - split);
        }
        // Seqlock validation: a writer marks the slot's claim word with its
        // record index before touching the slot's bytes, so if the word still
        // names ours after the copy, the copy is intact. The claim word wraps
        // after 2^32 records (a reader stopped mid-copy could meet a writer
        // whose index has our low half); the stamp, which any later lap has
        // moved past ours even while writing, settles that.
        fence(Ordering::Acquire);
        if self.claim_word(slot).load(Ordering::Relaxed) != cur.next as u32
            || stamp.load(Ordering::Relaxed) != want
        {
            rest.clear();
            return (self.skip_overwritten(cur), 0);
        }
        cur.next += 1;
        cur.pending_since = None;
        cur.idle = false;
        (ReadOutcome::Record, len)
    }

    /// True when a read would not return [`ReadOutcome::Empty`] or `Pending`
    /// (a record, or a loss to report, is there). Touches no writer-hot line.
    pub fn available(&self, cur: &Cursor) -> bool {
        if cur.next >= MAX_INDEX {
            return false;
        }
        self.stamp(self.slot(cur.next)).load(Ordering::Acquire) >= 2 * cur.next + 2
            || self.beyond_depth(cur)
    }

    /// Drops every unread record for `cur` (purge). Returns how many.
    pub fn purge(&self, cur: &mut Cursor) -> u64 {
        let head = self.head_index_clamped();
        let n = head.saturating_sub(cur.next).min(cur.depth);
        cur.next = cur.next.max(head);
        cur.pending_since = None;
        n
    }

    /// Blocks until a record may be available for `cur`, the timeout passes, or a
    /// spurious wake-up. Spins for `spin` first (busy-poll mode), then sleeps on the
    /// futex doorbell. Returns immediately if something is already there.
    /// Returns whether it went to sleep (or napped).
    pub fn wait(&self, cur: &Cursor, timeout: Option<Duration>, spin: Duration) -> bool {
        if !spin.is_zero() {
            let start = Instant::now();
            let mut n = 0u32;
            while start.elapsed() < spin {
                for _ in 0..64 {
                    if self.available(cur) {
                        return false;
                    }
                    std::hint::spin_loop();
                }
                n += 1;
                // On two cores a spinning reader can starve the writer it waits for.
                if n % 16 == 0 {
                    std::thread::yield_now();
                }
            }
        }
        // A subscriber registers in its own seat; the daemon's readers in
        // the control segment. A reader with neither (a read-only mapping
        // without a seat) cannot register and naps instead.
        let own = self.own_seat.as_deref();
        let waiters = match own {
            Some(seat) => seat.sleepers(),
            None if self.ctl.is_read_only() => {
                let nap = timeout.map_or(NAP, |t| t.min(NAP));
                if self.available(cur) {
                    return false;
                }
                std::thread::sleep(nap);
                return true;
            }
            None => self.waiters(),
        };
        // Read the doorbells before registering: a publisher that sees our
        // registration bumps the control one (and our own process the
        // seat's), so the futex wait below then returns at once.
        let seen = self.doorbell().load(Ordering::SeqCst);
        let seen_own = own.map(|s| s.doorbell().load(Ordering::SeqCst));
        waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let mut timeout = timeout;
        // A claimed-but-uncommitted record may belong to a dead writer: wake up in
        // time to skip it.
        if cur.pending_since.is_some() || self.head_index_clamped() > cur.next {
            timeout = Some(timeout.map_or(DEAD_WRITER, |t| t.min(DEAD_WRITER)));
        }
        let slept = !self.available(cur);
        if slept {
            match (own, seen_own) {
                (Some(seat), Some(seen_own)) => {
                    self.sleep_seated(seat, (seen, seen_own), timeout);
                }
                _ => {
                    let ts = timeout.map(|t| rustix::time::Timespec {
                        tv_sec: t.as_secs().min(i64::MAX as u64 / 2) as i64,
                        tv_nsec: i64::from(t.subsec_nanos()),
                    });
                    // Shared (not PRIVATE) futex: the word is in memory shared
                    // between processes. EAGAIN (doorbell moved), ETIMEDOUT and
                    // EINTR all just return to the caller, which re-reads.
                    let _ = futex::wait(self.doorbell(), futex::Flags::empty(), seen, ts.as_ref());
                }
            }
        }
        waiters.fetch_sub(1, Ordering::SeqCst);
        slept
    }

    /// True when record `next + depth` has been claimed: the reader is more
    /// than `depth` records behind. (With depth = slots that record shares the
    /// slot of `next`, and the overwrite check covers it.)
    fn beyond_depth(&self, cur: &Cursor) -> bool {
        if cur.depth >= u64::from(self.shape.slots) {
            return false;
        }
        let ahead = cur.next + cur.depth;
        self.stamp(self.slot(ahead)).load(Ordering::Acquire) > 2 * ahead
    }

    fn drop_beyond_depth(&self, cur: &mut Cursor, head: u64) -> ReadOutcome {
        let target = head.saturating_sub(cur.depth).max(cur.next + 1);
        let lost = target - cur.next;
        cur.next = target;
        cur.pending_since = None;
        ReadOutcome::Lost(lost)
    }

    fn pending(&self, cur: &mut Cursor, head: u64) -> ReadOutcome {
        let now = Instant::now();
        let since = *cur.pending_since.get_or_insert(now);
        // Skip a record whose writer stalled for long while later ones committed.
        if head > cur.next + 1 && now.duration_since(since) >= DEAD_WRITER {
            let later = self.slot(cur.next + 1);
            if self.stamp(later).load(Ordering::Acquire) >= 2 * (cur.next + 1) + 2 {
                cur.next += 1;
                cur.pending_since = None;
                return ReadOutcome::Lost(1);
            }
        }
        ReadOutcome::Pending
    }

    fn skip_overwritten(&self, cur: &mut Cursor) -> ReadOutcome {
        // We fell a lap behind: resume at the oldest record within our depth. If a
        // writer is overwriting that one right now, the next read's validation
        // catches it and reports it lost too.
        let head = self.head_index_clamped();
        self.drop_beyond_depth(cur, head)
    }
}
