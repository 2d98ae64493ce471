//! The sending half of a reliable stream: a window of datagrams kept for
//! retransmission until the reader acknowledges them.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use thiserror::Error;

/// Settings of a [`Writer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// Most unacknowledged datagrams held (default 256).
    pub window: usize,
    /// Heartbeat period while data is unacknowledged (default 50 ms).
    pub heartbeat_period: Duration,
    /// Resend a datagram neither acknowledged nor re-sent for this long
    /// (default 100 ms): recovers when heartbeats or NACKs are lost.
    pub resend_after: Duration,
    /// Ignore a NACK for a datagram (re)sent less than this long ago (default
    /// 10 ms): its copy may still be in flight, and resending it again feeds
    /// a storm of duplicates.
    pub nack_holdoff: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            window: 256,
            heartbeat_period: Duration::from_millis(50),
            resend_after: Duration::from_millis(100),
            nack_holdoff: Duration::from_millis(10),
        }
    }
}

/// Counters of a [`Writer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriterStats {
    /// Datagrams sent for the first time.
    pub sent: u64,
    /// Datagrams sent again (after a NACK or the resend timer).
    pub retransmitted: u64,
    /// Heartbeats sent.
    pub heartbeats: u64,
    /// Datagrams freed by a cumulative acknowledgement.
    pub acked: u64,
}

/// [`Writer::send`] failed: `window` datagrams are unacknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("send window full ({window} unacknowledged datagrams)")]
pub struct WindowFull {
    /// The window size.
    pub window: usize,
}

/// Something the I/O layer must send to the stream's reader. The destination,
/// priority and DSCP are the stream's, which the I/O layer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transmit<'a> {
    /// A retransmission of datagram `seq`.
    Data {
        /// Its seq.
        seq: u64,
        /// The datagram as first encoded.
        bytes: &'a [u8],
    },
    /// A heartbeat to encode as a `Heartbeat` datagram.
    Heartbeat {
        /// Oldest seq held.
        first: u64,
        /// Last seq sent.
        last: u64,
    },
}

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
    /// When the resend timer next scans the window.
    resend_check: Option<Instant>,
    next_heartbeat: Option<Instant>,
    /// Buffers of freed datagrams, reused by `send`.
    pool: Vec<Vec<u8>>,
    stats: WriterStats,
}

#[derive(Debug)]
struct Slot {
    bytes: Vec<u8>,
    /// Messages it carries (see `send_counted`).
    messages: usize,
    sent_at: Instant,
    /// Selectively acknowledged: the reader holds it out of order.
    sacked: bool,
    queued: bool,
}

const POOL_MAX: usize = 32;

