//! The sending half of a reliable stream: a window of datagrams kept for
//! retransmission until the reader acknowledges them, and a congestion
//! window that bounds how many of them may be in flight.
//!
//! ```text
//!        base                                  next_seq
//!          v                                      v
//! held:  [ 1 ][ 2 ][ 3 ][ 4 ][ 5 ][ 6 ][ 7 ][ 8 ]
//!          |    |    |    ` in flight (sent, no news yet): counted in `flight`
//!          |    |    ` sacked: the reader holds it out of order (not in flight)
//!          |    ` lost: named by a NACK, queued for one resend (not in flight)
//!          ` acknowledged cumulatively: freed
//! ```
//!
//! **Congestion.** `flight ≤ cwnd ≤ window`. A NACK that names a datagram
//! sent after the last loss halves `cwnd` (once per window of data: the
//! loss recovery of TCP NewReno); a resend lost again halves it again; acknowledged datagrams grow it (doubling
//! per round trip below `ssthresh`, one per window above). First sends and
//! resends alike wait for room, and a writer that waits asks the reader for
//! its acknowledgement with a heartbeat at once rather than after
//! `heartbeat_period`. The resend timer (no acknowledgement progress for
//! `resend_after`, doubling up to `max_resend_after` while none comes)
//! resends only the oldest unacknowledged datagram and asks for an
//! acknowledgement: the reader's NACK names what else is missing. A whole
//! window is never resent on a timer: through a narrow bottleneck (a `tbf`
//! with a 3000-byte queue) whole-window bursts were dropped again nearly
//! entirely, 22 resends per datagram sent.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod state;
mod types;
use state::{Asking, Congestion, Nacked, Pool, RoundTrip, Timer, Timers};
pub use types::{AckReport, Transmit, WindowFull, WriterConfig, WriterStats};

/// The reliable sender for one stream (one publisher → one remote node).
///
/// Invariants: the held datagrams are exactly the seqs `base .. next_seq`,
/// never more than `window` of them; everything below `base` was acknowledged
/// cumulatively. A datagram is queued for retransmission at most once at a
/// time.
#[derive(Debug)]
pub struct Writer {
    config: WriterConfig,
    /// Seq the next `send` assigns.
    next_seq: u64,
    /// Seq of `held[0]`.
    base: u64,
    held: VecDeque<Slot>,
    /// Total bytes of the held datagrams.
    held_bytes: usize,
    /// Total messages they carry.
    held_messages: usize,
    /// Seqs to retransmit, in the order they were asked for.
    resend: VecDeque<u64>,
    pool: Pool,
    cc: Congestion,
    timers: Timers,
    ask: Asking,
    rtt: RoundTrip,
    /// When the acknowledged prefix last moved (or the first datagram of an
    /// empty window went out).
    progress_at: Option<Instant>,
    stats: WriterStats,
}

#[derive(Debug)]
struct Slot {
    /// Shared with the first transmission when it was sent from
    /// [`Writer::send_shared`], until the I/O layer lets go of it.
    bytes: Arc<Vec<u8>>,
    /// Messages it carries (see `send_counted`).
    messages: usize,
    sent_at: Instant,
    /// Selectively acknowledged: the reader holds it out of order.
    sacked: bool,
    queued: bool,
    /// Counted in `flight`.
    in_flight: bool,
    /// The writer's epoch at its last transmission.
    epoch: u64,
}

/// Most bytes (capacity) of acknowledged datagrams' buffers a writer keeps
/// for its next datagrams: one acknowledgement may release a whole burst
/// (hundreds of datagrams), and each buffer not kept is a `malloc` on the
/// next send.
const POOL_BYTES: usize = 1 << 20;

/// Shortest wait before asking a silent reader again.
const RETRY_MIN: Duration = Duration::from_millis(1);

impl Writer {
    /// A writer whose first datagram gets seq 1.
    pub fn new(config: WriterConfig) -> Self {
        let window = config.window.max(1);
        let min_cwnd = config.min_cwnd.clamp(1, window);
        let cwnd = config.initial_cwnd.clamp(min_cwnd, window);
        Self {
            config: WriterConfig {
                window,
                min_cwnd,
                ..config
            },
            next_seq: 1,
            base: 1,
            held: VecDeque::new(),
            held_bytes: 0,
            held_messages: 0,
            resend: VecDeque::new(),
            pool: Pool::default(),
            cc: Congestion {
                flight: 0,
                cwnd,
                ssthresh: window,
                acc: 0,
                epoch: 0,
                paced: false,
            },
            timers: Timers::default(),
            ask: Asking::default(),
            rtt: RoundTrip {
                srtt: None,
                rto: config.resend_after,
                heartbeat_at: None,
            },
            progress_at: None,
            stats: WriterStats::default(),
        }
    }

