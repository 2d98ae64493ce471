//! Result records, JSON-lines output and paper-style text tables.
//!
//! Every measured point (one system, one size, one receiver count, one
//! acknowledgement mode) becomes one [`Record`]. Records are written as JSON
//! lines (one object per line, always the same fields, `null` for values a
//! benchmark does not produce) so that later tooling can re-plot them, and
//! rendered as text tables shaped like the figures of a paper:
//!
//! * [`rtt_table`]: one row per message size, one column per system (p50
//!   round trip with the `[min-max]` spread of the per-repetition p50s),
//!   followed by ratio columns `tagwire/raw-futex`, `tagwire/raw-spin` and
//!   `tagwire/cyclonedds` when those systems are present. A ratio compares
//!   the tagwire record of the same `mode` as the baseline when there is
//!   one (blocking tagwire against `raw-futex`, spinning tagwire against
//!   `raw-spin`), otherwise any tagwire record of that size.
//! * [`fanout_table`]: one row per (size, receivers), one column per
//!   system/mode/acks combination.
//! * [`throughput_table`]: one row per size, msgs/s and MB/s per system and a
//!   `tagwire/cyclonedds` msgs/s ratio.
//!
//! MB/s means 10^6 bytes of payload per second.
//! Records whose value is missing (a skipped system) print as `-` and their
//! `note` is listed under the table.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::stats::{Repeated, RepeatedRate};

mod cells;

pub use cells::fmt_size;
pub(crate) use cells::render_grid;
use cells::{
    fmt_latency_cell, fmt_rate, fmt_us, label, notes_section, ordered_unique, ratio_cell,
    titled_lines,
};

/// One measured (or skipped) data point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Benchmark: `"rtt"`, `"fanout"` or `"throughput"`.
    pub bench: String,
    /// System: `"tagwire"`, `"raw-futex"`, `"raw-spin"`, `"raw-udp"`, `"cyclonedds"`, ...
    pub system: String,
    /// Receive mode: `"block"`, `"sleep"` or `"spin"` (see `workload::Mode`).
    pub mode: String,
    /// Payload size in bytes.
    pub size: u64,
    /// Number of receivers (1 for a plain round trip).
    pub receivers: u32,
    /// Number of nodes (hosts) the run spans: 1 on one host; the sender's
    /// node plus the receivers' nodes in the multi-host benchmarks.
    #[serde(default = "one")]
    pub nodes: u32,
    /// Acknowledgement mode of a fan-out: `"all"` or `"last"`.
    pub acks: String,
    /// Median round trip in µs (median over repetitions of the p50).
    pub p50_us: Option<f64>,
    /// 99th percentile round trip in µs (median over repetitions).
    pub p99_us: Option<f64>,
    /// Smallest per-repetition p50 in µs.
    pub p50_min_us: Option<f64>,
    /// Largest per-repetition p50 in µs.
    pub p50_max_us: Option<f64>,
    /// Messages per second (median over repetitions).
    pub msgs_per_s: Option<f64>,
    /// Payload megabytes (10^6 B) per second (median over repetitions).
    pub mb_per_s: Option<f64>,
    /// Number of repetitions behind the figures.
    pub reps: u32,
    /// Free text, e.g. why a system was skipped.
    pub note: Option<String>,
    /// Paired ratios: for each key (a baseline system, or `1-receiver` for
    /// fan-out), the median over repetitions of this record's value divided by
    /// the baseline's value **measured in the same repetition**. On a machine whose
    /// speed drifts over minutes this is the fair comparison; the tables use it
    /// when present.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub paired: std::collections::BTreeMap<String, f64>,
}

impl Record {
    /// An empty record for `bench`/`system` with 1 receiver, acks `"all"`
    /// and no values; fill in the fields you need.
    pub fn new(bench: &str, system: &str, mode: &str, size: u64) -> Record {
        Record {
            bench: bench.to_string(),
            system: system.to_string(),
            mode: mode.to_string(),
            size,
            receivers: 1,
            nodes: 1,
            acks: "all".to_string(),
            p50_us: None,
            p99_us: None,
            p50_min_us: None,
            p50_max_us: None,
            msgs_per_s: None,
            mb_per_s: None,
            reps: 0,
            note: None,
            paired: Default::default(),
        }
    }

