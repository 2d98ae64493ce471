//! Paced reliable streams between two hosts (network namespaces) through a
//! token bucket with a deep queue (`tc tbf`, 100 Mbit/s, 1.25 MB: 100 ms):
//! with the daemons' `pacing` on, a flat-out publisher's stream still
//! delivers every message once, whole and in order, and its forwarder's
//! stream reports the controller's estimates in `tagwire stats` (a round
//! trip, a delivery rate near the bucket's, a non-zero interval). Without
//! `pacing` the stream reports none. The latencies printed are for the
//! reader; the bars are `tagwire perf`'s, not this test's.
//!
//! These tests need root (network namespaces); without it they print
//! `skipped: <reason>` and pass. `.ci/run` runs them as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use tagwire::{Pacing, Processes, PublishOptions, SubscribeOptions};
use tagwire_daemon::PacerConfig;

mod common;
use common::*;

const SIZE: usize = 8192;

/// Streams `n` messages from host 0 to a subscriber on host 1 through the
/// daemons; returns the latencies (publishing to receipt) of the second
/// half, sorted, and the forwarder's stream row.
fn stream(site: &Site, tag: &str, n: u64) -> (Vec<Duration>, tagwire_wire::control::StatsRow) {
    stream_with(site, tag, n, PublishOptions::default())
}

/// [`stream`] from a publisher with `opts`.
fn stream_with(
    site: &Site,
    tag: &str,
    n: u64,
    opts: PublishOptions,
) -> (Vec<Duration>, tagwire_wire::control::StatsRow) {
    let (c0, c1) = (site.client(0), site.client(1));
    deep_tag(&c0, tag, 512, SIZE as u32 + 256);
    let sub_opts = SubscribeOptions::default()
        .depth(512)
        .lossless()
        .through_daemon();
    let mut sub = c1.subscribe(tag, sub_opts).unwrap();
    let mut publisher = c0.publisher_with(tag, opts).unwrap();
    publisher.set_send_timeout(Duration::from_secs(60));
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let mut latencies = stream_rows(tag, 1..=n, &mut sub, &mut publisher);
    latencies.sort();
    (latencies, outbound_row(&c0, tag))
}

/// The forwarder's stream row of `tag` on `c`'s node.
fn outbound_row(c: &tagwire::Client, tag: &str) -> tagwire_wire::control::StatsRow {
    row(c, tagwire_wire::control::StatsKind::Outbound, tag)
}

/// The tag row of `tag` on `c`'s node.
fn tag_row(c: &tagwire::Client, tag: &str) -> tagwire_wire::control::StatsRow {
    row(c, tagwire_wire::control::StatsKind::Tag, tag)
}

/// `c`'s node's stats row of `kind` for `tag`.
fn row(
    c: &tagwire::Client,
    kind: tagwire_wire::control::StatsKind,
    tag: &str,
) -> tagwire_wire::control::StatsRow {
    c.stats()
        .unwrap()
        .into_iter()
        .find(|r| r.kind == kind && r.tag == tag)
        .unwrap_or_else(|| panic!("no {kind:?} row for {tag}"))
}

/// Sends the messages numbered `seqs` (the publisher's next sequence
/// numbers) and checks each arrives once, in order; the latencies of the
/// second half.
fn stream_rows(
    tag: &str,
    seqs: std::ops::RangeInclusive<u64>,
    sub: &mut tagwire::Subscriber,
    publisher: &mut tagwire::Publisher,
) -> Vec<Duration> {
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut late = Vec::new();
            let half = seqs.start() + (seqs.end() - seqs.start()) / 2;
            for i in seqs.clone() {
                let m = sub.receive(Some(Duration::from_secs(60))).unwrap();
                assert_eq!(m.seq.0, i, "{tag}: out of order, lost or duplicated");
                assert_eq!(m.payload.len(), SIZE);
                assert_eq!(
                    m.payload[..8],
                    i.to_le_bytes(),
                    "{tag}: message {i} damaged"
                );
                if i > half {
                    late.push(
                        SystemTime::now()
                            .duration_since(m.timestamp)
                            .unwrap_or_default(),
                    );
                }
            }
            assert_eq!(sub.lost(), 0);
            late
        });
        let mut m = vec![7u8; SIZE];
        for i in seqs.clone() {
            m[..8].copy_from_slice(&i.to_le_bytes());
            publisher.send(&m).unwrap();
        }
        reader.join().unwrap()
    })
}

