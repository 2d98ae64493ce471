//! Push-pull across hosts (network namespaces, proof/testkit): temporal
//! scaling by a proxy at the subscriber or at the publisher.
//!
//! These tests need root; without it each prints `skipped: <reason>` and
//! passes. `.ci/run` runs them as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::*;

use std::time::{Duration, Instant};

use tagwire::{Domain, Proxy, SubscribeOptions};

/// Bytes each host's interface received while `f` ran, less what it
/// received in an idle stretch of the same length just before (peer
/// heartbeats and the like).
fn received_during(site: &Site, f: impl FnOnce()) -> Vec<i64> {
    let hosts = site.lan.hosts();
    let read = || -> Vec<i64> { hosts.iter().map(|h| h.rx_bytes().unwrap() as i64).collect() };
    let idle_start = read();
    let t = Instant::now();
    f();
    let busy_time = t.elapsed();
    let busy_end = read();
    std::thread::sleep(busy_time);
    let idle_end = read();
    (0..hosts.len())
        .map(|i| {
            let busy = busy_end[i] - idle_start[i];
            let idle = idle_end[i] - busy_end[i];
            busy - idle
        })
        .collect()
}

/// A publisher on host 0 at 1 kHz; subscribers on hosts 1, 2, 3 asking for
/// every 1st, 10th and 100th sample with the filter at `proxy`. Returns the
/// data bytes each host received.
fn scaled_run(proxy: Proxy) -> Option<Vec<i64>> {
    if skip() {
        return None;
    }
    let site = Site::new(4);
    let (daemons, clients) = site.mesh(&Find::List);
    // Deep enough to hold the whole run (the subscribers read at the end).
    let deep = tagwire::RingParams {
        slots: 2048,
        slot_payload: 2048,
    };
    clients[0]
        .create_tag_with("/scaled", Domain::Global, deep)
        .unwrap();
    let scales = [1u32, 10, 100];
    let mut subs: Vec<_> = scales
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let opts = SubscribeOptions::default()
                .depth(2048)
                .every(n)
                .proxy(proxy);
            clients[i + 1].subscribe("/scaled", opts).unwrap()
        })
        .collect();
    let mut publisher = clients[0].publisher("/scaled").unwrap();
    const N: u64 = 1000;
    let payload = vec![0x5a_u8; 1024];
    let bytes = received_during(&site, || {
        let start = Instant::now();
        for i in 0..N {
            let due = start + Duration::from_millis(i);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            publisher.send(&payload).unwrap();
        }
        // Every subscriber got exactly the samples it asked for.
        for (s, &n) in subs.iter_mut().zip(&scales) {
            let want: Vec<u64> = (1..=N).filter(|q| q % u64::from(n) == 0).collect();
            let got: Vec<u64> = drain(s, want.len()).iter().map(|m| m.0).collect();
            assert_eq!(got, want, "every {n}th, proxy at the {proxy:?}");
            assert!(
                s.receive(Some(Duration::from_millis(200))).is_err(),
                "every {n}th: a sample more than asked for"
            );
            assert!(!s.available());
            assert_eq!(s.lost(), 0, "skipped samples are not losses");
        }
    });
    println!(
        "proxy at the {proxy:?}: hosts 1, 2, 3 (every 1st, 10th, 100th) received {:?} bytes; {} copies scaled out",
        &bytes[1..],
        daemons[0].scaled_out()
    );
    Some(bytes)
}

#[test]
fn a_proxy_at_the_publisher_sends_a_scaled_host_only_its_samples() {
    let Some(bytes) = scaled_run(Proxy::Publisher) else {
        return;
    };
    let full = bytes[1] as f64;
    assert!(
        full > 1000.0 * 1024.0,
        "host 1 got the whole stream: {full}"
    );
    // Bytes toward a scaled host drop in proportion to n (datagram headers
    // and the reliable stream's acknowledgements make them a little more).
    let tenth = bytes[2] as f64 / full;
    let hundredth = bytes[3] as f64 / full;
    assert!(
        (0.07..0.15).contains(&tenth),
        "every 10th: {tenth:.4} of the full stream"
    );
    assert!(
        hundredth < 0.03,
        "every 100th: {hundredth:.4} of the full stream"
    );
}

#[test]
fn a_proxy_at_the_subscriber_receives_the_whole_stream_and_drops_locally() {
    let Some(bytes) = scaled_run(Proxy::Subscriber) else {
        return;
    };
    let full = bytes[1] as f64;
    for (h, &b) in bytes.iter().enumerate().skip(2) {
        let share = b as f64 / full;
        assert!(share > 0.8, "host {h} got {share:.3} of the stream");
    }
}
