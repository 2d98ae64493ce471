//! `tagwire hz` and `tagwire bw` against a daemon in this process: two
//! senders at known rates and sizes, each reported on its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, Domain};
use tagwire_daemon::{Config, Daemon};

const BIN: &str = env!("CARGO_BIN_EXE_tagwire");

/// Runs `tagwire ARGS --json` for `seconds` while this process publishes
/// on `tag` at 200 Hz (sizes cycling through 100, 300, 500 B) and a
/// `tagwire pub` child at 50 Hz (64 B); returns each sender's last JSON
/// object, this process's first.
fn measured(what: &str, tag: &str) -> (serde_json::Value, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let daemon = Daemon::start(Config {
        socket: socket.clone(),
        ..Config::default()
    })
    .unwrap();
    let client = Client::with_options(ClientOptions {
        socket: socket.clone(),
        autostart: false,
        ..ClientOptions::default()
    })
    .unwrap();
    client.create_tag(tag, Domain::Global).unwrap();
    let mut p = client.publisher(tag).unwrap();
    let tool = Command::new(BIN)
        .args([what, tag, "--seconds", "3", "--window", "100", "--json"])
        .arg("--socket")
        .arg(&socket)
        .env("TAGWIRE_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut other = Command::new(BIN)
        .args(["pub", tag, "--rate", "50", "--size", "64", "--count", "200"])
        .arg("--socket")
        .arg(&socket)
        .env("TAGWIRE_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut k = 0u64;
    while start.elapsed() < Duration::from_millis(3500) {
        k += 1;
        let size = [100, 300, 500][(k % 3) as usize];
        p.send(&vec![1u8; size]).unwrap();
        let next = start + Duration::from_millis(5 * k);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let out = tool.wait_with_output().unwrap();
    let _ = other.kill();
    let _ = other.wait();
    drop((p, client));
    daemon.shutdown();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let me = format!("{}@", std::process::id());
    let last = |mine: bool| {
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["tag"] == tag)
            .rfind(|v| v["sender"].as_str().unwrap().starts_with(&me) == mine)
            .unwrap_or_else(|| {
                panic!(
                    "no report for {} sender in:\n{text}",
                    if mine { "this" } else { "the other" }
                )
            })
    };
    (last(true), last(false))
}

fn near(v: &serde_json::Value, want: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - want).abs() <= 0.25 * want)
}

#[test]
fn hz_reports_each_senders_rate_and_interval_spread() {
    let (mine, other) = measured("hz", "/rates/hz");
    assert!(near(&mine["rate_hz"], 200.0), "{mine}");
    assert!(near(&other["rate_hz"], 50.0), "{other}");
    assert_eq!(mine["window"], 100, "{mine}");
    let (min, max) = (
        mine["min_s"].as_f64().unwrap(),
        mine["max_s"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= 0.005 && max >= 0.005, "{mine}");
    assert!(mine["std_s"].as_f64().unwrap() < max, "{mine}");
    assert_eq!(mine["lost"], 0, "{mine}");
}

#[test]
fn bw_reports_each_senders_bytes_per_second_and_sizes() {
    let (mine, other) = measured("bw", "/rates/bw");
    // 200 Hz of 100, 300 and 500 B in turn: 60 kB/s, mean 300 B.
    assert!(near(&mine["bytes_per_s"], 60_000.0), "{mine}");
    assert_eq!(
        (mine["min_size"].as_u64(), mine["max_size"].as_u64()),
        (Some(100), Some(500)),
        "{mine}"
    );
    assert!(near(&mine["mean_size"], 300.0), "{mine}");
    assert!(near(&other["bytes_per_s"], 50.0 * 64.0), "{other}");
    assert_eq!(other["max_size"], 64, "{other}");
}