    /// Assigns the next seq, lets `encode` append the datagram to an empty
    /// (reused) buffer, keeps it for retransmission and returns the seq and
    /// the bytes, which the caller sends now.
    pub fn send(
        &mut self,
        now: Instant,
        encode: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<(u64, &[u8]), WindowFull> {
        self.send_counted(now, 1, encode)
    }

    /// [`Writer::send`] for a datagram that carries `messages` messages (a
    /// batch), so that [`Writer::held_messages`] can bound what a receiver
    /// gets at once when a loss is repaired.
    pub fn send_counted(
        &mut self,
        now: Instant,
        messages: usize,
        encode: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<(u64, &[u8]), WindowFull> {
        self.keep(now, messages, true, encode)
            .map(|(seq, b)| (seq, &b[..]))
    }

    /// [`Writer::send_counted`], the datagram's buffer shared with the
    /// caller instead of lent: it sends it without a copy, the window
    /// keeps it for resends, and whichever lets go last frees it (the
    /// window, when it is acknowledged, takes it back for the next
    /// datagram if the caller let go first, as it usually has).
    pub fn send_shared(
        &mut self,
        now: Instant,
        messages: usize,
        encode: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<(u64, Arc<Vec<u8>>), WindowFull> {
        self.keep(now, messages, true, encode)
            .map(|(seq, b)| (seq, Arc::clone(b)))
    }

    /// Keeps a datagram someone else already sent with the next seq (a
    /// publisher's own first copy, offered when the window had room): only
    /// the window bounds it, not the congestion window, which resends may
    /// have filled since.
    pub fn send_sent(
        &mut self,
        now: Instant,
        messages: usize,
        encode: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<(u64, &[u8]), WindowFull> {
        self.keep(now, messages, false, encode)
            .map(|(seq, b)| (seq, &b[..]))
    }

    fn keep(
        &mut self,
        now: Instant,
        messages: usize,
        congestion: bool,
        encode: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<(u64, &Arc<Vec<u8>>), WindowFull> {
        let full = if congestion {
            !self.can_send()
        } else {
            self.held.len() >= self.config.window
        };
        if full {
            // Ask the reader where it stands rather than wait for the
            // heartbeat timer: its answer opens the window.
            self.ask.wanted = true;
            return Err(WindowFull {
                window: self.config.window,
            });
        }
        let seq = self.next_seq;
        let mut shared = match self.pool.bufs.pop() {
            Some(b) => {
                self.pool.bytes -= b.capacity();
                b
            }
            None => Arc::new(Vec::new()),
        };
        if let Some(next) = self.pool.bufs.last() {
            crate::prefetch::buffer(next);
        }
        // (The pool holds only buffers nobody else does.)
        let bytes = match Arc::get_mut(&mut shared) {
            Some(b) => b,
            None => {
                shared = Arc::new(Vec::new());
                Arc::make_mut(&mut shared)
            }
        };
        bytes.clear();
        encode(seq, bytes);
        let bytes = shared;
        self.next_seq += 1;
        self.stats.sent += 1;
        if self.held.is_empty() {
            self.timers
                .set(Timer::Heartbeat, now + self.config.heartbeat_period);
            self.progress_at = Some(now);
        }
        if self.timers.get(Timer::Resend).is_none() {
            self.timers.set(Timer::Resend, now + self.rtt.rto);
        }
        self.held_bytes += bytes.len();
        self.held_messages += messages;
        self.cc.flight += 1;
        self.held.push_back(Slot {
            bytes,
            messages,
            sent_at: now,
            sacked: false,
            queued: false,
            in_flight: true,
            epoch: self.cc.epoch,
        });
        match self.held.back() {
            Some(s) => Ok((seq, &s.bytes)),
            // (Just pushed.)
            None => Err(WindowFull {
                window: self.config.window,
            }),
        }
    }

    /// Takes the reader's acknowledgement: frees every seq ≤ `ack_through`,
    /// marks those up to `known_through` it does not name `missing` as
    /// held by the reader, and queues the `missing` seqs still held for
    /// retransmission; says how many it freed and how many losses it saw
    /// for the first time.
    pub fn handle_acknack(
        &mut self,
        now: Instant,
        ack_through: u64,
        known_through: u64,
        missing: &[u64],
    ) -> AckReport {
        // A reader cannot acknowledge what was never sent.
        let ack_through = ack_through.min(self.next_seq - 1);
        let acked = self.free_through(now, ack_through);
        self.resend.retain(|&s| s >= self.base);
        self.mark_sacked(ack_through, known_through, missing);
        let nacked = self.take_missing(now, missing);
        self.answered(now, acked > 0 || nacked.queued);
        // (A loss reported with progress halves the window as it was,
        // unless a pacer sets the rate.)
        if nacked.lost_new && !self.cc.paced {
            self.stats.congestion_events += 1;
            self.cc.shrink(self.config.min_cwnd.max(self.cc.cwnd / 2));
        } else if acked > 0 {
            self.cc.grow(acked, self.config.window);
        }
        if !self.held.is_empty() && self.timers.get(Timer::Heartbeat).is_none() {
            self.timers
                .set(Timer::Heartbeat, now + self.config.heartbeat_period);
        }
        if self.held.is_empty() || (nacked.queued && nacked.held_off.is_none()) {
            // (What was held off before is named and queued now.)
            self.timers.stop(Timer::Recheck);
        } else if let Some(due) = nacked.held_off {
            self.timers.set_earliest(Timer::Recheck, due);
        }
        AckReport {
            acked,
            lost: nacked.lost,
        }
    }

    /// Frees every held seq ≤ `ack_through` (its buffer back to the pool if
    /// nobody else holds it); how many.
    fn free_through(&mut self, now: Instant, ack_through: u64) -> usize {
        let mut acked = 0usize;
        while self.base <= ack_through {
            let Some(slot) = self.held.pop_front() else {
                break;
            };
            self.base += 1;
            acked += 1;
            self.stats.acked += 1;
            self.held_bytes -= slot.bytes.len();
            self.held_messages -= slot.messages;
            if slot.in_flight {
                self.cc.flight -= 1;
            }
            let cap = slot.bytes.capacity();
            // (One the I/O layer still holds is its to free.)
            if Arc::strong_count(&slot.bytes) == 1 && self.pool.bytes + cap <= POOL_BYTES {
                self.pool.bytes += cap;
                self.pool.bufs.push(slot.bytes);
            }
        }
        if acked > 0 {
            self.rtt.rto = self.config.resend_after;
            self.progress_at = Some(now);
            self.timers.set(Timer::Resend, now + self.rtt.rto);
        }
        if self.held.is_empty() {
            self.timers.stop(Timer::Heartbeat);
            self.timers.stop(Timer::Resend);
            self.progress_at = None;
        }
        acked
    }

    /// Seqs after the acknowledged prefix, up to the last the reader spoke
    /// of (`known_through`, at least the last missing one), that are not
    /// missing are held by the reader (out of order): no timer resend for
    /// them, and not in flight.
    fn mark_sacked(&mut self, ack_through: u64, known_through: u64, missing: &[u64]) {
        let sorted = missing.windows(2).all(|w| w[0] < w[1]);
        if !sorted {
            return;
        }
        let last_missing = missing.last().copied().unwrap_or(0);
        // (Bounded by the window: `slot_mut` finds only held seqs, and the
        // span is at most 256 past `ack_through` on the wire.)
        let end = known_through
            .max(last_missing)
            .min(self.next_seq.saturating_sub(1))
            .min(ack_through.saturating_add(self.config.window as u64));
        for s in ack_through.saturating_add(1)..=end {
            if s < self.base || missing.binary_search(&s).is_ok() {
                continue;
            }
            if let Some(slot) = self.slot_mut(s) {
                slot.sacked = true;
                if std::mem::take(&mut slot.in_flight) {
                    self.cc.flight -= 1;
                }
            }
        }
    }

    /// Queues the `missing` seqs for one resend each, but those sent too
    /// recently (held off: see [`Nacked::held_off`]).
    fn take_missing(&mut self, now: Instant, missing: &[u64]) -> Nacked {
        let holdoff = self.config.nack_holdoff;
        let heartbeat_at = self.rtt.heartbeat_at;
        let epoch = self.cc.epoch;
        let mut n = Nacked::default();
        for &s in missing {
            let Some(slot) = self.slot_mut(s) else {
                continue;
            };
            slot.sacked = false;
            // A datagram sent before our last heartbeat and still missing
            // when the reader answered it is lost (bar reordering): the
            // holdoff, meant for copies still on their way, would make a
            // short round trip wait for the next heartbeat.
            let before_heartbeat = heartbeat_at.is_some_and(|h| slot.sent_at < h);
            if now < slot.sent_at + holdoff && !before_heartbeat {
                // Held off, not forgotten: ask the reader again once the
                // holdoff is over (its answer names the seq again, and
                // then the heartbeat came after the copy). Waiting for the
                // reader's next NACK instead stalled a writer whose window
                // the missing datagram held full until the heartbeat
                // period: 50 ms a loss, found by the simulator with 8 KiB
                // messages in MTU-sized datagrams through 3 % loss.
                let due = slot.sent_at + holdoff;
                n.held_off = Some(n.held_off.map_or(due, |d: Instant| d.min(due)));
                continue;
            }
            let was_in_flight = std::mem::take(&mut slot.in_flight);
            let slot_epoch = slot.epoch;
            if !slot.queued {
                slot.queued = true;
                self.resend.push_back(s);
                n.queued = true;
            }
            if was_in_flight {
                self.cc.flight -= 1;
                n.lost += 1;
                n.lost_new |= slot_epoch == epoch;
            }
        }
        n
    }

    /// An answer with news (`news`: progress or a loss queued) answers our
    /// request for one; one without (the losses it names are still held
    /// off) leaves the next request to the heartbeat timer, or writer and
    /// reader would ping-pong.
    fn answered(&mut self, now: Instant, news: bool) {
        self.ask.unanswered = 0;
        if news {
            if self.ask.asked {
                // The answer to our request: a round-trip sample.
                if let Some(h) = self.rtt.heartbeat_at {
                    let sample = now.saturating_duration_since(h);
                    self.rtt.srtt = Some(self.rtt.srtt.map_or(sample, |r| (r * 7 + sample) / 8));
                }
            }
            self.ask.wanted = false;
            self.ask.asked = false;
        } else if self.ask.asked && !self.held.is_empty() {
            // Answered without news: the request was not lost, so the
            // next one waits for the heartbeat period.
            if let Some(h) = self.rtt.heartbeat_at {
                self.timers
                    .set(Timer::Heartbeat, h + self.config.heartbeat_period);
            }
        }
    }

    /// The next retransmission or heartbeat to send, if any is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        if self.timers.is_due(Timer::Resend, now) {
            self.check_progress(now);
        }
        // The oldest unacknowledged datagram goes again whatever the
        // congestion window says: until it arrives the reader acknowledges
        // nothing cumulatively, and what it holds after the gap stays
        // counted in flight, so waiting for room would wait for the resend
        // timer (found by the simulator: 100 ms stalls at 5 % loss).
        // Wherever it waits in the queue: named again after its resend
        // was lost, it joins the queue's end, behind losses the window
        // holds back, and the reader's cumulative acknowledgement with it
        // (a stall of 1-60 s a loss of a resent datagram, one round trip a
        // queued resend at the least window; found with 8 KiB messages
        // through 3 % drops between two namespaces).
        self.base_first();
        while let Some(&seq) = self.resend.front() {
            if self.cc.flight >= self.cc.cwnd && seq != self.base {
                break;
            }
            self.resend.pop_front();
            let Some(i) = self.index(seq) else { continue };
            let slot = &mut self.held[i];
            slot.queued = false;
            if slot.sacked {
                continue;
            }
            slot.sent_at = now;
            slot.epoch = self.cc.epoch;
            if !std::mem::replace(&mut slot.in_flight, true) {
                self.cc.flight += 1;
            }
            self.stats.retransmitted += 1;
            let slot = &self.held[i];
            return Some(Transmit::Data {
                seq,
                bytes: &slot.bytes,
            });
        }
        if !self.resend.is_empty() {
            // Resends wait for room in the congestion window.
            self.ask.wanted = true;
        }
        if self.timers.is_due(Timer::Recheck, now) {
            // A NACK held off: its answer now names what is still missing.
            self.timers.stop(Timer::Recheck);
            if !self.held.is_empty() {
                self.ask.wanted = true;
                self.ask.asked = false;
            }
        }
        let asked = self.ask.wanted && !self.ask.asked;
        if (asked || self.timers.is_due(Timer::Heartbeat, now)) && !self.held.is_empty() {
            self.ask.asked |= asked;
            // A writer waiting for room asks again after a few round trips
            // when the request or its answer was lost, not after a whole
            // heartbeat period: below `ack_every` datagrams in flight the
            // reader says nothing unasked.
            // Unanswered, it backs off (doubling up to the heartbeat
            // period): a reader cut off for a second got a request every
            // millisecond, 900 a second on a link with a 0.1 ms round
            // trip (found in the clock-sync example's link-cut test).
            let period = match (self.ask.asked, self.rtt.srtt) {
                (true, Some(rtt)) if !self.ask.paused => (rtt * 3)
                    .max(RETRY_MIN)
                    .saturating_mul(1 << self.ask.unanswered.min(16))
                    .min(self.config.heartbeat_period),
                _ => self.config.heartbeat_period,
            };
            self.ask.unanswered = self.ask.unanswered.saturating_add(1);
            self.timers.set(Timer::Heartbeat, now + period);
            self.stats.heartbeats += 1;
            self.rtt.heartbeat_at = Some(now);
            return Some(self.heartbeat());
        }
        None
    }

    /// When [`Writer::poll_transmit`] next has something to do, if ever
    /// without new input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let due_now = (!self.resend.is_empty()
            && (self.cc.flight < self.cc.cwnd || self.held.front().is_some_and(|s| s.queued)))
            || (self.ask.wanted && !self.ask.asked && !self.held.is_empty());
        if due_now {
            // Due now; any instant in the past works, the caller compares.
            return self.held.front().map(|s| s.sent_at);
        }
        self.timers.next()
    }

    /// The current heartbeat (`first > last` when nothing is unacknowledged),
    /// e.g. to announce the stream on demand.
    pub fn heartbeat(&self) -> Transmit<'static> {
        Transmit::Heartbeat {
            first: self.base,
            last: self.next_seq - 1,
        }
    }

