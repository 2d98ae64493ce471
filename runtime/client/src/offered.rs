//! A publisher's offered deadline (DDS's OFFERED_DEADLINE_MISSED): each
//! instance it writes should get a sample at least every period; the
//! instances it left silent for a whole period are reported to it, once per
//! period missed as seen when it sends or asks (periods that end while it
//! does neither are reported as one). The decisions are `tagwire_instances`' deadline, the same
//! a subscriber applies, fed with this publisher's own sends.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tagwire_instances::{Event, InstanceFilter, Policy, Sample};
use tagwire_wire::instance::{InstanceState, Key};

/// The most missed deadlines kept until the publisher asks; older ones are
/// counted only.
const MAX_KEPT: usize = 4096;

#[derive(Debug)]
pub(crate) struct Offered {
    filter: InstanceFilter<(), ()>,
    missed: VecDeque<Option<Key>>,
    /// Missed deadlines dropped from `missed` (it was full).
    dropped: u64,
}

impl Offered {
    pub(crate) fn new(period: Duration) -> Self {
        Self {
            filter: InstanceFilter::new(Policy {
                deadline: Some(period),
                ..Policy::default()
            }),
            missed: VecDeque::new(),
            dropped: 0,
        }
    }

    /// The publisher sent a sample (or dispose, unregister) of `key` at `now`.
    pub(crate) fn sent(&mut self, now: Instant, key: Option<Key>, state: InstanceState) {
        let s = Sample {
            writer: (),
            key,
            state,
            strength: 0,
        };
        self.filter.offer(now, s, ());
        self.take();
    }

    /// The instances that missed a deadline up to `now` since the last
    /// call (one entry per period missed), and how many more were only
    /// counted.
    pub(crate) fn missed(&mut self, now: Instant) -> (Vec<Option<Key>>, u64) {
        self.filter.handle_timeout(now);
        self.take();
        (
            self.missed.drain(..).collect(),
            std::mem::take(&mut self.dropped),
        )
    }

    fn take(&mut self) {
        while let Some(e) = self.filter.poll() {
            if let Event::DeadlineMissed { key, .. } = e {
                if self.missed.len() >= MAX_KEPT {
                    self.missed.pop_front();
                    self.dropped += 1;
                }
                self.missed.push_back(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Duration = Duration::from_millis(50);

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn a_silent_instance_is_reported_once_per_period_while_others_are_written() {
        let t0 = Instant::now();
        let mut o = Offered::new(P);
        let (quiet, busy, gone) = (Key::of(b"quiet"), Key::of(b"busy"), Key::of(b"gone"));
        o.sent(t0, Some(quiet), InstanceState::Alive);
        o.sent(t0, Some(gone), InstanceState::Alive);
        o.sent(t0, Some(gone), InstanceState::Disposed);
        for n in (0..180).step_by(10) {
            o.sent(ms(t0, n), Some(busy), InstanceState::Alive);
        }
        // Periods end at 50, 100 and 150 ms.
        assert_eq!(o.missed(ms(t0, 180)), (vec![Some(quiet); 3], 0));
        assert_eq!(o.missed(ms(t0, 199)), (vec![], 0));
        // busy's last sample was at 170 ms (one check reports both, in no
        // particular order).
        let (mut both, dropped) = o.missed(ms(t0, 220));
        both.sort();
        let mut want = vec![Some(busy), Some(quiet)];
        want.sort();
        assert_eq!((both, dropped), (want, 0));
    }

    #[test]
    fn periods_that_end_while_the_publisher_neither_sends_nor_asks_are_one_report() {
        let t0 = Instant::now();
        let mut o = Offered::new(P);
        o.sent(t0, None, InstanceState::Alive);
        assert_eq!(o.missed(ms(t0, 49)), (vec![], 0));
        assert_eq!(o.missed(ms(t0, 260)), (vec![None], 0));
        // The next is due at 300 ms.
        assert_eq!(o.missed(ms(t0, 299)), (vec![], 0));
        assert_eq!(o.missed(ms(t0, 300)), (vec![None], 0));
        // A sample starts a new period.
        o.sent(ms(t0, 310), None, InstanceState::Alive);
        assert_eq!(o.missed(ms(t0, 359)), (vec![], 0));
        assert_eq!(o.missed(ms(t0, 360)), (vec![None], 0));
    }

    #[test]
    fn past_the_kept_bound_the_oldest_are_counted_only() {
        let t0 = Instant::now();
        let mut o = Offered::new(P);
        // 1000 silent instances, and one written twice a period: 5000
        // reports before the publisher asks.
        for i in 0..1000u32 {
            o.sent(t0, Some(Key::of(&i.to_le_bytes())), InstanceState::Alive);
        }
        for p in 1..=10 {
            o.sent(ms(t0, 25 * p), Some(Key::of(b"tick")), InstanceState::Alive);
        }
        let (missed, dropped) = o.missed(ms(t0, 250));
        assert_eq!((missed.len(), dropped), (MAX_KEPT, 5000 - MAX_KEPT as u64));
        assert_eq!(o.missed(ms(t0, 260)), (vec![], 0));
    }
}
