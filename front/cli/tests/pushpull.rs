//! Push-pull across hosts (network namespaces, proof/testkit): temporal
//! scaling by a proxy at the subscriber, at the publisher, on an
//! intermediate node or placed by the daemons over a topology (`auto`), and
//! falling back when the proxy's node dies; histories pulled from another
//! node.
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
/// every 1st, 10th and 100th sample with the filter where `proxy` says.
/// Returns the data bytes each host received and the copies each daemon
/// scaled out. `proxy` may give the site a topology first.
fn scaled_run(proxy: impl Fn(&mut Site) -> Proxy) -> Option<(Vec<i64>, Vec<u64>)> {
    if skip() {
        return None;
    }
    let mut site = Site::new(4);
    let proxy = proxy(&mut site);
    let (daemons, clients) = site.mesh(&Find::List);
    // Deep enough to hold the whole run (the subscribers read at the end).
    deep_tag(&clients[0], "/scaled", 2048, 2048);
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
            assert_eq!(got, want, "every {n}th, proxy at {proxy}");
            assert!(
                s.receive(Some(Duration::from_millis(200))).is_err(),
                "every {n}th: a sample more than asked for"
            );
            assert!(!s.available());
            assert_eq!(s.lost(), 0, "skipped samples are not losses");
        }
    });
    let scaled: Vec<u64> = daemons.iter().map(|d| d.scaled_out()).collect();
    println!(
        "proxy at {proxy}: hosts 1, 2, 3 (every 1st, 10th, 100th) received {:?} bytes; \
         copies scaled out by each host: {scaled:?}",
        &bytes[1..],
    );
    Some((bytes, scaled))
}

