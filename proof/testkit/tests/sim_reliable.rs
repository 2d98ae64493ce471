//! Reliable streams of the real `tagwire-reliable` cores over simulated
//! links: loss, duplication, reordering, partitions and a receiver restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim_common;

use std::collections::BTreeSet;
use std::time::Duration;

use sim_common::*;
use tagwire_reliable::fragment_count;
use tagwire_testkit::sim::stream::{Delivery, PublishError, ReaderStart, StreamConfig};
use tagwire_testkit::sim::{LinkConfig, SimRng};
use tagwire_wire::datagram::max_fragment_payload;

#[test]
fn every_message_arrives_once_in_order_through_loss_duplication_and_reordering() {
    let seed = 16;
    let link = LinkConfig {
        latency: ms(2),
        // Far more than the spacing of datagrams: they overtake each other.
        jitter: ms(6),
        loss: 0.10,
        duplicate: 0.05,
        ..LinkConfig::default()
    }
    .mbit(200);
    let mut rng = SimRng::derived(seed, "workload");
    let mut messages = workload(&mut rng, 40, 200 * 1024);
    messages.push(vec![0xa5]);
    messages.push(payload(1, 200 * 1024));
    let want = expected(&messages);
    let mut net = Net::new(seed, StreamConfig::reliable(tag()), 2, link);
    net.enqueue_all(&messages);
    let took = net
        .run_to_completion(messages.len(), Duration::from_secs(600))
        .unwrap();

    for &r in &net.receivers.clone() {
        let got = deliveries(&net.log, r, net.sender);
        check_exact(&got, &want).unwrap();
        let node = net.sim.node(r).unwrap();
        let rs = node.reader_stats(net.sender).unwrap();
        // The network did what it was asked to, and the reader saw it.
        assert!(rs.duplicates > 0 && rs.out_of_order > 0, "{rs:?}");
        assert_eq!(
            node.reassembler_stats(net.sender).unwrap().completed,
            messages.len() as u64
        );
        let ws = net.sim.node(net.sender).unwrap().writer(r).unwrap().stats();
        assert!(ws.retransmitted > 0 && ws.acked == ws.sent, "{ws:?}");
    }
    let total = net.sim.total_link_stats();
    let lost = total.dropped_loss as f64 / (total.sent + total.duplicated) as f64;
    assert!((0.08..0.12).contains(&lost), "loss rate {lost}: {total:?}");
    assert!(total.duplicated > 0);
    // Many messages were cut into fragments.
    let fragmented = messages.iter().filter(|m| m.len() > 1400).count();
    assert!(fragmented > 20, "{fragmented}");
    check_links_balanced(&net.sim).unwrap();
    println!(
        "{} messages to 2 receivers in {took:?} of virtual time; {total:?}",
        messages.len()
    );
}

#[test]
fn a_partition_holds_the_publisher_back_and_everything_arrives_after_it_heals() {
    let mut config = StreamConfig::reliable(tag());
    config.writer.window = 32;
    let mut net = Net::new(7, config, 1, LinkConfig::with_latency(ms(1)));
    let (s, r) = (net.sender, net.receivers[0]);
    // 300 messages of 3 fragments each: far more than the window holds.
    let messages: Vec<Vec<u8>> = (0..300).map(|i| payload(i, 3000)).collect();
    net.enqueue_all(&messages);
    net.sim.run_until(ms(5)).unwrap();
    let before = net.log.len();
    assert!(before > 0 && before < 300, "{before}");
    net.sim.partition(&[s], &[r]);
    net.sim.run_until(ms(40)).unwrap();
    let (held_then, delivered_then) = (net.sim.node(s).unwrap().stats().held_back, net.log.len());
    net.sim.run_until(ms(2000)).unwrap();
    let node = net.sim.node(s).unwrap();
    let w = node.writer(r).unwrap();
    // The window is full, the application is held back and keeps trying.
    assert_eq!(w.occupancy(), w.window());
    assert!(node.queued() > 0);
    assert!(node.stats().held_back > held_then, "{:?}", node.stats());
    let refused = net.sim.with_node(s, |n, now| n.publish(now, r, b"more"));
    assert_eq!(refused, Some(Err(PublishError::HeldBack { to: r })));
    // Nothing got through the cut.
    assert_eq!(net.log.len(), delivered_then);
    let cut = net.sim.link_stats(s, r).dropped_partition;
    assert!(cut > 0);
    // Asking a reader that does not answer backs off to the heartbeat
    // period: about 40 requests and a few timer resends in the 1.96 s
    // cut, where a request every three round trips (6 ms here) made 330.
    assert!(cut < 100, "{cut} datagrams into the cut");
    net.sim.heal(&[s], &[r]);
    // ... and the next request, at most a heartbeat period (50 ms) after
    // the heal, starts the stream again.
    net.sim.run_until(ms(2000 + 60)).unwrap();
    assert!(
        net.log.len() > delivered_then,
        "nothing delivered within 60 ms of the heal"
    );
    net.run_to_completion(300, Duration::from_secs(60)).unwrap();
    check_exact(&deliveries(&net.log, r, s), &expected(&messages)).unwrap();
    check_links_balanced(&net.sim).unwrap();
}

