//! The broadcast ring.
//!
//! ```text
//! segment layout (all offsets in bytes, little-endian, 64-byte aligned lines)
//!   0  magic "TAGWRNG1" (u64) | version u32 | slots u32 | stride u32 | payload u32
//!  64  head: next slot index to claim (AtomicU64)         — writers' line
//!  24  gate epoch (AtomicU32): bumped when a gate is attached
//! 128  doorbell (AtomicU32 futex word) | waiters (AtomicU32) — sleepers' line
//! 192  gate bell (AtomicU32 futex word) | gate waiters (AtomicU32)
//! 200  gate step (AtomicU32): the room a waiting gated writer waits for,
//!        0 = a quarter of the ring (see `Gate::advance_within`)
//! 240  gate want (AtomicU64): the lowest gate position a waiting gated
//!        writer needs, u64::MAX = none
//! 256  send ticket (see `ring/ticket.rs`), to 512
//! 512  gate positions, 8 × AtomicU64: record index + 1, 0 = free
//! 576  gate owners, 8 × AtomicU32: pid of the process holding the gate,
//!        0 = free (taken before the position is written, freed after)
//! 608  lossless gates (AtomicU32): bit i set = gate i is a lossless
//!        subscriber's (it holds back the daemon's inbound writes too)
//! 640  owner words, one u64 per slot: pid << 32 | index, 0 = free
//!  …   (64-aligned) slot 0 .. slot (slots-1), each `stride` bytes:
//!        0  stamp (AtomicU64): 2·i+2 once record i is committed
//!        8  length (AtomicU32) of record i
//!          (the rest of this line is unused: it is the line readers poll)
//!       64  claim (AtomicU32): low half of the index of the record whose
//!           writer last took the slot (written before any of its bytes)
//!       72  record bytes (≤ payload)
//! ```
//!
//! Record `i` lives in slot `i mod slots`. Writers: `i = head.fetch_add(1)`, take
//! the slot's owner word (writers of two laps of one slot take turns), store
//! `i` in the slot's claim word, copy, store the length, store the stamp, and,
//! only if someone waits, bump the doorbell and wake. Readers: a cursor
//! `next`; the record is ready when the stamp is `2·next+2`; it was
//! overwritten when the stamp is larger; a copy is valid when, after it, the
//! claim word still names `next` and the stamp is unchanged (a writer of a
//! later lap marks the slot before touching its bytes). The stamp and the
//! length have the slot's first line to themselves: a waiting reader polls
//! that line, and the writer stores to it once per record, after the bytes
//! (when the claim word and the record's first bytes shared it, a reader's
//! polls took the line back between the writer's stores, and each store
//! fetched it again: 256 B busy-poll round trips 1.22 -> 0.90 µs). The
//! claim word sits on the record's first line, which the writer dirties
//! with the record's first bytes anyway, so a validation costs the reader
//! no line it has not already fetched. A reader that keeps up does not load `head`, the line every writer
//! updates, on its way from one record to the next: the first empty read
//! after a record looks only at slots (see `read_split`); a second one, or a
//! sleep in `wait`, does load it.
//!
//! **Gates.** A reader that must not lose records (the daemon's forwarder of a
//! reliable remote stream) attaches a gate: a position in the header that
//! gated writers (`publish_gated`) do not lap. Such a writer claims record `i`
//! only once every gate is past `i - slots`; it waits on the gate bell for a
//! bounded time and otherwise fails having written nothing. A writer that has
//! to wait waits for a quarter of the ring and writes the gate position that
//! gives it that room in `gate want`; holders ring the bell only when they
//! reach it (one wake-up per quarter ring, not per record). Plain `publish`
//! ignores gates (the daemon's inbound path must never block). A gate whose
//! process is gone is freed by the first writer it blocks.
//!
//! A **lossless** gate (`attach_lossless_gate`, a subscriber that must see
//! every message) is also marked in the lossless word: the daemon's inbound
//! path, which never waits, writes with [`Ring::publish_lossless_quietly`],
//! which refuses a record that would lap one, and holds back what does not
//! fit. A gated writer claims its index only below the limit its gates
//! allow (a compare-exchange on `head`), so it never laps a gate, however
//! many writers race for the last free slot. The forwarder's gate is not lossless, so a
//! forwarder stalled by a slow network never holds back what other nodes send.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::thread::futex;
use thiserror::Error;

use crate::backoff::Backoff;
use crate::segment::{Segment, ShmError};
use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

mod gates;
mod peek;
mod read;
mod seats;
mod ticket;
pub use peek::Peek;
use seats::{GateAt, SeatTable, CTL_LEN};
pub use seats::{Seat, MAX_SEATS};
pub use ticket::{Claim, Closed, Ticket, TicketDest, TICKET_DESTS, TICKET_DEST_WORDS};

use gates::process_alive;
pub use gates::Gate;

const MAGIC: u64 = u64::from_le_bytes(*b"TAGWRNG1");
/// The control segment's first word.
const CTL_MAGIC: u64 = u64::from_le_bytes(*b"TAGWCTL2");
const VERSION: u32 = 9;
const GATE_EPOCH_OFF: usize = 24;
const HEAD_OFF: usize = 64;
const DOORBELL_OFF: usize = 128;
const WAITERS_OFF: usize = 132;
const GATE_BELL_OFF: usize = 192;
const GATE_WAITERS_OFF: usize = 196;
const GATE_STEP_OFF: usize = 200;
const GATE_WANT_OFF: usize = 240;
/// Gates a ring has room for.
pub const GATES: usize = 8;
/// Gate positions and owners follow the send ticket (`ring/ticket.rs`).
const GATE_POS_OFF: usize = ticket::TICKET_END.div_ceil(64) * 64;
const GATE_PID_OFF: usize = GATE_POS_OFF + 8 * GATES;
const GATE_LOSSLESS_OFF: usize = GATE_PID_OFF + 4 * GATES;
/// Per-slot owner words (one u64 each) start here; slots follow them.
const OWNERS_OFF: usize = (GATE_LOSSLESS_OFF + 4).div_ceil(64) * 64;
/// Indices are kept below this so `2·i + 2` and `i + slots` never overflow, even
/// with a `head` a hostile peer wrote.
const MAX_INDEX: u64 = 1 << 62;
/// Records longer than this are written behind a full fence (see
/// `publish_inner`): `memcpy` may use non-temporal stores for large copies.
const PLAIN_COPY_MAX: usize = 4096;
/// A publish that finds its slot held this many times gives up.
const MAX_CLAIMS: u32 = 4;
const SLOT_HEADER: usize = 72;
/// The claim word's offset in a slot: on the record's first line, not on
/// the line readers poll.
const CLAIM_OFF: usize = 64;
/// Upper bounds that keep every offset computation far from overflow.
const MAX_SLOTS: u32 = 1 << 20;
const MAX_PAYLOAD: u32 = 64 << 20;