    /// Bytes of the unacknowledged datagrams held, O(1).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Messages the unacknowledged datagrams carry, O(1).
    pub fn held_messages(&self) -> usize {
        self.held_messages
    }

    /// Asks the reader for an acknowledgement at once (a heartbeat from the
    /// next [`Writer::poll_transmit`], once per AckNack received): the
    /// caller holds data back for a bound of its own.
    pub fn request_ack(&mut self) {
        if !self.held.is_empty() {
            self.ask.wanted = true;
        }
    }

    /// Whether a pacing controller sets this stream's rate: then a NACK no
    /// longer halves the congestion window (the controller lengthens its
    /// interval for a loss that comes with a grown round trip, and leaves
    /// it for random loss); a resend timeout still collapses it.
    pub fn set_paced(&mut self, paced: bool) {
        self.cc.paced = paced;
    }

    /// Asks the reader for an acknowledgement at once even if an earlier
    /// request is still unanswered (a heartbeat from the next
    /// [`Writer::poll_transmit`]): a paced stream asks every few datagrams,
    /// so that the reader's answers, not the queue, set how many
    /// datagrams one answer frees.
    pub fn ask_again(&mut self) {
        if !self.held.is_empty() {
            self.ask.wanted = true;
            self.ask.asked = false;
        }
    }