/// A receiver crashes mid-stream and restarts with a fresh node; returns
/// (messages, deliveries of incarnation 0, of incarnation 1, fragments of
/// each message, the writer's window).
fn restart_scenario(
    seed: u64,
    start: ReaderStart,
) -> (Vec<Sent>, Vec<Delivery>, Vec<Delivery>, Vec<usize>, usize) {
    let mut rng = SimRng::derived(seed, "restart");
    let mut config = StreamConfig::reliable(tag());
    config.writer.window = rng.range_usize(8, 64);
    let link = LinkConfig {
        jitter: ms(rng.range(0, 5)),
        loss: rng.float(0.0, 0.1),
        duplicate: rng.float(0.0, 0.05),
        ..LinkConfig::default()
    };
    let window = config.writer.window;
    let max_payload = max_fragment_payload(&tag(), config.datagram_size);
    // The first incarnation wants the stream from seq 1; a restarted one
    // starts as `start` says.
    let mut net = Net::with_configs(seed, 1, link, move |incarnation| StreamConfig {
        reader_start: if incarnation == 0 {
            ReaderStart::FirstSeq
        } else {
            start
        },
        ..config.clone()
    });
    let (s, r) = (net.sender, net.receivers[0]);
    let messages = workload(&mut rng, 60, 8000);
    net.enqueue_all(&messages);
    let crash_at = ms(rng.range(5, 60));
    net.sim.run_until(crash_at).unwrap();
    net.sim.crash(r).unwrap();
    net.sim.run_for(ms(rng.range(1, 400))).unwrap();
    net.sim.restart(r).unwrap();
    let done = net.sim.run_until_cond(Duration::from_secs(120), |sim| {
        sim.node(s).unwrap().is_idle()
    });
    done.unwrap_or_else(|e| panic!("seed {seed}: {e}; {}", net.progress()));
    let all = deliveries(&net.log, r, s);
    let (old, new): (Vec<Delivery>, Vec<Delivery>) =
        all.into_iter().partition(|d| d.incarnation == 0);
    let frags = messages
        .iter()
        .map(|m| fragment_count(m.len(), max_payload))
        .collect();
    (expected(&messages), old, new, frags, window)
}

/// What `tagwire-reliable` guarantees a receiver that restarts with
/// `Reader::with_start(.., 1)` (the daemon's delivery role): each
/// incarnation delivers in order, at most once, byte-identical; the writer
/// resends everything it still holds, so the only message that can be lost
/// is the one being reassembled across the last acknowledgement the writer
/// got before the crash, the message right after the old incarnation's
/// last; messages the old incarnation delivered whose acknowledgement was
/// lost may be delivered again, at most a window's worth.
#[test]
fn a_restarted_receiver_misses_at_most_the_message_it_was_reassembling() {
    let mut lost_one = 0;
    let mut restarted_mid_stream = 0;
    for seed in 0..40 {
        let (want, old, new, _, window) = restart_scenario(seed, ReaderStart::FirstSeq);
        check_in_order_subset(&old, &want).unwrap_or_else(|e| panic!("seed {seed}, old: {e}"));
        check_in_order_subset(&new, &want).unwrap_or_else(|e| panic!("seed {seed}, new: {e}"));
        let a = old.last().map_or(0, |d| d.msg);
        let seen: BTreeSet<u64> = old.iter().chain(&new).map(|d| d.msg).collect();
        let missing: Vec<u64> = want
            .iter()
            .map(|w| w.msg)
            .filter(|m| !seen.contains(m))
            .collect();
        assert!(
            missing.is_empty() || missing == [a + 1],
            "seed {seed}: lost {missing:?}; old incarnation ended at {a}"
        );
        lost_one += missing.len();
        let twice = old
            .iter()
            .filter(|d| new.iter().any(|n| n.msg == d.msg))
            .count();
        assert!(twice <= window, "seed {seed}: {twice} delivered twice");
        // (A stream that ended before the crash leaves the new incarnation
        // nothing to deliver.)
        assert_eq!(
            new.last().or(old.last()).map(|d| d.msg),
            Some(want.len() as u64),
            "seed {seed}"
        );
        restarted_mid_stream += usize::from(!new.is_empty());
    }
    assert!(restarted_mid_stream >= 30, "{restarted_mid_stream} of 40");
    println!("the straddling message was lost in {lost_one} of 40 restarts");
}

/// A receiver that restarts as a late joiner (`Reader::new`) starts where
/// the first datagram or heartbeat it sees says: what the writer held then
/// may be skipped. Each incarnation still delivers in order, at most once,
/// byte-identical, the lost messages are one run right after the old
/// incarnation's last, and they fit in the writer's window plus the
/// message that straddled it.
#[test]
fn a_late_joining_restarted_receiver_loses_at_most_a_window() {
    let mut silent = 0;
    for seed in 0..40 {
        let (want, old, new, frags, window) = restart_scenario(seed, ReaderStart::LateJoin);
        check_in_order_subset(&old, &want).unwrap_or_else(|e| panic!("seed {seed}, old: {e}"));
        check_in_order_subset(&new, &want).unwrap_or_else(|e| panic!("seed {seed}, new: {e}"));
        let a = old.last().map_or(0, |d| d.msg);
        let seen: BTreeSet<u64> = old.iter().chain(&new).map(|d| d.msg).collect();
        let missing: Vec<u64> = want
            .iter()
            .map(|w| w.msg)
            .filter(|m| !seen.contains(m))
            .collect();
        let run: Vec<u64> = (a + 1..a + 1 + missing.len() as u64).collect();
        assert_eq!(
            missing, run,
            "seed {seed}: lost messages are not one run after {a}"
        );
        let datagrams: usize = missing.iter().map(|&m| frags[m as usize - 1]).sum();
        let most = frags.iter().max().unwrap();
        assert!(datagrams <= window + most, "seed {seed}: lost {missing:?}");
        silent += missing.len();
    }
    println!("late-joining restarts lost {silent} messages in 40 runs");
}