    /// A round-trip record from repeated latency measurements.
    pub fn rtt(system: &str, mode: &str, size: u64, r: &Repeated) -> Record {
        Record::new("rtt", system, mode, size).with_latency(r)
    }

    /// A fan-out record (round trip to `receivers` receivers, acknowledged by
    /// all of them or by the last one only).
    pub fn fanout(
        system: &str,
        mode: &str,
        size: u64,
        receivers: u32,
        acks: &str,
        r: &Repeated,
    ) -> Record {
        let mut rec = Record::new("fanout", system, mode, size).with_latency(r);
        rec.receivers = receivers;
        rec.acks = acks.to_string();
        rec
    }

    /// A throughput record; MB/s is derived from `size`.
    pub fn throughput(system: &str, mode: &str, size: u64, r: &RepeatedRate) -> Record {
        let mut rec = Record::new("throughput", system, mode, size);
        rec.msgs_per_s = Some(r.median_msgs_per_s);
        rec.mb_per_s = Some(r.median_mb_per_s(size));
        rec.reps = r.reps as u32;
        rec
    }

    /// A record saying `system` was not measured, and why.
    pub fn skipped(bench: &str, system: &str, mode: &str, size: u64, reason: &str) -> Record {
        let mut rec = Record::new(bench, system, mode, size);
        rec.note = Some(reason.to_string());
        rec
    }

    /// Sets the latency fields from `r`.
    pub fn with_latency(mut self, r: &Repeated) -> Record {
        self.p50_us = Some(r.median_p50_us);
        self.p99_us = Some(r.median_p99_us);
        self.p50_min_us = Some(r.min_p50_us);
        self.p50_max_us = Some(r.max_p50_us);
        self.reps = r.reps as u32;
        self
    }

    /// Sets the number of nodes.
    pub fn with_nodes(mut self, nodes: u32) -> Record {
        self.nodes = nodes;
        self
    }

    /// Sets the note.
    pub fn with_note(mut self, note: &str) -> Record {
        self.note = Some(note.to_string());
        self
    }
}

fn one() -> u32 {
    1
}

/// Writes one JSON object per record, one per line (any benchmark's
/// records).
pub fn write_json_lines<R: Serialize>(records: &[R], out: &mut impl Write) -> anyhow::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *out, r).context("serialising a record")?;
        out.write_all(b"\n").context("writing a record")?;
    }
    out.flush().context("flushing records")?;
    Ok(())
}

/// [`write_json_lines`] into a buffer.
pub fn json_lines<R: Serialize>(records: &[R]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_json_lines(records, &mut out)?;
    Ok(out)
}

/// Reads records written by [`write_json_lines`]; blank lines are skipped.
pub fn read_json_lines(input: impl BufRead) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line.context("reading records")?;
        if line.trim().is_empty() {
            continue;
        }
        let rec =
            serde_json::from_str(&line).with_context(|| format!("record on line {}", i + 1))?;
        out.push(rec);
    }
    Ok(out)
}

/// The round-trip table (records with `bench == "rtt"`); empty string if
/// there are none. Cells are p50 µs with the `[min-max]` spread of the
/// per-repetition p50s.
pub fn rtt_table(records: &[Record]) -> String {
    [
        rtt_like_table(records, "rtt", "Round trip"),
        rtt_like_table(
            records,
            "remote-rtt",
            "Round trip to a receiver on another host",
        ),
    ]
    .into_iter()
    .filter(|t| !t.is_empty())
    .collect::<Vec<_>>()
    .join("\n")
}

