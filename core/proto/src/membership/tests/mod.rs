//! Two or three cores against each other, their transmits delivered by hand
//! on a virtual clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tagwire_wire::control::{HistoryQuery, NodeState};
use tagwire_wire::peer::{Beacon, PeerMessage, TableOp, Version};
use tagwire_wire::{NodeAddr, TagName};

use super::*;

mod random;
mod refusals;

const LEASE: Duration = Duration::from_millis(600);
const APPLY: Duration = Duration::from_millis(300);

fn node(i: usize) -> NodeAddr {
    NodeAddr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1)))
}

fn control(i: usize) -> SocketAddr {
    SocketAddr::new(node(i).0, 7401)
}

fn config(i: usize, incarnation: u64) -> Config {
    let mut c = Config::new(node(i), incarnation, LEASE, APPLY);
    c.name = format!("h{i}");
    c.delivery_port = 7402;
    c
}

fn op(name: &str) -> TableOp {
    TableOp::TagDown {
        name: TagName::new(name).unwrap(),
        version: Version::default(),
    }
}

/// Nodes wired by hand: a link on one side maps to a link on the other.
struct Net {
    now: Instant,
    nodes: Vec<Membership>,
    wires: BTreeMap<(usize, LinkId), (usize, LinkId)>,
    /// Nodes cut off from everybody (their messages and dials are lost).
    cut: BTreeSet<usize>,
    /// Every event, per node.
    events: Vec<Vec<Event>>,
    /// Messages delivered: (from, to, message).
    log: Vec<(usize, usize, PeerMessage)>,
    /// Nodes whose runtime answers PeerUp with a Sync and Op with Applied.
    auto: Vec<bool>,
}

impl Net {
    /// `n` nodes that all know each other from a node list.
    fn new(n: usize) -> Self {
        let now = Instant::now();
        let mut net = Net {
            now,
            nodes: Vec::new(),
            wires: BTreeMap::new(),
            cut: BTreeSet::new(),
            events: vec![Vec::new(); n],
            log: Vec::new(),
            auto: vec![true; n],
        };
        for i in 0..n {
            net.nodes.push(Membership::new(config(i, 100)));
        }
        for i in 0..n {
            net.list_all(i);
        }
        net
    }

    fn list_all(&mut self, i: usize) {
        for j in 0..self.nodes.len() {
            let d = SocketAddr::new(node(j).0, 7402);
            self.nodes[i].add_node(
                self.now,
                node(j),
                &format!("h{j}"),
                control(j),
                d,
                Source::List,
            );
        }
    }

    fn index(&self, n: NodeAddr) -> usize {
        (0..self.nodes.len()).find(|i| node(*i) == n).unwrap()
    }

