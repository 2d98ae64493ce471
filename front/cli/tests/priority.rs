//! Channel priorities between two hosts (network namespaces): a
//! subscription's packet class (`SubscribeOptions::priority`) is the DSCP
//! its datagrams carry on the wire (checked with tshark), and a critical
//! channel passes a bulk channel that saturates the sending host's link (an
//! `htb` class of 50 Mbit/s with a `pfifo_fast` leaf, the channel
//! prioritisation paper's setup) where a normal one waits behind it.
//!
//! These tests need root (network namespaces) and tshark for the first;
//! without them they print `skipped: <reason>` and pass. `.ci/run`
//! installs tshark and runs them as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use tagwire::{Priority, SubscribeOptions};

mod common;
use common::*;

#[test]
fn each_class_leaves_the_sending_host_with_its_dscp() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, _clients) = site.mesh(&Find::List);
    let (c0, c1) = (site.client(0), site.client(1));
    let classes = [
        ("/prio/low", Priority::Low, 10),
        ("/prio/normal", Priority::Normal, 0),
        ("/prio/high", Priority::High, 36),
        ("/prio/critical", Priority::Critical, 44),
        ("/prio/raw", Priority::Dscp(18), 18),
    ];
    let mut subs = Vec::new();
    for (tag, class, _) in classes {
        c0.create_tag(tag, tagwire::Domain::Global).unwrap();
        let opts = SubscribeOptions::default().priority(class);
        subs.push(c1.subscribe(tag, opts).unwrap());
        wait_until("the subscriber is known on host 0", || {
            !c0.receivers(tag).unwrap().is_empty()
        });
    }
    let from = site.lan.host(0).addr();
    let filter = format!("udp and src host {from}");
    let Some(rows) = captured_fields(
        site.lan.host(1),
        &filter,
        &["ip.dsfield.dscp", "data.data"],
        || {
            for (tag, _, _) in classes {
                let mut p = c0.publisher(tag).unwrap();
                for i in 0..20u32 {
                    p.send(&[i as u8; 600]).unwrap();
                }
            }
            for s in &mut subs {
                for _ in 0..20 {
                    s.receive(Some(Duration::from_secs(10))).unwrap();
                }
            }
        },
    ) else {
        return;
    };
    for (tag, class, dscp) in classes {
        let seen = dscps_of(&rows, tag);
        println!("{tag} ({class}): DSCP {seen:?}");
        assert!(!seen.is_empty(), "{tag}: no datagram captured");
        assert!(
            seen.iter().all(|d| *d == dscp),
            "{tag} ({class}): DSCP {seen:?}, not {dscp}"
        );
    }
}

#[test]
fn a_publishers_class_is_the_floor_of_what_its_node_sends() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, _clients) = site.mesh(&Find::List);
    let (c0, c1) = (site.client(0), site.client(1));
    // A default subscriber: the critical publisher's class goes out; a
    // low publisher does not lower a critical subscriber's.
    let cases = [
        (
            "/prio/pub-critical",
            Priority::Critical,
            Priority::Normal,
            44,
        ),
        ("/prio/pub-low", Priority::Low, Priority::Critical, 44),
        ("/prio/pub-default", Priority::Normal, Priority::Low, 10),
    ];
    let mut subs = Vec::new();
    for (tag, _, asked, _) in cases {
        c0.create_tag(tag, tagwire::Domain::Global).unwrap();
        let opts = SubscribeOptions::default().priority(asked);
        subs.push(c1.subscribe(tag, opts).unwrap());
        wait_until("the subscriber is known on host 0", || {
            !c0.receivers(tag).unwrap().is_empty()
        });
    }
    let filter = format!("udp and src host {}", site.lan.host(0).addr());
    let Some(rows) = captured_fields(
        site.lan.host(1),
        &filter,
        &["ip.dsfield.dscp", "data.data"],
        || {
            // Held until every message arrived: a publisher's class goes
            // with its right, so what its node still forwards after it
            // closes leaves at the class of the rights that remain.
            let mut publishers = Vec::new();
            for (tag, class, _, _) in cases {
                let opts = tagwire::PublishOptions::default().priority(class);
                let mut p = c0.publisher_with(tag, opts).unwrap();
                for i in 0..20u32 {
                    p.send(&[i as u8; 600]).unwrap();
                }
                publishers.push(p);
            }
            for s in &mut subs {
                for _ in 0..20 {
                    s.receive(Some(Duration::from_secs(10))).unwrap();
                }
            }
        },
    ) else {
        return;
    };
    for (tag, class, asked, dscp) in cases {
        let seen = dscps_of(&rows, tag);
        println!("{tag} (publisher {class}, subscriber {asked}): DSCP {seen:?}");
        assert!(!seen.is_empty(), "{tag}: no datagram captured");
        assert!(
            seen.iter().all(|d| *d == dscp),
            "{tag}: DSCP {seen:?}, not {dscp}"
        );
    }
}