fn rtt_like_table(records: &[Record], bench: &str, title: &str) -> String {
    let recs: Vec<&Record> = records.iter().filter(|r| r.bench == bench).collect();
    if recs.is_empty() {
        return String::new();
    }
    let cols = ordered_unique(recs.iter().map(|r| label(&recs, r, false)));
    let sizes = {
        let mut s = ordered_unique(recs.iter().map(|r| r.size));
        s.sort_unstable();
        s
    };
    let baselines: Vec<&str> = [
        "raw-futex",
        "raw-spin",
        "raw-udp",
        "raw-relay",
        "cyclonedds",
        "zenoh",
        "iceoryx2",
        "iceoryx2-peek",
    ]
    .into_iter()
    .filter(|b| recs.iter().any(|r| r.system == *b))
    .collect();
    // A baseline measured in several modes (iceoryx2 blocking and
    // spinning) gets a column per mode, against tagwire in that mode.
    let baselines: Vec<(&str, Option<String>)> = baselines
        .into_iter()
        .flat_map(|b| {
            let modes = ordered_unique(
                recs.iter()
                    .filter(|r| r.system == b)
                    .map(|r| r.mode.clone()),
            );
            if modes.len() > 1 {
                modes.into_iter().map(|m| (b, Some(m))).collect()
            } else {
                vec![(b, None)]
            }
        })
        .collect();
    let has_tagwire = recs.iter().any(|r| r.system == "tagwire");
    // A tagwire mode no baseline has (`sleep`: a blocking receive with the
    // flow poll off) gets a column per baseline it was paired with.
    let unmatched: Vec<(String, &str)> = ordered_unique(
        recs.iter()
            .filter(|r| r.system == "tagwire")
            .map(|r| r.mode.clone()),
    )
    .into_iter()
    .filter(|m| !recs.iter().any(|r| r.system != "tagwire" && &r.mode == m))
    .flat_map(|m| {
        let paired = |b: &&str| {
            recs.iter()
                .any(|r| r.system == "tagwire" && r.mode == m && r.paired.contains_key(*b))
        };
        let bs: Vec<&str> = ordered_unique(baselines.iter().map(|(b, _)| *b))
            .into_iter()
            .filter(|b| paired(b))
            .collect();
        bs.into_iter().map(move |b| (m.clone(), b))
    })
    .collect();

    let mut header = vec!["size".to_string()];
    header.extend(cols.iter().cloned());
    if has_tagwire {
        header.extend(baselines.iter().map(|(b, m)| match m {
            Some(m) => format!("tagwire/{m}/{b}"),
            None => format!("tagwire/{b}"),
        }));
        header.extend(unmatched.iter().map(|(m, b)| format!("tagwire/{m}/{b}")));
    }
    // The two-sided floor against the one-hop one (remote-rtt).
    let relay_floor = recs
        .iter()
        .any(|r| r.system == "raw-relay" && r.paired.contains_key("raw-udp"));
    if relay_floor {
        header.push("raw-relay/raw-udp".to_string());
    }
    // ddsperf ping → tagwire pong against ddsperf ping → ddsperf pong.
    let pong_modes: Vec<String> = ordered_unique(
        recs.iter()
            .filter(|r| r.system == "tagwire-dds-pong" && r.paired.contains_key("cyclonedds"))
            .map(|r| r.mode.clone()),
    );
    header.extend(
        pong_modes
            .iter()
            .map(|m| format!("tagwire-dds-pong/{m}/cyclonedds")),
    );
    // The sleeping pong against its floor (ddsperf's round trip plus two
    // hand-offs on one CPU).
    let pong_floor = recs
        .iter()
        .any(|r| r.system == "tagwire-dds-pong" && r.paired.contains_key("dds-pong-floor"));
    if pong_floor {
        header.push("tagwire-dds-pong/block/dds-pong-floor".to_string());
    }
    let mut rows = vec![header];
    for &size in &sizes {
        let at: Vec<&Record> = recs.iter().copied().filter(|r| r.size == size).collect();
        let mut row = vec![fmt_size(size)];
        for c in &cols {
            let cell = at
                .iter()
                .find(|r| &label(&recs, r, false) == c)
                .map(|r| fmt_latency_cell(r))
                .unwrap_or_else(|| "-".to_string());
            row.push(cell);
        }
        if has_tagwire {
            for (b, m) in &baselines {
                let base = at
                    .iter()
                    .find(|r| r.system == *b && m.as_ref().is_none_or(|m| &r.mode == m));
                let tw = base
                    .and_then(|base| {
                        at.iter().find(|r| {
                            r.system == "tagwire" && r.mode == base.mode && r.p50_us.is_some()
                        })
                    })
                    .or_else(|| {
                        at.iter()
                            .find(|r| r.system == "tagwire" && r.p50_us.is_some())
                    });
                match tw.and_then(|r| r.paired.get(*b)) {
                    Some(p) => row.push(format!("{p:.2}x")),
                    None => row.push(ratio_cell(
                        tw.and_then(|r| r.p50_us),
                        base.and_then(|r| r.p50_us),
                    )),
                }
            }
            for (m, b) in &unmatched {
                let p = at
                    .iter()
                    .find(|r| r.system == "tagwire" && &r.mode == m)
                    .and_then(|r| r.paired.get(*b));
                row.push(p.map_or_else(|| "-".to_string(), |p| format!("{p:.2}x")));
            }
        }
        if relay_floor {
            let p = at
                .iter()
                .find(|r| r.system == "raw-relay")
                .and_then(|r| r.paired.get("raw-udp"));
            row.push(p.map_or_else(|| "-".to_string(), |p| format!("{p:.2}x")));
        }
        for m in &pong_modes {
            let p = at
                .iter()
                .find(|r| r.system == "tagwire-dds-pong" && &r.mode == m)
                .and_then(|r| r.paired.get("cyclonedds"));
            row.push(p.map_or_else(|| "-".to_string(), |p| format!("{p:.2}x")));
        }
        if pong_floor {
            let p = at
                .iter()
                .find(|r| r.system == "tagwire-dds-pong" && r.mode == "block")
                .and_then(|r| r.paired.get("dds-pong-floor"));
            row.push(p.map_or_else(|| "-".to_string(), |p| format!("{p:.2}x")));
        }
        rows.push(row);
    }
    paired_table(title, &rows, &recs)
}

