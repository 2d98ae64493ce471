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

/// A lone core with one inbound link, for refusals.
fn lone(listed_only: bool) -> (Membership, LinkId, Instant) {
    let now = Instant::now();
    let mut c = config(1, 5);
    c.listed_only = listed_only;
    let mut m = Membership::new(c);
    let d = SocketAddr::new(node(0).0, 7402);
    m.add_node(now, node(0), "h0", control(0), d, Source::List);
    let link = m.handle_connected(now, control(0), None);
    while m.poll_transmit(now).is_some() {}
    while m.poll_event().is_some() {}
    (m, link, now)
}

fn hello(i: usize, incarnation: u64) -> PeerMessage {
    PeerMessage::Hello {
        node: node(i),
        name: format!("h{i}"),
        incarnation,
        delivery_port: 7402,
    }
}

fn closes(m: &mut Membership, now: Instant, link: LinkId) -> bool {
    let mut closed = false;
    while let Some(t) = m.poll_transmit(now) {
        closed |= t == Transmit::Close { link };
    }
    closed
}

#[test]
fn a_hello_from_a_node_off_the_list_is_refused_and_counted() {
    let (mut m, link, now) = lone(true);
    let r = m.handle_message(now, link, hello(7, 1));
    assert_eq!(r, Err(MembershipError::NotListed(node(7))));
    assert_eq!(m.stats().rejected, 1);
    assert!(closes(&mut m, now, link));
    assert_eq!(m.link_count(), 0);
    // Later input on the closed link is refused too.
    assert_eq!(
        m.handle_message(now, link, PeerMessage::Heartbeat),
        Err(MembershipError::UnknownLink(link))
    );
    // Without a list, a stranger is admitted (and learnt of).
    let (mut open, link, now) = lone(false);
    assert_eq!(open.handle_message(now, link, hello(7, 1)), Ok(()));
    assert_eq!(open.state(node(7)), Some(NodeState::Up));
    assert_eq!(open.summaries(now)[1].source, "inbound");
    // Beacons of unlisted nodes are ignored when only listed ones count.
    let (mut m, _, now) = lone(true);
    let b = Beacon {
        node: node(9),
        name: "x".into(),
        incarnation: 1,
        control_port: 1,
        delivery_port: 2,
    };
    m.handle_beacon(now, control(9), &b);
    assert_eq!(m.state(node(9)), None);
    assert_eq!(m.stats().ignored_beacons, 1);
}

#[test]
fn messages_before_hello_and_a_second_hello_close_the_link() {
    let (mut m, link, now) = lone(false);
    let r = m.handle_message(
        now,
        link,
        PeerMessage::Op {
            id: 1,
            op: op("/x"),
        },
    );
    assert_eq!(r, Err(MembershipError::BeforeHello("Op")));
    assert!(closes(&mut m, now, link));
    assert!(m.poll_event().is_none(), "nothing to apply from a stranger");

    let (mut m, link, now) = lone(false);
    m.handle_message(now, link, hello(0, 5)).unwrap();
    let r = m.handle_message(now, link, hello(0, 5));
    assert_eq!(r, Err(MembershipError::SecondHello));
    assert!(closes(&mut m, now, link));
    let events: Vec<_> = std::iter::from_fn(|| m.poll_event()).collect();
    assert!(events.contains(&Event::PeerDown {
        peer: node(0),
        reason: DownReason::Protocol(MembershipError::SecondHello),
    }));
    assert_eq!(m.stats().rejected, 1);

    let (mut m, link, now) = lone(false);
    let r = m.handle_message(now, link, hello(1, 5));
    assert_eq!(r, Err(MembershipError::OwnAddress(node(1))));
}