/// The DSCP of every captured datagram (rows of DSCP and data, as
/// tshark printed them) that carries `tag`.
fn dscps_of(rows: &[Vec<String>], tag: &str) -> Vec<u32> {
    rows.iter()
        .filter(|r| r.len() == 2)
        .filter(|r| {
            let data = hex(r[1].trim());
            data.windows(tag.len()).any(|w| w == tag.as_bytes())
        })
        .map(|r| r[0].trim().parse().unwrap())
        .collect()
}

/// One-way latencies of a 256 B message every 5 ms on tag `ping` (class
/// `class`) from host 0 to host 1 while host 0 publishes 1400 B messages
/// flat out on `/prio/bulk` to host 1.
fn ping_behind_bulk(site: &Site, ping: &str, class: Priority) -> Vec<Duration> {
    let (c0, c1) = (site.client(0), site.client(1));
    let bulk = "/prio/bulk";
    deep_tag(&c0, bulk, 256, 2048);
    c0.create_tag(ping, tagwire::Domain::Global).unwrap();
    let mut bulk_sub = c1.subscribe(bulk, SubscribeOptions::default()).unwrap();
    let mut ping_sub = c1
        .subscribe(ping, SubscribeOptions::default().priority(class))
        .unwrap();
    for tag in [bulk, ping] {
        wait_until("the subscriber is known on host 0", || {
            !c0.receivers(tag).unwrap().is_empty()
        });
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut p = c0.publisher(bulk).unwrap();
            p.set_send_timeout(Duration::from_secs(30));
            let m = vec![3u8; 1400];
            while !stop.load(Ordering::Relaxed) {
                p.send(&m).unwrap();
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let _ = bulk_sub.receive(Some(Duration::from_millis(200)));
            }
        });
        // The bulk stream fills the link's queue first.
        std::thread::sleep(Duration::from_secs(1));
        let mut p = c0.publisher(ping).unwrap();
        let mut lat = Vec::new();
        for _ in 0..200 {
            p.send(&[1u8; 256]).unwrap();
            let m = ping_sub.receive(Some(Duration::from_secs(10))).unwrap();
            lat.push(
                SystemTime::now()
                    .duration_since(m.timestamp)
                    .unwrap_or_default(),
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        lat.sort();
        lat
    })
}

fn pct(v: &[Duration], p: usize) -> Duration {
    v[(v.len() * p / 100).min(v.len() - 1)]
}