impl Writer {
    /// A writer whose first datagram gets seq 1.
    pub fn new(config: WriterConfig) -> Self {
        Self {
            config: WriterConfig {
                window: config.window.max(1),
                ..config
            },
            next_seq: 1,
            base: 1,
            held: VecDeque::new(),
            held_bytes: 0,
            held_messages: 0,
            resend: VecDeque::new(),
            resend_check: None,
            next_heartbeat: None,
            pool: Vec::new(),
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
        if self.held.len() >= self.config.window {
            return Err(WindowFull {
                window: self.config.window,
            });
        }
        let seq = self.next_seq;
        let mut bytes = self.pool.pop().unwrap_or_default();
        bytes.clear();
        encode(seq, &mut bytes);
        self.next_seq += 1;
        self.stats.sent += 1;
        if self.held.is_empty() {
            self.next_heartbeat = Some(now + self.config.heartbeat_period);
        }
        if self.resend_check.is_none() {
            self.resend_check = Some(now + self.config.resend_after);
        }
        self.held_bytes += bytes.len();
        self.held_messages += messages;
        self.held.push_back(Slot {
            bytes,
            messages,
            sent_at: now,
            sacked: false,
            queued: false,
        });
        let bytes = self.held.back().map_or(&[][..], |s| &s.bytes[..]);
        Ok((seq, bytes))
    }

    /// Takes the reader's acknowledgement: frees every seq ≤ `ack_through`
    /// and queues the `missing` seqs still held for retransmission.
    pub fn handle_acknack(&mut self, now: Instant, ack_through: u64, missing: &[u64]) {
        // A reader cannot acknowledge what was never sent.
        let ack_through = ack_through.min(self.next_seq - 1);
        while self.base <= ack_through {
            let Some(slot) = self.held.pop_front() else {
                break;
            };
            self.base += 1;
            self.stats.acked += 1;
            self.held_bytes -= slot.bytes.len();
            self.held_messages -= slot.messages;
            if self.pool.len() < POOL_MAX {
                self.pool.push(slot.bytes);
            }
        }
        if self.held.is_empty() {
            self.next_heartbeat = None;
            self.resend_check = None;
        }
        self.resend.retain(|&s| s >= self.base);
        // Seqs between the acknowledged prefix and the last missing one that
        // are not missing are held by the reader (out of order): no timer
        // resend for them.
        let sorted = missing.windows(2).all(|w| w[0] < w[1]);
        let last_missing = missing.last().copied().unwrap_or(0);
        if sorted {
            for s in ack_through.saturating_add(1)..last_missing.min(self.next_seq) {
                if s < self.base || missing.binary_search(&s).is_ok() {
                    continue;
                }
                if let Some(slot) = self.slot_mut(s) {
                    slot.sacked = true;
                }
            }
        }
        let holdoff = self.config.nack_holdoff;
        for &s in missing {
            if let Some(slot) = self.slot_mut(s) {
                slot.sacked = false;
                if !slot.queued && now >= slot.sent_at + holdoff {
                    slot.queued = true;
                    self.resend.push_back(s);
                }
            }
        }
        if !self.held.is_empty() && self.next_heartbeat.is_none() {
            self.next_heartbeat = Some(now + self.config.heartbeat_period);
        }
    }

    /// The next retransmission or heartbeat to send, if any is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        if self.resend_check.is_some_and(|t| t <= now) {
            self.scan_for_resend(now);
        }
        while let Some(seq) = self.resend.pop_front() {
            let Some(i) = self.index(seq) else { continue };
            let slot = &mut self.held[i];
            slot.queued = false;
            if slot.sacked {
                continue;
            }
            slot.sent_at = now;
            self.stats.retransmitted += 1;
            let slot = &self.held[i];
            return Some(Transmit::Data {
                seq,
                bytes: &slot.bytes,
            });
        }
        if self.next_heartbeat.is_some_and(|t| t <= now) && !self.held.is_empty() {
            self.next_heartbeat = Some(now + self.config.heartbeat_period);
            self.stats.heartbeats += 1;
            return Some(self.heartbeat());
        }
        None
    }

    /// When [`Writer::poll_transmit`] next has something to do, if ever
    /// without new input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.resend.is_empty() {
            // Due now; any instant in the past works, the caller compares.
            return self.held.front().map(|s| s.sent_at);
        }
        match (self.next_heartbeat, self.resend_check) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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

    /// Unacknowledged datagrams held, O(1) (read by the pacing controller).
    pub fn occupancy(&self) -> usize {
        self.held.len()
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

    fn slot_mut(&mut self, seq: u64) -> Option<&mut Slot> {
        let i = self.index(seq)?;
        self.held.get_mut(i)
    }

    /// Queues every held datagram not sent for `resend_after` (O(window),
    /// at most once per `resend_after`) and sets the next scan.
    fn scan_for_resend(&mut self, now: Instant) {
        let after = self.config.resend_after;
        let mut next: Option<Instant> = None;
        for (i, slot) in self.held.iter_mut().enumerate() {
            if slot.sacked || slot.queued {
                continue;
            }
            let due = slot.sent_at + after;
            if due <= now {
                slot.queued = true;
                self.resend.push_back(self.base + i as u64);
                next = Some(next.map_or(now + after, |n| n.min(now + after)));
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        self.resend_check = if self.held.is_empty() {
            None
        } else {
            // Sacked or queued slots are looked at again one period later.
            Some(next.unwrap_or(now + after))
        };
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
        w.handle_acknack(t0, 2, &[]);
        assert_eq!((w.occupancy(), w.held_bytes()), (1, 2));
        assert_eq!(send(&mut w, t0, 0), 4);
        w.handle_acknack(t0, 99, &[]);
        assert!(w.is_idle());
        assert_eq!((w.held_bytes(), w.held_messages()), (0, 0));
        assert_eq!(w.stats().acked, 4);
        assert_eq!(w.poll_timeout(), None);
        w.send_counted(t0, 40, |_, o| o.push(1)).unwrap();
        assert_eq!(w.held_messages(), 40);
    }

    #[test]
    fn a_nack_retransmits_the_same_bytes_once() {
        let t0 = Instant::now();
        let mut w = Writer::default();
        for i in 1..=4 {
            send(&mut w, t0, i);
        }
        // Too soon: the first copies may still be in flight.
        w.handle_acknack(t0, 1, &[2, 4]);
        assert_eq!(w.poll_transmit(t0), None);
        let t = t0 + ms(20);
        w.handle_acknack(t, 1, &[2, 4]);
        w.handle_acknack(t, 1, &[2, 4]);
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
        // A NACK right after the retransmission is ignored too.
        w.handle_acknack(t + ms(1), 1, &[2]);
        assert_eq!(w.poll_transmit(t + ms(1)), None);
        assert_eq!(w.stats().retransmitted, 2);
    }

    #[test]
    fn heartbeats_and_timer_resends_run_while_data_is_unacknowledged() {
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
        w.handle_acknack(t, 0, &[1, 3]);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 1, .. })
        ));
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 3, .. })
        ));
        assert_eq!(w.poll_transmit(t), None);
        let t = t0 + ms(100);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Heartbeat { .. })
        ));
        assert_eq!(w.poll_transmit(t), None);
        // Seqs 1 and 3 were re-sent at 60 ms: due again at 160 ms.
        let t = t0 + ms(160);
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 1, .. })
        ));
        assert!(matches!(
            w.poll_transmit(t),
            Some(Transmit::Data { seq: 3, .. })
        ));
        w.handle_acknack(t, 3, &[]);
        assert!(w.is_idle());
        assert_eq!(w.poll_transmit(t0 + ms(1000)), None);
        assert!(matches!(
            w.heartbeat(),
            Transmit::Heartbeat { first: 4, last: 3 }
        ));
        assert_eq!(w.stats().retransmitted, 4);
    }
}
