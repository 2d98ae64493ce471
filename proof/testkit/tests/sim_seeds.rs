//! Property tests over seeds: each seed draws a network (latency, jitter,
//! bandwidth and queue, loss, duplication), core settings (window, ack
//! rate, timers, buffer bounds, datagram size), a workload, and maybe a
//! partition or a receiver crash, then checks what the cores promise.
//!
//! A failure prints `seed = N` and the command that replays it:
//! `TAGWIRE_SIM_SEED=N cargo test -p tagwire-testkit --test sim_seeds`.
//! `TAGWIRE_SIM_SEEDS=K` runs K seeds per test instead of the default.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim_common;

use std::collections::BTreeSet;
use std::time::Duration;

use sim_common::*;
use tagwire_reliable::fragment_count;
use tagwire_testkit::sim::stream::StreamConfig;
use tagwire_testkit::sim::{for_each_seed, LinkConfig, SimRng};
use tagwire_wire::datagram::max_fragment_payload;

/// Seeds per test by default: the two tests together run 2000 scenarios.
const SEEDS: u64 = 1000;

/// A scenario drawn from a seed.
struct Scenario {
    config: StreamConfig,
    link: LinkConfig,
    receivers: u8,
    messages: Vec<Vec<u8>>,
    /// (start, length) of a partition between the sender and receiver 0.
    partition: Option<(Duration, Duration)>,
    /// (when, down for) of a crash of receiver 0.
    crash: Option<(Duration, Duration)>,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: Vec<usize> = self.messages.iter().map(Vec::len).collect();
        f.debug_struct("Scenario")
            .field("config", &self.config)
            .field("link", &self.link)
            .field("receivers", &self.receivers)
            .field("message sizes", &sizes)
            .field("partition", &self.partition)
            .field("crash", &self.crash)
            .finish()
    }
}

fn draw(seed: u64, reliable: bool) -> Scenario {
    let mut rng = SimRng::derived(seed, if reliable { "reliable" } else { "best effort" });
    let mut config = if reliable {
        StreamConfig::reliable(tag())
    } else {
        StreamConfig::best_effort(tag())
    };
    config.datagram_size = rng.range_usize(150, 9000);
    let w = &mut config.writer;
    w.window = rng.range_usize(2, 128);
    w.heartbeat_period = ms(rng.range(5, 100));
    w.resend_after = ms(rng.range(10, 200));
    w.nack_holdoff = ms(rng.range(0, 20));
    let r = &mut config.reader;
    r.ack_every = rng.range(1, 128) as u32;
    r.nack_interval = ms(rng.range(1, 20));
    r.max_buffered = rng.range_usize(1, 512);
    let bandwidth = rng.chance(0.5);
    let link = LinkConfig {
        latency: Duration::from_micros(rng.range(0, 20_000)),
        jitter: Duration::from_micros(rng.range(0, 10_000)),
        bandwidth: bandwidth.then(|| rng.range(1, 1000) * 125_000),
        queue_limit: rng.range_usize(16 << 10, 1 << 20),
        loss: rng.float(0.0, 0.25),
        duplicate: rng.float(0.0, 0.15),
    };
    let max = if rng.chance(0.05) {
        200 << 10
    } else {
        rng.range_usize(1, 32 << 10)
    };
    let count = rng.range_usize(1, 16);
    let messages = workload(&mut rng, count, max);
    let partition = rng
        .chance(0.2)
        .then(|| (ms(rng.range(0, 100)), ms(rng.range(10, 1000))));
    let crash =
        (reliable && rng.chance(0.15)).then(|| (ms(rng.range(0, 100)), ms(rng.range(1, 500))));
    Scenario {
        config,
        link,
        receivers: rng.range(1, 2) as u8,
        messages,
        partition,
        crash,
    }
}

/// Sets up the faults of `s` on `net`.
fn schedule_faults(net: &mut Net, s: &Scenario) {
    let (a, b) = (net.sender, net.receivers[0]);
    if let Some((at, len)) = s.partition {
        net.sim.schedule(at, move |sim| sim.partition(&[a], &[b]));
        net.sim.schedule(at + len, move |sim| sim.heal(&[a], &[b]));
    }
    if let Some((at, len)) = s.crash {
        net.sim.schedule(at, move |sim| sim.crash(b).unwrap());
        net.sim
            .schedule(at + len, move |sim| sim.restart(b).unwrap());
    }
}

