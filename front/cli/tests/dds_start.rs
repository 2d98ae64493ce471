//! Where a tagwire reader of a DDS topic starts with a Cyclone DDS writer
//! that writes from the moment it exists (the DDS gateway of a `tagwire
//! daemon` process, Cyclone DDS's Python binding), one sample a
//! millisecond (in the first test after 200 at once). The gateway's volatile reader holds what
//! arrives before a heartbeat says where it starts, and asks (a
//! pre-emptive ACKNACK); with Cyclone on the other side it must neither
//! start late nor wait: the tagwire subscriber's first sample is at most
//! the first the writer wrote after it saw the match, every later one
//! follows without a hole, and nothing is reported lost. In the first
//! test discovery matches them within a sample or two; in the second the
//! gateway starts (`tagwire dds-gateway`) half a second after the
//! writer (at about its 300th sample here), so the match comes in the
//! middle of the stream.
//!
//! Without Python's venv each test prints `skipped: <reason>`; `.ci/run`
//! installs what they need.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tagwire::{Domain, SubscribeOptions};

#[path = "dds/support.rs"]
mod support;
use support::*;

/// `counter_writer.py` in `domain`: `count` samples, `burst` of them at
/// once, then one a millisecond; its lines kept.
fn counter_writer(python: &std::path::Path, domain: u32, count: u64, burst: u64) -> (Kill, Lines) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/dds/counter_writer.py");
    spawn_lines(
        Command::new(python)
            .arg(&script)
            .args([
                domain.to_string(),
                count.to_string(),
                "1".into(),
                burst.to_string(),
            ])
            .stderr(Stdio::inherit()),
    )
}

type Lines = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Takes the writer's `count` samples from `sub` and checks where they
/// start: at most the first written after the writer saw the match (at
/// least `min_match` samples in), then every one, nothing lost.
fn starts_at_the_match(sub: &mut tagwire::Subscriber, count: u64, lines: &Lines, min_match: u64) {
    let got = take(sub, count);
    let said = lines.lock().unwrap().clone();
    let (first, _) = *got
        .first()
        .unwrap_or_else(|| panic!("nothing came: {said:?}"));
    let matched_at = got.iter().map(|(_, m)| *m).max().unwrap();
    println!(
        "the writer saw the match after sample {matched_at}; the subscriber's first was {first}, \
         then {} more",
        got.len() - 1
    );
    assert!(
        matched_at >= min_match,
        "the writer saw the match after {matched_at}: {said:?}"
    );
    assert!(
        first <= matched_at + 1,
        "started late: first {first}, written after the match from {}",
        matched_at + 1
    );
    assert!(
        got.windows(2).all(|p| p[1].0 == p[0].0 + 1),
        "a hole or a repeat: {:?}",
        got.iter().map(|g| g.0).collect::<Vec<_>>()
    );
    assert_eq!(got.last().unwrap().0, count);
    assert_eq!(sub.lost(), 0);
}

#[test]
fn a_tagwire_reader_starts_where_a_writing_cyclone_writer_matched_it() {
    let Some(python) = python_or_skip() else {
        return;
    };
    for domain in [53u32, 54, 55] {
        let (_dir, _d, c) = daemon(domain, "/items Items Item key=i32@0\n");
        // (Deep enough for the burst: a shallow one would report losses.)
        let mut sub = c
            .subscribe("/items", SubscribeOptions::default().depth(256))
            .unwrap();
        // 1,500 samples from before discovery: 200 at once, then one a
        // millisecond.
        let (_w, lines) = counter_writer(&python, domain, 1500, 200);
        starts_at_the_match(&mut sub, 1500, &lines, 1);
    }
}

