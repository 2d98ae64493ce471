//! Thread scheduling between two hosts (network namespaces, one daemon
//! each, in this process): a subscription's policy (`SubscribeOptions::sched`)
//! runs the threads that carry its tag (the sending node's forwarder, the
//! receiving node's inbound threads) while it lasts, and the daemon's roles
//! run at the policies `--sched` gives them.
//!
//! The daemons are in this process, so their threads are read from
//! `/proc/self/task` by name. The tests need root (namespaces, real-time
//! policies); without it they print `skipped: <reason>` and pass.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tagwire::{Domain, Sched, SubscribeOptions};
use tagwire_daemon::roles::Roles;

mod common;
use common::*;

/// The policy of every thread of this process named `name` (as the
/// kernel keeps it: its first 15 bytes).
fn threads(name: &str) -> Vec<Sched> {
    let name = &name[..name.len().min(15)];
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            if let Ok(s) = tagwire_sched::of_thread(tagwire_sched::Tid(tid)) {
                out.push(s);
            }
        }
    }
    out
}

fn count(name: &str, s: Sched) -> usize {
    threads(name).into_iter().filter(|t| *t == s).count()
}

#[test]
fn a_subscriptions_policy_runs_the_forwarder_and_the_inbound_thread_while_it_lasts() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, _clients) = site.mesh(&Find::List);
    let (c0, c1) = (site.client(0), site.client(1));
    let tag = "/sched/fast";
    let fast = Sched::Fifo(21);
    c0.create_tag(tag, Domain::Global).unwrap();
    let mut sub = c1
        .subscribe(
            tag,
            SubscribeOptions::default().sched(fast).through_daemon(),
        )
        .unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let mut p = c0.publisher(tag).unwrap();
    p.send(b"one").unwrap();
    assert_eq!(
        sub.receive(Some(Duration::from_secs(10))).unwrap().payload,
        b"one"
    );
    // Host 0's forwarder of the tag, and host 1's inbound thread (host 0's
    // has no subscriber that asks).
    wait_until("the forwarder at fifo:21", || {
        count("tagwired-forward", fast) == 1
    });
    wait_until("one inbound thread at fifo:21", || {
        count("tagwired-delivery", fast) == 1
    });
    // Host 0's acknowledgement watcher too (where the kernel steers
    // acknowledgements to a socket of their own, there is one).
    wait_until("host 0's acknowledgement watcher at fifo:21", || {
        threads("tagwired-acks").is_empty() || count("tagwired-acks", fast) == 1
    });
    let inbound = threads("tagwired-delivery");
    println!("inbound threads: {inbound:?}");
    println!("acknowledgement watchers: {:?}", threads("tagwired-acks"));
    drop(sub);
    wait_until("the inbound threads back from fifo:21", || {
        count("tagwired-delivery", fast) == 0
    });
    wait_until("the forwarder gone", || {
        count("tagwired-forward", fast) == 0
    });
    wait_until("the watcher back", || count("tagwired-acks", fast) == 0);
}

#[test]
fn the_daemons_roles_run_at_the_policies_they_are_given() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let roles: Roles = "delivery=fifo:30,forward=rr:25,update=fifo:20,local=other:3"
        .parse()
        .unwrap();
    let daemons: Vec<_> = (0..2)
        .map(|i| {
            let mut cfg = site.config(i, &Find::List);
            cfg.sched = roles;
            start_in(site.lan.host(i), cfg)
        })
        .collect();
    let (c0, c1) = (site.client(0), site.client(1));
    for c in [&c0, &c1] {
        wait_until("both daemons up", || up_peers(c) == 1);
    }
    assert!(
        count("tagwired-delivery", Sched::Fifo(30)) >= 2,
        "{:?}",
        threads("tagwired-delivery")
    );
    assert!(
        count("tagwired-update", Sched::Fifo(20)) >= 2,
        "{:?}",
        threads("tagwired-update")
    );
    assert!(
        count("tagwired-link-rx", Sched::Fifo(20)) >= 2,
        "{:?}",
        threads("tagwired-link-rx")
    );
    assert!(
        count("tagwired-local", Sched::Other { nice: 3 }) >= 2,
        "{:?}",
        threads("tagwired-local")
    );
    // A forwarder starts for a subscription that asks nothing: the role's.
    let tag = "/sched/roles";
    c0.create_tag(tag, Domain::Global).unwrap();
    let mut sub = c1.subscribe(tag, SubscribeOptions::default()).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    c0.publisher(tag).unwrap().send(b"x").unwrap();
    sub.receive(Some(Duration::from_secs(10))).unwrap();
    wait_until("the forwarder at rr:25", || {
        count("tagwired-forward", Sched::RoundRobin(25)) == 1
    });
    drop(daemons);
}

