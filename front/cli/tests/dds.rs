//! The DDS gateway (`tagwire daemon --dds-domain N --dds-map FILE`, issue 20
//! item 2) against Cyclone DDS's `ddsperf` (Debian's cyclonedds-tools): a
//! Cyclone writer's samples reach a tagwire subscriber of the mapped tag,
//! and a tagwire publisher's reach a Cyclone reader, which counts them and
//! loses none. The daemon runs as its own process (`tagwire daemon`), as a
//! user would run it; each test has its own DDS domain.
//!
//! Without `ddsperf` each test prints `skipped: <reason>` and passes;
//! `.ci/run` installs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::io::BufRead;

use tagwire::SubscribeOptions;

#[path = "dds/support.rs"]
mod support;
use support::*;

/// ddsperf's KeyedSeq sample `seq` in CDR_LE: seq, keyval 0, and `size` - 12
/// bytes of baggage (ddsperf's size counts the 12 bytes before it).
fn keyed_seq(seq: u32, size: usize) -> Vec<u8> {
    let baggage = size - 12;
    let mut p = vec![0x00, 0x01, 0x00, 0x00];
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&(baggage as u32).to_le_bytes());
    p.extend(std::iter::repeat_n(0xab, baggage));
    p
}

/// The last "total T lost L" that `ddsperf sub` printed.
fn counted(lines: &[String]) -> Option<(u64, u64)> {
    let l = lines.iter().rev().find(|l| l.contains(" total "))?;
    let words: Vec<&str> = l.split_whitespace().collect();
    let after = |key: &str| -> Option<u64> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1)?.parse().ok()
    };
    Some((after("total")?, after("lost")?))
}

/// A Cyclone writer (`ddsperf pub` of `size`-byte KeyedSeq samples at
/// `rate`, best effort with `-u`) and a tagwire subscriber of the tag the
/// gateway maps its topic to: at least `want` whole samples, in increasing
/// order (consecutive when reliable).
fn cyclone_to_tagwire(domain: u32, best_effort: bool, size: usize, rate: &str, want: usize) {
    if !have_ddsperf() {
        return;
    }
    let (topic, opt, be) = if best_effort {
        ("DDSPerfUDataKS", "best-effort", vec!["-u"])
    } else {
        ("DDSPerfRDataKS", "reliable", vec![])
    };
    let map = format!("/dds/in {topic} KeyedSeq {opt} keyed\n");
    let (dir, _d, c) = daemon(domain, &map);
    let opts = if best_effort {
        SubscribeOptions::default().best_effort()
    } else {
        SubscribeOptions::default()
    };
    let mut sub = c.subscribe("/dds/in", opts).unwrap();
    let size_arg = size.to_string();
    let mut args = be;
    args.extend(["-D15", "pub", rate, "size", &size_arg]);
    let _pub = ddsperf(domain, &args);
    let mut seqs = Vec::new();
    let until = Instant::now() + Duration::from_secs(12);
    while seqs.len() < want && Instant::now() < until {
        let Ok(m) = sub.receive(Some(Duration::from_millis(200))) else {
            continue;
        };
        // KeyedSeq in CDR_LE: seq u32, keyval u32, baggage (ddsperf's size
        // counts the 12 bytes before it).
        assert_eq!(&m.payload[..2], &[0x00, 0x01], "CDR_LE");
        assert_eq!(m.payload.len(), 4 + size, "a whole sample");
        seqs.push(u32::from_le_bytes(m.payload[4..8].try_into().unwrap()));
    }
    assert!(
        seqs.len() >= want,
        "only {} samples came; the daemon said:\n{}",
        seqs.len(),
        std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
    );
    if best_effort {
        assert!(
            seqs.windows(2).all(|p| p[1] > p[0]),
            "out of order: {seqs:?}"
        );
    } else {
        assert!(
            seqs.windows(2).all(|p| p[1] == p[0] + 1),
            "out of order or missing: {seqs:?}"
        );
    }
    assert_eq!(sub.lost(), 0);
}

