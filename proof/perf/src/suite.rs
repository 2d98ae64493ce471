//! The `tagwire perf` benchmarks: each system measured in the same run,
//! interleaved size by size and repetition by repetition (the machine drifts by
//! 2-3x over minutes, so systems measured minutes apart are not comparable), and
//! folded to median and spread over repetitions.

use std::time::Duration;

use crate::ddsperf::{self, DdsOpts};
use crate::raw;
use crate::report::Record;
use crate::stats::{Repeated, RepeatedRate, Summary};

pub use crate::stats::Point;
use crate::workload::{self, Acks, Env, Rounds};

/// Settings shared by the suites.
#[derive(Debug, Clone)]
pub struct SuiteOpts {
    /// Worker binary and daemon socket.
    pub env: Env,
    /// Repetitions per point.
    pub reps: usize,
    /// Round trips per repetition.
    pub iters: usize,
    /// Unmeasured round trips first.
    pub warmup: usize,
    /// Run Cyclone DDS `ddsperf` beside tagwire.
    pub dds: bool,
    /// Seconds per ddsperf measurement (plus its discovery second).
    pub dds_seconds: u32,
    /// Run Zenoh and iceoryx2 (`tagwire-peers`, [`crate::peers`]) beside
    /// tagwire when built.
    pub peers: bool,
    /// Print progress to stderr.
    pub progress: bool,
}

pub use crate::workload::{Mode, SenderPriority};

/// Throughput series: (system, size, [(rep, msgs/s)], per-rep notes).
type RateSeries = (String, u64, Vec<(usize, f64)>, Vec<String>);

/// Throughput results by system and size, over repetitions.
#[derive(Default)]
pub(crate) struct Rates {
    series: Vec<RateSeries>,
}

impl Rates {
    /// Adds repetition `rep`'s rate, with a note when `extra` is not empty.
    pub(crate) fn add(&mut self, rep: usize, system: &str, size: u64, rate: f64, extra: String) {
        let i = match self
            .series
            .iter()
            .position(|e| e.0 == system && e.1 == size)
        {
            Some(i) => i,
            None => {
                self.series
                    .push((system.into(), size, Vec::new(), Vec::new()));
                self.series.len() - 1
            }
        };
        self.series[i].2.push((rep, rate));
        if !extra.is_empty() {
            self.series[i].3.push(format!("rep {}: {extra}", rep + 1));
        }
    }

    /// Median over repetitions of `r` / `base`'s rate in the same
    /// repetition.
    fn paired(&self, base: &str, size: u64, r: &[(usize, f64)]) -> Option<f64> {
        let cy = self.series.iter().find(|e| e.0 == base && e.1 == size)?;
        let ratios: Vec<f64> = r
            .iter()
            .filter_map(|(rep, v)| {
                let b = cy.2.iter().find(|(x, _)| x == rep)?.1;
                (b > 0.0).then(|| v / b)
            })
            .collect();
        crate::stats::median(&ratios)
    }

    /// One throughput record per series, tagwire's paired with Cyclone DDS,
    /// Zenoh and iceoryx2.
    pub(crate) fn records(&self, nodes: u32) -> Vec<Record> {
        self.series
            .iter()
            .filter_map(|(system, size, r, notes)| {
                let values: Vec<f64> = r.iter().map(|(_, v)| *v).collect();
                let rr = RepeatedRate::from_rates(&values)?;
                let mut rec = Record::throughput(system, "block", *size, &rr).with_nodes(nodes);
                if system.starts_with("tagwire") {
                    for peer in ["cyclonedds", "zenoh", "iceoryx2"] {
                        if let Some(p) = self.paired(peer, *size, r) {
                            rec.paired.insert(peer.into(), p);
                        }
                    }
                }
                // The cost of authentication, and what direct delivery
                // gains, in the same repetition.
                let peers: &[&str] = match system.as_str() {
                    "tagwire+auth" => &["tagwire", "tagwire-via-daemon"],
                    "tagwire" | "tagwire-lossless" => &["tagwire-via-daemon"],
                    _ => &[],
                };
                for peer in peers {
                    if let Some(p) = self.paired(peer, *size, r) {
                        rec.paired.insert((*peer).into(), p);
                    }
                }
                Some(if notes.is_empty() {
                    rec
                } else {
                    rec.with_note(&notes.join("; "))
                })
            })
            .collect()
    }
}

