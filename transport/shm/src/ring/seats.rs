//! Seats: what one subscriber writes, in a segment of its own.
//!
//! A subscriber maps a ring's records and its control segment read-only.
//! What it must write (that it is asleep, how far its lossless gate has
//! read, the bell its writers sleep on while it holds them) lives in its
//! **seat**: a small memfd the daemon creates for that subscription and
//! gives to it and to the tag's writers, never to another reader. A hostile
//! subscriber can therefore lie only about itself.
//!
//! ```text
//! seat layout (SEAT_LEN bytes)
//!   0  magic "TAGWSEAT" (u64) | index u32 | generation u32   — the daemon's
//!  16  the ring's id (u64): a seat of another ring (an earlier daemon's,
//!        whose directory may hold the same index and generation) is refused
//!  64  doorbell (AtomicU32 futex word) | sleepers (AtomicU32)
//! 128  gate position (AtomicU64): record index + 1 the subscriber needs
//!        next; 0 = not moved yet (its gate's position in the control
//!        segment holds), u64::MAX = let go
//! 192  gate bell (AtomicU32) | gate waiters (AtomicU32)
//! 200  gate want (AtomicU64), as the control segment's
//!
//! directory (in the control segment, written by the daemon only)
//!   RING_ID_OFF     u64, the ring's id (time, pid and a counter)
//!   SEAT_EPOCH_OFF  AtomicU32, bumped after every change of the directory
//!   SEAT_GEN_OFF    AtomicU32, the last generation handed out
//!   GATE_SEAT_OFF   GATES × AtomicU32: seat index + 1 whose position the
//!                   gate reads, 0 = the gate's own
//!   SEATS_OFF       MAX_SEATS × AtomicU64: generation << 32 | 1 while the
//!                   seat is live, 0 = free
//! ```
//!
//! Writers ring the control segment's doorbell when the sleepers of any
//! seat they know is non-zero, and also whenever the directory changed
//! since they last read it (a seat they have not mapped yet may hold a
//! sleeper): a subscriber whose seat reaches a writer late loses no
//! wake-up. A seat reaches writers through their daemon
//! ([`Ring::add_seat`]). A subscriber sleeps on both the control segment's
//! doorbell and its seat's (`futex_waitv`), so its own process can wake it
//! ([`Ring::wake_readers`]) without writing what others read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::thread::futex;

use super::*;

/// How many subscriptions a ring's directory holds at once.
pub const MAX_SEATS: usize = 256;

const SEAT_MAGIC: u64 = u64::from_le_bytes(*b"TAGWSEAT");
const SEAT_LEN: usize = 256;
const S_INDEX: usize = 8;
const S_GEN: usize = 12;
const S_RING: usize = 16;
const S_DOORBELL: usize = 64;
const S_SLEEPERS: usize = 68;
const S_GATE_POS: usize = 128;
const S_GATE_BELL: usize = 192;
const S_GATE_WAITERS: usize = 196;
const S_GATE_WANT: usize = 200;

/// The ring's id in the control segment (free header bytes).
pub(super) const RING_ID_OFF: usize = 8;
pub(super) const SEAT_EPOCH_OFF: usize = OWNERS_OFF;
pub(super) const SEAT_GEN_OFF: usize = OWNERS_OFF + 4;
pub(super) const GATE_SEAT_OFF: usize = OWNERS_OFF + 64;
pub(super) const SEATS_OFF: usize = OWNERS_OFF + 128;
/// Length of the control segment.
pub(super) const CTL_LEN: usize = SEATS_OFF + 8 * MAX_SEATS;

/// A gate position in a seat meaning "holds nothing any more".
const LET_GO: u64 = u64::MAX;

/// A ring id no other ring of this boot is likely to have: the time, the
/// pid and a counter (an identity, not a secret).
pub(super) fn new_ring_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    (t ^ (u64::from(std::process::id()) << 40) ^ n.rotate_left(20)) | 1
}

/// One subscription's seat (see the module docs).
#[derive(Debug)]
pub struct Seat {
    seg: Segment,
    index: usize,
    generation: u32,
    ring: u64,
}

