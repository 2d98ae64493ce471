//! Waiting for another process to finish a step it holds (a claimed send
//! ticket, a slot another writer is filling) without keeping it off the
//! processor.
//!
//! A `sched_yield` hands the processor only to a thread of the caller's own
//! real-time priority or above. A real-time waiter that yields in a loop
//! therefore starves a holder of lower priority that shares its CPU (a
//! `SCHED_OTHER` publisher) for as long as it is willing to wait: a
//! `fifo:30` forwarder closing the ticket of a plain publisher held it for
//! its whole 20 ms patience, and the 100 Hz stream it carried delivered a
//! message two periods late now and then. A sleep hands the processor to
//! anyone. So: a few yields (the holder is usually on the other CPU and
//! microseconds from done), then sleeps that double.

use std::time::Duration;

/// Yields before the first sleep.
const YIELDS: u32 = 4;
/// The first sleep, and the longest.
const FIRST_SLEEP: Duration = Duration::from_micros(10);
const MAX_SLEEP: Duration = Duration::from_millis(1);

/// The waits of one wait for another's step (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    rounds: u32,
}

impl Backoff {
    /// Waits once: yields first, then sleeps from 10 µs, doubling up to
    /// 1 ms.
    pub(crate) fn wait(&mut self) {
        if self.rounds < YIELDS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.sleep());
        }
        self.rounds = self.rounds.saturating_add(1);
    }

    /// The sleep the next [`Backoff::wait`] takes past its yields.
    fn sleep(&self) -> Duration {
        let doublings = self.rounds.saturating_sub(YIELDS).min(16);
        (FIRST_SLEEP * (1 << doublings)).min(MAX_SLEEP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yields_then_sleeps_doubling_to_a_millisecond() {
        let mut b = Backoff::default();
        let mut sleeps = Vec::new();
        for _ in 0..YIELDS + 9 {
            if b.rounds >= YIELDS {
                sleeps.push(b.sleep().as_micros());
            }
            b.rounds += 1;
        }
        assert_eq!(sleeps, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }
}
