//! Sessions wired back to back on a virtual clock: what crosses a host
//! boundary, without a host.

mod net;

use std::time::Duration;

use net::*;
use proptest::prelude::*;
use tagwire_session::{
    Carrier, Class, Config, Dest, Event, Mode, ReceiveEvent, SendEvent, TicketOutcome,
};
use tagwire_wire::datagram::{push_batch_entry, BatchRepr, FLAG_DIRECT, FLAG_RELIABLE};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn two(mode: Mode, link: Link, seed: u64) -> Net {
    let mut n = Net::new(2, link, seed, |_| Config::default());
    let now = n.now;
    n.nodes[0]
        .session
        .set_routes(now, &tag(), vec![dest(1, mode)]);
    n
}

fn delivered(n: usize) -> impl Fn(&Net) -> bool {
    move |net: &Net| net.nodes[1].delivered.len() >= n
}

#[test]
fn queued_small_messages_are_batched_and_a_lone_one_goes_at_once() {
    let mut net = two(Mode::Reliable, Link::default(), 1);
    net.publish(0, [1], |_| 10);
    net.step();
    // Handed in and flushed: out at once, before any timer.
    assert_eq!(net.count(0, Class::Data, net.t0), 1);
    net.publish(0, 2..=201, |_| 10);
    assert!(net.run_until(secs(1), delivered(201)));
    let data = net.count(0, Class::Data, net.t0);
    // 200 messages of 10 bytes: 54 bytes each in a 1472-byte batch.
    assert!(
        data <= 1 + 200usize.div_ceil(1472 / 54) + 1,
        "{data} datagrams"
    );
    check_delivered(&net.nodes[1], 0, &(1..=201).collect::<Vec<_>>(), |_| 10);
}

#[test]
fn messages_of_1_byte_to_1_mib_arrive_whole_and_in_order() {
    let sizes = [
        1,
        100,
        1400,
        1500,
        16 << 10,
        60 << 10,
        61 << 10,
        200 << 10,
        1 << 20,
    ];
    let len = move |seq: u64| sizes[seq as usize - 1];
    for mode in [Mode::Reliable, Mode::BestEffort, Mode::Tcp] {
        let mut net = two(mode, Link::default(), 2);
        net.publish(0, 1..=sizes.len() as u64, len);
        assert!(net.run_until(secs(5), delivered(sizes.len())), "{mode:?}");
        check_delivered(
            &net.nodes[1],
            0,
            &(1..=sizes.len() as u64).collect::<Vec<_>>(),
            len,
        );
        let carrier = net.nodes[0].sent[0].1.carrier;
        let want = if mode == Mode::Tcp {
            Carrier::Tcp
        } else {
            Carrier::Udp
        };
        assert_eq!(carrier, want);
    }
}

#[test]
fn reliable_delivery_survives_loss_duplication_and_reordering() {
    let link = Link {
        loss: 100,
        duplicate: 50,
        jitter: Duration::from_micros(500),
        ..Link::default()
    };
    let mut net = two(Mode::Reliable, link, 3);
    let len = |seq: u64| {
        if seq % 50 == 0 {
            150_000
        } else {
            40 + seq as usize % 300
        }
    };
    net.publish(0, 1..=2000, len);
    assert!(net.run_until(secs(60), delivered(2000)));
    check_delivered(&net.nodes[1], 0, &(1..=2000).collect::<Vec<_>>(), len);
    assert!(net.dropped > 0);
    assert!(net.count(0, Class::Resend, net.t0) > 0);
}

#[test]
fn best_effort_delivers_newer_only_and_counts_every_gap() {
    let link = Link {
        loss: 200,
        ..Link::default()
    };
    let mut net = two(Mode::BestEffort, link, 4);
    // One message per datagram: fed one at a time, each flushed alone.
    for seq in 1..=500 {
        net.publish(0, [seq], |_| 20);
        net.run_until(Duration::from_millis(1), |_| false);
    }
    net.run_until(secs(1), |_| false);
    let n = &net.nodes[1];
    let seqs: Vec<u64> = n.delivered.iter().map(|d| d.header.seq.0).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let lost: u64 = n
        .events
        .iter()
        .map(|e| match e {
            Event::Receive(ReceiveEvent::BestEffortLost { count, .. }) => *count,
            _ => 0,
        })
        .sum();
    let (first, last) = (seqs[0], *seqs.last().unwrap());
    assert!(lost > 0);
    assert_eq!(seqs.len() as u64 + lost, last - first + 1, "a silent loss");
    assert_eq!(net.count(0, Class::Resend, net.t0), 0, "never resent");
}

