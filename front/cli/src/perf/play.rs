//! `tagwire perf play`: how closely `tagwire play` keeps the timing of a
//! recording, beside the floor of this machine in the same run.
//!
//! Each repetition records three publishers on three tags, each sending
//! `count` mixed messages (16 B to 1 KiB, every hundredth 4 KiB, every
//! thousandth 64 KiB) at `hz` by sleeping to a schedule, with a lossless
//! `tagwire record`; plays the file back (`tagwire play`, the recorded
//! spacing) onto three other tags with a lossless subscriber each in this
//! process; and compares the played messages' times, as the player
//! stamped them and as they arrived, with the recorded log times, less
//! the median difference (the play starts at another moment).
//!
//! The floor is the same measure taken of the publishers' own sends
//! against their schedule: how closely a thread that sleeps to a
//! deadline and sends keeps it on this machine, with the recorder
//! running beside it, as the player runs beside the subscribers.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tagwire::{Domain, Sched, SubscribeOptions};
use tagwire_perf::stats::{relative_timing_errors, spread};

use super::{tempfile_dir, Args};

/// Publishers (and tags) of a recording.
const PUBLISHERS: usize = 3;

/// One repetition: each measure's p50, p99 and largest error, µs.
#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    rep: usize,
    hz: f64,
    messages: usize,
    /// The played messages' send times (stamped by the player).
    sent_us: [f64; 3],
    /// When the played messages reached their subscribers.
    arrived_us: [f64; 3],
    /// The recording publishers' sends against their schedule.
    floor_us: [f64; 3],
}

/// One of a run's three measures.
type Measure = fn(&Run) -> [f64; 3];

/// The size of publisher `p`'s message `i`.
fn size(p: usize, i: usize) -> usize {
    match i % 1000 {
        999 => 65_536,
        n if n % 100 == 50 => 4096,
        _ => 16 + (i * 7919 + p * 31) % 1000,
    }
}

fn ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn us(d: [Duration; 3]) -> [f64; 3] {
    d.map(|d| d.as_secs_f64() * 1e6)
}

