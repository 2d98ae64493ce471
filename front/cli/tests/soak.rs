//! `tagwire perf soak` for two minutes with a fixed seed: four hosts in
//! network namespaces, twelve tags (each a publisher and two subscribers,
//! processes of their own; reliable, lossless, best-effort and TCP
//! subscribers; messages of 24 B to 1 MiB), a fault every four seconds
//! drawn from every kind (publishers, subscribers and daemons killed and
//! started again, link cuts, random drops, rate limits, partitions). No
//! message may be corrupt. Messages missing but not reported lost, and
//! messages repeated or out of order, are printed and held to at most 2
//! and 20: the soak found races that are still open (issue 43's note;
//! bench/results/soak/NOTES.md): a stream's first messages delivered
//! twice around a publisher's start (1, 0, 1), a TCP stream's messages out
//! of order after a partition (once in six 40 s runs after a fix for the
//! common case), and in a 10-minute run of a million messages one TCP
//! message missing that no report covered. In the 2-minute runs with this
//! seed none was lost in silence and at most 2 came twice; a regression
//! of the kind the soak found and fixed (hundreds) fails. `tagwire perf
//! soak` itself fails on any of them.
//!
//! A second run, a minute with keyed daemons, rolls their domain key
//! again and again among the other faults.
//!
//! Needs root (network namespaces): without it the test prints `skipped:
//! <reason>` and passes; `.ci/run` runs it as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tagwire");

/// The seven fault kinds other than a key roll, in `Fault::ALL`'s order
/// (so that seed 1 draws what it drew before key rolls existed).
const UNKEYED_FAULTS: &str =
    "kill-publisher,kill-subscriber,restart-daemon,link-down,drops,rate,partition";

/// Runs `perf soak` with `args` and holds its outcome to the bounds above:
/// no message corrupt, at most 2 lost in silence, at most 20 repeated or
/// out of order, every subscriber kind busy, and with `every_kind` every
/// fault kind asked for injected. Returns the outcome.
fn soak(args: &[&str], min_got: u64, min_lives: u64, every_kind: bool) -> serde_json::Value {
    // One soak at a time: two at once load the two cores twice over.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["perf", "soak", "--nodes", "4", "--tags", "12"])
        .args(args)
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    let table = std::fs::read_to_string(dir.path().join("soak.txt")).unwrap_or_default();
    println!("{table}");
    let said = String::from_utf8_lossy(&out.stderr);
    let json = std::fs::read_to_string(dir.path().join("soak.json"))
        .unwrap_or_else(|e| panic!("no soak.json ({e}): {said}"));
    let o: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let (mut silent, mut disordered) = (0, 0);
    for k in o["kinds"].as_array().unwrap() {
        let t = &k["tally"];
        let n = |f: &str| t[f].as_u64().unwrap();
        assert_eq!(n("corrupt"), 0, "{k}\n{table}");
        silent += n("missing").saturating_sub(n("reported"));
        disordered += n("duplicate") + n("reordered");
    }
    assert!(silent <= 2, "{silent} lost in silence:\n{table}");
    assert!(
        disordered <= 20,
        "{disordered} repeated or out of order:\n{table}"
    );
    // Every fault kind asked for came at least once (the seed draws them all).
    for f in o["faults"].as_array().unwrap() {
        assert!(
            !every_kind || f[1].as_u64().unwrap() >= 1,
            "{f} never injected:\n{table}"
        );
    }
    // Every kind of subscriber heard publishers, and more than one life
    // of some (publishers were killed and started again).
    for k in o["kinds"].as_array().unwrap() {
        let t = &k["tally"];
        assert!(t["got"].as_u64().unwrap() > min_got, "{k}");
        assert!(t["lives"].as_u64().unwrap() >= min_lives, "{k}");
    }
    o
}

#[test]
fn two_minutes_of_mixed_faults_lose_nothing_in_silence() {
    if let Some(reason) = tagwire_testkit::skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let o = soak(
        &[
            "--seconds",
            "120",
            "--fault-every",
            "4",
            "--seed",
            "1",
            "--faults",
            UNKEYED_FAULTS,
        ],
        1000,
        3,
        true,
    );
    assert_eq!(o["faults"].as_array().unwrap().len(), 7);
    assert!(o["sent"].as_u64().unwrap() > 50_000);
}

/// Keyed daemons whose domain key rolls every few faults (a new key in
/// every node's file, the switch two seconds later, the roll ended a
/// second after), among every other kind of fault: the same bounds hold.
#[test]
fn rolling_the_domain_key_among_faults_loses_nothing_in_silence() {
    if let Some(reason) = tagwire_testkit::skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let o = soak(
        &[
            "--seconds",
            "60",
            "--fault-every",
            "3",
            "--seed",
            "3",
            "--faults",
            "key-roll,kill-publisher,kill-subscriber,restart-daemon,link-down,drops,rate,partition",
        ],
        300,
        1,
        false,
    );
    let count = |kind: &str| {
        o["faults"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f[0] == kind)
            .and_then(|f| f[1].as_u64())
            .unwrap()
    };
    assert!(count("key-roll") >= 2, "{} key rolls", count("key-roll"));
    assert!(count("restart-daemon") >= 1, "no daemon restarted");
}