impl Seat {
    fn create(index: usize, generation: u32, ring: u64) -> Result<Self, RingError> {
        let seg = Segment::create("tagwire-seat", SEAT_LEN)?;
        // SAFETY: fresh, zeroed, SEAT_LEN bytes, not shared yet.
        unsafe {
            seg.as_ptr().cast::<u64>().write(SEAT_MAGIC);
            seg.as_ptr().add(S_INDEX).cast::<u32>().write(index as u32);
            seg.as_ptr().add(S_GEN).cast::<u32>().write(generation);
            seg.as_ptr().add(S_RING).cast::<u64>().write(ring);
            seg.as_ptr().add(S_GATE_WANT).cast::<u64>().write(u64::MAX);
        }
        Ok(Self {
            seg,
            index,
            generation,
            ring,
        })
    }

    /// Maps a seat received from the daemon, validating its header (read
    /// once; a seat is written by its subscriber, whom nobody trusts).
    pub fn open(seg: Segment) -> Result<Self, RingError> {
        if seg.len() < SEAT_LEN || seg.is_read_only() {
            return Err(ShmError::BadHeader("seat too small or not writable").into());
        }
        // SAFETY: at least SEAT_LEN bytes (checked above), read by value.
        let (magic, index, generation, ring) = unsafe {
            (
                seg.as_ptr().cast::<u64>().read_volatile(),
                seg.as_ptr().add(S_INDEX).cast::<u32>().read_volatile(),
                seg.as_ptr().add(S_GEN).cast::<u32>().read_volatile(),
                seg.as_ptr().add(S_RING).cast::<u64>().read_volatile(),
            )
        };
        if magic != SEAT_MAGIC {
            return Err(ShmError::BadHeader("bad seat magic").into());
        }
        let index = index as usize;
        if index >= MAX_SEATS || generation == 0 {
            return Err(ShmError::BadHeader("seat index or generation out of range").into());
        }
        Ok(Self {
            seg,
            index,
            generation,
            ring,
        })
    }

    /// Maps a seat from its descriptor (what the daemon sends), validated
    /// as [`Seat::open`] does.
    pub fn from_fd(fd: std::os::fd::OwnedFd) -> Result<Self, RingError> {
        Self::open(Segment::open(fd)?)
    }