    /// The stream's reader moved (another socket on the same node took it
    /// over, knowing only what was acknowledged cumulatively): every
    /// datagram still held is queued to go again, in order, as the
    /// congestion window allows, and the resend timer starts afresh.
    pub fn retarget(&mut self, now: Instant) {
        self.resend.clear();
        for slot in self.held.iter_mut() {
            slot.sacked = false;
            slot.in_flight = false;
            slot.queued = true;
        }
        self.cc.flight = 0;
        self.resend.extend(self.base..self.next_seq);
        self.rtt.rto = self.config.resend_after;
        self.ask.paused = false;
        if !self.held.is_empty() {
            self.progress_at = Some(now);
            self.timers.set(Timer::Resend, now + self.rtt.rto);
            self.timers
                .set(Timer::Heartbeat, now + self.config.heartbeat_period);
            self.ask.wanted = true;
            self.ask.asked = false;
        }
    }

    /// While `paused` (the reader said it has no room), the resend timer
    /// only asks the reader where it stands: resending what it refuses
    /// would come back refused. NACKed datagrams are still resent.
    pub fn set_paused(&mut self, paused: bool) {
        self.ask.paused = paused;
    }

    /// Unacknowledged datagrams held, O(1) (read by the pacing controller).
    pub fn occupancy(&self) -> usize {
        self.held.len()
    }