/// One measured series: (system, mode, size, receivers, acks) and its
/// per-repetition summaries, tagged with the repetition they came from.
pub(crate) type Series = (String, String, u64, u32, String, Vec<(usize, Point)>);

#[derive(Default)]
pub(crate) struct Acc {
    series: Vec<Series>,
    pub(crate) rep: usize,
}

impl Acc {
    pub(crate) fn push(
        &mut self,
        system: &str,
        mode: &str,
        size: u64,
        receivers: u32,
        acks: &str,
        s: Point,
    ) {
        let rep = self.rep;
        if let Some(e) = self.series.iter_mut().find(|e| {
            e.0 == system && e.1 == mode && e.2 == size && e.3 == receivers && e.4 == acks
        }) {
            e.5.push((rep, s));
            return;
        }
        self.series.push((
            system.into(),
            mode.into(),
            size,
            receivers,
            acks.into(),
            vec![(rep, s)],
        ));
    }

    pub(crate) fn find(
        &self,
        system: &str,
        mode: &str,
        size: u64,
        receivers: u32,
        acks: &str,
    ) -> Option<&Series> {
        self.series.iter().find(|e| {
            e.0 == system && e.1 == mode && e.2 == size && e.3 == receivers && e.4 == acks
        })
    }

    /// Records with paired ratios: for each (key, baseline series) that `pairs`
    /// names, the median over repetitions of p50 / baseline p50 in the same rep.
    pub(crate) fn records(
        &self,
        bench: &str,
        pairs: impl Fn(&Series) -> Vec<(String, Series)>,
    ) -> Vec<Record> {
        let mut out = Vec::new();
        for e in &self.series {
            let runs: Vec<(f64, f64)> = e.5.iter().map(|(_, s)| (s.p50_us, s.p99_us)).collect();
            let Some(r) = Repeated::from_p50_p99(&runs) else {
                continue;
            };
            let mut rec = Record::new(bench, &e.0, &e.1, e.2).with_latency(&r);
            rec.receivers = e.3;
            rec.acks = e.4.clone();
            for (key, base) in pairs(e) {
                let ratios: Vec<f64> =
                    e.5.iter()
                        .filter_map(|(rep, s)| {
                            let b = base.5.iter().find(|(r, _)| r == rep)?.1.p50_us;
                            (b > 0.0).then(|| s.p50_us / b)
                        })
                        .collect();
                if let Some(m) = crate::stats::median(&ratios) {
                    rec.paired.insert(key, m);
                }
            }
            out.push(rec);
        }
        out
    }
}

pub(crate) fn note(o: &SuiteOpts, msg: impl AsRef<str>) {
    if o.progress {
        eprintln!("perf: {}", msg.as_ref());
    }
}

/// A language binding to measure beside Rust: its runner, or why it cannot run.
pub type Lang = (String, Result<crate::lang::Runner, String>);

