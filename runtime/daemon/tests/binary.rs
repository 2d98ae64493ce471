//! The `tagwired` binary's command line: it takes no options, and says so
//! instead of starting a daemon other than the one asked for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tagwired");

#[test]
fn tagwired_refuses_options_it_does_not_take_and_points_at_tagwire_daemon() {
    let out = Command::new(BIN)
        .args(["--node", "10.0.0.1"])
        .env("TAGWIRE_SOCKET", "/nonexistent/dir/tagwired.sock")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unexpected argument \"--node\""), "{err}");
    assert!(err.contains("tagwire daemon"), "{err}");
}

#[test]
fn tagwired_help_says_what_it_runs() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("usage: tagwired"), "{text}");
    assert!(text.contains("single-node"), "{text}");
}