/// A tagwire publisher of `size`-byte KeyedSeq samples (one every `every`)
/// on the tag the gateway maps to the data topic, and a Cyclone reader
/// (`ddsperf sub`, best effort with `-u`): it counts at least `want` and
/// loses none.
fn tagwire_to_cyclone(domain: u32, best_effort: bool, size: usize, every: Duration, want: u64) {
    if !have_ddsperf() {
        return;
    }
    let (topic, opt, be) = if best_effort {
        ("DDSPerfUDataKS", "best-effort", vec!["-u"])
    } else {
        ("DDSPerfRDataKS", "reliable", vec![])
    };
    let map = format!("/dds/out {topic} KeyedSeq {opt} keyed\n");
    let (_dir, _d, c) = daemon(domain, &map);
    let mut args = be;
    args.extend(["-D15", "sub"]);
    let (_sub, lines) = ddsperf(domain, &args);
    let mut publ = c.publisher("/dds/out").unwrap();
    let t0 = Instant::now();
    let mut sent = 0u32;
    while t0.elapsed() < Duration::from_secs(12) {
        if counted(&lines.lock().unwrap()).is_some_and(|(t, _)| t >= want) {
            break;
        }
        sent += 1;
        publ.send(&keyed_seq(sent, size)).unwrap();
        std::thread::sleep(every);
    }
    let lines = lines.lock().unwrap();
    let (got, lost) =
        counted(&lines).unwrap_or_else(|| panic!("ddsperf counted nothing: {lines:?}"));
    assert!(got >= want, "Cyclone got {got} of {sent}");
    assert_eq!(lost, 0, "Cyclone counted {lost} lost");
}

#[test]
fn a_cyclone_writers_samples_reach_a_tagwire_subscriber_of_the_mapped_tag_in_order() {
    cyclone_to_tagwire(37, false, 64, "100Hz", 30);
}

#[test]
fn a_tagwire_publishers_samples_reach_a_cyclone_reader_which_loses_none() {
    tagwire_to_cyclone(38, false, 64, Duration::from_millis(5), 100);
}

#[test]
fn best_effort_cyclone_samples_reach_a_best_effort_tagwire_subscriber() {
    cyclone_to_tagwire(39, true, 64, "100Hz", 30);
}

#[test]
fn best_effort_tagwire_samples_reach_a_best_effort_cyclone_reader() {
    tagwire_to_cyclone(40, true, 64, Duration::from_millis(5), 100);
}

#[test]
fn a_cyclone_writers_200_kib_samples_cross_in_fragments_whole_and_in_order() {
    cyclone_to_tagwire(41, false, 200 * 1024, "20Hz", 10);
}

#[test]
fn a_tagwire_publishers_200_kib_samples_reach_a_cyclone_reader_in_fragments() {
    tagwire_to_cyclone(42, false, 200 * 1024, Duration::from_millis(50), 10);
}

