//! `Publisher::batch`: subscribers are woken once at the end of a batch, and
//! never left asleep while the batch waits for them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, Domain, RingParams, SubscribeOptions};
use tagwire_daemon::{Config, Daemon};

mod common;

fn node() -> (tempfile::TempDir, Daemon, ClientOptions) {
    common::start_with(Config::default())
}

#[test]
fn a_sleeping_subscriber_gets_a_whole_batch() {
    let (_dir, _d, opts) = node();
    let c = Client::with_options(opts).unwrap();
    c.create_tag("/b", Domain::Local).unwrap();
    let mut sub = c.subscribe("/b", SubscribeOptions::default()).unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        while got.len() < 10 {
            let m = sub.receive(Some(Duration::from_secs(5))).unwrap();
            got.push((m.payload[0], Instant::now()));
        }
        got
    });
    // Let it fall asleep first.
    std::thread::sleep(Duration::from_millis(100));
    let mut p = c.publisher("/b").unwrap();
    let sent = Instant::now();
    p.batch(|p| {
        for i in 0..10u8 {
            p.send(&[i]).unwrap();
        }
    });
    let got = reader.join().unwrap();
    assert_eq!(
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    assert!(got[9].1 - sent < Duration::from_secs(1), "woken at the end");
}

#[test]
fn a_batch_larger_than_the_ring_wakes_a_lossless_subscriber_before_waiting() {
    let (_dir, _d, opts) = node();
    let c = Client::with_options(opts).unwrap();
    let ring = RingParams {
        slots: 16,
        ..RingParams::default()
    };
    c.create_tag_with("/small", Domain::Local, ring).unwrap();
    let mut sub = c
        .subscribe("/small", SubscribeOptions::default().lossless())
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut n = 0u32;
        while n < 800 {
            let m = sub.receive(Some(Duration::from_secs(5))).unwrap();
            assert_eq!(m.payload, n.to_le_bytes());
            n += 1;
        }
        n
    });
    std::thread::sleep(Duration::from_millis(100));
    let mut p = c.publisher("/small").unwrap();
    p.set_send_timeout(Duration::from_secs(5));
    let start = Instant::now();
    p.batch(|p| {
        for i in 0..800u32 {
            p.send(&i.to_le_bytes()).unwrap();
        }
    });
    assert_eq!(reader.join().unwrap(), 800);
    // Without the wake-up before each wait the reader would only notice
    // every 200 ms (its periodic look): about 10 s for 50 refills; woken,
    // it takes milliseconds (the bound leaves a loaded machine room).
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}
