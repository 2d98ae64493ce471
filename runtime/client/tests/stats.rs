//! `Client::stats` (what `tagwire stats` prints): the daemon's counters and
//! every local subscriber's, from whichever client asks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tagwire::{Client, ClientOptions, Domain, Error, RingParams, StatsKind, SubscribeOptions};
use tagwire_daemon::Config;

mod common;

#[test]
fn stats_show_each_subscribers_received_and_lost_and_the_tags_records() {
    let (_dir, _daemon, opts) = common::start_with(Config::default());
    let opts = ClientOptions {
        name: "stats-test".into(),
        ..opts
    };
    let (a, b, asker) = (
        Client::with_options(opts.clone()).unwrap(),
        Client::with_options(opts.clone()).unwrap(),
        Client::with_options(opts).unwrap(),
    );
    a.create_tag_with(
        "/counted",
        Domain::Global,
        RingParams {
            slots: 8,
            slot_payload: 64,
        },
    )
    .unwrap();
    let mut keeps_up = a
        .subscribe("/counted", SubscribeOptions::default().lossless())
        .unwrap();
    let mut falls_behind = b
        .subscribe("/counted", SubscribeOptions::default().depth(4))
        .unwrap();
    let mut p = a.publisher("/counted").unwrap();
    for i in 0..12u64 {
        p.send(&i.to_le_bytes()).unwrap();
        keeps_up.receive(Some(Duration::from_secs(5))).unwrap();
    }
    // The second one is 12 behind with a depth of 4: 8 lost.
    let mut got = 0;
    loop {
        match falls_behind.receive(Some(Duration::ZERO)) {
            Ok(_) => got += 1,
            Err(Error::Overflowed { .. }) => {}
            Err(Error::Timeout) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((got, falls_behind.lost()), (4, 8));

    let rows = asker.stats().unwrap();
    let sub = |mode: &str| {
        rows.iter()
            .find(|r| {
                r.kind == StatsKind::Subscriber && r.tag == "/counted" && r.who.contains(mode)
            })
            .unwrap_or_else(|| panic!("no {mode} subscriber row in {rows:#?}"))
    };
    let (l, r) = (sub("lossless"), sub("reliable"));
    assert!(l.who.contains("stats-test"), "{}", l.who);
    assert_eq!(
        (l.get("received"), l.get("overflowed"), l.get("missing")),
        (Some(12), Some(0), Some(0))
    );
    assert_eq!(
        (r.get("received"), r.get("overflowed"), r.get("missing")),
        (Some(4), Some(8), Some(0))
    );
    // (No stream of its own on one node: nothing refused for want of room.)
    assert_eq!((l.get("no_room"), r.get("no_room")), (Some(0), Some(0)));
    let tag = rows
        .iter()
        .find(|r| r.kind == StatsKind::Tag && r.tag == "/counted")
        .unwrap();
    assert_eq!(tag.get("records"), Some(12));
    assert_eq!(tag.get("receivers"), Some(2));
    assert!(rows.iter().any(|r| r.kind == StatsKind::Node));
    // The asker has no subscriber: no row of its own.
    assert_eq!(
        rows.iter()
            .filter(|r| r.kind == StatsKind::Subscriber)
            .count(),
        2
    );
    // A client that asks sees its own subscribers too.
    let own = a.stats().unwrap();
    assert_eq!(
        own.iter()
            .filter(|r| r.kind == StatsKind::Subscriber)
            .count(),
        2
    );
}