/// RTT against size: tagwire (block, sleep and spin) beside raw futex, raw spin, raw
/// UDP and Cyclone DDS, and tagwire from the other languages in `langs`
/// (`tagwire-cpp`, `tagwire-python`, blocking, paired with Rust's).
///
/// With `dds_pong`, also `ddsperf ping` against a tagwire pong through the
/// DDS gateway (`crate::ddsgateway`), paired with ddsperf ping → ddsperf pong.
pub fn rtt(
    o: &SuiteOpts,
    sizes: &[usize],
    modes: &[Mode],
    langs: &[Lang],
    dds_pong: bool,
) -> anyhow::Result<Vec<Record>> {
    let dds = dds_opts(o);
    let iox2 = peer_opts(o);
    let ropts = raw::RawOpts {
        cpus: o.env.cpus,
        ..raw::RawOpts::default()
    };
    let mut acc = Acc::default();
    // The languages' table: Rust's in-process pinger, then each runner.
    let mut lacc = Acc::default();
    let mut skipped = Vec::new();
    if let Err(reason) = &iox2 {
        for &size in sizes {
            for &mode in modes.iter().filter(|m| **m != Mode::Sleep) {
                skipped.push(Record::skipped(
                    "rtt",
                    "iceoryx2",
                    mode.as_str(),
                    size as u64,
                    reason,
                ));
            }
        }
    }
    for rep in 0..o.reps {
        acc.rep = rep;
        lacc.rep = rep;
        for &size in sizes {
            note(o, format!("rtt rep {}/{} size {size}", rep + 1, o.reps));
            let s = size as u64;
            for &mode in modes {
                let rounds = Rounds::new(size, o.iters, o.warmup).mode(mode);
                let d = workload::rtt(&o.env, rounds)?;
                push(&mut acc, "tagwire", mode.as_str(), s, 1, "all", &d);
                if mode == Mode::Block && !langs.is_empty() {
                    push(&mut lacc, "tagwire", "block", s, 1, "all", &d);
                }
                let (name, d) = match mode {
                    // (Its floor is the blocking one's.)
                    Mode::Sleep => continue,
                    Mode::Block => (
                        "raw-futex",
                        raw::raw_shm_futex_rtt_with(size, o.iters, o.warmup, &ropts)?,
                    ),
                    Mode::Spin => (
                        "raw-spin",
                        raw::raw_shm_spin_rtt_with(size, o.iters, o.warmup, &ropts)?,
                    ),
                };
                push(&mut acc, name, mode.as_str(), s, 1, "all", &d);
            }
            for (lang, runner) in langs {
                let system = format!("tagwire-{lang}");
                match runner {
                    Ok(r) => {
                        let d = crate::lang::rtt(&o.env, r, size, o.iters, o.warmup)?;
                        push(&mut lacc, &system, "block", s, 1, "all", &d);
                    }
                    Err(reason) if rep == 0 => {
                        skipped.push(Record::skipped("rtt-lang", &system, "block", s, reason))
                    }
                    Err(_) => {}
                }
            }
            // iceoryx2, waiting the way each tagwire mode does: its ping
            // copying the answer out as tagwire's does (`iceoryx2`), and
            // looking at its header only (`iceoryx2-peek`).
            if let Ok(p) = &iox2 {
                for &mode in modes.iter().filter(|m| **m != Mode::Sleep) {
                    for (system, peek) in [("iceoryx2", false), ("iceoryx2-peek", true)] {
                        let how = (mode == Mode::Spin, peek);
                        match crate::peers::iox2_rtt(p, how, size, o.iters, o.warmup) {
                            Ok(pt) => acc.push(system, mode.as_str(), s, 1, "all", pt),
                            Err(e) => skipped.push(Record::skipped(
                                "rtt",
                                system,
                                mode.as_str(),
                                s,
                                &format!("iceoryx2 failed: {e:#}"),
                            )),
                        }
                    }
                }
            }
            let d = raw::raw_udp_rtt_with(size, o.iters, o.warmup, &ropts)?;
            push(&mut acc, "raw-udp", "block", s, 1, "all", &d);
            let mut cyclone = None;
            match &dds {
                Ok(opts) => match ddsperf::rtt_with(s, o.dds_seconds, opts) {
                    Ok(r) => {
                        cyclone = Some((r.p50_us, r.p99_us));
                        acc.push(
                            "cyclonedds",
                            "block",
                            s,
                            1,
                            "all",
                            Point {
                                p50_us: r.p50_us,
                                p99_us: r.p99_us,
                            },
                        )
                    }
                    Err(e) => skipped.push(Record::skipped(
                        "rtt",
                        "cyclonedds",
                        "block",
                        s,
                        &format!("ddsperf failed: {e:#}"),
                    )),
                },
                Err(reason) if rep == 0 => {
                    skipped.push(Record::skipped("rtt", "cyclonedds", "block", s, reason))
                }
                Err(_) => {}
            }
            if let (true, Ok(opts)) = (dds_pong, &dds) {
                let client = client_options(o);
                // The sleeping tagwire pong's floor: ddsperf's round trip
                // plus the two thread hand-offs on the pong's CPU (gateway
                // → pong → gateway) that ddsperf's pong has not, measured
                // as a futex round trip between two threads on that CPU.
                if let Some((pong_cpu, _)) = o.env.cpus {
                    let one = raw::RawOpts {
                        cpus: Some((pong_cpu, pong_cpu)),
                        ..raw::RawOpts::default()
                    };
                    let d = raw::raw_shm_futex_rtt_with(size, o.iters, o.warmup, &one)?;
                    if let (Some(f), Some(c)) = (Summary::from_durations(&d), cyclone) {
                        push(&mut acc, "raw-futex-1cpu", "block", s, 1, "all", &d);
                        acc.push(
                            "dds-pong-floor",
                            "block",
                            s,
                            1,
                            "all",
                            // (Its p99 is the sum of the two p99s: a
                            // bound, not a measured percentile.)
                            Point {
                                p50_us: c.0 + f.p50_us,
                                p99_us: c.1 + f.p99_us,
                            },
                        );
                    }
                }
                // Sleeping, and spinning before sleeping (pong and gateway).
                for (mode, spin) in [("block", None), ("spin", Some(crate::ddsgateway::SPIN))] {
                    match crate::ddsgateway::rtt(s, o.dds_seconds, opts, client.clone(), spin) {
                        Ok(r) => acc.push(
                            "tagwire-dds-pong",
                            mode,
                            s,
                            1,
                            "all",
                            Point {
                                p50_us: r.p50_us,
                                p99_us: r.p99_us,
                            },
                        ),
                        Err(e) => skipped.push(Record::skipped(
                            "rtt",
                            "tagwire-dds-pong",
                            mode,
                            s,
                            &format!("ddsperf ping against the tagwire pong failed: {e:#}"),
                        )),
                    }
                }
            }
        }
    }
    let pairs = |e: &Series| -> Vec<(String, Series)> {
        if e.0 == "tagwire-dds-pong" {
            // ddsperf ping → tagwire pong against ddsperf ping → ddsperf pong
            // (which sleeps, in either mode), and the sleeping one against
            // its floor.
            let floor = (e.1 == "block").then_some("dds-pong-floor");
            return ["cyclonedds"]
                .into_iter()
                .chain(floor)
                .filter_map(|b| {
                    acc.find(b, "block", e.2, 1, "all")
                        .map(|s| (b.to_string(), s.clone()))
                })
                .collect();
        }
        if e.0 != "tagwire" {
            return Vec::new();
        }
        let bases: &[&str] = if e.1 == "spin" {
            &["raw-spin", "iceoryx2", "iceoryx2-peek"]
        } else {
            &[
                "raw-futex",
                "raw-udp",
                "cyclonedds",
                "iceoryx2",
                "iceoryx2-peek",
            ]
        };
        bases
            .iter()
            .filter_map(|b| {
                let peer = b.starts_with("iceoryx2");
                let mode = if *b == "raw-spin" || (peer && e.1 == "spin") {
                    "spin"
                } else {
                    "block"
                };
                acc.find(b, mode, e.2, 1, "all")
                    .map(|s| (b.to_string(), s.clone()))
            })
            .collect()
    };
    let mut out = acc.records("rtt", pairs);
    // Each binding against the Rust runner (the same two-process shape) and
    // against Rust's in-process pinger.
    let lang_pairs = |e: &Series| -> Vec<(String, Series)> {
        ["tagwire-rust", "tagwire"]
            .iter()
            .filter(|b| **b != e.0 && e.0 != "tagwire")
            .filter_map(|b| lacc.find(b, "block", e.2, 1, "all"))
            .map(|s| (s.0.clone(), s.clone()))
            .collect()
    };
    out.extend(lacc.records("rtt-lang", lang_pairs));
    out.extend(skipped);
    Ok(out)
}

