//! A blocking subscriber whose stream flows polls its ring before it
//! sleeps (`SubscribeOptions::flow_poll`): each sleep costs it a system
//! call, and its publisher one to wake it. Bursts of messages a millisecond
//! apart find a subscriber polling for far longer than that awake, and wake
//! one that does not poll once per burst. (What the poll gains flat out is
//! measured by `tagwire perf`: a count of sleeps under a flat-out writer
//! depends on how the machine schedules the two threads.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tagwire::{Client, Domain, SubscribeOptions};

mod common;

const BURSTS: u64 = 100;
const BURST: u64 = 8;

/// Sleeps of a subscriber reading `BURSTS` bursts of `BURST` messages,
/// polling for `flow_poll` once its stream flows. The first burst is
/// written before it reads (its stream flows from the start); each later
/// one 1 ms after it took the one before (it finds its ring empty between
/// two bursts).
fn sleeps_with(c: &Client, tag: &str, flow_poll: Duration) -> u64 {
    c.create_tag(tag, Domain::Local).unwrap();
    let mut sub = c
        .subscribe(
            tag,
            SubscribeOptions::default().lossless().flow_poll(flow_poll),
        )
        .unwrap();
    let mut p = c.publisher(tag).unwrap();
    for i in 0..BURST {
        p.send(&i.to_le_bytes()).unwrap();
    }
    let taken = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in BURST..BURSTS * BURST {
                if i % BURST == 0 {
                    while taken.load(Ordering::Acquire) < i {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                p.send(&i.to_le_bytes()).unwrap();
            }
        });
        let mut buf = Vec::with_capacity(8);
        for i in 0..BURSTS * BURST {
            sub.receive_into(Some(Duration::from_secs(10)), &mut buf)
                .unwrap();
            assert_eq!(buf, i.to_le_bytes());
            taken.store(i + 1, Ordering::Release);
        }
    });
    assert_eq!(sub.lost(), 0);
    sub.sleeps()
}

#[test]
fn a_subscriber_whose_stream_flows_polls_before_it_sleeps() {
    let (_dir, _d, opts) = common::start_with(tagwire_daemon::Config::default());
    let c = Client::with_options(opts).unwrap();
    let polling = sleeps_with(&c, "/flow/poll", Duration::from_millis(500));
    let sleeping = sleeps_with(&c, "/flow/sleep", Duration::ZERO);
    println!("sleeps for {BURSTS} bursts: polling {polling}, not polling {sleeping}");
    // Not polling: at least a sleep per burst after the first (each finds
    // the ring empty).
    assert!(
        sleeping >= BURSTS - 1,
        "a subscriber not polling slept {sleeping} times"
    );
    // Polling 500 ms, far longer than the 1 ms between two bursts: no sleep
    // at all (only a stall of the whole machine would make one).
    assert!(polling <= 2, "a polling subscriber slept {polling} times");
}
