//! Reliable streams of the real `tagwire-reliable` cores over simulated
//! links: loss, duplication, reordering, partitions and a receiver restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim_common;

use std::time::Duration;

use sim_common::*;
use tagwire_testkit::sim::stream::StreamConfig;
use tagwire_testkit::sim::{LinkConfig, SimRng};

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
