//! # tagwire-instances: what a subscriber takes of each instance
//!
//! The per-instance QoS of DDS (and ORTE) for tagwire subscribers, as a
//! sans-IO core (docs/design.md §3, layer 1): samples and time go in, what to
//! hand the application comes out. The client library runs one per
//! subscription that asks for any of these:
//!
//! * **Exclusive ownership.** Of each instance a subscriber takes only the
//!   samples of its *owner*: the strongest live publisher (the strength
//!   each message carries; none is 0). A stronger publisher takes the
//!   instance over at its first sample. The owner loses it when it
//!   unregisters the instance, or when it misses the deadline (if the
//!   subscription has one); the next sample of any other publisher then
//!   takes it. Between publishers of equal strength the owner keeps it.
//!   Samples of non-owners are dropped and counted ([`Counts::not_owner`]).
//! * **Deadline.** Each live instance must get a sample at least every
//!   period; when one does not, [`Event::DeadlineMissed`] says which and
//!   who owned it, once per period missed.
//! * **Minimum separation** (DDS's time-based filter). At most one sample
//!   per instance per interval: the first at once, then the newest of
//!   those that came during the interval, when it ends. Samples replaced by
//!   a newer one are counted ([`Counts::replaced`]).
//!
//! A dispose or unregister always goes through at once (it is not data to
//! thin out), and ends the instance's deadline. Messages without a key are
//! all one instance. The filter tracks at most [`MAX_INSTANCES`]
//! instances; samples of instances past that pass unfiltered and are
//! counted ([`Counts::untracked`]), so a publisher inventing keys cannot
//! grow a subscriber's memory without bound.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

use tagwire_wire::instance::{InstanceState, Key};

/// The most instances one filter tracks.
pub const MAX_INSTANCES: usize = 4096;

/// What a subscription asks of each instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Take each instance from its strongest live publisher only.
    pub exclusive: bool,
    /// Each live instance gets a sample at least this often.
    pub deadline: Option<Duration>,
    /// At most one sample per instance per this interval.
    pub min_separation: Option<Duration>,
}

impl Policy {
    /// Whether the policy filters nothing (no filter is needed).
    pub fn is_none(&self) -> bool {
        *self == Self::default()
    }
}

/// What the filter needs to know of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample<W> {
    /// Its publisher.
    pub writer: W,
    /// Its instance (`None`: the tag's one unkeyed instance).
    pub key: Option<Key>,
    /// Data, or a dispose or unregister.
    pub state: InstanceState,
    /// Its publisher's strength.
    pub strength: i32,
}

/// What comes out of the filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<W, T> {
    /// Hand this sample to the application.
    Deliver(T),
    /// Instance `key` got no sample for a whole deadline period.
    DeadlineMissed {
        /// The instance.
        key: Option<Key>,
        /// Its owner then (exclusive), or its last publisher.
        writer: Option<W>,
    },
}

/// What the filter held back, so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Samples of a publisher that did not own their instance.
    pub not_owner: u64,
    /// Samples replaced by a newer one within the minimum separation.
    pub replaced: u64,
    /// Samples of instances beyond [`MAX_INSTANCES`], passed unfiltered.
    pub untracked: u64,
    /// Deadline periods missed.
    pub deadlines_missed: u64,
}

#[derive(Debug)]
struct Instance<W, T> {
    /// The owner and its strength (exclusive), or the last publisher.
    writer: Option<(W, i32)>,
    /// When the instance last got a sample (any publisher's, taken).
    last: Instant,
    /// When a missed deadline is next reported (live instances only).
    deadline_due: Option<Instant>,
    /// When a sample was last handed out.
    delivered: Option<Instant>,
    /// The newest sample waiting for the separation to end, and when.
    held: Option<(T, Instant)>,
}

