//! The simulator itself: reproducible from its seed, links that do exactly
//! what they are configured to, partitions, crashes and restarts, groups,
//! scheduling and its guards. A toy node (a beacon) keeps these tests
//! independent of any protocol core.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim_common;

use std::time::{Duration, Instant};

use sim_common::*;
use tagwire_testkit::sim::stream::StreamConfig;
use tagwire_testkit::sim::{
    Addr, DropReason, LinkConfig, NodeInit, Outgoing, Sim, SimConfig, SimError, SimNode, SimRng,
    TraceEvent,
};

/// Sends `count` datagrams of `size` bytes (its number in the first 8) to
/// `to` every `period`, starting at once; records what it receives.
struct Beacon {
    to: Option<Addr>,
    group: bool,
    period: Duration,
    size: usize,
    count: u64,
    sent: u64,
    next: Option<Instant>,
    out: Vec<Outgoing>,
    received: Vec<(Instant, Addr, u64)>,
    incarnation: u32,
}

impl Beacon {
    fn new(init: &NodeInit, to: Option<Addr>, period: Duration, size: usize, count: u64) -> Self {
        Self {
            to,
            group: false,
            period,
            size: size.max(8),
            count,
            sent: 0,
            next: (to.is_some() && count > 0).then_some(init.now),
            out: Vec::new(),
            received: Vec::new(),
            incarnation: init.incarnation,
        }
    }

    fn silent(init: &NodeInit) -> Self {
        Self::new(init, None, ms(1), 8, 0)
    }
}

impl SimNode for Beacon {
    fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]) {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        self.received.push((now, from, n));
    }

    fn handle_timeout(&mut self, now: Instant) {
        let (Some(to), Some(next)) = (self.to, self.next) else {
            return;
        };
        assert!(now >= next, "timeout fired early");
        self.sent += 1;
        let mut bytes = vec![0u8; self.size];
        bytes[..8].copy_from_slice(&self.sent.to_le_bytes());
        self.out.push(if self.group {
            Outgoing::group(to, bytes)
        } else {
            Outgoing::unicast(to, bytes)
        });
        self.next = (self.sent < self.count).then(|| next + self.period);
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Outgoing> {
        self.out.pop()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next
    }
}

fn beacons(seed: u64, link: LinkConfig, period: Duration, size: usize, count: u64) -> Sim<Beacon> {
    let mut sim = Sim::new(SimConfig {
        default_link: link,
        record_trace: true,
        ..SimConfig::seeded(seed)
    });
    let to = addr(2);
    sim.add_node(addr(1), move |init| {
        Beacon::new(init, Some(to), period, size, count)
    })
    .unwrap();
    sim.add_node(addr(2), Beacon::silent).unwrap();
    sim
}

/// One lossy, reordering, fragmenting reliable run; what a replay compares.
fn stream_run(seed: u64) -> (u64, Vec<u64>, String, Vec<(u64, u64)>) {
    let link = LinkConfig {
        jitter: ms(4),
        loss: 0.1,
        duplicate: 0.05,
        queue_limit: 64 * 1024,
        ..LinkConfig::default()
    }
    .mbit(50);
    let mut net = Net::new(seed, StreamConfig::reliable(tag()), 2, link);
    let messages = workload(&mut SimRng::derived(seed, "workload"), 20, 20_000);
    net.enqueue_all(&messages);
    net.run_to_completion(messages.len(), Duration::from_secs(60))
        .unwrap();
    let stats = format!("{:?}", net.sim.links().collect::<Vec<_>>());
    let log = net
        .log
        .snapshot()
        .iter()
        .map(|d| (d.msg, d.checksum))
        .collect();
    let times = net
        .log
        .snapshot()
        .iter()
        .map(|d| (d.at - net.sim.instant_at(Duration::ZERO)).as_nanos() as u64)
        .collect();
    (net.sim.trace_hash(), times, stats, log)
}

#[test]
fn the_same_seed_replays_the_same_run() {
    let a = stream_run(5);
    let b = stream_run(5);
    assert_eq!(a, b);
    let c = stream_run(6);
    assert_ne!(a.0, c.0, "another seed, another trace");
    // With a recorded trace, event for event.
    let run = |seed| {
        let link = LinkConfig {
            jitter: ms(3),
            loss: 0.2,
            duplicate: 0.2,
            ..LinkConfig::default()
        };
        let mut sim = beacons(seed, link, ms(1), 100, 500);
        sim.run_for(Duration::from_secs(1)).unwrap();
        (
            sim.trace().to_vec(),
            sim.trace_hash(),
            sim.node(addr(2)).unwrap().received.clone(),
        )
    };
    let (t1, h1, r1) = run(9);
    let (t2, h2, r2) = run(9);
    assert_eq!((&t1, h1, &r1), (&t2, h2, &r2));
    assert!(t1.len() > 1000);
    // Jitter reordered some datagrams.
    assert!(r1.windows(2).any(|w| w[1].2 < w[0].2));
}