#[test]
fn a_second_link_of_the_same_life_and_a_stale_one_are_refused() {
    let (mut m, link, now) = lone(false);
    m.handle_message(now, link, hello(0, 5)).unwrap();
    let second = m.handle_connected(now, control(0), None);
    assert_eq!(
        m.handle_message(now, second, hello(0, 5)),
        Err(MembershipError::DuplicateLink(node(0)))
    );
    let third = m.handle_connected(now, control(0), None);
    assert_eq!(
        m.handle_message(now, third, hello(0, 4)),
        Err(MembershipError::StaleIncarnation {
            node: node(0),
            known: 5,
            offered: 4
        })
    );
    // The first link is untouched.
    assert_eq!(m.link_peer(link), Some(node(0)));
    assert_eq!(m.link_count(), 1);
    assert_eq!(m.stats().rejected, 2);
}

#[test]
fn a_new_link_that_never_says_hello_is_closed_after_the_lease() {
    let (mut m, link, now) = lone(false);
    assert_eq!(m.poll_timeout(), Some(now + LEASE));
    m.handle_timeout(now + LEASE);
    assert!(closes(&mut m, now + LEASE, link));
    assert_eq!(m.stats().rejected, 1);
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn pulls_go_to_every_up_peer_and_answers_come_back_as_events() {
    let mut net = Net::new(3);
    net.settle();
    let name = TagName::new("/h").unwrap();
    let asked = net.nodes[0].pull(7, &name, HistoryQuery::Last(3));
    assert_eq!(asked.len(), 2);
    net.settle();
    for i in [1, 2] {
        let (link, id) = net.events[i]
            .iter()
            .find_map(|e| match e {
                Event::Pull {
                    link, id, query, ..
                } => {
                    assert_eq!(*query, HistoryQuery::Last(3));
                    Some((*link, *id))
                }
                _ => None,
            })
            .unwrap();
        let answer = (i == 2).then(|| (1, vec![1, 2, 3]));
        net.nodes[i].answer_pull(link, id, answer);
    }
    net.settle();
    let answers: Vec<_> = net.events[0]
        .iter()
        .filter_map(|e| match e {
            Event::Pulled {
                peer,
                id: 7,
                answer,
            } => Some((*peer, answer.clone())),
            _ => None,
        })
        .collect();
    assert!(answers.contains(&(node(1), None)));
    assert!(answers.contains(&(node(2), Some((1, vec![1, 2, 3])))));
}

#[test]
fn a_failed_dial_is_retried_after_the_redial_delay() {
    let mut net = Net::new(2);
    net.cut.insert(1);
    net.settle();
    assert_eq!(net.nodes[0].link_count(), 0);
    let redial = net.nodes[0].config().redial;
    assert_eq!(net.nodes[0].poll_timeout(), Some(net.now + redial));
    net.cut.clear();
    net.advance(redial);
    assert_eq!(net.nodes[0].up_peers().count(), 1);
}

/// One input to a lone core, for the property test.
#[derive(Debug, Clone)]
enum Input {
    Connect {
        from: usize,
        dialed: bool,
    },
    Message {
        link: u64,
        msg: u8,
        from: usize,
        incarnation: u64,
    },
    Close {
        link: u64,
    },
    Beacon {
        from: usize,
        incarnation: u64,
    },
    Wait {
        ms: u64,
    },
    Replicate,
    Sync {
        link: u64,
    },
    DialFailed {
        from: usize,
    },
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        (0..4usize, any::<bool>()).prop_map(|(from, dialed)| Input::Connect { from, dialed }),
        (1..8u64, 0..7u8, 0..4usize, 1..4u64).prop_map(|(link, msg, from, incarnation)| {
            Input::Message {
                link,
                msg,
                from,
                incarnation,
            }
        }),
        (1..8u64).prop_map(|link| Input::Close { link }),
        (0..4usize, 1..4u64).prop_map(|(from, incarnation)| Input::Beacon { from, incarnation }),
        (0..800u64).prop_map(|ms| Input::Wait { ms }),
        Just(Input::Replicate),
        (1..8u64).prop_map(|link| Input::Sync { link }),
        (0..4usize).prop_map(|from| Input::DialFailed { from }),
    ]
}

