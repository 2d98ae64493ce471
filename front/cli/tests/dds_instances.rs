//! Keyed data, ownership and deadlines between Cyclone DDS (its Python
//! binding, PyPI `cyclonedds`) and tagwire, through the DDS gateway of a
//! `tagwire daemon` process (issue 20's interop matrix):
//!
//! * a Cyclone writer's three instances and a dispose reach a tagwire
//!   subscriber with their keys, the dispose as a disposed instance, the
//!   writer named as the origin;
//! * a tagwire publisher's three instances and a dispose reach a Cyclone
//!   reader, the dispose as NOT_ALIVE_DISPOSED;
//! * two exclusive Cyclone writers of strengths 10 and 20: an exclusive
//!   tagwire subscriber gets only the stronger's samples, is told when it
//!   goes silent past the deadline, and fails over to the weaker;
//! * a tagwire subscriber with a minimum separation takes a fast Cyclone
//!   writer's samples thinned per instance, the newest of each interval.
//!
//! Without Python's venv each test prints `skipped: <reason>`; `.ci/run`
//! installs what they need.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tagwire::{InstanceState, Key, SubscribeOptions};

#[path = "dds/support.rs"]
mod support;
use support::*;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/dds")
        .join(name)
}

/// `items_writer.py` in `domain`, its lines kept.
fn writer(
    python: &std::path::Path,
    domain: u32,
    args: &[&str],
) -> (Kill, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    spawn_lines(
        Command::new(python)
            .arg(script("items_writer.py"))
            .arg(domain.to_string())
            .args(args)
            .stderr(Stdio::inherit()),
    )
}

/// `Item` { @key long id; string text } is keyed by its first field.
const MAP: &str = "/items Items Item key=i32@0\n";

#[test]
fn a_cyclone_writers_instances_and_dispose_reach_a_tagwire_subscriber_by_key() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (_dir, _d, c) = daemon(50, MAP);
    let mut sub = c.subscribe("/items", SubscribeOptions::default()).unwrap();
    let (_w, _lines) = writer(&python, 50, &["-1", "1,2,3", "1", "10", "1", "dispose=2"]);
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while got.len() < 4 && Instant::now() < until {
        if let Ok(m) = sub.receive(Some(Duration::from_millis(200))) {
            got.push(m);
        }
    }
    assert_eq!(got.len(), 4, "{got:?}");
    for (m, id) in got.iter().zip([1i32, 2, 3]) {
        assert_eq!(m.key, Some(Key::of(&id.to_be_bytes())));
        assert_eq!(m.state, InstanceState::Alive);
        assert_eq!(text(&m.payload), "-1:0");
        assert!(m.origin.is_some(), "the DDS writer");
    }
    assert_eq!(got[3].key, Some(Key::of(&2i32.to_be_bytes())));
    assert_eq!(got[3].state, InstanceState::Disposed);
    assert_eq!(got[3].origin.unwrap().guid, got[0].origin.unwrap().guid);
}

