//! Helpers shared by the `sim_*` tests: addresses, workloads, networks of
//! `StreamNode`s and the delivery checks.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tagwire_testkit::sim::stream::{Delivery, DeliveryLog, StreamConfig, StreamNode};
use tagwire_testkit::sim::{checksum, Addr, LinkConfig, Sim, SimConfig, SimRng};
use tagwire_wire::TagName;

/// Node `i`'s address.
pub(crate) fn addr(i: u8) -> Addr {
    SocketAddr::from((Ipv4Addr::new(10, 0, 0, i), 7400))
}

pub(crate) fn tag() -> TagName {
    TagName::new("/sim/stream").unwrap()
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `len` pseudo-random bytes from `seed` (splitmix64 words: cheap in a debug
/// build, unlike a cipher).
pub(crate) fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x = seed;
    while out.len() < len {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A message the test published: its number on the stream, length and
/// checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    pub(crate) msg: u64,
    pub(crate) len: usize,
    pub(crate) checksum: u64,
}

/// Messages of random sizes in `1..=max` bytes (a third of them small,
/// below 2 KiB, the rest up to `max`).
pub(crate) fn workload(rng: &mut SimRng, count: usize, max: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| {
            let len = if rng.chance(0.33) {
                rng.range_usize(1, 2048.min(max))
            } else {
                rng.range_usize(1, max)
            };
            payload(rng.next_u64(), len)
        })
        .collect()
}

pub(crate) fn expected(messages: &[Vec<u8>]) -> Vec<Sent> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| Sent {
            msg: i as u64 + 1,
            len: m.len(),
            checksum: checksum(m),
        })
        .collect()
}

/// One sender (node 1) and `receivers` receivers (nodes 2..), every link
/// `link`, every node a `StreamNode` with `config`.
pub(crate) struct Net {
    pub(crate) sim: Sim<StreamNode>,
    pub(crate) log: DeliveryLog,
    pub(crate) sender: Addr,
    pub(crate) receivers: Vec<Addr>,
}

impl Net {
    pub(crate) fn new(seed: u64, config: StreamConfig, receivers: u8, link: LinkConfig) -> Self {
        Self::with_configs(seed, receivers, link, move |_| config.clone())
    }

    /// [`Net::new`] with a node configuration per incarnation (a restarted
    /// node may start its streams differently).
    pub(crate) fn with_configs(
        seed: u64,
        receivers: u8,
        link: LinkConfig,
        config: impl Fn(u32) -> StreamConfig + Clone + 'static,
    ) -> Self {
        let mut sim = Sim::new(SimConfig {
            default_link: link,
            ..SimConfig::seeded(seed)
        });
        let log = DeliveryLog::new();
        for i in 1..=receivers + 1 {
            let (config, log) = (config.clone(), log.clone());
            sim.add_node(addr(i), move |init| {
                StreamNode::new(init, config(init.incarnation), log.clone())
            })
            .unwrap();
        }
        Self {
            sim,
            log,
            sender: addr(1),
            receivers: (2..=receivers + 1).map(addr).collect(),
        }
    }

    /// Queues every message to every receiver (the application retries
    /// while held back).
    pub(crate) fn enqueue_all(&mut self, messages: &[Vec<u8>]) {
        let receivers = self.receivers.clone();
        self.sim
            .with_node(self.sender, |node, now| {
                for m in messages {
                    for &r in &receivers {
                        node.enqueue(now, r, m.clone());
                    }
                }
            })
            .unwrap();
    }

    /// Has the sender's application publish message `i` at `i * spacing`
    /// from now, to every receiver.
    pub(crate) fn pace_all(&mut self, messages: &[Vec<u8>], spacing: Duration) {
        let (sender, receivers) = (self.sender, self.receivers.clone());
        for (i, m) in messages.iter().enumerate() {
            let (m, receivers) = (m.clone(), receivers.clone());
            self.sim.schedule_in(spacing * i as u32, move |sim| {
                sim.with_node(sender, |node, now| {
                    for &r in &receivers {
                        node.enqueue(now, r, m.clone());
                    }
                });
            });
        }
    }

    /// Runs until the sender is idle (everything accepted and
    /// acknowledged) and every receiver has `want` deliveries.
    pub(crate) fn run_to_completion(
        &mut self,
        want: usize,
        limit: Duration,
    ) -> Result<Duration, String> {
        let (sender, receivers, log) = (self.sender, self.receivers.clone(), self.log.clone());
        self.sim
            .run_until_cond(limit, |sim| {
                sim.node(sender).is_some_and(StreamNode::is_idle)
                    && receivers.iter().all(|&r| delivered_to(&log, r) >= want)
            })
            .map_err(|e| format!("{e}; {}", self.progress()))
    }

    pub(crate) fn progress(&self) -> String {
        let node = self.sim.node(self.sender);
        let per: Vec<usize> = self
            .receivers
            .iter()
            .map(|&r| delivered_to(&self.log, r))
            .collect();
        format!(
            "delivered per receiver {per:?}, sender queued {:?}, writer {:?}",
            node.map(StreamNode::queued),
            node.and_then(|n| n
                .writer(self.receivers[0])
                .map(|w| (w.occupancy(), w.stats())))
        )
    }
}

pub(crate) fn delivered_to(log: &DeliveryLog, receiver: Addr) -> usize {
    log.snapshot()
        .iter()
        .filter(|d| d.receiver == receiver)
        .count()
}

/// Deliveries at `receiver` from `from`, in delivery order.
pub(crate) fn deliveries(log: &DeliveryLog, receiver: Addr, from: Addr) -> Vec<Delivery> {
    log.snapshot()
        .into_iter()
        .filter(|d| d.receiver == receiver && d.from == from)
        .collect()
}

/// Every message exactly once, in order, byte-identical (length and
/// checksum), on one stream.
pub(crate) fn check_exact(got: &[Delivery], want: &[Sent]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.msg != w.msg {
            return Err(format!(
                "delivery {i} is message {} (want {}): lost, duplicated or out of order",
                g.msg, w.msg
            ));
        }
        if (g.len, g.checksum) != (w.len, w.checksum) {
            return Err(format!(
                "message {} corrupted: len {} checksum {:x}, want {} {:x}",
                w.msg, g.len, g.checksum, w.len, w.checksum
            ));
        }
        if g.stream != got[0].stream {
            return Err(format!("message {} on another stream", w.msg));
        }
    }
    if got.len() != want.len() {
        return Err(format!("{} deliveries, want {}", got.len(), want.len()));
    }
    Ok(())
}

/// Each delivery matches the message of its number (no corruption); the
/// numbers strictly increase (in order, no duplicates).
pub(crate) fn check_in_order_subset(got: &[Delivery], want: &[Sent]) -> Result<(), String> {
    let mut last = 0;
    for g in got {
        if g.msg <= last {
            return Err(format!(
                "message {} after message {last}: duplicated or reordered",
                g.msg
            ));
        }
        last = g.msg;
        let Some(w) = usize::try_from(g.msg - 1).ok().and_then(|i| want.get(i)) else {
            return Err(format!("message {} was never sent", g.msg));
        };
        if (g.len, g.checksum) != (w.len, w.checksum) {
            return Err(format!("message {} corrupted", g.msg));
        }
    }
    Ok(())
}

/// Link stats all balanced.
pub(crate) fn check_links_balanced(sim: &Sim<StreamNode>) -> Result<(), String> {
    for ((from, to), s) in sim.links() {
        if !s.balanced() {
            return Err(format!("link {from} → {to} does not add up: {s:?}"));
        }
    }
    Ok(())
}
