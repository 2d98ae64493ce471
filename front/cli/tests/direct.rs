//! Direct delivery (docs/design.md §6) end to end, between real network
//! namespaces: a node's sole subscriber of a tag gets the tag's stream on
//! its own socket; a second subscriber, or a publisher of the tag, on its
//! node moves the stream to the node's daemon, and its leaving moves it
//! back, under load, with nothing lost, repeated or reordered.
//!
//! These tests need root (network namespaces); without it each prints
//! `skipped: <reason>` and passes. `.ci/run` runs them as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tagwire::{Domain, SubscribeOptions, Subscriber};

mod common;
use common::*;

/// Data datagrams among captured UDP payloads (magic "TD", version 1,
/// kind 1: fragment, or 4: batch) that carry `marker`.
fn copies(payloads: &[Vec<u8>], marker: &str) -> usize {
    payloads
        .iter()
        .filter(|p| p.len() > 4 && p[..3] == [0x54, 0x44, 1] && matches!(p[3], 1 | 4))
        .filter(|p| p.windows(marker.len()).any(|w| w == marker.as_bytes()))
        .count()
}

/// Whether each subscriber of `tag` on `c`'s node holds its stream (the
/// `direct` counter of `tagwire stats`).
fn holding(c: &tagwire::Client, tag: &str) -> Vec<u64> {
    c.stats()
        .unwrap()
        .iter()
        .filter(|r| r.kind == tagwire::StatsKind::Subscriber && r.tag == tag)
        .map(|r| r.get("direct").unwrap())
        .collect()
}

fn wait_direct(sub: &Subscriber, direct: bool) {
    wait_until(
        if direct {
            "the subscriber holds the stream"
        } else {
            "the daemon holds the stream"
        },
        || sub.is_direct() == direct,
    );
}

