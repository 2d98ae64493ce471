//! The everyday shell tools against a daemon in this process: `tagwire
//! hz` and `bw` with two senders at known rates and sizes, `pub` with its
//! payload from an argument, a file or standard input (keyed or not),
//! `sub --format` printing whole payloads as text, hex, raw bytes or JSON,
//! `info`, `destroy`, JSON listings, shell completions and man pages,
//! `record` into an MCAP file (read back here with the `mcap` crate) and
//! `play` from one, hostile files included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, Domain};
use tagwire_daemon::{Config, Daemon};

const BIN: &str = env!("CARGO_BIN_EXE_tagwire");

/// A daemon on a socket of its own, and a client of it.
struct Local {
    dir: tempfile::TempDir,
    daemon: Option<Daemon>,
    client: Client,
}

impl Local {
    fn new() -> Local {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tagwired.sock");
        let daemon = Daemon::start(Config {
            socket: socket.clone(),
            ..Config::default()
        })
        .unwrap();
        let client = Client::with_options(ClientOptions {
            socket,
            autostart: false,
            ..ClientOptions::default()
        })
        .unwrap();
        Local {
            dir,
            daemon: Some(daemon),
            client,
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("tagwired.sock")
    }

    /// `tagwire ARGS --socket S`, its stdout piped.
    fn spawn(&self, args: &[&str], stdin: Stdio) -> Child {
        Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(self.socket())
            .env("TAGWIRE_LOG", "error")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Starts `tagwire sub TAG ARGS` and waits until it is subscribed.
    fn sub(&self, tag: &str, args: &[&str]) -> Child {
        let mut all = vec!["sub", tag, "--idle-timeout", "10"];
        all.extend_from_slice(args);
        let child = self.spawn(&all, Stdio::null());
        self.wait_receiver(tag);
        child
    }

    /// Waits (at most 10 s) until `tag` has a receiver.
    fn wait_receiver(&self, tag: &str) {
        let start = Instant::now();
        while self.client.receivers(tag).map_or(true, |r| r.is_empty()) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no receiver of {tag}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if let Some(d) = self.daemon.take() {
            d.shutdown();
        }
    }
}

/// Waits for `child` to succeed; its stdout.
fn stdout_of(child: Child) -> Vec<u8> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out.stdout
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

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

/// Runs `tagwire ARGS` to completion; its stdout as text.
fn run(l: &Local, args: &[&str]) -> String {
    String::from_utf8(stdout_of(l.spawn(args, Stdio::null()))).unwrap()
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

/// An MCAP file's records, as the `mcap` crate (not tagwire's reader)
/// reads them.
#[derive(Default)]
struct Mcap {
    channels: std::collections::HashMap<u16, mcap::records::Channel>,
    /// In file order.
    messages: Vec<(mcap::records::MessageHeader, Vec<u8>)>,
    metadata: Vec<mcap::records::Metadata>,
}

fn mcap_records(path: &Path) -> Mcap {
    let bytes = std::fs::read(path).unwrap();
    let mut f = Mcap::default();
    for r in mcap::read::ChunkFlattener::new(&bytes).unwrap() {
        match r.unwrap() {
            mcap::records::Record::Channel(c) => {
                f.channels.insert(c.id, c);
            }
            mcap::records::Record::Message { header, data } => {
                f.messages.push((header, data.into_owned()))
            }
            mcap::records::Record::Metadata(m) => f.metadata.push(m),
            _ => {}
        }
    }
    f
}

/// The `mcap` package of PyPI (Foxglove's Python reader, written apart
/// from the Rust crate) in a venv made on first use under `target/`, or
/// why it cannot be had here.
fn mcap_python() -> Result<PathBuf, String> {
    const MCAP_PY: &str = "1.6.0";
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcap-venv");
    let python = dir.join("bin/python");
    let marker = dir.join(".tagwire-mcap");
    if marker.is_file() {
        return Ok(python);
    }
    let venv = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !venv.status.success() {
        return Err("python3 -m venv failed (apt-get install python3-venv)".into());
    }
    let pip = Command::new(&python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(format!("mcap=={MCAP_PY}"))
        .output()
        .map_err(|e| format!("pip: {e}"))?;
    if !pip.status.success() {
        return Err(format!(
            "pip could not install mcap {MCAP_PY} (no PyPI here?): {}",
            String::from_utf8_lossy(&pip.stderr)
        ));
    }
    std::fs::write(&marker, MCAP_PY).map_err(|e| e.to_string())?;
    Ok(python)
}

/// `python -c SCRIPT FILE`'s standard output (it must succeed).
fn python_on(python: &Path, script: &str, file: &Path) -> String {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn record_keeps_every_message_its_sender_key_and_times_and_play_sends_them_back() {
    let l = Local::new();
    let (raw, keyed) = ("/bag/raw", "/bag/keyed");
    let file = l.dir.path().join("two.mcap");
    let rec = l.spawn(
        &[
            "record",
            raw,
            keyed,
            "--out",
            file.to_str().unwrap(),
            "--count",
            "8",
        ],
        Stdio::null(),
    );
    for tag in [raw, keyed] {
        l.wait_receiver(tag);
    }
    let before = unix_ns();
    // Four small messages 60 ms apart and a large one (a blob).
    let large: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut payloads: Vec<Vec<u8>> = (0..4).map(|i| format!("m{i}").into_bytes()).collect();
    payloads.push(large);
    let mut p = l.client.publisher(raw).unwrap();
    for m in &payloads {
        p.send(m).unwrap();
        std::thread::sleep(Duration::from_millis(60));
    }
    let mut k = l.client.publisher(keyed).unwrap();
    k.send_keyed(b"robot-1", b"pose-a").unwrap();
    k.send_keyed(b"robot-2", b"pose-b").unwrap();
    k.dispose(b"robot-1").unwrap();
    let out = String::from_utf8(stdout_of(rec)).unwrap();
    let after = unix_ns();
    assert!(out.contains("recorded 8 messages of 2 tags"), "{out}");
    assert!(out.contains("lost 0"), "{out}");

    let Mcap {
        channels,
        messages,
        metadata,
    } = mcap_records(&file);
    let me = l.client.me().to_string();
    let on = |topic: &str| -> Vec<&(mcap::records::MessageHeader, Vec<u8>)> {
        messages
            .iter()
            .filter(|(h, _)| channels[&h.channel_id].topic == topic)
            .collect()
    };
    let raws = on(raw);
    assert_eq!(raws.len(), 5);
    for (i, (h, data)) in raws.iter().enumerate() {
        let c = &channels[&h.channel_id];
        assert_eq!(c.message_encoding, "application/octet-stream");
        assert_eq!(c.metadata["sender"], me);
        assert_eq!(data, &payloads[i]);
        assert_eq!(h.sequence, i as u32 + 1);
        assert!(
            before <= h.publish_time && h.publish_time <= h.log_time,
            "{h:?}"
        );
        assert!(h.log_time <= after, "{h:?}");
    }
    let keys = on(keyed);
    assert_eq!(keys.len(), 3);
    let want: [(&[u8], u8, &[u8]); 3] = [
        (b"robot-1", 0, b"pose-a"),
        (b"robot-2", 0, b"pose-b"),
        (b"robot-1", 1, b""),
    ];
    for ((h, data), (key, state, payload)) in keys.iter().zip(want) {
        assert_eq!(
            channels[&h.channel_id].message_encoding,
            "application/x-tagwire-keyed"
        );
        // Key hash (a key of 16 bytes or less is itself, zero-padded),
        // state, payload.
        let mut hash = [0u8; 16];
        hash[..key.len()].copy_from_slice(key);
        assert_eq!(&data[..16], &hash);
        assert_eq!(data[16], state);
        assert_eq!(&data[17..], payload);
    }
    let summary = metadata
        .iter()
        .find(|m| m.name == "tagwire.record")
        .expect("the recorder's summary");
    assert_eq!(summary.metadata["/bag/raw:recorded"], "5");
    assert_eq!(summary.metadata["/bag/raw:lost"], "0");
    assert_eq!(summary.metadata["/bag/keyed:recorded"], "3");

    // Foxglove's Python reader sees the same file.
    match mcap_python() {
        Ok(python) => {
            let script = r#"
import sys
from mcap.reader import make_reader
with open(sys.argv[1], "rb") as f:
    r = make_reader(f)
    for schema, channel, message in r.iter_messages():
        print(channel.topic, channel.message_encoding, message.sequence, len(message.data))
    for m in r.iter_metadata():
        print(m.name, m.metadata["/bag/raw:recorded"], m.metadata["/bag/keyed:lost"])
"#;
            let got = python_on(&python, script, &file);
            let lines: Vec<&str> = got.lines().collect();
            assert_eq!(lines.len(), 9, "{got}");
            assert_eq!(lines[0], "/bag/raw application/octet-stream 1 2", "{got}");
            assert!(
                lines.contains(&"/bag/raw application/octet-stream 5 300000"),
                "{got}"
            );
            assert!(
                lines.contains(&"/bag/keyed application/x-tagwire-keyed 3 17"),
                "{got}"
            );
            assert_eq!(lines[8], "tagwire.record 5 0", "{got}");
        }
        Err(why) => println!("skipped: the Python mcap reader's check: {why}"),
    }

    // Played back at the recorded pace, the raw tag renamed.
    l.client.create_tag("/bag/again", Domain::Global).unwrap();
    let mut sub_raw = l
        .client
        .subscribe("/bag/again", tagwire::SubscribeOptions::default())
        .unwrap();
    let mut sub_keyed = l
        .client
        .subscribe(keyed, tagwire::SubscribeOptions::default())
        .unwrap();
    let play = l.spawn(
        &[
            "play",
            file.to_str().unwrap(),
            "--remap",
            "/bag/raw=/bag/again",
        ],
        Stdio::null(),
    );
    let t = Duration::from_secs(10);
    let mut arrived = Vec::new();
    for m in &payloads {
        let got = sub_raw.receive(Some(t)).unwrap();
        arrived.push(Instant::now());
        assert_eq!(&got.payload, m);
    }
    // The player sleeps until each message's recorded offset: the first
    // to the last cannot come sooner than they were recorded, less the
    // first one's way to us (a margin of 50 ms; the recording spans about
    // 240 ms, and a player that ignored the spacing would take a few).
    let recorded = Duration::from_nanos(raws[4].0.log_time - raws[0].0.log_time);
    let played = arrived[4] - arrived[0];
    assert!(
        played + Duration::from_millis(50) >= recorded,
        "played over {played:?}, recorded over {recorded:?}"
    );
    for (key, state, payload) in want {
        let got = sub_keyed.receive(Some(t)).unwrap();
        assert_eq!(got.key, Some(tagwire::Key::of(key)));
        let want_state = if state == 0 {
            tagwire::InstanceState::Alive
        } else {
            tagwire::InstanceState::Disposed
        };
        assert_eq!(got.state, want_state);
        assert_eq!(got.payload, payload);
    }
    let out = String::from_utf8(stdout_of(play)).unwrap();
    assert!(out.contains("played 8 messages on 2 tags"), "{out}");
}

/// `tagwire play FILE ARGS`: whether it succeeded, and its stderr.
fn play_file(l: &Local, file: &Path, args: &[&str]) -> (std::process::ExitStatus, String) {
    let out = Command::new(BIN)
        .arg("play")
        .arg(file)
        .args(args)
        .arg("--socket")
        .arg(l.socket())
        .env("TAGWIRE_LOG", "error")
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn play_sends_another_tools_file_as_its_bytes_and_refuses_hostile_files_clearly() {
    let l = Local::new();
    // A file as another tool writes it: a schema, a CDR channel.
    let other = l.dir.path().join("other.mcap");
    {
        let mut w = mcap::Writer::new(std::io::BufWriter::new(
            std::fs::File::create(&other).unwrap(),
        ))
        .unwrap();
        let schema = w
            .add_schema("std_msgs/msg/String", "ros2msg", b"string data")
            .unwrap();
        let ch = w
            .add_channel(schema, "/chatter", "cdr", &Default::default())
            .unwrap();
        for (i, t) in [(0u32, 1_000u64), (1, 2_000), (2, 3_000)] {
            let header = mcap::records::MessageHeader {
                channel_id: ch,
                sequence: i,
                log_time: t,
                publish_time: t,
            };
            w.write_to_known_channel(&header, format!("cdr-{i}").as_bytes())
                .unwrap();
        }
        w.finish().unwrap();
    }
    l.client.create_tag("/chatter", Domain::Global).unwrap();
    let mut sub = l
        .client
        .subscribe("/chatter", tagwire::SubscribeOptions::default())
        .unwrap();
    let (status, err) = play_file(&l, &other, &["--rate", "0"]);
    assert!(status.success(), "{err}");
    for i in 0..3 {
        let got = sub.receive(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(got.payload, format!("cdr-{i}").as_bytes());
    }

    // Not MCAP at all; the valid file cut in half; a keyed message too
    // short for its envelope: each a clear error, none a panic.
    let garbage = l.dir.path().join("garbage.mcap");
    std::fs::write(&garbage, b"this is not an MCAP file at all").unwrap();
    let (status, err) = play_file(&l, &garbage, &[]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("not a readable MCAP file"), "{err}");

    let bytes = std::fs::read(&other).unwrap();
    let cut = l.dir.path().join("cut.mcap");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (status, err) = play_file(&l, &cut, &["--rate", "0"]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("cut.mcap"), "{err}");

    let short = l.dir.path().join("short.mcap");
    {
        let mut w = mcap::Writer::new(std::io::BufWriter::new(
            std::fs::File::create(&short).unwrap(),
        ))
        .unwrap();
        let ch = w
            .add_channel(
                0,
                "/bag/short",
                "application/x-tagwire-keyed",
                &Default::default(),
            )
            .unwrap();
        let header = mcap::records::MessageHeader {
            channel_id: ch,
            sequence: 1,
            log_time: 1,
            publish_time: 1,
        };
        w.write_to_known_channel(&header, b"short").unwrap();
        w.finish().unwrap();
    }
    let (status, err) = play_file(&l, &short, &[]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("shorter than a keyed message"), "{err}");
}

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

#[test]
fn a_killed_recorder_leaves_a_file_readable_up_to_its_last_whole_chunk() {
    let l = Local::new();
    let tag = "/bag/killed";
    let file = l.dir.path().join("killed.mcap");
    let mut rec = l.spawn(
        &["record", tag, "--lossless", "--out", file.to_str().unwrap()],
        Stdio::null(),
    );
    l.wait_receiver(tag);
    // About 8 MB: ten chunks or so.
    let mut p = l.client.publisher(tag).unwrap();
    let payload = [7u8; 256];
    for _ in 0..30_000 {
        p.send(&payload).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    rec.kill().unwrap();
    rec.wait().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() > 100_000, "{} bytes written", bytes.len());

    // The mcap crate's reader: the whole chunks' messages, then an error.
    let mut whole = 0;
    let mut ended_in_error = false;
    for r in mcap::read::ChunkFlattener::new(&bytes).unwrap() {
        match r {
            Ok(mcap::records::Record::Message { data, .. }) => {
                assert_eq!(&data[..], &payload[..]);
                whole += 1;
            }
            Ok(_) => {}
            Err(_) => {
                ended_in_error = true;
                break;
            }
        }
    }
    assert!(whole >= 1000, "{whole} messages readable");
    assert!(whole < 30_000 || !ended_in_error, "{whole}");

    // Foxglove's Python stream reader reads as many.
    if let Ok(python) = mcap_python() {
        let script = r#"
import sys
from mcap.stream_reader import StreamReader
from mcap.records import Message
n = 0
try:
    for r in StreamReader(open(sys.argv[1], "rb")).records:
        if isinstance(r, Message):
            n += 1
except Exception:
    pass
print(n)
"#;
        let n: usize = python_on(&python, script, &file).trim().parse().unwrap();
        assert_eq!(n, whole);
    }

    // tagwire play sends them all, then says why it stopped.
    l.client
        .create_tag("/bag/replayed", Domain::Global)
        .unwrap();
    let mut sub = l
        .client
        .subscribe(
            "/bag/replayed",
            tagwire::SubscribeOptions::default().lossless(),
        )
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut played = 0;
        while sub.receive(Some(Duration::from_secs(2))).is_ok() {
            played += 1;
        }
        played
    });
    let (status, err) = play_file(
        &l,
        &file,
        &["--rate", "0", "--remap", "/bag/killed=/bag/replayed"],
    );
    assert_eq!(reader.join().unwrap(), whole, "{err}");
    if ended_in_error {
        assert_eq!(status.code(), Some(1), "{err}");
        assert!(err.contains("ends inside a record"), "{err}");
    }
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
