//! No silent loss of large messages across hosts: 100 kB messages (above a
//! ring slot, so they take the blob path on both nodes), published flat out
//! on one host, reach every subscriber on the other, whole and in order, for
//! reliable, lossless and TCP subscriptions, with one and with four
//! receiving clients on the receiving host.
//!
//! These tests need root (network namespaces); without it each prints
//! `skipped: <reason>` and passes. `.ci/run` runs them as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use tagwire::{Client, SubscribeOptions};

mod common;
use common::*;

/// Messages per stream, and their size.
const N: u64 = 1000;
const SIZE: usize = 100_000;

/// The bytes every message shares (computed once: the publisher must not
/// be slowed down by making them).
fn base() -> &'static [u8] {
    static BASE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        (0..SIZE as u64)
            .map(|k| (k.wrapping_mul(7) ^ (k >> 9)) as u8)
            .collect()
    })
}

/// Message `i`: its number first and last, the shared bytes between.
fn message(i: u64) -> Vec<u8> {
    let mut m = base().to_vec();
    m[..8].copy_from_slice(&i.to_le_bytes());
    m[SIZE - 8..].copy_from_slice(&i.to_le_bytes());
    m
}

/// Whether `m` is message `i`, whole and exact.
fn is_message(m: &[u8], i: u64) -> bool {
    m.len() == SIZE
        && m[..8] == i.to_le_bytes()
        && m[SIZE - 8..] == i.to_le_bytes()
        && m[8..SIZE - 8] == base()[8..SIZE - 8]
}

/// Publishes `N` large messages flat out on host 0 to `receivers` clients of
/// host 1 subscribed with `opts`, and checks that each gets every one.
fn flat_out(site: &Site, clients: &[Client], tag: &str, opts: SubscribeOptions, receivers: usize) {
    // A ring deep enough that a subscriber which keeps reading is never a
    // ring behind a publisher the network paces (small slots: every message
    // takes the blob path).
    deep_tag(&clients[0], tag, 1024, 1024);
    let readers: Vec<Client> = (0..receivers).map(|_| site.client(1)).collect();
    let subs: Vec<_> = readers
        .iter()
        .map(|c| c.subscribe(tag, opts.depth(1024)).unwrap())
        .collect();
    wait_until("host 0 sees every receiver", || {
        clients[0].receivers(tag).unwrap().len() == receivers
    });
    let mut publisher = clients[0].publisher(tag).unwrap();
    publisher.set_send_timeout(Duration::from_secs(60));
    let start = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = subs
            .into_iter()
            .enumerate()
            .map(|(r, mut sub)| {
                s.spawn(move || {
                    for i in 1..=N {
                        let m = sub
                            .receive(Some(Duration::from_secs(60)))
                            .unwrap_or_else(|e| panic!("{tag} receiver {r}, message {i}: {e}"));
                        assert_eq!(m.seq.0, i, "{tag} receiver {r}: out of order or missing");
                        assert!(
                            is_message(&m.payload, i),
                            "{tag} receiver {r}: message {i} corrupt"
                        );
                    }
                    assert!(
                        sub.receive(Some(Duration::from_millis(200))).is_err(),
                        "{tag} receiver {r}: a duplicate"
                    );
                    sub.lost()
                })
            })
            .collect();
        let mut m = message(0);
        for i in 1..=N {
            m[..8].copy_from_slice(&i.to_le_bytes());
            m[SIZE - 8..].copy_from_slice(&i.to_le_bytes());
            publisher.send(&m).unwrap();
        }
        for h in handles {
            assert_eq!(h.join().unwrap(), 0, "{tag}: a loss was reported");
        }
    });
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{tag}: {N} x {SIZE} B to {receivers} receivers in {secs:.2} s ({:.0} MB/s)",
        (N as usize * SIZE) as f64 / secs / 1e6
    );
}

fn run(opts: SubscribeOptions, name: &str) {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (daemons, clients) = site.mesh(&Find::List);
    for receivers in [1, 4] {
        flat_out(
            &site,
            &clients,
            &format!("/{name}{receivers}"),
            opts,
            receivers,
        );
    }
    assert_eq!(
        daemons[0].forward_losses(),
        0,
        "the forwarder lost messages"
    );
    println!(
        "retransmitted {}, held back at host 1: {} messages, {} datagrams refused",
        daemons[0].retransmissions(),
        daemons[1].held_messages(),
        daemons[1].held_back()
    );
}

#[test]
fn reliable_subscribers_get_every_flat_out_100_kb_message() {
    run(SubscribeOptions::default(), "reliable");
}

#[test]
fn lossless_subscribers_get_every_flat_out_100_kb_message() {
    run(SubscribeOptions::default().lossless(), "lossless");
}

#[test]
fn tcp_subscribers_get_every_flat_out_100_kb_message() {
    run(SubscribeOptions::default().tcp(), "tcp");
}