#[test]
fn a_sole_remote_subscriber_gets_the_stream_on_its_own_socket_not_the_daemons() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    clients[0].create_tag("/direct", Domain::Global).unwrap();
    clients[0].create_tag("/via", Domain::Global).unwrap();
    let mut sub = clients[1]
        .subscribe("/direct", SubscribeOptions::default())
        .unwrap();
    let mut via = clients[1]
        .subscribe("/via", SubscribeOptions::default().through_daemon())
        .unwrap();
    wait_direct(&sub, true);
    assert!(!via.is_direct(), "through_daemon() was not honoured");
    let mut publisher = clients[0].publisher("/direct").unwrap();
    let mut other = clients[0].publisher("/via").unwrap();
    const N: usize = 40;
    let host = site.lan.host(1);
    let run = || {
        for i in 0..N {
            publisher.send(format!("direct-{i:04}").as_bytes()).unwrap();
            other.send(format!("daemon-{i:04}").as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let got = drain(&mut sub, N);
        for (i, (seq, _, payload)) in got.iter().enumerate() {
            assert_eq!(*seq, i as u64 + 1);
            assert_eq!(payload, format!("direct-{i:04}").as_bytes());
        }
        assert_eq!(drain(&mut via, N).len(), N);
    };
    // What reaches host 1's delivery port (7402), and what reaches any
    // other port there.
    let mut to_port = None;
    let Some(to_other) = captured(
        host,
        "udp and not dst port 7402 and not dst port 7401",
        || {
            to_port = captured(host, "udp dst port 7402", run);
        },
    ) else {
        return;
    };
    let Some(to_port) = to_port else { return };
    for i in 0..N {
        let (d, v) = (format!("direct-{i:04}"), format!("daemon-{i:04}"));
        assert_eq!(copies(&to_port, &d), 0, "{d} went to the daemon");
        // (A reliable stream may send a datagram again on a busy machine.)
        assert!(
            copies(&to_other, &d) >= 1,
            "{d} did not reach the subscriber's socket"
        );
        assert!(copies(&to_port, &v) >= 1, "{v} did not reach the daemon");
        assert_eq!(copies(&to_other, &v), 0, "{v} went elsewhere");
    }
    assert_eq!(sub.lost(), 0);
    assert!(
        sub.receive(Some(Duration::from_millis(200))).is_err(),
        "a duplicate"
    );
}

/// Sets its flag when dropped, unwinding included.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A publisher on host 0 sends numbered messages flat out (at least `n`,
/// and until the switching is over: a faster path must not end the load
/// before it) while host 1's `first` subscriber loses the stream to its
/// daemon and gets it back `rounds` times (a second subscriber comes and
/// goes, then a publisher of the tag on host 1): `first` receives every
/// message once, in order, up to the last (marked in its ninth byte).
/// `pause`: a reliable (not lossless) subscriber may fall a ring behind a
/// flat-out publisher and lose the oldest (reported): the publisher rests
/// 1 ms every 32 messages, so that losses could only be the switch's.
fn switches_under_load(opts: SubscribeOptions, n: u64, rounds: usize, pause: bool) {
    let site = Site::new(2);
    let (daemons, clients) = site.mesh(&Find::List);
    deep_tag(&clients[0], "/switch", 1024, 64);
    let mut first = clients[1].subscribe("/switch", opts).unwrap();
    wait_direct(&first, true);
    let mut publisher = clients[0].publisher("/switch").unwrap();
    publisher.set_send_timeout(Duration::from_secs(60));
    let done = AtomicBool::new(false);
    let switched = AtomicBool::new(false);
    let start = Instant::now();
    let (switches, sent) = std::thread::scope(|s| {
        // A failed check below must end the load too (the sender runs
        // until told the switching is over), or the scope waits for it
        // for ever and the failure shows as a hang.
        let _over = SetOnDrop(&switched);
        let sender = s.spawn(|| {
            let mut buf = [0u8; 64];
            for i in 1.. {
                let last = i >= n && switched.load(Ordering::Acquire);
                buf[..8].copy_from_slice(&i.to_le_bytes());
                buf[8] = u8::from(last);
                publisher.send(&buf).unwrap();
                if last {
                    return i;
                }
                if pause && i % 32 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            unreachable!()
        });
        let reader = s.spawn(|| {
            for i in 1.. {
                let m = first
                    .receive(Some(Duration::from_secs(30)))
                    .unwrap_or_else(|e| panic!("after {} of at least {n}: {e}", i - 1));
                assert_eq!(m.seq.0, i, "lost, repeated or out of order");
                assert_eq!(&m.payload[..8], &i.to_le_bytes());
                if m.payload[8] == 1 {
                    break;
                }
            }
            assert_eq!(first.lost(), 0);
            done.store(true, Ordering::Release);
            first
        });
        let mut switches = 0;
        for round in 0..rounds {
            if done.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(Duration::from_millis(40));
            // The second subscriber gets, in order and once, what comes
            // while it lives.
            let mut second = if round % 2 == 0 {
                Some(clients[1].subscribe("/switch", opts).unwrap())
            } else {
                None
            };
            let local = if round % 2 == 1 {
                Some(clients[1].publisher("/switch").unwrap())
            } else {
                None
            };
            // Counted only when seen done while the reader still reads:
            // a switch under load.
            if !done.load(Ordering::Acquire) {
                wait_until("the daemon holds the stream", || {
                    holding(&clients[1], "/switch").iter().all(|d| *d == 0)
                });
                switches += 1;
            }
            std::thread::sleep(Duration::from_millis(60));
            if let Some(sub) = &mut second {
                let mut last: HashMap<_, u64> = HashMap::new();
                while let Ok(m) = sub.receive(Some(Duration::ZERO)) {
                    let l = last.entry(m.sender).or_insert(0);
                    assert!(
                        m.seq.0 > *l,
                        "the second subscriber got {} after {l}",
                        m.seq.0
                    );
                    *l = m.seq.0;
                }
            }
            drop(second);
            drop(local);
            if !done.load(Ordering::Acquire) {
                wait_until("the subscriber holds the stream again", || {
                    holding(&clients[1], "/switch") == [1]
                });
                switches += 1;
            }
        }
        switched.store(true, Ordering::Release);
        let sent = sender.join().unwrap();
        let mut first = reader.join().unwrap();
        assert!(
            first.receive(Some(Duration::from_millis(300))).is_err(),
            "a message came twice"
        );
        wait_direct(&first, true);
        (switches, sent)
    });
    println!(
        "{sent} messages in {:?} across {switches} switches; {} resent by host 0",
        start.elapsed(),
        daemons[0].retransmissions()
    );
    assert!(
        switches >= 4,
        "only {switches} switches happened under load"
    );
}

#[test]
fn a_reliable_subscriber_keeps_every_message_in_order_while_the_stream_moves_to_its_daemon_and_back(
) {
    if skip() {
        return;
    }
    switches_under_load(SubscribeOptions::default().depth(1024), 30_000, 8, true);
}

#[test]
fn a_lossless_subscriber_keeps_every_message_in_order_while_the_stream_moves_to_its_daemon_and_back(
) {
    if skip() {
        return;
    }
    switches_under_load(SubscribeOptions::default().lossless(), 60_000, 8, false);
}

#[test]
fn a_slow_direct_lossless_subscriber_holds_its_remote_publisher_back_and_loses_nothing() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    deep_tag(&clients[0], "/slowdirect", 64, 64);
    let mut sub = clients[1]
        .subscribe("/slowdirect", SubscribeOptions::default().lossless())
        .unwrap();
    wait_direct(&sub, true);
    let mut publisher = clients[0].publisher("/slowdirect").unwrap();
    publisher.set_send_timeout(Duration::from_secs(60));
    const N: u64 = 1_500;
    let start = Instant::now();
    let sent_in = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            for i in 1..=N {
                publisher.send(&i.to_le_bytes()).unwrap();
            }
            start.elapsed()
        });
        for i in 1..=N {
            let m = sub.receive(Some(Duration::from_secs(30))).unwrap();
            assert_eq!((m.seq.0, &m.payload[..]), (i, &i.to_le_bytes()[..]));
            // About 2000 messages/s, far slower than the publisher.
            if i % 16 == 0 {
                std::thread::sleep(Duration::from_millis(8));
            }
        }
        sender.join().unwrap()
    });
    let took = start.elapsed();
    println!("{N} messages read in {took:?}; the publisher was done after {sent_in:?}");
    // The reader takes about 750 ms; a publisher not held back would be
    // done within milliseconds. Held back, it ends once the reader is
    // within a window and a ring (a few hundred messages) of the end.
    assert!(
        sent_in >= took / 2,
        "the publisher was done after {sent_in:?} of {took:?}: it was not held back"
    );
    assert_eq!(sub.lost(), 0);
    assert!(sub.is_direct());
}