#[test]
fn a_critical_channel_passes_bulk_traffic_that_saturates_the_link() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, _clients) = site.mesh(&Find::List);
    site.lan.host(0).shape_htb(50_000_000).unwrap();
    let normal = ping_behind_bulk(&site, "/prio/ping-normal", Priority::Normal);
    let critical = ping_behind_bulk(&site, "/prio/ping-critical", Priority::Critical);
    println!(
        "256 B beside 1400 B flat out through 50 Mbit/s (htb, pfifo_fast): \
         normal p50 {:?} p99 {:?}; critical p50 {:?} p99 {:?}",
        pct(&normal, 50),
        pct(&normal, 99),
        pct(&critical, 50),
        pct(&critical, 99)
    );
    // Behind the bulk tag's queue a normal message waits milliseconds; a
    // critical one goes first (band 0). The margins are wide: this test
    // says which queue a class waits in, `tagwire perf` says how long.
    assert!(
        pct(&critical, 50) * 5 <= pct(&normal, 50),
        "critical p50 {:?}, normal p50 {:?}",
        pct(&critical, 50),
        pct(&normal, 50)
    );
    assert!(
        pct(&normal, 50) >= Duration::from_millis(5),
        "the bulk stream did not fill the queue: normal p50 {:?}",
        pct(&normal, 50)
    );
}

/// `Client::set_channel_qos` (`tagwire qos TAG --class C`) on the
/// subscriber's host while a reliable stream runs at 10 kHz: its datagrams
/// leave the publisher's host with the new DSCP within 100 ms of the call,
/// none with the old one after that, and the subscriber gets every message
/// once, in order.
#[test]
fn a_class_changed_at_run_time_takes_effect_within_100_ms_losing_nothing() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    live_change(&site, "/prio/live", |clients| {
        clients[1]
            .set_channel_qos("/prio/live", None, Priority::Critical)
            .unwrap()
    });
}

/// The same change asked on a third host, neither the publisher's nor the
/// subscriber's (`Client::change_channels`, `tagwire qos TAG --class C
/// --subscriber @NODE`): the subscriber's host restates it, and the
/// publisher's host carries it within 100 ms of the call.
#[test]
fn a_class_changed_from_a_third_node_takes_effect_within_100_ms_losing_nothing() {
    if skip() {
        return;
    }
    let site = Site::new(3);
    let subscriber_host = tagwire::NodeAddr(site.lan.host(1).addr().into());
    live_change(&site, "/prio/remote", |clients| {
        let whose = tagwire::Processes::on(subscriber_host);
        clients[2]
            .change_channels("/prio/remote", whose, Some(Priority::Critical), None)
            .unwrap()
    });
}

/// A reliable stream at 10 kHz from host 0 to a subscriber on host 1, and
/// `change` (given every host's client) moving the subscription to the
/// critical class in the middle of it: see the two tests above.
fn live_change(
    site: &Site,
    tag: &str,
    change: impl FnOnce(&[tagwire::Client]) -> Vec<tagwire::Member>,
) {
    let (_daemons, clients) = site.mesh(&Find::List);
    let (c0, c1) = (&clients[0], &clients[1]);
    deep_tag(c0, tag, 1024, 512);
    let mut sub = c1.subscribe(tag, SubscribeOptions::default()).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    const N: u32 = 15_000;
    let epoch = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let mut asked = Duration::ZERO;
    let filter = format!("udp and src host {}", site.lan.host(0).addr());
    let fields = ["frame.time_epoch", "ip.dsfield.dscp", "data.data"];
    let Some(rows) = captured_fields(site.lan.host(1), &filter, &fields, || {
        std::thread::scope(|s| {
            let publisher = s.spawn(|| {
                let mut p = c0.publisher(tag).unwrap();
                p.set_send_timeout(Duration::from_secs(30));
                let start = std::time::Instant::now();
                for i in 0..N {
                    // One every 100 µs, on a schedule (no drift).
                    let due = start + Duration::from_micros(100) * i;
                    if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let mut m = [0u8; 200];
                    m[..4].copy_from_slice(&i.to_le_bytes());
                    p.send(&m).unwrap();
                }
            });
            let receiver = s.spawn(|| {
                let mut got = Vec::with_capacity(N as usize);
                while got.len() < N as usize {
                    let m = sub.receive(Some(Duration::from_secs(10))).unwrap();
                    got.push(u32::from_le_bytes(m.payload[..4].try_into().unwrap()));
                }
                got
            });
            std::thread::sleep(Duration::from_millis(600));
            asked = epoch(SystemTime::now());
            let changed = change(&clients);
            assert_eq!(changed.len(), 1, "one subscription changes class");
            publisher.join().unwrap();
            let got = receiver.join().unwrap();
            let expected: Vec<u32> = (0..N).collect();
            assert!(got == expected, "messages lost, repeated or reordered");
        });
    }) else {
        return;
    };
    // (time, DSCP) of the tag's data datagrams, in capture order.
    let seen: Vec<(Duration, u32)> = rows
        .iter()
        .filter(|r| r.len() == 3)
        .filter(|r| {
            hex(r[2].trim())
                .windows(tag.len())
                .any(|w| w == tag.as_bytes())
        })
        .map(|r| {
            let t: f64 = r[0].trim().parse().unwrap();
            (Duration::from_secs_f64(t), r[1].trim().parse().unwrap())
        })
        .collect();
    let first = seen
        .iter()
        .find(|(_, d)| *d == 44)
        .map(|(t, _)| *t)
        .expect("no datagram with the critical class's DSCP");
    let before = seen.iter().filter(|(_, d)| *d == 0).count();
    let late = seen.iter().filter(|(t, d)| *d == 0 && *t > first).count();
    println!(
        "class change: first critical datagram {:?} after the call; {before} normal \
         datagrams before it, {late} after",
        first.saturating_sub(asked)
    );
    assert!(before > 0, "the stream did not run before the change");
    assert!(
        first.saturating_sub(asked) <= Duration::from_millis(100),
        "the new class took {:?}",
        first.saturating_sub(asked)
    );
    assert_eq!(late, 0, "datagrams of the old class after the new one");
}

