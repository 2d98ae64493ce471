//! A domain key roll without downtime (issue 43 item 5), end to end: three
//! keyed daemons on network-namespace hosts carry a publisher's stream to
//! a direct subscriber, a subscriber through its daemon and a TCP one,
//! while `tagwire keygen --next` adds the next key to the key file and the
//! file is copied to every node. Every message arrives, once and in order,
//! across the switch and after the old key is dropped; no datagram is
//! refused; what is sealed afterwards carries the new generation's flag;
//! and a daemon that still has only the old key is not let in.
//!
//! These tests need root (network namespaces); without it each prints
//! `skipped: <reason>` and passes. The capture part needs tshark too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tagwire::{Domain, StatsKind, SubscribeOptions};
use tagwire_daemon::{Daemon, KeyFile};

mod common;
use common::*;

/// Starts host `i`'s daemon following the key file `key` (read again
/// whenever it changes) with the node list `nodes`.
fn start_following(site: &Site, i: usize, key: &Path, nodes: &Path) -> Daemon {
    let mut cfg = site.config(i, &Find::List);
    let net = cfg.net.as_mut().unwrap();
    net.nodes_file = Some(nodes.to_owned());
    net.key = Some(tagwire_daemon::read_key_file(key).unwrap());
    net.key_file = Some(key.to_owned());
    start_in(site.lan.host(i), cfg)
}

/// Puts `file` in place of the file at `path` at once, as an operator's
/// copy tool would.
fn replace(path: &Path, file: &KeyFile) {
    tagwire_daemon::write_key_file(path, file).unwrap();
}

/// The payload of message `i`.
fn payload(i: u32) -> Vec<u8> {
    let mut p = i.to_le_bytes().to_vec();
    p.extend_from_slice(&[0x5a; 60]);
    p
}

