//! Runs the paper's benchmark example end to end: a daemon, two receiver
//! processes and the sender process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

#[test]
fn the_paper_benchmark_runs_with_two_receivers() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let _daemon = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
        socket: socket.clone(),
        ..tagwire_daemon::Config::default()
    })
    .unwrap();
    let receivers: Vec<_> = (0..2)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_paper-receiver"))
                .env("TAGWIRE_SOCKET", &socket)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_paper-sender"))
        .args(["200", "256", "2"])
        .env("TAGWIRE_SOCKET", &socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let us: f64 = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("round_trip_us="))
        .expect("sender prints the round trip")
        .parse()
        .unwrap();
    assert!(us > 0.0);
    for r in receivers {
        let o = r.wait_with_output().unwrap();
        assert!(o.status.success());
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "acknowledged 200 messages"
        );
    }
}