/// Host 1 got the whole stream; the bytes toward hosts 2 and 3 (every 10th
/// and 100th) dropped in proportion to n (datagram headers and the reliable
/// stream's acknowledgements make them a little more).
fn assert_scaled_bytes(bytes: &[i64]) {
    let full = bytes[1] as f64;
    assert!(
        full > 1000.0 * 1024.0,
        "host 1 got the whole stream: {full}"
    );
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
fn a_proxy_at_the_publisher_sends_a_scaled_host_only_its_samples() {
    let Some((bytes, scaled)) = scaled_run(|_| Proxy::Publisher) else {
        return;
    };
    assert_eq!(scaled, vec![900 + 990, 0, 0, 0]);
    assert_scaled_bytes(&bytes);
}

#[test]
fn a_proxy_at_the_subscriber_receives_the_whole_stream_and_drops_locally() {
    let Some((bytes, scaled)) = scaled_run(|_| Proxy::Subscriber) else {
        return;
    };
    assert_eq!(scaled, vec![0; 4]);
    let full = bytes[1] as f64;
    for (h, &b) in bytes.iter().enumerate().skip(2) {
        let share = b as f64 / full;
        assert!(share > 0.8, "host {h} got {share:.3} of the stream");
    }
}

#[test]
fn a_proxy_on_an_intermediate_node_gets_the_whole_stream_and_forwards_every_nth() {
    // Host 1 subscribes to everything and proxies for hosts 2 and 3 (a
    // subscriber on host 1 naming host 1 gets the whole stream too).
    let Some((bytes, scaled)) =
        scaled_run(|site| Proxy::Node(tagwire::NodeAddr(site.lan.host(1).addr().into())))
    else {
        return;
    };
    // The publisher's node sent one stream, to host 1, unfiltered; host 1
    // did the filtering for hosts 2 and 3.
    assert_eq!(scaled, vec![0, 900 + 990, 0, 0]);
    assert_scaled_bytes(&bytes);
}

/// The 1 kHz, 1 KiB tag of [`scaled_run`] as the topology declares it.
const SCALED_TAG: &str =
    "[[tag]]\nname = \"/scaled\"\npublisher = \"h0\"\nrate = 1000\nsize = 1024\n";

#[test]
fn auto_places_the_proxy_on_the_node_the_topology_makes_cheapest() {
    // Hub h1 (h0 - h1 - {h2, h3}): the full stream crosses h0-h1 for host
    // 1's own subscriber anyway, so filtering on h1 is cheapest (1.11 Kf
    // against 1.22 Kf at the publisher, shared-copy model). Hub h0: every
    // subscriber one hop from the publisher, which filters (1.11 Kf
    // against 1.22 Kf through h1).
    for (hub, filtered) in [(1, vec![0, 900 + 990, 0, 0]), (0, vec![900 + 990, 0, 0, 0])] {
        let links: String = (0..4)
            .filter(|&h| h != hub)
            .map(|h| format!("[[link]]\na = \"h{hub}\"\nb = \"h{h}\"\n"))
            .collect();
        let Some((bytes, scaled)) = scaled_run(|site| {
            site.set_topology(&format!("{links}{SCALED_TAG}"));
            "auto".parse().unwrap()
        }) else {
            return;
        };
        assert_eq!(scaled, filtered, "host {hub}, the hub, filtered");
        assert_scaled_bytes(&bytes);
    }
}

#[test]
fn auto_is_refused_with_a_reason_when_it_cannot_be_placed() {
    if skip() {
        return;
    }
    let mut site = Site::new(2);
    let (_d0, c0) = (site.start(0, &Find::List), site.client(0));
    c0.create_tag("/placed", Domain::Global).unwrap();
    let auto = |bound: &str| {
        SubscribeOptions::default()
            .every(10)
            .proxy(bound.parse().unwrap())
    };
    // No topology on host 0's daemon.
    let e = c0.subscribe("/placed", auto("auto")).unwrap_err();
    println!("{e}");
    assert!(matches!(e, tagwire::Error::NoPlacement(_)), "{e:?}");
    assert!(e.to_string().contains("--topology"), "{e}");
    // With one: a bound no node meets (δ is at least one period, 10 ms,
    // with the filter on the subscriber's own node one hop away).
    site.set_topology(
        "[[link]]\na = \"h0\"\nb = \"h1\"\n\
         [[tag]]\nname = \"/placed\"\npublisher = \"h0\"\nperiod = 0.01\nsize = 100\n",
    );
    let (_d1, c1) = (site.start(1, &Find::List), site.client(1));
    wait_until("host 1 knows the tag", || c1.senders("/placed").is_ok());
    let e = c1.subscribe("/placed", auto("auto:5ms")).unwrap_err();
    println!("{e}");
    assert!(matches!(e, tagwire::Error::NoPlacement(_)), "{e:?}");
    assert!(e.to_string().contains("auto:5ms"), "{e}");
    // Within reach, it is admitted.
    c1.subscribe("/placed", auto("auto:25ms")).unwrap();
}

#[test]
fn a_dead_proxy_node_falls_back_to_the_publisher_within_the_lease() {
    if skip() {
        return;
    }
    let site = Site::new(3);
    let (daemons, clients) = site.mesh(&Find::List);
    deep_tag(&clients[0], "/failover", 4096, 256);
    let via1 = Proxy::Node(tagwire::NodeAddr(site.lan.host(1).addr().into()));
    let opts = SubscribeOptions::default()
        .depth(4096)
        .every(10)
        .proxy(via1);
    let mut sub = clients[2].subscribe("/failover", opts).unwrap();
    let mut publisher = clients[0].publisher("/failover").unwrap();
    wait_until("the route through host 1", || {
        publisher.send(b"warm-up").unwrap();
        std::thread::sleep(Duration::from_millis(10));
        sub.available()
    });
    // Start counting from a clean point: drop the warm-up samples.
    while sub.receive(Some(Duration::ZERO)).is_ok() {}
    let relayed_before = daemons[1].scaled_out();
    assert!(relayed_before > 0, "host 1 filtered the warm-up samples");
    let first = publisher.send(b"x").unwrap().0 + 1;
    // 1 kHz for 4 s; host 1's link goes down after 1 s.
    const N: u64 = 4000;
    let start = Instant::now();
    for i in 0..N {
        if i == 1000 {
            site.lan.host(1).link_down().unwrap();
        }
        let due = start + Duration::from_millis(i);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        publisher.send(b"x").unwrap();
    }
    let (mut got, mut reported) = (Vec::new(), 0);
    loop {
        match sub.receive(Some(Duration::from_secs(2))) {
            Ok(m) => got.push(m.seq.0),
            Err(tagwire::Error::Overflowed { lost }) => reported += lost,
            Err(_) => break,
        }
    }
    let last = first + N;
    // The samples lost while the proxy was dead are reported, not silent.
    let wanted = (got[0]..=last).filter(|q| q % 10 == 0).count() as u64;
    assert_eq!(got.len() as u64 + reported, wanted, "a silent loss");
    let (before, after): (Vec<u64>, Vec<u64>) = got.iter().partition(|&&q| q < first + 1000);
    println!(
        "{} samples through host 1 before its link went down, {} after (from host 0), first after: {:?}, {reported} reported lost",
        before.len(),
        after.len(),
        after.first()
    );
    assert!(got.iter().all(|q| q % 10 == 0), "only every 10th sample");
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicate"
    );
    assert!(
        before.len() >= 90,
        "through the proxy while it lived: {before:?}"
    );
    // After the lease (1 s here) and the reroute, host 0 sends every 10th
    // sample itself until the end.
    assert_eq!(got.last().copied(), Some(last - last % 10));
    let resumed = after.first().copied().unwrap_or(u64::MAX);
    assert!(
        resumed < first + 1000 + 2500,
        "samples resumed {} ms after the link went down",
        resumed.saturating_sub(first + 1000)
    );
    let tail: Vec<u64> = (resumed..=last).filter(|q| q % 10 == 0).collect();
    assert_eq!(after, tail, "no gap once the publisher's node filters");
    site.lan.host(1).link_up().unwrap();
}

