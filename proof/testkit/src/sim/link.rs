//! Simulated links: one per ordered pair of nodes.
//!
//! A datagram offered to a link meets, in this order:
//!
//! ```text
//!  send ──► up? ──no──► dropped_partition
//!            │yes
//!            ▼
//!      bounded queue ──full──► dropped_queue          (tail drop, bytes)
//!            │  serialised at `bandwidth` bytes/s, FIFO
//!            ▼
//!      duplicate? ──► 1 or 2 copies (duplicated += 1)
//!            │  each copy:
//!            ▼
//!         lost? ──yes──► dropped_loss
//!            │no
//!            ▼
//!      latency + uniform(0..=jitter) ──► arrival event
//!            │  (at arrival: link down ──► dropped_partition,
//!            ▼                node crashed ──► dropped_node_down)
//!        delivered
//! ```
//!
//! Jitter is drawn per copy, so datagrams overtake each other when the
//! jitter exceeds their spacing: that is the reordering. The queue is a
//! token-bucket-filter's: a datagram waits while the ones before it are
//! serialised, and one that would push the bytes waiting over
//! `queue_limit` is dropped.

use std::collections::VecDeque;
use std::time::Duration;

use super::rng::{nanos, SimRng};

/// How a link behaves. [`LinkConfig::default`] is a perfect 1 ms link:
/// no loss, no jitter, unlimited bandwidth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub latency: Duration,
    /// Extra delay drawn uniformly in `0..=jitter` per datagram copy.
    pub jitter: Duration,
    /// Serialisation rate in bytes per second; `None` is unlimited (no
    /// queue either).
    pub bandwidth: Option<u64>,
    /// Most bytes waiting to be serialised (the datagram being serialised
    /// included); a datagram that does not fit is dropped.
    pub queue_limit: usize,
    /// Probability that a copy is lost on the wire.
    pub loss: f64,
    /// Probability that a datagram is duplicated.
    pub duplicate: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            latency: Duration::from_millis(1),
            jitter: Duration::ZERO,
            bandwidth: None,
            queue_limit: 1 << 20,
            loss: 0.0,
            duplicate: 0.0,
        }
    }
}

impl LinkConfig {
    /// A perfect link with this latency.
    pub fn with_latency(latency: Duration) -> Self {
        Self {
            latency,
            ..Self::default()
        }
    }

    /// Bandwidth in megabits per second (10⁶ bit/s).
    pub fn mbit(self, mbit_per_s: u64) -> Self {
        Self {
            bandwidth: Some(mbit_per_s.saturating_mul(125_000)),
            ..self
        }
    }
}

/// Counters of one link. Every datagram offered is accounted for:
/// `sent + duplicated == dropped_partition + dropped_queue + dropped_loss +
/// dropped_node_down + delivered + in_flight` ([`LinkStats::balanced`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Datagrams offered to the link.
    pub sent: u64,
    /// Bytes offered.
    pub sent_bytes: u64,
    /// Dropped because the link was down (at send or at arrival).
    pub dropped_partition: u64,
    /// Dropped because the queue was full.
    pub dropped_queue: u64,
    /// Copies lost on the wire.
    pub dropped_loss: u64,
    /// Copies that arrived at a crashed node.
    pub dropped_node_down: u64,
    /// Datagrams duplicated (each adds one copy).
    pub duplicated: u64,
    /// Copies handed to the receiving node.
    pub delivered: u64,
    /// Copies on their way now.
    pub in_flight: u64,
    /// Datagrams offered per packet class 0..=7 (higher classes count in 7).
    pub per_class: [u64; 8],
}

impl LinkStats {
    /// Whether every copy is accounted for (see the type's doc).
    pub fn balanced(&self) -> bool {
        self.sent + self.duplicated
            == self.dropped_partition
                + self.dropped_queue
                + self.dropped_loss
                + self.dropped_node_down
                + self.delivered
                + self.in_flight
    }

    /// Adds `other`'s counters to these.
    pub fn add(&mut self, other: &LinkStats) {
        self.sent += other.sent;
        self.sent_bytes += other.sent_bytes;
        self.dropped_partition += other.dropped_partition;
        self.dropped_queue += other.dropped_queue;
        self.dropped_loss += other.dropped_loss;
        self.dropped_node_down += other.dropped_node_down;
        self.duplicated += other.duplicated;
        self.delivered += other.delivered;
        self.in_flight += other.in_flight;
        for (a, b) in self.per_class.iter_mut().zip(other.per_class) {
            *a += b;
        }
    }
}

/// What became of a datagram offered to a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Dropped at once.
    Dropped(Drop),
    /// These copies arrive at these virtual times (one or two; empty when
    /// every copy was lost).
    Arrives(Vec<Duration>),
}