    /// Datagrams sent with no news yet (at most [`Writer::cwnd`]).
    pub fn in_flight(&self) -> usize {
        self.cc.flight
    }

    /// The congestion window: most datagrams in flight.
    pub fn cwnd(&self) -> usize {
        self.cc.cwnd
    }

    /// Datagrams [`Writer::send`] takes now: room in both the window and
    /// the congestion window.
    pub fn room(&self) -> usize {
        let window = self.config.window.saturating_sub(self.held.len());
        window.min(self.cc.cwnd.saturating_sub(self.cc.flight))
    }

    /// Whether [`Writer::send`] takes a datagram now.
    pub fn can_send(&self) -> bool {
        self.room() > 0
    }

    /// The window size.
    pub fn window(&self) -> usize {
        self.config.window
    }

    /// Whether every datagram sent was acknowledged.
    pub fn is_idle(&self) -> bool {
        self.held.is_empty()
    }

    /// The seq the next [`Writer::send`] assigns.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The counters.
    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    fn index(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        (i < self.held.len()).then_some(i)
    }

    /// Moves the oldest unacknowledged datagram to the front of the
    /// resend queue if it is queued (see `poll_transmit`).
    fn base_first(&mut self) {
        if self.held.front().is_none_or(|s| !s.queued) || self.resend.front() == Some(&self.base) {
            return;
        }
        if let Some(i) = self.resend.iter().position(|&s| s == self.base) {
            self.resend.remove(i);
            self.resend.push_front(self.base);
        }
    }

    fn slot_mut(&mut self, seq: u64) -> Option<&mut Slot> {
        let i = self.index(seq)?;
        self.held.get_mut(i)
    }

    /// The resend timer: without acknowledgement progress for `rto`, the
    /// oldest datagram the reader lacks goes again, everything in flight
    /// counts as lost (the congestion window falls to its least), the timer
    /// backs off and a heartbeat asks the reader what else it lacks.
    fn check_progress(&mut self, now: Instant) {
        let Some(since) = self.progress_at else {
            self.timers.stop(Timer::Resend);
            return;
        };
        if now < since + self.rtt.rto {
            self.timers.set(Timer::Resend, since + self.rtt.rto);
            return;
        }
        self.stats.timeouts += 1;
        self.stats.congestion_events += 1;
        for slot in self.held.iter_mut() {
            slot.in_flight = false;
        }
        self.cc.flight = 0;
        self.cc.ssthresh = self.config.min_cwnd.max(self.cc.cwnd / 2);
        self.cc.cwnd = self.config.min_cwnd;
        self.cc.acc = 0;
        self.cc.epoch += 1;
        let base = self.base;
        let head = (!self.ask.paused)
            .then(|| self.held.iter().position(|s| !s.sacked))
            .flatten();
        if let Some(i) = head {
            let slot = &mut self.held[i];
            if !slot.queued {
                slot.queued = true;
                self.resend.push_front(base + i as u64);
            }
        }
        self.ask.wanted = true;
        self.ask.asked = false;
        self.rtt.rto =
            (self.rtt.rto * 2).min(self.config.max_resend_after.max(self.config.resend_after));
        self.progress_at = Some(now);
        self.timers.set(Timer::Resend, now + self.rtt.rto);
    }
}