/// The fan-out table (records with `bench == "fanout"`): one row per
/// (size, receivers), one column per system[/mode] and acks mode.
pub fn fanout_table(records: &[Record]) -> String {
    [
        fanout_like_table(records, "fanout", "Fan-out round trip"),
        fanout_like_table(
            records,
            "remote-fanout",
            "Fan-out round trip, receivers on one other host",
        ),
        fanout_like_table(
            records,
            "multi-node",
            "Fan-out round trip, receivers spread over other hosts",
        ),
    ]
    .into_iter()
    .filter(|t| !t.is_empty())
    .collect::<Vec<_>>()
    .join("\n")
}

fn fanout_like_table(records: &[Record], bench: &str, title: &str) -> String {
    let recs: Vec<&Record> = records.iter().filter(|r| r.bench == bench).collect();
    if recs.is_empty() {
        return String::new();
    }
    let cols = ordered_unique(recs.iter().map(|r| label(&recs, r, true)));
    let mut keys = ordered_unique(recs.iter().map(|r| (r.size, r.receivers)));
    keys.sort_unstable();
    let mut header = vec!["size".to_string(), "receivers".to_string()];
    header.extend(cols.iter().cloned());
    let mut rows = vec![header];
    for (size, receivers) in keys {
        let mut row = vec![fmt_size(size), receivers.to_string()];
        for c in &cols {
            let cell = recs
                .iter()
                .find(|r| r.size == size && r.receivers == receivers && &label(&recs, r, true) == c)
                .map(|r| match r.paired.get("1-receiver") {
                    Some(p) => format!("{}  ({p:.2}x of 1)", fmt_latency_cell(r)),
                    None => fmt_latency_cell(r),
                })
                .unwrap_or_else(|| "-".to_string());
            row.push(cell);
        }
        rows.push(row);
    }
    let nodes = recs.iter().map(|r| r.nodes).max().unwrap_or(1);
    let mut out = format!(
        "{title}{}, p50 µs [min-max over repetitions] (paired ratio to 1 receiver, same repetition)\n",
        if nodes > 1 {
            format!(" ({nodes} nodes)")
        } else {
            String::new()
        }
    );
    out.push_str(&render_grid(&rows));
    out.push_str(&notes_section(&recs, true));
    out
}

