//! A bulk stream through random loss in the network simulator: 3,000 8 KiB
//! messages cut into MTU-sized datagrams (the daemon's forwarder cuts them
//! so, `runtime/daemon/src/forward.rs`), over 100 µs links that lose 3 %
//! of the datagrams, to a reliable and to a lossless receiver.
//!
//! Recovery must cost about a round trip per loss, not a timer: before
//! the writer asked the reader again when a NACK it had to hold off (its
//! copy might still have been on the way) came too soon, each such loss
//! waited for the heartbeat period, and this stream took 5.4 s of
//! simulated time (0.71 s with IP-fragmented 60 KiB datagrams, which have
//! six times fewer losses to recover); now 1.9-2.4 s (0.37 s).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tagwire_session::{Batching, Config, Dest, Mode};
use tagwire_testkit::sim::session::{Lossless, SessionNode};
use tagwire_testkit::sim::{Addr, LinkConfig, Sim, SimConfig};
use tagwire_wire::{NodeAddr, TagName};

/// Runs the stream; returns its simulated duration, datagrams sent and
/// sent again, and datagrams the links dropped.
fn stream(seed: u64, datagram: usize, lossless: bool) -> (Duration, u64, u64, u64) {
    let (a, b): (Addr, Addr) = (([10, 0, 0, 1], 7402).into(), ([10, 0, 0, 2], 7402).into());
    let mut sim = Sim::new(SimConfig {
        default_link: LinkConfig {
            latency: Duration::from_micros(100),
            loss: 0.03,
            ..LinkConfig::default()
        },
        ..SimConfig::seeded(seed)
    });
    let config = Config {
        datagram,
        batch: Batching::fixed(datagram),
        max_unacked_messages: 512,
        ..Config::default()
    };
    for &x in &[a, b] {
        let c = config.clone();
        sim.add_node(x, move |init| SessionNode::new(init, c.clone()))
            .unwrap();
    }
    let tag = TagName::new("/sim/bulk").unwrap();
    let now = sim.now();
    let route = Dest {
        priority: Default::default(),
        node: NodeAddr(b.ip()),
        addr: b,
        mode: Mode::Reliable,
        every: 1,
        relay: false,
    };
    sim.with_node(a, |n, _| n.session_mut().set_routes(now, &tag, vec![route]));
    if lossless {
        sim.with_node(b, |n, now| {
            n.set_lossless(
                now,
                &tag,
                Lossless {
                    room: 512,
                    period: Duration::from_micros(20),
                },
            )
        });
    }
    let t0 = sim.now();
    for i in 0..3000u32 {
        sim.with_node(a, |n, now| {
            n.publish(now, &tag, vec![i as u8; 8192]);
        });
    }
    sim.run_until_cond(Duration::from_secs(120), |s| {
        s.node(b).unwrap().delivered().len() == 3000
    })
    .unwrap();
    let took = sim.now() - t0;
    let got = sim.node(b).unwrap().delivered();
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.seq, i as u64 + 1, "out of order or repeated");
        assert_eq!(m.len, 8192);
    }
    let tx = sim.node(a).unwrap().counters();
    let dropped = sim.total_link_stats().dropped_loss;
    (took, tx.data_sent, tx.resent, dropped)
}

#[test]
fn a_bulk_stream_through_random_loss_recovers_each_loss_in_about_a_round_trip() {
    for lossless in [false, true] {
        for seed in [3, 4] {
            let (took, sent, resent, dropped) = stream(seed, 1428, lossless);
            println!(
                "seed {seed} lossless {lossless}: {took:?}, {sent} datagrams sent, \
                 {resent} again, {dropped} dropped by the links"
            );
            assert!(sent > 21_000, "cut into MTU-sized datagrams: {sent}");
            // Each loss repaired once (acknowledgements are lost too, and
            // some repairs are lost again), not whole windows.
            assert!(
                resent < dropped * 2,
                "{resent} resent for {dropped} dropped"
            );
            assert!(
                took < Duration::from_secs(3),
                "{took:?}: losses wait for timers"
            );
        }
    }
}
