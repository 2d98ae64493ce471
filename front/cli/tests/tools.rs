//! The everyday shell tools against a daemon in this process: `tagwire
//! hz` and `bw` with two senders at known rates and sizes, `pub` with its
//! payload from an argument, a file or standard input (keyed or not),
//! `sub --format` printing whole payloads as text, hex, raw bytes or JSON,
//! `info`, `destroy`, JSON listings, shell completions and man pages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod local;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use local::{json_lines, run, stdout_of, Local, BIN};
use tagwire::Domain;

#[test]
fn pub_sends_its_argument_and_sub_prints_it_whole_as_json() {
    let l = Local::new();
    let tag = "/tools/arg";
    let sub = l.sub(tag, &["--count", "3", "--format", "json"]);
    let text = "hello, tagwire: a payload longer than the forty bytes of a preview";
    let p = l.spawn(
        &["pub", tag, text, "--count", "3", "--rate", "100"],
        Stdio::null(),
    );
    stdout_of(p);
    let got = json_lines(&stdout_of(sub));
    assert_eq!(got.len(), 3, "{got:?}");
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m["text"], text, "{m}");
        assert_eq!(m["seq"], i as u64 + 1, "{m}");
        assert_eq!(m["size"], text.len(), "{m}");
        assert_eq!(m["key"], serde_json::Value::Null, "{m}");
    }
}

#[test]
fn pub_sends_a_line_of_stdin_each_and_sub_raw_prints_the_bytes_alone() {
    let l = Local::new();
    let tag = "/tools/stdin";
    let sub = l.sub(tag, &["--count", "3", "--format", "raw"]);
    let mut p = l.spawn(&["pub", tag, "--stdin", "--rate", "0"], Stdio::piped());
    p.stdin
        .take()
        .unwrap()
        .write_all(b"a\nbb\r\nccc\n")
        .unwrap();
    stdout_of(p);
    assert_eq!(stdout_of(sub), b"abbccc");
}

#[test]
fn pub_sends_a_files_bytes_under_a_key_and_sub_prints_them_in_hex() {
    let l = Local::new();
    let tag = "/tools/file";
    let file: &Path = &l.dir.path().join("payload.bin");
    let bytes = [0u8, 0xff, 0x10, b'\n', 0x80];
    std::fs::write(file, bytes).unwrap();
    let sub = l.sub(tag, &["--count", "2", "--format", "hex"]);
    let p = l.spawn(
        &[
            "pub",
            tag,
            "--file",
            file.to_str().unwrap(),
            "--key",
            "arm-1",
            "--count",
            "2",
        ],
        Stdio::null(),
    );
    stdout_of(p);
    let out = String::from_utf8(stdout_of(sub)).unwrap();
    let key: String = tagwire::Key::of(b"arm-1")
        .0
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("seq=")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for line in lines {
        assert!(line.ends_with(" payload=00ff100a80"), "{line}");
        assert!(line.contains(&format!(" key={key} ")), "{line}");
    }
    // The same binary payload as JSON: no text, every byte in hex (on a
    // tag of its own: the first subscriber may still be listed).
    let tag = "/tools/file-json";
    let sub = l.sub(tag, &["--count", "1", "--format", "json"]);
    let p = l.spawn(
        &["pub", tag, "--file", file.to_str().unwrap(), "--count", "1"],
        Stdio::null(),
    );
    stdout_of(p);
    let got = json_lines(&stdout_of(sub));
    assert_eq!(got[0]["payload_hex"], "00ff100a80", "{:?}", got);
    assert_eq!(got[0]["text"], serde_json::Value::Null, "{:?}", got);
}