fn pct(v: &[Duration], p: usize) -> Duration {
    v[(v.len() * p / 100).min(v.len() - 1)]
}

#[test]
fn a_paced_stream_through_a_deep_bottleneck_loses_nothing_and_reports_its_pace() {
    if skip() {
        return;
    }
    for paced in [false, true] {
        let site = Site::new(2);
        let daemons: Vec<_> = (0..2)
            .map(|i| {
                let mut cfg = site.config(i, &Find::List);
                if let Some(net) = cfg.net.as_mut() {
                    net.pacing = paced.then(PacerConfig::default);
                }
                start_in(site.lan.host(i), cfg)
            })
            .collect();
        for i in 0..2 {
            wait_until("both daemons up", || up_peers(&site.client(i)) == 1);
        }
        site.lan
            .host(0)
            .shape(100_000_000, 16_000, 1_250_000)
            .unwrap();
        let start = std::time::Instant::now();
        let (lat, row) = stream(&site, "/pacing/bulk", 3000);
        let took = start.elapsed();
        println!(
            "paced {paced}: 3000 x 8 KiB in {took:?} ({:.1} Mbit/s), latency p50 {:?} p99 {:?} \
             (8 KiB at 100 Mbit/s: 0.66 ms on the wire); {:?}",
            3000.0 * SIZE as f64 * 8e-6 / took.as_secs_f64(),
            pct(&lat, 50),
            pct(&lat, 99),
            row.counters
        );
        let get = |name: &str| row.get(name);
        if paced {
            assert!(
                get("pace_interval_ns").unwrap_or(0) > 0,
                "{:?}",
                row.counters
            );
            assert!(get("min_rtt_us").unwrap_or(0) > 0, "{:?}", row.counters);
            // It paces at about the bucket's rate (12.5 MB/s): datagrams
            // of at most 1500 bytes on the wire, one per interval. (Its
            // delivery-rate estimate runs higher: the bucket lets bursts
            // of 16 kB through at the veth's speed.)
            let t = get("pace_interval_ns").unwrap_or(1) as f64 * 1e-9;
            let paced_at = 1500.0 / t;
            assert!(paced_at > 6e6 && paced_at < 25e6, "{paced_at} B/s");
            assert!(get("rate_bytes_per_s").unwrap_or(0) > 5_000_000);
        } else {
            assert_eq!(get("pace_interval_ns"), None, "{:?}", row.counters);
        }
        // The flat-out publisher waits for the pace most of the run (its
        // 24.6 MB take about 2 s through the bucket); unpaced, the gate
        // holds it only for the window and the lossless subscriber, and
        // that is not counted.
        let held_ms = tag_row(&site.client(0), "/pacing/bulk")
            .get("paced_held_us")
            .unwrap_or(0)
            / 1000;
        println!("paced {paced}: publishers held back by the pace {held_ms} ms");
        if paced {
            assert!(held_ms > 500, "{held_ms} ms in {took:?}");
        } else {
            assert_eq!(held_ms, 0);
        }
        assert_eq!(daemons[0].forward_losses(), 0);
        drop(daemons);
    }
}