#[test]
fn loss_and_duplication_happen_at_the_configured_rates() {
    let link = LinkConfig {
        loss: 0.25,
        duplicate: 0.10,
        ..LinkConfig::default()
    };
    let n = 20_000;
    let mut sim = beacons(3, link, Duration::from_micros(100), 8, n);
    sim.run_for(Duration::from_secs(3)).unwrap();
    let s = sim.link_stats(addr(1), addr(2));
    assert_eq!(s.sent, n);
    assert!(s.balanced() && s.in_flight == 0, "{s:?}");
    let copies = (s.sent + s.duplicated) as f64;
    let dup = s.duplicated as f64 / n as f64;
    let loss = s.dropped_loss as f64 / copies;
    // Within 5 standard deviations (binomial) of the configured rates.
    assert!(
        (dup - 0.10).abs() < 5.0 * (0.1 * 0.9 / n as f64).sqrt(),
        "dup {dup}"
    );
    assert!(
        (loss - 0.25).abs() < 5.0 * (0.25 * 0.75 / copies).sqrt(),
        "loss {loss}"
    );
    let got = &sim.node(addr(2)).unwrap().received;
    assert_eq!(got.len() as u64, s.delivered);
    let losses = sim
        .trace()
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                TraceEvent::Dropped {
                    why: DropReason::Loss,
                    ..
                }
            )
        })
        .count();
    assert_eq!(losses as u64, s.dropped_loss);
}

#[test]
fn a_full_queue_drops_the_tail_and_bandwidth_spaces_arrivals() {
    // 100 kB/s: a 1000-byte datagram takes 10 ms. A burst of 10 datagrams
    // at one instant into a 3500-byte queue: 3 fit, 7 are dropped.
    let link = LinkConfig {
        latency: ms(1),
        bandwidth: Some(100_000),
        queue_limit: 3500,
        ..LinkConfig::default()
    };
    let mut sim = beacons(1, link, Duration::ZERO, 1000, 10);
    sim.run_for(Duration::from_secs(1)).unwrap();
    let s = sim.link_stats(addr(1), addr(2));
    assert_eq!((s.sent, s.dropped_queue, s.delivered), (10, 7, 3), "{s:?}");
    let t0 = sim.instant_at(Duration::ZERO);
    let at: Vec<Duration> = sim
        .node(addr(2))
        .unwrap()
        .received
        .iter()
        .map(|r| r.0 - t0)
        .collect();
    assert_eq!(at, vec![ms(11), ms(21), ms(31)]);
}

#[test]
fn a_partition_drops_what_crosses_it_until_it_heals() {
    // One datagram every 10 ms from t = 0, 1 ms latency. The cut at 100.5 ms
    // catches the one sent at 100 ms in flight, and those sent at 110 ..= 200
    // ms; the one sent at 210 ms passes again.
    let mut sim = beacons(2, LinkConfig::with_latency(ms(1)), ms(10), 8, 40);
    let (a, b) = (addr(1), addr(2));
    sim.schedule(Duration::from_micros(100_500), move |sim| {
        sim.partition(&[a], &[b])
    });
    sim.schedule(ms(205), move |sim| sim.heal(&[a], &[b]));
    sim.run_for(Duration::from_secs(1)).unwrap();
    let s = sim.link_stats(a, b);
    assert_eq!(
        (s.sent, s.dropped_partition, s.delivered),
        (40, 11, 29),
        "{s:?}"
    );
    let got: Vec<u64> = sim.node(b).unwrap().received.iter().map(|r| r.2).collect();
    let want: Vec<u64> = (1..=10).chain(22..=40).collect();
    assert_eq!(got, want);
    assert!(s.balanced());
}