impl Default for Writer {
    fn default() -> Self {
        Self::new(WriterConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn send(w: &mut Writer, now: Instant, tag: u8) -> u64 {
        w.send(now, |seq, out| out.extend_from_slice(&[tag, seq as u8]))
            .unwrap()
            .0
    }

    #[test]
    fn the_window_bounds_unacknowledged_datagrams() {
        let t0 = Instant::now();
        let mut w = Writer::new(WriterConfig {
            window: 3,
            ..WriterConfig::default()
        });
        for i in 1..=3 {
            assert_eq!(send(&mut w, t0, 0), i);
        }
        assert_eq!(
            (w.occupancy(), w.held_bytes(), w.held_messages()),
            (3, 6, 3)
        );
        assert_eq!(w.send(t0, |_, _| {}), Err(WindowFull { window: 3 }));
        w.handle_acknack(t0, 2, 0, &[]);
        assert_eq!((w.occupancy(), w.held_bytes()), (1, 2));
        assert_eq!(send(&mut w, t0, 0), 4);
        w.handle_acknack(t0, 99, 0, &[]);
        assert!(w.is_idle());
        assert_eq!((w.held_bytes(), w.held_messages()), (0, 0));
        assert_eq!(w.stats().acked, 4);
        assert_eq!(w.poll_timeout(), None);
        w.send_counted(t0, 40, |_, o| o.push(1)).unwrap();
        assert_eq!(w.held_messages(), 40);
    }

    #[test]
    fn a_shared_datagram_is_never_rewritten_while_the_sender_holds_it() {
        let t0 = Instant::now();
        let mut w = Writer::default();
        let enc = |b: u8| move |_: u64, o: &mut Vec<u8>| o.extend_from_slice(&[b; 4]);
        let (_, first) = w.send_shared(t0, 1, enc(1)).unwrap();
        let at = first.as_ptr();
        // Let go before the acknowledgement (it was sent): the window
        // takes the buffer back and the next datagram is written there.
        drop(first);
        w.handle_acknack(t0, 1, 0, &[]);
        let (_, second) = w.send_shared(t0, 1, enc(2)).unwrap();
        assert_eq!((second.as_ptr(), &second[..]), (at, &[2u8; 4][..]));
        // Still held at the acknowledgement: the window lets go of it and
        // the next datagram gets another buffer; the held bytes stay.
        w.handle_acknack(t0, 2, 0, &[]);
        let (_, third) = w.send_shared(t0, 1, enc(3)).unwrap();
        assert_ne!(third.as_ptr(), second.as_ptr());
        assert_eq!((&second[..], &third[..]), (&[2u8; 4][..], &[3u8; 4][..]));
        // A resend is the bytes first shared.
        w.handle_acknack(t0 + ms(20), 2, 0, &[3]);
        assert_eq!(
            w.poll_transmit(t0 + ms(20)),
            Some(Transmit::Data {
                seq: 3,
                bytes: &[3, 3, 3, 3]
            })
        );
    }

    #[test]
    fn a_nack_retransmits_the_same_bytes_once() {
        let t0 = Instant::now();
        let mut w = Writer::default();
        for i in 1..=4 {
            send(&mut w, t0, i);
        }
        // Too soon: the first copies may still be in flight.
        w.handle_acknack(t0, 1, 0, &[2, 4]);
        assert_eq!(w.poll_transmit(t0), None);
        let t = t0 + ms(20);
        w.handle_acknack(t, 1, 0, &[2, 4]);
        w.handle_acknack(t, 1, 0, &[2, 4]);
        assert_eq!(
            w.poll_transmit(t),
            Some(Transmit::Data {
                seq: 2,
                bytes: &[2, 2]
            })
        );
        assert_eq!(
            w.poll_transmit(t),
            Some(Transmit::Data {
                seq: 4,
                bytes: &[4, 4]
            })
        );
        assert_eq!(w.poll_transmit(t), None);
        // A NACK right after the retransmission is ignored too (the writer
        // asks about it again when the holdoff ends).
        w.handle_acknack(t + ms(1), 1, 0, &[2]);
        assert_eq!(w.poll_transmit(t + ms(1)), None);
        assert_eq!(w.stats().retransmitted, 2);
    }

    #[test]
    fn a_nack_held_off_is_asked_about_again_when_the_holdoff_ends() {
        let t0 = Instant::now();
        let mut w = Writer::default();
        for i in 1..=3 {
            send(&mut w, t0, i);
        }
        // 1 arrives, 2 is named at once: its copy may still be on its way
        // (the holdoff, 10 ms), so it waits.
        w.handle_acknack(t0 + ms(1), 1, 0, &[2]);
        assert!(!matches!(
            w.poll_transmit(t0 + ms(1)),
            Some(Transmit::Data { .. })
        ));
        // The writer asks again when the holdoff ends, not after a
        // heartbeat period (50 ms).
        let due = w.poll_timeout().expect("a timer");
        assert_eq!(due, t0 + ms(10));
        assert!(matches!(
            w.poll_transmit(due),
            Some(Transmit::Heartbeat { .. })
        ));
        // The answer names 2 again, after the heartbeat: now it goes.
        w.handle_acknack(due + ms(1), 1, 0, &[2]);
        assert_eq!(
            w.poll_transmit(due + ms(1)),
            Some(Transmit::Data {
                seq: 2,
                bytes: &[2, 2]
            })
        );
    }

    /// When, between `from` and `to` (stepping 100 µs), the writer sends
    /// a heartbeat (answering nothing).
    fn heartbeat_times(w: &mut Writer, from: Instant, to: Instant) -> Vec<Duration> {
        let mut at = Vec::new();
        let mut t = from;
        while t < to {
            while let Some(x) = w.poll_transmit(t) {
                if matches!(x, Transmit::Heartbeat { .. }) {
                    at.push(t - from);
                }
            }
            t += Duration::from_micros(100);
        }
        at
    }

    #[test]
    fn unanswered_requests_for_room_back_off_to_the_heartbeat_period() {
        let t0 = Instant::now();
        let mut w = Writer::new(WriterConfig {
            initial_cwnd: 2,
            min_cwnd: 2,
            ..WriterConfig::default()
        });
        send(&mut w, t0, 1);
        send(&mut w, t0, 2);
        // The window is full: the third is refused, and the writer asks
        // at once.
        let full = |w: &mut Writer, t| w.send(t, |_, o| o.push(0)).is_err();
        assert!(full(&mut w, t0));
        assert!(matches!(
            w.poll_transmit(t0),
            Some(Transmit::Heartbeat { .. })
        ));
        // Answered after 100 µs: a short round trip.
        let t1 = t0 + Duration::from_micros(100);
        w.handle_acknack(t1, 2, 0, &[]);
        while w.poll_transmit(t1).is_some() {}
        while !full(&mut w, t1) {}
        // Now the reader is cut off: nothing answers. The requests for
        // room come after 1, 2, 4, ... ms, then every heartbeat period
        // (50 ms), not every millisecond (900 a second, before).
        let at = heartbeat_times(&mut w, t1, t1 + ms(300));
        let gaps: Vec<u64> = at
            .windows(2)
            .map(|p| (p[1] - p[0]).as_millis() as u64)
            .collect();
        assert!(at.len() <= 14, "{} requests in 300 ms: {gaps:?}", at.len());
        assert!(
            gaps.windows(2).all(|g| g[1] >= g[0]),
            "the waits do not shrink: {gaps:?}"
        );
        assert_eq!(gaps.last(), Some(&50), "{gaps:?}");
        // An answer starts the short waits again.
        let t2 = t1 + ms(300);
        let sent = w.stats().sent;
        w.handle_acknack(t2, sent, 0, &[]);
        while !full(&mut w, t2) {}
        let again = heartbeat_times(&mut w, t2, t2 + ms(60));
        assert!(
            again.len() >= 2 && again[1] - again[0] < ms(50),
            "{again:?}"
        );
    }

    #[test]
    fn heartbeats_run_and_the_timer_resends_only_the_oldest_with_backoff() {
        let t0 = Instant::now();
        let mut w = Writer::default();
        for i in 1..=3 {
            send(&mut w, t0, i);
        }
        assert_eq!(w.poll_transmit(t0), None);
        assert_eq!(w.poll_timeout(), Some(t0 + ms(50)));
        assert_eq!(
            w.poll_transmit(t0 + ms(50)),
            Some(Transmit::Heartbeat { first: 1, last: 3 })
        );
        // Seq 2 is held by the reader out of order: only 1 and 3 are resent.
        let t = t0 + ms(60);
        w.handle_acknack(t, 0, 0, &[1, 3]);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 1, .. })
        ));
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 3, .. })
        ));
        assert_eq!(w.poll_transmit(t), None);
        assert_eq!(w.stats().congestion_events, 1);
        // No acknowledgement progress for 100 ms: the oldest goes again (not
        // the whole window) and a heartbeat asks what else is missing.
        let t = t0 + ms(100);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 1, .. })
        ));
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Heartbeat { first: 1, last: 3 })
        ));
        assert_eq!(w.poll_transmit(t), None);
        assert_eq!((w.stats().timeouts, w.cwnd()), (1, 2));
        // The timer backed off to 200 ms: nothing at 250 but a heartbeat.
        assert!(matches!(
            w.poll_transmit(t0 + ms(250)),
            Some(Transmit::Heartbeat { .. })
        ));
        assert_eq!(w.poll_transmit(t0 + ms(250)), None);
        let t = t0 + ms(300);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 1, .. })
        ));
        w.handle_acknack(t, 3, 0, &[]);
        assert!(w.is_idle());
        assert_eq!(w.poll_transmit(t0 + ms(1000)), None);
        assert!(matches!(
            w.heartbeat(),
            Transmit::Heartbeat { first: 4, last: 3 }
        ));
        assert_eq!(w.stats().retransmitted, 4);
    }

    #[test]
    fn losses_halve_the_congestion_window_once_per_window_and_bound_resends() {
        let t0 = Instant::now();
        let mut w = Writer::new(WriterConfig {
            window: 64,
            initial_cwnd: 16,
            ..WriterConfig::default()
        });
        for i in 1..=16 {
            assert_eq!(send(&mut w, t0, i), u64::from(i));
        }
        // The congestion window is full: the writer refuses and asks for an
        // acknowledgement at once.
        assert!(w.send(t0, |_, _| {}).is_err());
        assert_eq!(w.room(), 0);
        assert!(matches!(
            w.poll_transmit(t0),
            Some(Transmit::Heartbeat { first: 1, last: 16 })
        ));
        assert_eq!(w.poll_transmit(t0), None, "asked once");
        // Eight of them are lost: one halving, not eight.
        let t = t0 + ms(20);
        let missing: Vec<u64> = (9..=16).collect();
        w.handle_acknack(t, 8, 0, &missing);
        assert_eq!((w.cwnd(), w.in_flight()), (8, 0));
        assert_eq!(w.stats().congestion_events, 1);
        // Resends fill the (halved) congestion window, no more.
        for seq in 9..=16 {
            assert!(matches!(w.poll_transmit(t), Some(Transmit::Data { seq: s, .. }) if s == seq));
        }
        assert_eq!(w.in_flight(), 8);
        assert!(!w.can_send());
        // A second NACK of the same data (lost again) halves it again: it
        // was sent after the first loss.
        w.handle_acknack(t + ms(20), 8, 0, &[9, 10]);
        assert_eq!(w.cwnd(), 4);
        assert_eq!(w.stats().congestion_events, 2);
        // Progress grows it: at the threshold, by one per window acknowledged.
        w.handle_acknack(t + ms(40), 16, 0, &[]);
        assert!(w.is_idle());
        assert_eq!(w.cwnd(), 5);
        assert_eq!(w.in_flight(), 0);
    }

    #[test]
    fn the_oldest_goes_again_at_once_even_when_named_behind_queued_resends() {
        let t0 = Instant::now();
        let mut w = Writer::new(WriterConfig {
            window: 64,
            initial_cwnd: 4,
            ..WriterConfig::default()
        });
        for i in 1..=4 {
            send(&mut w, t0, i);
        }
        // All four lost: the window falls to its least (2); the oldest goes
        // whatever the window says, the others wait for room.
        let t = t0 + ms(20);
        w.handle_acknack(t, 0, 0, &[1, 2, 3, 4]);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 1, .. })
        ));
        w.handle_acknack(t, 0, 0, &[1, 2, 3, 4]);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 2, .. })
        ));
        assert!(!matches!(w.poll_transmit(t), Some(Transmit::Data { .. })));
        // 1's resend is lost too: named again, it joins the queue behind 3
        // and 4, which wait for room. It goes at once all the same (the
        // reader acknowledges nothing until it has it): waiting behind
        // them was a stall of a round trip each, or of the resend timer.
        let t = t + ms(20);
        w.handle_acknack(t, 0, 0, &[1, 3, 4]);
        assert!(w.poll_timeout().is_some_and(|d| d <= t), "due now");
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 1, .. })
        ));
        w.handle_acknack(t + ms(1), 2, 0, &[3, 4]);
        assert_eq!(w.stats().acked, 2);
    }

    #[test]
    fn what_the_reader_holds_past_its_last_missing_seq_leaves_the_flight() {
        let t0 = Instant::now();
        let mut w = Writer::new(WriterConfig {
            window: 64,
            initial_cwnd: 64,
            ..WriterConfig::default()
        });
        for i in 1..=10 {
            send(&mut w, t0, i);
        }
        assert_eq!(w.in_flight(), 10);
        // 2 lost; the reader holds 1 and 3..=10 and says so up to 10.
        let t = t0 + ms(20);
        let r = w.handle_acknack(t, 1, 10, &[2]);
        assert_eq!(r, AckReport { acked: 1, lost: 1 });
        assert_eq!((w.in_flight(), w.occupancy()), (0, 9));
        // Named again before its resend arrives: not a new loss.
        let r = w.handle_acknack(t, 1, 10, &[2]);
        assert_eq!(r, AckReport { acked: 0, lost: 0 });
        // An older reader says nothing past its last missing seq: 3..=10
        // stay in flight.
        let mut old = Writer::new(WriterConfig {
            window: 64,
            initial_cwnd: 64,
            ..WriterConfig::default()
        });
        for i in 1..=10 {
            send(&mut old, t0, i);
        }
        old.handle_acknack(t, 1, 0, &[2]);
        assert_eq!(old.in_flight(), 8);
    }

    #[test]
    fn a_retargeted_writer_sends_everything_unacknowledged_again_in_order() {
        let t0 = Instant::now();
        let mut w = Writer::new(WriterConfig {
            initial_cwnd: 4,
            ..WriterConfig::default()
        });
        for _ in 0..6 {
            let _ = w.send_sent(t0, 1, |seq, out| out.push(seq as u8));
        }
        // The old reader had 1-2 cumulatively and 5 out of order.
        w.handle_acknack(t0 + ms(20), 2, 0, &[3, 4]);
        assert_eq!(w.occupancy(), 4);
        while w.poll_transmit(t0 + ms(20)).is_some() {}
        let t = t0 + ms(30);
        w.retarget(t);
        let mut again = Vec::new();
        while let Some(Transmit::Data { seq, .. }) = w.poll_transmit(t) {
            again.push(seq);
        }
        // The congestion window (halved to 2 by the loss) bounds the burst.
        assert_eq!(again, vec![3, 4]);
        assert_eq!(w.in_flight(), 2);
        w.handle_acknack(t + ms(5), 4, 0, &[]);
        again.clear();
        while let Some(Transmit::Data { seq, .. }) = w.poll_transmit(t + ms(5)) {
            again.push(seq);
        }
        // The sacked 5 goes too: the new reader never had it.
        assert_eq!(again, vec![5, 6]);
        w.handle_acknack(t + ms(10), 6, 0, &[]);
        assert!(w.is_idle());
    }
}