fn message(kind: u8, from: usize, incarnation: u64) -> PeerMessage {
    match kind {
        0 => hello(from, incarnation),
        1 => PeerMessage::Heartbeat,
        2 => PeerMessage::Sync {
            ops: vec![op("/s")],
        },
        3 => PeerMessage::Op {
            id: incarnation,
            op: op("/o"),
        },
        4 => PeerMessage::Applied { id: incarnation },
        5 => PeerMessage::Pull {
            id: 1,
            name: TagName::new("/p").unwrap(),
            query: HistoryQuery::Last(1),
        },
        _ => PeerMessage::Pulled {
            id: 1,
            found: true,
            count: 0,
            records: vec![],
        },
    }
}

proptest! {
    #[test]
    fn random_input_never_panics_leaves_one_link_per_peer_and_no_past_timeout(
        listed_only in any::<bool>(),
        inputs in proptest::collection::vec(input(), 0..120),
    ) {
        let mut now = Instant::now();
        let mut c = config(1, 2);
        c.listed_only = listed_only;
        let mut m = Membership::new(c);
        m.add_node(now, node(0), "h0", control(0), SocketAddr::new(node(0).0, 7402), Source::List);
        m.add_node(now, node(2), "h2", control(2), SocketAddr::new(node(2).0, 7402), Source::List);
        for i in inputs {
            match i {
                Input::Connect { from, dialed } => {
                    let _ = m.handle_connected(now, control(from), dialed.then(|| node(from)));
                }
                Input::Message { link, msg, from, incarnation } => {
                    let _ = m.handle_message(now, LinkId(link), message(msg, from, incarnation));
                }
                Input::Close { link } => m.handle_closed(now, LinkId(link)),
                Input::Beacon { from, incarnation } => {
                    let b = Beacon {
                        node: node(from),
                        name: String::new(),
                        incarnation,
                        control_port: 7401,
                        delivery_port: 7402,
                    };
                    m.handle_beacon(now, control(from), &b);
                }
                Input::Wait { ms } => {
                    now += Duration::from_millis(ms);
                    if m.poll_timeout().is_some_and(|t| t <= now) {
                        m.handle_timeout(now);
                    }
                    prop_assert!(m.poll_timeout().is_none_or(|t| t > now), "timeout not consumed");
                }
                Input::Replicate => {
                    let id = m.begin_replication(now, op("/r"));
                    prop_assert_eq!(id.is_some(), m.up_peers().next().is_some());
                }
                Input::Sync { link } => {
                    let _ = m.send_sync(LinkId(link), vec![]);
                }
                Input::DialFailed { from } => m.handle_dial_failed(now, node(from)),
            }
            while m.poll_transmit(now).is_some() {}
            while m.poll_event().is_some() {}
            let ups: Vec<NodeAddr> = m.up_peers().collect();
            let distinct: BTreeSet<_> = ups.iter().collect();
            prop_assert_eq!(ups.len(), distinct.len(), "two links to one peer");
            prop_assert!(!ups.contains(&node(1)), "a link to ourselves");
            for p in &ups {
                prop_assert_eq!(m.state(*p), Some(NodeState::Up));
            }
            if listed_only {
                prop_assert!(ups.iter().all(|p| *p == node(0) || *p == node(2)));
            }
        }
    }
}

#[test]
fn a_peer_killed_with_a_fin_goes_down_at_once_and_returns_as_a_restart() {
    let mut net = Net::new(2);
    net.settle();
    net.take_events(0);
    // Node 1 (accepting side) is killed; the kernel's FIN reaches node 0.
    net.restart(1, 400, true);
    net.settle();
    assert_eq!(
        downs(&net.events[0]),
        vec![(node(1), DownReason::LinkClosed)]
    );
    assert_eq!(net.nodes[0].state(node(1)), Some(NodeState::Dead));
    // Node 0 redials after the redial delay and meets the new life.
    let redial = net.nodes[0].config().redial;
    net.advance(redial);
    assert_eq!(ups(&net.events[0]), vec![(node(1), true)]);
    assert!(net.events[0]
        .iter()
        .any(|e| matches!(e, Event::Sync { peer, .. } if *peer == node(1))));
}
