//! Simulated links: one per ordered pair of nodes, and the bottlenecks
//! several of them may share.
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

/// A FIFO byte queue in front of a serialiser: a link's own, or one that
/// several links share (a [`Bottleneck`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Serialiser {
    /// When the serialiser is free again.
    busy_until: Duration,
    /// Datagrams queued or being serialised: (finish time, bytes).
    queue: VecDeque<(Duration, usize)>,
    queued_bytes: usize,
}

impl Serialiser {
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

    /// Queues `len` bytes at `now` behind those waiting, serialised at
    /// `rate` bytes/s: the time its last bit leaves, or `None` when the
    /// bytes waiting would exceed `limit` (tail drop).
    fn admit(&mut self, now: Duration, len: usize, rate: u64, limit: usize) -> Option<Duration> {
        if self.queued_bytes(now) + len > limit {
            return None;
        }
        let start = self.busy_until.max(now);
        let ns = (len as u128 * 1_000_000_000).div_ceil(u128::from(rate.max(1)));
        let finish = start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
        self.busy_until = finish;
        self.queue.push_back((finish, len));
        self.queued_bytes += len;
        Some(finish)
    }
}

/// A queue and serialiser several links share: a switch's egress port
/// two hosts send through to a third, or one uplink under several
/// streams. A datagram on one of its links waits behind every datagram
/// of all of them, in the order they were offered; then the link's own
/// latency, jitter, loss and duplication apply. The link's own
/// `bandwidth` and `queue_limit` are not used while it is in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BottleneckConfig {
    /// Serialisation rate, bytes per second.
    pub bandwidth: u64,
    /// Most bytes waiting (the datagram being serialised included).
    pub queue_limit: usize,
}

impl BottleneckConfig {
    /// `mbit_per_s` megabits per second (10⁶ bit/s) with `queue` of
    /// queue at that rate.
    pub fn mbit(mbit_per_s: u64, queue: Duration) -> Self {
        let bandwidth = mbit_per_s.saturating_mul(125_000);
        let bytes = (bandwidth as f64 * queue.as_secs_f64()) as usize;
        Self {
            bandwidth,
            queue_limit: bytes,
        }
    }
}

/// Counters of a [`BottleneckConfig`]'s queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BottleneckStats {
    /// Datagrams offered to it (over links that were up).
    pub offered: u64,
    /// Datagrams it dropped because it was full.
    pub dropped_queue: u64,
    /// The most bytes that waited in it at once.
    pub most_queued: usize,
}

/// A shared queue and what it saw.
#[derive(Debug, Clone)]
pub(crate) struct Bottleneck {
    pub(crate) config: BottleneckConfig,
    pub(crate) stats: BottleneckStats,
    serialiser: Serialiser,
}

impl Bottleneck {
    pub(crate) fn new(config: BottleneckConfig) -> Self {
        Self {
            config,
            stats: BottleneckStats::default(),
            serialiser: Serialiser::default(),
        }
    }
}

/// One direction between two nodes.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) config: LinkConfig,
    pub(crate) up: bool,
    pub(crate) stats: LinkStats,
    /// The [`Bottleneck`] this link's datagrams queue in, by index.
    pub(crate) bottleneck: Option<usize>,
    serialiser: Serialiser,
}

impl Link {
    pub(crate) fn new(config: LinkConfig) -> Self {
        Self {
            config,
            up: true,
            stats: LinkStats::default(),
            bottleneck: None,
            serialiser: Serialiser::default(),
        }
    }

    /// Bytes waiting or being serialised at `now` in the link's own queue.
    #[cfg(test)]
    pub(crate) fn queued_bytes(&mut self, now: Duration) -> usize {
        self.serialiser.queued_bytes(now)
    }