#[test]
fn a_domain_key_rolls_under_load_losing_nothing_and_the_old_key_is_refused_after() {
    if skip() {
        return;
    }
    let site = Site::new(4);
    let dir = site.dir.path();
    // Every node has its own copy of the key file.
    let files: Vec<PathBuf> = (0..4)
        .map(|i| key_file(dir, &format!("h{i}.key"), 0x51))
        .collect();
    let nodes = node_list(&site, &[0, 1, 2, 3]);
    let _d: Vec<Daemon> = (0..3)
        .map(|i| start_following(&site, i, &files[i], &nodes))
        .collect();
    let c: Vec<_> = (0..3).map(|i| site.client(i)).collect();
    wait_until("peers", || c.iter().all(|c| up_peers(c) == 2));
    const TAG: &str = "/roll/stream";
    c[0].create_tag(TAG, Domain::Global).unwrap();
    let subs = [
        c[1].subscribe(TAG, SubscribeOptions::default()).unwrap(),
        c[2].subscribe(TAG, SubscribeOptions::default().through_daemon())
            .unwrap(),
        c[2].subscribe(TAG, SubscribeOptions::default().tcp())
            .unwrap(),
    ];
    let mut publisher = c[0].publisher(TAG).unwrap();
    std::thread::sleep(Duration::from_millis(500));

    // A message a millisecond until told to stop; each subscriber read on
    // a thread of its own until a second passes with nothing.
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                publisher.send(&payload(n)).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            n
        })
    };
    let readers: Vec<_> = subs
        .into_iter()
        .map(|mut s| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut numbers = Vec::new();
                let mut errors = Vec::new();
                loop {
                    match s.receive(Some(Duration::from_secs(1))) {
                        Ok(m) => {
                            numbers.push(u32::from_le_bytes(m.payload[..4].try_into().unwrap()))
                        }
                        Err(_) if stop.load(Ordering::Relaxed) => break,
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                (numbers, errors, s.is_direct())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));

    // The roll: the CLI adds the next key to host 0's file, switched to in
    // 3 s, and the file is copied to the other nodes.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwire"))
        .args(["keygen", "--next"])
        .arg(&files[0])
        .args(["--switch-in", "3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rolled = std::fs::read_to_string(&files[0]).unwrap();
    let roll = KeyFile::parse(&rolled).unwrap();
    let (next, _) = roll.next.clone().expect("no next key in the file");
    assert_eq!(next.generation(), 1);
    for f in &files[1..] {
        replace(f, &roll);
    }
    let keys = |c: &tagwire::Client| {
        (
            counter(c, StatsKind::Node, "", "key_generation"),
            counter(c, StatsKind::Node, "", "keys_accepted"),
        )
    };
    // Read by every daemon: both keys open, the old one seals.
    wait_until("every node has both keys", || {
        c.iter().all(|c| keys(c) == (0, 2))
    });
    // Past the switch: every node seals with the next key.
    std::thread::sleep(Duration::from_millis(3500));
    for c in &c {
        assert_eq!(keys(c), (1, 2), "a node did not switch");
    }
    let sent_itself = || counter(&c[0], StatsKind::Node, "", "direct_sent");
    let after_switch = sent_itself();
    std::thread::sleep(Duration::from_millis(500));
    // The roll is finished by hand on every node (the grace would do it a
    // minute after the switch): the old key opens nothing any more.
    let finished = KeyFile {
        current: next.clone(),
        next: None,
    };
    for f in &files {
        replace(f, &finished);
    }
    wait_until("every node has the new key alone", || {
        c.iter().all(|c| keys(c) == (1, 1))
    });
    std::thread::sleep(Duration::from_secs(1));

    // What host 0 seals now carries the next generation's flag.
    let filter = format!(
        "udp and src host {} and dst host {}",
        site.lan.host(0).addr(),
        site.lan.host(1).addr()
    );
    let wire = captured(site.lan.host(1), &filter, || {
        std::thread::sleep(Duration::from_millis(500))
    });
    let mut seen_wire = None;
    if let Some(w) = wire {
        let sealed: Vec<_> = w
            .iter()
            .filter(|d| d.len() > 4 && d[..3] == *b"tA\x01")
            .collect();
        assert!(!sealed.is_empty(), "no sealed datagram captured");
        let even = sealed.iter().filter(|d| d[3] & 8 == 0).count();
        assert_eq!(
            even,
            0,
            "{even} of {} sealed with the old key",
            sealed.len()
        );
        seen_wire = Some(sealed.len());
    }
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    let got: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();

    // Every message once and in order, on every path.
    for (name, (numbers, errors, _)) in ["direct", "through the daemon", "TCP"].iter().zip(&got) {
        assert!(errors.is_empty(), "{name}: {errors:?}");
        let expected: Vec<u32> = (0..sent).collect();
        let first_missing = expected.iter().zip(numbers.iter()).find(|(a, b)| a != b);
        assert_eq!(
            numbers.len(),
            expected.len(),
            "{name}: {} of {sent} messages (first difference {first_missing:?}, last {:?})",
            numbers.len(),
            numbers.last()
        );
        assert_eq!(numbers, &expected, "{name}: out of order or repeated");
    }
    assert!(got[0].2, "the first subscriber was not direct");
    for (i, c) in c.iter().enumerate() {
        assert_eq!(
            counter(c, StatsKind::Node, "", "unauthenticated_datagrams"),
            0,
            "host {i} refused datagrams across the roll"
        );
    }
    // The publisher sealed its own first copies after the switch too (it
    // asked for the new generation's keys when its ticket said so).
    assert!(
        sent_itself() > after_switch,
        "the publisher sent no first copy itself after the switch"
    );

    // A node that kept the old key is not let in; with the new one it is.
    let old = key_file(dir, "old.key", 0x51);
    let stale = start_following(&site, 3, &old, &nodes);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        up_peers(&c[0]),
        2,
        "a daemon with the old key became a peer"
    );
    drop(stale);
    let _new = start_following(&site, 3, &files[3], &nodes);
    wait_until("host 3 with the new key joins", || up_peers(&c[0]) == 3);
    println!(
        "key roll: {sent} messages on three paths, none lost; {} sealed datagrams captured after it",
        seen_wire.map_or("no".into(), |n| n.to_string())
    );
}