/// RTT against the number of receivers (paper Figures 4-4 and 4-5).
pub fn fanout(
    o: &SuiteOpts,
    receivers: &[usize],
    acks: &[Acks],
    size: usize,
    mode: Mode,
    priorities: &[Option<SenderPriority>],
) -> anyhow::Result<Vec<Record>> {
    let mut acc = Acc::default();
    for rep in 0..o.reps {
        acc.rep = rep;
        for &n in receivers {
            for &a in acks {
                for &p in priorities {
                    // `tagwire sender-above` and so on: one series each.
                    let named = |system: &str| match p {
                        Some(p) => format!("{system} sender-{}", p.as_str()),
                        None => system.to_string(),
                    };
                    note(
                        o,
                        format!(
                            "fanout rep {}/{} receivers {n} acks {} {}",
                            rep + 1,
                            o.reps,
                            a.as_str(),
                            named("priority")
                        ),
                    );
                    let rounds = Rounds::new(size, o.iters, o.warmup)
                        .fan(n, a)
                        .mode(mode)
                        .priority(p);
                    let d = workload::rtt(&o.env, rounds)?;
                    let m = mode.as_str();
                    push(
                        &mut acc,
                        &named("tagwire"),
                        m,
                        size as u64,
                        n as u32,
                        a.as_str(),
                        &d,
                    );
                    // The floor: the same fan-out with threads, one futex
                    // word (or polling) and nothing else, placed and
                    // prioritised alike.
                    let spin = mode == Mode::Spin;
                    let d = raw::raw_fanout_rtt(
                        size,
                        n,
                        a == Acks::All,
                        spin,
                        (o.iters, o.warmup),
                        &raw::RawOpts {
                            cpus: o.env.cpus,
                            priority: p,
                        },
                    )?;
                    let floor = named(if spin { "raw-spin" } else { "raw-futex" });
                    push(&mut acc, &floor, m, size as u64, n as u32, a.as_str(), &d);
                }
            }
        }
    }
    let first = receivers.iter().copied().min().unwrap_or(1) as u32;
    Ok(acc.records("fanout", |e| {
        acc.find(&e.0, &e.1, e.2, first, &e.4)
            .map(|b| vec![(format!("{first}-receiver"), b.clone())])
            .unwrap_or_default()
    }))
}