#[test]
fn a_ros2_talker_emulated_with_cyclones_python_binding_is_read_by_tagwire_sub() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (dir, _d, _c) = daemon(43, "/chatter rt/chatter std_msgs::msg::dds_::String_\n");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/dds/ros2_talker.py");
    let _talker = Kill(
        Command::new(&python)
            .arg(&script)
            .args(["43", "100"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // `tagwire sub` as a user runs it, on the daemon's socket.
    let out = Command::new(env!("CARGO_BIN_EXE_tagwire"))
        .args(["sub", "/chatter", "--count", "5", "--idle-timeout", "15"])
        .env("TAGWIRE_SOCKET", dir.path().join("tagwired.sock"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "tagwire sub failed: {text}");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Hello World: "))
        .collect();
    assert_eq!(
        lines.len(),
        5,
        "tagwire sub printed:\n{text}\nthe daemon said:\n{}",
        std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
    );
    assert!(text.contains("received 5 messages, lost 0"), "{text}");
}

/// A ROS 2 `std_msgs/String` message as CDR (little endian): the string's
/// length with its NUL, the bytes, the NUL.
fn ros2_string(text: &str) -> Vec<u8> {
    let mut p = vec![0x00, 0x01, 0x00, 0x00];
    p.extend_from_slice(&(text.len() as u32 + 1).to_le_bytes());
    p.extend_from_slice(text.as_bytes());
    p.push(0);
    p
}

/// `ros2_listener.py` in `domain` (transient-local with `durable`): its
/// lines as they come.
fn listener(
    python: &Path,
    domain: u32,
    count: u32,
    durable: bool,
) -> (Kill, Arc<Mutex<Vec<String>>>) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/dds/ros2_listener.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .args([domain.to_string(), count.to_string(), "15".into()]);
    if durable {
        cmd.arg("transient-local");
    }
    spawn_lines(&mut cmd)
}

#[test]
fn a_tagwire_publisher_is_heard_by_an_emulated_ros2_listener() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (dir, _d, c) = daemon(44, "/chatter rt/chatter std_msgs::msg::dds_::String_\n");
    let (_l, lines) = listener(&python, 44, 5, false);
    let mut publ = c.publisher("/chatter").unwrap();
    let until = Instant::now() + Duration::from_secs(15);
    let mut i = 0;
    while lines.lock().unwrap().len() < 5 && Instant::now() < until {
        publ.send(&ros2_string(&format!("Hello World: {i}")))
            .unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = lines.lock().unwrap().clone();
    assert!(
        got.len() >= 5,
        "the listener printed {got:?}; the daemon said:\n{}",
        std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
    );
    // In order, each once (the listener joined somewhere in the stream).
    let first: u32 = got[0].trim_start_matches("Hello World: ").parse().unwrap();
    for (k, l) in got.iter().enumerate() {
        assert_eq!(*l, format!("Hello World: {}", first + k as u32));
    }
}

#[test]
fn a_late_joining_transient_local_ros2_listener_gets_what_the_gateway_kept() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (dir, _d, c) = daemon(
        45,
        "/chatter rt/chatter std_msgs::msg::dds_::String_ reliable transient-local=3\n",
    );
    let mut publ = c.publisher("/chatter").unwrap();
    for i in 0..5 {
        publ.send(&ros2_string(&format!("Hello World: {i}")))
            .unwrap();
    }
    // Published before any DDS reader exists: the gateway's writer keeps
    // the last three for a transient-local late joiner.
    std::thread::sleep(Duration::from_millis(500));
    let (mut l, lines) = listener(&python, 45, 3, true);
    let _ = l.0.wait();
    let got = lines.lock().unwrap().clone();
    assert_eq!(
        got,
        ["Hello World: 2", "Hello World: 3", "Hello World: 4"],
        "the daemon said:\n{}",
        std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
    );
}

#[test]
fn a_gateway_started_later_serves_a_transient_local_listener_from_the_tags_history() {
    let Some(python) = python_or_skip() else {
        return;
    };
    // A daemon alone, a tag that keeps its last 10 messages, 5 published.
    let (dir, _d, c) = plain_daemon();
    c.create_tag("/kept", tagwire::Domain::Global).unwrap();
    c.set_history("/kept", 10, 0).unwrap();
    let mut publ = c.publisher("/kept").unwrap();
    for i in 0..5 {
        publ.send(&ros2_string(&format!("Hello World: {i}")))
            .unwrap();
    }
    // Then the gateway, as its own process: its writer starts from the
    // tag's last three.
    let _g = gateway(
        dir.path(),
        46,
        "/kept rt/chatter std_msgs::msg::dds_::String_ reliable transient-local=3\n",
    );
    std::thread::sleep(Duration::from_millis(500));
    let (mut l, lines) = listener(&python, 46, 3, true);
    let _ = l.0.wait();
    assert_eq!(
        lines.lock().unwrap().clone(),
        ["Hello World: 2", "Hello World: 3", "Hello World: 4"]
    );
}

/// `tshark` on loopback writing `file` for packets matching `filter`, once
/// it captures; `None` (and a printed reason) without tshark.
fn capture_lo(filter: &str, file: &Path) -> Option<Kill> {
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("skipped (the capture): tshark not found (Debian package tshark)");
        return None;
    }
    let mut cap = Kill(
        Command::new("tshark")
            .args(["-i", "lo", "-f", filter, "-w"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = std::io::BufReader::new(cap.0.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("Capturing on") {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            println!("skipped (the capture): tshark could not capture on lo");
            return None;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    Some(cap)
}

/// `tshark -r file args…`, its standard output.
fn tshark(file: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tshark_dissects_every_packet_the_gateway_sends_without_a_malformed_packet_or_warning() {
    if !have_ddsperf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.pcap");
    // Domain 47's ports: SPDP multicast 19150, participants from 19160.
    let Some(cap) = capture_lo("udp portrange 19150-19399", &all) else {
        return;
    };
    let map = "/dds/out DDSPerfRDataKS KeyedSeq reliable keyed\n";
    let (_gdir, _d, c) = daemon(47, map);
    let (_sub, lines) = ddsperf(47, &["-D15", "sub"]);
    let mut publ = c.publisher("/dds/out").unwrap();
    let t0 = Instant::now();
    let mut sent = 0u32;
    // Small samples, then large ones (DATA_FRAG), until Cyclone counted 40.
    while t0.elapsed() < Duration::from_secs(12)
        && counted(&lines.lock().unwrap()).is_none_or(|(t, _)| t < 40)
    {
        sent += 1;
        let size = if sent % 2 == 0 { 64 } else { 40_000 };
        publ.send(&keyed_seq(sent, size)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut cap = cap;
    let pid = rustix::process::Pid::from_child(&cap.0);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    cap.0.wait().unwrap();
    assert!(counted(&lines.lock().unwrap()).is_some_and(|(t, l)| t >= 40 && l == 0));
    // Ours: vendor id 0x0199.
    let ours = dir.path().join("ours.pcap");
    tshark(
        &all,
        &[
            "-Y",
            "rtps.vendorId == 0x0199",
            "-w",
            ours.to_str().unwrap(),
        ],
    );
    let ids = tshark(&ours, &["-T", "fields", "-e", "rtps.sm.id"]);
    let ids: std::collections::HashSet<&str> = ids.lines().flat_map(|l| l.split(',')).collect();
    // Announcements and data, heartbeats, fragments, acknowledgements.
    for (id, what) in [
        ("0x15", "DATA"),
        ("0x07", "HEARTBEAT"),
        ("0x16", "DATA_FRAG"),
        ("0x06", "ACKNACK"),
    ] {
        assert!(ids.contains(id), "no {what} of ours captured: {ids:?}");
    }
    let full = tshark(&ours, &["-V"]);
    assert!(!full.contains("Malformed"), "a malformed packet of ours");
    for bad in ["Expert Info (Warning", "Expert Info (Error"] {
        let at = full
            .find(bad)
            .map(|i| &full[i.saturating_sub(2000)..(i + 200).min(full.len())]);
        assert!(at.is_none(), "{bad}: {}", at.unwrap_or_default());
    }
}

/// Fast DDS's HelloWorld example (Debian's libfastrtps-dev and
/// libfastrtps-doc: Fast DDS 2.9), built with cmake under `target/` on
/// first use. It runs in domain 0, on topic `HelloWorldTopic`, type
/// `HelloWorld` { unsigned long index; string message; }.
fn fastdds_hello() -> Result<PathBuf, String> {
    static ONCE: Mutex<()> = Mutex::new(());
    let _one = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    let src = Path::new("/usr/share/doc/libfastrtps-dev/examples/dds/HelloWorldExample");
    if !src.join("CMakeLists.txt").is_file() {
        return Err(
            "Fast DDS's examples not found (apt-get install libfastrtps-dev libfastrtps-doc)"
                .into(),
        );
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fastdds-hello");
    let exe = dir.join("build/DDSHelloWorldExample");
    if exe.is_file() {
        return Ok(exe);
    }
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    run(Command::new("cp").arg("-r").arg(src).arg(dir.join("src")))
        .map_err(|e| format!("copying the example: {e}"))?;
    run(Command::new("cmake")
        .arg("-S")
        .arg(dir.join("src"))
        .arg("-B")
        .arg(dir.join("build"))
        .arg("-DCMAKE_BUILD_TYPE=Release"))
    .map_err(|e| format!("cmake could not configure Fast DDS's HelloWorld: {e}"))?;
    run(Command::new("cmake")
        .arg("--build")
        .arg(dir.join("build"))
        .arg("-j2"))
    .map_err(|e| format!("Fast DDS's HelloWorld did not build: {e}"))?;
    Ok(exe)
}

/// The HelloWorld example as `role` (it stops at end of input: its input
/// stays open until it is killed), its output line by line.
fn hello_world(exe: &Path, role: &str) -> (Kill, Arc<Mutex<Vec<String>>>) {
    spawn_lines(
        Command::new(exe)
            .arg(role)
            .stdin(Stdio::piped())
            .stderr(Stdio::null()),
    )
}

/// The Fast DDS tests share domain 0 (the example's): one at a time.
static DOMAIN_0: Mutex<()> = Mutex::new(());

#[test]
fn fast_dds_hello_world_samples_reach_a_tagwire_subscriber() {
    let _one = DOMAIN_0.lock().unwrap_or_else(|e| e.into_inner());
    let exe = match fastdds_hello() {
        Ok(e) => e,
        Err(why) => return println!("skipped: {why}"),
    };
    let (dir, _d, c) = daemon(0, "/hello HelloWorldTopic HelloWorld\n");
    let mut sub = c.subscribe("/hello", SubscribeOptions::default()).unwrap();
    let (_p, _) = hello_world(&exe, "publisher");
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(15);
    while got.len() < 5 && Instant::now() < until {
        let Ok(m) = sub.receive(Some(Duration::from_millis(200))) else {
            continue;
        };
        // CDR_LE: index u32, then the string (length with its NUL).
        assert_eq!(&m.payload[..2], &[0x00, 0x01], "CDR_LE");
        let index = u32::from_le_bytes(m.payload[4..8].try_into().unwrap());
        let len = u32::from_le_bytes(m.payload[8..12].try_into().unwrap()) as usize;
        assert_eq!(&m.payload[12..12 + len], b"HelloWorld\0");
        got.push(index);
    }
    assert!(
        got.len() >= 5,
        "only {got:?}; the daemon said:\n{}",
        std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
    );
    assert!(got.windows(2).all(|p| p[1] == p[0] + 1), "{got:?}");
}

#[test]
fn a_tagwire_publishers_samples_reach_fast_dds_hello_world_subscriber() {
    let _one = DOMAIN_0.lock().unwrap_or_else(|e| e.into_inner());
    let exe = match fastdds_hello() {
        Ok(e) => e,
        Err(why) => return println!("skipped: {why}"),
    };
    let (dir, _d, c) = daemon(0, "/hello HelloWorldTopic HelloWorld\n");
    let (_s, lines) = hello_world(&exe, "subscriber");
    let mut publ = c.publisher("/hello").unwrap();
    let received = |l: &Mutex<Vec<String>>| {
        l.lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("Message from tagwire "))
            .cloned()
            .collect::<Vec<_>>()
    };
    let until = Instant::now() + Duration::from_secs(15);
    let mut i = 0u32;
    while received(&lines).len() < 5 && Instant::now() < until {
        i += 1;
        let text = b"from tagwire\0";
        let mut p = vec![0x00, 0x01, 0x00, 0x00];
        p.extend_from_slice(&i.to_le_bytes());
        p.extend_from_slice(&(text.len() as u32).to_le_bytes());
        p.extend_from_slice(text);
        publ.send(&p).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = received(&lines);
    assert!(
        got.len() >= 5,
        "Fast DDS printed {:?}; the daemon said:\n{}",
        lines.lock().unwrap(),
        std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
    );
    // "Message from tagwire N RECEIVED", N increasing: the example's reader
    // is best effort (Fast DDS's default reader QoS), so it may skip one
    // while it is still matching.
    let n: Vec<u32> = got
        .iter()
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    assert!(n.windows(2).all(|p| p[1] > p[0]), "{got:?}");
}
