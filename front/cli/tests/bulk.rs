//! Bulk streams across two hosts (network namespaces), for each carrier a
//! remote subscriber can ask for: reliable UDP straight to the subscriber
//! (direct delivery, the default), reliable UDP through the daemons, and
//! TCP. Flat-out publishers of 8 KiB messages, cut into MTU-sized
//! datagrams that leave in segmented sends, through random drops on the
//! receiving host's input (nftables) and through a token bucket (`tc
//! tbf`): every message arrives once, whole, in order, and nothing is
//! counted lost. And the trains never hold a lone message back.
//!
//! These tests need root (network namespaces) and `nft` (Debian's
//! `nftables`, for the drops); without them they print `skipped: <reason>`
//! and pass. `.ci/run` installs both and runs them as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use tagwire::SubscribeOptions;

mod common;
use common::*;

const SIZE: usize = 8192;

/// The carriers a remote subscriber can ask for.
fn carriers() -> [(&'static str, SubscribeOptions); 3] {
    // Lossless: what a subscriber cannot take yet holds the publisher back
    // (a reliable one would drop its oldest past its depth, and count it).
    let o = || SubscribeOptions::default().depth(512).lossless();
    [
        ("direct", o()),
        ("through the daemons", o().through_daemon()),
        ("tcp", o().tcp()),
    ]
}

/// Message `i`: its number, then bytes that depend on it.
fn message(i: u64) -> Vec<u8> {
    let mut m: Vec<u8> = (0..SIZE as u64).map(|k| (k * 31 + i) as u8).collect();
    m[..8].copy_from_slice(&i.to_le_bytes());
    m
}

/// `n` messages flat out from host 0 to a subscriber on host 1 with
/// `opts`: each must arrive once, whole and in order.
fn stream(site: &Site, tag: &str, opts: SubscribeOptions, n: u64) -> (Duration, u64) {
    let (c0, c1) = (site.client(0), site.client(1));
    // Slots that hold a whole message (larger ones go to the daemon's
    // large-message store).
    deep_tag(&c0, tag, 512, SIZE as u32 + 256);
    let mut sub = c1.subscribe(tag, opts).unwrap();
    let mut publisher = c0.publisher(tag).unwrap();
    publisher.set_send_timeout(Duration::from_secs(60));
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let start = Instant::now();
    let lost = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            for i in 1..=n {
                let m = sub.receive(Some(Duration::from_secs(60))).unwrap();
                assert_eq!(m.seq.0, i, "{tag}: out of order, lost or duplicated");
                assert!(m.payload == message(i), "{tag}: message {i} damaged");
            }
            assert!(
                matches!(
                    sub.receive(Some(Duration::from_millis(300))),
                    Err(tagwire::Error::Timeout)
                ),
                "{tag}: a message arrived twice"
            );
            sub.lost()
        });
        for i in 1..=n {
            publisher.send(&message(i)).unwrap();
        }
        reader.join().unwrap()
    });
    (start.elapsed(), lost)
}

fn nft_missing() -> bool {
    let ok = std::process::Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: nft not found (Debian package nftables)");
    }
    !ok
}

#[test]
fn bulk_streams_through_random_drops_lose_and_reorder_nothing_on_any_carrier() {
    if skip() || nft_missing() {
        return;
    }
    let site = Site::new(2);
    let (daemons, _clients) = site.mesh(&Find::List);
    // 3 % of what host 1 receives from host 0, data and acknowledgements
    // of every carrier alike (and the daemons' own traffic).
    let from = site.lan.host(0).addr();
    site.lan.host(1).drop_input(from, 3).unwrap();
    for (i, (name, opts)) in carriers().into_iter().enumerate() {
        let before = site.lan.host(1).dropped().unwrap();
        let resent = daemons[0].retransmissions();
        let (took, lost) = stream(&site, &format!("/bulk/drops/{i}"), opts, 3000);
        let dropped = site.lan.host(1).dropped().unwrap() - before;
        println!(
            "{name}: 3000 x 8 KiB in {took:?}, {dropped} packets dropped, {} datagrams resent",
            daemons[0].retransmissions() - resent
        );
        assert_eq!(lost, 0, "{name}: counted lost");
        assert!(
            dropped > 0,
            "{name}: nothing was dropped: the test proves nothing"
        );
    }
    site.lan.host(1).stop_dropping().unwrap();
    assert_eq!(daemons[0].forward_losses(), 0);
}