fn reliable(seed: u64) -> Result<(), String> {
    let s = draw(seed, true);
    let mut net = Net::new(seed, s.config.clone(), s.receivers, s.link);
    schedule_faults(&mut net, &s);
    net.enqueue_all(&s.messages);
    let want = expected(&s.messages);
    let (sender, crashed, crash) = (net.sender, net.receivers[0], s.crash.is_some());
    // Everything acknowledged, the faults over, every receiver complete.
    let end = s
        .partition
        .map_or(Duration::ZERO, |(a, l)| a + l)
        .max(s.crash.map_or(Duration::ZERO, |(a, l)| a + l));
    let log = net.log.clone();
    let receivers = net.receivers.clone();
    let n = s.messages.len() as u64;
    net.sim
        .run_until_cond(Duration::from_secs(600), |sim| {
            sim.elapsed() >= end
                && sim.node(sender).is_some_and(|n| n.is_idle())
                // A restarted receiver may lose the last message (the one
                // it was reassembling): its writer's idleness is the end.
                && receivers.iter().all(|&r| {
                    (crash && r == crashed)
                        || deliveries(&log, r, sender).last().is_some_and(|d| d.msg == n)
                })
        })
        .map_err(|e| {
            let r = net.receivers[0];
            format!(
                "{e}; {}; receiver 0: {:?}; {s:?}",
                net.progress(),
                net.sim
                    .node(r)
                    .map(|n| (n.reader_stats(sender), n.reassembler_stats(sender)))
            )
        })?;
    for &r in &net.receivers {
        let got = deliveries(&net.log, r, sender);
        if s.crash.is_none() || r != crashed {
            check_exact(&got, &want).map_err(|e| format!("receiver {r}: {e}"))?;
            continue;
        }
        // A restarted receiver (reader from seq 1): each incarnation in
        // order, at most once, intact; at most the message it was
        // reassembling when it crashed is lost.
        let (old, new): (Vec<_>, Vec<_>) = got.into_iter().partition(|d| d.incarnation == 0);
        check_in_order_subset(&old, &want).map_err(|e| format!("before the crash: {e}"))?;
        check_in_order_subset(&new, &want).map_err(|e| format!("after the restart: {e}"))?;
        let a = old.last().map_or(0, |d| d.msg);
        let seen: BTreeSet<u64> = old.iter().chain(&new).map(|d| d.msg).collect();
        let missing: Vec<u64> = (1..=n).filter(|m| !seen.contains(m)).collect();
        if !(missing.is_empty() || missing == [a + 1]) {
            let seqs = |v: &[tagwire_testkit::sim::stream::Delivery]| {
                v.iter().map(|d| (d.msg, d.first_seq)).collect::<Vec<_>>()
            };
            let node = net.sim.node(r);
            return Err(format!(
                "restart lost {missing:?} (old incarnation ended at {a}); (msg, first seq) old {:?} new {:?}; reader after restart {:?}; {s:?}",
                seqs(&old),
                seqs(&new),
                node.map(|n| (n.reader_stats(sender), n.reassembler_stats(sender))),
            ));
        }
    }
    let w = net.sim.node(sender).unwrap();
    for &r in &net.receivers {
        let ws = w.writer(r).unwrap().stats();
        if ws.acked != ws.sent {
            return Err(format!("writer to {r}: {ws:?}"));
        }
    }
    check_links_balanced(&net.sim)
}

fn best_effort(seed: u64) -> Result<(), String> {
    let s = draw(seed, false);
    let mut net = Net::new(seed, s.config.clone(), s.receivers, s.link);
    schedule_faults(&mut net, &s);
    net.pace_all(&s.messages, ms(1));
    net.sim
        .run_for(Duration::from_secs(3))
        .map_err(|e| e.to_string())?;
    // The fence: a lossless network and one more single-datagram message,
    // so every earlier loss is seen.
    net.sim.heal_all();
    net.sim.set_all_links(LinkConfig::default());
    let fence = vec![vec![7u8; 1]];
    net.enqueue_all(&fence);
    net.sim
        .run_for(Duration::from_secs(1))
        .map_err(|e| e.to_string())?;
    let all: Vec<Vec<u8>> = s.messages.iter().chain(&fence).cloned().collect();
    let want = expected(&all);
    let max_payload = max_fragment_payload(&tag(), s.config.datagram_size);
    let datagrams: u64 = all
        .iter()
        .map(|m| fragment_count(m.len(), max_payload) as u64)
        .sum();
    for &r in &net.receivers {
        let got = deliveries(&net.log, r, net.sender);
        check_in_order_subset(&got, &want).map_err(|e| format!("receiver {r}: {e}"))?;
        if got.last().map(|d| d.msg) != Some(want.len() as u64) {
            return Err(format!("receiver {r}: the fence did not arrive"));
        }
        let node = net.sim.node(r).unwrap();
        let be = node.best_effort_stats(net.sender).unwrap();
        if be.accepted + be.lost != datagrams {
            return Err(format!("receiver {r}: {be:?}, {datagrams} datagrams sent"));
        }
        let link = net.sim.link_stats(net.sender, r);
        if link.delivered != be.accepted + be.late {
            return Err(format!("receiver {r}: {link:?} but {be:?}"));
        }
        // Single-datagram messages: delivered or counted lost, one for one.
        if max_payload >= all.iter().map(Vec::len).max().unwrap_or(0)
            && got.len() as u64 + be.lost != want.len() as u64
        {
            return Err(format!("receiver {r}: {} delivered, {be:?}", got.len()));
        }
    }
    check_links_balanced(&net.sim)
}

#[test]
fn reliable_streams_deliver_everything_in_order_for_every_seed() {
    let n = for_each_seed(
        "reliable_streams_deliver_everything_in_order_for_every_seed",
        SEEDS,
        reliable,
    );
    println!("{n} reliable scenarios");
}

#[test]
fn best_effort_streams_count_every_loss_for_every_seed() {
    let n = for_each_seed(
        "best_effort_streams_count_every_loss_for_every_seed",
        SEEDS,
        best_effort,
    );
    println!("{n} best-effort scenarios");
}