/// Messages per second at the subscriber, publisher flat out, beside Cyclone DDS
/// and raw UDP (one datagram per message). When Cyclone ran, tagwire also runs
/// paced at `paced_factor` × Cyclone's rate of the same repetition
/// (`tagwire-paced`): the subscriber keeping up at that rate must lose nothing,
/// and the note reports what it lost.
///
/// With `dds_sub`, also `ddsperf pub` into a lossless tagwire subscriber
/// through the DDS gateway (`tagwire-dds-sub`, paired with Cyclone →
/// Cyclone).
pub fn throughput(
    o: &SuiteOpts,
    sizes: &[usize],
    seconds: f64,
    paced_factor: f64,
    dds_sub: bool,
) -> anyhow::Result<Vec<Record>> {
    let dds = dds_opts(o);
    let iox2 = peer_opts(o);
    let mut rates = Rates::default();
    let mut add = |rep: usize, system: &str, size: u64, rate: f64, extra: String| {
        rates.add(rep, system, size, rate, extra)
    };
    let mut skipped = Vec::new();
    if let Err(reason) = &iox2 {
        for &size in sizes {
            skipped.push(Record::skipped(
                "throughput",
                "iceoryx2",
                "block",
                size as u64,
                reason,
            ));
        }
    }
    let dur = Duration::from_secs_f64(seconds);
    for rep in 0..o.reps {
        let rep_now = rep;
        for &size in sizes {
            note(
                o,
                format!("throughput rep {}/{} size {size}", rep + 1, o.reps),
            );
            let s = size as u64;
            let t = workload::throughput(&o.env, size, dur, None, false, false, false)?;
            add(
                rep_now,
                "tagwire",
                s,
                t.msgs_per_s,
                format!("sent {} received {} lost {}", t.sent, t.received, t.lost),
            );
            // The like-for-like with Cyclone's reliable KEEP_ALL reader: a
            // lossless subscriber that holds the publisher back.
            let t = workload::throughput(&o.env, size, dur, None, true, false, false)?;
            add(
                rep_now,
                "tagwire-lossless",
                s,
                t.msgs_per_s,
                format!("sent {} received {} lost {}", t.sent, t.received, t.lost),
            );
            add(
                rep_now,
                "raw-udp",
                s,
                raw::raw_udp_throughput(size, dur)?,
                String::new(),
            );
            if let Ok(p) = &iox2 {
                crate::peers::PeerThroughput::record(
                    crate::peers::iox2_throughput(p, size, seconds),
                    (
                        rep_now,
                        "iceoryx2",
                        s,
                        "no overflow, busy-polling subscriber",
                    ),
                    &mut add,
                    &mut skipped,
                );
            }
            match &dds {
                Ok(opts) => match ddsperf::throughput_with(s, o.dds_seconds, opts) {
                    Ok(r) => {
                        add(
                            rep_now,
                            "cyclonedds",
                            s,
                            r.msgs_per_s,
                            format!("reliable; lost {}", r.lost),
                        );
                        if paced_factor > 0.0 && r.msgs_per_s > 0.0 {
                            let target = r.msgs_per_s * paced_factor;
                            let t = workload::throughput(
                                &o.env,
                                size,
                                dur,
                                Some(target),
                                false,
                                false,
                                false,
                            )?;
                            add(
                                rep_now,
                                "tagwire-paced",
                                s,
                                t.msgs_per_s,
                                format!(
                                    "paced at {paced_factor}x cyclonedds = {target:.0} msg/s, sent {} received {} lost {}",
                                    t.sent, t.received, t.lost
                                ),
                            );
                        }
                    }
                    Err(e) => skipped.push(Record::skipped(
                        "throughput",
                        "cyclonedds",
                        "block",
                        s,
                        &format!("ddsperf failed: {e:#}"),
                    )),
                },
                Err(reason) if rep == 0 => skipped.push(Record::skipped(
                    "throughput",
                    "cyclonedds",
                    "block",
                    s,
                    reason,
                )),
                Err(_) => {}
            }
            if let (true, Ok(opts)) = (dds_sub, &dds) {
                let client = client_options(o);
                match crate::ddsgateway::throughput(s, o.dds_seconds, opts, client) {
                    Ok(r) => add(
                        rep_now,
                        "tagwire-dds-sub",
                        s,
                        r.msgs_per_s,
                        format!(
                            "ddsperf pub -> gateway -> lossless subscriber; received {} lost {}",
                            r.received, r.lost
                        ),
                    ),
                    Err(e) => skipped.push(Record::skipped(
                        "throughput",
                        "tagwire-dds-sub",
                        "block",
                        s,
                        &format!("ddsperf pub into a tagwire subscriber failed: {e:#}"),
                    )),
                }
            }
        }
    }
    let mut out = rates.records(1);
    out.extend(skipped);
    Ok(out)
}