/// Errors of ring operations.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RingError {
    /// The ring looks corrupt or its slots stay held by a live but stalled
    /// writer (e.g. a stopped process).
    #[error("ring unusable: {0}")]
    Stalled(&'static str),
    /// The record does not fit a slot.
    #[error("record of {len} bytes exceeds the slot capacity of {max} bytes")]
    TooLarge {
        /// Record length.
        len: usize,
        /// Slot capacity.
        max: usize,
    },
    /// A gated publish waited `waited` for a gate (a reader that must not
    /// lose records) to move and gave up; nothing was written.
    #[error("ring full: a gated reader did not free a slot within {waited:?}")]
    Full {
        /// How long the writer waited.
        waited: Duration,
    },
    /// Every gate of the ring is taken.
    #[error("all {GATES} gates of the ring are taken")]
    NoGate,
    /// Every seat of the ring's directory is taken.
    #[error("all {MAX_SEATS} subscriber seats of the ring are taken")]
    NoSeat,
    /// This process mapped the ring's records read-only (it may read the
    /// tag, not write it).
    #[error("the ring is mapped read-only here")]
    ReadOnly,
    /// Mapping or validating the segment failed.
    #[error(transparent)]
    Shm(#[from] ShmError),
}

/// The shape of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    /// Number of slots (maximum history a reader can lag by).
    pub slots: u32,
    /// Largest record a slot holds, in bytes.
    pub payload: u32,
}

impl RingShape {
    fn stride(self) -> usize {
        (SLOT_HEADER + self.payload as usize).div_ceil(64) * 64
    }

    fn slots_off(self) -> usize {
        (OWNERS_OFF + 8 * self.slots as usize).div_ceil(64) * 64
    }

    /// Total segment size for this shape.
    pub fn segment_len(self) -> usize {
        self.slots_off() + self.slots as usize * self.stride()
    }

    fn check(self) -> Result<Self, ShmError> {
        if self.slots == 0 || self.slots > MAX_SLOTS {
            return Err(ShmError::BadShape("slot count must be 1..=1048576"));
        }
        if self.payload == 0 || self.payload > MAX_PAYLOAD {
            return Err(ShmError::BadShape("slot payload must be 1..=64 MiB"));
        }
        Ok(self)
    }
}

/// What a read attempt found.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A record was copied into the buffer.
    Record,
    /// Nothing new. (The first empty read after a record does not tell a
    /// record claimed but not committed yet from none: that takes the next
    /// read, which then says `Pending`.)
    Empty,
    /// The next record is claimed but not yet committed by its writer.
    Pending,
    /// `n` records were lost (overwritten, or beyond the reader's depth); the
    /// cursor moved past them. Read again for the next record.
    Lost(u64),
}

/// A reader's position in the ring. Lives in the reader's own memory.
#[derive(Debug, Clone)]
pub struct Cursor {
    next: u64,
    depth: u64,
    pending_since: Option<Instant>,
    /// Set by an empty read, cleared by a record: while it is clear, an
    /// empty read returns at once without loading `head`.
    idle: bool,
}

impl Cursor {
    /// Index of the next record this cursor will read.
    pub fn position(&self) -> u64 {
        self.next
    }
}

/// A mapped broadcast ring. Cheap to clone (shares the mapping).
#[derive(Debug, Clone)]
pub struct Ring {
    seg: Arc<Segment>,
    /// What writers and the daemon's readers write (see the module docs):
    /// the doorbell and its waiters, the gate bell, `gate want`, the gates,
    /// the send ticket, the seat directory. Read-only for subscribers.
    ctl: Arc<Segment>,
    shape: RingShape,
    stride: usize,
    slots_off: usize,
    /// Our pid, the high half of the owner words we write.
    pid: u32,
    /// What gated writers of this mapping last learned of the gates.
    gates_seen: Arc<GatesSeen>,
    /// The subscribers' seats this mapping knows (a writer's).
    seats: Arc<SeatTable>,
    /// A subscriber's own seat, where its sleeps and its gate go.
    own_seat: Option<Arc<Seat>>,
}

/// A gated writer's cache: while `head` is below `limit` and the epoch is
/// unchanged, no gate can be in the way and the gate line is not read.
#[derive(Debug, Default)]
struct GatesSeen {
    epoch: AtomicU32,
    /// 0 = not computed yet.
    limit: AtomicU64,
    /// The index after this process's last gated claim: the first guess of
    /// the next one.
    next: AtomicU64,
}

/// A writer that stalls longer than this on a claimed slot is presumed dead, and
/// readers skip its record (counted as lost) once later records are committed.
const DEAD_WRITER: Duration = Duration::from_millis(100);

impl Ring {
    /// Creates a new ring in a fresh segment.
    pub fn create(name: &str, shape: RingShape) -> Result<Self, RingError> {
        let shape = shape.check()?;
        let seg = Segment::create(name, shape.segment_len())?;
        let ctl = Segment::create(&format!("{name}:ctl"), CTL_LEN)?;
        let base = seg.as_ptr();
        // SAFETY: both segments are at least OWNERS_OFF bytes, freshly zeroed,
        // and not yet shared with anyone; the offsets are within the header.
        unsafe {
            base.cast::<u64>().write(MAGIC);
            base.add(8).cast::<u32>().write(VERSION);
            base.add(12).cast::<u32>().write(shape.slots);
            base.add(16).cast::<u32>().write(shape.stride() as u32);
            base.add(20).cast::<u32>().write(shape.payload);
            ctl.as_ptr().cast::<u64>().write(CTL_MAGIC);
            ctl.as_ptr()
                .add(GATE_WANT_OFF)
                .cast::<u64>()
                .write(u64::MAX);
            ctl.as_ptr()
                .add(seats::RING_ID_OFF)
                .cast::<u64>()
                .write(seats::new_ring_id());
        }
        Ok(Self {
            seg: Arc::new(seg),
            ctl: Arc::new(ctl),
            stride: shape.stride(),
            slots_off: shape.slots_off(),
            shape,
            pid: std::process::id(),
            gates_seen: Arc::default(),
            seats: Arc::default(),
            own_seat: None,
        })
    }