    /// Delivers transmits and answers events until nothing moves.
    fn settle(&mut self) {
        loop {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                while let Some(t) = self.nodes[i].poll_transmit(self.now) {
                    moved = true;
                    self.transmit(i, t);
                }
                while let Some(e) = self.nodes[i].poll_event() {
                    moved = true;
                    if self.auto[i] {
                        match &e {
                            Event::PeerUp { link, .. } => {
                                assert!(self.nodes[i].send_sync(*link, vec![]));
                            }
                            Event::Op { link, id, .. } => self.nodes[i].acknowledge(*link, *id),
                            _ => {}
                        }
                    }
                    self.events[i].push(e);
                }
            }
            self.check_one_link_per_pair();
            if !moved {
                return;
            }
        }
    }

    fn transmit(&mut self, i: usize, t: Transmit) {
        let now = self.now;
        match t {
            Transmit::Send { link, msg } => {
                let Some(&(j, lj)) = self.wires.get(&(i, link)) else {
                    return;
                };
                if self.cut.contains(&i) || self.cut.contains(&j) {
                    return;
                }
                self.log.push((i, j, msg.clone()));
                let _ = self.nodes[j].handle_message(now, lj, msg);
            }
            Transmit::Dial { node: n, addr } => {
                let j = self.index(n);
                assert_eq!(addr, control(j));
                if self.cut.contains(&i) || self.cut.contains(&j) {
                    self.nodes[i].handle_dial_failed(now, n);
                    return;
                }
                let li = self.nodes[i].handle_connected(now, addr, Some(n));
                let lj = self.nodes[j].handle_connected(now, control(i), None);
                self.wires.insert((i, li), (j, lj));
                self.wires.insert((j, lj), (i, li));
            }
            Transmit::Close { link } => {
                let Some((j, lj)) = self.wires.remove(&(i, link)) else {
                    return;
                };
                self.wires.remove(&(j, lj));
                // A cut-off side does not see the FIN.
                if !self.cut.contains(&i) && !self.cut.contains(&j) {
                    self.nodes[j].handle_closed(now, lj);
                }
            }
        }
    }

    /// Moves the clock by `d`, firing every timeout on the way.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.settle();
            let next = self.nodes.iter().filter_map(Membership::poll_timeout).min();
            match next {
                Some(t) if t <= end => {
                    assert!(t >= self.now, "a timeout in the past");
                    self.now = t;
                    for m in &mut self.nodes {
                        if m.poll_timeout().is_some_and(|x| x <= t) {
                            m.handle_timeout(t);
                            assert!(m.poll_timeout().is_none_or(|x| x > t), "busy timeout");
                        }
                    }
                }
                _ => break,
            }
        }
        self.now = end;
        self.settle();
    }

    fn check_one_link_per_pair(&self) {
        for (i, m) in self.nodes.iter().enumerate() {
            let ups: Vec<NodeAddr> = m.up_peers().collect();
            let distinct: BTreeSet<_> = ups.iter().collect();
            assert_eq!(ups.len(), distinct.len(), "node {i}: two links to one peer");
        }
    }

    fn take_events(&mut self, i: usize) -> Vec<Event> {
        std::mem::take(&mut self.events[i])
    }

    /// Simulates a crash: node `i` loses every link (the others see a FIN
    /// only if `fin`) and comes back with incarnation `incarnation`.
    fn restart(&mut self, i: usize, incarnation: u64, fin: bool) {
        let mine: Vec<_> = self
            .wires
            .keys()
            .filter(|(a, _)| *a == i)
            .copied()
            .collect();
        for k in mine {
            if let Some((j, lj)) = self.wires.remove(&k) {
                self.wires.remove(&(j, lj));
                if fin {
                    self.nodes[j].handle_closed(self.now, lj);
                }
            }
        }
        self.nodes[i] = Membership::new(config(i, incarnation));
        self.list_all(i);
        self.events[i].clear();
    }
}

fn ups(events: &[Event]) -> Vec<(NodeAddr, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PeerUp {
                peer, restarted, ..
            } => Some((*peer, *restarted)),
            _ => None,
        })
        .collect()
}

