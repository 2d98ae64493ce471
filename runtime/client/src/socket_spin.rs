//! How long a subscriber that holds its stream's socket (direct delivery,
//! `crate::direct`) looks at it before it sleeps, while the stream flows.
//!
//! A sleeping reader is woken by its sender's send, and on the sending
//! host that wake-up is paid by the thread that sends (across the veth
//! link between two namespaces, the whole receive path up to the reader's
//! socket runs on the sending CPU). A remote sender sends in runs of
//! datagrams (`crate::direct` reads them as one coalesced receive), so the
//! gaps the reader sees are those between runs, several times the gap
//! between two ring records that [`crate::FLOW_POLL`] was chosen for:
//! polling `flow_poll` and then sleeping, an 8 KiB flat-out reader slept
//! between most runs (4.4 k sleeps a second, each a wake-up paid by the
//! sender). With the poll below: 340 sleeps a second, the sending CPU's
//! share in waking the reader 5.4 % -> 1.1 % (`perf record`), 8 KiB
//! 184.5 k -> 198.5 k msg/s (medians of 10 alternated runs, each host's
//! threads on one CPU; `bench/results/stop40/ab-throughput`).
//!
//! Polling that long after every burst would cost a reader of a stream
//! with gaps just longer than that the whole wait, every time, so the
//! poll adapts: after a sleep shorter than the longest poll ([`STRETCH`]
//! times `flow_poll`: the reader gave up just before its data came) it
//! polls that long; after a longer sleep, `flow_poll` again. A stream
//! whose gaps are longer than the longest poll costs what `flow_poll`
//! alone costs.
//! (Doubling the poll at each short sleep instead measured no better than
//! `flow_poll` alone: a sender held back by its window makes a long gap
//! now and then, and the climb back slept between the next runs.)

use std::time::Duration;

/// The longest poll, in `flow_poll`s.
pub(crate) const STRETCH: u32 = 5;

/// The adapting poll of one subscription's socket.
#[derive(Debug, Default)]
pub(crate) struct SocketSpin {
    /// The poll the last waits settled on (zero: not yet adapted).
    current: Duration,
}

impl SocketSpin {
    /// The poll for a wait whose stream flows, given the subscription's
    /// `flow_poll` (zero: no poll).
    pub(crate) fn poll(&self, flow_poll: Duration) -> Duration {
        self.current.clamp(flow_poll, flow_poll * STRETCH)
    }

    /// After a wait that polled, then slept `slept` before data (or its
    /// timeout) came.
    pub(crate) fn slept(&mut self, flow_poll: Duration, slept: Duration) {
        let longest = flow_poll * STRETCH;
        self.current = if slept < longest { longest } else { flow_poll };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn a_wake_up_soon_after_giving_up_polls_longest_and_a_long_sleep_falls_back() {
        let base = 20 * US;
        let mut s = SocketSpin::default();
        assert_eq!(s.poll(base), base);
        // Woken 30 us after giving up: five times the base next.
        s.slept(base, 30 * US);
        assert_eq!(s.poll(base), 100 * US);
        s.slept(base, 99 * US);
        assert_eq!(s.poll(base), 100 * US);
        // Data found while polling: no call to `slept`, the poll stays.
        assert_eq!(s.poll(base), 100 * US);
        // A sleep as long as the longest poll: back to the base.
        s.slept(base, 100 * US);
        assert_eq!(s.poll(base), base);
        s.slept(base, 30 * US);
        s.slept(base, Duration::from_millis(200));
        assert_eq!(s.poll(base), base);
    }

    #[test]
    fn no_flow_poll_never_polls_and_a_smaller_one_bounds_what_was_learnt() {
        let mut s = SocketSpin::default();
        s.slept(20 * US, US);
        assert_eq!(s.poll(Duration::ZERO), Duration::ZERO);
        assert_eq!(s.poll(10 * US), 50 * US);
    }
}