pub(super) fn play(a: &Args, hz: f64, count: usize, sched: Option<Sched>) -> anyhow::Result<()> {
    anyhow::ensure!(hz > 0.0 && hz.is_finite(), "--hz must be a positive rate");
    anyhow::ensure!(count >= 1000, "--count must be at least 1000");
    let (socket, _daemon, client) = super::own::daemon_and_client(a)?;
    let dir = tempfile_dir()?;
    let exe = std::env::current_exe()?;
    let sched_arg = sched.map(|s| s.to_string());
    let mut runs = Vec::new();
    for rep in 0..a.reps {
        let tags: Vec<String> = (0..PUBLISHERS)
            .map(|p| format!("/perf/play/{rep}/rec/{p}"))
            .collect();
        let back: Vec<String> = (0..PUBLISHERS)
            .map(|p| format!("/perf/play/{rep}/back/{p}"))
            .collect();
        for t in tags.iter().chain(&back) {
            client.create_tag(t, Domain::Global)?;
        }
        let file = dir.join(format!("play-{rep}.mcap"));
        let total = count * PUBLISHERS;

        // Record.
        let mut cmd = Command::new(&exe);
        cmd.arg("record").args(&tags);
        cmd.args(["--lossless", "--compression", "none", "--count"])
            .arg(total.to_string())
            .arg("--out")
            .arg(&file)
            .arg("--socket")
            .arg(&socket);
        if let Some(s) = &sched_arg {
            cmd.args(["--sched", s]);
        }
        let recorder = cmd
            .env("TAGWIRE_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let waited = Instant::now();
        for t in &tags {
            while client.receivers(t)?.is_empty() {
                anyhow::ensure!(
                    waited.elapsed() < Duration::from_secs(10),
                    "the recorder did not subscribe"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let publishers: Vec<_> = tags
            .iter()
            .enumerate()
            .map(|(p, tag)| {
                let mut publisher = client.publisher(tag)?;
                publisher.set_send_timeout(Duration::from_secs(60));
                Ok(std::thread::spawn(move || -> anyhow::Result<_> {
                    if let Some(s) = sched {
                        tagwire::set_thread_sched(s)?;
                    }
                    let mut due_ns = Vec::with_capacity(count);
                    let mut sent_ns = Vec::with_capacity(count);
                    let mut m = vec![0u8; 65_536];
                    let start = Instant::now();
                    let start_wall = ns(SystemTime::now());
                    for i in 0..count {
                        let due = Duration::from_secs_f64(i as f64 / hz);
                        std::thread::sleep(due.saturating_sub(start.elapsed()));
                        let now = start.elapsed();
                        m[..8].copy_from_slice(&(i as u64).to_le_bytes());
                        publisher.send(&m[..size(p, i)])?;
                        due_ns.push(start_wall + due.as_nanos() as u64);
                        sent_ns.push(start_wall + now.as_nanos() as u64);
                    }
                    Ok((due_ns, sent_ns))
                }))
            })
            .collect::<anyhow::Result<_>>()?;
        let mut due = Vec::new();
        let mut sent_by_publishers = Vec::new();
        for h in publishers {
            let (d, s) = h
                .join()
                .map_err(|_| anyhow::anyhow!("a publisher panicked"))??;
            due.push(d);
            sent_by_publishers.push(s);
        }
        let out = recorder.wait_with_output()?;
        let said = String::from_utf8_lossy(&out.stdout);
        anyhow::ensure!(
            out.status.success() && said.contains("lost 0"),
            "the recorder failed or lost messages: {said}"
        );
        let logged = log_times(&file, &tags, count)?;

        // Play.
        let receivers: Vec<_> = back
            .iter()
            .map(|t| {
                let mut sub = client.subscribe(t, SubscribeOptions::default().lossless())?;
                Ok(std::thread::spawn(move || -> anyhow::Result<_> {
                    if let Some(s) = sched {
                        tagwire::set_thread_sched(s)?;
                    }
                    let mut arrived = Vec::with_capacity(count);
                    let mut stamped = Vec::with_capacity(count);
                    let mut buf = Vec::new();
                    for i in 0..count {
                        let info = sub.receive_into(Some(Duration::from_secs(30)), &mut buf)?;
                        arrived.push(Instant::now());
                        stamped.push(ns(info.timestamp));
                        let index = buf.get(..8).and_then(|b| b.try_into().ok());
                        anyhow::ensure!(
                            index.map(u64::from_le_bytes) == Some(i as u64),
                            "played message {i} out of order"
                        );
                    }
                    Ok((arrived, stamped))
                }))
            })
            .collect::<anyhow::Result<_>>()?;
        let mut cmd = Command::new(&exe);
        cmd.arg("play").arg(&file).arg("--socket").arg(&socket);
        for (from, to) in tags.iter().zip(&back) {
            cmd.arg("--remap").arg(format!("{from}={to}"));
        }
        if let Some(s) = &sched_arg {
            cmd.args(["--sched", s]);
        }
        let player = cmd
            .env("TAGWIRE_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut arrived = Vec::new();
        let mut stamped = Vec::new();
        for h in receivers {
            let (a, s) = h
                .join()
                .map_err(|_| anyhow::anyhow!("a subscriber panicked"))??;
            arrived.push(a);
            stamped.push(s);
        }
        anyhow::ensure!(player.wait_with_output()?.status.success(), "play failed");
        let t0 = arrived
            .iter()
            .flatten()
            .min()
            .copied()
            .unwrap_or_else(Instant::now);
        let arrived: Vec<Vec<u64>> = arrived
            .iter()
            .map(|at| {
                at.iter()
                    .map(|a| a.duration_since(t0).as_nanos() as u64)
                    .collect()
            })
            .collect();
        let errors = |actual: &[Vec<u64>], expected: &[Vec<u64>]| {
            relative_timing_errors(expected, actual)
                .map(us)
                .ok_or_else(|| anyhow::anyhow!("message counts differ"))
        };
        runs.push(Run {
            rep,
            hz,
            messages: total,
            sent_us: errors(&stamped, &logged)?,
            arrived_us: errors(&arrived, &logged)?,
            floor_us: errors(&sent_by_publishers, &due)?,
        });
        let _ = std::fs::remove_file(&file);
        for t in tags.iter().chain(&back) {
            client.destroy_tag(t)?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut json = Vec::new();
    for r in &runs {
        json.extend(serde_json::to_vec(r)?);
        json.push(b'\n');
    }
    super::own::save(a, "play", &json, &table(&runs, sched))
}

/// The log times of each tag's messages in `file`, in the order the
/// publisher sent them (checked by their sequence numbers).
fn log_times(
    file: &std::path::Path,
    tags: &[String],
    count: usize,
) -> anyhow::Result<Vec<Vec<u64>>> {
    let bytes = std::fs::read(file)?;
    let mut channels = std::collections::HashMap::new();
    let mut logged = vec![Vec::with_capacity(count); tags.len()];
    for r in mcap::read::ChunkFlattener::new(&bytes)? {
        match r? {
            mcap::records::Record::Channel(c) => {
                if let Some(p) = tags.iter().position(|t| *t == c.topic) {
                    channels.insert(c.id, p);
                }
            }
            mcap::records::Record::Message { header, .. } => {
                let p = *channels
                    .get(&header.channel_id)
                    .ok_or_else(|| anyhow::anyhow!("a message of an unknown channel"))?;
                anyhow::ensure!(
                    header.sequence as usize == logged[p].len() + 1,
                    "tag {p}'s messages out of order in the file"
                );
                logged[p].push(header.log_time);
            }
            _ => {}
        }
    }
    anyhow::ensure!(
        logged.iter().all(|l| l.len() == count),
        "the file lacks messages"
    );
    Ok(logged)
}

/// Median (and range) over the repetitions of each measure, and the
/// ratio of play's p99 to the floor's.
fn table(runs: &[Run], sched: Option<Sched>) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let first = runs.first();
    let _ = writeln!(
        t,
        "play's timing error against the recorded log times: {} publishers at {} Hz, {} messages, scheduling {}; {} repetitions",
        PUBLISHERS,
        first.map_or(0.0, |r| r.hz),
        first.map_or(0, |r| r.messages),
        sched.map_or("default".to_owned(), |s| s.to_string()),
        runs.len()
    );
    let _ = writeln!(
        t,
        "{:<28} {:>10} {:>20} {:>10} {:>20} {:>10} {:>12}",
        "measure", "p50 µs", "(range)", "p99 µs", "(range)", "max µs", "p99 / floor"
    );
    let pick = |f: Measure, i: usize| -> [f64; 3] {
        spread(&runs.iter().map(|r| f(r)[i]).collect::<Vec<_>>())
    };
    let floor99 = pick(|r| r.floor_us, 1)[0];
    let rows: [(&str, Measure); 3] = [
        ("play, as sent", |r| r.sent_us),
        ("play, as arrived", |r| r.arrived_us),
        ("floor: publishers' sends", |r| r.floor_us),
    ];
    for (name, f) in rows {
        let [m50, lo50, hi50] = pick(f, 0);
        let [m99, lo99, hi99] = pick(f, 1);
        let [mmax, ..] = pick(f, 2);
        let _ = writeln!(
            t,
            "{name:<28} {m50:>10.1} {:>20} {m99:>10.1} {:>20} {mmax:>10.0} {:>12.2}",
            format!("{lo50:.1}-{hi50:.1}"),
            format!("{lo99:.1}-{hi99:.1}"),
            m99 / floor99
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_has_blobs_and_mid_sizes() {
        assert_eq!(size(0, 999), 65_536);
        assert_eq!(size(1, 150), 4096);
        assert!((0..1000).filter(|&i| size(2, i) <= 1015).count() == 989);
    }

    #[test]
    fn the_table_gives_medians_and_the_ratio_to_the_floor() {
        let run = |rep, sent: f64| Run {
            rep,
            hz: 10_000.0,
            messages: 3000,
            sent_us: [10.0, sent, 900.0],
            arrived_us: [20.0, 2.0 * sent, 950.0],
            floor_us: [5.0, 50.0, 400.0],
        };
        let t = table(&[run(0, 100.0), run(1, 200.0), run(2, 300.0)], None);
        let sent = t.lines().find(|l| l.starts_with("play, as sent")).unwrap();
        assert!(
            sent.contains("200.0") && sent.contains("100.0-300.0"),
            "{t}"
        );
        assert!(sent.trim_end().ends_with("4.00"), "{t}");
        let arrived = t
            .lines()
            .find(|l| l.starts_with("play, as arrived"))
            .unwrap();
        assert!(arrived.trim_end().ends_with("8.00"), "{t}");
    }
}
