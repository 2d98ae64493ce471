//! Whole participants in memory (virtual time, a lossy wire): they find
//! each other, match endpoints of one topic whose QoS fits (and say why
//! not otherwise), and a reliable writer's samples reach the reader whole
//! and in order; a participant that leaves is unmatched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use tagwire_rtps::participant::{Event, Participant, ParticipantConfig};
use tagwire_rtps::qos::{Mismatch, Qos, Reliability};
use tagwire_rtps::{EntityId, GuidPrefix, Locator, Message, Submessage};

fn participant(n: u8, now: Instant) -> (Participant, u32) {
    let port = 7410 + 2 * u16::from(n);
    let peer = |p: u16| Locator::udp_v4(Ipv4Addr::LOCALHOST, p);
    let cfg = ParticipantConfig {
        prefix: GuidPrefix([0x01, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, n]),
        domain: 0,
        unicast: vec![peer(port)],
        multicast: Vec::new(),
        peers: (0..8).map(|i| peer(7410 + 2 * i)).collect(),
        lease: Duration::from_secs(10),
        announce_every: Duration::from_secs(1),
        user_data: Vec::new(),
    };
    (Participant::new(cfg, now), u32::from(port))
}

/// Runs both for `span` of virtual time in 5 ms steps, delivering what each
/// sends to the other (by port); `drop` says which datagrams are lost.
fn run(
    parts: &mut [(Participant, u32); 2],
    now: &mut Instant,
    span: Duration,
    drop: &mut dyn FnMut(usize) -> bool,
) -> [Vec<Event>; 2] {
    run_with(parts, now, span, &mut |n, _, _| drop(n))
}

/// [`run`] whose `drop` also sees the sender (0 or 1) and the bytes.
fn run_with(
    parts: &mut [(Participant, u32); 2],
    now: &mut Instant,
    span: Duration,
    drop: &mut dyn FnMut(usize, usize, &[u8]) -> bool,
) -> [Vec<Event>; 2] {
    let mut events = [Vec::new(), Vec::new()];
    let end = *now + span;
    let mut n = 0;
    while *now < end {
        for i in 0..2 {
            parts[i].0.handle_timeout(*now);
            while let Some(t) = parts[i].0.poll_transmit() {
                n += 1;
                let j = 1 - i;
                if t.to.port == parts[j].1 && !drop(n, i, &t.bytes) {
                    parts[j].0.handle_datagram(*now, &t.bytes);
                }
            }
        }
        for (i, e) in events.iter_mut().enumerate() {
            e.extend(std::iter::from_fn(|| parts[i].0.poll_event()));
        }
        *now += Duration::from_millis(5);
    }
    events
}

fn qos(writer: bool, reliable: bool) -> Qos {
    let mut q = Qos::default_for(writer);
    q.reliability.0 = if reliable {
        Reliability::Reliable
    } else {
        Reliability::BestEffort
    };
    q
}

/// Sample `i` in CDR_LE: its number after the encapsulation header.
fn counted(i: u32) -> Vec<u8> {
    let mut payload = vec![0x00, 0x01, 0, 0];
    payload.extend_from_slice(&i.to_le_bytes());
    payload
}

/// The numbers of the samples reader `r` got, in the order it got them.
fn counts(events: &[Event], r: EntityId) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Sample { reader, change, .. } if *reader == r => {
                Some(u32::from_le_bytes(change.payload[4..8].try_into().unwrap()))
            }
            _ => None,
        })
        .collect()
}