/// The throughput table (records with `bench == "throughput"`): one row per
/// size, msgs/s and MB/s per system, and `tagwire/cyclonedds` and
/// `tagwire/zenoh` (msgs/s) for each tagwire series (the lossless one, and
/// through the DDS gateway).
pub fn throughput_table(records: &[Record]) -> String {
    let recs: Vec<&Record> = records.iter().filter(|r| r.bench == "throughput").collect();
    if recs.is_empty() {
        return String::new();
    }
    let cols = ordered_unique(recs.iter().map(|r| label(&recs, r, false)));
    let mut sizes = ordered_unique(recs.iter().map(|r| r.size));
    sizes.sort_unstable();
    // Each tagwire series against Cyclone DDS (reliable): the flat-out
    // subscriber that may drop (`tagwire`), the lossless one, and Cyclone's
    // writer through the gateway to a lossless one.
    // And the same against Zenoh and iceoryx2 where they ran.
    let has = |s: &str| recs.iter().any(|r| r.system == s);
    let mut ratios: Vec<(&str, &str)> = Vec::new();
    for peer in ["cyclonedds", "zenoh", "iceoryx2"]
        .into_iter()
        .filter(|p| has(p))
    {
        for t in ["tagwire", "tagwire-lossless", "tagwire-dds-sub"] {
            if has(t) && (peer == "cyclonedds" || t != "tagwire-dds-sub") {
                ratios.push((t, peer));
            }
        }
    }
    let mut header = vec!["size".to_string()];
    for c in &cols {
        header.push(format!("{c} msg/s"));
        header.push(format!("{c} MB/s"));
    }
    header.extend(ratios.iter().map(|(t, p)| format!("{t}/{p}")));
    let mut rows = vec![header];
    for size in sizes {
        let at: Vec<&Record> = recs.iter().copied().filter(|r| r.size == size).collect();
        let mut row = vec![fmt_size(size)];
        for c in &cols {
            let r = at.iter().find(|r| &label(&recs, r, false) == c);
            row.push(
                r.and_then(|r| r.msgs_per_s)
                    .map(fmt_rate)
                    .unwrap_or_else(|| "-".to_string()),
            );
            row.push(
                r.and_then(|r| r.mb_per_s)
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "-".to_string()),
            );
        }
        for (t, peer) in &ratios {
            let base = at
                .iter()
                .find(|r| r.system == *peer)
                .and_then(|r| r.msgs_per_s);
            let twr = at.iter().find(|r| r.system == *t && r.msgs_per_s.is_some());
            match twr.and_then(|r| r.paired.get(*peer)) {
                Some(p) => row.push(format!("{p:.2}x")),
                None => row.push(ratio_cell(twr.and_then(|r| r.msgs_per_s), base)),
            }
        }
        rows.push(row);
    }
    let nodes = recs.iter().map(|r| r.nodes).max().unwrap_or(1);
    let mut out = format!(
        "Throughput{}, median over repetitions (MB = 10^6 B)\n",
        if nodes > 1 {
            format!(" across {nodes} hosts")
        } else {
            String::new()
        }
    );
    out.push_str(&render_grid(&rows));
    out.push_str(&notes_section(&recs, false));
    out
}