/// Pulls of a tag's last `count` messages from the local daemon beside
/// receiving as many queued messages from a subscription, repetition by
/// repetition (`o.iters` of each per repetition, at most 200).
pub fn pull(o: &SuiteOpts, count: u32, size: usize) -> anyhow::Result<Vec<Record>> {
    let mut acc = Acc::default();
    let iters = o.iters.min(200);
    for rep in 0..o.reps {
        acc.rep = rep;
        note(o, format!("pull rep {}/{} last {count}", rep + 1, o.reps));
        let (pulls, drains) = workload::pull(&o.env, count, size, iters)?;
        push(
            &mut acc,
            "tagwire-pull",
            "block",
            size as u64,
            count,
            "all",
            &pulls,
        );
        push(
            &mut acc,
            "tagwire-receive",
            "block",
            size as u64,
            count,
            "all",
            &drains,
        );
    }
    Ok(acc
        .records("pull", |e| {
            if e.0 != "tagwire-pull" {
                return Vec::new();
            }
            acc.find("tagwire-receive", "block", e.2, count, "all")
                .map(|b| vec![("tagwire-receive".to_string(), b.clone())])
                .unwrap_or_default()
        })
        .into_iter()
        .map(|r| {
            let what = if r.system == "tagwire-pull" {
                format!("one pull of the last {count} messages (time for all {count})")
            } else {
                format!(
                    "{count} receive calls on a subscription holding them (time for all {count})"
                )
            };
            r.with_note(&what)
        })
        .collect())
}

pub(crate) fn push(
    acc: &mut Acc,
    system: &str,
    mode: &str,
    size: u64,
    receivers: u32,
    acks: &str,
    d: &[Duration],
) {
    if let Some(s) = Summary::from_durations(d) {
        let point = Point {
            p50_us: s.p50_us,
            p99_us: s.p99_us,
        };
        acc.push(system, mode, size, receivers, acks, point);
    }
}

/// Options for a client of the run's daemon (never starting another).
fn client_options(o: &SuiteOpts) -> tagwire::ClientOptions {
    tagwire::ClientOptions {
        socket: o.env.socket.clone(),
        autostart: false,
        ..tagwire::ClientOptions::default()
    }
}

/// iceoryx2 and Zenoh on this host (`tagwire-peers`), or why not.
pub(crate) fn peer_opts(o: &SuiteOpts) -> Result<crate::peers::PeerOpts, String> {
    if !o.peers {
        return Err("the peers are off (--no-peers)".into());
    }
    Ok(crate::peers::PeerOpts::local(
        crate::peers::available()?,
        o.env.cpus,
    ))
}

pub(crate) fn dds_opts(o: &SuiteOpts) -> Result<DdsOpts, String> {
    if !o.dds {
        return Err("Cyclone DDS skipped (--no-dds)".into());
    }
    let mut d = DdsOpts::detect()?;
    d.cpus = o.env.cpus;
    Ok(d)
}
