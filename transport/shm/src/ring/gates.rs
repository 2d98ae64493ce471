//! Gates: a reader's hold on the ring that gated writers do not lap.
//!
//! A gate is a position and an owner word in the ring's header. A gated
//! writer ([`Ring::publish_gated`]) never overwrites a record at or after the
//! lowest gate; lossless gates also bound the daemon's inbound path
//! ([`Ring::lossless_room`]). The owner word is each gate's lock (taken first,
//! freed last), and gates of dead owners are reaped. The daemon can hold a
//! lossless gate for a subscriber before its subscription is visible
//! ([`Ring::hold_lossless_gate_for`]), which the subscriber then takes over.

use std::time::{Duration, Instant};

use rustix::thread::futex;

use super::*;

/// A reader's hold on a ring: gated writers do not overwrite records at or
/// after its position. Released when dropped.
#[derive(Debug)]
pub struct Gate {
    pub(super) ring: Ring,
    pub(super) at: GateAt,
}

impl Gate {
    /// Moves the gate to `position` (the next record its holder needs) and
    /// wakes the writers waiting for it once they have the room they wait
    /// for: a writer that had to wait waits for a refill step (a quarter of
    /// the ring), so one wake-up lets it write a run of records instead of
    /// one record per system call on each side.
    pub fn advance(&self, position: u64) {
        let idx = match &self.at {
            GateAt::Ctl(idx) => *idx,
            GateAt::Seat(seat) => return Gate::advance_seat(seat, position),
        };
        let position = position.min(MAX_INDEX);
        self.ring
            .gate_pos(idx)
            .store(position + 1, Ordering::Release);
        fence(Ordering::SeqCst);
        if self.ring.gate_waiters().load(Ordering::Acquire) == 0 {
            return;
        }
        let want = self.ring.gate_want().load(Ordering::Relaxed);
        if position >= want && self.ring.min_gate(false).is_none_or(|g| g >= want) {
            self.ring.ring_gate_bell();
        }
    }

    /// Moves the gate as [`Gate::advance`] to `position` would, but lets
    /// gated writers run at most `lead` records ahead of `position`: a
    /// paced stream's forwarder holds its publisher back this way, so that
    /// what the network may not take yet waits in the publisher, not in
    /// the ring. A writer that had to wait waits for half the lead (not a
    /// quarter of the ring, which may be more than the lead lets free).
    /// A lead of 0 lets them write nothing the holder has not read. The
    /// gate never moves back; a `lead` of the ring's slots or more is
    /// [`Gate::advance`].
    pub fn advance_within(&self, position: u64, lead: u64) {
        let GateAt::Ctl(_) = &self.at else {
            return self.advance(position);
        };
        if self.ring.ctl.is_read_only() {
            // (A reader's mapping cannot write the step.)
            return self.advance(position);
        }
        let slots = u64::from(self.ring.shape.slots);
        let step = if lead >= slots {
            0
        } else {
            u32::try_from((lead / 2).max(1)).unwrap_or(u32::MAX)
        };
        // (Written only when it changes: the line is the waiting writers'.)
        let word = self.ring.gate_step();
        let was = word.load(Ordering::Relaxed);
        if was != step {
            word.store(step, Ordering::Relaxed);
            if step != 0 && (was == 0 || step < was) {
                // A writer waiting for room of the larger step may never
                // get it within the shorter lead: it looks again.
                self.ring.ring_gate_bell();
            }
        }
        if step == 0 {
            return self.advance(position);
        }
        // (A lead of 0: nothing written beyond what was read.)
        let held = position.saturating_sub(slots - lead);
        self.advance(held.max(self.position()).min(position));
    }