    /// The seat's place in its ring's directory.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The generation the daemon gave it (an index is reused, never a
    /// generation).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The segment (to pass its descriptor on).
    pub fn segment(&self) -> &Segment {
        &self.seg
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is a 4-aligned offset below SEAT_LEN (the constants
        // above), within the mapping (checked at open); lives as long as self.
        unsafe { &*self.seg.as_ptr().add(off).cast::<AtomicU32>() }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        // SAFETY: as `u32_at`, 8-aligned.
        unsafe { &*self.seg.as_ptr().add(off).cast::<AtomicU64>() }
    }

    pub(super) fn doorbell(&self) -> &AtomicU32 {
        self.u32_at(S_DOORBELL)
    }

    pub(super) fn sleepers(&self) -> &AtomicU32 {
        self.u32_at(S_SLEEPERS)
    }

    pub(super) fn gate_pos(&self) -> &AtomicU64 {
        self.u64_at(S_GATE_POS)
    }

    pub(super) fn gate_bell(&self) -> &AtomicU32 {
        self.u32_at(S_GATE_BELL)
    }

    pub(super) fn gate_waiters(&self) -> &AtomicU32 {
        self.u32_at(S_GATE_WAITERS)
    }

    pub(super) fn gate_want(&self) -> &AtomicU64 {
        self.u64_at(S_GATE_WANT)
    }

    /// Bumps the seat's doorbell and wakes its sleeper.
    pub(super) fn ring_doorbell(&self) {
        self.doorbell().fetch_add(1, Ordering::SeqCst);
        let _ = futex::wake(self.doorbell(), futex::Flags::empty(), i32::MAX as u32);
    }
}

/// The seats a writer's mapping knows, as one snapshot swapped whole.
#[derive(Debug)]
pub(super) struct SeatTable {
    snap: arc_swap::ArcSwap<Snapshot>,
    /// Seats received but not live in the directory yet, and the lock of
    /// rebuilding the snapshot.
    edit: Mutex<Vec<Arc<Seat>>>,
    /// The directory epoch last rebuilt for (`u32::MAX`: none yet): a writer
    /// missing a seat rebuilds once per change, not once per record.
    tried: AtomicU32,
}

impl Default for SeatTable {
    fn default() -> Self {
        Self {
            snap: Default::default(),
            edit: Default::default(),
            // None tried yet: the first look rebuilds, even for epoch 0 (a
            // directory never changed). With 0 here a writer of a ring
            // without seats (a tag whose subscribers are all on other
            // nodes) took its snapshot for incomplete for ever and made a
            // wake-up system call with every record.
            tried: AtomicU32::new(u32::MAX),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// The directory epoch this snapshot is complete for; `None` while a
    /// live seat of the directory is missing from it.
    epoch: Option<u32>,
    seats: Vec<Arc<Seat>>,
}

impl Ring {
    fn seat_epoch(&self) -> &AtomicU32 {
        self.ctl_u32(SEAT_EPOCH_OFF)
    }

    fn seat_entry(&self, index: usize) -> &AtomicU64 {
        self.ctl_u64(SEATS_OFF + 8 * index)
    }

    pub(super) fn gate_seat(&self, idx: usize) -> &AtomicU32 {
        self.ctl_u32(GATE_SEAT_OFF + 4 * idx)
    }

    fn live(generation: u32) -> u64 {
        (u64::from(generation) << 32) | 1
    }

    /// Creates a seat for a new subscription and enters it in the directory
    /// (the daemon, which holds the control segment writable). Its
    /// descriptor goes to the subscriber and to the tag's writers.
    pub fn create_seat(&self) -> Result<Arc<Seat>, RingError> {
        if self.ctl.is_read_only() {
            return Err(RingError::ReadOnly);
        }
        let mut generation = 0;
        while generation == 0 {
            generation = self
                .ctl_u32(SEAT_GEN_OFF)
                .fetch_add(1, Ordering::AcqRel)
                .wrapping_add(1);
        }
        let entry = Self::live(generation);
        let index = (0..MAX_SEATS)
            .find(|&i| {
                self.seat_entry(i)
                    .compare_exchange(0, entry, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            })
            .ok_or(RingError::NoSeat)?;
        let seat = match Seat::create(index, generation, self.ring_id()) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                self.seat_entry(index).store(0, Ordering::Release);
                return Err(e);
            }
        };
        lock(&self.seats.edit).push(seat.clone());
        self.seat_epoch().fetch_add(1, Ordering::SeqCst);
        self.refresh_seats();
        Ok(seat)
    }

    /// Takes a seat out of the directory (its subscription ended).
    pub fn retire_seat(&self, seat: &Seat) {
        let _ = self.seat_entry(seat.index).compare_exchange(
            Self::live(seat.generation),
            0,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.seat_epoch().fetch_add(1, Ordering::SeqCst);
        self.refresh_seats();
    }

    /// Whether `seat` is this ring's and (still) in its directory. Any
    /// mapping can tell, a reader's too.
    pub fn seat_is_live(&self, seat: &Seat) -> bool {
        seat.ring == self.ring_id()
            && self.seat_entry(seat.index).load(Ordering::Acquire) == Self::live(seat.generation)
    }

    fn ring_id(&self) -> u64 {
        self.ctl_u64(RING_ID_OFF).load(Ordering::Relaxed)
    }

    /// Gives a writer's mapping a seat its daemon sent: from now on it wakes
    /// that subscriber and reads its gate. A seat not (or no longer) in the
    /// directory is dropped. Returns whether the seat is live.
    pub fn add_seat(&self, seat: Arc<Seat>) -> bool {
        let live = self.seat_is_live(&seat);
        if live {
            lock(&self.seats.edit).push(seat);
            self.refresh_seats();
            // Writers of this mapping waiting for the seat's gate look again.
            self.ring_gate_bell();
        }
        live
    }

    /// Rebuilds the snapshot from the directory: keeps the seats still
    /// live, adds those received, notes whether none is missing.
    fn refresh_seats(&self) {
        self.rebuild_seats(&mut lock(&self.seats.edit));
    }

    /// [`Self::refresh_seats`] unless another thread holds the rebuilding
    /// lock (it rebuilds then): for `publish`, which must never wait for a
    /// lock a thread of lower priority may hold (the update thread adding
    /// a seat, preempted while it holds it). Whether it rebuilt.
    fn try_refresh_seats(&self) -> bool {
        let mut pending = match self.seats.edit.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        self.rebuild_seats(&mut pending);
        true
    }

    fn rebuild_seats(&self, pending: &mut Vec<Arc<Seat>>) {
        let before = self.seat_epoch().load(Ordering::SeqCst);
        let old = self.seats.snap.load_full();
        let mut seats: Vec<Arc<Seat>> = Vec::new();
        let mut complete = true;
        for i in 0..MAX_SEATS {
            let e = self.seat_entry(i).load(Ordering::Acquire);
            if e == 0 {
                continue;
            }
            let found = pending.iter().chain(old.seats.iter()).find(|s| {
                s.index == i && Self::live(s.generation) == e && s.ring == self.ring_id()
            });
            match found {
                Some(s) => seats.push(s.clone()),
                None => complete = false,
            }
        }
        pending.retain(|p| {
            self.seat_is_live(p)
                && !seats
                    .iter()
                    .any(|s| s.index == p.index && s.generation == p.generation)
        });
        let after = self.seat_epoch().load(Ordering::SeqCst);
        let epoch = (complete && before == after).then_some(before);
        self.seats.tried.store(before, Ordering::Relaxed);
        self.seats.snap.store(Arc::new(Snapshot { epoch, seats }));
    }

    /// Whether a subscriber may be asleep whom the control segment's
    /// sleeper count does not show: one of the known seats has a sleeper,
    /// or the directory changed since the snapshot (a seat not mapped here
    /// may hold one).
    pub(super) fn seat_sleeping(&self) -> bool {
        let snap = self.seats.snap.load();
        let epoch = self.seat_epoch().load(Ordering::Relaxed);
        if snap.epoch != Some(epoch) {
            // Only what left can be dropped here; a new seat comes through
            // `add_seat`. Once per change of the directory (the rebuild
            // notes it), and never waiting: while another thread holds
            // the rebuilding lock, the next record tries again.
            if self.seats.tried.load(Ordering::Relaxed) != epoch && !self.ctl.is_read_only() {
                drop(snap);
                self.try_refresh_seats();
            }
            return true;
        }
        snap.seats
            .iter()
            .any(|s| s.sleepers().load(Ordering::Relaxed) > 0)
    }

    /// The sleepers of the seats this mapping knows (their snapshot brought
    /// up to date first).
    pub(super) fn seat_sleepers(&self) -> u32 {
        let epoch = self.seat_epoch().load(Ordering::SeqCst);
        if self.seats.snap.load().epoch != Some(epoch) && !self.ctl.is_read_only() {
            self.refresh_seats();
        }
        self.seats.snap.load().seats.iter().fold(0u32, |n, s| {
            n.saturating_add(s.sleepers().load(Ordering::SeqCst))
        })
    }

    /// The seats this mapping knows, loaded once for a scan of the gates.
    pub(super) fn known_seats(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.seats.snap.load()
    }

    /// The seat in `snap` that gate `idx` reads its position from, if it
    /// is linked to one.
    fn seat_in<'a>(&self, snap: &'a Snapshot, idx: usize) -> Option<&'a Arc<Seat>> {
        let link = self.gate_seat(idx).load(Ordering::Acquire) as usize;
        if link == 0 || link > MAX_SEATS {
            return None;
        }
        let entry = self.seat_entry(link - 1).load(Ordering::Acquire);
        snap.seats
            .iter()
            .find(|s| s.index == link - 1 && Self::live(s.generation) == entry)
    }

