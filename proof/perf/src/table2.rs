//! The ORTE paper's Table 2 (`tagwire perf table2 --count 10000`): how long
//! a publisher takes to get N 4-byte integers to a lossless subscriber in
//! another process, for each pair of languages: C→C (the C++ runner, which is
//! the C ABI), Java→Java, C→Java, Java→C, and Rust→Rust for reference.
//!
//! ORTE's Android port measured its Java subscribers 2.5-4.5x slower than C
//! because its native receive thread attached to the JVM and called Java for
//! every message. tagwire's Java binding makes no such call (a Java thread
//! calls a blocking native receive into its own buffer); this table is the
//! check: every cell against C→C.
//!
//! Each repetition runs every pair in turn (interleaved, since the machine
//! drifts): the subscriber runner (`sub-ints`, see [`crate::lang`]) starts
//! first, then the publisher runner (`pub-ints`), which waits until the tag
//! has a receiver, takes its start time and sends flat out. The time is the
//! subscriber's last receive minus the publisher's start, both on
//! CLOCK_MONOTONIC; start-up (a JVM's included) is outside it. With
//! `warmup` > 0 every runner first sends that many integers to itself
//! through a private tag, untimed, so that the Java runners' JIT has compiled
//! the send and receive paths (the steady state); `--warmup-msgs 0` measures
//! cold runners, JIT warm-up included. Cells report the median with the
//! `[min-max]` over repetitions and the ratio to C→C measured in the same
//! repetition (median over repetitions).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::lang::{self, Runner};
use crate::report::Record;
use crate::suite::{note, SuiteOpts};
use crate::workload::Env;

/// The cells of ORTE's table (publisher language, subscriber language);
/// the first is the baseline every cell is paired with.
pub const PAIRS: [(&str, &str); 5] = [
    ("cpp", "cpp"),
    ("java", "java"),
    ("cpp", "java"),
    ("java", "cpp"),
    ("rust", "rust"),
];

/// What one `tagwire perf table2` run measures.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Messages per run.
    pub count: u64,
    /// Untimed messages each runner first sends to itself.
    pub warmup: u64,
    /// Bytes per message (4: the integer alone).
    pub size: usize,
    /// (publisher language, subscriber language); the first is the baseline.
    pub pairs: Vec<(String, String)>,
}

impl Spec {
    /// ORTE's Table 2: `count` 4-byte integers for each of [`PAIRS`].
    pub fn orte(count: u64, warmup: u64) -> Self {
        Spec {
            count,
            warmup,
            size: 4,
            pairs: PAIRS
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
        }
    }
}

/// Parses `cpp:cpp,rust:python`: publisher and subscriber languages.
pub fn parse_pairs(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    text.split(',')
        .map(|p| {
            let (a, b) = p
                .trim()
                .split_once(':')
                .with_context(|| format!("a pair is PUBLISHER:SUBSCRIBER, not {p}"))?;
            for l in [a, b] {
                anyhow::ensure!(
                    matches!(l, "cpp" | "java" | "rust" | "python"),
                    "{l} is not a language here (cpp, java, rust, python)"
                );
            }
            Ok((a.to_string(), b.to_string()))
        })
        .collect()
}

/// A cell's name: "C->Java".
pub fn pair_name(publ: &str, sub: &str) -> String {
    let show = |l: &str| {
        match l {
            "cpp" => "C",
            "java" => "Java",
            "rust" => "Rust",
            "python" => "Python",
            other => other,
        }
        .to_string()
    };
    format!("{}->{}", show(publ), show(sub))
}

/// What one publisher/subscriber run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// From the publisher's first send to the subscriber's last receive.
    pub time: Duration,
}

/// Runs Table 2: `reps` interleaved repetitions of every pair of `spec`,
/// `count` messages each after `warmup` untimed ones per runner. Pairs
/// whose runner is missing are reported as skipped.
pub fn table2(o: &SuiteOpts, spec: &Spec, root: &Path) -> anyhow::Result<Vec<Record>> {
    let mut langs: Vec<&str> = Vec::new();
    for (p, s) in &spec.pairs {
        for l in [p.as_str(), s.as_str()] {
            if !langs.contains(&l) {
                langs.push(l);
            }
        }
    }
    let runners: Vec<(&str, Result<Runner, String>)> = langs
        .into_iter()
        .map(|l| (l, lang::find(l, root)))
        .collect();
    let runner = |l: &str| -> Result<&Runner, &str> {
        match runners.iter().find(|(x, _)| *x == l).map(|(_, r)| r) {
            Some(Ok(r)) => Ok(r),
            Some(Err(e)) => Err(e.as_str()),
            None => Err("no such runner"),
        }
    };
    for (l, r) in &runners {
        if let Err(reason) = r {
            eprintln!("perf: table2: {l} skipped: {reason}");
        }
    }
    let names: Vec<String> = spec.pairs.iter().map(|(p, s)| pair_name(p, s)).collect();
    // (pair, rep, run)
    let mut runs: Vec<(&str, usize, Run)> = Vec::new();
    for rep in 0..o.reps {
        for ((p, s), name) in spec.pairs.iter().zip(&names) {
            let (Ok(p), Ok(s)) = (runner(p), runner(s)) else {
                continue;
            };
            note(o, format!("table2 rep {}/{} {name}", rep + 1, o.reps));
            let r = run_pair(&o.env, p, s, spec).with_context(|| format!("table2 {name}"))?;
            runs.push((name, rep, r));
        }
    }
    Ok(records(&runs, spec, &names, o.reps, |name| {
        let i = names.iter().position(|n| n == name)?;
        let (p, s) = &spec.pairs[i];
        runner(p)
            .err()
            .or_else(|| runner(s).err())
            .map(str::to_string)
    }))
}