    /// Maps a ring from its two segments received from the daemon (its
    /// records, [`Ring::segment`], and its control segment,
    /// [`Ring::control`]), validating their headers against their real
    /// sizes. A reader's segments are both mapped read-only: it can read the
    /// ring, not write it ([`RingError::ReadOnly`]); what it writes goes to
    /// its seat ([`Ring::with_seat`]).
    pub fn open(seg: Segment, ctl: Segment) -> Result<Self, RingError> {
        if seg.len() < OWNERS_OFF {
            return Err(ShmError::BadHeader("segment smaller than the ring header").into());
        }
        if ctl.len() < CTL_LEN || (ctl.is_read_only() && !seg.is_read_only()) {
            return Err(ShmError::BadHeader(
                "control segment too small, or read-only with writable records",
            )
            .into());
        }
        // SAFETY: at least OWNERS_OFF bytes (checked above), read by value.
        if unsafe { ctl.as_ptr().cast::<u64>().read_volatile() } != CTL_MAGIC {
            return Err(ShmError::BadHeader("bad control segment magic").into());
        }
        let base = seg.as_ptr();
        // SAFETY: the mapping is at least OWNERS_OFF bytes (checked above). Values are
        // read once, by value, and validated before use.
        let (magic, version, slots, stride, payload) = unsafe {
            (
                base.cast::<u64>().read_volatile(),
                base.add(8).cast::<u32>().read_volatile(),
                base.add(12).cast::<u32>().read_volatile(),
                base.add(16).cast::<u32>().read_volatile(),
                base.add(20).cast::<u32>().read_volatile(),
            )
        };
        if magic != MAGIC {
            return Err(ShmError::BadHeader("bad magic").into());
        }
        if version != VERSION {
            return Err(ShmError::BadHeader("unsupported ring version").into());
        }
        let shape = RingShape { slots, payload }.check()?;
        if stride as usize != shape.stride() {
            return Err(ShmError::BadHeader("stride does not match payload size").into());
        }
        if shape.segment_len() > seg.len() {
            return Err(ShmError::BadHeader("ring larger than its segment").into());
        }
        Ok(Self {
            seg: Arc::new(seg),
            ctl: Arc::new(ctl),
            shape,
            stride: stride as usize,
            slots_off: shape.slots_off(),
            pid: std::process::id(),
            gates_seen: Arc::default(),
            seats: Arc::default(),
            own_seat: None,
        })
    }

    /// The ring's shape.
    pub fn shape(&self) -> RingShape {
        self.shape
    }

    /// The segment of the records (to pass its descriptor on; to a reader,
    /// [`Segment::read_only_fd`]).
    pub fn segment(&self) -> &Segment {
        &self.seg
    }

    /// The control segment (to pass its descriptor on with the records';
    /// to a reader, [`Segment::read_only_fd`]).
    pub fn control(&self) -> &Segment {
        &self.ctl
    }

    /// Whether this mapping only reads the records (a subscriber's).
    pub fn is_read_only(&self) -> bool {
        self.seg.is_read_only()
    }

    /// Largest record a slot holds.
    pub fn max_record(&self) -> usize {
        self.shape.payload as usize
    }

    /// Writes one record made of the concatenation of `parts` and wakes sleeping
    /// readers. One copy, whatever the number of readers. Returns the record index.
    pub fn publish(&self, parts: &[&[u8]]) -> Result<u64, RingError> {
        let i = self.publish_inner(parts, u64::MAX)?.unwrap_or(u64::MAX);
        self.ring_doorbell();
        Ok(i)
    }

    /// [`Ring::publish`] without waking anyone: for a writer with several
    /// records at once, which calls [`Ring::wake_readers`] after the last
    /// (one wake-up system call for the lot instead of one per record).
    pub fn publish_quietly(&self, parts: &[&[u8]]) -> Result<u64, RingError> {
        Ok(self.publish_inner(parts, u64::MAX)?.unwrap_or(u64::MAX))
    }

    /// [`Ring::publish_quietly`] that never laps a lossless gate (the
    /// daemon's inbound path, which must not wait): `Ok(None)`, having
    /// written nothing, when there is no room for the record.
    pub fn publish_lossless_quietly(&self, parts: &[&[u8]]) -> Result<Option<u64>, RingError> {
        match self.publish_inner(parts, self.lossless_limit(false))? {
            Some(i) => Ok(Some(i)),
            // Maybe a holder is gone: free its gate and look again.
            None => self.publish_inner(parts, self.lossless_limit(true)),
        }
    }

    /// Wakes readers sleeping on the ring (free when none sleeps). From a
    /// subscriber's read-only mapping, wakes only that subscriber (through
    /// its seat).
    pub fn wake_readers(&self) {
        if let Some(seat) = &self.own_seat {
            seat.ring_doorbell();
        }
        if !self.ctl.is_read_only() {
            self.ring_doorbell();
        }
    }