/// A table with one row per record of `bench` (system, size, p50 with its
/// spread, p99, and each paired ratio the records carry); empty string if
/// there are none. For the benchmarks that compare variants of one
/// workload (`proxy-rtt`, `pull`).
pub fn rows_table(records: &[Record], bench: &str, title: &str) -> String {
    let recs: Vec<&Record> = records.iter().filter(|r| r.bench == bench).collect();
    if recs.is_empty() {
        return String::new();
    }
    let keys = ordered_unique(recs.iter().flat_map(|r| r.paired.keys().cloned()));
    let mut header = vec![
        "system".to_string(),
        "size".to_string(),
        "p50 µs".to_string(),
        "p99 µs".to_string(),
    ];
    header.extend(keys.iter().map(|k| format!("/{k}")));
    let mut rows = vec![header];
    for r in &recs {
        let mut row = vec![
            r.system.clone(),
            fmt_size(r.size),
            fmt_latency_cell(r),
            r.p99_us.map_or_else(|| "-".to_string(), fmt_us),
        ];
        row.extend(keys.iter().map(|k| {
            r.paired
                .get(k)
                .map_or_else(|| "-".to_string(), |p| format!("{p:.2}x"))
        }));
        rows.push(row);
    }
    paired_table(title, &rows, &recs)
}

/// A table of p50s with paired ratios: its title line, the grid and the
/// records' notes.
fn paired_table(title: &str, rows: &[Vec<String>], recs: &[&Record]) -> String {
    let mut out = format!(
        "{title}, p50 µs [min-max over repetitions]; ratios are paired (same repetition, median over repetitions)\n",
    );
    out.push_str(&render_grid(rows));
    out.push_str(&notes_section(recs, false));
    out
}

/// All non-empty tables, separated by blank lines.
pub fn all_tables(records: &[Record]) -> String {
    [
        rtt_table(records),
        fanout_table(records),
        throughput_table(records),
        rows_table(
            records,
            "rtt-lang",
            "Round trip by language (both ends in that language, blocking receive)",
        ),
        rows_table(
            records,
            "proxy-rtt",
            "Round trip to a scaled subscriber on another host, by proxy placement",
        ),
        rows_table(
            records,
            "pull",
            "Pull of a tag's history from the local daemon",
        ),
        table2_table(records),
    ]
    .into_iter()
    .filter(|t| !t.is_empty())
    .collect::<Vec<_>>()
    .join("\n")
}

/// The Table 2 text (records with `bench == "table2"`); empty if there are none.
pub fn table2_table(records: &[Record]) -> String {
    let recs: Vec<&Record> = records.iter().filter(|r| r.bench == "table2").collect();
    if recs.is_empty() {
        return String::new();
    }
    let what = recs
        .iter()
        .find(|r| r.p50_us.is_some())
        .and_then(|r| r.note.clone())
        .unwrap_or_default();
    let size = recs.first().map_or(4, |r| r.size);
    // The first cell is the baseline (C->C in ORTE's table).
    let baseline = recs.first().map_or("C->C", |r| r.system.as_str());
    let title = if size == 4 {
        "ORTE Table 2"
    } else {
        "Lossless throughput by language"
    };
    let mut out = format!(
        "{title}: {} messages from a flat-out publisher to a lossless subscriber ({what}), first send to \
         last receive, ms, median [min-max over repetitions]; /{baseline} paired (same repetition, median over \
         repetitions)\n",
        fmt_size(size)
    );
    let mut rows = vec![vec![
        "publisher->subscriber".to_string(),
        "time ms".to_string(),
        "msg/s".to_string(),
        format!("/{baseline}"),
    ]];
    for r in &recs {
        let ms = |v: f64| format!("{:.2}", v / 1e3);
        let time = match (r.p50_us, r.p50_min_us, r.p50_max_us) {
            (Some(p), Some(lo), Some(hi)) if r.reps > 1 => {
                format!("{} [{}-{}]", ms(p), ms(lo), ms(hi))
            }
            (Some(p), _, _) => ms(p),
            _ => "-".into(),
        };
        rows.push(vec![
            r.system.clone(),
            time,
            r.msgs_per_s
                .map_or_else(|| "-".into(), |m| format!("{:.0}k", m / 1e3)),
            r.paired
                .get(baseline)
                .map_or_else(|| "-".into(), |p| format!("{p:.2}x")),
        ]);
    }
    out.push_str(&render_grid(&rows));
    let skipped: Vec<String> = recs
        .iter()
        .filter(|r| r.p50_us.is_none())
        .filter_map(|r| r.note.as_ref().map(|n| format!("  {}: {n}", r.system)))
        .collect();
    titled_lines(&mut out, "skipped", skipped);
    out
}