    /// Offers a datagram of `len` bytes at `now`, through `shared` when
    /// the link is in a bottleneck. Draws from `rng` in a fixed order
    /// (duplicate, then loss and jitter per copy) whatever the outcome, so
    /// one link's draws never depend on another's state.
    pub(crate) fn offer(
        &mut self,
        now: Duration,
        len: usize,
        class: u8,
        shared: Option<&mut Bottleneck>,
        rng: &mut SimRng,
    ) -> Fate {
        self.stats.sent += 1;
        self.stats.sent_bytes += len as u64;
        self.stats.per_class[usize::from(class.min(7))] += 1;
        if !self.up {
            self.stats.dropped_partition += 1;
            return Fate::Dropped(Drop::Partition);
        }
        let admitted = match (shared, self.config.bandwidth) {
            (Some(b), _) => {
                b.stats.offered += 1;
                let c = b.config;
                let left = b.serialiser.admit(now, len, c.bandwidth, c.queue_limit);
                if left.is_none() {
                    b.stats.dropped_queue += 1;
                }
                b.stats.most_queued = b.stats.most_queued.max(b.serialiser.queued_bytes);
                left
            }
            (None, None) => Some(now),
            (None, Some(rate)) => self
                .serialiser
                .admit(now, len, rate, self.config.queue_limit),
        };
        let Some(leaves) = admitted else {
            self.stats.dropped_queue += 1;
            return Fate::Dropped(Drop::Queue);
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
            link.offer(ms(0), 100, 0, None, &mut rng),
            Fate::Arrives(vec![ms(105)])
        );
        assert_eq!(
            link.offer(ms(0), 100, 0, None, &mut rng),
            Fate::Arrives(vec![ms(205)])
        );
        // 200 bytes wait; 100 more would exceed 250.
        assert_eq!(
            link.offer(ms(0), 100, 3, None, &mut rng),
            Fate::Dropped(Drop::Queue)
        );
        assert_eq!(link.queued_bytes(ms(100)), 100);
        assert_eq!(
            link.offer(ms(100), 100, 0, None, &mut rng),
            Fate::Arrives(vec![ms(305)])
        );
        link.up = false;
        assert_eq!(
            link.offer(ms(100), 1, 0, None, &mut rng),
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
    fn links_in_one_bottleneck_queue_behind_each_other() {
        // 1000 bytes/s shared, 250 bytes of queue; each link its own latency.
        let mut shared = Bottleneck::new(BottleneckConfig {
            bandwidth: 1000,
            queue_limit: 250,
        });
        let mut a = Link::new(LinkConfig::with_latency(ms(5)));
        let mut b = Link::new(LinkConfig {
            // Ignored while in the bottleneck.
            bandwidth: Some(1),
            queue_limit: 1,
            ..LinkConfig::with_latency(ms(7))
        });
        let mut rng = SimRng::new(3);
        assert_eq!(
            a.offer(ms(0), 100, 0, Some(&mut shared), &mut rng),
            Fate::Arrives(vec![ms(105)])
        );
        // Behind a's datagram, though on another link.
        assert_eq!(
            b.offer(ms(0), 100, 0, Some(&mut shared), &mut rng),
            Fate::Arrives(vec![ms(207)])
        );
        assert_eq!(
            a.offer(ms(0), 100, 0, Some(&mut shared), &mut rng),
            Fate::Dropped(Drop::Queue)
        );
        // Alone, each link would have taken the datagram at once.
        assert_eq!(
            a.offer(ms(0), 100, 0, None, &mut rng),
            Fate::Arrives(vec![ms(5)])
        );
        let s = shared.stats;
        assert_eq!((s.offered, s.dropped_queue, s.most_queued), (3, 1, 200));
        assert_eq!((a.stats.dropped_queue, b.stats.dropped_queue), (1, 0));
        assert!(a.stats.balanced() && b.stats.balanced());
    }

    #[test]
    fn certain_loss_and_duplication_are_counted_per_copy() {
        let mut link = Link::new(LinkConfig {
            loss: 1.0,
            duplicate: 1.0,
            ..LinkConfig::default()
        });
        let mut rng = SimRng::new(2);
        assert_eq!(
            link.offer(ms(0), 10, 0, None, &mut rng),
            Fate::Arrives(vec![])
        );
        let s = link.stats;
        assert_eq!((s.sent, s.duplicated, s.dropped_loss), (1, 1, 2));
        assert!(s.balanced());
    }
}