#[test]
fn a_direct_subscriber_that_stays_away_holds_nobody_back_and_reports_every_message_it_dropped() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    clients[0].create_tag("/away", Domain::Global).unwrap();
    let mut sub = clients[1]
        .subscribe("/away", SubscribeOptions::default().depth(64))
        .unwrap();
    wait_direct(&sub, true);
    let mut publisher = clients[0].publisher("/away").unwrap();
    publisher.set_send_timeout(Duration::from_secs(5));
    const N: u64 = 3000;
    let start = Instant::now();
    for i in 1..=N {
        publisher.send(&i.to_le_bytes()).unwrap();
    }
    let sent_in = start.elapsed();
    // Away from `receive` all along: the library's keeper acknowledged for
    // it, keeping the newest 64.
    std::thread::sleep(Duration::from_millis(300));
    let (mut received, mut reported, mut last) = (0u64, 0u64, 0u64);
    loop {
        match sub.receive(Some(Duration::from_millis(500))) {
            Ok(m) => {
                assert!(m.seq.0 > last, "{} after {last}", m.seq.0);
                last = m.seq.0;
                received += 1;
            }
            Err(tagwire::Error::Overflowed { lost }) => reported += lost,
            Err(tagwire::Error::Timeout) => break,
            Err(e) => panic!("{e}"),
        }
    }
    println!("sent {N} in {sent_in:?}; received {received}, reported lost {reported}");
    assert_eq!(last, N, "the newest message did not arrive");
    assert_eq!(
        received + reported,
        N,
        "a loss not reported, or reported twice"
    );
    assert_eq!(sub.lost(), reported);
    assert!(received >= 64, "{received}: less than the depth kept");
}

/// Busy threads at normal priority on both cores while `f` runs: the
/// daemons' forwarder threads, which run nicer, start late (found in CI:
/// a forwarder that attached its gate only once it ran let a publisher
/// lap it, and the remote subscriber's first message was its 1437th).
fn crowded<T>(f: impl FnOnce() -> T) -> T {
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        // Also when `f` panics (the scope waits for the busy threads).
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let _stop = Stop(&stop);
        f()
    })
}