/// The samples a subscriber got, as (n, the writer's n at the match),
/// until the writer's `last` or 20 s.
fn take(sub: &mut tagwire::Subscriber, last: u64) -> Vec<(u64, u64)> {
    let mut got: Vec<(u64, u64)> = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until && got.last().is_none_or(|(n, _)| *n < last) {
        match sub.receive(Some(Duration::from_millis(200))) {
            Ok(m) => {
                let t = text(&m.payload);
                let (n, at) = t.split_once(':').unwrap();
                got.push((n.parse().unwrap(), at.parse().unwrap()));
            }
            Err(tagwire::Error::Timeout) => {}
            Err(e) => panic!("{e}"),
        }
    }
    got
}

#[test]
fn a_gateway_started_in_the_middle_of_a_cyclone_stream_starts_at_its_match() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (dir, _d, c) = plain_daemon();
    // The subscriber first, so that nothing the gateway hands on is missed.
    c.create_tag("/items", Domain::Global).unwrap();
    let mut sub = c
        .subscribe("/items", SubscribeOptions::default().depth(256))
        .unwrap();
    let domain = 56u32;
    let (_w, lines) = counter_writer(&python, domain, 3000, 0);
    std::thread::sleep(Duration::from_millis(500));
    let _gateway = gateway(dir.path(), domain, "/items Items Item key=i32@0\n");
    starts_at_the_match(&mut sub, 3000, &lines, 100);
}

/// A tagwire publisher's stream, one sample a millisecond, and Cyclone
/// readers (`late_readers.py`): A from the start, then, 300 samples into
/// A's, B in A's participant and C in a participant of its own. Each
/// reader is volatile: B and C start near where they joined (not at the
/// writer's history), and every reader then takes every sample, in order,
/// with nothing lost by Cyclone's count. (B shares A's participant, where
/// Cyclone applies what the writer says to one reader to the others too:
/// nothing said to B may make A skip a sample.)
#[test]
fn cyclone_readers_that_join_a_tagwire_stream_late_start_there_and_lose_nothing() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let domain = 58u32;
    let (_dir, _d, c) = daemon(domain, "/items Items Item key=i32@0\n");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/dds/late_readers.py");
    let (_r, lines) = spawn_lines(
        Command::new(&python)
            .arg(&script)
            .args([domain.to_string(), "300".into(), "10".into()])
            .stderr(Stdio::inherit()),
    );
    let mut publ = c.publisher("/items").unwrap();
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < Duration::from_secs(8) {
        n += 1;
        publ.send_keyed(&0i32.to_be_bytes(), &item(0, &n.to_string()))
            .unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let until = Instant::now() + Duration::from_secs(15);
    while !lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.starts_with("lost C"))
    {
        assert!(Instant::now() < until, "{:?}", lines.lock().unwrap().last());
        std::thread::sleep(Duration::from_millis(100));
    }
    let lines = lines.lock().unwrap().clone();
    let joined: u64 = lines
        .iter()
        .find_map(|l| l.strip_prefix("joined "))
        .unwrap_or_else(|| panic!("B and C never joined: {lines:?}"))
        .parse()
        .unwrap();
    for reader in ["A", "B", "C"] {
        let got: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix(reader)?.strip_prefix(' ')?.parse().ok())
            .collect();
        let lost = lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("lost {reader} ")))
            .unwrap();
        println!(
            "{reader}: {} samples, {}..={}, Cyclone counted {lost} lost (joined after {joined})",
            got.len(),
            got.first().unwrap_or(&0),
            got.last().unwrap_or(&0),
        );
        assert!(!got.is_empty(), "{reader} got nothing");
        assert!(
            got.windows(2).all(|p| p[1] == p[0] + 1),
            "{reader}: a hole or a repeat: {got:?}"
        );
        assert_eq!(*got.last().unwrap(), n, "{reader} did not get the last");
        assert_eq!(lost, "0", "{reader}");
        if reader != "A" {
            // Not the writer's history (a volatile reader), and not long
            // after it joined (a second at this rate).
            assert!(
                got[0] + 5 > joined && got[0] <= joined + 1000,
                "{reader} started at {}, joined after {joined}",
                got[0]
            );
        }
    }
}
