//! `tagwire top`: its JSON frames (rates, members, losses) and its
//! terminal view under tmux (a 1 kHz tag, a filter, `q`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod local;

use std::process::Command;
use std::time::{Duration, Instant};

use local::{json_lines, run, Local, BIN};
use tagwire::Domain;

#[test]
fn top_shows_each_tags_members_rate_and_losses_per_frame() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let l = Local::new();
    let tag = "/tools/top";
    l.client.create_tag(tag, Domain::Global).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // A subscriber of depth 4 that reads ten times a second (its losses
    // are counted as it finds them) ...
    let mut sub = l
        .client
        .subscribe(tag, tagwire::SubscribeOptions::default().depth(4))
        .unwrap();
    let lost = Arc::new(AtomicU64::new(0));
    let (stopped, counted) = (Arc::clone(&stop), Arc::clone(&lost));
    let reader = std::thread::spawn(move || {
        while !stopped.load(Ordering::Relaxed) {
            if let Err(tagwire::Error::Overflowed { lost }) =
                sub.receive(Some(Duration::from_millis(100)))
            {
                counted.fetch_add(lost, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    // ... behind a publisher at 200 Hz.
    let (client, stopped) = (l.client.clone(), Arc::clone(&stop));
    let publisher = std::thread::spawn(move || {
        let mut p = client.publisher(tag).unwrap();
        let start = Instant::now();
        let mut n = 0u32;
        while !stopped.load(Ordering::Relaxed) {
            n += 1;
            let due = start + Duration::from_millis(5) * n;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            p.send(b"x").unwrap();
        }
    });
    let out = run(&l, &["top", "--json", "--count", "3", "--interval", "0.5"]);
    stop.store(true, Ordering::Relaxed);
    publisher.join().unwrap();
    reader.join().unwrap();
    let frames = json_lines(out.as_bytes());
    assert_eq!(frames.len(), 3, "{out}");
    let last = frames[2]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == tag)
        .cloned()
        .unwrap();
    assert_eq!(last["senders"], 1, "{last}");
    assert_eq!(last["receivers"], 1, "{last}");
    let rate = last["msgs_per_s"].as_f64().unwrap();
    assert!((100.0..=300.0).contains(&rate), "{last}");
    // Most of what it sends, the subscriber loses, and top says so.
    let lost_per_s = last["lost_per_s"].as_f64().unwrap();
    assert!(lost_per_s > 50.0 && lost_per_s <= rate * 1.5, "{last}");
    assert!(
        lost.load(Ordering::Relaxed) > 0,
        "the subscriber saw losses"
    );
}

/// `tmux ARGS`, its stdout.
fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn top_on_a_terminal_shows_a_1_khz_tag_filters_and_quits_on_q() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let l = Local::new();
    let (fast, other) = ("/tools/tui/pose", "/tools/tui/other");
    for t in [fast, other] {
        l.client.create_tag(t, Domain::Global).unwrap();
    }
    let _keep = l.client.subscribe(other, Default::default()).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (client, stopped) = (l.client.clone(), std::sync::Arc::clone(&stop));
    let publisher = std::thread::spawn(move || {
        let mut p = client.publisher(fast).unwrap();
        let start = Instant::now();
        let mut n = 0u32;
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            n += 1;
            let due = start + Duration::from_millis(1) * n;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            p.send(b"x").unwrap();
        }
    });
    let session = format!("tagwire-top-{}", std::process::id());
    let command = format!(
        "TAGWIRE_LOG=error {BIN} top --socket {}",
        l.socket().display()
    );
    let started = Command::new("tmux")
        .args(["new-session", "-d", "-x", "150", "-y", "40", "-s", &session])
        .arg(&command)
        .status()
        .unwrap();
    assert!(started.success());
    let screen = || tmux(&["capture-pane", "-p", "-t", &session]);
    // The fast tag's line, after a few refreshes, shows about 1000/s.
    let rate = |s: &str, tag: &str| -> Option<f64> {
        let line = s.lines().find(|l| l.contains(tag))?;
        let fields: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == '│')
            .filter(|f| !f.is_empty())
            .collect();
        fields.get(3)?.parse().ok()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = String::new();
    let mut ok = false;
    while Instant::now() < deadline && !ok {
        std::thread::sleep(Duration::from_millis(500));
        seen = screen();
        ok = rate(&seen, fast).is_some_and(|r| (800.0..=1200.0).contains(&r));
    }
    assert!(ok, "no ~1000/s line for {fast}:\n{seen}");
    assert!(seen.contains(other), "{seen}");
    // Filtering by "pose" leaves the other tag out.
    tmux(&[
        "send-keys",
        "-t",
        &session,
        "/",
        "p",
        "o",
        "s",
        "e",
        "Enter",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    let filtered = screen();
    assert!(
        filtered.contains(fast) && !filtered.contains(other),
        "{filtered}"
    );
    assert!(filtered.contains("filter: /pose/"), "{filtered}");
    // q quits: the session (its only command) ends.
    tmux(&["send-keys", "-t", &session, "q"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut gone = false;
    while Instant::now() < deadline && !gone {
        std::thread::sleep(Duration::from_millis(100));
        gone = !Command::new("tmux")
            .args(["has-session", "-t", &session])
            .status()
            .unwrap()
            .success();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    publisher.join().unwrap();
    if !gone {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &session])
            .status();
    }
    assert!(gone, "top did not quit on q");
}