/// `tagwire qos TAG --class C --sched S --subscriber @NAME` on the
/// publisher's host changes the subscription the subscriber's host holds
/// (the node named as `tagwire nodes` names it), and when the command
/// returns the publisher's host already knows it; a node that is not up,
/// and a process that does not subscribe there, are errors that say so.
#[test]
fn the_cli_changes_a_subscription_on_another_node_named_by_its_name() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    let (c0, c1) = (&clients[0], &clients[1]);
    let tag = "/prio/cli";
    c0.create_tag(tag, tagwire::Domain::Global).unwrap();
    let _sub = c1.subscribe(tag, SubscribeOptions::default()).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let qos = |whose: &str| {
        let args = ["qos", tag, "--class", "high", "--sched", "other:5"];
        cli(
            &site.socket(0),
            &[&args[..], &["--subscriber", whose]].concat(),
        )
    };
    let host1 = site.lan.host(1);
    let (ok, out) = qos(&format!("@{}", host1.name()));
    let who = format!("{}@{}", std::process::id(), host1.addr());
    assert!(
        ok && out.contains("class high and policy other:5 for 1") && out.contains(&who),
        "{out}"
    );
    let seen: Vec<_> = c0.channels(tag).unwrap().receivers;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1.priority, Priority::High, "{seen:?}");
    assert_eq!(
        seen[0].1.sched,
        tagwire::Sched::Other { nice: 5 },
        "{seen:?}"
    );
    let (ok, out) = qos("@10.99.0.9");
    assert!(!ok && out.contains("not up"), "{out}");
    let (ok, out) = qos(&format!("4242@{}", host1.addr()));
    assert!(
        !ok && out.contains("no subscription of process 4242"),
        "{out}"
    );
}

