//! Semantics of every API call, against an in-process daemon on a private socket.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tagwire::{
    Client, ClientOptions, Domain, Error, HistoryQuery, KeepHistory, RingParams, SubscribeOptions,
};
use tagwire_daemon::{Config, Daemon};

const T: Option<Duration> = Some(Duration::from_secs(5));

struct Node {
    _dir: tempfile::TempDir,
    daemon: Option<Daemon>,
    opts: ClientOptions,
}

fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let daemon = Daemon::start(Config {
        socket: socket.clone(),
        ..Config::default()
    })
    .unwrap();
    let opts = ClientOptions {
        socket,
        autostart: false,
        ..ClientOptions::default()
    };
    Node {
        _dir: dir,
        daemon: Some(daemon),
        opts,
    }
}

impl Node {
    fn client(&self) -> Client {
        Client::with_options(self.opts.clone()).unwrap()
    }
}

fn wait_until(mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "watchdog: condition never became true"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_message_arrives_with_seq_sender_and_timestamp() {
    let n = node();
    let c = n.client();
    assert!(c.create_tag("/robot/laser", Domain::Global).unwrap());
    assert!(
        !c.create_tag("/robot/laser", Domain::Global).unwrap(),
        "creating an existing tag is not an error"
    );
    let mut sub = c
        .subscribe("/robot/laser", SubscribeOptions::default())
        .unwrap();
    let mut publ = c.publisher("/robot/laser").unwrap();
    let before = std::time::SystemTime::now();
    assert_eq!(publ.send(b"scan").unwrap().0, 1);
    assert_eq!(publ.send(b"scan2").unwrap().0, 2);
    let m = sub.receive(T).unwrap();
    assert_eq!(m.payload, b"scan");
    assert_eq!(m.seq.0, 1);
    assert_eq!(m.sender.pid.0, std::process::id());
    assert_eq!(m.sender, c.me());
    assert!(m.timestamp >= before - Duration::from_secs(1));
    assert_eq!(sub.receive(T).unwrap().seq.0, 2);
}

#[test]
fn a_tag_name_of_the_longest_allowed_length_works_end_to_end() {
    let n = node();
    let c = n.client();
    for len in [241, 242, 249, 250, 255] {
        let name = format!("/{}", "n".repeat(len - 1));
        assert_eq!(name.len(), len);
        assert!(
            c.create_tag(&name, Domain::Global).unwrap(),
            "{len}-byte name"
        );
        let mut sub = c.subscribe(&name, SubscribeOptions::default()).unwrap();
        c.publisher(&name).unwrap().send(b"x").unwrap();
        assert_eq!(sub.receive(T).unwrap().payload, b"x");
    }
    let too_long = format!("/{}", "n".repeat(255));
    assert!(matches!(
        c.create_tag(&too_long, Domain::Global),
        Err(Error::InvalidName(_))
    ));
}

#[test]
fn a_depth_beyond_the_rings_slots_is_refused_and_withdrawn() {
    let n = node();
    let c = n.client();
    c.create_tag_with(
        "/deep",
        Domain::Global,
        RingParams {
            slots: 32,
            slot_payload: 0,
        },
    )
    .unwrap();
    match c.subscribe("/deep", SubscribeOptions::default().depth(33)) {
        Err(Error::DepthTooLarge { depth, slots, .. }) => assert_eq!((depth, slots), (33, 32)),
        other => panic!("expected DepthTooLarge, got {other:?}"),
    }
    wait_until(|| c.receivers("/deep").unwrap().is_empty());
    let _ok = c
        .subscribe("/deep", SubscribeOptions::default().depth(32))
        .unwrap();
    let _lossless = c
        .subscribe("/deep", SubscribeOptions::default().depth(1000).lossless())
        .unwrap();
    assert!(!c.receivers("/deep").unwrap().is_empty());
}

#[test]
fn an_unset_depth_fits_a_small_ring_and_an_explicit_default_is_checked_like_any() {
    let n = node();
    let c = n.client();
    let small = RingParams {
        slots: 16,
        slot_payload: 0,
    };
    c.create_tag_with("/small", Domain::Global, small).unwrap();
    assert_eq!(SubscribeOptions::default().depth, None);
    assert_eq!(SubscribeOptions::default().depth_on(16), 16);
    assert_eq!(
        SubscribeOptions::default().depth_on(256),
        tagwire::DEFAULT_DEPTH
    );
    // Asking for 64 is asking, whether or not it is the default's value.
    match c.subscribe("/small", SubscribeOptions::default().depth(64)) {
        Err(Error::DepthTooLarge { depth, slots, .. }) => assert_eq!((depth, slots), (64, 16)),
        other => panic!("expected DepthTooLarge, got {other:?}"),
    }
    // Unset: the ring's 16 slots, and it keeps 16 unread messages.
    let mut sub = c.subscribe("/small", SubscribeOptions::default()).unwrap();
    let mut publ = c.publisher("/small").unwrap();
    for i in 0..20u32 {
        publ.send(&i.to_le_bytes()).unwrap();
    }
    match sub.receive(Some(Duration::from_secs(5))) {
        Err(Error::Overflowed { lost }) => assert_eq!(lost, 4),
        other => panic!("expected 4 lost, got {other:?}"),
    }
    let m = sub.receive(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(m.payload, 4u32.to_le_bytes());
}

#[test]
fn a_scaled_subscription_gets_every_nth_sample_with_the_publishers_seqs() {
    let n = node();
    let c = n.client();
    c.create_tag("/scaled", Domain::Local).unwrap();
    let mut all = c.subscribe("/scaled", SubscribeOptions::default()).unwrap();
    let mut third = c
        .subscribe("/scaled", SubscribeOptions::default().every(3))
        .unwrap();
    let mut publ = c.publisher("/scaled").unwrap();
    for i in 1..=10u8 {
        publ.send(&[i]).unwrap();
        // Only samples 3, 6 and 9 make `third` ready.
        assert_eq!(third.available(), i % 3 == 0, "after sample {i}");
        if i % 3 == 0 {
            let m = third.receive(T).unwrap();
            assert_eq!((m.seq.0, m.payload), (u64::from(i), vec![i]));
        }
    }
    assert!(!third.available(), "sample 10 is not for every 3rd");
    assert_eq!(third.receive(Some(Duration::ZERO)), Err(Error::Timeout));
    assert_eq!(third.lost(), 0, "skipped samples are not losses");
    for i in 1..=10u64 {
        assert_eq!(all.receive(T).unwrap().seq.0, i);
    }
}

#[test]
fn a_history_is_pulled_by_count_seq_and_time_and_outlives_its_publisher() {
    let n = node();
    let c = n.client();
    c.create_tag("/hist", Domain::Local).unwrap();
    let err = c.pull("/hist", HistoryQuery::Last(1)).unwrap_err();
    assert!(err.to_string().contains("tagwire history"), "{err}");
    c.set_history("/hist", 1000, 0).unwrap();
    let before = std::time::SystemTime::now();
    {
        let other = n.client();
        let mut publ = other.publisher("/hist").unwrap();
        for i in 1..=1500u32 {
            publ.send(&i.to_le_bytes()).unwrap();
        }
    } // the publisher and its client are gone
    let last = c.pull("/hist", HistoryQuery::Last(3)).unwrap();
    let seqs: Vec<u64> = last.iter().map(|m| m.seq.0).collect();
    assert_eq!(seqs, vec![1498, 1499, 1500]);
    assert_eq!(last[2].payload, 1500u32.to_le_bytes());
    assert_eq!(last[0].sender, c.me(), "sender info (pid and node) is kept");
    assert_eq!(
        c.pull("/hist", HistoryQuery::Last(5000)).unwrap().len(),
        1000
    );
    assert_eq!(
        c.pull("/hist", HistoryQuery::Since(1401)).unwrap().len(),
        100
    );
    let t = |s: std::time::SystemTime| s.duration_since(std::time::UNIX_EPOCH).unwrap();
    let all = HistoryQuery::Between {
        from_ns: t(before).as_nanos() as u64,
        to_ns: u64::MAX,
    };
    assert_eq!(c.pull("/hist", all).unwrap().len(), 1000);
    let none = HistoryQuery::Between {
        from_ns: 0,
        to_ns: t(before).as_nanos() as u64 - 1,
    };
    assert!(c.pull("/hist", none).unwrap().is_empty());
    // The admin command resizes it.
    c.set_history("/hist", 10, 0).unwrap();
    assert_eq!(c.pull("/hist", HistoryQuery::Last(5000)).unwrap().len(), 10);
}

#[test]
fn a_tag_created_with_a_history_keeps_it_from_its_first_message() {
    let n = node();
    let c = n.client();
    let keep = KeepHistory {
        depth: 20,
        max_bytes: 0,
    };
    assert!(c
        .create_tag_keeping("/born", Domain::Local, RingParams::default(), keep)
        .unwrap());
    let mut publ = c.publisher("/born").unwrap();
    for i in 1..=30u32 {
        publ.send(&i.to_le_bytes()).unwrap();
    }
    let got = c.pull("/born", HistoryQuery::Since(0)).unwrap();
    let seqs: Vec<u64> = got.iter().map(|m| m.seq.0).collect();
    assert_eq!(seqs, (11..=30).collect::<Vec<_>>());
    // Re-creating an existing tag leaves its history alone.
    let again = KeepHistory {
        depth: 2,
        max_bytes: 0,
    };
    assert!(!c
        .create_tag_keeping("/born", Domain::Local, RingParams::default(), again)
        .unwrap());
    assert_eq!(c.pull("/born", HistoryQuery::Last(100)).unwrap().len(), 20);
    // A byte cap bounds it too: 8 messages of 4 bytes fit in 32.
    let capped = KeepHistory {
        depth: 1000,
        max_bytes: 32,
    };
    c.create_tag_keeping("/capped", Domain::Local, RingParams::default(), capped)
        .unwrap();
    let mut publ = c.publisher("/capped").unwrap();
    for i in 1..=30u32 {
        publ.send(&i.to_le_bytes()).unwrap();
    }
    let got = c.pull("/capped", HistoryQuery::Last(100)).unwrap();
    assert_eq!(got.first().map(|m| m.seq.0), Some(23));
    assert_eq!(got.len(), 8);
    // The keeper's gate holds a publisher that gets a lap ahead of it:
    // 2000 messages through an 8-slot ring all reach a 2000-deep history.
    let tiny = RingParams {
        slots: 8,
        slot_payload: 64,
    };
    let all = KeepHistory {
        depth: 2000,
        max_bytes: 0,
    };
    c.create_tag_keeping("/lapped", Domain::Local, tiny, all)
        .unwrap();
    let mut publ = c.publisher("/lapped").unwrap();
    for i in 1..=2000u32 {
        publ.send(&i.to_le_bytes()).unwrap();
    }
    let got = c.pull("/lapped", HistoryQuery::Since(0)).unwrap();
    let missing = (1..=2000u64)
        .filter(|s| !got.iter().any(|m| m.seq.0 == *s))
        .count();
    assert_eq!((got.len(), missing), (2000, 0), "messages lapped");
}

#[test]
fn a_late_joiner_gets_the_last_messages_then_live_ones_without_gap_or_duplicate() {
    let n = node();
    let c = n.client();
    c.create_tag("/late", Domain::Local).unwrap();
    c.set_history("/late", 1000, 0).unwrap();
    let mut publ = c.publisher("/late").unwrap();
    for i in 0..500u32 {
        publ.send(&i.to_le_bytes()).unwrap();
    }
    let opts = SubscribeOptions::default().depth(256);
    let mut late = c
        .subscribe_with_history("/late", opts, HistoryQuery::Last(100))
        .unwrap();
    for i in 500..510u32 {
        publ.send(&i.to_le_bytes()).unwrap();
    }
    // Messages 400..499 (seqs 401..500) from the history, then live ones.
    for want in 401..=510u64 {
        let m = late.receive(T).unwrap();
        assert_eq!(m.seq.0, want);
        assert_eq!(m.payload, (want as u32 - 1).to_le_bytes());
    }
    assert_eq!(late.receive(Some(Duration::ZERO)), Err(Error::Timeout));

    // Joining while the publisher runs: still contiguous, whatever the race.
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    // The last sequence number a reader took: the publisher stays within
    // 128 of it, so that 50 from the history and what it sends while the
    // next reader joins fit its depth (256) however slow this machine
    // makes the join. (This test is about gaps at the join, not overflow.)
    let taken = std::sync::atomic::AtomicU64::new(510);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let seq = publ.send(&i.to_le_bytes()).unwrap().0;
                i += 1;
                std::thread::sleep(Duration::from_micros(50));
                while seq >= taken.load(std::sync::atomic::Ordering::Relaxed) + 128
                    && !stop.load(std::sync::atomic::Ordering::Relaxed)
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        // Stops the publisher even if an assertion below fails.
        let _stop = Stop(&stop);
        for _ in 0..10 {
            let mut sub = c
                .subscribe_with_history("/late", opts, HistoryQuery::Last(50))
                .unwrap();
            let first = sub.receive(T).unwrap().seq.0;
            for want in first + 1..first + 200 {
                assert_eq!(sub.receive(T).unwrap().seq.0, want, "gap or duplicate");
                taken.store(want, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
}

#[test]
fn receive_times_out_and_polls() {
    let n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Local).unwrap();
    let mut sub = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    assert_eq!(sub.receive(Some(Duration::ZERO)), Err(Error::Timeout));
    assert_eq!(
        sub.receive(Some(Duration::from_millis(20))),
        Err(Error::Timeout)
    );
    assert!(!sub.available());
}

#[test]
fn purge_and_available() {
    let n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    let mut sub = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/t").unwrap();
    for _ in 0..3 {
        p.send(b"x").unwrap();
    }
    assert!(sub.available());
    assert_eq!(sub.purge(), 3);
    assert!(!sub.available());
    p.send(b"y").unwrap();
    assert_eq!(sub.receive(T).unwrap().payload, b"y");
}

#[test]
fn overflow_drops_the_oldest_and_reports_the_count() {
    let n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    let mut sub = c
        .subscribe("/t", SubscribeOptions::default().depth(4))
        .unwrap();
    let mut p = c.publisher("/t").unwrap();
    for i in 0..10u8 {
        p.send(&[i]).unwrap();
    }
    assert_eq!(sub.receive(T), Err(Error::Overflowed { lost: 6 }));
    for i in 6..10u8 {
        assert_eq!(sub.receive(T).unwrap().payload, [i]);
    }
    assert_eq!(sub.lost(), 6);
}

#[test]
fn one_thread_may_publish_and_subscribe_many_times_over() {
    let n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    let mut subs: Vec<_> = (0..3)
        .map(|_| c.subscribe("/t", SubscribeOptions::default()).unwrap())
        .collect();
    let mut p1 = c.publisher("/t").unwrap();
    let mut p2 = c.publisher("/t").unwrap();
    p1.send(b"a").unwrap();
    p2.send(b"b").unwrap();
    for s in &mut subs {
        let a = s.receive(T).unwrap();
        let b = s.receive(T).unwrap();
        assert_eq!((a.payload.as_slice(), a.seq.0), (&b"a"[..], 1));
        assert_eq!(
            (b.payload.as_slice(), b.seq.0),
            (&b"b"[..], 1),
            "sequence numbers are per publisher"
        );
    }
    assert_eq!(c.senders("/t").unwrap().len(), 2);
    assert_eq!(c.receivers("/t").unwrap().len(), 3);
}

#[test]
fn senders_and_receivers_are_listed_and_released() {
    let n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    assert!(c.senders("/t").unwrap().is_empty());
    let p = c.publisher("/t").unwrap();
    let s = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    let senders = c.senders("/t").unwrap();
    assert_eq!(senders.len(), 1);
    assert_eq!(senders[0].who, c.me());
    assert!(senders[0].since_unix_ns > 0);
    assert_eq!(c.receivers("/t").unwrap().len(), 1);
    // The local replica learns the same through the update thread.
    let view = c.local_view("/t").unwrap().unwrap();
    assert_eq!((view.senders.len(), view.receivers.len()), (1, 1));
    drop(p);
    drop(s);
    assert!(c.senders("/t").unwrap().is_empty());
    assert!(c.receivers("/t").unwrap().is_empty());
    let tags = c.tags().unwrap();
    assert_eq!(tags.len(), 1);
    assert_eq!(tags[0].name.as_str(), "/t");
}

#[test]
fn another_client_sees_table_changes_through_its_update_thread() {
    let n = node();
    let a = n.client();
    let b = n.client();
    a.create_tag("/shared", Domain::Global).unwrap();
    wait_until(|| b.local_view("/shared").unwrap().is_some());
    let _p = a.publisher("/shared").unwrap();
    wait_until(|| {
        b.local_view("/shared")
            .unwrap()
            .is_some_and(|e| e.senders.len() == 1)
    });
    a.destroy_tag("/shared").unwrap();
    wait_until(|| b.local_view("/shared").unwrap().is_none());
}

#[test]
fn bad_inputs_get_typed_errors() {
    let n = node();
    let c = n.client();
    assert!(matches!(
        c.create_tag("no-slash", Domain::Global),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        c.create_tag("", Domain::Global),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        c.create_tag(&format!("/{}", "x".repeat(300)), Domain::Global),
        Err(Error::InvalidName(_))
    ));
    assert_eq!(
        c.publisher("/missing").unwrap_err(),
        Error::UnknownTag("/missing".into())
    );
    assert_eq!(
        c.subscribe("/missing", SubscribeOptions::default())
            .unwrap_err(),
        Error::UnknownTag("/missing".into())
    );
    assert_eq!(
        c.senders("/missing").unwrap_err(),
        Error::UnknownTag("/missing".into())
    );
    assert_eq!(
        c.destroy_tag("/missing").unwrap_err(),
        Error::UnknownTag("/missing".into())
    );
    let msg = c.publisher("/missing").unwrap_err().to_string();
    assert!(msg.contains("create it first"), "{msg}");
}

#[test]
fn a_missing_daemon_is_a_clear_error_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ClientOptions {
        socket: dir.path().join("none.sock"),
        autostart: false,
        ..ClientOptions::default()
    };
    let err = Client::with_options(opts).unwrap_err();
    assert!(matches!(err, Error::DaemonUnreachable { .. }));
    let text = err.to_string();
    assert!(
        text.contains("tagwire daemon") && text.contains("TAGWIRE_AUTOSTART"),
        "{text}"
    );
}

#[test]
fn destroying_a_tag_ends_its_publishers_and_subscribers() {
    let n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    let mut p = c.publisher("/t").unwrap();
    let mut s = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    c.destroy_tag("/t").unwrap();
    // The destroy is applied by the update thread before the call returns
    // (updates precede the response on the socket).
    assert_eq!(p.send(b"x"), Err(Error::TagDestroyed("/t".into())));
    assert_eq!(s.receive(T), Err(Error::TagDestroyed("/t".into())));
}

#[test]
fn large_messages_take_the_slow_path_unchanged() {
    let n = node();
    let c = n.client();
    c.create_tag("/big", Domain::Global).unwrap();
    let mut s = c.subscribe("/big", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/big").unwrap();
    let fast = vec![1u8; p.max_fast_message()];
    let big: Vec<u8> = (0..16 * 1024 * 1024 + 3).map(|i| (i % 251) as u8).collect();
    p.send(&fast).unwrap();
    p.send(&big).unwrap();
    p.send(b"after").unwrap();
    assert_eq!(s.receive(T).unwrap().payload, fast);
    let m = s.receive(T).unwrap();
    assert_eq!(m.seq.0, 2);
    assert!(m.payload == big, "16 MiB message intact");
    assert_eq!(s.receive(T).unwrap().payload, b"after");
    let too_big = vec![0u8; tagwire::MAX_MESSAGE + 1];
    assert!(matches!(p.send(&too_big), Err(Error::TooLarge { .. })));
}

#[test]
fn small_rings_refuse_nothing_but_send_through_blobs() {
    let n = node();
    let c = n.client();
    c.create_tag_with(
        "/small",
        Domain::Global,
        RingParams {
            slots: 8,
            slot_payload: 64,
        },
    )
    .unwrap();
    let mut s = c.subscribe("/small", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/small").unwrap();
    assert_eq!(p.max_fast_message(), 64);
    p.send(&[9u8; 65]).unwrap();
    assert_eq!(s.receive(T).unwrap().payload, vec![9u8; 65]);
}

#[test]
fn busy_poll_subscribers_receive_from_another_thread() {
    let n = node();
    let c = n.client();
    c.create_tag("/spin", Domain::Global).unwrap();
    let mut s = c
        .subscribe(
            "/spin",
            SubscribeOptions::default().busy_poll(Duration::from_micros(200)),
        )
        .unwrap();
    let mut p = c.publisher("/spin").unwrap();
    let t = std::thread::spawn(move || {
        for i in 0..100u32 {
            p.send(&i.to_le_bytes()).unwrap();
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    for i in 0..100u32 {
        assert_eq!(s.receive(T).unwrap().payload, i.to_le_bytes());
    }
    t.join().unwrap();
}

/// Stops `n`'s daemon, waits until `c` says it is unreachable, and starts
/// a fresh one on the same socket.
fn restart(n: &mut Node, c: &Client) {
    n.daemon.take().unwrap().shutdown();
    wait_until(|| matches!(c.ping(), Err(Error::DaemonUnreachable { .. })));
    n.daemon = Some(
        Daemon::start(Config {
            socket: n.opts.socket.clone(),
            ..Config::default()
        })
        .unwrap(),
    );
}

/// A subscription's class changed at run time (`Client::set_channel_qos`)
/// is what its client asks for when it registers again with a restarted
/// daemon, not the class it first subscribed with.
#[test]
fn a_class_changed_at_run_time_survives_a_daemon_restart() {
    let mut n = node();
    let c = n.client();
    c.create_tag("/cls", Domain::Global).unwrap();
    let _s = c.subscribe("/cls", SubscribeOptions::default()).unwrap();
    let admin = n.client();
    let changed = admin
        .set_channel_qos("/cls", None, tagwire::Priority::High)
        .unwrap();
    assert_eq!(changed.len(), 1);
    let class = |c: &Client| c.channels("/cls").unwrap().receivers[0].1.priority;
    assert_eq!(class(&admin), tagwire::Priority::High);
    // (The subscriber's update thread hears of it before its next answer.)
    c.ping().unwrap();
    restart(&mut n, &c);
    wait_until(|| c.ping().is_ok() && c.receivers("/cls").is_ok_and(|v| v.len() == 1));
    assert_eq!(class(&c), tagwire::Priority::High);
}

#[test]
fn clients_reconnect_and_reregister_after_a_daemon_restart() {
    let mut n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    let mut p = c.publisher("/t").unwrap();
    let mut s = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    p.send(b"before").unwrap();
    assert_eq!(s.receive(T).unwrap().payload, b"before");
    // While it is down: a clear error (`restart` waits for it).
    restart(&mut n, &c);
    wait_until(|| c.ping().is_ok() && c.senders("/t").is_ok_and(|v| v.len() == 1));
    assert_eq!(c.receivers("/t").unwrap().len(), 1);
    p.send(b"after").unwrap();
    assert_eq!(s.receive(T).unwrap().payload, b"after");
}

#[test]
fn a_lossless_subscriber_still_holds_and_frees_its_publisher_after_a_daemon_restart() {
    // Its seat on the new daemon's ring must reach the publisher (not be
    // mistaken for the old ring's): else the publisher, unable to see the
    // gate move, would hold at where the gate started and fail.
    let mut n = node();
    let c = n.client();
    let ring = RingParams {
        slots: 8,
        slot_payload: 0,
    };
    c.create_tag_with("/ll", Domain::Global, ring).unwrap();
    let mut p = c.publisher("/ll").unwrap();
    p.set_send_timeout(Duration::from_secs(2));
    let mut s = c
        .subscribe("/ll", SubscribeOptions::default().lossless())
        .unwrap();
    p.send(b"before").unwrap();
    assert_eq!(s.receive(T).unwrap().payload, b"before");
    restart(&mut n, &c);
    wait_until(|| c.ping().is_ok() && c.receivers("/ll").is_ok_and(|v| v.len() == 1));
    let reader = std::thread::spawn(move || {
        (0..50u32)
            .map(|_| s.receive(T).unwrap().payload)
            .collect::<Vec<_>>()
    });
    for i in 0..50u32 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    let got = reader.join().unwrap();
    let want: Vec<Vec<u8>> = (0..50u32).map(|i| i.to_le_bytes().to_vec()).collect();
    assert_eq!(got, want);
}

#[test]
fn a_hundred_tags_with_ten_subscribers_each() {
    let n = node();
    let c = n.client();
    let mut subs = Vec::new();
    let mut pubs = Vec::new();
    for t in 0..100 {
        let name = format!("/many/{t}");
        c.create_tag_with(
            &name,
            Domain::Global,
            RingParams {
                slots: 16,
                slot_payload: 256,
            },
        )
        .unwrap();
        for _ in 0..10 {
            subs.push((
                t,
                c.subscribe(&name, SubscribeOptions::default().depth(16))
                    .unwrap(),
            ));
        }
        pubs.push(c.publisher(&name).unwrap());
    }
    for (t, p) in pubs.iter_mut().enumerate() {
        p.send(&(t as u32).to_le_bytes()).unwrap();
    }
    for (t, s) in &mut subs {
        assert_eq!(s.receive(T).unwrap().payload, (*t as u32).to_le_bytes());
    }
    assert_eq!(c.tags().unwrap().len(), 100);
}

#[test]
fn a_huge_receive_timeout_means_forever_not_a_panic() {
    let n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    let mut s = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/t").unwrap();
    p.send(b"x").unwrap();
    assert_eq!(s.receive(Some(Duration::MAX)).unwrap().payload, b"x");
}

#[test]
fn a_large_tag_table_fits_one_listing() {
    let n = node();
    let c = n.client();
    let long = "x".repeat(200);
    for i in 0..400 {
        c.create_tag_with(
            &format!("/{long}/{i}"),
            Domain::Global,
            RingParams {
                slots: 2,
                slot_payload: 64,
            },
        )
        .unwrap();
    }
    // ~85 KB of listing: more than one 64 KiB packet holds.
    assert_eq!(c.tags().unwrap().len(), 400);
    // A client connecting now receives the whole table as its snapshot.
    let late = n.client();
    assert!(late.local_view(&format!("/{long}/399")).unwrap().is_some());
}

#[test]
fn an_oversized_ring_request_is_refused_with_a_reason() {
    let n = node();
    let c = n.client();
    let err = c
        .create_tag_with(
            "/huge",
            Domain::Global,
            RingParams {
                slots: 1 << 20,
                slot_payload: 64 << 20,
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("1 GiB"), "{err}");
    assert_eq!(
        c.publisher("/huge").unwrap_err(),
        Error::UnknownTag("/huge".into())
    );
}

#[test]
fn receive_into_reuses_the_callers_buffer() {
    let n = node();
    let c = n.client();
    c.create_tag("/into", Domain::Global).unwrap();
    let mut s = c.subscribe("/into", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/into").unwrap();
    let mut buf = Vec::with_capacity(1024);
    let cap = buf.capacity();
    for i in 0..10u8 {
        p.send(&[i; 100]).unwrap();
        let info = s.receive_into(T, &mut buf).unwrap();
        assert_eq!(buf, [i; 100]);
        assert_eq!(info.seq.0, u64::from(i) + 1);
        assert_eq!(info.sender, c.me());
    }
    assert_eq!(buf.capacity(), cap, "no reallocation");
    let big = vec![3u8; 200_000];
    p.send(&big).unwrap();
    s.receive_into(T, &mut buf).unwrap();
    assert_eq!(buf, big, "blob path fills the buffer too");
}

#[test]
fn a_message_sent_as_soon_as_a_subscriber_is_counted_is_not_missed() {
    // The daemon counts a receiver before the subscriber's library has set up
    // its cursor; a publisher reacting to the count at once must still reach it.
    let n = node();
    let a = n.client();
    let b = n.client();
    for round in 0..30 {
        let tag = format!("/race/{round}");
        a.create_tag(&tag, Domain::Global).unwrap();
        let mut p = b.publisher(&tag).unwrap();
        let watcher = {
            let b = b.clone();
            let tag = tag.clone();
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                while b
                    .local_view(&tag)
                    .unwrap()
                    .is_none_or(|e| e.receivers.is_empty())
                {
                    assert!(start.elapsed() < Duration::from_secs(10), "watchdog");
                    std::hint::spin_loop();
                }
                p.send(b"first").unwrap();
                p
            })
        };
        let mut s = a.subscribe(&tag, SubscribeOptions::default()).unwrap();
        let _p = watcher.join().unwrap();
        assert_eq!(
            s.receive(Some(Duration::from_secs(2))).unwrap().payload,
            b"first",
            "round {round}"
        );
    }
}

#[test]
fn endpoints_dropped_while_the_daemon_is_down_do_not_come_back() {
    let mut n = node();
    let c = n.client();
    c.create_tag("/t", Domain::Global).unwrap();
    let keep = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    let gone = c.subscribe("/t", SubscribeOptions::default()).unwrap();
    let gone_pub = c.publisher("/t").unwrap();
    n.daemon.take().unwrap().shutdown();
    wait_until(|| matches!(c.ping(), Err(Error::DaemonUnreachable { .. })));
    drop(gone);
    drop(gone_pub);
    n.daemon = Some(
        Daemon::start(Config {
            socket: n.opts.socket.clone(),
            ..Config::default()
        })
        .unwrap(),
    );
    wait_until(|| c.receivers("/t").is_ok_and(|v| v.len() == 1));
    // Give a wrong re-registration time to show up before checking again.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.receivers("/t").unwrap().len(), 1);
    assert!(c.senders("/t").unwrap().is_empty());
    drop(keep);
}

#[test]
fn a_lossless_subscriber_holds_the_publisher_back_instead_of_losing_and_others_are_not_held() {
    let n = node();
    let c = n.client();
    c.create_tag_with(
        "/keep",
        Domain::Local,
        RingParams {
            slots: 8,
            slot_payload: 64,
        },
    )
    .unwrap();
    let mut keep = c
        .subscribe("/keep", SubscribeOptions::default().lossless())
        .unwrap();
    let mut plain = c
        .subscribe("/keep", SubscribeOptions::default().depth(4))
        .unwrap();
    let mut p = c.publisher("/keep").unwrap();
    p.set_send_timeout(Duration::from_millis(50));
    for i in 1..=8u64 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    // A whole ring unread: the ninth waits its timeout and fails, unsent.
    let t = std::time::Instant::now();
    let err = p.send(&9u64.to_le_bytes()).unwrap_err();
    assert!(
        matches!(&err, Error::WindowFull { tag, .. } if tag == "/keep"),
        "{err}"
    );
    assert!(err.to_string().contains("lossless subscriber"), "{err}");
    assert!(t.elapsed() >= Duration::from_millis(50));
    assert_eq!(p.last_seq().0, 8);
    // The plain subscriber is not what holds the publisher: it keeps its depth.
    assert!(matches!(
        plain.receive(T),
        Err(Error::Overflowed { lost: 4 })
    ));
    assert_eq!(plain.receive(T).unwrap().seq.0, 5);
    // Reading frees the publisher; nothing was lost, in order.
    let sender = std::thread::spawn(move || {
        p.set_send_timeout(Duration::from_secs(10));
        for i in 9..=100u64 {
            p.send(&i.to_le_bytes()).unwrap();
        }
        p
    });
    for i in 1..=100u64 {
        let m = keep.receive(T).unwrap();
        assert_eq!((m.seq.0, &m.payload[..]), (i, &i.to_le_bytes()[..]));
    }
    assert_eq!(keep.lost(), 0);
    let mut p = sender.join().unwrap();
    // Unsubscribed, it holds nothing back.
    drop(keep);
    p.set_send_timeout(Duration::ZERO);
    for i in 101..=120u64 {
        p.send(&i.to_le_bytes()).unwrap();
    }
}

#[test]
fn lossless_subscribers_are_limited_per_tag_with_a_clear_error() {
    let n = node();
    let c = n.client();
    c.create_tag("/few", Domain::Local).unwrap();
    let subs: Vec<_> = (0..tagwire::MAX_LOSSLESS)
        .map(|_| {
            c.subscribe("/few", SubscribeOptions::default().lossless())
                .unwrap()
        })
        .collect();
    let err = c
        .subscribe("/few", SubscribeOptions::default().lossless())
        .unwrap_err();
    assert!(
        matches!(&err, Error::NoLosslessRoom { tag, max } if tag == "/few" && *max == tagwire::MAX_LOSSLESS),
        "{err}"
    );
    // The refused subscription was withdrawn; a plain one is fine.
    assert_eq!(c.receivers("/few").unwrap().len(), tagwire::MAX_LOSSLESS);
    c.subscribe("/few", SubscribeOptions::default()).unwrap();
    drop(subs);
    c.subscribe("/few", SubscribeOptions::default().lossless())
        .unwrap();
}