/// Runs `tagwire ARGS --json` for `seconds` while this process publishes
/// on `tag` at 200 Hz (sizes cycling through 100, 300, 500 B) and a
/// `tagwire pub` child at 50 Hz (64 B); returns each sender's last JSON
/// object, this process's first.
fn measured(what: &str, tag: &str) -> (serde_json::Value, serde_json::Value) {
    let l = Local::new();
    let client = &l.client;
    client.create_tag(tag, Domain::Global).unwrap();
    let mut p = client.publisher(tag).unwrap();
    let args = [what, tag, "--seconds", "3", "--window", "100", "--json"];
    let tool = l.spawn(&args, Stdio::null());
    let args = ["pub", tag, "--rate", "50", "--size", "64", "--count", "200"];
    let mut other = l.spawn(&args, Stdio::null());
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
    drop(p);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let me = format!("{}@", std::process::id());
    let last = |mine: bool| {
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["tag"] == tag && v["sender"].is_string())
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
fn hz_prints_no_stale_figures_once_its_sender_stops() {
    let l = Local::new();
    let tag = "/tools/hz/stops";
    l.client.create_tag(tag, Domain::Global).unwrap();
    let tool = l.spawn(&["hz", tag, "--seconds", "3.5", "--json"], Stdio::null());
    l.wait_receiver(tag);
    let mut p = l.client.publisher(tag).unwrap();
    for _ in 0..100 {
        p.send(b"tick").unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(p);
    let reports = json_lines(&stdout_of(tool));
    assert!(
        reports.iter().any(|r| r["rate_hz"].is_number()),
        "{reports:?}"
    );
    // The sender stopped a second or more before the last two reports:
    // they say nothing came, with no figures of before.
    let tail = &reports[reports.len() - 2..];
    for r in tail {
        assert_eq!(r["no_new_messages"], true, "{reports:?}");
        assert!(r.get("rate_hz").is_none(), "{r}");
    }
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

#[test]
fn info_gives_a_tags_members_with_their_qos_and_its_rate_here() {
    let l = Local::new();
    let tag = "/tools/info";
    l.client.create_tag(tag, Domain::Global).unwrap();
    let opts = tagwire::SubscribeOptions::default()
        .priority(tagwire::Priority::High)
        .every(2);
    let _sub = l.client.subscribe(tag, opts).unwrap();
    let mut p = l.client.publisher(tag).unwrap();
    let info = l.spawn(&["info", tag, "--json", "--sample", "1.5"], Stdio::null());
    let start = Instant::now();
    let mut k = 0u32;
    while start.elapsed() < Duration::from_millis(2500) {
        k += 1;
        p.send(b"x").unwrap();
        let next = start + Duration::from_millis(5) * k;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let v = &json_lines(&stdout_of(info))[0];
    let me = format!("{}@127.0.0.1", std::process::id());
    assert_eq!(v["domain"], "global", "{v}");
    assert_eq!(v["senders"][0]["who"], me, "{v}");
    assert_eq!(v["senders"][0]["class"], "normal", "{v}");
    let r = &v["receivers"][0];
    assert_eq!(r["who"], me, "{v}");
    assert_eq!(r["class"], "high", "{v}");
    assert_eq!(r["every"], 2, "{v}");
    assert_eq!(r["reliability"], "reliable", "{v}");
    // 200 messages a second through this node's ring.
    let rate = v["rate_per_s"].as_f64().unwrap();
    assert!((150.0..=250.0).contains(&rate), "{v}");
    // A tag that does not exist is an error, not an empty listing.
    let missing = l
        .spawn(&["info", "/tools/none"], Stdio::null())
        .wait_with_output()
        .unwrap();
    assert!(!missing.status.success(), "{missing:?}");
}

#[test]
fn tags_and_nodes_print_json_and_destroy_ends_a_tag() {
    let l = Local::new();
    let tag = "/tools/listed";
    l.client.create_tag(tag, Domain::Global).unwrap();
    let _p = l.client.publisher(tag).unwrap();
    let listed = |l: &Local| -> Vec<serde_json::Value> {
        json_lines(run(l, &["tags", "--json"]).as_bytes())
            .into_iter()
            .filter(|t| t["tag"] == tag)
            .collect()
    };
    let tags = listed(&l);
    assert_eq!(tags.len(), 1, "{tags:?}");
    let me = format!("{}@127.0.0.1", std::process::id());
    assert_eq!(tags[0]["senders"], serde_json::json!([me]), "{tags:?}");
    assert_eq!(tags[0]["receivers"], serde_json::json!([]), "{tags:?}");
    let nodes = json_lines(run(&l, &["nodes", "--json"]).as_bytes());
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(nodes[0]["source"], "self", "{nodes:?}");
    assert_eq!(nodes[0]["state"], "up", "{nodes:?}");
    assert!(run(&l, &["destroy", tag]).contains("destroyed"));
    assert!(listed(&l).is_empty());
}

/// `tagwire completions SHELL` prints a script that knows the
/// subcommands; `tagwire man` writes a page per command, `tagwired`'s
/// among them, and none for the hidden internal ones.
#[test]
fn completions_and_man_pages_cover_every_command() {
    let out = Command::new(BIN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    for word in ["_tagwire", "hz", "bw", "qos", "info", "destroy", "--format"] {
        assert!(script.contains(word), "{word} missing from the bash script");
    }
    let zsh = Command::new(BIN)
        .args(["completions", "zsh"])
        .output()
        .unwrap();
    assert!(
        zsh.status.success() && String::from_utf8_lossy(&zsh.stdout).contains("#compdef tagwire")
    );
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for page in [
        "tagwire.1",
        "tagwire-hz.1",
        "tagwire-pub.1",
        "tagwire-perf-napa.1",
        "tagwired.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH "), "{page}: {text}");
    }
    assert!(!dir.path().join("tagwire-perf-worker.1").exists());
    let pub_page = std::fs::read_to_string(dir.path().join("tagwire-pub.1")).unwrap();
    assert!(pub_page.contains("stdin"), "{pub_page}");
}