#[test]
fn a_tagwire_publishers_instances_and_dispose_reach_a_cyclone_reader() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (_dir, _d, c) = daemon(51, MAP);
    let (_r, lines) = spawn_lines(
        Command::new(&python)
            .arg(script("items_reader.py"))
            .args(["51", "4", "20"])
            .stderr(Stdio::inherit()),
    );
    let mut p = c.publisher("/items").unwrap();
    // Until the reader matched and took the first round, every 200 ms.
    let until = Instant::now() + Duration::from_secs(15);
    while lines.lock().unwrap().is_empty() && Instant::now() < until {
        for id in 1..=3i32 {
            p.send_keyed(&id.to_be_bytes(), &item(id, "t")).unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(300));
    p.dispose(&2i32.to_be_bytes()).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.starts_with("disposed"))
    {
        assert!(
            Instant::now() < until,
            "the reader said: {:?}",
            lines.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let l = lines.lock().unwrap().clone();
    for id in 1..=3 {
        assert!(l.contains(&format!("data {id} t")), "{l:?}");
    }
    assert!(l.contains(&"disposed 2".to_string()), "{l:?}");
}

#[test]
fn an_exclusive_subscriber_fails_over_between_two_cyclone_writers_by_strength() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (_dir, _d, c) = daemon(52, "/items Items Item key=i32@0 exclusive deadline=200\n");
    let mut sub = c
        .subscribe(
            "/items",
            SubscribeOptions::default()
                .exclusive()
                .deadline(Duration::from_millis(300)),
        )
        .unwrap();
    // The strong writer: 20 rounds 50 ms apart, then 4 s silent (alive).
    // The weak one: 60 rounds, 50 ms apart.
    let (_strong, s_lines) = writer(&python, 52, &["20", "7", "20", "50", "4"]);
    let (_weak, w_lines) = writer(&python, 52, &["10", "7", "60", "50", "1"]);
    let mut events = Vec::new();
    let until = Instant::now() + Duration::from_secs(25);
    while Instant::now() < until {
        match sub.receive(Some(Duration::from_millis(200))) {
            Ok(m) => {
                let t = text(&m.payload);
                let last = t == "10:59";
                events.push(Ok((t, m.strength)));
                if last {
                    break;
                }
            }
            Err(tagwire::Error::DeadlineMissed { key, .. }) => events.push(Err(key)),
            Err(tagwire::Error::Timeout) => {}
            Err(e) => panic!("{e}"),
        }
    }
    let said = || format!("{events:?}\nstrong: {s_lines:?}\nweak: {w_lines:?}");
    let is = |e: &Result<(String, Option<i32>), Option<Key>>, who: &str| matches!(e, Ok((t, _)) if t.starts_with(who));
    // The weak writer may own the instance until the strong one's first
    // sample; from then on only the strong one's, until it goes silent.
    let first_strong = events
        .iter()
        .position(|e| is(e, "20:"))
        .unwrap_or_else(|| panic!("nothing from the strong writer: {}", said()));
    let last_strong = events.iter().rposition(|e| is(e, "20:")).unwrap();
    let during = &events[first_strong..=last_strong];
    assert!(during.iter().all(|e| is(e, "20:")), "{}", said());
    assert!(during.len() >= 10, "{}", said());
    assert!(during.iter().all(|e| matches!(e, Ok((_, Some(20))))));
    // Then its missed deadline, then the weak one's samples, with its
    // strength.
    let after = &events[last_strong + 1..];
    assert_eq!(
        after.first(),
        Some(&Err(Some(Key::of(&7i32.to_be_bytes())))),
        "no missed deadline before the fail-over: {}",
        said()
    );
    assert!(after[1..]
        .iter()
        .all(|e| matches!(e, Ok((t, Some(10))) if t.starts_with("10:")) || e.is_err()));
    assert!(after.len() > 10, "the weak writer took over: {}", said());
    assert!(sub.filtered().not_owner >= 10, "{:?}", sub.filtered());
}

#[test]
fn a_tagwire_subscriber_takes_a_cyclone_writers_samples_at_its_minimum_separation() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (_dir, _d, c) = daemon(53, MAP);
    let sep = Duration::from_millis(100);
    let mut sub = c
        .subscribe("/items", SubscribeOptions::default().min_separation(sep))
        .unwrap();
    // 40 rounds of instances 1 and 2, 10 ms apart: about 400 ms of data.
    let (_w, _lines) = writer(&python, 53, &["-1", "1,2", "40", "10", "1"]);
    let mut got: Vec<(Instant, i32, u32)> = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        match sub.receive(Some(Duration::from_millis(500))) {
            Ok(m) => {
                let id = i32::from_le_bytes(m.payload[4..8].try_into().unwrap());
                let round: u32 = text(&m.payload)[3..].parse().unwrap();
                got.push((Instant::now(), id, round));
            }
            // Quiet for 500 ms after data came: the writer is done.
            Err(tagwire::Error::Timeout) if !got.is_empty() => break,
            Err(_) => {}
        }
    }
    for id in [1, 2] {
        let of: Vec<&(Instant, i32, u32)> = got.iter().filter(|g| g.1 == id).collect();
        // Thinned: the first at once, then about one per 100 ms.
        assert!((3..=10).contains(&of.len()), "instance {id}: {of:?}");
        assert!(
            of.windows(2).all(|w| w[0].2 < w[1].2),
            "newer each time: {of:?}"
        );
        assert!(
            of.windows(2)
                .all(|w| w[1].0.duration_since(w[0].0) >= sep - Duration::from_millis(15)),
            "at most one per interval: {of:?}"
        );
        // The newest of the last interval is handed out when it ends.
        assert_eq!(of.last().unwrap().2, 39, "{of:?}");
    }
    assert!(sub.filtered().replaced > 40, "{:?}", sub.filtered());
}
