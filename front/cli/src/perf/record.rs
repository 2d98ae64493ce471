//! `tagwire perf record`: how fast a lossless `tagwire record` writes a
//! flat-out local publisher to disk, beside a plain lossless subscriber
//! (`tagwire sub --lossless`) of the same publisher in the same run.
//!
//! Each repetition publishes `count` messages of `size` bytes as fast as
//! the lossless subscription lets it (the publisher in this process, the
//! recorder or the subscriber a child process), and times from the first
//! send until the child exits: the recorder's time includes finishing the
//! file. Its file is then read back: by PyPI's `mcap` reader when its venv
//! exists (`target/mcap-venv`, made by the tests), counting every message.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tagwire::Domain;

use super::{tempfile_dir, Args};

/// One repetition of one system.
#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    system: String,
    size: usize,
    messages: u64,
    seconds: f64,
    msgs_per_s: f64,
    /// What the recorder said it lost (always 0 for a lossless one).
    lost: Option<u64>,
    file_bytes: Option<u64>,
    /// Messages the Python reader counted in the file (`None`: not read).
    read_back: Option<u64>,
}

pub(super) fn record(
    a: &Args,
    size: usize,
    count: u64,
    compressions: &[String],
) -> anyhow::Result<()> {
    let (socket, _daemon, client) = super::own::daemon_and_client(a)?;
    let dir = tempfile_dir()?;
    let exe = std::env::current_exe()?;
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcap-venv/bin/python");
    let mut runs = Vec::new();
    for rep in 0..a.reps {
        let mut systems = vec!["subscriber".to_owned()];
        systems.extend(compressions.iter().map(|c| format!("record-{c}")));
        for system in systems {
            let tag = format!("/perf/record/{rep}/{system}");
            client.create_tag(&tag, Domain::Global)?;
            let file = dir.join(format!("{rep}-{system}.mcap"));
            let mut cmd = Command::new(&exe);
            match system.strip_prefix("record-") {
                Some(c) => cmd
                    .args(["record", &tag, "--lossless", "--compression", c, "--out"])
                    .arg(&file),
                None => cmd.args(["sub", &tag, "--lossless", "--stats"]),
            };
            let child = cmd
                .args(["--count", &count.to_string(), "--socket"])
                .arg(&socket)
                .env("TAGWIRE_LOG", "error")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?;
            let waited = Instant::now();
            while client.receivers(&tag)?.is_empty() {
                anyhow::ensure!(
                    waited.elapsed() < Duration::from_secs(10),
                    "{system} did not subscribe"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut p = client.publisher(&tag)?;
            let payload = vec![0x5au8; size];
            let start = Instant::now();
            for _ in 0..count {
                p.send(&payload)?;
            }
            let out = child.wait_with_output()?;
            let seconds = start.elapsed().as_secs_f64();
            anyhow::ensure!(out.status.success(), "{system} failed");
            let said = String::from_utf8_lossy(&out.stdout);
            let recording = system.starts_with("record");
            let lost = recording.then(|| {
                said.rsplit("lost ")
                    .next()
                    .and_then(|n| n.split_whitespace().next()?.parse().ok())
                    .unwrap_or(u64::MAX)
            });
            let read_back = (recording && python.exists())
                .then(|| read_back(&python, &file))
                .transpose()?;
            runs.push(Run {
                system,
                size,
                messages: count,
                seconds,
                msgs_per_s: count as f64 / seconds,
                lost,
                file_bytes: recording.then(|| std::fs::metadata(&file).map_or(0, |m| m.len())),
                read_back,
            });
            drop(p);
            let _ = std::fs::remove_file(&file);
            client.destroy_tag(&tag)?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut json = Vec::new();
    for r in &runs {
        json.extend(serde_json::to_vec(r)?);
        json.push(b'\n');
    }
    super::own::save(a, "record", &json, &table(&runs))
}

/// Counts the messages of `file` with PyPI's `mcap` reader.
fn read_back(python: &Path, file: &Path) -> anyhow::Result<u64> {
    let script = "import sys\nfrom mcap.reader import make_reader\n\
                  print(sum(1 for _ in make_reader(open(sys.argv[1], 'rb')).iter_messages()))";
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(file)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "the mcap reader failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

/// Medians and spreads per system, and each recorder's ratio to the
/// plain subscriber's median.
fn table(runs: &[Run]) -> String {
    use std::fmt::Write as _;
    let mut systems: Vec<&str> = runs.iter().map(|r| r.system.as_str()).collect();
    systems.dedup();
    systems.sort_unstable();
    systems.dedup();
    let rates = |s: &str| {
        let mut v: Vec<f64> = runs
            .iter()
            .filter(|r| r.system == s)
            .map(|r| r.msgs_per_s)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let base = rates("subscriber");
    let base_median = base.get(base.len() / 2).copied().unwrap_or(f64::NAN);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "lossless record of a flat-out local publisher ({} B, {} messages), same run as a lossless subscriber",
        runs.first().map_or(0, |r| r.size),
        runs.first().map_or(0, |r| r.messages)
    );
    let _ = writeln!(
        t,
        "{:<14} {:>12} {:>12} {:>12} {:>8} {:>6} {:>12} {:>10}",
        "system", "median msg/s", "min", "max", "ratio", "lost", "file MB", "read back"
    );
    for s in systems {
        let v = rates(s);
        let median = v[v.len() / 2];
        let mine: Vec<&Run> = runs.iter().filter(|r| r.system == s).collect();
        let lost: u64 = mine.iter().filter_map(|r| r.lost).sum();
        let mb = mine
            .iter()
            .filter_map(|r| r.file_bytes)
            .max()
            .map_or("-".to_owned(), |b| format!("{:.1}", b as f64 / 1e6));
        let read = if mine.iter().all(|r| r.read_back.is_none()) {
            "-".to_owned()
        } else {
            let ok = mine.iter().all(|r| r.read_back == Some(r.messages));
            if ok {
                "all".to_owned()
            } else {
                "MISSING".to_owned()
            }
        };
        let _ = writeln!(
            t,
            "{s:<14} {median:>12.0} {:>12.0} {:>12.0} {:>8.2} {:>6} {mb:>12} {read:>10}",
            v[0],
            v[v.len() - 1],
            median / base_median,
            if s == "subscriber" {
                "-".to_owned()
            } else {
                lost.to_string()
            },
        );
    }
    t
}