/// Folds the runs into one record per pair (skipped pairs with their
/// reason from `skipped`).
fn records(
    runs: &[(&str, usize, Run)],
    spec: &Spec,
    names: &[String],
    reps: usize,
    skipped: impl Fn(&str) -> Option<String>,
) -> Vec<Record> {
    let (count, warmup, size) = (spec.count, spec.warmup, spec.size.max(4));
    let what = if warmup > 0 {
        format!("{count} messages after {warmup} untimed")
    } else {
        format!("{count} messages, cold runners")
    };
    let baseline = names.first().map_or("", String::as_str);
    let mut out = Vec::new();
    for name in names.iter().map(String::as_str) {
        let mine: Vec<(usize, f64)> = runs
            .iter()
            .filter(|(n, _, _)| *n == name)
            .map(|(_, rep, r)| (*rep, r.time.as_secs_f64() * 1e6))
            .collect();
        if mine.is_empty() {
            let why = skipped(name).unwrap_or_else(|| "not run".into());
            out.push(Record::skipped(
                "table2",
                name,
                "lossless",
                size as u64,
                &why,
            ));
            continue;
        }
        let us: Vec<f64> = mine.iter().map(|(_, v)| *v).collect();
        let mut rec = Record::new("table2", name, "lossless", size as u64);
        rec.p50_us = crate::stats::median(&us);
        rec.p50_min_us = us.iter().copied().reduce(f64::min);
        rec.p50_max_us = us.iter().copied().reduce(f64::max);
        rec.msgs_per_s = rec.p50_us.map(|t| count as f64 / (t / 1e6));
        rec.mb_per_s = rec.msgs_per_s.map(|m| m * size as f64 / 1e6);
        rec.reps = u32::try_from(us.len()).unwrap_or(u32::MAX);
        let ratios: Vec<f64> = mine
            .iter()
            .filter_map(|(rep, v)| {
                let b = runs
                    .iter()
                    .find(|(n, r, _)| *n == baseline && r == rep)?
                    .2
                    .time
                    .as_secs_f64()
                    * 1e6;
                (b > 0.0).then(|| v / b)
            })
            .collect();
        if let Some(m) = crate::stats::median(&ratios) {
            rec.paired.insert(baseline.into(), m);
        }
        let mut n = what.clone();
        if us.len() < reps {
            n.push_str(&format!(" ({} of {reps} repetitions)", us.len()));
        }
        out.push(rec.with_note(&n));
    }
    out
}

/// One run: the subscriber runner on the receiver's CPU, then the publisher
/// runner on the sender's, on a fresh local tag.
pub fn run_pair(env: &Env, publ: &Runner, sub: &Runner, spec: &Spec) -> anyhow::Result<Run> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tag = format!(
        "/perf/{}/t2-{}-{}{n}",
        std::process::id(),
        publ.lang,
        sub.lang
    );
    let c = tagwire::Client::with_options(tagwire::ClientOptions {
        socket: env.socket.clone(),
        timeout: Duration::from_secs(5),
        autostart: false,
        name: "tagwire-perf".into(),
    })?;
    c.create_tag(&tag, env.domain())?;
    let result = run_on(env, publ, sub, &tag, spec);
    let _ = c.destroy_tag(&tag);
    result
}

