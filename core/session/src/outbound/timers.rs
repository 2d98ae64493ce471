//! A reliable stream's own timers.

use std::time::Instant;

/// A reliable stream's timers beside its writer's (quinn's timer table):
/// each a deadline or off.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamTimers([Option<Instant>; 2]);

/// The timers of [`StreamTimers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamTimer {
    /// Held back by credit with nothing unacknowledged: when to ask the
    /// receiver again (no heartbeat runs then).
    Probe = 0,
    /// Held back by its pace: when the next datagram may go.
    Pace = 1,
}

impl StreamTimers {
    pub(crate) fn set(&mut self, t: StreamTimer, at: Instant) {
        self.0[t as usize] = Some(at);
    }

    pub(crate) fn stop(&mut self, t: StreamTimer) {
        self.0[t as usize] = None;
    }

    pub(crate) fn get(&self, t: StreamTimer) -> Option<Instant> {
        self.0[t as usize]
    }

    pub(crate) fn is_due(&self, t: StreamTimer, now: Instant) -> bool {
        self.get(t).is_some_and(|at| at <= now)
    }

    /// The earliest running timer.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }
}