/// One datagram in five lost, at random (`seed`): a fixed pattern such as
/// every fifth can line up with the protocols' periodic sends and lose
/// the same announcement every time.
fn one_in_five(seed: u64) -> impl FnMut(usize) -> bool {
    move |n: usize| {
        let mut x = (n as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 32;
        x % 5 == 0
    }
}

#[test]
fn a_reliable_writers_samples_reach_the_matched_reader_in_order_over_a_lossy_wire() {
    for seed in 1..=4 {
        samples_in_order_over_a_lossy_wire(seed);
    }
}

fn samples_in_order_over_a_lossy_wire(seed: u64) {
    let mut now = Instant::now();
    let mut parts = [participant(1, now), participant(2, now)];
    let w = parts[0]
        .0
        .add_writer(
            now,
            "rt/chatter",
            "std_msgs::msg::dds_::String_",
            false,
            qos(true, true),
        )
        .unwrap();
    let r = parts[1]
        .0
        .add_reader(
            now,
            "rt/chatter",
            "std_msgs::msg::dds_::String_",
            false,
            qos(false, true),
        )
        .unwrap();
    // One datagram in five is lost, discovery's included.
    let mut lossy = one_in_five(seed);
    let ev = run(&mut parts, &mut now, Duration::from_secs(3), &mut lossy);
    assert!(ev[0]
        .iter()
        .any(|e| matches!(e, Event::Matched { local, .. } if *local == w)));
    assert!(ev[1]
        .iter()
        .any(|e| matches!(e, Event::Matched { local, .. } if *local == r)));
    assert_eq!(parts[0].0.matched(w), 1);
    for i in 0..50u32 {
        parts[0].0.write(now, w, counted(i)).unwrap();
    }
    let ev = run(&mut parts, &mut now, Duration::from_secs(3), &mut lossy);
    let got = counts(&ev[1], r);
    assert_eq!(got, (0..50).collect::<Vec<_>>(), "seed {seed}");
}

#[test]
fn endpoints_whose_qos_does_not_fit_are_not_matched_and_the_reason_is_said() {
    let mut now = Instant::now();
    let mut parts = [participant(3, now), participant(4, now)];
    let w = parts[0]
        .0
        .add_writer(now, "T", "Ty", false, qos(true, false))
        .unwrap();
    let r = parts[1]
        .0
        .add_reader(now, "T", "Ty", false, qos(false, true))
        .unwrap();
    // Another type on the same topic.
    let other = parts[1]
        .0
        .add_reader(now, "T", "Other", false, qos(false, false))
        .unwrap();
    let ev = run(&mut parts, &mut now, Duration::from_secs(2), &mut |_| false);
    assert!(ev[1].iter().any(|e| matches!(e,
        Event::Mismatched { local, why: Mismatch::Reliability, .. } if *local == r)));
    assert!(ev[1].iter().any(|e| matches!(e,
        Event::Mismatched { local, why: Mismatch::Type, .. } if *local == other)));
    assert_eq!(parts[0].0.matched(w), 0);
    parts[0].0.write(now, w, vec![0, 1, 0, 0]).unwrap();
    let ev = run(
        &mut parts,
        &mut now,
        Duration::from_millis(500),
        &mut |_| false,
    );
    assert!(!ev[1].iter().any(|e| matches!(e, Event::Sample { .. })));
}

#[test]
fn a_participant_that_leaves_is_unmatched() {
    let mut now = Instant::now();
    let mut parts = [participant(5, now), participant(6, now)];
    let w = parts[0]
        .0
        .add_writer(now, "T", "Ty", false, qos(true, true))
        .unwrap();
    parts[1]
        .0
        .add_reader(now, "T", "Ty", false, qos(false, true))
        .unwrap();
    run(&mut parts, &mut now, Duration::from_secs(2), &mut |_| false);
    assert_eq!(parts[0].0.matched(w), 1);
    parts[1].0.leave();
    let ev = run(
        &mut parts,
        &mut now,
        Duration::from_millis(500),
        &mut |_| false,
    );
    let gone = parts[1].0.prefix();
    assert!(ev[0].contains(&Event::Left(gone)));
    assert_eq!(parts[0].0.matched(w), 0);
}

#[test]
fn a_participant_that_vanishes_without_leaving_is_dropped_after_its_lease() {
    let mut now = Instant::now();
    let mut parts = [participant(7, now), participant(8, now)];
    let w = parts[0]
        .0
        .add_writer(now, "T", "Ty", false, qos(true, true))
        .unwrap();
    parts[1]
        .0
        .add_reader(now, "T", "Ty", false, qos(false, true))
        .unwrap();
    run(&mut parts, &mut now, Duration::from_secs(2), &mut |_| false);
    assert_eq!(parts[0].0.matched(w), 1);
    let gone = parts[1].0.prefix();
    // Participant 8 goes silent (a crash, a cable): 7 runs alone.
    let mut events = Vec::new();
    let lease = Duration::from_secs(10);
    let mut t = Duration::ZERO;
    while t < lease + Duration::from_secs(2) {
        parts[0].0.handle_timeout(now);
        while parts[0].0.poll_transmit().is_some() {}
        events.extend(std::iter::from_fn(|| parts[0].0.poll_event()));
        if t < lease - Duration::from_secs(1) {
            assert!(
                !events.contains(&Event::Left(gone)),
                "dropped before its lease"
            );
        }
        now += Duration::from_millis(50);
        t += Duration::from_millis(50);
    }
    assert!(events.contains(&Event::Left(gone)));
    assert_eq!(parts[0].0.matched(w), 0);
}

#[test]
fn samples_sent_before_the_writers_announcement_reached_the_reader_are_delivered() {
    // The writer's side hears of the reader first and sends it samples;
    // the reader's side has not heard of the writer yet (its publication
    // announcements are lost for a while). Those samples were meant for
    // the reader and reach it: here (two tagwire participants) the writer
    // tells the reader where it starts, and the reader asks for them;
    // from another vendor's writer, which does not, the participant keeps
    // such datagrams until the writer is announced (checked against
    // Cyclone DDS in front/cli/tests/dds_start.rs).
    let mut now = Instant::now();
    let mut parts = [participant(1, now), participant(2, now)];
    let w = parts[0]
        .0
        .add_writer(now, "T", "Ty", false, qos(true, true))
        .unwrap();
    let r = parts[1]
        .0
        .add_reader(now, "T", "Ty", false, qos(false, true))
        .unwrap();
    let announces = |bytes: &[u8]| {
        Message::parse(bytes).is_ok_and(|m| {
            m.submessages.iter().any(|s| match s {
                Submessage::Data(d) => d.writer == EntityId::SEDP_PUBLICATIONS_WRITER,
                Submessage::Heartbeat { writer, .. } => {
                    *writer == EntityId::SEDP_PUBLICATIONS_WRITER
                }
                _ => false,
            })
        })
    };
    let mut cut = |_: usize, from: usize, bytes: &[u8]| from == 0 && announces(bytes);
    let mut events = run_with(&mut parts, &mut now, Duration::from_secs(2), &mut cut);
    assert_eq!(parts[0].0.matched(w), 1, "the writer matched the reader");
    assert!(!events[1]
        .iter()
        .any(|e| matches!(e, Event::Matched { local, .. } if *local == r)));
    for i in 0..5u32 {
        parts[0].0.write(now, w, counted(i)).unwrap();
    }
    let more = run_with(&mut parts, &mut now, Duration::from_millis(50), &mut cut);
    events[1].extend(more[1].iter().cloned());
    let mut pass = |_: usize, _: usize, _: &[u8]| false;
    let more = run_with(&mut parts, &mut now, Duration::from_secs(3), &mut pass);
    events[1].extend(more[1].iter().cloned());
    let got = counts(&events[1], r);
    assert_eq!(got, (0..5).collect::<Vec<_>>());
}
