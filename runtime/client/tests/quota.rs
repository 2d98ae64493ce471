//! Bounded resources: past each quota a request gets `Error::Quota` naming
//! the bound, nothing is half-made, and room comes back when released.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, Domain, Error, KeepHistory, RingParams};
use tagwire_daemon::quota::Quotas;
use tagwire_daemon::{Config, Daemon};

mod common;

fn start(quotas: Quotas) -> (tempfile::TempDir, Daemon, ClientOptions) {
    common::start_with(Config {
        quotas,
        ..Config::default()
    })
}

fn quota(e: Error) -> (String, u64) {
    match e {
        Error::Quota { what, limit } => (what, limit),
        other => panic!("expected a quota error, got {other:?}"),
    }
}

#[test]
fn tags_are_bounded_per_user_and_in_all() {
    let (_d, _daemon, opts) = start(Quotas {
        tags_per_uid: 3,
        tags: 100,
        ..Quotas::default()
    });
    let c = Client::with_options(opts).unwrap();
    for i in 0..3 {
        c.create_tag(&format!("/t{i}"), Domain::Global).unwrap();
    }
    let (what, limit) = quota(c.create_tag("/t3", Domain::Global).unwrap_err());
    assert_eq!((what.as_str(), limit), ("tags this user created", 3));
    assert!(
        matches!(c.senders("/t3"), Err(Error::UnknownTag(_))),
        "nothing half-made"
    );
    // An existing tag is no new tag; a destroyed one gives its room back.
    c.create_tag("/t0", Domain::Global).unwrap();
    c.destroy_tag("/t0").unwrap();
    c.create_tag("/t3", Domain::Global).unwrap();

    let (_d2, _daemon2, opts2) = start(Quotas {
        tags: 2,
        ..Quotas::default()
    });
    let c = Client::with_options(opts2).unwrap();
    c.create_tag("/a", Domain::Global).unwrap();
    c.create_tag("/b", Domain::Global).unwrap();
    let (what, limit) = quota(c.create_tag("/c", Domain::Global).unwrap_err());
    assert_eq!((what.as_str(), limit), ("tags on this daemon", 2));
}

#[test]
fn ring_bytes_and_histories_are_bounded() {
    let (_d, _daemon, opts) = start(Quotas {
        ring_bytes: 4 << 20,
        history_depth: 1000,
        history_bytes: 1 << 20,
        ..Quotas::default()
    });
    let c = Client::with_options(opts).unwrap();
    let ring = |slots| RingParams {
        slots,
        slot_payload: 1024,
    };
    c.create_tag_with("/r1", Domain::Global, ring(3 * 1024))
        .unwrap();
    let keep = KeepHistory {
        depth: u32::MAX,
        max_bytes: u64::MAX,
    };
    let (what, _) = quota(
        c.create_tag_keeping("/h", Domain::Global, ring(16), keep)
            .unwrap_err(),
    );
    assert_eq!(what, "history depth");
    assert!(
        matches!(c.senders("/h"), Err(Error::UnknownTag(_))),
        "nothing half-made"
    );
    let (what, _) = quota(
        c.create_tag_with("/r2", Domain::Global, ring(2 * 1024))
            .unwrap_err(),
    );
    assert_eq!(what, "ring bytes on this daemon");
    c.create_tag_with("/r2", Domain::Global, ring(1024))
        .unwrap();

    let (what, limit) = quota(c.set_history("/r1", 1001, 0).unwrap_err());
    assert_eq!((what.as_str(), limit), ("history depth", 1000));
    let (what, _) = quota(c.set_history("/r1", 10, 2 << 20).unwrap_err());
    assert_eq!(what, "history bytes");
    c.set_history("/r1", 1000, 1 << 20).unwrap();
}

#[test]
fn connections_are_bounded_per_user_and_come_back_when_closed() {
    let (_d, _daemon, opts) = start(Quotas {
        connections_per_uid: 3,
        ..Quotas::default()
    });
    let held: Vec<Client> = (0..3)
        .map(|_| Client::with_options(opts.clone()).unwrap())
        .collect();
    let (what, limit) = quota(Client::with_options(opts.clone()).unwrap_err());
    assert_eq!((what.as_str(), limit), ("connections of this user", 3));
    held[0].ping().unwrap();
    drop(held);
    let start = Instant::now();
    let c = loop {
        match Client::with_options(opts.clone()) {
            Ok(c) => break c,
            Err(Error::Quota { .. }) => {
                assert!(start.elapsed() < Duration::from_secs(10), "never released");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    };
    c.ping().unwrap();
}

#[test]
fn rights_per_client_and_large_message_bytes_are_bounded() {
    let (_d, _daemon, opts) = start(Quotas {
        rights_per_client: 2,
        large_bytes: 5 << 19,
        ..Quotas::default()
    });
    let c = Client::with_options(opts.clone()).unwrap();
    for t in ["/a", "/b", "/c"] {
        c.create_tag(t, Domain::Global).unwrap();
    }
    let _s = c.subscribe("/a", Default::default()).unwrap();
    let mut p = c.publisher("/b").unwrap();
    let (what, limit) = quota(c.subscribe("/c", Default::default()).unwrap_err());
    assert_eq!((what.as_str(), limit), ("rights this client holds", 2));
    assert!(c.receivers("/c").unwrap().is_empty(), "nothing half-made");
    // Another client has its own budget.
    let other = Client::with_options(opts).unwrap();
    let _s2 = other.subscribe("/c", Default::default()).unwrap();

    // 1 MiB messages: two fit a 2.5 MiB bound while their records are in
    // the ring (a reader may still come for them); the third does not.
    let big = vec![7u8; 1 << 20];
    p.send(&big).unwrap();
    p.send(&big).unwrap();
    let (what, limit) = quota(p.send(&big).unwrap_err());
    assert_eq!(
        (what.as_str(), limit),
        ("large-message bytes on this daemon", 5 << 19)
    );
    assert_eq!(p.last_seq().0, 2, "the refused send used no number");
}
