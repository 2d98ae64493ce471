//! A lone core refusing what a peer must not do.

use super::*;

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

pub(super) fn hello(i: usize, incarnation: u64) -> PeerMessage {
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
fn a_qos_change_goes_to_the_named_peer_only_and_its_answer_comes_back() {
    let mut net = Net::new(3);
    net.settle();
    let name = TagName::new("/q").unwrap();
    let change = QosChange {
        publishers: false,
        pid: Some(tagwire_wire::Pid(42)),
        priority: Some(tagwire_wire::Priority::Critical),
        sched: None,
        pacing: None,
    };
    assert!(net.nodes[0].set_qos(node(2), 9, &name, change));
    // A node with no link up is not asked.
    assert!(!net.nodes[0].set_qos(node(7), 10, &name, change));
    net.settle();
    let asked = |e: &Event| matches!(e, Event::SetQos { .. });
    assert!(!net.events[1].iter().any(asked));
    let (link, id) = net.events[2]
        .iter()
        .find_map(|e| match e {
            Event::SetQos {
                link,
                id,
                name: n,
                change: c,
                ..
            } => {
                assert_eq!((n, c), (&name, &change));
                Some((*link, *id))
            }
            _ => None,
        })
        .unwrap();
    let refused = (ErrorCode::Denied, "no".to_owned());
    net.nodes[2].answer_set_qos(link, id, Err(refused.clone()));
    net.settle();
    assert!(net.events[0].iter().any(|e| matches!(
        e,
        Event::QosSet { peer, id: 9, outcome } if *peer == node(2) && *outcome == Err(refused.clone())
    )));
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