#[test]
fn a_scaled_route_gets_every_nth_sample_and_counts_the_rest() {
    let mut net = Net::new(2, Link::default(), 5, |_| Config::default());
    net.nodes[0].session.set_routes(
        net.now,
        &tag(),
        vec![Dest {
            every: 3,
            ..dest(1, Mode::Reliable)
        }],
    );
    net.publish(0, 1..=30, |_| 8);
    net.run_until(secs(1), |_| false);
    check_delivered(
        &net.nodes[1],
        0,
        &(1..=10).map(|i| i * 3).collect::<Vec<_>>(),
        |_| 8,
    );
    let scaled: u64 = net.nodes[0]
        .events
        .iter()
        .map(|e| match e {
            Event::Send(SendEvent::ScaledOut { count, .. }) => *count,
            _ => 0,
        })
        .sum();
    assert_eq!(scaled, 20);
}

#[test]
fn a_proxy_node_relays_every_nth_sample_of_others_but_not_their_own() {
    // 0 publishes and feeds the proxy 1, which relays every 2nd sample to 2;
    // 2 publishes too, and feeds 1, which must not send 2's samples back.
    let mut net = Net::new(3, Link::default(), 6, |_| Config::default());
    net.nodes[0]
        .session
        .set_routes(net.now, &tag(), vec![dest(1, Mode::Reliable)]);
    net.nodes[2]
        .session
        .set_routes(net.now, &tag(), vec![dest(1, Mode::Reliable)]);
    net.nodes[1].session.set_routes(
        net.now,
        &tag(),
        vec![Dest {
            every: 2,
            relay: true,
            ..dest(2, Mode::Reliable)
        }],
    );
    net.nodes[1].reflect = true;
    net.publish(0, 1..=20, |_| 16);
    net.publish(2, 1..=20, |_| 16);
    net.run_until(secs(1), |_| false);
    check_delivered(&net.nodes[1], 0, &(1..=20).collect::<Vec<_>>(), |_| 16);
    check_delivered(&net.nodes[1], 2, &(1..=20).collect::<Vec<_>>(), |_| 16);
    check_delivered(
        &net.nodes[2],
        0,
        &(1..=10).map(|i| i * 2).collect::<Vec<_>>(),
        |_| 16,
    );
    check_delivered(&net.nodes[2], 2, &[], |_| 16);
}

#[test]
fn multicast_goes_to_the_tags_group_once_for_all_nodes() {
    let mut net = Net::new(3, Link::default(), 7, |_| Config::default());
    net.nodes[0].session.set_routes(
        net.now,
        &tag(),
        vec![dest(1, Mode::Multicast), dest(2, Mode::Multicast)],
    );
    net.publish(0, 1..=5, |_| 30);
    net.run_until(secs(1), |_| false);
    let sent: Vec<_> = net.nodes[0].sent.iter().map(|(_, t)| t).collect();
    assert!(!sent.is_empty());
    for t in &sent {
        assert_eq!(t.carrier, Carrier::Multicast);
        assert_eq!(t.dest.port(), MCAST_PORT);
        assert_eq!(t.dest.ip(), tagwire_wire::datagram::tag_group(&tag()));
    }
    for i in [1, 2] {
        check_delivered(&net.nodes[i], 0, &(1..=5).collect::<Vec<_>>(), |_| 30);
    }
}