fn command(
    r: &Runner,
    role: &str,
    env: &Env,
    tag: &str,
    spec: &Spec,
    cpu: Option<usize>,
) -> Command {
    let mut c = r.command(role, env, cpu);
    c.args(["--data", tag, "--count", &spec.count.to_string()])
        .args(["--warmup", &spec.warmup.to_string()])
        .args(["--size", &spec.size.max(4).to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    c
}

fn run_on(env: &Env, publ: &Runner, sub: &Runner, tag: &str, spec: &Spec) -> anyhow::Result<Run> {
    let count = spec.count;
    let mut s = command(sub, "sub-ints", env, tag, spec, env.cpus.map(|c| c.1))
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting the {} subscriber runner", sub.lang))?;
    let p = command(publ, "pub-ints", env, tag, spec, env.cpus.map(|c| c.0))
        .output()
        .with_context(|| format!("running the {} publisher runner", publ.lang));
    let p = match p {
        Ok(p) if p.status.success() => p,
        Ok(p) => {
            let _ = s.kill();
            let _ = s.wait();
            bail!("the {} publisher runner failed ({})", publ.lang, p.status);
        }
        Err(e) => {
            let _ = s.kill();
            let _ = s.wait();
            return Err(e);
        }
    };
    // The subscriber ends once it has all (or fails after its 60 s receive timeout).
    let s = s
        .wait_with_output()
        .with_context(|| format!("waiting for the {} subscriber runner", sub.lang))?;
    if !s.status.success() {
        bail!("the {} subscriber runner failed ({})", sub.lang, s.status);
    }
    let pj = lang::json_line(&String::from_utf8_lossy(&p.stdout), &publ.lang)?;
    let sj = lang::json_line(&String::from_utf8_lossy(&s.stdout), &sub.lang)?;
    let field = |v: &serde_json::Value, k: &str, who: &str| -> anyhow::Result<u64> {
        v.get(k)
            .and_then(serde_json::Value::as_u64)
            .with_context(|| format!("no {k} in the {who} runner's JSON: {v}"))
    };
    let start = field(&pj, "start_ns", &publ.lang)?;
    let end = field(&pj, "end_ns", &publ.lang)?;
    let last = field(&sj, "last_ns", &sub.lang)?;
    let received = field(&sj, "received", &sub.lang)?;
    let lost = field(&sj, "lost", &sub.lang)?;
    anyhow::ensure!(
        received == count && lost == 0,
        "the {} subscriber received {received} of {count} and lost {lost}",
        sub.lang
    );
    anyhow::ensure!(
        last >= start && end >= start,
        "times out of order (start {start}, end {end}, last receive {last}): not one monotonic clock?"
    );
    Ok(Run {
        time: Duration::from_nanos(last - start),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ms: u64) -> Run {
        Run {
            time: Duration::from_millis(ms),
        }
    }

    #[test]
    fn cells_are_paired_with_c_to_c_in_the_same_repetition() {
        // The machine halves its speed in repetition 1: the paired ratio
        // stays 1.2, where a ratio of medians would not.
        let runs = vec![
            ("C->C", 0, run(10)),
            ("Java->Java", 0, run(12)),
            ("C->C", 1, run(20)),
            ("Java->Java", 1, run(24)),
            ("C->C", 2, run(10)),
            ("Java->Java", 2, run(12)),
        ];
        let spec = Spec::orte(10_000, 500);
        let names: Vec<String> = spec.pairs.iter().map(|(p, s)| pair_name(p, s)).collect();
        let recs = records(&runs, &spec, &names, 3, |n| {
            Some(format!("{n} has no runner"))
        });
        let java = recs.iter().find(|r| r.system == "Java->Java").unwrap();
        assert!((java.paired["C->C"] - 1.2).abs() < 1e-9);
        assert_eq!(java.p50_us, Some(12_000.0));
        assert_eq!(java.p50_min_us, Some(12_000.0));
        assert_eq!(java.p50_max_us, Some(24_000.0));
        assert_eq!(java.reps, 3);
        assert!((java.msgs_per_s.unwrap() - 10_000.0 / 0.012).abs() < 1e-6);
        let c = recs.iter().find(|r| r.system == "C->C").unwrap();
        assert_eq!(c.paired["C->C"], 1.0);
        let rust = recs.iter().find(|r| r.system == "Rust->Rust").unwrap();
        assert_eq!(rust.p50_us, None);
        assert_eq!(rust.note.as_deref(), Some("Rust->Rust has no runner"));

        let t = crate::report::table2_table(&recs);
        assert!(
            t.starts_with("ORTE Table 2: 4 B messages from a flat-out publisher to a lossless subscriber (10000 messages after 500 untimed)"),
            "{t}"
        );
        assert!(t.contains("Java->Java"), "{t}");
        assert!(t.contains("12.00 [12.00-24.00]"), "{t}");
        assert!(t.contains("1.20x"), "{t}");
        assert!(t.contains("Rust->Rust: Rust->Rust has no runner"), "{t}");
        assert_eq!(crate::report::table2_table(&[]), "");
    }

    #[test]
    fn pairs_parse_and_name_their_languages() {
        let p = parse_pairs("rust:python, cpp:java").unwrap();
        assert_eq!(
            p,
            vec![
                ("rust".into(), "python".into()),
                ("cpp".into(), "java".into())
            ]
        );
        assert_eq!(pair_name("rust", "python"), "Rust->Python");
        assert!(parse_pairs("rust").is_err());
        assert!(parse_pairs("rust:cobol").is_err());
    }

    #[test]
    fn a_runners_json_line_is_found_after_other_output() {
        let v = lang::json_line(
            "starting\n{\"lang\":\"java\",\"start_ns\":5,\"end_ns\":9}\n",
            "java",
        )
        .unwrap();
        assert_eq!(v["end_ns"], 9);
        assert!(lang::json_line("nothing", "java").is_err());
    }
}