#[test]
fn a_publisher_flat_out_from_its_first_message_loses_nothing_to_remote_subscribers_on_a_crowded_machine(
) {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    const N: u64 = 2_000;
    for (round, opts) in [
        SubscribeOptions::default().lossless(),
        SubscribeOptions::default().lossless().through_daemon(),
    ]
    .into_iter()
    .enumerate()
    {
        let tag = format!("/crowded{round}");
        deep_tag(&clients[0], &tag, 64, 64);
        let mut sub = clients[1].subscribe(&tag, opts).unwrap();
        if round != 1 {
            wait_direct(&sub, true);
        }
        crowded(|| {
            let mut publisher = clients[0].publisher(&tag).unwrap();
            publisher.set_send_timeout(Duration::from_secs(30));
            std::thread::scope(|s| {
                s.spawn(|| {
                    for i in 1..=N {
                        publisher.send(&i.to_le_bytes()).unwrap();
                    }
                });
                for i in 1..=N {
                    let m = sub.receive(Some(Duration::from_secs(30))).unwrap();
                    assert_eq!(
                        (m.seq.0, &m.payload[..]),
                        (i, &i.to_le_bytes()[..]),
                        "{tag}"
                    );
                }
            });
        });
        assert_eq!(sub.lost(), 0);
    }
}

/// A subscriber holding its stream that asks for `busy_poll` looks at its
/// socket before it sleeps (it slept in `poll` at once, whatever the
/// option said): lone messages 2 ms apart find it awake. Without the
/// option, each of them wakes it.
#[test]
fn a_busy_polling_direct_subscriber_finds_lone_messages_awake() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    const N: u64 = 50;
    let mut slept = Vec::new();
    for (tag, opts) in [
        (
            "/spin",
            // Far above the 2 ms gaps, so that a publisher this machine
            // holds up for a while still finds its subscriber awake.
            SubscribeOptions::default().busy_poll(Duration::from_millis(200)),
        ),
        ("/sleep", SubscribeOptions::default()),
    ] {
        clients[0].create_tag(tag, Domain::Global).unwrap();
        let mut sub = clients[1].subscribe(tag, opts).unwrap();
        wait_direct(&sub, true);
        let mut publisher = clients[0].publisher(tag).unwrap();
        let sleeps = std::thread::scope(|s| {
            let h = s.spawn(|| {
                for i in 0..N {
                    std::thread::sleep(Duration::from_millis(2));
                    publisher.send(format!("{tag}-{i}").as_bytes()).unwrap();
                }
            });
            let before = sub.sleeps();
            for i in 0..N {
                let m = sub.receive(Some(Duration::from_secs(5))).unwrap();
                assert_eq!(m.payload, format!("{tag}-{i}").as_bytes());
            }
            h.join().unwrap();
            sub.sleeps() - before
        });
        slept.push(sleeps);
    }
    let (spinning, sleeping) = (slept[0], slept[1]);
    println!("sleeps for {N} lone messages: busy-polling {spinning}, blocking {sleeping}");
    assert!(
        sleeping >= N / 2,
        "a blocking subscriber slept {sleeping} times"
    );
    assert!(
        spinning <= N / 10,
        "a busy-polling subscriber slept {spinning} times"
    );
}

/// A subscriber holding its stream looks at its socket for `flow_poll`
/// before it sleeps once the stream flows, as a ring's reader does
/// (`tests/flow.rs` in the client library): bursts 1 ms apart, each sent
/// once the one before was read, find it awake when it polls far longer
/// than that, and wake it once each when it does not poll. (It slept in
/// `poll` at once unless `busy_poll` was set; what the poll saves flat
/// out, its sender's wake-up of it per send, is measured by `tagwire
/// perf throughput --remote`.)
#[test]
fn a_direct_subscriber_whose_stream_flows_polls_before_it_sleeps() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    const BURSTS: u64 = 60;
    const BURST: u64 = 8;
    let mut slept = Vec::new();
    for (tag, flow_poll) in [
        ("/flow-poll", Duration::from_millis(500)),
        ("/flow-sleep", Duration::ZERO),
    ] {
        clients[0].create_tag(tag, Domain::Global).unwrap();
        let mut sub = clients[1]
            .subscribe(tag, SubscribeOptions::default().flow_poll(flow_poll))
            .unwrap();
        wait_direct(&sub, true);
        let mut publisher = clients[0].publisher(tag).unwrap();
        let taken = std::sync::atomic::AtomicU64::new(0);
        let sleeps = std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..BURSTS * BURST {
                    if i > 0 && i % BURST == 0 {
                        while taken.load(Ordering::Acquire) < i {
                            std::thread::sleep(Duration::from_micros(100));
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    publisher.send(&i.to_le_bytes()).unwrap();
                }
            });
            let mut buf = Vec::new();
            let mut before = 0;
            for i in 0..BURSTS * BURST {
                sub.receive_into(Some(Duration::from_secs(10)), &mut buf)
                    .unwrap();
                assert_eq!(buf, i.to_le_bytes());
                if i == BURST - 1 {
                    // From the second burst on: the first one finds the
                    // stream not flowing yet.
                    before = sub.sleeps();
                }
                taken.store(i + 1, Ordering::Release);
            }
            sub.sleeps() - before
        });
        assert_eq!(sub.lost(), 0);
        slept.push(sleeps);
    }
    let (polling, sleeping) = (slept[0], slept[1]);
    println!("sleeps for {BURSTS} bursts: polling {polling}, not polling {sleeping}");
    assert!(
        sleeping >= BURSTS - 1,
        "a direct subscriber not polling slept {sleeping} times"
    );
    assert!(
        polling <= 2,
        "a polling direct subscriber slept {polling} times"
    );
}