    /// The seat gate `idx` reads its position from, if it is linked to one
    /// this mapping knows.
    pub(super) fn linked_seat(&self, idx: usize) -> Option<Arc<Seat>> {
        self.seat_in(&self.known_seats(), idx).cloned()
    }

    /// Gate `idx`'s position word `v` (record index + 1) as its seat in
    /// `snap` says, when it has one and the seat moved it.
    pub(super) fn seat_position(&self, snap: &Snapshot, idx: usize, v: u64) -> u64 {
        match self.seat_in(snap, idx) {
            Some(s) => match s.gate_pos().load(Ordering::Acquire) {
                0 => v,
                p => p,
            },
            None => v,
        }
    }

    /// Holds a lossless gate at `position` for the subscriber of `seat`
    /// (process `pid`): the gate holds writers back at once, and reads its
    /// position from the seat, where only that subscriber moves it
    /// ([`Ring::seat_gate`]). Freed with [`Ring::release_held_gate`].
    pub fn hold_lossless_gate_for_seat(
        &self,
        position: u64,
        pid: u32,
        seat: &Seat,
    ) -> Result<usize, RingError> {
        seat.gate_pos().store(0, Ordering::Release);
        let idx = self.hold_lossless_gate_for(position, pid)?;
        self.gate_seat(idx)
            .store(seat.index as u32 + 1, Ordering::Release);
        Ok(idx)
    }