fn downs(events: &[Event]) -> Vec<(NodeAddr, DownReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PeerDown { peer, reason } => Some((*peer, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_lower_address_dials_and_both_sides_come_up_after_hello() {
    let mut net = Net::new(2);
    net.settle();
    // One link each side, both up, the lower side dialed.
    assert_eq!(net.nodes[0].link_count(), 1);
    assert_eq!(net.nodes[1].link_count(), 1);
    let l0 = net
        .wires
        .keys()
        .find(|(n, _)| *n == 0)
        .map(|(_, l)| *l)
        .unwrap();
    assert_eq!(net.nodes[0].link_remote(l0), Some(control(1)));
    assert_eq!(net.nodes[0].link_peer(l0), Some(node(1)));
    assert_eq!(ups(&net.events[0]), vec![(node(1), false)]);
    assert_eq!(ups(&net.events[1]), vec![(node(0), false)]);
    assert_eq!(net.nodes[0].state(node(1)), Some(NodeState::Up));
    assert_eq!(
        net.nodes[1].delivery_addr(node(0)),
        Some(SocketAddr::new(node(0).0, 7402))
    );
    // Each side said Hello first, then Sync.
    let from0: Vec<_> = net.log.iter().filter(|(f, _, _)| *f == 0).collect();
    assert!(matches!(
        from0[0].2,
        PeerMessage::Hello {
            incarnation: 100,
            ..
        }
    ));
    assert!(matches!(from0[1].2, PeerMessage::Sync { .. }));
    let summary = net.nodes[1].summaries(net.now);
    assert_eq!(summary[0].source, "list");
    assert_eq!(summary[0].name, "h0");
}

#[test]
fn ops_replicated_before_the_sync_is_built_reach_the_peer_after_it() {
    let mut net = Net::new(2);
    net.auto[0] = false; // node 0's runtime is slow to build its Sync
    net.settle();
    let link = net.events[0]
        .iter()
        .find_map(|e| match e {
            Event::PeerUp { link, .. } => Some(*link),
            _ => None,
        })
        .unwrap();
    // The peer already counts: the op waits for it.
    let id = net.nodes[0].begin_replication(net.now, op("/a")).unwrap();
    net.settle();
    assert!(!net
        .log
        .iter()
        .any(|(f, _, m)| *f == 0 && matches!(m, PeerMessage::Op { .. })));
    assert!(net.nodes[0].send_sync(link, vec![op("/in-sync")]));
    assert!(!net.nodes[0].send_sync(link, vec![]), "one Sync per link");
    net.settle();
    let from0: Vec<&PeerMessage> = net
        .log
        .iter()
        .filter(|(f, _, _)| *f == 0)
        .map(|(_, _, m)| m)
        .collect();
    assert!(matches!(from0[1], PeerMessage::Sync { ops } if ops == &vec![op("/in-sync")]));
    assert!(matches!(from0[2], PeerMessage::Op { id: i, .. } if *i == id.0));
    // Node 1 was told to merge the Sync, then to apply the Op.
    let seen: Vec<_> = net.events[1]
        .iter()
        .filter(|e| matches!(e, Event::Sync { .. } | Event::Op { .. }))
        .collect();
    assert!(matches!(seen[0], Event::Sync { peer, .. } if *peer == node(0)));
    assert!(matches!(seen[1], Event::Op { .. }));
    assert!(net.events[0].contains(&Event::Replicated { id }));
}

#[test]
fn an_idle_link_carries_heartbeats_and_stays_up() {
    let mut net = Net::new(2);
    net.settle();
    net.log.clear();
    net.advance(LEASE * 5);
    let beats = net
        .log
        .iter()
        .filter(|(_, _, m)| *m == PeerMessage::Heartbeat)
        .count();
    // A heartbeat every sixth of the lease (at least 20 ms), each way.
    assert!(beats >= 2 * 5 * 5, "{beats} heartbeats");
    assert!(downs(&net.events[0]).is_empty());
    assert_eq!(net.nodes[0].stats().leases_expired, 0);
}

#[test]
fn a_silent_peer_dies_after_its_lease_and_is_resynchronised_when_it_returns() {
    let mut net = Net::new(3);
    net.settle();
    net.take_events(0);
    net.cut.insert(2);
    net.advance(LEASE - Duration::from_millis(50));
    assert!(downs(&net.events[0]).is_empty(), "down before the lease");
    net.advance(Duration::from_millis(100));
    assert_eq!(
        downs(&net.events[0]),
        vec![(node(2), DownReason::LeaseExpired)]
    );
    assert_eq!(downs(&net.events[2]).len(), 2, "node 2 lost both peers");
    assert_eq!(net.nodes[0].state(node(2)), Some(NodeState::Dead));
    assert_eq!(net.nodes[0].delivery_addr(node(2)), None);
    assert_eq!(net.nodes[0].stats().leases_expired, 1);
    // Nodes 0 and 1 carry on.
    assert_eq!(net.nodes[0].up_peers().collect::<Vec<_>>(), vec![node(1)]);

    net.take_events(0);
    net.cut.clear();
    net.advance(Duration::from_millis(200));
    // Node 0 (lower) redialed; the same incarnation is no restart; Syncs
    // went both ways again.
    assert_eq!(ups(&net.events[0]), vec![(node(2), false)]);
    assert_eq!(net.nodes[2].up_peers().count(), 2);
    assert!(net.events[0]
        .iter()
        .any(|e| matches!(e, Event::Sync { peer, .. } if *peer == node(2))));
}

#[test]
fn a_restarted_dialer_is_a_new_incarnation_and_replaces_its_old_link() {
    let mut net = Net::new(2);
    net.settle();
    net.take_events(1);
    // Node 0 (the dialer) crashes without a FIN and starts again.
    net.restart(0, 200, false);
    net.settle();
    // Node 1 had the old link still up: the old life goes down (rights
    // dropped), the new one comes up flagged as a restart.
    let e = &net.events[1];
    assert_eq!(downs(e), vec![(node(0), DownReason::Restarted)]);
    assert_eq!(ups(e), vec![(node(0), true)]);
    let down = e.iter().position(|e| matches!(e, Event::PeerDown { .. }));
    let up = e.iter().position(|e| matches!(e, Event::PeerUp { .. }));
    assert!(down < up);
    assert_eq!(net.nodes[1].link_count(), 1);
    assert_eq!(net.nodes[0].up_peers().count(), 1);
}

#[test]
fn a_beacon_with_a_new_incarnation_ends_the_old_life_of_a_peer_we_dial() {
    let mut net = Net::new(2);
    net.settle();
    net.take_events(0);
    // Node 1 (accepting side) restarts without a FIN: node 0 would keep
    // the dead link until its lease; the beacon tells it sooner.
    net.restart(1, 300, false);
    let beacon = Beacon {
        node: node(1),
        name: "h1".into(),
        incarnation: 300,
        control_port: 7401,
        delivery_port: 7402,
    };
    net.nodes[0].handle_beacon(net.now, control(1), &beacon);
    net.settle();
    assert_eq!(
        downs(&net.events[0]),
        vec![(node(1), DownReason::Restarted)]
    );
    assert_eq!(ups(&net.events[0]), vec![(node(1), true)]);
    // An old beacon (smaller incarnation) changes nothing.
    net.take_events(0);
    net.nodes[0].handle_beacon(
        net.now,
        control(1),
        &Beacon {
            incarnation: 100,
            ..beacon
        },
    );
    net.settle();
    assert!(downs(&net.events[0]).is_empty());
}

#[test]
fn replication_completes_when_every_live_peer_applied_the_op() {
    let mut net = Net::new(3);
    net.settle();
    assert_eq!(
        net.nodes[0]
            .begin_replication(net.now, op("/x"))
            .map(|_| ()),
        Some(())
    );
    assert_eq!(net.nodes[0].pending_replications(), 1);
    net.settle();
    let done: Vec<_> = net.events[0]
        .iter()
        .filter(|e| matches!(e, Event::Replicated { .. }))
        .collect();
    assert_eq!(done.len(), 1);
    assert_eq!(net.nodes[0].pending_replications(), 0);
    // Both peers were told to apply it.
    for i in [1, 2] {
        assert!(net.events[i]
            .iter()
            .any(|e| matches!(e, Event::Op { op: o, .. } if *o == op("/x"))));
    }
    // Alone, nothing to wait for.
    let mut alone = Membership::new(config(0, 1));
    assert_eq!(alone.begin_replication(net.now, op("/x")), None);
}

#[test]
fn replication_times_out_naming_the_peer_that_did_not_apply() {
    let mut net = Net::new(3);
    net.settle();
    net.auto[2] = false; // node 2 never acknowledges
    let id = net.nodes[0].begin_replication(net.now, op("/x")).unwrap();
    net.advance(APPLY - Duration::from_millis(1));
    assert!(!net.events[0]
        .iter()
        .any(|e| matches!(e, Event::ReplicationTimedOut { .. })));
    net.advance(Duration::from_millis(1));
    assert!(net.events[0].contains(&Event::ReplicationTimedOut {
        id,
        missing: vec![node(2)],
    }));
    // A late Applied is counted, not an error.
    let link = net
        .wires
        .iter()
        .find(|((a, _), (b, _))| *a == 2 && *b == 0)
        .map(|((_, l), _)| *l)
        .unwrap();
    net.nodes[2].acknowledge(link, id.0);
    net.settle();
    assert_eq!(net.nodes[0].stats().stray_acks, 1);
    assert_eq!(net.nodes[0].stats().rejected, 0);
}

#[test]
fn a_peer_that_goes_down_releases_the_ops_waiting_for_it() {
    let mut net = Net::new(3);
    net.settle();
    net.auto[2] = false;
    let id = net.nodes[0].begin_replication(net.now, op("/x")).unwrap();
    net.settle();
    assert!(!net.events[0].contains(&Event::Replicated { id }));
    // Node 2 crashes; its FIN reaches node 0.
    net.restart(2, 999, true);
    net.auto[2] = true;
    net.settle();
    assert!(net.events[0].contains(&Event::Replicated { id }));
    assert!(!net.events[0]
        .iter()
        .any(|e| matches!(e, Event::ReplicationTimedOut { .. })));
}
