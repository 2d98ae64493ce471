//! Keyed messages: instances, dispose and unregister, strength, as a
//! subscriber sees them, on the ring, through the large-message path and
//! from a tag's history.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tagwire::{
    Client, Domain, HistoryQuery, InstanceState, KeepHistory, Key, RingParams, SubscribeOptions,
};
use tagwire_daemon::{Config, Daemon};

mod common;

const T: Option<Duration> = Some(Duration::from_secs(5));

fn node() -> (tempfile::TempDir, Daemon, Client) {
    let (dir, daemon, opts) = common::start_with(Config::default());
    (dir, daemon, Client::with_options(opts).unwrap())
}

#[test]
fn keys_states_and_strength_reach_subscribers_and_history_the_payload_untouched() {
    let (_dir, _d, c) = node();
    let keep = KeepHistory {
        depth: 20,
        max_bytes: 0,
    };
    c.create_tag_keeping("/k", Domain::Local, RingParams::default(), keep)
        .unwrap();
    let mut sub = c.subscribe("/k", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/k").unwrap();
    p.send(b"plain").unwrap();
    p.send_keyed(b"robot-1", b"pose").unwrap();
    // Larger than a ring slot: the large-message path keeps the key too.
    let big = vec![7u8; 1 << 20];
    p.send_keyed(b"a key longer than sixteen bytes", &big)
        .unwrap();
    p.set_strength(Some(-3));
    p.dispose(b"robot-1").unwrap();
    p.unregister(b"robot-2").unwrap();

    let want = [
        (b"plain".to_vec(), None, InstanceState::Alive, None),
        (
            b"pose".to_vec(),
            Some(Key::of(b"robot-1")),
            InstanceState::Alive,
            None,
        ),
        (
            big,
            Some(Key::of(b"a key longer than sixteen bytes")),
            InstanceState::Alive,
            None,
        ),
        (
            Vec::new(),
            Some(Key::of(b"robot-1")),
            InstanceState::Disposed,
            Some(-3),
        ),
        (
            Vec::new(),
            Some(Key::of(b"robot-2")),
            InstanceState::Unregistered,
            Some(-3),
        ),
    ];
    for (i, (payload, key, state, strength)) in want.iter().enumerate() {
        let m = sub.receive(T).unwrap();
        assert_eq!(&m.payload, payload, "message {i}");
        assert_eq!(
            (m.key, m.state, m.strength),
            (*key, *state, *strength),
            "message {i}"
        );
        assert_eq!(m.origin, None);
    }
    assert_eq!(
        Key::of(b"robot-1").0[..7],
        *b"robot-1",
        "a short key is itself"
    );
    let hist = c.pull("/k", HistoryQuery::Since(0)).unwrap();
    assert_eq!(hist.len(), 5);
    assert_eq!(hist[1].key, Some(Key::of(b"robot-1")));
    assert_eq!(hist[1].payload, b"pose");
    assert_eq!(hist[3].state, InstanceState::Disposed);
}

fn exclusive_pair(c: &Client, tag: &str) -> (tagwire::Publisher, tagwire::Publisher) {
    c.create_tag(tag, Domain::Local).unwrap();
    let mut weak = c.publisher(tag).unwrap();
    weak.set_strength(Some(1));
    let mut strong = c.publisher(tag).unwrap();
    strong.set_strength(Some(5));
    (weak, strong)
}

#[test]
fn an_exclusive_subscriber_takes_each_instance_from_its_strongest_publisher() {
    let (_dir, _d, c) = node();
    let (mut weak, mut strong) = exclusive_pair(&c, "/own");
    let mut sub = c
        .subscribe("/own", SubscribeOptions::default().exclusive())
        .unwrap();
    let mut all = c.subscribe("/own", SubscribeOptions::default()).unwrap();
    for i in 0..5u8 {
        weak.send_keyed(b"a", &[b'w', i]).unwrap();
        strong.send_keyed(b"a", &[b's', i]).unwrap();
    }
    // Another instance the weak one alone writes: it owns that.
    weak.send_keyed(b"b", b"wb").unwrap();
    strong.unregister(b"a").unwrap();
    weak.send_keyed(b"a", b"w9").unwrap();
    let mut got = Vec::new();
    while let Ok(m) = sub.receive(Some(Duration::from_millis(200))) {
        got.push(m.payload);
    }
    let want: Vec<&[u8]> = vec![
        b"w\x00", b"s\x00", b"s\x01", b"s\x02", b"s\x03", b"s\x04", b"wb", b"", b"w9",
    ];
    assert_eq!(got, want);
    assert_eq!(sub.filtered().not_owner, 4, "the weak one's 1 to 4");
    // A shared subscriber gets everything.
    let mut n = 0;
    while all.receive(Some(Duration::from_millis(200))).is_ok() {
        n += 1;
    }
    assert_eq!(n, 13);
}

#[test]
fn an_owner_that_goes_silent_misses_its_deadline_and_the_next_takes_over() {
    let (_dir, _d, c) = node();
    let (mut weak, mut strong) = exclusive_pair(&c, "/failover");
    let mut sub = c
        .subscribe(
            "/failover",
            SubscribeOptions::default()
                .exclusive()
                .deadline(Duration::from_millis(100)),
        )
        .unwrap();
    let strong_id = {
        strong.send_keyed(b"k", b"s").unwrap();
        let m = sub.receive(T).unwrap();
        assert_eq!(m.payload, b"s");
        (m.sender, m.stream)
    };
    // Both write every 10 ms; the strong one stops after 200 ms.
    let start = std::time::Instant::now();
    let mut events = Vec::new();
    while start.elapsed() < Duration::from_millis(600) {
        if start.elapsed() < Duration::from_millis(200) {
            strong.send_keyed(b"k", b"s").unwrap();
        }
        weak.send_keyed(b"k", b"w").unwrap();
        std::thread::sleep(Duration::from_millis(10));
        loop {
            match sub.receive(Some(Duration::ZERO)) {
                Ok(m) => events.push(Ok((m.payload, (m.sender, m.stream)))),
                Err(tagwire::Error::DeadlineMissed { writer, key, .. }) => {
                    events.push(Err((writer, key)))
                }
                Err(tagwire::Error::Timeout) => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    let first_weak = events
        .iter()
        .position(|e| matches!(e, Ok((p, _)) if p == b"w"))
        .expect("the weak one took over");
    // Up to then only the strong one's, then one missed deadline naming
    // it, then only the weak one's.
    assert!(events[..first_weak].iter().all(
        |e| matches!(e, Ok((p, who)) if p == b"s" && *who == strong_id)
            || matches!(e, Err((Some(w), Some(k))) if *w == strong_id.0 && *k == Key::of(b"k"))
    ));
    assert_eq!(
        events[..first_weak].iter().filter(|e| e.is_err()).count(),
        1,
        "{events:?}"
    );
    assert!(events[first_weak..]
        .iter()
        .all(|e| matches!(e, Ok((p, _)) if p == b"w")));
    assert!(events.len() - first_weak > 5, "{events:?}");
    assert!(sub.filtered().not_owner > 5);
}

#[test]
fn a_deadline_is_reported_for_the_silent_instance_only() {
    let (_dir, _d, c) = node();
    c.create_tag("/dl", Domain::Local).unwrap();
    let mut p = c.publisher("/dl").unwrap();
    let mut sub = c
        .subscribe(
            "/dl",
            SubscribeOptions::default().deadline(Duration::from_millis(50)),
        )
        .unwrap();
    let start = std::time::Instant::now();
    p.send_keyed(b"quiet", b"q").unwrap();
    let (mut missed, mut got) = (Vec::new(), 0);
    while start.elapsed() < Duration::from_millis(180) {
        p.send_keyed(b"busy", b"b").unwrap();
        loop {
            match sub.receive(Some(Duration::from_millis(10))) {
                Ok(_) => got += 1,
                Err(tagwire::Error::DeadlineMissed { key, .. }) => missed.push(key),
                Err(tagwire::Error::Timeout) => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    // At most once per whole period gone by (fewer when this thread is
    // held up past a period).
    let periods = (start.elapsed().as_millis() / 50) as usize;
    assert!(got > 5);
    assert!(
        (1..=periods).contains(&missed.len()),
        "at most once per 50 ms ({periods} periods): {missed:?}"
    );
    assert!(missed.iter().all(|k| *k == Some(Key::of(b"quiet"))));
    // Receive with no message at all still reports it (the wait ends at
    // the deadline, not at the caller's timeout).
    let t = std::time::Instant::now();
    let e = sub.receive(Some(Duration::from_secs(5))).unwrap_err();
    assert!(matches!(e, tagwire::Error::DeadlineMissed { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn minimum_separation_keeps_the_newest_sample_of_each_interval() {
    let (_dir, _d, c) = node();
    c.create_tag("/sep", Domain::Local).unwrap();
    let mut p = c.publisher("/sep").unwrap();
    let mut sub = c
        .subscribe(
            "/sep",
            SubscribeOptions::default()
                .depth(256)
                .min_separation(Duration::from_millis(30)),
        )
        .unwrap();
    // Received as they come (the separation is over arrival times).
    let start = std::time::Instant::now();
    let (mut i, mut got) = (0u32, Vec::new());
    let take = |sub: &mut tagwire::Subscriber, wait: Duration, got: &mut Vec<u32>| {
        while let Ok(m) = sub.receive(Some(wait)) {
            got.push(u32::from_le_bytes(m.payload[..4].try_into().unwrap()));
        }
    };
    while start.elapsed() < Duration::from_millis(150) {
        p.send_keyed(b"x", &i.to_le_bytes()).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(1));
        take(&mut sub, Duration::ZERO, &mut got);
    }
    take(&mut sub, Duration::from_millis(100), &mut got);
    assert_eq!(got.last(), Some(&(i - 1)), "the newest comes last: {got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]));
    assert!(
        got.len() >= 2 && got.len() <= 10,
        "about one per 30 ms of 150: {got:?}"
    );
    assert_eq!(
        got.len() as u64 + sub.filtered().replaced,
        u64::from(i),
        "each sample handed out or counted"
    );
}

#[test]
fn a_publisher_is_told_which_instances_it_left_past_its_offered_deadline() {
    let (_dir, _d, c) = node();
    c.create_tag("/offer", Domain::Local).unwrap();
    let mut p = c.publisher("/offer").unwrap();
    // None offered: nothing to report.
    p.send_keyed(b"quiet", b"q").unwrap();
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(p.missed_deadlines(), (vec![], 0));

    // At most one report per whole period gone by since `t`: fewer when
    // this thread is held up past a period (the exact counts, on a made-up
    // clock, are `offered`'s unit tests).
    let periods = |t: std::time::Instant, period: u128| (t.elapsed().as_millis() / period) as usize;
    p.offer_deadline(Some(Duration::from_millis(50)));
    let start = std::time::Instant::now();
    p.send_keyed(b"quiet", b"q").unwrap();
    p.send_keyed(b"gone", b"g").unwrap();
    p.dispose(b"gone").unwrap(); // a disposed instance owes nothing
    while start.elapsed() < Duration::from_millis(180) {
        p.send_keyed(b"busy", b"b").unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    let (missed, dropped) = p.missed_deadlines();
    let bound = periods(start, 50);
    assert_eq!(dropped, 0);
    assert!(
        (1..=bound).contains(&missed.len()),
        "at most once per 50 ms ({bound} periods): {missed:?}"
    );
    assert!(
        missed.iter().all(|k| *k == Some(Key::of(b"quiet"))),
        "{missed:?}"
    );
    // Reported once: the next call has only what is new.
    let asked = std::time::Instant::now();
    let (again, _) = p.missed_deadlines();
    assert!(again.len() <= 1 + periods(asked, 50), "{again:?}");
    // Unkeyed messages are one instance.
    p.offer_deadline(Some(Duration::from_millis(30)));
    let plain = std::time::Instant::now();
    p.send(b"plain").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let (missed, _) = p.missed_deadlines();
    assert!(
        (1..=periods(plain, 30)).contains(&missed.len()),
        "{missed:?}"
    );
    assert!(missed.iter().all(Option::is_none), "{missed:?}");
}