    /// Maps this subscriber's own seat with the ring (see the module docs):
    /// its sleeps and its gate go there.
    pub fn with_seat(mut self, seat: Seat) -> Self {
        self.own_seat = Some(Arc::new(seat));
        self
    }

    /// This mapping's own seat (a subscriber's).
    pub fn own_seat(&self) -> Option<&Seat> {
        self.own_seat.as_deref()
    }

    /// The lossless gate the daemon holds at index `idx` for this
    /// subscriber, moved through its seat. Fails when the gate is not
    /// linked to this mapping's seat.
    pub fn seat_gate(&self, idx: usize) -> Result<Gate, RingError> {
        let seat = self.own_seat.clone().ok_or(RingError::NoGate)?;
        if idx >= GATES
            || self.gate_seat(idx).load(Ordering::Acquire) as usize != seat.index + 1
            || self.gate_pos(idx).load(Ordering::Acquire) == 0
        {
            return Err(RingError::NoGate);
        }
        Ok(Gate {
            ring: self.clone(),
            at: GateAt::Seat(seat),
        })
    }

    /// Sleeps until the control segment's doorbell or `seat`'s moves from
    /// what was read (`seen`), or `timeout`. Without `futex_waitv` (Linux
    /// before 5.16), on the control doorbell alone.
    pub(super) fn sleep_seated(&self, seat: &Seat, seen: (u32, u32), timeout: Option<Duration>) {
        use futex::{Wait, WaitFlags, WaitPtr, WaitvFlags};
        let mut ctl = Wait::new();
        ctl.val = u64::from(seen.0);
        ctl.uaddr = WaitPtr::new(self.doorbell().as_ptr().cast());
        ctl.flags = WaitFlags::SIZE_U32;
        let mut own = Wait::new();
        own.val = u64::from(seen.1);
        own.uaddr = WaitPtr::new(seat.doorbell().as_ptr().cast());
        own.flags = WaitFlags::SIZE_U32;
        let clock = rustix::time::ClockId::Monotonic;
        let deadline = timeout.map(|t| {
            let now = rustix::time::clock_gettime(clock);
            let t = t.min(Duration::from_secs(1 << 30));
            let mut sec = now.tv_sec + t.as_secs() as i64;
            let mut nsec = now.tv_nsec + i64::from(t.subsec_nanos());
            if nsec >= 1_000_000_000 {
                sec += 1;
                nsec -= 1_000_000_000;
            }
            rustix::time::Timespec {
                tv_sec: sec,
                tv_nsec: nsec,
            }
        });
        let woke = futex::waitv(&[ctl, own], WaitvFlags::empty(), deadline.as_ref(), clock);
        if let Err(rustix::io::Errno::NOSYS) = woke {
            let ts = timeout.map(|t| rustix::time::Timespec {
                tv_sec: t.as_secs().min(i64::MAX as u64 / 2) as i64,
                tv_nsec: i64::from(t.subsec_nanos()),
            });
            let _ = futex::wait(self.doorbell(), futex::Flags::empty(), seen.0, ts.as_ref());
        }
    }
}

/// Where a gate's position lives.
#[derive(Debug)]
pub(super) enum GateAt {
    /// In the control segment (the daemon's gates, a writer's own).
    Ctl(usize),
    /// In a subscriber's seat.
    Seat(Arc<Seat>),
}

impl Gate {
    /// A seat gate's move (see [`Gate::advance`]).
    pub(super) fn advance_seat(seat: &Seat, position: u64) {
        seat.gate_pos()
            .store(position.min(MAX_INDEX) + 1, Ordering::Release);
        fence(Ordering::SeqCst);
        if seat.gate_waiters().load(Ordering::Acquire) == 0 {
            return;
        }
        if position >= seat.gate_want().load(Ordering::Relaxed) {
            ring_seat_gate_bell(seat);
        }
    }

