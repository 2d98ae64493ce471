//! The parts of a [`Writer`](super::Writer)'s state, each with the fields
//! that change together: the buffer pool, the congestion window, the timer
//! table, the acknowledgement requests, the round trip.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Buffers of freed datagrams, reused by `send` (none shared).
#[derive(Debug, Default)]
pub(super) struct Pool {
    pub(super) bufs: Vec<Arc<Vec<u8>>>,
    /// Their capacities, summed (at most `POOL_BYTES`).
    pub(super) bytes: usize,
}

/// The congestion window and what moves it (see the module docs).
#[derive(Debug)]
pub(super) struct Congestion {
    /// Held datagrams sent (or resent) with no news since: neither
    /// acknowledged, sacked nor named missing.
    pub(super) flight: usize,
    /// Most datagrams in flight.
    pub(super) cwnd: usize,
    /// Slow start below this, one more per window above.
    pub(super) ssthresh: usize,
    /// Datagrams acknowledged towards the next `cwnd` increment.
    pub(super) acc: usize,
    /// Bumped by every shrink of the window: a datagram lost from a
    /// transmission of an earlier epoch belongs to a loss already counted.
    pub(super) epoch: u64,
    /// A pacing controller sets the stream's rate: a NACK does not halve
    /// the window (the controller tells congestion from random loss).
    pub(super) paced: bool,
}

impl Congestion {
    /// `acked` datagrams were acknowledged: slow start below `ssthresh`,
    /// one more per window's worth above, never above `window`.
    pub(super) fn grow(&mut self, acked: usize, window: usize) {
        if self.cwnd < self.ssthresh {
            self.cwnd = (self.cwnd + acked).min(self.ssthresh);
        } else {
            self.acc += acked;
            if self.acc >= self.cwnd {
                self.acc -= self.cwnd;
                self.cwnd += 1;
            }
        }
        self.cwnd = self.cwnd.min(window);
    }

    /// A loss: the window falls to `to` for the data sent so far.
    pub(super) fn shrink(&mut self, to: usize) {
        self.cwnd = to;
        self.ssthresh = to;
        self.acc = 0;
        self.epoch += 1;
    }
}

/// The writer's timers (quinn's timer table): each is a deadline or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// The resend timer looks for acknowledgement progress.
    Resend,
    /// The next heartbeat while data is unacknowledged.
    Heartbeat,
    /// A NACK was held off: ask the reader again.
    Recheck,
}

#[derive(Debug, Default)]
pub(super) struct Timers([Option<Instant>; 3]);

impl Timers {
    pub(super) fn get(&self, t: Timer) -> Option<Instant> {
        self.0[t as usize]
    }

    pub(super) fn set(&mut self, t: Timer, at: Instant) {
        self.0[t as usize] = Some(at);
    }

    /// Sets `t` to `at` unless it is already due earlier.
    pub(super) fn set_earliest(&mut self, t: Timer, at: Instant) {
        let due = self.0[t as usize].map_or(at, |d| d.min(at));
        self.0[t as usize] = Some(due);
    }

    pub(super) fn stop(&mut self, t: Timer) {
        self.0[t as usize] = None;
    }

    pub(super) fn is_due(&self, t: Timer, now: Instant) -> bool {
        self.get(t).is_some_and(|d| d <= now)
    }

    /// The earliest deadline.
    pub(super) fn next(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }
}

/// Whether the writer asks its reader for an acknowledgement.
#[derive(Debug, Default)]
pub(super) struct Asking {
    /// The writer waits for room: a heartbeat asks for an acknowledgement
    /// now (once per AckNack received).
    pub(super) wanted: bool,
    /// That heartbeat went out; its answer is awaited.
    pub(super) asked: bool,
    /// The reader has no room: the resend timer asks, it resends nothing.
    pub(super) paused: bool,
    /// Heartbeats sent since the reader last answered: each doubles the
    /// wait before the next request, up to the heartbeat period.
    pub(super) unanswered: u32,
}

/// What the missing seqs of one acknowledgement did.
#[derive(Debug, Default)]
pub(super) struct Nacked {
    /// A datagram sent in the current epoch was lost: the congestion
    /// window shrinks.
    pub(super) lost_new: bool,
    /// Datagrams in flight until this NACK named them (a loss seen for the
    /// first time; one named again while held or queued is not counted).
    pub(super) lost: usize,
    /// A seq was queued for a resend.
    pub(super) queued: bool,
    /// The earliest instant a held-off NACK may be asked again: a seq
    /// named missing but sent less than `nack_holdoff` ago (its copy may
    /// still be on its way).
    pub(super) held_off: Option<Instant>,
}

/// What the writer knows of the round trip.
#[derive(Debug)]
pub(super) struct RoundTrip {
    /// Smoothed round trip of a heartbeat that asked and its answer.
    pub(super) srtt: Option<Duration>,
    /// The resend timer's current period (backs off while no news comes).
    pub(super) rto: Duration,
    /// When the last heartbeat went out.
    pub(super) heartbeat_at: Option<Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_table_gives_the_earliest_deadline_and_keeps_an_earlier_one() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut t = Timers::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Heartbeat, t0 + ms(50));
        t.set(Timer::Resend, t0 + ms(100));
        assert_eq!(t.next(), Some(t0 + ms(50)));
        t.set_earliest(Timer::Recheck, t0 + ms(20));
        t.set_earliest(Timer::Recheck, t0 + ms(30));
        assert_eq!(t.get(Timer::Recheck), Some(t0 + ms(20)));
        assert!(t.is_due(Timer::Recheck, t0 + ms(20)));
        assert!(!t.is_due(Timer::Heartbeat, t0 + ms(20)));
        t.stop(Timer::Recheck);
        t.stop(Timer::Heartbeat);
        assert_eq!(t.next(), Some(t0 + ms(100)));
    }
}