/// The acknowledgements of a reliable stream reach the sending daemon's
/// replies socket (steered there by the delivery port's program, read by
/// the busy forwarder or its watcher: `runtime/daemon/src/replies.rs`),
/// and a flat-out stream that needs them to go on arrives whole, in order.
/// (Which of the two reads them depends on timing: unpinned, the forwarder
/// has mostly left its loop when one comes, and the watcher reads it.)
#[test]
fn acknowledgements_reach_the_senders_replies_socket_and_the_stream_flows() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, clients) = site.mesh(&Find::List);
    let tag = "/replies";
    deep_tag(&clients[0], tag, 64, 2048);
    let mut sub = clients[1]
        .subscribe(tag, SubscribeOptions::default().lossless())
        .unwrap();
    wait_direct(&sub, true);
    let before = counter(&clients[0], tagwire::StatsKind::Node, "", "acks_steered");
    // Far more datagrams than a window holds (1024): the stream stops
    // unless acknowledgements come back.
    const N: u64 = 20_000;
    let payload = vec![0x5au8; 2000];
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut publisher = clients[0].publisher(tag).unwrap();
            publisher.set_send_timeout(Duration::from_secs(30));
            for i in 1..=N {
                let mut m = payload.clone();
                m[..8].copy_from_slice(&i.to_le_bytes());
                publisher.send(&m).unwrap();
            }
        });
        for i in 1..=N {
            let m = sub.receive(Some(Duration::from_secs(30))).unwrap();
            assert_eq!(m.seq.0, i);
            assert_eq!(m.payload[..8], i.to_le_bytes());
        }
    });
    assert_eq!(sub.lost(), 0);
    let steered = counter(&clients[0], tagwire::StatsKind::Node, "", "acks_steered") - before;
    let woken = counter(
        &clients[0],
        tagwire::StatsKind::Node,
        "",
        "ack_watch_wakeups",
    );
    println!("acknowledgements read from the replies socket: {steered}, watcher wake-ups {woken}");
    assert!(steered > 0, "no acknowledgement reached the replies socket");
    // Hostile ones: an acknowledgement's first bytes on a datagram too
    // long for one (cut when read), and on one too short to decode, from
    // host 1: read from the replies socket, counted as malformed.
    let (a0, a1) = (site.lan.host(0).addr(), site.lan.host(1).addr());
    let (malformed, read) = (
        counter(
            &clients[0],
            tagwire::StatsKind::Node,
            "",
            "malformed_datagrams",
        ),
        counter(&clients[0], tagwire::StatsKind::Node, "", "acks_steered"),
    );
    let mut long = b"TD\x01\x03".to_vec();
    long.resize(3000, 7);
    let forged = [long, b"TD\x01\x03\x00".to_vec()];
    site.lan
        .host(1)
        .spawn(move || send_from(a1, a0, &forged))
        .unwrap()
        .join()
        .unwrap();
    wait_until("the forged acknowledgements counted", || {
        counter(
            &clients[0],
            tagwire::StatsKind::Node,
            "",
            "malformed_datagrams",
        ) >= malformed + 2
    });
    assert!(counter(&clients[0], tagwire::StatsKind::Node, "", "acks_steered") >= read + 2);
}