#[test]
fn a_receiver_without_credit_holds_the_sender_which_resends_nothing_and_resumes() {
    // Before the first acknowledgement the sender knows no credit: a ring's
    // worth (`max_unacked_messages`, the receiver's room too) bounds it.
    let mut net = Net::new(2, Link::default(), 8, |_| Config {
        max_unacked_messages: 40,
        ..Config::default()
    });
    let t = tag();
    net.nodes[0]
        .session
        .set_routes(net.now, &t, vec![dest(1, Mode::Reliable)]);
    // The receiver can take 40 messages, then its subscriber stops reading.
    net.nodes[1].lossless = Some((0, 40));
    net.publish(0, 1..=500, |_| 100);
    net.run_until(Duration::from_millis(100), |_| false);
    let at_stall = net.nodes[1].delivered.len();
    assert!(
        (40..=53).contains(&at_stall),
        "{at_stall} delivered on 40 credit"
    );
    // Two seconds without room: the sender sends no data, resends nothing,
    // only probes.
    let since = net.now;
    net.run_until(secs(2), |_| false);
    assert_eq!(net.nodes[1].delivered.len(), at_stall);
    assert_eq!(net.count(0, Class::Data, since), 0);
    assert_eq!(net.count(0, Class::Resend, since), 0, "refused data resent");
    let probes = net.count(0, Class::Control, since);
    assert!((1..=100).contains(&probes), "{probes} probes in 2 s");
    assert!(
        !net.nodes[0].session.can_accept(&t),
        "the publisher is held"
    );
    // Room again: everything comes, in order, nothing refused on the way.
    net.nodes[1].lossless = None;
    net.nodes[1].session.set_credit(net.now, &t, None);
    assert!(net.run_until(secs(5), delivered(500)));
    check_delivered(&net.nodes[1], 0, &(1..=500).collect::<Vec<_>>(), |_| 100);
    let refused = net.nodes[1]
        .events
        .iter()
        .filter(|e| matches!(e, Event::Receive(ReceiveEvent::Refused { .. })))
        .count();
    // Only datagrams crossing the last credit in flight were refused, each
    // sent again once room came back.
    assert!(
        refused <= 4,
        "{refused} refused: the sender overran the credit"
    );
    assert!(net.count(0, Class::Resend, net.t0) <= refused);
}

#[test]
fn senders_on_two_nodes_share_the_credit_and_refused_data_comes_back_once() {
    let mut net = Net::new(3, Link::default(), 15, |_| Config {
        max_unacked_messages: 20,
        ..Config::default()
    });
    let t = tag();
    for i in [0, 2] {
        net.nodes[i]
            .session
            .set_routes(net.now, &t, vec![dest(1, Mode::Reliable)]);
    }
    const ROOM: u64 = 40;
    net.nodes[1].lossless = Some((0, ROOM));
    net.publish(0, 1..=400, |_| 64);
    net.publish(2, 1..=400, |_| 64);
    // The subscriber reads two messages a millisecond.
    while net.nodes[1].delivered.len() < 800 {
        assert!(net.now - net.t0 < secs(30), "stalled");
        net.run_until(Duration::from_millis(1), |_| false);
        let n = &mut net.nodes[1];
        if let Some((read, _)) = n.lossless.as_mut() {
            *read = (*read + 2).min(n.delivered.len() as u64);
        }
    }
    let most = net.nodes[1].most_unread;
    check_delivered(&net.nodes[1], 0, &(1..=400).collect::<Vec<_>>(), |_| 64);
    check_delivered(&net.nodes[1], 2, &(1..=400).collect::<Vec<_>>(), |_| 64);
    let refused = net.nodes[1]
        .events
        .iter()
        .filter(|e| matches!(e, Event::Receive(ReceiveEvent::Refused { .. })))
        .count();
    // Each sender gets half the room: what still races past it (the first
    // flight, before any credit is known, and credit crossing data in
    // flight) is refused and comes back about once, never as windows.
    // (Deterministic with this seed: 54 refused; 94 with the whole room
    // announced to both.)
    let resent = net.count(0, Class::Resend, net.t0) + net.count(2, Class::Resend, net.t0);
    assert!(refused <= 80, "{refused} refused of 800");
    assert!(
        resent <= 2 * refused,
        "{resent} resends for {refused} refused"
    );
    // The subscriber never has more than the room and the first flight
    // (two senders' unacknowledged bound) unread.
    assert!(
        most <= ROOM + 2 * 20,
        "{most} unread: the senders overran the room"
    );
}

#[test]
fn data_refused_at_zero_credit_is_not_resent_in_a_loop() {
    let mut net = two(Mode::Reliable, Link::default(), 9);
    let t = tag();
    net.publish(0, 1..=300, |_| 500);
    // Room goes to zero with the first datagrams in flight: they are
    // refused.
    net.step();
    net.nodes[1].session.set_credit(net.now, &t, Some(0));
    let since = net.now;
    net.run_until(secs(3), |_| false);
    let resent = net.count(0, Class::Resend, since);
    let refused = net.nodes[1]
        .events
        .iter()
        .filter(|e| matches!(e, Event::Receive(ReceiveEvent::Refused { .. })))
        .count();
    assert!(refused > 0);
    // The resend timer backs off (100 ms doubling to 1 s): a handful of
    // single datagrams, not a window every 100 ms.
    assert!(resent <= 8, "{resent} resends in 3 s at zero credit");
    net.nodes[1].session.set_credit(net.now, &t, Some(1000));
    assert!(net.run_until(secs(5), delivered(300)));
    check_delivered(&net.nodes[1], 0, &(1..=300).collect::<Vec<_>>(), |_| 500);
}

