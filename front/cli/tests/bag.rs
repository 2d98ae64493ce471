//! `tagwire record` into an MCAP file (read back with the `mcap` crate
//! and with the `mcap` package of PyPI) and `tagwire play` from one:
//! keyed and large messages, other tools' files, hostile files, a killed
//! recorder, an interrupted one (100,000 mixed messages: `mixed.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod local;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use local::{mcap_records, stdout_of, Local, Mcap, BIN};
use tagwire::Domain;

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
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
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

#[test]
fn an_interrupted_recorder_writes_what_it_took_and_a_whole_file() {
    let l = Local::new();
    let tag = "/bag/interrupted";
    let file = l.dir.path().join("interrupted.mcap");
    let rec = l.spawn(
        &["record", tag, "--lossless", "--out", file.to_str().unwrap()],
        Stdio::null(),
    );
    l.wait_receiver(tag);
    let mut p = l.client.publisher(tag).unwrap();
    for i in 0..20_000u32 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    // Lossless: every message is in the recorder's subscription or beyond
    // once sent; SIGINT must not lose those still on their way.
    let pid = rustix::process::Pid::from_child(&rec);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = String::from_utf8(stdout_of(rec)).unwrap();
    assert!(out.contains("recorded 20000 messages of 1 tags"), "{out}");
    assert!(out.contains("lost 0"), "{out}");
    // A whole file: the crate's reader finds no error, the summary is there.
    let Mcap {
        messages, metadata, ..
    } = mcap_records(&file);
    assert_eq!(messages.len(), 20_000);
    for (i, (_, data)) in messages.iter().enumerate() {
        assert_eq!(data, &(i as u32).to_le_bytes());
    }
    let summary = metadata
        .iter()
        .find(|m| m.name == "tagwire.record")
        .unwrap();
    assert_eq!(summary.metadata["/bag/interrupted:recorded"], "20000");
}
