#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A grant that a peer daemon does not confirm within `apply_timeout` is rolled
//! back, and the client gets `Error::PeersUnresponsive` naming that peer. The
//! rollback releases the right of the role the request asked for: a failed
//! `publisher()` must not release an earlier subscription of the same client.
//!
//! Two hosts, each a network namespace (proof/testkit) with its own daemon;
//! these tests need root and otherwise print `skipped: <reason>` and pass.

mod common;
use common::*;

use std::time::{Duration, Instant};

use tagwire::{Domain, SubscribeOptions};

/// Long enough that host 1 is never declared dead during the test: its
/// silence shows only as unconfirmed changes.
const LEASE: Duration = Duration::from_secs(10);
/// Short, so an unconfirmed change fails quickly.
const APPLY_TIMEOUT: Duration = Duration::from_millis(300);

#[test]
fn an_unconfirmed_grant_is_rolled_back_by_its_role_and_reported() {
    if skip() {
        return;
    }
    let mut site = Site::new(2);
    site.lease = LEASE;
    site.apply_timeout = APPLY_TIMEOUT;
    let (_daemons, clients) = site.mesh(&Find::List);
    let (c0, c1) = (&clients[0], &clients[1]);

    const TAG: &str = "/rollback";
    // With both hosts up, a change this machine leaves unconfirmed for the
    // short apply timeout is rolled back too: the setup asks again.
    let mut sub = None;
    wait_until("the tag and a subscription are set up", || {
        // (Creating a tag that exists is not an error.)
        let made = c0
            .create_tag(TAG, Domain::Global)
            .and_then(|_| c0.subscribe(TAG, SubscribeOptions::default()));
        match made {
            Ok(s) => {
                sub = Some(s);
                true
            }
            Err(tagwire::Error::PeersUnresponsive(msg)) => {
                println!("setup: {msg}, again");
                false
            }
            Err(e) => panic!("setup: {e}"),
        }
    });
    let mut sub = sub.unwrap();
    let before = c0.receivers(TAG).unwrap();
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0].who, c0.me());
    wait_until("host 1 knows the subscription", || {
        c1.receivers(TAG).is_ok_and(|r| r == before)
    });

    site.lan.host(1).link_down().unwrap();
    let host1 = site.lan.host(1).addr().to_string();
    let unresponsive = |what: &str, r: tagwire::Result<()>| match r {
        Err(tagwire::Error::PeersUnresponsive(msg)) => {
            assert!(
                msg.contains(&host1),
                "{what}: {msg:?} does not name {host1}"
            );
            println!("{what}: {msg}");
        }
        other => panic!("{what}: expected PeersUnresponsive, got {other:?}"),
    };

    // A second subscription of the same client: refused and rolled back; the
    // first one stays.
    let t = Instant::now();
    unresponsive(
        "subscribe",
        c0.subscribe(TAG, SubscribeOptions::default()).map(drop),
    );
    assert!(
        t.elapsed() >= APPLY_TIMEOUT,
        "failed after {:?}",
        t.elapsed()
    );
    assert_eq!(c0.receivers(TAG).unwrap(), before);
    assert!(c0.senders(TAG).unwrap().is_empty());

    // Send access for the same client: refused, and its rollback releases the
    // send access, not the client's subscription.
    unresponsive("publisher", c0.publisher(TAG).map(drop));
    assert_eq!(c0.receivers(TAG).unwrap(), before);
    assert!(c0.senders(TAG).unwrap().is_empty(), "{:?}", c0.senders(TAG));
    let listed = c0.tags().unwrap();
    let t = listed
        .iter()
        .find(|t| t.name.as_str() == TAG)
        .expect("the tag is listed");
    assert_eq!(t.receivers, before);
    assert!(t.senders.is_empty(), "{t:?}");

    // Once host 1 is back, send access is granted again, and the
    // subscription that survived the rollback still receives.
    site.lan.host(1).link_up().unwrap();
    let back = Instant::now();
    let mut publisher = None;
    wait_until("publisher() succeeds with host 1 back", || {
        match c0.publisher(TAG) {
            Ok(p) => {
                publisher = Some(p);
                true
            }
            Err(tagwire::Error::PeersUnresponsive(_)) => false,
            Err(e) => panic!("publisher() with host 1 back: {e}"),
        }
    });
    println!("publisher() granted {:?} after link up", back.elapsed());
    let mut publisher = publisher.unwrap();
    let senders = c0.senders(TAG).unwrap();
    assert_eq!(senders.len(), 1, "{senders:?}");
    assert_eq!(senders[0].who, c0.me());
    assert_eq!(c0.receivers(TAG).unwrap(), before);
    publisher.send(b"after the rollback").unwrap();
    let m = sub.receive(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(&m.payload[..], b"after the rollback");

    // Host 1 ends with the same table: the rolled-back rights did not linger.
    wait_until("host 1 agrees with host 0", || {
        c1.receivers(TAG).is_ok_and(|r| r == before) && c1.senders(TAG).is_ok_and(|s| s == senders)
    });
}