#[test]
fn a_crashed_node_gets_nothing_and_restarts_as_a_fresh_instance() {
    let mut sim = beacons(4, LinkConfig::with_latency(ms(1)), ms(10), 8, 30);
    let (a, b) = (addr(1), addr(2));
    sim.run_until(ms(95)).unwrap();
    assert_eq!(sim.node(b).unwrap().received.len(), 10);
    sim.crash(b).unwrap();
    assert!(!sim.is_up(b) && sim.node(b).is_none());
    sim.run_until(ms(195)).unwrap();
    sim.restart(b).unwrap();
    let node = sim.node(b).unwrap();
    assert_eq!((node.incarnation, node.received.len()), (1, 0));
    sim.run_for(Duration::from_secs(1)).unwrap();
    let got: Vec<u64> = sim.node(b).unwrap().received.iter().map(|r| r.2).collect();
    assert_eq!(got, (21..=30).collect::<Vec<_>>());
    let s = sim.link_stats(a, b);
    assert_eq!((s.dropped_node_down, s.delivered), (10, 20));
    let ns = sim.node_stats(b).unwrap();
    assert_eq!((ns.crashes, ns.restarts, ns.received), (1, 1, 20));
    assert_eq!(sim.incarnation(b), Some(1));
    // A crashed sender stops sending: its timeouts stop.
    sim.crash(a).unwrap();
    let before = sim.node_stats(a).unwrap().timeouts;
    sim.restart(a).unwrap();
    sim.crash(a).unwrap();
    sim.run_for(Duration::from_secs(1)).unwrap();
    assert_eq!(sim.node_stats(a).unwrap().timeouts, before);
    assert_eq!(sim.crash(addr(9)), Err(SimError::UnknownNode(addr(9))));
}

#[test]
fn a_group_datagram_reaches_every_member_but_the_sender() {
    let group = addr(200);
    let mut sim: Sim<Beacon> = Sim::new(SimConfig::seeded(1));
    sim.add_node(addr(1), move |init| Beacon {
        group: true,
        ..Beacon::new(init, Some(group), ms(1), 8, 3)
    })
    .unwrap();
    for i in 2..=4 {
        sim.add_node(addr(i), Beacon::silent).unwrap();
    }
    for i in [1, 2, 4] {
        sim.join(group, addr(i));
    }
    sim.run_for(ms(100)).unwrap();
    let counts: Vec<usize> = (1..=4)
        .map(|i| sim.node(addr(i)).unwrap().received.len())
        .collect();
    assert_eq!(counts, vec![0, 3, 0, 3]);
    assert_eq!(sim.node_stats(addr(1)).unwrap().transmitted, 3);
    assert_eq!(sim.total_link_stats().delivered, 6);
}

#[test]
fn actions_run_in_schedule_order_and_runs_stop_where_asked() {
    let mut sim = beacons(1, LinkConfig::default(), ms(10), 8, 100);
    let order = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    for i in 0..5 {
        let order = order.clone();
        sim.schedule(ms(50), move |sim| {
            order.borrow_mut().push((i, sim.elapsed()))
        });
    }
    let o = order.clone();
    sim.schedule(ms(20), move |_| o.borrow_mut().push((99, ms(20))));
    sim.run_until(ms(60)).unwrap();
    assert_eq!(sim.elapsed(), ms(60));
    let want: Vec<(i32, Duration)> = [(99, ms(20))]
        .into_iter()
        .chain((0..5).map(|i| (i, ms(50))))
        .collect();
    assert_eq!(*order.borrow(), want);
    // run_until_cond: met, not met in time, and nothing left to happen.
    let b = addr(2);
    let at = sim
        .run_until_cond(Duration::from_secs(1), |s| {
            s.node(b).unwrap().received.len() >= 20
        })
        .unwrap();
    assert_eq!(at, ms(191));
    let err = sim.run_until_cond(ms(100), |_| false).unwrap_err();
    assert!(matches!(err, SimError::Deadline { .. }), "{err}");
    assert_eq!(sim.elapsed(), ms(291));
    let err = sim
        .run_until_cond(Duration::from_secs(10), |_| false)
        .unwrap_err();
    assert!(matches!(err, SimError::Idle { .. }), "{err}");
}

/// A node whose timeout never moves forward: always its creation time.
struct Stuck(Instant);

impl SimNode for Stuck {
    fn handle_datagram(&mut self, _: Instant, _: Addr, _: &[u8]) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, _: Instant) -> Option<Outgoing> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.0)
    }
}

#[test]
fn a_node_that_never_lets_time_advance_is_reported_as_a_livelock() {
    let mut sim: Sim<Stuck> = Sim::new(SimConfig {
        max_events_per_instant: 1000,
        ..SimConfig::seeded(1)
    });
    sim.add_node(addr(1), |init| Stuck(init.now)).unwrap();
    let err = sim.run_for(ms(1)).unwrap_err();
    assert_eq!(
        err,
        SimError::Livelock {
            at: Duration::ZERO,
            events: 1000
        }
    );
}