#[test]
fn a_record_its_publisher_sent_is_kept_for_resends_and_not_sent_again() {
    let mut net = two(Mode::Reliable, Link::default(), 10);
    let t = tag();
    net.publish(0, [1], |_| 10);
    assert!(net.run_until(secs(1), delivered(1)));
    let offer = net.nodes[0]
        .session
        .offer(net.now, &t, 6)
        .expect("an idle stream offers");
    assert_eq!(offer.dests.len(), 1);
    let d = offer.dests[0];
    assert_eq!((d.node, d.addr, d.seq), (node(1), addr(1), 2));
    // The publisher's own copy is lost on the way.
    let (h, p) = (header(0, 2), payload(2, 10));
    let mut entries = Vec::new();
    push_batch_entry(&mut entries, &h, &p);
    let mut bytes = Vec::new();
    BatchRepr {
        seq: d.seq,
        flags: FLAG_RELIABLE | FLAG_DIRECT,
        count: 1,
        tag: &t,
        entries: &entries,
    }
    .encode(d.stream, &mut bytes);
    assert!(bytes.len() <= offer.max_len);
    let since = net.now;
    net.nodes[0]
        .session
        .handle_direct_record(net.now, &t, &h, &p, TicketOutcome::Sent)
        .unwrap();
    net.step();
    assert_eq!(net.count(0, Class::Data, since), 0, "sent again");
    // The window repairs it: a heartbeat, a NACK, a resend.
    assert!(net.run_until(secs(1), delivered(2)));
    assert_eq!(net.count(0, Class::Resend, since), 1);
    // A copy the publisher did deliver is taken once.
    let offer = net.nodes[0].session.offer(net.now, &t, 6).unwrap();
    let d = offer.dests[0];
    let (h, p) = (header(0, 3), payload(3, 10));
    entries.clear();
    push_batch_entry(&mut entries, &h, &p);
    bytes.clear();
    BatchRepr {
        seq: d.seq,
        flags: FLAG_RELIABLE | FLAG_DIRECT,
        count: 1,
        tag: &t,
        entries: &entries,
    }
    .encode(d.stream, &mut bytes);
    let now = net.now;
    net.nodes[1].session.handle_datagram(now, addr(0), &bytes);
    net.nodes[0]
        .session
        .handle_direct_record(now, &t, &h, &p, TicketOutcome::Abandoned)
        .unwrap();
    net.publish(0, [4], |_| 10);
    assert!(net.run_until(secs(1), delivered(4)));
    check_delivered(&net.nodes[1], 0, &[1, 2, 3, 4], |_| 10);
    assert!(net.nodes[1]
        .events
        .iter()
        .any(|e| matches!(e, Event::Receive(ReceiveEvent::DirectReceived { .. }))));
}

#[test]
fn a_lone_message_above_the_batch_limit_is_still_offered_up_to_a_datagram() {
    let mut net = two(Mode::Reliable, Link::default(), 12);
    let t = tag();
    net.publish(0, [1], |_| 10);
    assert!(net.run_until(secs(1), delivered(1)));
    let offer = net.nodes[0].session.offer(net.now, &t, 6).unwrap();
    // The batch limit starts at one packet; a 4 KiB message would go out
    // whole from the forwarder all the same.
    let config = net.nodes[0].session.config().clone();
    assert!(config.batch.min < 4096);
    assert_eq!(offer.max_len, config.datagram);
}

#[test]
fn an_offered_record_that_never_comes_retires_its_streams() {
    let mut net = two(Mode::Reliable, Link::default(), 11);
    let t = tag();
    net.publish(0, [1], |_| 10);
    assert!(net.run_until(secs(1), delivered(1)));
    let offer = net.nodes[0].session.offer(net.now, &t, 6).unwrap();
    let now = net.now;
    net.nodes[0].session.abandon_offer(now, &t);
    assert!(net.nodes[0]
        .events
        .iter()
        .all(|e| !matches!(e, Event::Send(SendEvent::StreamClosed { .. }))));
    net.step();
    assert!(net.nodes[0].events.iter().any(
        |e| matches!(e, Event::Send(SendEvent::StreamClosed { stream, .. }) if *stream == offer.dests[0].stream)
    ));
    // The next record goes on a fresh stream, from its first number.
    net.publish(0, [3], |_| 10);
    assert!(net.run_until(secs(1), delivered(2)));
    check_delivered(&net.nodes[1], 0, &[1, 3], |_| 10);
    let stats = net.nodes[0].session.stream_stats();
    assert_eq!(stats.len(), 1);
    assert_ne!(stats[0].stream, offer.dests[0].stream);
    assert_eq!(stats[0].writer.sent, 1);
}

