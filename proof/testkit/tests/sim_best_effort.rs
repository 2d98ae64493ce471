//! Best-effort streams of the real cores over lossy links: every message
//! is delivered or counted as lost, never duplicated, reordered or
//! corrupted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim_common;

use std::time::Duration;

use sim_common::*;
use tagwire_reliable::fragment_count;
use tagwire_testkit::sim::stream::StreamConfig;
use tagwire_testkit::sim::{LinkConfig, SimRng};
use tagwire_wire::datagram::max_fragment_payload;

/// Sends `messages` to every receiver over `link`, then, the network made
/// lossless, one last single-datagram message: a best-effort reader can
/// count a loss only once a newer datagram arrives. Returns the net and
/// everything sent.
fn run(
    seed: u64,
    config: StreamConfig,
    link: LinkConfig,
    messages: &[Vec<u8>],
) -> (Net, Vec<Vec<u8>>) {
    let mut net = Net::new(seed, config, 2, link);
    // One message per millisecond: jitter reorders neighbours, not all.
    net.pace_all(messages, ms(1));
    net.sim.run_for(Duration::from_secs(5)).unwrap();
    net.sim.set_all_links(LinkConfig::default());
    let fence = vec![vec![0xfe; 8]];
    net.enqueue_all(&fence);
    net.sim.run_for(Duration::from_secs(5)).unwrap();
    let all = messages.iter().chain(&fence).cloned().collect();
    (net, all)
}

#[test]
fn every_single_datagram_message_is_delivered_or_counted_lost() {
    let link = LinkConfig {
        jitter: ms(5),
        loss: 0.15,
        duplicate: 0.10,
        ..LinkConfig::default()
    };
    let mut rng = SimRng::derived(11, "best effort");
    let messages: Vec<Vec<u8>> = (0..600)
        .map(|i| payload(i, rng.range_usize(1, 1300)))
        .collect();
    let (net, all) = run(11, StreamConfig::best_effort(tag()), link, &messages);
    let want = expected(&all);
    for &r in &net.receivers {
        let got = deliveries(&net.log, r, net.sender);
        check_in_order_subset(&got, &want).unwrap();
        let be = net
            .sim
            .node(r)
            .unwrap()
            .best_effort_stats(net.sender)
            .unwrap();
        assert_eq!(got.len() as u64 + be.lost, want.len() as u64, "{be:?}");
        assert_eq!(be.accepted, got.len() as u64);
        // Every copy that arrived was accepted once or refused as late.
        let link = net.sim.link_stats(net.sender, r);
        assert_eq!(link.delivered, be.accepted + be.late, "{link:?} {be:?}");
        assert!(be.lost > 0 && be.late > 0, "{be:?}");
        assert_eq!(got.last().unwrap().msg, want.len() as u64);
    }
}

#[test]
fn fragmented_best_effort_messages_are_whole_or_missing_and_every_lost_datagram_is_counted() {
    let link = LinkConfig {
        jitter: ms(3),
        loss: 0.05,
        duplicate: 0.05,
        ..LinkConfig::default()
    }
    .mbit(100);
    let config = StreamConfig::best_effort(tag());
    let max_payload = max_fragment_payload(&tag(), config.datagram_size);
    let messages = workload(&mut SimRng::derived(12, "workload"), 150, 20_000);
    let (net, all) = run(12, config, link, &messages);
    let want = expected(&all);
    let datagrams: u64 = all
        .iter()
        .map(|m| fragment_count(m.len(), max_payload) as u64)
        .sum();
    for &r in &net.receivers {
        let got = deliveries(&net.log, r, net.sender);
        check_in_order_subset(&got, &want).unwrap();
        assert!(
            got.len() < want.len() && got.len() > want.len() / 10,
            "{}",
            got.len()
        );
        let be = net
            .sim
            .node(r)
            .unwrap()
            .best_effort_stats(net.sender)
            .unwrap();
        assert_eq!(be.accepted + be.lost, datagrams, "{be:?}");
        let rs = net
            .sim
            .node(r)
            .unwrap()
            .reassembler_stats(net.sender)
            .unwrap();
        assert_eq!(rs.completed, got.len() as u64);
        assert_eq!(rs.inconsistent, 0);
    }
}
