//! The cells and the grid of `tagwire perf`'s text tables: sizes, latencies
//! and rates formatted for a cell, column labels, notes, and the grid that
//! fits the columns.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::Record;

/// Human-readable size: `64 B`, `1 KiB`, `1.5 KiB`, `8 MiB`.
pub fn fmt_size(bytes: u64) -> String {
    const K: u64 = 1024;
    let (div, unit) = if bytes >= K * K && bytes % (K * K / 2) == 0 {
        (K * K, "MiB")
    } else if bytes >= K && bytes % (K / 2) == 0 {
        (K, "KiB")
    } else {
        return format!("{bytes} B");
    };
    let v = bytes as f64 / div as f64;
    if v.fract() == 0.0 {
        format!("{} {unit}", v as u64)
    } else {
        format!("{v:.1} {unit}")
    }
}

/// Formats a latency in µs with 3 significant-ish digits.
pub(super) fn fmt_us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Formats a rate (msgs/s) as e.g. `612k` or `1.80M`.
pub(super) fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

pub(super) fn fmt_latency_cell(r: &Record) -> String {
    match r.p50_us {
        None => "-".to_string(),
        Some(p50) => match (r.p50_min_us, r.p50_max_us) {
            (Some(lo), Some(hi)) if r.reps > 1 => {
                format!("{} [{}-{}]", fmt_us(p50), fmt_us(lo), fmt_us(hi))
            }
            _ => fmt_us(p50),
        },
    }
}

/// Column label of a record: the system, plus the mode if that system
/// appears with several modes among `records`, plus `acks=` if asked.
pub(super) fn label(records: &[&Record], r: &Record, with_acks: bool) -> String {
    let modes: BTreeSet<&str> = records
        .iter()
        .filter(|x| x.system == r.system)
        .map(|x| x.mode.as_str())
        .collect();
    let mut s = r.system.clone();
    if modes.len() > 1 {
        s.push('/');
        s.push_str(&r.mode);
    }
    if with_acks {
        s.push_str(" acks=");
        s.push_str(&r.acks);
    }
    s
}

/// Distinct values in first-appearance order.
pub(super) fn ordered_unique<T: PartialEq + Clone>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for it in items {
        if !out.contains(&it) {
            out.push(it);
        }
    }
    out
}

/// Renders rows (first row = header) with column widths fitted and the
/// first column left-aligned, the others right-aligned.
pub(crate) fn render_grid(rows: &[Vec<String>]) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0usize; ncol];
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            if i == 0 {
                let _ = write!(line, "{c:<w$}", w = width[i]);
            } else {
                let _ = write!(line, "  {c:>w$}", w = width[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if ri == 0 {
            let total: usize = width.iter().sum::<usize>() + 2 * ncol.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

pub(super) fn notes_section(records: &[&Record], with_acks: bool) -> String {
    let mut out = String::new();
    let notes = ordered_unique(records.iter().filter_map(|r| {
        r.note
            .as_ref()
            .map(|n| format!("  {}: {n}", label(records, r, with_acks)))
    }));
    titled_lines(&mut out, "notes", notes);
    out
}

/// `title:` and `lines` one per line, if there are any.
pub(super) fn titled_lines(out: &mut String, title: &str, lines: Vec<String>) {
    if lines.is_empty() {
        return;
    }
    out.push_str(title);
    out.push_str(":\n");
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
}

pub(super) fn ratio_cell(num: Option<f64>, den: Option<f64>) -> String {
    match (num, den) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => format!("{:.2}x", a / b),
        _ => "-".to_string(),
    }
}