#[test]
fn a_route_change_ends_the_stream_and_what_waits_only_for_it() {
    let mut net = two(
        Mode::Reliable,
        Link {
            loss: 1000,
            ..Link::default()
        },
        12,
    );
    let t = tag();
    net.publish(0, 1..=5000, |_| 1000);
    net.run_until(Duration::from_millis(50), |_| false);
    assert!(!net.nodes[0].ring.is_empty(), "held by a dead receiver");
    net.nodes[0].session.set_routes(net.now, &t, vec![]);
    assert!(net.nodes[0].session.can_accept(&t));
    assert!(net.nodes[0].session.stream_stats().is_empty());
    assert_eq!(net.nodes[0].session.poll_timeout(), None, "no timers left");
}

#[test]
fn garbage_is_counted_as_malformed() {
    let mut net = two(Mode::Reliable, Link::default(), 13);
    let now = net.now;
    net.nodes[1]
        .session
        .handle_datagram(now, addr(0), b"not a datagram");
    net.step();
    assert_eq!(
        net.nodes[1].events,
        vec![Event::Receive(ReceiveEvent::Malformed { from: addr(0) })]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn reliable_streams_deliver_everything_once_in_order_over_any_lossy_link(
        seed in 1u64..u64::MAX,
        loss in 0u32..250,
        duplicate in 0u32..100,
        jitter_us in 0u64..2000,
        sizes in proptest::collection::vec(
            prop_oneof![4 => 0usize..2000, 1 => 2000usize..300_000], 1..150),
    ) {
        let link = Link {
            loss,
            duplicate,
            jitter: Duration::from_micros(jitter_us),
            ..Link::default()
        };
        let mut net = two(Mode::Reliable, link, seed);
        let n = sizes.len() as u64;
        let len = |seq: u64| sizes[seq as usize - 1];
        net.publish(0, 1..=n, len);
        prop_assert!(net.run_until(secs(300), delivered(n as usize)), "stalled");
        net.run_until(Duration::from_millis(300), |_| false);
        check_delivered(&net.nodes[1], 0, &(1..=n).collect::<Vec<_>>(), len);
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_session(bytes: Vec<u8>, port: u16) {
        let mut net = two(Mode::Reliable, Link::default(), 14);
        let now = net.now;
        let from = std::net::SocketAddr::new(ip(0), port);
        net.nodes[1].session.handle_datagram(now, from, &bytes);
        net.nodes[0].session.handle_datagram(now, from, &bytes);
        net.step();
    }
}

#[test]
fn a_stream_started_at_its_first_datagram_counts_nothing_before_it_lost() {
    // A TCP connection's session (`start_at_first`) meets a sender's
    // numbering mid-way, as after a reconnection: nothing before counts
    // lost; a datagram session counts every number it never saw.
    let now = std::time::Instant::now();
    let mut tx = tagwire_session::Session::new(Config {
        me: node(0),
        ..Config::default()
    });
    tx.set_routes(now, &tag(), vec![dest(1, Mode::BestEffort)]);
    let mut datagrams = Vec::new();
    for seq in 1..=60 {
        tx.handle_record(now, &tag(), &header(0, seq), &payload(seq, 10))
            .unwrap();
        tx.flush(now, &tag());
        while let Some(t) = tx.poll_transmit(now) {
            datagrams.push(t.bytes);
        }
    }
    assert_eq!(datagrams.len(), 60);
    for (at_first, lost) in [(true, 0), (false, 49)] {
        let mut rx = tagwire_session::Session::new(Config {
            me: node(1),
            start_at_first: at_first,
            ..Config::default()
        });
        for d in &datagrams[49..] {
            rx.handle_datagram(now, addr(0), d);
        }
        let mut counted = 0;
        while let Some(e) = rx.poll_event() {
            if let Event::Receive(ReceiveEvent::BestEffortLost { count, .. }) = e {
                counted += count;
            }
        }
        let mut got = 0;
        while rx.poll_deliver().is_some() {
            got += 1;
        }
        assert_eq!((got, counted), (11, lost), "start_at_first {at_first}");
    }
}