    /// A seat gate let go: writers stop reading it.
    pub(super) fn let_go(seat: &Seat) {
        seat.gate_pos().store(LET_GO, Ordering::Release);
        ring_seat_gate_bell(seat);
    }
}

pub(super) fn ring_seat_gate_bell(seat: &Seat) {
    fence(Ordering::SeqCst);
    if seat.gate_waiters().load(Ordering::Relaxed) > 0 {
        seat.gate_want().store(u64::MAX, Ordering::SeqCst);
        seat.gate_bell().fetch_add(1, Ordering::SeqCst);
        let _ = futex::wake(seat.gate_bell(), futex::Flags::empty(), i32::MAX as u32);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{reader, shape};
    use super::*;
    use std::os::fd::AsFd;
    use std::time::Instant;

    /// A writer's mapping that has not been given any seat.
    fn writer(r: &Ring) -> Ring {
        let fd = r.segment().as_fd().try_clone_to_owned().unwrap();
        let ctl = r.control().as_fd().try_clone_to_owned().unwrap();
        Ring::open(Segment::open(fd).unwrap(), Segment::open(ctl).unwrap()).unwrap()
    }

    /// What the daemon sends a writer: a second mapping of `seat`.
    fn copy(seat: &Seat) -> Arc<Seat> {
        let fd = seat.segment().as_fd().try_clone_to_owned().unwrap();
        Arc::new(Seat::from_fd(fd).unwrap())
    }

    /// Waits on `r` in a thread; returns how long it slept before a record
    /// woke it.
    fn sleeper(r: Ring) -> std::thread::JoinHandle<Duration> {
        std::thread::spawn(move || {
            let c = r.cursor(4);
            let start = Instant::now();
            while !r.available(&c) && start.elapsed() < Duration::from_secs(5) {
                r.wait(&c, Some(Duration::from_secs(5)), Duration::ZERO);
            }
            start.elapsed()
        })
    }

    fn asleep(r: &Ring) {
        let seat = r.own_seat().unwrap();
        let start = Instant::now();
        while seat.sleepers().load(Ordering::SeqCst) == 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "never slept");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Into the futex wait itself.
        std::thread::sleep(Duration::from_millis(20));
    }

    #[test]
    fn a_sleeping_subscriber_is_woken_by_a_writer_that_has_not_got_its_seat_yet() {
        let daemon = Ring::create("t", shape(8, 16)).unwrap();
        let w = writer(&daemon);
        let r = reader(&daemon);
        let probe = r.clone();
        let t = sleeper(r);
        asleep(&probe);
        w.publish(&[b"x"]).unwrap();
        let slept = t.join().unwrap();
        assert!(slept < Duration::from_secs(1), "slept {slept:?}");
        // Given the seat, the writer wakes it from its sleeper count.
        let seat = copy(probe.own_seat().unwrap());
        assert!(w.add_seat(seat));
        assert!(!w.seat_sleeping(), "complete snapshot, nobody asleep");
        let t = sleeper(probe.clone());
        asleep(&probe);
        assert!(w.seat_sleeping());
        w.publish(&[b"y"]).unwrap();
        let slept = t.join().unwrap();
        assert!(slept < Duration::from_secs(1), "slept {slept:?}");
    }

    #[test]
    fn a_writer_that_knows_every_seat_rings_no_doorbell_while_nobody_sleeps() {
        let daemon = Ring::create("t", shape(8, 16)).unwrap();
        let r = reader(&daemon);
        let w = writer(&daemon);
        // Before the seat reaches it, every publish rings.
        let before = daemon.doorbell().load(Ordering::SeqCst);
        w.publish(&[b"1"]).unwrap();
        assert_eq!(daemon.doorbell().load(Ordering::SeqCst), before + 1);
        assert!(w.add_seat(copy(r.own_seat().unwrap())));
        w.publish(&[b"2"]).unwrap();
        w.publish(&[b"3"]).unwrap();
        assert_eq!(daemon.doorbell().load(Ordering::SeqCst), before + 1);
    }

    #[test]
    fn a_seat_gate_holds_writers_until_its_subscriber_reads_it() {
        let daemon = Ring::create("t", shape(4, 16)).unwrap();
        let r = reader(&daemon);
        let w = writer(&daemon);
        let pid = std::process::id();
        let idx = daemon
            .hold_lossless_gate_for_seat(0, pid, r.own_seat().unwrap())
            .unwrap();
        let gate = r.seat_gate(idx).unwrap();
        let wait = Duration::from_millis(5);
        for i in 0..4u8 {
            w.publish_gated(&[&[i]], wait).unwrap();
        }
        assert!(matches!(
            w.publish_gated(&[b"x"], wait),
            Err(RingError::Full { .. })
        ));
        // The daemon's inbound path (which made the seat) sees it full too.
        assert_eq!(daemon.lossless_room(), 0);
        let mut c = r.cursor_from(0, u32::MAX);
        let mut out = Vec::new();
        for _ in 0..4 {
            assert_eq!(r.read(&mut c, &mut out), ReadOutcome::Record);
        }
        gate.advance(c.position());
        assert_eq!(gate.position(), 4);
        assert_eq!(daemon.lossless_room(), 4);
        // A writer without the seat still holds at where the daemon put the
        // gate: it never laps a subscriber it cannot see.
        assert!(matches!(
            w.publish_gated(&[b"x"], wait),
            Err(RingError::Full { .. })
        ));
        assert!(w.add_seat(copy(r.own_seat().unwrap())));
        w.publish_gated(&[b"x"], wait).unwrap();
        // A waiting writer is woken by the subscriber's move, through the seat.
        for _ in 0..3 {
            w.publish_gated(&[b"y"], wait).unwrap();
        }
        let t = {
            let w = w.clone();
            std::thread::spawn(move || w.publish_gated(&[b"z"], Duration::from_secs(5)))
        };
        while r.own_seat().unwrap().gate_waiters().load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        for _ in 0..4 {
            assert_eq!(r.read(&mut c, &mut out), ReadOutcome::Record);
        }
        let start = Instant::now();
        gate.advance(c.position());
        assert!(t.join().unwrap().is_ok());
        assert!(start.elapsed() < Duration::from_secs(1));
        // Let go: the gate holds nothing any more.
        drop(gate);
        for _ in 0..8 {
            w.publish_gated(&[b"free"], wait).unwrap();
        }
        // The daemon frees it when the subscription ends.
        assert!(daemon.release_held_gate(idx, pid));
        assert_eq!(daemon.lowest_gate(), None);
    }

    #[test]
    fn a_subscriber_can_lie_only_about_itself() {
        let daemon = Ring::create("t", shape(4, 16)).unwrap();
        let liar = reader(&daemon);
        let honest = reader(&daemon);
        let w = writer(&daemon);
        for r in [&liar, &honest] {
            assert!(w.add_seat(copy(r.own_seat().unwrap())));
        }
        // Its control segment cannot be mapped writable.
        let rw = unsafe {
            // SAFETY: a fresh mapping attempt; it must fail.
            rustix::mm::mmap(
                std::ptr::null_mut(),
                liar.control().len(),
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                liar.control().as_fd(),
                0,
            )
        };
        assert_eq!(rw.err(), Some(rustix::io::Errno::ACCESS));
        assert!(liar.control().is_read_only());
        // A gate position in a seat the daemon linked no gate to holds no
        // writer back.
        let seat = liar.own_seat().unwrap();
        seat.gate_pos().store(1, Ordering::SeqCst);
        seat.gate_want().store(0, Ordering::SeqCst);
        for i in 0..12u8 {
            w.publish_gated(&[&[i]], Duration::from_millis(5)).unwrap();
        }
        assert_eq!(w.lowest_gate(), None);
        // A sleeper count stuck high costs writers a wake-up call, and
        // takes nobody else's wake-up away.
        seat.sleepers().store(u32::MAX, Ordering::SeqCst);
        let t = sleeper(honest.clone());
        asleep(&honest);
        w.publish(&[b"x"]).unwrap();
        assert!(t.join().unwrap() < Duration::from_secs(1));
        // Nor does its own wake-up reach others: it bumps its seat only.
        let ctl_bell = daemon.doorbell().load(Ordering::SeqCst);
        liar.wake_readers();
        assert_eq!(daemon.doorbell().load(Ordering::SeqCst), ctl_bell);
    }

    #[test]
    fn retired_seats_leave_writers_and_the_directory_says_when_it_is_full() {
        let daemon = Ring::create("t", shape(4, 16)).unwrap();
        let w = writer(&daemon);
        let seat = daemon.create_seat().unwrap();
        assert!(w.add_seat(copy(&seat)));
        assert!(!w.seat_sleeping());
        daemon.retire_seat(&seat);
        // Seen once as a change, then dropped from the snapshot.
        assert!(w.seat_sleeping());
        assert!(!w.seat_sleeping());
        assert!(w.seats.snap.load().seats.is_empty());
        // A retired seat is refused.
        assert!(!w.add_seat(copy(&seat)));
        let mut all: Vec<_> = (0..MAX_SEATS)
            .map(|_| daemon.create_seat().unwrap())
            .collect();
        assert_eq!(daemon.create_seat().err(), Some(RingError::NoSeat));
        let one = all.pop().unwrap();
        daemon.retire_seat(&one);
        let again = daemon.create_seat().unwrap();
        assert_eq!(again.index(), one.index());
        assert_ne!(again.generation(), one.generation());
    }

    #[test]
    fn a_seat_of_another_ring_is_refused_even_with_the_same_index_and_generation() {
        // (As after a daemon restart: the new ring's first seat is index 0,
        // generation 1, like the old ring's.)
        let old = Ring::create("t", shape(4, 16)).unwrap();
        let new = Ring::create("t", shape(4, 16)).unwrap();
        let (a, b) = (old.create_seat().unwrap(), new.create_seat().unwrap());
        assert_eq!((a.index(), a.generation()), (b.index(), b.generation()));
        let w = writer(&new);
        assert!(!w.seat_is_live(&a));
        assert!(!w.add_seat(copy(&a)));
        assert!(w.seat_is_live(&b));
        assert!(w.add_seat(copy(&b)));
    }

    #[test]
    fn seat_open_refuses_what_is_not_a_writable_seat() {
        let daemon = Ring::create("t", shape(4, 16)).unwrap();
        let seat = daemon.create_seat().unwrap();
        let ro = seat.segment().read_only_fd().unwrap();
        assert!(Seat::open(Segment::open(ro).unwrap()).is_err());
        let other = Segment::create("x", SEAT_LEN).unwrap();
        assert!(Seat::open(other).is_err());
        let small = Segment::create("x", 64).unwrap();
        assert!(Seat::open(small).is_err());
        // Nor does a reader's mapping make seats.
        let r = reader(&daemon);
        assert_eq!(r.create_seat().err(), Some(RingError::ReadOnly));
    }
}