#[test]
fn a_publisher_chooses_its_streams_pacing_and_changes_it_at_run_time() {
    if skip() {
        return;
    }
    // Daemons with pacing off: the publishers ask for it.
    let site = Site::new(2);
    let daemons: Vec<_> = (0..2)
        .map(|i| start_in(site.lan.host(i), site.config(i, &Find::List)))
        .collect();
    for i in 0..2 {
        wait_until("both daemons up", || up_peers(&site.client(i)) == 1);
    }
    site.lan
        .host(0)
        .shape(100_000_000, 16_000, 1_250_000)
        .unwrap();
    // Adaptive: the stream reports the controller's estimates.
    let adaptive = PublishOptions::default().pacing(Pacing::Adaptive);
    let (lat, row) = stream_with(&site, "/pacing/adaptive", 2000, adaptive);
    println!("adaptive: p50 {:?}, {:?}", pct(&lat, 50), row.counters);
    assert!(
        row.get("pace_interval_ns").unwrap_or(0) > 0,
        "{:?}",
        row.counters
    );
    // Fixed at 2 MB/s: 400 x 8 KiB (3.3 MB on the wire) take about 1.6 s
    // where the bucket alone would let them through in 0.27 s.
    let rate = 2_000_000u64;
    let start = std::time::Instant::now();
    let fixed = PublishOptions::default().pacing(Pacing::Fixed(rate));
    let (_, row) = stream_with(&site, "/pacing/fixed", 400, fixed);
    let took = start.elapsed().as_secs_f64();
    let wire = 400.0 * (SIZE as f64 + 6.0 * 60.0);
    println!("fixed: {took:.2} s for {wire} B, {:?}", row.counters);
    assert!(
        took > 0.8 * wire / rate as f64,
        "{took} s: not held to {rate} B/s"
    );
    let t = row.get("pace_interval_ns").unwrap_or(0) as f64 * 1e-9;
    assert!(
        t > 0.0 && 1472.0 / t < 1.1 * rate as f64,
        "{t} s per datagram"
    );
    // At run time, from the subscriber's node: a paced stream goes
    // unpaced from then on.
    let (c0, c1) = (site.client(0), site.client(1));
    let tag = "/pacing/changed";
    deep_tag(&c0, tag, 512, SIZE as u32 + 256);
    let sub_opts = SubscribeOptions::default().lossless().through_daemon();
    let mut sub = c1.subscribe(tag, sub_opts).unwrap();
    let fixed = PublishOptions::default().pacing(Pacing::Fixed(rate));
    let mut publisher = c0.publisher_with(tag, fixed).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    stream_rows(tag, 1..=20, &mut sub, &mut publisher);
    assert!(outbound_row(&c0, tag).get("pace_interval_ns").is_some());
    // Every node lists the publisher with the pacing it asked.
    let me = format!("{}@{}", std::process::id(), site.lan.host(0).addr());
    let listed = |c: &tagwire::Client| -> Vec<(String, Pacing)> {
        let senders = c.channels(tag).unwrap().senders;
        senders
            .iter()
            .map(|(m, q)| (m.who.to_string(), q.pacing))
            .collect()
    };
    assert_eq!(listed(&c1), [(me.clone(), Pacing::Fixed(rate))]);
    let (ok, out) = cli(&site.socket(1), &["qos", tag]);
    assert!(
        ok && out.contains(&me) && out.contains("fixed:2000000"),
        "{out}"
    );
    let changed = c1
        .change_pacing(tag, Processes::everywhere(), Pacing::Off)
        .unwrap();
    assert_eq!(changed.len(), 1, "{changed:?}");
    wait_until("the stream is no longer paced", || {
        outbound_row(&c0, tag).get("pace_interval_ns").is_none()
    });
    wait_until("the change is listed on both nodes", || {
        listed(&c0) == [(me.clone(), Pacing::Off)] && listed(&c1) == [(me.clone(), Pacing::Off)]
    });
    // And back, from the command line of the subscriber's node.
    let (ok, out) = cli(
        &site.socket(1),
        &["qos", tag, "--publisher", &me, "--pacing", "adaptive"],
    );
    assert!(
        ok && out.contains("pacing adaptive for 1 publisher"),
        "{out}"
    );
    let (ok, out) = cli(&site.socket(0), &["qos", tag]);
    assert!(ok && out.contains("adaptive"), "{out}");
    stream_rows(tag, 21..=220, &mut sub, &mut publisher);
    wait_until("the stream is paced again", || {
        outbound_row(&c0, tag).get("pace_interval_ns").is_some()
    });
    assert_eq!(daemons[0].forward_losses(), 0);
}