/// Why a datagram was dropped when offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drop {
    Partition,
    Queue,
}

/// One direction between two nodes.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) config: LinkConfig,
    pub(crate) up: bool,
    pub(crate) stats: LinkStats,
    /// When the serialiser is free again.
    busy_until: Duration,
    /// Datagrams queued or being serialised: (finish time, bytes).
    queue: VecDeque<(Duration, usize)>,
    queued_bytes: usize,
}

impl Link {
    pub(crate) fn new(config: LinkConfig) -> Self {
        Self {
            config,
            up: true,
            stats: LinkStats::default(),
            busy_until: Duration::ZERO,
            queue: VecDeque::new(),
            queued_bytes: 0,
        }
    }

    /// Bytes waiting or being serialised at `now`.
    pub(crate) fn queued_bytes(&mut self, now: Duration) -> usize {
        while let Some(&(finish, len)) = self.queue.front() {
            if finish > now {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= len;
        }
        self.queued_bytes
    }

    /// Offers a datagram of `len` bytes at `now`. Draws from `rng` in a
    /// fixed order (duplicate, then loss and jitter per copy) whatever the
    /// outcome, so one link's draws never depend on another's state.
    pub(crate) fn offer(&mut self, now: Duration, len: usize, class: u8, rng: &mut SimRng) -> Fate {
        self.stats.sent += 1;
        self.stats.sent_bytes += len as u64;
        self.stats.per_class[usize::from(class.min(7))] += 1;
        if !self.up {
            self.stats.dropped_partition += 1;
            return Fate::Dropped(Drop::Partition);
        }
        let leaves = match self.config.bandwidth {
            None => now,
            Some(rate) => {
                let waiting = self.queued_bytes(now);
                if waiting + len > self.config.queue_limit {
                    self.stats.dropped_queue += 1;
                    return Fate::Dropped(Drop::Queue);
                }
                let start = self.busy_until.max(now);
                let ns = (len as u128 * 1_000_000_000).div_ceil(u128::from(rate.max(1)));
                let finish = start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
                self.busy_until = finish;
                self.queue.push_back((finish, len));
                self.queued_bytes += len;
                finish
            }
        };
        let copies = if rng.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        let mut arrivals = Vec::with_capacity(copies);
        for _ in 0..copies {
            let lost = rng.chance(self.config.loss);
            let jitter = Duration::from_nanos(rng.range(0, nanos(self.config.jitter)));
            if lost {
                self.stats.dropped_loss += 1;
                continue;
            }
            self.stats.in_flight += 1;
            arrivals.push(leaves + self.config.latency + jitter);
        }
        Fate::Arrives(arrivals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_queue_serialises_and_tail_drops() {
        // 1000 bytes/s: a 100-byte datagram takes 100 ms on the wire.
        let mut link = Link::new(LinkConfig {
            latency: ms(5),
            bandwidth: Some(1000),
            queue_limit: 250,
            ..LinkConfig::default()
        });
        let mut rng = SimRng::new(1);
        assert_eq!(
            link.offer(ms(0), 100, 0, &mut rng),
            Fate::Arrives(vec![ms(105)])
        );
        assert_eq!(
            link.offer(ms(0), 100, 0, &mut rng),
            Fate::Arrives(vec![ms(205)])
        );
        // 200 bytes wait; 100 more would exceed 250.
        assert_eq!(
            link.offer(ms(0), 100, 3, &mut rng),
            Fate::Dropped(Drop::Queue)
        );
        assert_eq!(link.queued_bytes(ms(100)), 100);
        assert_eq!(
            link.offer(ms(100), 100, 0, &mut rng),
            Fate::Arrives(vec![ms(305)])
        );
        link.up = false;
        assert_eq!(
            link.offer(ms(100), 1, 0, &mut rng),
            Fate::Dropped(Drop::Partition)
        );
        let s = link.stats;
        assert_eq!(
            (s.sent, s.dropped_queue, s.dropped_partition, s.in_flight),
            (5, 1, 1, 3)
        );
        assert_eq!((s.per_class[0], s.per_class[3]), (4, 1));
        assert!(s.balanced());
    }

    #[test]
    fn certain_loss_and_duplication_are_counted_per_copy() {
        let mut link = Link::new(LinkConfig {
            loss: 1.0,
            duplicate: 1.0,
            ..LinkConfig::default()
        });
        let mut rng = SimRng::new(2);
        assert_eq!(link.offer(ms(0), 10, 0, &mut rng), Fate::Arrives(vec![]));
        let s = link.stats;
        assert_eq!((s.sent, s.duplicated, s.dropped_loss), (1, 1, 2));
        assert!(s.balanced());
    }
}