/// A publisher's class changed at run time from its subscriber's node
/// (`tagwire qos TAG --class critical --publisher @NODE`): the
/// publisher's node restates its send right and the tag leaves it with
/// DSCP 44 from then on, where it left with 0 before; `--publisher` for
/// a process that holds no send right there says so.
#[test]
fn a_publishers_class_changed_from_another_node_marks_its_datagrams() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    let (c0, c1) = (&clients[0], &clients[1]);
    let tag = "/prio/pub-live";
    c0.create_tag(tag, tagwire::Domain::Global).unwrap();
    let mut sub = c1.subscribe(tag, SubscribeOptions::default()).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let mut p = c0.publisher(tag).unwrap();
    let host0 = site.lan.host(0);
    let qos = |whose: &str| {
        let args = ["qos", tag, "--class", "critical", "--publisher", whose];
        cli(&site.socket(1), &args)
    };
    let filter = format!("udp and src host {}", host0.addr());
    let burst = |sub: &mut tagwire::Subscriber, p: &mut tagwire::Publisher, mark: u8| {
        for _ in 0..20 {
            p.send(&[mark; 600]).unwrap();
        }
        for _ in 0..20 {
            sub.receive(Some(Duration::from_secs(10))).unwrap();
        }
    };
    let mut out = String::new();
    let Some(rows) = captured_fields(
        site.lan.host(1),
        &filter,
        &["ip.dsfield.dscp", "data.data"],
        || {
            burst(&mut sub, &mut p, 1);
            let (ok, text) = qos(&format!("@{}", host0.name()));
            assert!(ok, "{text}");
            out = text;
            burst(&mut sub, &mut p, 2);
        },
    ) else {
        return;
    };
    assert!(out.contains("class critical for 1 publisher"), "{out}");
    let marked = |mark: u8| -> Vec<u32> {
        rows.iter()
            .filter(|r| r.len() == 2)
            .filter(|r| {
                let data = hex(r[1].trim());
                data.windows(tag.len()).any(|w| w == tag.as_bytes())
                    && data.windows(64).any(|w| w.iter().all(|b| *b == mark))
            })
            .map(|r| r[0].trim().parse().unwrap())
            .collect()
    };
    let (before, after) = (marked(1), marked(2));
    println!("publisher class change: DSCP before {before:?}, after {after:?}");
    assert!(
        !before.is_empty() && before.iter().all(|d| *d == 0),
        "{before:?}"
    );
    assert!(
        !after.is_empty() && after.iter().all(|d| *d == 44),
        "{after:?}"
    );
    let (ok, text) = qos(&format!("4242@{}", host0.addr()));
    assert!(
        !ok && text.contains("no send right of process 4242"),
        "{text}"
    );
}

/// A subscription over TCP (`SubscribeOptions::tcp`) of the critical
/// class: the connection that brings it its messages leaves the
/// publisher's host with DSCP 44 (so the host queues its segments in
/// `pfifo_fast` band 0), and a class changed at run time (`tagwire qos
/// TAG --class low --subscriber @NODE`) marks the same connection's next
/// segments with AF11 instead.
#[test]
fn a_tcp_subscriptions_class_marks_its_connection_and_follows_a_change() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    let (c0, c1) = (&clients[0], &clients[1]);
    let tag = "/prio/tcp";
    c0.create_tag(tag, tagwire::Domain::Global).unwrap();
    let opts = SubscribeOptions::default()
        .tcp()
        .priority(Priority::Critical);
    let mut sub = c1.subscribe(tag, opts).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let mut p = c0.publisher(tag).unwrap();
    let burst = |sub: &mut tagwire::Subscriber, p: &mut tagwire::Publisher, mark: u8| {
        for _ in 0..20 {
            p.send(&[mark; 600]).unwrap();
        }
        for _ in 0..20 {
            let m = sub.receive(Some(Duration::from_secs(10))).unwrap();
            assert_eq!(m.payload[0], mark);
        }
    };
    let host1 = site.lan.host(1);
    let filter = format!("tcp and src host {}", site.lan.host(0).addr());
    let mut out = String::new();
    let Some(rows) = captured_fields(host1, &filter, &["ip.dsfield.dscp", "tcp.payload"], || {
        burst(&mut sub, &mut p, 1);
        let args = ["qos", tag, "--class", "low"];
        let whose = format!("@{}", host1.name());
        let (ok, text) = cli(
            &site.socket(0),
            &[&args[..], &["--subscriber", &whose]].concat(),
        );
        assert!(ok, "{text}");
        out = text;
        burst(&mut sub, &mut p, 2);
    }) else {
        return;
    };
    assert!(out.contains("class low"), "{out}");
    // Segments that carry a run of a burst's mark (the connection's own
    // handshake and acknowledgements carry none).
    let marked = |mark: u8| -> Vec<u32> {
        rows.iter()
            .filter(|r| r.len() == 2)
            .filter(|r| {
                hex(r[1].trim())
                    .windows(64)
                    .any(|w| w.iter().all(|b| *b == mark))
            })
            .map(|r| r[0].trim().parse().unwrap())
            .collect()
    };
    let (before, after) = (marked(1), marked(2));
    println!("TCP subscription's class: DSCP {before:?}, after the change {after:?}");
    assert!(
        !before.is_empty() && before.iter().all(|d| *d == 44),
        "{before:?}"
    );
    assert!(
        !after.is_empty() && after.iter().all(|d| *d == 10),
        "{after:?}"
    );
}