#[test]
fn bulk_streams_through_a_token_bucket_lose_and_reorder_nothing_on_any_carrier() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (daemons, _clients) = site.mesh(&Find::List);
    // 200 Mbit/s with a queue of 64 KiB: flat out, the bucket overflows.
    site.lan.host(0).shape(200_000_000, 16_000, 64_000).unwrap();
    for (i, (name, opts)) in carriers().into_iter().enumerate() {
        let (took, lost) = stream(&site, &format!("/bulk/tbf/{i}"), opts, 2000);
        let mbit = (2000 * SIZE * 8) as f64 / took.as_secs_f64() / 1e6;
        println!("{name}: 2000 x 8 KiB in {took:?} ({mbit:.0} Mbit/s through 200)");
        assert_eq!(lost, 0, "{name}: counted lost");
        // The bucket held it to its rate: the stream really was shaped.
        assert!(
            mbit < 230.0,
            "{name}: {mbit:.0} Mbit/s through a 200 Mbit/s bucket"
        );
    }
    assert_eq!(daemons[0].forward_losses(), 0);
}

#[test]
fn a_lone_message_is_not_held_back_to_fill_a_train() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    let (c0, c1) = (&clients[0], &clients[1]);
    deep_tag(c0, "/lone/ping", 64, 8192);
    deep_tag(c0, "/lone/pong", 64, 8192);
    // Ping on host 0 to host 1 and back, one message at a time with a
    // pause between (a publisher idle long enough that its forwarder
    // sleeps): small ones, and large ones cut into a train of datagrams.
    let mut ping_sub = c1
        .subscribe("/lone/ping", SubscribeOptions::default())
        .unwrap();
    let mut pong_sub = c0
        .subscribe("/lone/pong", SubscribeOptions::default())
        .unwrap();
    let mut ping = c0.publisher("/lone/ping").unwrap();
    let mut pong = c1.publisher("/lone/pong").unwrap();
    wait_until("both subscribers are known", || {
        !c0.receivers("/lone/ping").unwrap().is_empty()
            && !c1.receivers("/lone/pong").unwrap().is_empty()
    });
    let wait = Some(Duration::from_secs(5));
    let mut rtts = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..16 {
                let m = ping_sub.receive(wait).unwrap();
                pong.send(&m.payload).unwrap();
            }
        });
        for i in 0..16usize {
            let size = if i % 2 == 0 { 64 } else { 6 * 1024 };
            std::thread::sleep(Duration::from_millis(150));
            let t = Instant::now();
            ping.send(&vec![i as u8; size]).unwrap();
            let m = pong_sub.receive(wait).unwrap();
            let rtt = t.elapsed();
            assert_eq!(m.payload.len(), size);
            // Skip the first of each size: a stream's first datagram opens it.
            if i >= 2 {
                rtts.push(rtt);
            }
        }
    });
    // The only timers that could release a held train are the
    // forwarder's idle wake-up (250 ms) and the writer's resend (100 ms):
    // a lone message comes back long before either. A train held for
    // one would hold every one (the median); a single slow round trip is
    // this machine's scheduler (bounded far above the timers only).
    rtts.sort();
    let (median, worst) = (rtts[rtts.len() / 2], rtts[rtts.len() - 1]);
    println!("lone round trips: median {median:?}, worst {worst:?}");
    assert!(
        median < Duration::from_millis(50),
        "lone messages waited: {rtts:?}"
    );
    assert!(worst < Duration::from_secs(1), "{rtts:?}");
}
