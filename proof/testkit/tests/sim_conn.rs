//! The simulator's connection layer (`sim::conn`): what the membership core
//! expects of TCP, checked over simulated links.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim_common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sim_common::{addr, ms, payload};
use tagwire_testkit::sim::conn::{CloseReason, ConnConfig, ConnEvent, ConnId, Conns, DialError};
use tagwire_testkit::sim::{
    for_each_seed, Addr, LinkConfig, NodeInit, Outgoing, Sim, SimConfig, SimNode, SimRng,
};

/// A node that only holds connections: it records what they report.
struct Pipe {
    conns: Conns,
    /// Bytes received per connection.
    got: BTreeMap<ConnId, Vec<u8>>,
    /// Every event but `Data`, in order.
    events: Vec<ConnEvent>,
}

impl Pipe {
    fn new(init: &NodeInit, config: ConnConfig) -> Self {
        Self {
            conns: Conns::new(config, init.seed),
            got: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    fn drain(&mut self) {
        while let Some(e) = self.conns.poll_event() {
            match e {
                ConnEvent::Data { conn, bytes } => {
                    self.got.entry(conn).or_default().extend_from_slice(&bytes);
                }
                other => self.events.push(other),
            }
        }
    }

    /// The connection accepted or connected last.
    fn last_conn(&self) -> Option<ConnId> {
        self.events.iter().rev().find_map(|e| match e {
            ConnEvent::Connected { conn, .. } | ConnEvent::Accepted { conn, .. } => Some(*conn),
            _ => None,
        })
    }

    fn closed(&self, conn: ConnId) -> Option<CloseReason> {
        self.events.iter().find_map(|e| match e {
            ConnEvent::Closed { conn: c, reason } if *c == conn => Some(*reason),
            _ => None,
        })
    }

    fn dial_failed(&self, conn: ConnId) -> Option<DialError> {
        self.events.iter().find_map(|e| match e {
            ConnEvent::DialFailed { conn: c, error, .. } if *c == conn => Some(*error),
            _ => None,
        })
    }
}

impl SimNode for Pipe {
    fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]) {
        self.conns.handle_datagram(now, from, bytes);
        self.drain();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.conns.handle_timeout(now);
        self.drain();
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Outgoing> {
        let (to, bytes) = self.conns.poll_transmit()?;
        Some(Outgoing::unicast(to, bytes))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.conns.poll_timeout()
    }
}

fn net(seed: u64, link: LinkConfig, config: ConnConfig) -> (Sim<Pipe>, Addr, Addr) {
    let mut sim = Sim::new(SimConfig::seeded(seed));
    sim.set_all_links(link);
    let (a, b) = (addr(1), addr(2));
    sim.add_node(a, move |i| Pipe::new(i, config)).unwrap();
    sim.add_node(b, move |i| Pipe::new(i, config)).unwrap();
    (sim, a, b)
}

/// Dials `b` from `a` and runs until both ends hold the connection.
fn open(sim: &mut Sim<Pipe>, a: Addr, b: Addr) -> (ConnId, ConnId) {
    let ca = sim.with_node(a, |n, now| n.conns.connect(now, b)).unwrap();
    sim.run_until_cond(Duration::from_secs(5), |s| {
        s.node(a).unwrap().conns.is_open(ca) && s.node(b).unwrap().last_conn().is_some()
    })
    .unwrap();
    (ca, sim.node(b).unwrap().last_conn().unwrap())
}

#[test]
fn streams_arrive_in_order_exactly_once_through_loss_duplication_and_reordering() {
    let mut seen = (0, 0, 0);
    let runs = for_each_seed("streams_arrive_in_order_exactly_once", 40, |seed| {
        let mut rng = SimRng::derived(seed, "conn workload");
        let link = LinkConfig {
            latency: ms(rng.range(1, 10)),
            jitter: ms(rng.range(0, 20)),
            loss: rng.float(0.0, 0.2),
            duplicate: rng.float(0.0, 0.2),
            ..LinkConfig::default()
        };
        let config = ConnConfig {
            window: rng.range_usize(1, 64),
            mss: rng.range_usize(16, 1500),
            // Long enough that no loss pattern breaks the connection.
            give_up: Duration::from_secs(60),
            ..ConnConfig::default()
        };
        let (mut sim, a, b) = net(seed, link, config);
        let (ca, cb) = open(&mut sim, a, b);
        // Both ways at once, in writes of random sizes.
        let mut sent = (Vec::new(), Vec::new());
        for _ in 0..rng.range(1, 40) {
            let (from, conn, buf) = if rng.chance(0.5) {
                (a, ca, &mut sent.0)
            } else {
                (b, cb, &mut sent.1)
            };
            let chunk = payload(rng.next_u64(), rng.range_usize(1, 5000));
            buf.extend_from_slice(&chunk);
            assert!(sim
                .with_node(from, |n, now| n.conns.send(now, conn, &chunk))
                .unwrap());
        }
        let (want_b, want_a) = (sent.0.len(), sent.1.len());
        let got = |s: &Sim<Pipe>, at: Addr, c: ConnId| {
            s.node(at).unwrap().got.get(&c).map_or(0, Vec::len)
        };
        sim.run_until_cond(Duration::from_secs(120), |s| {
            got(s, b, cb) >= want_b && got(s, a, ca) >= want_a
        })
        .map_err(|e| format!("{e}: {link:?} {config:?}"))?;
        let (na, nb) = (sim.node(a).unwrap(), sim.node(b).unwrap());
        assert_eq!(nb.got.get(&cb).cloned().unwrap_or_default(), sent.0);
        assert_eq!(na.got.get(&ca).cloned().unwrap_or_default(), sent.1);
        let (sa, sb) = (na.conns.stats(), nb.conns.stats());
        seen.0 += sa.retransmitted + sb.retransmitted;
        seen.1 += sa.duplicates + sb.duplicates;
        seen.2 += sa.out_of_order + sb.out_of_order;
        // A closes after its data: B reads the end, both forget the connection.
        sim.with_node(a, |n, now| n.conns.close(now, ca));
        sim.run_until_cond(Duration::from_secs(120), |s| {
            s.node(a).unwrap().conns.is_empty() && s.node(b).unwrap().conns.is_empty()
        })
        .map_err(|e| {
            let (na, nb) = (sim.node(a).unwrap(), sim.node(b).unwrap());
            format!(
                "close: {e}; a: {}; b: {}",
                na.conns.describe(),
                nb.conns.describe()
            )
        })?;
        assert_eq!(sim.node(b).unwrap().closed(cb), Some(CloseReason::Eof));
        assert_eq!(
            sim.node(a).unwrap().closed(ca),
            None,
            "no event for our own close"
        );
        Ok(())
    });
    if runs > 10 {
        // The faults did happen, and were repaired.
        assert!(seen.0 > 0 && seen.1 > 0 && seen.2 > 0, "{seen:?}");
    }
}

#[test]
fn a_restarted_peer_resets_the_connection_and_a_crashed_one_times_it_out() {
    let config = ConnConfig::default();
    let (mut sim, a, b) = net(1, LinkConfig::default(), config);
    let (ca, _) = open(&mut sim, a, b);
    sim.crash(b).unwrap();
    sim.restart(b).unwrap();
    sim.with_node(a, |n, now| n.conns.send(now, ca, b"hello"));
    sim.run_for(ms(50)).unwrap();
    assert_eq!(sim.node(a).unwrap().closed(ca), Some(CloseReason::Reset));
    assert!(sim.node(a).unwrap().conns.is_empty());
    assert!(
        sim.node(b).unwrap().got.is_empty(),
        "the new life got nothing"
    );

    // Crashed for good: silence, then the connection breaks after give_up.
    let (ca, _) = open(&mut sim, a, b);
    sim.crash(b).unwrap();
    let sent_at = sim.elapsed();
    sim.with_node(a, |n, now| n.conns.send(now, ca, b"anyone?"));
    let at = sim
        .run_until_cond(Duration::from_secs(10), |s| {
            s.node(a).unwrap().closed(ca).is_some()
        })
        .unwrap();
    assert_eq!(sim.node(a).unwrap().closed(ca), Some(CloseReason::TimedOut));
    assert!(at - sent_at >= config.give_up && at - sent_at < config.give_up + ms(10));
    assert!(sim.node(a).unwrap().conns.stats().retransmitted > 0);
}

#[test]
fn dials_fail_after_the_connect_timeout_across_a_partition_or_to_a_crashed_node() {
    let config = ConnConfig::default();
    let (mut sim, a, b) = net(2, LinkConfig::default(), config);
    sim.partition(&[a], &[b]);
    let start = sim.elapsed();
    let c = sim.with_node(a, |n, now| n.conns.connect(now, b)).unwrap();
    let at = sim
        .run_until_cond(Duration::from_secs(10), |s| {
            s.node(a).unwrap().dial_failed(c).is_some()
        })
        .unwrap();
    assert_eq!(
        sim.node(a).unwrap().dial_failed(c),
        Some(DialError::TimedOut)
    );
    assert_eq!(at - start, config.connect_timeout);
    assert!(sim.node(b).unwrap().events.is_empty(), "b heard nothing");

    sim.heal_all();
    sim.crash(b).unwrap();
    let c = sim.with_node(a, |n, now| n.conns.connect(now, b)).unwrap();
    sim.run_for(config.connect_timeout).unwrap();
    assert_eq!(
        sim.node(a).unwrap().dial_failed(c),
        Some(DialError::TimedOut)
    );

    // Once it is back, a dial succeeds.
    sim.restart(b).unwrap();
    let (ca, cb) = open(&mut sim, a, b);
    assert!(sim.node(a).unwrap().conns.is_open(ca));
    assert!(sim.node(b).unwrap().conns.is_open(cb));
}

#[test]
fn a_partition_breaks_a_busy_connection_at_both_ends_and_a_short_one_does_not() {
    let config = ConnConfig::default();
    let (mut sim, a, b) = net(3, LinkConfig::default(), config);
    let (ca, cb) = open(&mut sim, a, b);
    // Shorter than give_up: retransmissions carry the data across.
    sim.partition(&[a], &[b]);
    sim.with_node(a, |n, now| n.conns.send(now, ca, b"one"));
    sim.with_node(b, |n, now| n.conns.send(now, cb, b"two"));
    sim.run_for(config.give_up / 2).unwrap();
    sim.heal_all();
    sim.run_for(config.max_rto * 2).unwrap();
    assert_eq!(sim.node(b).unwrap().got[&cb], b"one");
    assert_eq!(sim.node(a).unwrap().got[&ca], b"two");
    // Longer: both ends give up.
    sim.partition(&[a], &[b]);
    sim.with_node(a, |n, now| n.conns.send(now, ca, b"three"));
    sim.with_node(b, |n, now| n.conns.send(now, cb, b"four"));
    sim.run_for(config.give_up + ms(10)).unwrap();
    assert_eq!(sim.node(a).unwrap().closed(ca), Some(CloseReason::TimedOut));
    assert_eq!(sim.node(b).unwrap().closed(cb), Some(CloseReason::TimedOut));
    assert!(sim.node(a).unwrap().conns.is_empty() && sim.node(b).unwrap().conns.is_empty());
}