#[test]
fn a_history_kept_on_the_publishers_node_is_pulled_from_another_node() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    let keep = tagwire::KeepHistory {
        depth: 100,
        max_bytes: 0,
    };
    clients[0]
        .create_tag_keeping("/remote/hist", Domain::Global, Default::default(), keep)
        .unwrap();
    let mut publisher = clients[0].publisher("/remote/hist").unwrap();
    for i in 1..=300u32 {
        publisher.send(&i.to_le_bytes()).unwrap();
    }
    // Host 1 keeps no history of the tag: its daemon asks host 0's.
    let got = clients[1]
        .pull("/remote/hist", tagwire::HistoryQuery::Last(50))
        .unwrap();
    let seqs: Vec<u64> = got.iter().map(|m| m.seq.0).collect();
    assert_eq!(seqs, (251..=300).collect::<Vec<_>>());
    assert_eq!(got[0].payload, 251u32.to_le_bytes());
    assert_eq!(
        got[0].sender,
        clients[0].me(),
        "the publisher's pid and node"
    );
    // A late joiner on host 1: the last 20, then live samples, no gap, no
    // duplicate.
    let opts = SubscribeOptions::default().depth(256);
    let mut late = clients[1]
        .subscribe_with_history("/remote/hist", opts, tagwire::HistoryQuery::Last(20))
        .unwrap();
    for i in 301..=310u32 {
        publisher.send(&i.to_le_bytes()).unwrap();
    }
    let seqs: Vec<u64> = drain(&mut late, 30).iter().map(|m| m.0).collect();
    assert_eq!(seqs, (281..=310).collect::<Vec<_>>());
    assert!(late.receive(Some(Duration::from_millis(300))).is_err());
    // No node keeps one: a clear error.
    clients[0]
        .create_tag("/remote/none", Domain::Global)
        .unwrap();
    let err = clients[1]
        .pull("/remote/none", tagwire::HistoryQuery::Last(1))
        .unwrap_err();
    assert!(err.to_string().contains("any live peer"), "{err}");
}