    /// Writes a record if its index can be below `below` (else `Ok(None)`,
    /// nothing written).
    fn publish_inner(&self, parts: &[&[u8]], below: u64) -> Result<Option<u64>, RingError> {
        if self.seg.is_read_only() {
            return Err(RingError::ReadOnly);
        }
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.max_record() {
            return Err(RingError::TooLarge {
                len,
                max: self.max_record(),
            });
        }
        let Some((i, slot)) = self.claim(below)? else {
            return Ok(None);
        };
        // Mark the slot before touching its bytes: a reader still copying the
        // previous lap's record finds the mark changed after its copy and
        // discards it (see `read_split`).
        self.claim_word(slot).store(i as u32, Ordering::Relaxed);
        if len > PLAIN_COPY_MAX {
            // A copy this large may use non-temporal stores, which x86 lets
            // pass the claim store above; a full fence keeps them behind it.
            fence(Ordering::SeqCst);
        } else {
            fence(Ordering::Release);
        }
        let stamp = self.stamp(slot);
        let mut dst = self.data(slot);
        for p in parts {
            // SAFETY: the slot's data area holds `payload` bytes and `len` ≤ payload;
            // we own the slot for lap `i` (its owner word). Readers may copy
            // concurrently; the claim word makes them discard such copies.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), dst, p.len());
                dst = dst.add(p.len());
            }
        }
        self.len_word(slot).store(len as u32, Ordering::Relaxed);
        stamp.store(2 * i + 2, Ordering::Release);
        self.owner(slot).store(0, Ordering::Release);
        Ok(Some(i))
    }

    /// Claims a record index and exclusive write access to its slot.
    ///
    /// Writers of different laps of one slot can meet only when a whole lap was
    /// claimed while one of them stalled. The owner word (pid << 32 | low bits of
    /// the index, on a line readers never touch) makes them take turns; a holder
    /// whose process is gone is taken over; a writer that finds a later lap
    /// already committed, or a live holder stalled for long, abandons its index
    /// (readers skip it and count it lost) and claims a fresh one.
    ///
    /// With a `below` under `MAX_INDEX`, only an index below it is
    /// claimed (`Ok(None)` when `head` is there already): a gated writer's
    /// claim never laps the gates its limit came from.
    fn claim(&self, below: u64) -> Result<Option<(u64, usize)>, RingError> {
        for _ in 0..MAX_CLAIMS {
            // No gate within reach (the limit is then `MAX_INDEX`): a plain
            // increment, cheaper than a compare-exchange loop.
            let i = if below >= MAX_INDEX {
                self.head().fetch_add(1, Ordering::AcqRel)
            } else {
                // First guess: the index after this process's last claim
                // (right for a lone writer: one locked instruction, no load
                // of the line first); a failed exchange says what it is.
                let mut h = self.gates_seen.next.load(Ordering::Relaxed);
                loop {
                    if h >= below {
                        // The guess may be stale: only `head` says "full".
                        let now = self.head().load(Ordering::Acquire);
                        if now >= below {
                            return Ok(None);
                        }
                        h = now;
                    }
                    match self.head().compare_exchange_weak(
                        h,
                        h + 1,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            self.gates_seen.next.store(h + 1, Ordering::Relaxed);
                            break h;
                        }
                        Err(now) => h = now,
                    }
                }
            };
            if i >= MAX_INDEX {
                return Err(RingError::Stalled(
                    "record index out of range (corrupt ring)",
                ));
            }
            let slot = self.slot(i);
            let owner = self.owner(slot);
            let token = (u64::from(self.pid) << 32) | (i & 0xffff_ffff);
            // The clock is read only once the slot turns out to be held: a
            // clock read costs as much as the rest of a claim.
            let mut held_since: Option<Instant> = None;
            let mut backoff = Backoff::default();
            let acquired = loop {
                match owner.compare_exchange(0, token, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break true,
                    Err(held) => {
                        let holder = (held >> 32) as u32;
                        if !process_alive(holder) {
                            if owner
                                .compare_exchange(held, token, Ordering::AcqRel, Ordering::Acquire)
                                .is_ok()
                            {
                                break true;
                            }
                            continue;
                        }
                        if held_since.get_or_insert_with(Instant::now).elapsed() >= DEAD_WRITER {
                            break false;
                        }
                        backoff.wait();
                    }
                }
            };
            if !acquired {
                continue;
            }
            if self.stamp(slot).load(Ordering::Acquire) >= 2 * i + 2 {
                // A later lap got here first while we stalled: our index is stale.
                owner.store(0, Ordering::Release);
                continue;
            }
            return Ok(Some((i, slot)));
        }
        Err(RingError::Stalled("slots held by a stalled writer"))
    }

    /// Resets the sleeper count to zero. Only for the ring's owner (the daemon)
    /// when it knows nobody can be waiting: a reader killed inside `wait` never
    /// deregisters, and a stale count makes every publish pay a wake system call.
    pub fn reset_waiters(&self) {
        if !self.ctl.is_read_only() {
            self.waiters().store(0, Ordering::SeqCst);
        }
    }

    /// Current sleeper count (for tests and diagnostics): the daemon's
    /// readers' and those of the seats this mapping knows.
    pub fn waiter_count(&self) -> u32 {
        self.waiters()
            .load(Ordering::SeqCst)
            .saturating_add(self.seat_sleepers())
    }

    /// Number of records ever claimed (the next record index).
    pub fn head_index(&self) -> u64 {
        self.head_index_clamped()
    }

    fn ring_doorbell(&self) {
        // Dekker-style pairing with `wait`: either this load sees the reader's
        // waiter registration (and we wake it), or the reader's availability check
        // after its registration sees our commit. The SeqCst fences order the
        // commit before the load here, and the registration before the check there.
        fence(Ordering::SeqCst);
        if self.waiters().load(Ordering::Relaxed) > 0 || self.seat_sleeping() {
            self.doorbell().fetch_add(1, Ordering::SeqCst);
            let _ = futex::wake(self.doorbell(), futex::Flags::empty(), i32::MAX as u32);
        }
    }

    fn slot(&self, i: u64) -> usize {
        (i % u64::from(self.shape.slots)) as usize
    }

    pub(crate) fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is 8-aligned and within the mapping (callers pass header
        // offsets or slot offsets < segment_len); the mapping lives as long as self.
        unsafe { &*self.seg.as_ptr().add(off).cast::<AtomicU64>() }
    }

    fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as `atomic_u64`, 4-aligned.
        unsafe { &*self.seg.as_ptr().add(off).cast::<AtomicU32>() }
    }

    fn head(&self) -> &AtomicU64 {
        self.atomic_u64(HEAD_OFF)
    }

    /// `head` as readers use it: clamped, so a corrupt value cannot make index
    /// arithmetic overflow.
    fn head_index_clamped(&self) -> u64 {
        self.head().load(Ordering::Acquire).min(MAX_INDEX)
    }

    fn owner(&self, slot: usize) -> &AtomicU64 {
        self.atomic_u64(OWNERS_OFF + 8 * slot)
    }

    fn doorbell(&self) -> &AtomicU32 {
        self.ctl_u32(DOORBELL_OFF)
    }

    fn waiters(&self) -> &AtomicU32 {
        self.ctl_u32(WAITERS_OFF)
    }

    pub(crate) fn ctl_u64(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is an 8-aligned header offset < CTL_LEN, within the
        // control mapping (checked at open); it lives as long as self.
        unsafe { &*self.ctl.as_ptr().add(off).cast::<AtomicU64>() }
    }

    pub(crate) fn ctl_u32(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as `ctl_u64`, 4-aligned.
        unsafe { &*self.ctl.as_ptr().add(off).cast::<AtomicU32>() }
    }

    fn stamp(&self, slot: usize) -> &AtomicU64 {
        self.atomic_u64(self.slots_off + slot * self.stride)
    }

    fn len_word(&self, slot: usize) -> &AtomicU32 {
        self.atomic_u32(self.slots_off + slot * self.stride + 8)
    }

    fn claim_word(&self, slot: usize) -> &AtomicU32 {
        self.atomic_u32(self.slots_off + slot * self.stride + CLAIM_OFF)
    }

    fn data(&self, slot: usize) -> *mut u8 {
        // SAFETY: slot < slots, so the data area is within segment_len.
        unsafe {
            self.seg
                .as_ptr()
                .add(self.slots_off + slot * self.stride + SLOT_HEADER)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    pub(super) fn shape(slots: u32, payload: u32) -> RingShape {
        RingShape { slots, payload }
    }

    fn ctl_of(r: &Ring) -> Segment {
        Segment::open(r.control().as_fd().try_clone_to_owned().unwrap()).unwrap()
    }

    pub(super) fn reopen(r: &Ring) -> Ring {
        let fd = r.segment().as_fd().try_clone_to_owned().unwrap();
        Ring::open(Segment::open(fd).unwrap(), ctl_of(r)).unwrap()
    }

    /// A subscriber's mapping: the records and the control segment
    /// read-only, and a seat of its own that `r` (the daemon's mapping)
    /// created.
    pub(super) fn reader(r: &Ring) -> Ring {
        let fd = r.segment().read_only_fd().unwrap();
        let ctl = r.control().read_only_fd().unwrap();
        let seat = r.create_seat().unwrap();
        let seat = Seat::from_fd(seat.segment().as_fd().try_clone_to_owned().unwrap()).unwrap();
        Ring::open(Segment::open(fd).unwrap(), Segment::open(ctl).unwrap())
            .unwrap()
            .with_seat(seat)
    }

    /// The line a waiting reader polls (the stamp's) holds nothing the
    /// writer stores before the record's bytes: neither the claim word nor
    /// a byte of the record. Else the reader's polls take the line back
    /// between the writer's stores and each store fetches it again (busy-
    /// poll round trips 0.9 µs -> 1.2 µs).
    #[test]
    fn the_polled_line_holds_only_the_stamp_and_the_length() {
        for payload in [16, 100, 256, 8192] {
            let w = Ring::create("t", shape(8, payload)).unwrap();
            for slot in 0..8 {
                let line = |p: usize| p / 64;
                let stamp = w.stamp(slot) as *const AtomicU64 as usize;
                let len = w.len_word(slot) as *const AtomicU32 as usize;
                let claim = w.claim_word(slot) as *const AtomicU32 as usize;
                let data = w.data(slot) as usize;
                assert_eq!(stamp % 64, 0, "the stamp starts its line");
                assert_eq!(line(len), line(stamp));
                assert_ne!(line(claim), line(stamp), "claim word on the polled line");
                assert!(line(data) > line(stamp), "record bytes on the polled line");
                assert_eq!(line(claim), line(data), "claim word with the first bytes");
                let end = data + w.max_record();
                assert!(end <= stamp + w.stride, "the record stays in its slot");
            }
        }
    }

    /// A writer rings the doorbell (a wake-up system call) only when
    /// someone sleeps: not for every record of a ring that never had a
    /// seat (a tag whose subscribers are all on other nodes, read by the
    /// daemon's forwarder), once it has looked at the seat directory.
    #[test]
    fn a_writer_wakes_nobody_when_nobody_sleeps() {
        let w = Ring::create("t", shape(64, 16)).unwrap();
        let bell = |w: &Ring| w.doorbell().load(Ordering::SeqCst);
        // The first record rings once: the directory is new to the writer.
        w.publish(&[b"a"]).unwrap();
        let base = bell(&w);
        for _ in 0..20 {
            w.publish(&[b"b"]).unwrap();
        }
        assert_eq!(bell(&w), base, "woke nobody 20 times");
        // A sleeper registered (as `wait` does) is woken.
        w.waiters().fetch_add(1, Ordering::SeqCst);
        w.publish(&[b"c"]).unwrap();
        assert_eq!(bell(&w), base + 1);
        w.waiters().fetch_sub(1, Ordering::SeqCst);
        // Another mapping (a publisher's) alike.
        let p = reopen(&w);
        p.publish(&[b"d"]).unwrap();
        let base = bell(&w);
        for _ in 0..20 {
            p.publish(&[b"e"]).unwrap();
        }
        assert_eq!(bell(&w), base);
    }

    #[test]
    fn a_reader_mapping_reads_waits_and_gates_but_cannot_write_the_records() {
        let w = Ring::create("t", shape(4, 16)).unwrap();
        let r = reader(&w);
        assert!(r.is_read_only() && !w.is_read_only());
        // Writes fail with a typed error, nothing is written.
        assert_eq!(r.publish(&[b"forged"]), Err(RingError::ReadOnly));
        assert_eq!(
            r.publish_gated(&[b"forged"], Duration::from_millis(1)),
            Err(RingError::ReadOnly)
        );
        assert!(!r.ticket().open(0, 64, &[]));
        assert!(r.ticket().claim(0).is_none());
        assert_eq!(w.head_index(), 0);
        // The kernel refuses a writable mapping of its descriptor, and
        // making the read-only one writable.
        let fd = r.segment().as_fd();
        // SAFETY: a fresh mapping attempt; it must fail.
        let rw = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                r.segment().len(),
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                fd,
                0,
            )
        };
        assert_eq!(rw.err(), Some(rustix::io::Errno::ACCESS));
        // SAFETY: changes only the protection of the reader's own mapping; it must fail.
        let up = unsafe {
            rustix::mm::mprotect(
                r.segment().as_ptr().cast(),
                r.segment().len(),
                rustix::mm::MprotectFlags::READ | rustix::mm::MprotectFlags::WRITE,
            )
        };
        assert_eq!(up.err(), Some(rustix::io::Errno::ACCESS));
        // A private writable mapping is this process's own copy: what it
        // writes there never reaches the segment others read.
        let len = r.segment().len();
        // SAFETY: the writer's mapping, read by value.
        let before = unsafe { std::slice::from_raw_parts(w.segment().as_ptr(), 64) }.to_vec();
        // SAFETY: a fresh private mapping, written and unmapped here only.
        unsafe {
            let private = rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
                fd,
                0,
            )
            .unwrap();
            private.cast::<u8>().write_bytes(0xAB, 64);
            rustix::mm::munmap(private, len).unwrap();
        }
        // SAFETY: as above.
        let after = unsafe { std::slice::from_raw_parts(w.segment().as_ptr(), 64) };
        assert_eq!(after, &before[..]);
        // `fcntl` cannot change a descriptor's access mode (F_SETFL ignores
        // it): still read-only, still no writable mapping.
        let _ = rustix::fs::fcntl_setfl(fd, rustix::fs::OFlags::RDWR);
        let mode = rustix::fs::fcntl_getfl(fd).unwrap() & rustix::fs::OFlags::ACCMODE;
        assert_eq!(mode, rustix::fs::OFlags::RDONLY);
        // Nor can another user open the inode again (writable or not): it
        // is readable by its creator only.
        let st = rustix::fs::fstat(fd).unwrap();
        assert_eq!(st.st_mode & 0o7777, 0o400);
        let st = rustix::fs::fstat(r.control()).unwrap();
        assert_eq!(st.st_mode & 0o7777, 0o400);
        // Nor can it take a gate in the control segment: the daemon holds
        // one for it, which it moves through its seat.
        assert_eq!(r.attach_lossless_gate(0).err(), Some(RingError::ReadOnly));
        assert_eq!(r.attach_gate(0).err(), Some(RingError::ReadOnly));
        let seat = r.own_seat().unwrap();
        let idx = w
            .hold_lossless_gate_for_seat(0, std::process::id(), seat)
            .unwrap();
        let gate = r.seat_gate(idx).unwrap();
        let mut c = r.cursor(4);
        w.publish(&[b"one"]).unwrap();
        let mut out = Vec::new();
        assert_eq!(r.read(&mut c, &mut out), ReadOutcome::Record);
        assert_eq!(out, b"one");
        gate.advance(c.position());
        r.wait(&c, Some(Duration::from_millis(5)), Duration::ZERO);
        // A gated writer sees the reader's gate.
        for i in 0..4u8 {
            w.publish_gated(&[&[i]], Duration::from_millis(1)).unwrap();
        }
        assert!(matches!(
            w.publish_gated(&[b"x"], Duration::from_millis(5)),
            Err(RingError::Full { .. })
        ));
    }

    #[test]
    fn every_reader_sees_every_record_once_in_order() {
        let w = Ring::create("t", shape(8, 64)).unwrap();
        let r1 = reopen(&w);
        let r2 = reopen(&w);
        let mut c1 = r1.cursor(8);
        let mut c2 = r2.cursor(8);
        for i in 0..5u8 {
            w.publish(&[&[i], &[i, i]]).unwrap();
        }
        let mut buf = Vec::new();
        for (r, c) in [(&r1, &mut c1), (&r2, &mut c2)] {
            for i in 0..5u8 {
                assert_eq!(r.read(c, &mut buf), ReadOutcome::Record);
                assert_eq!(buf, vec![i, i, i]);
            }
            assert_eq!(r.read(c, &mut buf), ReadOutcome::Empty);
        }
    }

    #[test]
    fn a_slow_reader_loses_the_oldest_records_and_is_told_how_many() {
        let w = Ring::create("t", shape(16, 8)).unwrap();
        let mut c = w.cursor(4);
        for i in 0..10u8 {
            w.publish(&[&[i]]).unwrap();
        }
        let mut buf = Vec::new();
        assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Lost(6));
        for i in 6..10u8 {
            assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Record);
            assert_eq!(buf, [i]);
        }
    }

    #[test]
    fn a_reader_a_lap_behind_detects_the_overwrite() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        let mut c = w.cursor(4);
        for i in 0..6u8 {
            w.publish(&[&[i]]).unwrap();
        }
        let mut buf = Vec::new();
        let mut got = Vec::new();
        let mut lost = 0;
        loop {
            match w.read(&mut c, &mut buf) {
                ReadOutcome::Record => got.push(buf[0]),
                ReadOutcome::Lost(n) => lost += n,
                ReadOutcome::Empty => break,
                ReadOutcome::Pending => unreachable!(),
            }
        }
        assert_eq!(lost as usize + got.len(), 6);
        assert_eq!(got.last(), Some(&5));
        assert!(got.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn oversize_records_are_refused() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        assert_eq!(
            w.publish(&[&[0; 9]]),
            Err(RingError::TooLarge { len: 9, max: 8 })
        );
    }

    #[test]
    fn a_split_read_puts_the_prefix_aside_and_reports_the_length() {
        let r = Ring::create("t", shape(8, 64)).unwrap();
        let mut c = r.cursor(8);
        r.publish(&[b"head", b"er+payload"]).unwrap();
        r.publish(&[b"abc"]).unwrap();
        let (mut prefix, mut rest) = ([0u8; 6], Vec::new());
        assert_eq!(
            r.read_split(&mut c, &mut prefix, &mut rest),
            (ReadOutcome::Record, 14)
        );
        assert_eq!((&prefix, rest.as_slice()), (b"header", &b"+payload"[..]));
        // Shorter than the prefix: only its own bytes, and its true length.
        let mut prefix = [0u8; 6];
        assert_eq!(
            r.read_split(&mut c, &mut prefix, &mut rest),
            (ReadOutcome::Record, 3)
        );
        assert_eq!((&prefix[..], rest.len()), (&b"abc\0\0\0"[..], 0));
        assert_eq!(
            r.read_split(&mut c, &mut prefix, &mut rest),
            (ReadOutcome::Empty, 0)
        );
    }

    #[test]
    fn purge_and_available_follow_the_cursor() {
        let w = Ring::create("t", shape(8, 8)).unwrap();
        let mut c = w.cursor(8);
        assert!(!w.available(&c));
        w.publish(&[b"a"]).unwrap();
        w.publish(&[b"b"]).unwrap();
        assert!(w.available(&c));
        assert_eq!(w.purge(&mut c), 2);
        assert!(!w.available(&c));
    }

    #[test]
    fn a_corrupt_header_is_rejected_not_trusted() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        // SAFETY: test-only scribble over the header's slot count.
        unsafe { w.segment().as_ptr().add(12).cast::<u32>().write(1 << 30) };
        let fd = w.segment().as_fd().try_clone_to_owned().unwrap();
        assert!(Ring::open(Segment::open(fd).unwrap(), ctl_of(&w)).is_err());
        // A control segment must be one (and writable).
        let good = Ring::create("t", shape(4, 8)).unwrap();
        let fd = good.segment().as_fd().try_clone_to_owned().unwrap();
        let data = Segment::create("x", OWNERS_OFF).unwrap();
        assert!(Ring::open(Segment::open(fd).unwrap(), data).is_err());
        let plain = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&plain, 4096).unwrap();
        assert!(
            matches!(Segment::open(plain), Err(ShmError::BadHeader(_))),
            "unsealed segment refused"
        );
    }

    #[test]
    fn a_sleeping_reader_is_woken_by_a_publish_from_another_thread() {
        let w = Ring::create("t", shape(8, 8)).unwrap();
        let r = reopen(&w);
        let mut c = r.cursor(8);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            w.publish(&[b"x"]).unwrap();
        });
        let mut buf = Vec::new();
        let start = Instant::now();
        loop {
            if r.read(&mut c, &mut buf) == ReadOutcome::Record {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "watchdog");
            r.wait(&c, Some(Duration::from_secs(5)), Duration::ZERO);
        }
        assert_eq!(buf, b"x");
        t.join().unwrap();
    }

    #[test]
    fn a_reader_lapped_during_its_copies_never_returns_a_torn_record() {
        // A tiny ring and two fast writers: the reader is overwritten constantly.
        let w = Ring::create("t", shape(4, 4096)).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..2u8)
            .map(|k| {
                let (w, stop) = (w.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = 0u8;
                    while !stop.load(Ordering::Relaxed) {
                        i = i.wrapping_add(1);
                        w.publish(&[&[i ^ k; 4096]]).unwrap();
                    }
                })
            })
            .collect();
        let mut c = w.cursor(4);
        let mut buf = Vec::new();
        let (mut records, mut lost) = (0u64, 0u64);
        let start = Instant::now();
        while records < 20_000 && start.elapsed() < Duration::from_secs(20) {
            match w.read(&mut c, &mut buf) {
                ReadOutcome::Record => {
                    assert!(buf.iter().all(|b| *b == buf[0]), "torn record");
                    records += 1;
                }
                ReadOutcome::Lost(n) => lost += n,
                _ => std::hint::spin_loop(),
            }
        }
        stop.store(true, Ordering::Relaxed);
        for t in writers {
            t.join().unwrap();
        }
        assert!(
            records > 0 && lost > 0,
            "the test exercised both paths: {records} read, {lost} lost"
        );
    }

    #[test]
    fn a_slot_held_by_a_dead_writer_is_taken_over_at_once() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        w.owner(0)
            .store((u64::from(dead) << 32) | 7, Ordering::Release);
        // Index 0 itself, not 1: the dead holder was taken over, not waited out
        // and skipped as a live stalled one would be.
        assert_eq!(w.publish(&[b"x"]).unwrap(), 0);
        assert_eq!(
            w.owner(0).load(Ordering::Acquire),
            0,
            "released after commit"
        );
    }

    #[test]
    fn a_slot_held_by_a_live_stalled_writer_is_skipped_and_reported_lost() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        let mut c = w.cursor(4);
        // A live process (us) "stalled" holding slot 0.
        w.owner(0).store(
            (u64::from(std::process::id()) << 32) | 99,
            Ordering::Release,
        );
        assert_eq!(
            w.publish(&[b"y"]).unwrap(),
            1,
            "index 0 abandoned, record went to 1"
        );
        let mut buf = Vec::new();
        let start = Instant::now();
        let mut lost = 0;
        loop {
            match w.read(&mut c, &mut buf) {
                ReadOutcome::Record => break,
                ReadOutcome::Lost(n) => lost += n,
                _ => {
                    assert!(start.elapsed() < Duration::from_secs(10), "watchdog");
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        assert_eq!((buf.as_slice(), lost), (&b"y"[..], 1));
    }

    #[test]
    fn a_reader_that_keeps_up_looks_at_head_only_on_its_second_empty_read() {
        let w = Ring::create("t", shape(8, 8)).unwrap();
        let mut c = w.cursor(4);
        let mut buf = Vec::new();
        w.publish(&[b"a"]).unwrap();
        assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Record);
        // Twenty records "claimed" past ours, none committed (a stalled
        // writer): only a read that loads `head` can tell.
        w.head().fetch_add(20, Ordering::AcqRel);
        assert_eq!(
            w.read(&mut c, &mut buf),
            ReadOutcome::Empty,
            "the first empty read polls only the slot it wants"
        );
        assert_eq!(
            w.read(&mut c, &mut buf),
            ReadOutcome::Lost(16),
            "the next one looks at head and drops what is beyond the depth"
        );
        // After a record the first empty read is quiet again.
        let w = Ring::create("t", shape(8, 8)).unwrap();
        let mut c = w.cursor(4);
        w.publish(&[b"b"]).unwrap();
        assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Record);
        w.head().fetch_add(1, Ordering::AcqRel);
        assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Empty);
        assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Pending);
    }

    #[test]
    fn a_reader_beyond_its_depth_behind_a_stalled_writer_hears_of_it_at_once() {
        let w = Ring::create("t", shape(8, 8)).unwrap();
        let mut c = w.cursor(2);
        // Record 0 claimed by a writer that stalls; 1..=3 committed after it.
        w.head().fetch_add(1, Ordering::AcqRel);
        for m in [b"b", b"c", b"d"] {
            w.publish(&[m]).unwrap();
        }
        assert!(w.available(&c), "three records past a depth of two");
        let mut buf = Vec::new();
        assert_eq!(
            w.read(&mut c, &mut buf),
            ReadOutcome::Lost(2),
            "the first read reports the loss, as available() promised"
        );
        assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Record);
        assert_eq!(buf, b"c");
    }

    #[test]
    fn a_corrupt_head_cannot_overflow_index_arithmetic() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        w.head().store(u64::MAX - 1, Ordering::Release);
        assert!(matches!(w.publish(&[b"z"]), Err(RingError::Stalled(_))));
        let mut c = w.cursor(4);
        let mut buf = Vec::new();
        assert_eq!(w.read(&mut c, &mut buf), ReadOutcome::Empty);
        assert!(!w.available(&c));
    }

    #[test]
    fn many_writers_and_readers_agree_on_content() {
        let w = Ring::create("t", shape(1024, 16)).unwrap();
        let writers: Vec<_> = (0..3u64)
            .map(|k| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for i in 0..200u64 {
                        let v = k * 1000 + i;
                        w.publish(&[&v.to_le_bytes(), &v.to_le_bytes()]).unwrap();
                    }
                })
            })
            .collect();
        let mut c = w.cursor(1024);
        c.next = 0;
        for t in writers {
            t.join().unwrap();
        }
        let mut buf = Vec::new();
        let mut n = 0;
        while let ReadOutcome::Record = w.read(&mut c, &mut buf) {
            assert_eq!(buf[..8], buf[8..], "no torn record");
            n += 1;
        }
        assert_eq!(n, 600);
    }

    #[test]
    fn a_gated_writer_never_laps_a_gate_and_fails_having_written_nothing() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        let r = reopen(&w);
        let gate = r.attach_gate(0).unwrap();
        for i in 0..4u8 {
            w.publish_gated(&[&[i]], Duration::ZERO).unwrap();
        }
        let wait = Duration::from_millis(30);
        match w.publish_gated(&[b"x"], wait) {
            Err(RingError::Full { waited }) => assert!(waited >= wait),
            other => panic!("expected Full, got {other:?}"),
        }
        assert_eq!(w.head_index(), 4, "the failed publish claimed nothing");
        // The gate's holder reads two records and advances: two more fit.
        let mut c = r.cursor_from(0, 4);
        let mut buf = Vec::new();
        for i in 0..2u8 {
            assert_eq!(r.read(&mut c, &mut buf), ReadOutcome::Record);
            assert_eq!(buf, [i]);
        }
        gate.advance(c.position());
        assert_eq!(gate.position(), 2);
        w.publish_gated(&[b"e"], Duration::ZERO).unwrap();
        w.publish_gated(&[b"f"], Duration::ZERO).unwrap();
        assert!(matches!(
            w.publish_gated(&[b"g"], Duration::ZERO),
            Err(RingError::Full { .. })
        ));
        // Nothing the gate holds was overwritten.
        for want in [&[2u8][..], &[3], b"e", b"f"] {
            assert_eq!(r.read(&mut c, &mut buf), ReadOutcome::Record);
            assert_eq!(buf, want);
        }
        // Plain publish ignores gates; dropping the gate frees gated writers.
        w.publish(&[b"h"]).unwrap();
        drop(gate);
        w.publish_gated(&[b"i"], Duration::ZERO).unwrap();
    }

    #[test]
    fn a_writer_waiting_on_a_gate_is_woken_when_it_advances() {
        let w = Ring::create("t", shape(2, 8)).unwrap();
        let r = reopen(&w);
        let gate = r.attach_gate(0).unwrap();
        w.publish_gated(&[b"a"], Duration::ZERO).unwrap();
        w.publish_gated(&[b"b"], Duration::ZERO).unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            gate.advance(1);
            gate
        });
        let start = Instant::now();
        w.publish_gated(&[b"c"], Duration::from_secs(10)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
        let gate = t.join().unwrap();
        assert_eq!(gate.position(), 1);
    }

    #[test]
    fn a_writer_that_had_to_wait_goes_on_once_a_refill_step_is_free() {
        // 8 slots: the refill step is 2.
        let w = Ring::create("t", shape(8, 8)).unwrap();
        let r = reopen(&w);
        let gate = r.attach_gate(0).unwrap();
        for i in 0..8u8 {
            w.publish_gated(&[&[i]], Duration::ZERO).unwrap();
        }
        // Until the writer sleeps on the gate (whenever it runs).
        let asleep = |r: &Ring| {
            let start = Instant::now();
            while r.gate_waiters().load(Ordering::SeqCst) == 0 {
                assert!(start.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let writer = std::thread::spawn(move || {
            w.publish_gated(&[b"x"], Duration::from_secs(10)).unwrap();
            w
        });
        asleep(&r);
        gate.advance(1);
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            !writer.is_finished(),
            "one free slot does not end a wait: the writer waits for a step"
        );
        assert_eq!(r.gate_want().load(Ordering::SeqCst), 2, "what it waits for");
        gate.advance(2);
        let w = writer.join().unwrap();
        assert_eq!(
            r.gate_want().load(Ordering::SeqCst),
            u64::MAX,
            "the holder's advance rang the bell"
        );
        assert_eq!(w.head_index(), 9);
        w.publish_gated(&[b"y"], Duration::ZERO).unwrap();
        // Out of patience, a writer takes the single slot there is.
        let writer = std::thread::spawn(move || {
            let start = Instant::now();
            w.publish_gated(&[b"z"], Duration::from_millis(100))
                .unwrap();
            (w, start.elapsed())
        });
        asleep(&r);
        gate.advance(3);
        let (w, waited) = writer.join().unwrap();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(matches!(
            w.publish_gated(&[b"!"], Duration::ZERO),
            Err(RingError::Full { .. })
        ));
    }

    #[test]
    fn the_gate_of_a_dead_process_is_freed_by_the_writer_it_blocks() {
        let w = Ring::create("t", shape(2, 8)).unwrap();
        let gate = w.attach_gate(0).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        w.gate_pid(gate.idx()).store(dead, Ordering::Release);
        std::mem::forget(gate); // its process "died" holding it
        w.publish_gated(&[b"a"], Duration::ZERO).unwrap();
        w.publish_gated(&[b"b"], Duration::ZERO).unwrap();
        w.publish_gated(&[b"c"], Duration::from_secs(10)).unwrap();
        assert_eq!(w.min_gate(false), None);
    }

    #[test]
    fn only_lossless_gates_count_in_the_lossless_room_and_a_dead_holders_is_freed() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        let forwarder = w.attach_gate(0).unwrap();
        assert_eq!(w.lossless_room(), u64::MAX, "a forwarder's gate");
        let sub = w.attach_lossless_gate(0).unwrap();
        assert_eq!(w.lossless_room(), 4);
        for _ in 0..3 {
            w.publish_quietly(&[b"x"]).unwrap();
        }
        assert_eq!(w.lossless_room(), 1);
        w.publish_quietly(&[b"x"]).unwrap();
        assert_eq!(w.lossless_room(), 0, "the subscriber's ring is full");
        forwarder.advance(4);
        assert_eq!(w.lossless_room(), 0);
        sub.advance(2);
        assert_eq!(w.lossless_room(), 2);
        drop(sub);
        assert_eq!(w.lossless_room(), u64::MAX);

        // A lossless holder that died is freed once it is in the way.
        let sub = w.attach_lossless_gate(4).unwrap();
        for _ in 0..4 {
            w.publish_quietly(&[b"x"]).unwrap();
        }
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        w.gate_pid(sub.idx()).store(dead, Ordering::Release);
        let idx = sub.idx();
        std::mem::forget(sub);
        assert_eq!(w.lossless_room(), u64::MAX);
        // Its slot, taken again by a gate that is not lossless, is not.
        let g = w.attach_gate(0).unwrap();
        assert_eq!(g.idx(), idx);
        assert_eq!(w.lossless_room(), u64::MAX);
    }

    #[test]
    fn writers_racing_for_the_last_free_slots_never_lap_a_gate() {
        for _ in 0..20 {
            let w = Ring::create("t", shape(4, 8)).unwrap();
            let gate = w.attach_lossless_gate(0).unwrap();
            let written = AtomicU64::new(0);
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| {
                        while w.publish_gated(&[b"r"], Duration::from_millis(5)).is_ok() {
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            });
            assert_eq!(written.load(Ordering::Relaxed), 4, "exactly a ring's worth");
            assert_eq!(w.publish_lossless_quietly(&[b"q"]), Ok(None));
            assert_eq!(w.head_index(), 4, "a refused write takes no index");
            let mut cur = w.cursor_from(0, 4);
            let mut out = Vec::new();
            for _ in 0..4 {
                assert_eq!(w.read(&mut cur, &mut out), ReadOutcome::Record);
            }
            gate.advance(cur.position());
            assert_eq!(w.publish_lossless_quietly(&[b"q"]), Ok(Some(4)));
        }
    }

    #[test]
    fn lossless_gates_always_leave_one_for_a_forwarder() {
        let w = Ring::create("t", shape(2, 8)).unwrap();
        let subs: Vec<_> = (0..GATES - 1)
            .map(|_| w.attach_lossless_gate(0).unwrap())
            .collect();
        assert_eq!(w.attach_lossless_gate(0).unwrap_err(), RingError::NoGate);
        let forwarder = w.attach_gate(0).unwrap();
        drop(subs);
        // With the forwarder's gate held, every other one may be lossless.
        let subs: Vec<_> = (0..GATES - 1)
            .map(|_| w.attach_lossless_gate(0).unwrap())
            .collect();
        assert_eq!(w.attach_lossless_gate(0).unwrap_err(), RingError::NoGate);
        drop((subs, forwarder));
    }

    #[test]
    fn peek_copies_a_committed_records_prefix_and_tells_later_and_overwritten_ones_apart() {
        let w = Ring::create("t", shape(4, 8)).unwrap();
        let r = reopen(&w);
        let mut p = [0u8; 2];
        assert_eq!(r.peek(0, &mut p), Peek::NotYet);
        w.publish(&[b"abc"]).unwrap();
        assert_eq!(r.peek(0, &mut p), Peek::Record(3));
        assert_eq!(&p, b"ab");
        assert_eq!(r.peek(1, &mut p), Peek::NotYet);
        for _ in 0..4 {
            w.publish(&[b"z"]).unwrap();
        }
        assert_eq!(r.peek(0, &mut p), Peek::Gone, "lapped");
        assert_eq!(r.peek(4, &mut p), Peek::Record(1));
        assert_eq!(r.peek(u64::MAX, &mut p), Peek::NotYet);
    }

    #[test]
    fn the_lowest_gate_is_the_slowest_live_readers_position() {
        let w = Ring::create("t", shape(8, 8)).unwrap();
        assert_eq!(w.lowest_gate(), None);
        let a = w.attach_gate(3).unwrap();
        let b = w.attach_lossless_gate(5).unwrap();
        assert_eq!(w.lowest_gate(), Some(3));
        a.advance(7);
        assert_eq!(w.lowest_gate(), Some(5));
        drop(b);
        assert_eq!(w.lowest_gate(), Some(7));
    }

    #[test]
    fn gates_are_limited_and_a_dropped_gate_can_be_reattached() {
        let w = Ring::create("t", shape(2, 8)).unwrap();
        let gates: Vec<_> = (0..GATES).map(|_| w.attach_gate(0).unwrap()).collect();
        assert_eq!(w.attach_gate(0).unwrap_err(), RingError::NoGate);
        gates[1].advance(5);
        assert_eq!(w.min_gate(false), Some(0));
        drop(gates);
        assert_eq!(w.min_gate(false), None);
        assert!(w.attach_gate(3).is_ok());
    }

    #[test]
    fn quiet_publishes_are_seen_and_one_wake_covers_them() {
        let w = Ring::create("t", shape(8, 8)).unwrap();
        let r = reopen(&w);
        let mut c = r.cursor(8);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            w.publish_quietly(&[b"a"]).unwrap();
            w.publish_quietly(&[b"b"]).unwrap();
            w.wake_readers();
        });
        let start = Instant::now();
        let mut got = Vec::new();
        let mut buf = Vec::new();
        while got.len() < 2 {
            match r.read(&mut c, &mut buf) {
                ReadOutcome::Record => got.push(buf.clone()),
                _ => {
                    assert!(start.elapsed() < Duration::from_secs(10), "watchdog");
                    r.wait(&c, Some(Duration::from_secs(5)), Duration::ZERO);
                }
            }
        }
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
        t.join().unwrap();
    }
}