/// `tagwire qos TAG` on the sending node lists the tag's reliable stream
/// to each node with the class its datagrams carry now, and per class the
/// datagrams the stream put out while it had it: a class changed at run
/// time starts a tally of its own, the old one stays.
#[test]
fn qos_counts_each_classes_datagrams_on_the_sending_node() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    let (c0, c1) = (&clients[0], &clients[1]);
    let tag = "/prio/counted";
    c0.create_tag(tag, tagwire::Domain::Global).unwrap();
    let critical = SubscribeOptions::default().priority(Priority::Critical);
    let mut sub = c1.subscribe(tag, critical).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let mut p = c0.publisher(tag).unwrap();
    let mut burst = || {
        for _ in 0..20 {
            p.send(&[7; 600]).unwrap();
        }
        for _ in 0..20 {
            sub.receive(Some(Duration::from_secs(10))).unwrap();
        }
    };
    let list = || {
        let (ok, out) = cli(&site.socket(0), &["qos", tag]);
        assert!(ok, "{out}");
        out
    };
    let to = site.lan.host(1).addr().to_string();
    // The stream's line: `ADDR CLASS SENT RESENT ACKED UNACKED`.
    let stream = |out: &str| -> Option<Vec<String>> {
        let line = out.lines().find(|l| l.starts_with(&to))?;
        Some(line.split_whitespace().map(str::to_owned).collect())
    };
    let stream_class = |out: &str| stream(out).and_then(|f| f.get(1).cloned());
    // Sent and resent: every datagram the stream put out.
    let put_out = |out: &str| -> u64 {
        let f = stream(out).unwrap_or_default();
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        n(2) + n(3)
    };
    // The per-class lines follow the `CLASS DATAGRAMS` heading.
    let tally = |out: &str, class: &str| -> Option<u64> {
        let mut lines = out.lines().skip_while(|l| !l.starts_with("CLASS "));
        lines.next()?;
        let line = lines.find(|l| l.split_whitespace().next() == Some(class))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    burst();
    let out = list();
    println!("{out}");
    // Messages go several to a datagram: count datagrams, not messages.
    assert_eq!(stream_class(&out).as_deref(), Some("critical"), "{out}");
    let critical = tally(&out, "critical").unwrap_or(0);
    assert!(critical > 0 && critical == put_out(&out), "{out}");
    assert_eq!(tally(&out, "low"), None, "{out}");
    let (ok, text) = cli(&site.socket(0), &["qos", tag, "--class", "low"]);
    assert!(ok && text.contains("class low for 1 subscriber"), "{text}");
    wait_until("the stream carries the new class", || {
        stream_class(&list()).as_deref() == Some("low")
    });
    burst();
    let out = list();
    println!("{out}");
    let (low, critical_after) = (tally(&out, "low"), tally(&out, "critical"));
    assert!(low.is_some_and(|n| n > 0), "{out}");
    assert!(critical_after.is_some_and(|n| n >= critical), "{out}");
    assert_eq!(
        low.unwrap_or(0) + critical_after.unwrap_or(0),
        put_out(&out),
        "{out}"
    );
}