#[test]
fn a_policy_changed_at_run_time_reaches_both_ends_within_100_ms_and_loses_nothing() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, _clients) = site.mesh(&Find::List);
    let (c0, c1) = (site.client(0), site.client(1));
    let tag = "/sched/changed";
    let to = Sched::Fifo(22);
    // Room for 0.4 s of the stream: the subscriber's thread, at the
    // default policy, may wait while the real-time ones run.
    deep_tag(&c0, tag, 4096, 64);
    let mut sub = c1
        .subscribe(
            tag,
            SubscribeOptions::default().depth(4096).through_daemon(),
        )
        .unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    // A reliable stream at about 10 kHz across the change.
    let total = 6000u32;
    let sender = std::thread::spawn(move || {
        let mut p = c0.publisher(tag).unwrap();
        let start = std::time::Instant::now();
        for i in 0..total {
            p.send(&i.to_le_bytes()).unwrap();
            let due = start + Duration::from_micros(100 * u64::from(i + 1));
            if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    });
    // The subscriber reads on its own thread while this one watches.
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        while got.len() < total as usize {
            let m = sub.receive(Some(Duration::from_secs(10))).unwrap();
            got.push(u32::from_le_bytes(m.payload[..4].try_into().unwrap()));
            if got.len() == 2000 {
                seen_tx.send(()).unwrap();
            }
        }
        got
    });
    seen_rx.recv().unwrap();
    assert_eq!(count("tagwired-forward", to), 0);
    let asked = std::time::Instant::now();
    let changed = c1.set_channel_sched(tag, None, to).unwrap();
    assert_eq!(changed.len(), 1);
    let mut both = None;
    while both.is_none() && asked.elapsed() < Duration::from_secs(5) {
        if count("tagwired-forward", to) == 1 && count("tagwired-delivery", to) == 1 {
            both = Some(asked.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = both.expect("the policy did not reach both ends in 5 s");
    println!("fifo:22 on both ends {took:?} after the call");
    assert!(took < Duration::from_millis(100), "{took:?}");
    let listed = c1.channels(tag).unwrap();
    assert_eq!(listed.receivers[0].1.sched, to);
    let got = receiver.join().unwrap();
    sender.join().unwrap();
    assert_eq!(
        got,
        (0..total).collect::<Vec<_>>(),
        "lost, duplicated or reordered"
    );
}

#[test]
fn a_publishers_policy_runs_its_nodes_forwarder_whatever_its_receivers_ask() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, _clients) = site.mesh(&Find::List);
    let (c0, c1) = (site.client(0), site.client(1));
    let tag = "/sched/published";
    let at = Sched::Fifo(23);
    c0.create_tag(tag, Domain::Global).unwrap();
    let mut sub = c1.subscribe(tag, SubscribeOptions::default()).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    let opts = tagwire::PublishOptions::default().sched(at);
    let mut p = c0.publisher_with(tag, opts).unwrap();
    p.send(b"x").unwrap();
    assert_eq!(
        sub.receive(Some(Duration::from_secs(10))).unwrap().payload,
        b"x"
    );
    wait_until("host 0's forwarder at fifo:23", || {
        count("tagwired-forward", at) == 1
    });
    // Host 1's inbound thread serves subscribers: a publisher elsewhere
    // does not raise it.
    assert_eq!(count("tagwired-delivery", at), 0);
    drop(p);
    wait_until("the forwarder back", || count("tagwired-forward", at) == 0);
}

#[test]
fn a_direct_subscribers_keeper_follows_a_policy_changed_at_run_time() {
    if skip() {
        return;
    }
    let site = Site::new(2);
    let (_daemons, _clients) = site.mesh(&Find::List);
    let (c0, c1) = (site.client(0), site.client(1));
    let tag = "/sched/keeper";
    let to = Sched::Fifo(24);
    c0.create_tag(tag, Domain::Global).unwrap();
    // The node's sole subscriber, on its own socket (direct delivery).
    let mut sub = c1.subscribe(tag, SubscribeOptions::default()).unwrap();
    wait_until("the subscriber is known on host 0", || {
        !c0.receivers(tag).unwrap().is_empty()
    });
    c0.publisher(tag).unwrap().send(b"x").unwrap();
    sub.receive(Some(Duration::from_secs(10))).unwrap();
    wait_until("its keeper started", || {
        !threads("tagwire-direct").is_empty()
    });
    assert_eq!(count("tagwire-direct", to), 0);
    c1.set_channel_sched(tag, None, to).unwrap();
    wait_until("the keeper at fifo:24", || count("tagwire-direct", to) == 1);
    c1.set_channel_sched(tag, None, Sched::default()).unwrap();
    wait_until("the keeper back", || count("tagwire-direct", to) == 0);
}