    /// The gate's position.
    pub fn position(&self) -> u64 {
        let v = match &self.at {
            GateAt::Ctl(idx) => self.ring.gate_pos(*idx).load(Ordering::Acquire),
            GateAt::Seat(seat) => seat.gate_pos().load(Ordering::Acquire),
        };
        v.saturating_sub(1).min(MAX_INDEX)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
impl Gate {
    /// The gate's index in the control segment (a control gate's).
    pub(super) fn idx(&self) -> usize {
        match &self.at {
            GateAt::Ctl(idx) => *idx,
            GateAt::Seat(_) => usize::MAX,
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let idx = match &self.at {
            GateAt::Ctl(idx) => *idx,
            // The daemon frees the gate itself when the subscription ends.
            GateAt::Seat(seat) => return Gate::let_go(seat),
        };
        self.ring.gate_pos(idx).store(0, Ordering::Release);
        self.ring
            .gate_lossless()
            .fetch_and(!(1u32 << idx), Ordering::AcqRel);
        self.ring.gate_pid(idx).store(0, Ordering::Release);
        self.ring.ring_gate_bell();
    }
}

/// The bell a writer sleeps on while a gate holds it.
enum Bell {
    /// The control segment's (the daemon's gates).
    Ctl,
    /// A subscriber's seat's.
    Seat(Arc<Seat>),
}

/// The high bit of a gate's owner word: the gate is held for the process in
/// the low bits (by the daemon, see [`Ring::hold_lossless_gate_for`]) and
/// not taken over yet. Pids stay below 2^22 on Linux.
const HELD_FOR: u32 = 1 << 31;

impl Ring {
    /// Like [`Ring::publish`], but never overwrites a record a gate still
    /// holds: waits up to `wait` for the gates to move, then fails with
    /// [`RingError::Full`] having written nothing. Costs one extra load of a
    /// read-mostly line while no gate is within a lap.
    pub fn publish_gated(&self, parts: &[&[u8]], wait: Duration) -> Result<u64, RingError> {
        self.publish_gated_then(parts, wait, |_| {})
    }

    /// [`Ring::publish_gated`] that calls `committed` with the record's index
    /// after the commit and before the doorbell: a writer that holds the
    /// send ticket (`Ring::ticket`) sends its record there, so that the
    /// readers the doorbell wakes find it sent.
    pub fn publish_gated_then(
        &self,
        parts: &[&[u8]],
        wait: Duration,
        committed: impl FnOnce(u64),
    ) -> Result<u64, RingError> {
        self.publish_gated_with(parts, wait, committed, true)
    }

    /// [`Ring::publish_gated_then`] that wakes no reader after the record
    /// (a writer with several at once calls [`Ring::wake_readers`] after
    /// the last). Readers are still woken before the writer waits for a
    /// gate: a reader asleep would never move it.
    pub fn publish_gated_quietly_then(
        &self,
        parts: &[&[u8]],
        wait: Duration,
        committed: impl FnOnce(u64),
    ) -> Result<u64, RingError> {
        self.publish_gated_with(parts, wait, committed, false)
    }

    fn publish_gated_with(
        &self,
        parts: &[&[u8]],
        wait: Duration,
        committed: impl FnOnce(u64),
        wake: bool,
    ) -> Result<u64, RingError> {
        // The clock is read only when the gates make us wait (a clock read
        // costs as much as the rest of a small publish).
        let mut start: Option<Instant> = None;
        loop {
            let epoch = self.gate_epoch().load(Ordering::Acquire);
            let head = self.head().load(Ordering::Relaxed);
            if epoch != self.gates_seen.epoch.load(Ordering::Relaxed)
                || head >= self.gates_seen.limit.load(Ordering::Relaxed)
            {
                if !wake {
                    self.ring_doorbell();
                }
                let waited = start.get_or_insert_with(Instant::now).elapsed();
                self.wait_for_gates(head, wait.saturating_sub(waited))?;
                self.gates_seen.epoch.store(epoch, Ordering::Relaxed);
            }
            // The claim itself stays below the limit: a writer that lost the
            // last free slot to another waits again rather than lap a gate.
            let below = self.gates_seen.limit.load(Ordering::Relaxed);
            if let Some(i) = self.publish_inner(parts, below)? {
                committed(i);
                if wake {
                    self.ring_doorbell();
                }
                return Ok(i);
            }
        }
    }

    /// The first record index that would lap a lossless gate (`u64::MAX`
    /// while there is none), freeing gates of processes that are gone when
    /// `reap` is set.
    pub(super) fn lossless_limit(&self, reap: bool) -> u64 {
        let mask = self.gate_lossless().load(Ordering::Acquire);
        if mask == 0 {
            return u64::MAX;
        }
        self.min_gate_of(mask, reap)
            .map_or(u64::MAX, |g| g.saturating_add(u64::from(self.shape.slots)))
    }

    /// Attaches a gate at record index `position`. Gated writers will not
    /// overwrite that record or later ones until the gate advances or drops.
    pub fn attach_gate(&self, position: u64) -> Result<Gate, RingError> {
        self.attach(position, false)
    }

    /// [`Ring::attach_gate`] for a subscriber that must lose nothing: the
    /// gate also counts in [`Ring::lossless_room`], which the daemon's
    /// inbound path obeys.
    pub fn attach_lossless_gate(&self, position: u64) -> Result<Gate, RingError> {
        self.attach(position, true)
    }

    /// How many records can be written now without lapping a lossless gate
    /// (`u64::MAX` while there is none). When there is no room, gates of
    /// processes that are gone are freed and the room counted again.
    pub fn lossless_room(&self) -> u64 {
        let room = |reap| match self.lossless_limit(reap) {
            u64::MAX => u64::MAX,
            limit => limit.saturating_sub(self.head_index_clamped()),
        };
        match room(false) {
            0 => room(true),
            r => r,
        }
    }

    /// Waits up to `wait` for room for a record that must not lap a
    /// lossless gate (the daemon's held-back messages): sleeps on the gate
    /// bell, which a lossless subscriber rings once it has read a refill
    /// step past what it held back. Returns whether there is room. Gates of
    /// processes that are gone are freed after a while.
    pub fn wait_lossless_room(&self, wait: Duration) -> bool {
        let slots = u64::from(self.shape.slots);
        let start = Instant::now();
        let mut reap = false;
        loop {
            let bell = self.bell_of(self.gate_lossless().load(Ordering::Acquire));
            let (word, _, want) = self.bell_word(&bell);
            let seen = word.load(Ordering::SeqCst);
            let head = self.head_index_clamped();
            if self.lossless_limit(reap) > head {
                return true;
            }
            let waited = start.elapsed();
            if waited >= wait {
                return false;
            }
            // Wake us when the lowest gate gives a refill step of room.
            let target = (head + self.refill_step()).saturating_sub(slots);
            want.fetch_min(target, Ordering::SeqCst);
            let nap = (wait - waited).min(Duration::from_millis(20));
            self.sleep_on_gate_bell(&bell, seen, nap, || self.lossless_limit(false) <= head);
            reap = start.elapsed() >= DEAD_WRITER;
        }
    }

    /// Waits up to `wait` for the lowest gate to move on from where it is
    /// now (or for no gate to be left), sleeping on the gate bell: what a
    /// writer waits for when the daemon holds its large messages for the
    /// slowest reader. Returns whether it moved.
    pub fn wait_lowest_gate_moves(&self, wait: Duration) -> bool {
        let Some(low) = self.min_gate(false) else {
            return true;
        };
        let start = Instant::now();
        loop {
            let bell = self.bell_of(u32::MAX);
            let (word, _, want) = self.bell_word(&bell);
            let seen = word.load(Ordering::SeqCst);
            let reap = start.elapsed() >= DEAD_WRITER;
            if self.min_gate(reap).is_none_or(|g| g > low) {
                return true;
            }
            let waited = start.elapsed();
            if waited >= wait {
                return false;
            }
            // The holder rings the bell once it is past `low`.
            want.fetch_min(low + 1, Ordering::SeqCst);
            let nap = (wait - waited).min(Duration::from_millis(20));
            self.sleep_on_gate_bell(&bell, seen, nap, || {
                self.min_gate(false).is_some_and(|g| g <= low)
            });
        }
    }

    /// Holds a lossless gate at `position` on behalf of process `pid` (the
    /// daemon does this for a lossless subscriber before its subscription
    /// becomes visible, so no writer can lap it in between). The gate holds
    /// writers back at once; `pid` takes it over with [`Ring::adopt_gate`]
    /// (or the holder frees it with [`Ring::release_held_gate`]). Returns the
    /// gate's index. Reaped like any gate if `pid` dies.
    pub fn hold_lossless_gate_for(&self, position: u64, pid: u32) -> Result<usize, RingError> {
        self.attach_as(position, true, HELD_FOR | (pid & !HELD_FOR))
    }

    /// Takes over the gate `idx` that was held for `pid` (as the holder
    /// reported it) and returns it as this process's own. Fails when the gate
    /// is not held for `pid` any more (released, or taken over already).
    pub fn adopt_gate(&self, idx: usize, pid: u32) -> Result<Gate, RingError> {
        if self.ctl.is_read_only() {
            return Err(RingError::ReadOnly);
        }
        if idx >= GATES {
            return Err(RingError::NoGate);
        }
        self.gate_pid(idx)
            .compare_exchange(
                HELD_FOR | (pid & !HELD_FOR),
                self.pid,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map_err(|_| RingError::NoGate)?;
        Ok(Gate {
            ring: self.clone(),
            at: GateAt::Ctl(idx),
        })
    }

    /// Frees the gate `idx` held for `pid` if nobody took it over; true when
    /// it did.
    pub fn release_held_gate(&self, idx: usize, pid: u32) -> bool {
        if idx >= GATES
            || self.ctl.is_read_only()
            || self
                .gate_pid(idx)
                .compare_exchange(
                    HELD_FOR | (pid & !HELD_FOR),
                    HELD_FOR,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
        {
            return false;
        }
        // Ours now (`HELD_FOR` alone names no process): free it in the
        // order a holder does, and wake writers waiting on it.
        self.gate_pos(idx).store(0, Ordering::Release);
        self.gate_seat(idx).store(0, Ordering::Release);
        self.gate_lossless()
            .fetch_and(!(1u32 << idx), Ordering::AcqRel);
        self.gate_pid(idx).store(0, Ordering::Release);
        self.ring_gate_bell();
        true
    }

    pub(super) fn attach(&self, position: u64, lossless: bool) -> Result<Gate, RingError> {
        let idx = self.attach_as(position, lossless, self.pid)?;
        Ok(Gate {
            ring: self.clone(),
            at: GateAt::Ctl(idx),
        })
    }

    pub(super) fn attach_as(
        &self,
        position: u64,
        lossless: bool,
        owner: u32,
    ) -> Result<usize, RingError> {
        if self.ctl.is_read_only() {
            return Err(RingError::ReadOnly);
        }
        if lossless && !self.room_for_lossless() {
            return Err(RingError::NoGate);
        }
        for idx in 0..GATES {
            // The owner word is the gate's lock: taken first and freed last,
            // so a writer freeing gates of dead holders never frees one that
            // is being attached.
            if self
                .gate_pid(idx)
                .compare_exchange(0, owner, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let bit = 1u32 << idx;
            // A link left by the gate's last holder would read a seat.
            self.gate_seat(idx).store(0, Ordering::Release);
            if lossless {
                self.gate_lossless().fetch_or(bit, Ordering::AcqRel);
            } else {
                self.gate_lossless().fetch_and(!bit, Ordering::AcqRel);
            }
            self.gate_pos(idx)
                .store(position.min(MAX_INDEX) + 1, Ordering::Release);
            // Writers that cached "no gate in the way" look again.
            self.gate_epoch().fetch_add(1, Ordering::AcqRel);
            return Ok(idx);
        }
        Err(RingError::NoGate)
    }

    /// Whether a lossless gate may be attached: one gate is always left for
    /// the daemon's forwarder (a gate that is not lossless), so a node's
    /// subscribers can never take away its publishers' back-pressure.
    pub(super) fn room_for_lossless(&self) -> bool {
        let mask = self.gate_lossless().load(Ordering::Acquire);
        let (mut free, mut plain) = (0, 0);
        for idx in 0..GATES {
            if self.gate_pid(idx).load(Ordering::Acquire) == 0 {
                free += 1;
            } else if mask & (1 << idx) == 0 {
                plain += 1;
            }
        }
        free >= 2 || (free == 1 && plain > 0)
    }

    /// Whether a gated writer sleeps at a gate now. The count is kept in
    /// the shared control segment by the writers themselves: good for
    /// statistics (how long publishers were held back), never for a
    /// decision.
    pub fn writers_waiting(&self) -> bool {
        self.gate_waiters().load(Ordering::Relaxed) > 0
    }

    /// The position of the slowest gate (the next record its holder
    /// needs: every gated reader has passed the records before it), `None`
    /// while no gate is held. Gates of processes that are gone are freed.
    pub fn lowest_gate(&self) -> Option<u64> {
        self.min_gate(true)
    }

    /// Lowest live gate position, freeing gates of dead processes when
    /// `reap` is set.
    pub(super) fn min_gate(&self, reap: bool) -> Option<u64> {
        self.min_gate_of(u32::MAX, reap)
    }

    /// [`Ring::min_gate`] of the gates whose bit is set in `mask`.
    pub(super) fn min_gate_of(&self, mask: u32, reap: bool) -> Option<u64> {
        self.lowest_of(mask, reap).map(|(p, _)| p)
    }

    /// The lowest live gate of `mask` and its index. A gate linked to a
    /// seat this mapping knows is where that seat says.
    pub(super) fn lowest_of(&self, mask: u32, reap: bool) -> Option<(u64, usize)> {
        let reap = reap && !self.ctl.is_read_only();
        // (One load of the seats for the scan: this runs per message on the
        // daemon's inbound path while a lossless subscriber is there.)
        let seats = self.known_seats();
        let mut min: Option<(u64, usize)> = None;
        for idx in 0..GATES {
            if mask & (1 << idx) == 0 {
                continue;
            }
            let v = self.gate_pos(idx).load(Ordering::Acquire);
            if v == 0 {
                continue;
            }
            let pid = self.gate_pid(idx).load(Ordering::Acquire);
            if reap && !process_alive(pid) {
                // Freed in the order a holder frees it: position, lossless
                // bit, then the owner word that lets the gate be taken again.
                if self
                    .gate_pos(idx)
                    .compare_exchange(v, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.gate_seat(idx).store(0, Ordering::Release);
                    self.gate_lossless()
                        .fetch_and(!(1u32 << idx), Ordering::AcqRel);
                    let _ = self.gate_pid(idx).compare_exchange(
                        pid,
                        0,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                }
                continue;
            }
            let p = (self.seat_position(&seats, idx, v) - 1).min(MAX_INDEX);
            if min.is_none_or(|(m, _)| p < m) {
                min = Some((p, idx));
            }
        }
        min
    }

    /// The bell to sleep on for the lowest gate of `mask` to move: its
    /// seat's, when a seat holds it.
    fn bell_of(&self, mask: u32) -> Bell {
        match self.lowest_of(mask, false) {
            Some((_, idx)) => self.linked_seat(idx).map_or(Bell::Ctl, Bell::Seat),
            None => Bell::Ctl,
        }
    }

    fn bell_word<'a>(&'a self, bell: &'a Bell) -> (&'a AtomicU32, &'a AtomicU32, &'a AtomicU64) {
        match bell {
            Bell::Ctl => (self.gate_bell(), self.gate_waiters(), self.gate_want()),
            Bell::Seat(s) => (s.gate_bell(), s.gate_waiters(), s.gate_want()),
        }
    }

    /// Waits until a record claimed at `head` would not lap a gate, refreshing
    /// the writer's cached limit.
    ///
    /// A writer that finds no room waits for a refill step of it (see
    /// [`Gate::advance`]), not for one slot.
    pub(super) fn wait_for_gates(&self, head: u64, wait: Duration) -> Result<(), RingError> {
        let slots = u64::from(self.shape.slots);
        let start = Instant::now();
        // (Clamped: a corrupt `head` must not make the sums below overflow.)
        let mut head = head.min(MAX_INDEX);
        let mut reap = false;
        let mut margin = 0;
        loop {
            let bell = self.bell_of(u32::MAX);
            let (word, _, want) = self.bell_word(&bell);
            let seen = word.load(Ordering::SeqCst);
            let limit = self
                .min_gate(reap)
                .map_or(MAX_INDEX, |g| g.saturating_add(slots));
            // (The room waited for is the step as it is now: a holder may
            // have shortened it since.)
            margin = margin.min(self.refill_step() - 1);
            if head + margin < limit {
                self.gates_seen.limit.store(limit, Ordering::Relaxed);
                return Ok(());
            }
            margin = self.refill_step() - 1;
            // The lowest gate position that gives us the room we wait for:
            // gate holders wake us when they reach it.
            let target = (head + margin + 1).saturating_sub(slots);
            want.fetch_min(target, Ordering::SeqCst);
            let waited = start.elapsed();
            if waited >= wait {
                // Out of patience for a refill step: one free slot will do.
                if head < limit {
                    self.gates_seen.limit.store(limit, Ordering::Relaxed);
                    return Ok(());
                }
                return Err(RingError::Full { waited });
            }
            // Sleep on the gate bell (a holder that advances rings it), but
            // wake now and then to free the gates of dead holders.
            let nap = (wait - waited).min(Duration::from_millis(20));
            self.sleep_on_gate_bell(&bell, seen, nap, || {
                self.min_gate(false)
                    .map_or(MAX_INDEX, |g| g.saturating_add(slots))
                    <= head + margin
            });
            reap = start.elapsed() >= DEAD_WRITER;
            head = self.head_index_clamped();
        }
    }

    /// How far a gate moves between wake-ups of waiting writers, and so how
    /// much room a writer that had to wait waits for (at least one slot):
    /// a quarter of the ring, or less where a holder asks for less
    /// ([`Gate::advance_within`]).
    pub(super) fn refill_step(&self) -> u64 {
        let quarter = (u64::from(self.shape.slots) / 4).max(1);
        match u64::from(self.gate_step().load(Ordering::Relaxed)) {
            0 => quarter,
            asked => asked.min(quarter),
        }
    }

    /// Sleeps on the gate bell for up to `nap`, unless it moved from `seen`
    /// or `still_waiting` (checked after registering as a waiter, so a
    /// holder that moves meanwhile either sees us or is seen) is false.
    fn sleep_on_gate_bell(
        &self,
        bell: &Bell,
        seen: u32,
        nap: Duration,
        still_waiting: impl FnOnce() -> bool,
    ) {
        let (word, waiters, _) = self.bell_word(bell);
        waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if still_waiting() {
            let ts = rustix::time::Timespec {
                tv_sec: nap.as_secs() as i64,
                tv_nsec: i64::from(nap.subsec_nanos()),
            };
            let _ = futex::wait(word, futex::Flags::empty(), seen, Some(&ts));
        }
        waiters.fetch_sub(1, Ordering::SeqCst);
    }

    pub(super) fn ring_gate_bell(&self) {
        if self.ctl.is_read_only() {
            return;
        }
        fence(Ordering::SeqCst);
        if self.gate_waiters().load(Ordering::Relaxed) > 0 {
            // Woken writers that sleep on say again what they want.
            self.gate_want().store(u64::MAX, Ordering::SeqCst);
            self.gate_bell().fetch_add(1, Ordering::SeqCst);
            let _ = futex::wake(self.gate_bell(), futex::Flags::empty(), i32::MAX as u32);
        }
    }

    pub(super) fn gate_epoch(&self) -> &AtomicU32 {
        self.ctl_u32(GATE_EPOCH_OFF)
    }

    pub(super) fn gate_bell(&self) -> &AtomicU32 {
        self.ctl_u32(GATE_BELL_OFF)
    }

    pub(super) fn gate_waiters(&self) -> &AtomicU32 {
        self.ctl_u32(GATE_WAITERS_OFF)
    }

    pub(super) fn gate_step(&self) -> &AtomicU32 {
        self.ctl_u32(GATE_STEP_OFF)
    }

    pub(super) fn gate_want(&self) -> &AtomicU64 {
        self.ctl_u64(GATE_WANT_OFF)
    }

    pub(super) fn gate_pos(&self, idx: usize) -> &AtomicU64 {
        self.ctl_u64(GATE_POS_OFF + 8 * idx)
    }

    pub(super) fn gate_pid(&self, idx: usize) -> &AtomicU32 {
        self.ctl_u32(GATE_PID_OFF + 4 * idx)
    }

    pub(super) fn gate_lossless(&self) -> &AtomicU32 {
        self.ctl_u32(GATE_LOSSLESS_OFF)
    }
}

/// True unless the process is known to be gone (ESRCH). A pid of another user
/// (EPERM) is alive.
pub(super) fn process_alive(pid: u32) -> bool {
    // A gate held for a process carries its pid under the HELD_FOR bit.
    let Some(p) = rustix::process::Pid::from_raw((pid & !HELD_FOR) as i32) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(p),
        Err(rustix::io::Errno::SRCH)
    )
}
