//! A publisher's offered deadline (DDS's OFFERED_DEADLINE_MISSED): each
//! instance it writes should get a sample at least every period; the
//! instances it left silent for a whole period are reported to it, once per
//! period missed. The decisions are `tagwire_instances`' deadline, the same
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
