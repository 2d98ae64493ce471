//! A blocking subscriber that keeps up with a flat-out publisher on one
//! host does not sleep between two messages (each sleep costs it a system
//! call, and its publisher one to wake it): it polls briefly while the
//! stream flows. (Its own test binary: no other test competes for the
//! two threads.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tagwire::{Client, Domain, RingParams, SubscribeOptions};

mod common;

#[test]
fn a_subscriber_keeping_up_with_a_flowing_stream_rarely_sleeps() {
    let (_dir, _d, opts) = common::start_with(tagwire_daemon::Config::default());
    let c = Client::with_options(opts).unwrap();
    let ring = RingParams {
        slots: 4096,
        slot_payload: 64,
    };
    c.create_tag_with("/flow", Domain::Local, ring).unwrap();
    let mut sub = c
        .subscribe("/flow", SubscribeOptions::default().lossless())
        .unwrap();
    let mut p = c.publisher("/flow").unwrap();
    const N: u64 = 200_000;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::with_capacity(64);
        for _ in 0..N {
            sub.receive_into(Some(Duration::from_secs(10)), &mut buf)
                .unwrap();
        }
        sub.sleeps()
    });
    let payload = [7u8; 64];
    for _ in 0..N {
        p.send(&payload).unwrap();
    }
    let sleeps = reader.join().unwrap();
    assert!(sleeps < N / 50, "slept {sleeps} times for {N} messages");
    println!("slept {sleeps} times for {N} messages");
}