/// The per-instance filter of one subscription. `W` names a publisher,
/// `T` is what is handed out (a message).
#[derive(Debug)]
pub struct InstanceFilter<W, T> {
    policy: Policy,
    instances: HashMap<Option<Key>, Instance<W, T>>,
    out: VecDeque<Event<W, T>>,
    counts: Counts,
}

impl<W: Copy + Eq + Hash, T> InstanceFilter<W, T> {
    /// A filter applying `policy`.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            instances: HashMap::new(),
            out: VecDeque::new(),
            counts: Counts::default(),
        }
    }

    /// What it held back so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Takes sample `s` (the application's `item`) that arrived at `now`.
    pub fn offer(&mut self, now: Instant, s: Sample<W>, item: T) {
        self.handle_timeout(now);
        let p = self.policy;
        if !self.instances.contains_key(&s.key) && self.instances.len() >= MAX_INSTANCES {
            self.counts.untracked += 1;
            self.out.push_back(Event::Deliver(item));
            return;
        }
        let inst = self.instances.entry(s.key).or_insert_with(|| Instance {
            writer: None,
            last: now,
            deadline_due: None,
            delivered: None,
            held: None,
        });
        if p.exclusive {
            let live = |w: &(W, i32)| {
                w.0 == s.writer
                    || p.deadline
                        .is_none_or(|d| now.saturating_duration_since(inst.last) < d)
            };
            let keep = inst
                .writer
                .filter(live)
                .is_some_and(|(w, strength)| w != s.writer && s.strength <= strength);
            if keep {
                self.counts.not_owner += 1;
                return;
            }
        }
        inst.writer = Some((s.writer, s.strength));
        inst.last = now;
        if s.state != InstanceState::Alive {
            // Through at once, ahead of any sample held back; the deadline
            // ends; an unregistered instance has no owner any more.
            if inst.held.take().is_some() {
                self.counts.replaced += 1;
            }
            inst.deadline_due = None;
            let gone = matches!(
                s.state,
                InstanceState::Unregistered | InstanceState::DisposedUnregistered
            );
            if gone {
                self.instances.remove(&s.key);
            }
            self.out.push_back(Event::Deliver(item));
            return;
        }
        inst.deadline_due = p.deadline.map(|d| now + d);
        match p.min_separation {
            Some(sep) if inst.delivered.is_some_and(|t| now < t + sep) => {
                let due = inst.delivered.map_or(now, |t| t + sep);
                if inst.held.replace((item, due)).is_some() {
                    self.counts.replaced += 1;
                }
            }
            _ => {
                inst.delivered = Some(now);
                self.out.push_back(Event::Deliver(item));
            }
        }
    }

    /// Hands out held samples whose separation ended, and reports missed
    /// deadlines, as of `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(due) = self.poll_timeout() else {
            return;
        };
        if now < due {
            return;
        }
        for (key, inst) in &mut self.instances {
            if inst.held.as_ref().is_some_and(|(_, t)| *t <= now) {
                if let Some((item, _)) = inst.held.take() {
                    inst.delivered = Some(now);
                    self.out.push_back(Event::Deliver(item));
                }
            }
            if let (Some(t), Some(d)) = (inst.deadline_due, self.policy.deadline) {
                if t <= now {
                    self.counts.deadlines_missed += 1;
                    self.out.push_back(Event::DeadlineMissed {
                        key: *key,
                        writer: inst.writer.map(|w| w.0),
                    });
                    // Once per period missed, not once per call.
                    let mut next = t + d;
                    while next <= now {
                        next += d;
                    }
                    inst.deadline_due = Some(next);
                }
            }
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.policy.deadline.is_none() && self.policy.min_separation.is_none() {
            return None;
        }
        self.instances
            .values()
            .flat_map(|i| [i.deadline_due, i.held.as_ref().map(|h| h.1)])
            .flatten()
            .min()
    }

    /// The next thing to hand the application.
    pub fn poll(&mut self) -> Option<Event<W, T>> {
        self.out.pop_front()
    }
}
