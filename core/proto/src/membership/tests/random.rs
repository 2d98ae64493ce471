//! Random inputs to a lone core: no panic, one link per peer, no timeout in the past.

use super::refusals::hello;
use super::*;

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
        (1..8u64, 0..9u8, 0..4usize, 1..4u64).prop_map(|(link, msg, from, incarnation)| {
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
        6 => PeerMessage::Pulled {
            id: 1,
            found: true,
            count: 0,
            records: vec![],
        },
        7 => PeerMessage::SetQos {
            id: 1,
            name: TagName::new("/q").unwrap(),
            change: QosChange::default(),
        },
        _ => PeerMessage::QosSet {
            id: 1,
            outcome: Ok(vec![]),
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