/// Prints [`rtt_table`] to stdout.
pub fn print_rtt_table(records: &[Record]) {
    print!("{}", rtt_table(records));
}

/// Prints [`fanout_table`] to stdout.
pub fn print_fanout_table(records: &[Record]) {
    print!("{}", fanout_table(records));
}

/// Prints [`throughput_table`] to stdout.
pub fn print_throughput_table(records: &[Record]) {
    print!("{}", throughput_table(records));
}

/// Writes `<dir>/<name>.json` (JSON lines) and `<dir>/<name>.txt` (all
/// tables), creating `dir` if needed.
pub fn save_results(dir: &Path, name: &str, records: &[Record]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join(format!("{name}.json"));
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&json).with_context(|| format!("creating {}", json.display()))?,
    );
    write_json_lines(records, &mut f).with_context(|| format!("writing {}", json.display()))?;
    let txt = dir.join(format!("{name}.txt"));
    std::fs::write(&txt, all_tables(records))
        .with_context(|| format!("writing {}", txt.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(p50: f64) -> Repeated {
        Repeated {
            median_p50_us: p50,
            min_p50_us: p50 * 0.9,
            max_p50_us: p50 * 1.2,
            median_p99_us: p50 * 3.0,
            reps: 3,
        }
    }

    fn sample() -> Vec<Record> {
        vec![
            Record::rtt("tagwire", "block", 256, &rep(9.0)),
            Record::rtt("tagwire", "spin", 256, &rep(0.6)),
            Record::rtt("raw-futex", "block", 256, &rep(4.5)),
            Record::rtt("raw-spin", "spin", 256, &rep(0.3)),
            Record::skipped("rtt", "cyclonedds", "block", 256, "ddsperf not found"),
            Record::rtt("tagwire", "block", 8192, &rep(12.0)),
            Record::fanout("tagwire", "block", 256, 4, "all", &rep(20.0)),
            Record::fanout("tagwire", "block", 256, 4, "last", &rep(15.0)),
            Record::throughput(
                "tagwire",
                "block",
                256,
                &RepeatedRate::from_rates(&[2e6, 1e6, 3e6]).expect("rates"),
            ),
            Record::throughput(
                "cyclonedds",
                "block",
                256,
                &RepeatedRate::from_rates(&[1e6]).expect("rates"),
            ),
        ]
    }

    #[test]
    fn json_has_exactly_the_fields() {
        let r = Record::rtt("tagwire", "block", 256, &rep(9.0));
        let v = serde_json::to_value(&r).expect("serialise");
        let obj = v.as_object().expect("object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = vec![
            "bench",
            "system",
            "mode",
            "size",
            "receivers",
            "nodes",
            "acks",
            "p50_us",
            "p99_us",
            "p50_min_us",
            "p50_max_us",
            "msgs_per_s",
            "mb_per_s",
            "reps",
            "note",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    #[test]
    fn json_lines_round_trip() {
        let recs = sample();
        let mut buf = Vec::new();
        write_json_lines(&recs, &mut buf).expect("write");
        let text = String::from_utf8(buf.clone()).expect("utf8");
        assert_eq!(text.lines().count(), recs.len());
        let back = read_json_lines(&buf[..]).expect("read");
        assert_eq!(back, recs);
    }

    #[test]
    fn rtt_table_shape() {
        let t = rtt_table(&sample());
        assert!(t.contains("tagwire/block"), "{t}");
        assert!(t.contains("tagwire/raw-futex"), "{t}");
        assert!(t.contains("tagwire/raw-spin"), "{t}");
        assert!(t.contains("tagwire/cyclonedds"), "{t}");
        // Mode-matched ratios: 9/4.5 and 0.6/0.3.
        let row256 = t.lines().find(|l| l.starts_with("256 B")).expect("row");
        assert!(row256.contains("2.00x"), "{row256}");
        assert!(row256.contains("9.00 [8.10-10.8]"), "{row256}");
        assert!(t.contains("8 KiB"), "{t}");
        assert!(t.contains("cyclonedds: ddsperf not found"), "{t}");
    }

    #[test]
    fn peers_get_ratio_columns_per_mode() {
        let mut recs = sample();
        recs.push(Record::rtt("iceoryx2", "block", 256, &rep(18.0)));
        recs.push(Record::rtt("iceoryx2", "spin", 256, &rep(1.2)));
        let t = rtt_table(&recs);
        let row = t.lines().find(|l| l.starts_with("256 B")).expect("row");
        // 9/18 blocking, 0.6/1.2 spinning, each against its own mode.
        assert!(t.contains("tagwire/block/iceoryx2"), "{t}");
        assert!(t.contains("tagwire/spin/iceoryx2"), "{t}");
        assert_eq!(row.matches("0.50x").count(), 2, "{row}");
        recs.push(Record::throughput(
            "zenoh",
            "block",
            256,
            &RepeatedRate::from_rates(&[4e6]).expect("rates"),
        ));
        let t = throughput_table(&recs);
        assert!(t.contains("tagwire/zenoh"), "{t}");
        assert!(t.contains("0.50x"), "{t}");
    }

    #[test]
    fn a_mode_no_baseline_has_gets_its_own_ratio_columns() {
        let mut recs = sample();
        recs.push(Record::rtt("iceoryx2", "block", 256, &rep(18.0)));
        let mut sleep = Record::rtt("tagwire", "sleep", 256, &rep(27.0));
        sleep.paired.insert("raw-futex".into(), 6.0);
        sleep.paired.insert("iceoryx2".into(), 1.5);
        recs.push(sleep);
        let t = rtt_table(&recs);
        let header = t.lines().find(|l| l.starts_with("size")).expect("header");
        assert!(header.contains("tagwire/sleep/raw-futex"), "{t}");
        assert!(header.contains("tagwire/sleep/iceoryx2"), "{t}");
        assert!(!header.contains("tagwire/sleep/cyclonedds"), "{t}");
        let row = t.lines().find(|l| l.starts_with("256 B")).expect("row");
        assert!(row.contains("6.00x") && row.contains("1.50x"), "{row}");
        // The blocking mode's own columns are unchanged: 9/18.
        assert!(row.contains("0.50x"), "{row}");
    }

    #[test]
    fn other_tables() {
        let f = fanout_table(&sample());
        assert!(f.contains("acks=all") && f.contains("acks=last"), "{f}");
        let t = throughput_table(&sample());
        assert!(t.contains("2.00M"), "{t}");
        assert!(t.contains("2.00x"), "{t}");
        assert!(t.contains("512"), "{t}");
        assert_eq!(rtt_table(&[]), "");
    }

    #[test]
    fn save_writes_both_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        save_results(dir.path(), "run", &sample()).expect("save");
        let json = std::fs::read_to_string(dir.path().join("run.json")).expect("json");
        assert_eq!(json.lines().count(), sample().len());
        let txt = std::fs::read_to_string(dir.path().join("run.txt")).expect("txt");
        assert!(txt.contains("Round trip") && txt.contains("Throughput"));
    }

    #[test]
    fn sizes() {
        assert_eq!(fmt_size(64), "64 B");
        assert_eq!(fmt_size(1024), "1 KiB");
        assert_eq!(fmt_size(8192), "8 KiB");
        assert_eq!(fmt_size(1536), "1.5 KiB");
        assert_eq!(fmt_size(1 << 20), "1 MiB");
        assert_eq!(fmt_size(1000), "1000 B");
    }
}
