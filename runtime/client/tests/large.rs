//! No silent loss at any size, on one node: messages larger than a ring slot
//! (the blob path) reach lossless subscribers as surely as small ones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::time::Duration;

use tagwire::{Client, ClientOptions, Domain, Error, SubscribeOptions};
use tagwire_daemon::{Config, Daemon};

mod common;

fn start() -> (tempfile::TempDir, Daemon, ClientOptions) {
    common::start_with(Config::default())
}

/// The size of publisher `p`'s message `i`: 1 B to 200 KiB, about half of
/// them above the default slot (64 KiB), so blobs and ring records mix.
fn size(p: u64, i: u64) -> usize {
    let x = (p * 7919 + i * 104_729).wrapping_mul(2_654_435_761) % 1000;
    match x % 4 {
        0 => 1 + (x as usize) % 64,
        1 => 1 + (x as usize * 61) % (64 * 1024),
        _ => 64 * 1024 + (x as usize * 133) % (136 * 1024),
    }
}

/// Message `i` of publisher `p`: its size, the publisher's index first (the
/// publishers share a process, so a pid does not tell them apart), then
/// bytes that depend on both.
fn message(p: u64, i: u64) -> Vec<u8> {
    let mut m: Vec<u8> = (0..size(p, i) as u64)
        .map(|k| (k.wrapping_mul(31) ^ (i * 131) ^ (p * 17)) as u8)
        .collect();
    m[0] = p as u8;
    m
}

#[test]
fn three_flat_out_publishers_of_1_b_to_200_kib_lose_nothing_to_four_lossless_subscribers() {
    let (_dir, _daemon, opts) = start();
    const PUBLISHERS: u64 = 3;
    const N: u64 = 200;
    let clients: Vec<Client> = (0..PUBLISHERS + 4)
        .map(|_| Client::with_options(opts.clone()).unwrap())
        .collect();
    clients[0].create_tag("/large", Domain::Global).unwrap();
    let subs: Vec<_> = clients[PUBLISHERS as usize..]
        .iter()
        .map(|c| {
            c.subscribe("/large", SubscribeOptions::default().lossless())
                .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        let readers: Vec<_> = subs
            .into_iter()
            .map(|mut sub| {
                s.spawn(move || {
                    // Each publisher's messages in its order, whole and exact.
                    let mut next: HashMap<u8, u64> = HashMap::new();
                    for _ in 0..PUBLISHERS * N {
                        let m = match sub.receive(Some(Duration::from_secs(30))) {
                            Ok(m) => m,
                            Err(Error::Overflowed { lost }) => {
                                panic!("a lossless subscriber lost {lost} messages")
                            }
                            Err(e) => panic!("{e}"),
                        };
                        let p = m.payload[0];
                        let want = next.entry(p).or_insert(1);
                        assert_eq!(m.seq.0, *want, "publisher {p}: out of order or missing");
                        *want += 1;
                        assert!(
                            m.payload == message(u64::from(p), m.seq.0),
                            "publisher {p}'s message {} ({} bytes) is corrupt",
                            m.seq.0,
                            m.payload.len()
                        );
                    }
                    assert_eq!(sub.lost(), 0);
                    next.len()
                })
            })
            .collect();
        for (p, c) in clients[..PUBLISHERS as usize].iter().enumerate() {
            let mut publisher = c.publisher("/large").unwrap();
            publisher.set_send_timeout(Duration::from_secs(30));
            s.spawn(move || {
                for i in 1..=N {
                    publisher.send(&message(p as u64, i)).unwrap();
                }
            });
        }
        for r in readers {
            assert_eq!(r.join().unwrap(), PUBLISHERS as usize);
        }
    });
}

#[test]
fn a_lossless_subscriber_that_stops_reading_holds_large_messages_back_and_then_gets_them_all() {
    let (_dir, daemon, opts) = start();
    let c = Client::with_options(opts).unwrap();
    c.create_tag("/held", Domain::Global).unwrap();
    let mut sub = c
        .subscribe("/held", SubscribeOptions::default().lossless())
        .unwrap();
    let mut publisher = c.publisher("/held").unwrap();
    let timeout = Duration::from_millis(100);
    publisher.set_send_timeout(timeout);
    let big = |i: u64| {
        message(0, i)
            .into_iter()
            .chain([7u8; 80_000])
            .collect::<Vec<u8>>()
    };
    // Nobody reads: the store (a ring's worth of large messages) fills, and
    // the next send waits its timeout and fails, having sent nothing.
    let mut sent = 0u64;
    let err = loop {
        match publisher.send(&big(sent + 1)) {
            Ok(seq) => {
                sent += 1;
                assert_eq!(seq.0, sent);
                assert!(sent <= 10_000, "never held back");
            }
            Err(e) => break e,
        }
    };
    assert!(
        matches!(&err, Error::WindowFull { tag, waited } if tag == "/held" && *waited >= timeout),
        "{err:?}"
    );
    assert!(
        daemon.blobs_held() > 0,
        "held back by the ring, not the store"
    );
    println!("held back after {sent} large messages: {err}");
    // Every one is still there, and so is the next.
    publisher.set_send_timeout(Duration::from_secs(10));
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in sent + 1..=sent + 20 {
                publisher.send(&big(i)).unwrap();
            }
        });
        for i in 1..=sent + 20 {
            let m = sub.receive(Some(Duration::from_secs(10))).unwrap();
            assert_eq!(m.seq.0, i);
            assert!(m.payload == big(i), "message {i} corrupt");
        }
    });
    assert_eq!(sub.lost(), 0);
}

#[test]
fn a_large_message_whose_daemon_went_away_before_it_was_read_is_counted_lost() {
    let (_dir, daemon, opts) = start();
    let c = Client::with_options(opts).unwrap();
    c.create_tag("/gone", Domain::Global).unwrap();
    let mut sub = c.subscribe("/gone", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/gone").unwrap();
    p.send(&[1u8; 16]).unwrap();
    p.send(&vec![7u8; 100 * 1024]).unwrap();
    assert_eq!(
        sub.receive(Some(Duration::from_secs(2))).unwrap().payload,
        [1u8; 16]
    );
    // The daemon keeps large messages: gone with it, before the
    // subscriber fetched this one.
    daemon.shutdown();
    let r = sub.receive(Some(Duration::from_secs(2)));
    assert!(matches!(r, Err(Error::Overflowed { lost: 1 })), "{r:?}");
    assert_eq!(sub.lost(), 1);
}
