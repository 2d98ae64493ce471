//! PNG charts of benchmark records (plotters, bitmap backend).
//!
//! * [`rtt_plot`]: p50 round trip (µs, log scale) against message size
//!   (log2 scale), one line per system, with the `[min-max]` spread of the
//!   repetitions as error bars.
//! * [`fanout_plot`]: p50 round trip against the number of receivers, one
//!   line per system/mode/acks.
//! * [`throughput_plot`]: messages per second (log) against message size.
//!
//! Text needs a TrueType font registered with plotters at run time (the
//! `ab_glyph` font backend has no system font lookup). The first chart
//! loads one from `$TAGWIRE_PLOT_FONT` or the usual Debian/Fedora/Arch paths
//! of DejaVu Sans / Liberation Sans ([`FONT_CANDIDATES`]). If none is
//! found the charts are still drawn, without any text (no title, ticks
//! labels or legend); [`font_status`] says why, and a one-line warning is
//! printed to stderr once.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, bail};
use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::prelude::*;

use crate::report::{fmt_size, Record};

/// Font files tried, in order, after `$TAGWIRE_PLOT_FONT`.
pub const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

const FAMILY: &str = "sans-serif";
const NO_FONT: &str = "tagwire-perf-no-font";
const WIDTH: u32 = 1000;
const HEIGHT: u32 = 620;

fn load_font() -> Result<(), String> {
    let mut paths: Vec<String> = Vec::new();
    if let Ok(p) = std::env::var("TAGWIRE_PLOT_FONT") {
        paths.push(p);
    }
    paths.extend(FONT_CANDIDATES.iter().map(|s| s.to_string()));
    for p in &paths {
        let Ok(bytes) = std::fs::read(p) else {
            continue;
        };
        // plotters wants 'static font data; this happens once per process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        if plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
            return Ok(());
        }
    }
    Err(format!(
        "no usable font (tried {}); charts are drawn without text; install fonts-dejavu-core or set TAGWIRE_PLOT_FONT",
        paths.join(", ")
    ))
}

/// Registers a font with plotters (once) and tells whether text can be drawn.
pub fn font_status() -> Result<(), String> {
    static STATUS: OnceLock<Result<(), String>> = OnceLock::new();
    STATUS
        .get_or_init(|| {
            let r = load_font();
            if let Err(e) = &r {
                eprintln!("tagwire-perf plot: {e}");
            }
            r
        })
        .clone()
}

/// (x, y, optional (lo, hi) spread of y).
type Point = (f64, f64, Option<(f64, f64)>);

struct Series {
    label: String,
    color: RGBColor,
    /// Sorted by x.
    points: Vec<Point>,
}

#[derive(Clone, Copy)]
enum XKind {
    /// x holds log2(bytes); ticks print as sizes.
    Log2Size,
    /// x is a plain count.
    Count,
}

/// Linear f64 axis with ticks exactly at the data's x values, labelled as
/// sizes (x = log2 bytes) or counts.
struct KeyAxis {
    lo: f64,
    hi: f64,
    keys: Vec<f64>,
    kind: XKind,
}

impl Ranged for KeyAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span <= 0.0 {
            return limit.0;
        }
        let f = (value - self.lo) / span;
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let max = hint.max_num_points();
        if max == 0 || self.keys.is_empty() {
            return Vec::new();
        }
        let step = self.keys.len().div_ceil(max);
        self.keys.iter().copied().step_by(step.max(1)).collect()
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for KeyAxis {
    fn format_ext(&self, v: &f64) -> String {
        match self.kind {
            XKind::Log2Size => fmt_size(v.exp2().round() as u64),
            XKind::Count => format!("{}", v.round() as i64),
        }
    }
}

/// Log10 axis with ticks at 1-2-5 steps (or whole decades when the range
/// is wide), minor grid lines at every integer multiple.
struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    fn ticks(&self, mults: &[f64]) -> Vec<f64> {
        let mut out = Vec::new();
        let mut decade = 10f64.powf(self.lo.log10().floor());
        while decade <= self.hi {
            for m in mults {
                let v = decade * m;
                if v >= self.lo && v <= self.hi {
                    out.push(v);
                }
            }
            decade *= 10.0;
        }
        out
    }
}

impl Ranged for LogAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let (a, b) = (self.lo.log10(), self.hi.log10());
        if b <= a || *value <= 0.0 {
            return limit.0;
        }
        let f = (value.log10() - a) / (b - a);
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let max = hint.max_num_points();
        if max == 0 {
            return Vec::new();
        }
        let all: Vec<f64> = (1..10).map(f64::from).collect();
        if hint.weight().allow_light_points() {
            let v = self.ticks(&all);
            if v.len() <= max {
                return v;
            }
        }
        for mults in [&all[..], &[1.0, 2.0, 5.0][..], &[1.0][..]] {
            let v = self.ticks(mults);
            if v.len() <= max.min(12) && v.len() >= 3 || mults.len() == 1 {
                return v.into_iter().take(max).collect();
            }
        }
        Vec::new()
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for LogAxis {
    fn format_ext(&self, v: &f64) -> String {
        let v = *v;
        if v >= 1e6 {
            format!("{}M", v / 1e6)
        } else if v >= 1e4 {
            format!("{}k", v / 1e3)
        } else if v >= 1.0 {
            format!("{v:.0}")
        } else {
            let s = format!("{v:.3}");
            s.trim_end_matches('0').to_string()
        }
    }
}

fn system_color(system: &str, idx: usize) -> RGBColor {
    match system {
        "tagwire" => RGBColor(214, 39, 40),
        "raw-futex" => RGBColor(31, 119, 180),
        "raw-spin" => RGBColor(44, 160, 44),
        "raw-udp" => RGBColor(255, 127, 14),
        "cyclonedds" => RGBColor(148, 103, 189),
        "iceoryx2" => RGBColor(140, 86, 75),
        "iceoryx2-peek" => RGBColor(196, 156, 148),
        "zenoh" => RGBColor(23, 190, 207),
        _ => {
            let c = Palette99::pick(idx + 7).to_rgba();
            RGBColor(c.0, c.1, c.2)
        }
    }
}

/// Groups records into series keyed by `key`, with the value from `value`.
fn group(
    records: &[&Record],
    key: impl Fn(&Record) -> String,
    x: impl Fn(&Record) -> Option<f64>,
    y: impl Fn(&Record) -> Option<(f64, Option<(f64, f64)>)>,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in records {
        let (Some(xv), Some((yv, spread))) = (x(r), y(r)) else {
            continue;
        };
        if !(xv.is_finite() && yv.is_finite() && yv > 0.0) {
            continue;
        }
        let k = key(r);
        let idx = match out.iter().position(|s| s.label == k) {
            Some(i) => i,
            None => {
                out.push(Series {
                    color: system_color(&r.system, out.len()),
                    label: k,
                    points: Vec::new(),
                });
                out.len() - 1
            }
        };
        out[idx].points.push((xv, yv, spread));
    }
    apart(&mut out);
    out
}

/// Sorts each series by x and, where several share a colour (one system
/// in several modes), varies the shade so they stay apart.
fn apart(out: &mut [Series]) {
    let mut seen: Vec<RGBColor> = Vec::new();
    for s in out {
        let n = seen.iter().filter(|c| **c == s.color).count();
        seen.push(s.color);
        if n > 0 {
            let f = |c: u8| (f64::from(c) * (1.0 - 0.35 * n as f64).max(0.2)) as u8;
            s.color = RGBColor(f(s.color.0), f(s.color.1), f(s.color.2));
        }
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
}

fn latency_y(r: &Record) -> Option<(f64, Option<(f64, f64)>)> {
    let p50 = r.p50_us?;
    let spread = match (r.p50_min_us, r.p50_max_us) {
        (Some(lo), Some(hi)) if lo > 0.0 && hi >= lo => Some((lo, hi)),
        _ => None,
    };
    Some((p50, spread))
}

/// `system`, plus `/mode` when that system appears with several modes.
fn system_mode_label(records: &[&Record], r: &Record) -> String {
    let multi = records
        .iter()
        .any(|o| o.system == r.system && o.mode != r.mode);
    if multi {
        format!("{}/{}", r.system, r.mode)
    } else {
        r.system.clone()
    }
}

fn pe(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

fn draw_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    xkind: XKind,
    text: bool,
) -> anyhow::Result<()> {
    if series.iter().all(|s| s.points.is_empty()) {
        bail!("nothing to plot for {}", path.display());
    }
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x_lo, mut x_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut y_lo, mut y_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y, spread) in all {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        let (lo, hi) = spread.unwrap_or((y, y));
        y_lo = y_lo.min(lo.min(y));
        y_hi = y_hi.max(hi.max(y));
    }
    // Ticks at the x values present (every other one if crowded).
    let mut xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() > 12 {
        xs = xs.into_iter().step_by(2).collect();
    }
    let pad = ((x_hi - x_lo) * 0.05).max(0.5);
    let x_range = KeyAxis {
        lo: x_lo - pad,
        hi: x_hi + pad,
        keys: xs,
        kind: xkind,
    };
    // Headroom above the data for the legend (upper left).
    let (y_lo, y_hi) = (y_lo / 1.4, y_hi * 1.4);
    let legend_frac = if text {
        (f64::from(series.len() as u32) * 21.0 + 30.0) / f64::from(HEIGHT - 150)
    } else {
        0.0
    };
    let legend_frac = legend_frac.min(0.5);
    let y_top = y_hi * (y_hi / y_lo).powf(legend_frac / (1.0 - legend_frac));
    let y_range = LogAxis {
        lo: y_lo,
        hi: y_top,
    };

    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder
            .caption(title, (FAMILY, 26))
            .x_label_area_size(50)
            .y_label_area_size(70);
    }
    // Without text: no label areas at all, as plotters measures tick labels
    // (loading a font) whenever an axis area exists.
    let mut chart = builder.build_cartesian_2d(x_range, y_range).map_err(pe)?;

    {
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(RGBColor(235, 235, 235));
        if text {
            mesh.x_desc(x_desc)
                .y_desc(y_desc)
                .label_style((FAMILY, 15))
                .axis_desc_style((FAMILY, 17))
                .y_labels(30);
        } else {
            // An unregistered family: should any text still be drawn, it
            // fails here (and in the test) instead of going unnoticed.
            mesh.x_labels(0).y_labels(0).label_style((NO_FONT, 1));
        }
        mesh.draw().map_err(pe)?;
    }
    if !text {
        let (xr, yr) = (chart.x_range(), chart.y_range());
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(xr.start, yr.start), (xr.end, yr.end)],
                BLACK.stroke_width(1),
            )))
            .map_err(pe)?;
    }

    for s in series {
        let color = s.color;
        let stroke = if s.label.starts_with("tagwire") { 3 } else { 2 };
        let line = chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|p| (p.0, p.1)),
                color.stroke_width(stroke),
            ))
            .map_err(pe)?;
        if text {
            line.label(s.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
        }
        chart
            .draw_series(
                s.points
                    .iter()
                    .map(|p| Circle::new((p.0, p.1), 4, color.filled())),
            )
            .map_err(pe)?;
        chart
            .draw_series(s.points.iter().filter_map(|p| {
                p.2.map(|(lo, hi)| {
                    ErrorBar::new_vertical(p.0, lo, p.1, hi, color.stroke_width(1), 8)
                })
            }))
            .map_err(pe)?;
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FAMILY, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(pe)?;
    }
    root.present().map_err(pe)?;
    Ok(())
}

fn rtt_series(records: &[Record]) -> Vec<Series> {
    let recs: Vec<&Record> = records
        .iter()
        .filter(|r| matches!(r.bench.as_str(), "rtt" | "remote-rtt") && r.size > 0)
        .collect();
    group(
        &recs,
        |r| system_mode_label(&recs, r),
        |r| Some((r.size as f64).log2()),
        latency_y,
    )
}

fn fanout_series(records: &[Record]) -> Vec<Series> {
    let recs: Vec<&Record> = records
        .iter()
        .filter(|r| matches!(r.bench.as_str(), "fanout" | "remote-fanout" | "multi-node"))
        .collect();
    let multi_size = recs.iter().any(|r| r.size != recs[0].size);
    group(
        &recs,
        |r| {
            let mut l = format!("{} acks={}", system_mode_label(&recs, r), r.acks);
            if multi_size {
                l.push_str(&format!(" {}", fmt_size(r.size)));
            }
            l
        },
        |r| Some(f64::from(r.receivers)),
        latency_y,
    )
}

fn throughput_series(records: &[Record]) -> Vec<Series> {
    let recs: Vec<&Record> = records
        .iter()
        .filter(|r| r.bench == "throughput" && r.size > 0)
        .collect();
    group(
        &recs,
        |r| system_mode_label(&recs, r),
        |r| Some((r.size as f64).log2()),
        |r| r.msgs_per_s.map(|v| (v, None)),
    )
}

fn text_enabled() -> bool {
    font_status().is_ok()
}

/// PNG of p50 round trip (µs, log) vs message size (log2), one line per
/// system (`system/mode` if a system ran in several modes), error bars
/// for the spread over repetitions. Uses records with `bench` `rtt` or
/// `remote-rtt`.
pub fn rtt_plot(path: &Path, records: &[Record]) -> anyhow::Result<()> {
    draw_chart(
        path,
        "Round trip (p50) vs message size",
        "message size",
        "round trip p50 (µs)",
        &rtt_series(records),
        XKind::Log2Size,
        text_enabled(),
    )
}

/// PNG of p50 round trip (µs, log) vs number of receivers, one line per
/// system[/mode] and acks mode. Uses records with `bench` `fanout`,
/// `remote-fanout` or `multi-node`.
pub fn fanout_plot(path: &Path, records: &[Record]) -> anyhow::Result<()> {
    draw_chart(
        path,
        "Fan-out round trip (p50) vs receivers",
        "receivers",
        "round trip p50 (µs)",
        &fanout_series(records),
        XKind::Count,
        text_enabled(),
    )
}

/// PNG of `tagwire perf priority`: the measured channel's round trip p99
/// (µs, log) against the load (% of the shaped rate), one line per system
/// and thread policy, error bars for the spread over repetitions (the
/// channel-prioritisation paper's Figure 5, with the p99 for its mean).
pub fn priority_plot(
    path: &Path,
    records: &[crate::priority::PriorityRecord],
) -> anyhow::Result<()> {
    let mut series: Vec<Series> = Vec::new();
    for r in records {
        let label = match r.sched.as_str() {
            "other" => r.system.clone(),
            s => format!("{} {s}", r.system),
        };
        let idx = match series.iter().position(|s| s.label == label) {
            Some(i) => i,
            None => {
                let color = match r.system.as_str() {
                    "udp floor" => system_color("raw-udp", 0),
                    "zenoh realtime" => system_color("zenoh", 0),
                    s if s.starts_with("zenoh") => RGBColor(0, 120, 140),
                    "cyclone dds" => system_color("cyclonedds", 0),
                    s if s.ends_with("normal") => RGBColor(31, 119, 180),
                    _ => system_color("tagwire", 0),
                };
                series.push(Series {
                    color,
                    label,
                    points: Vec::new(),
                });
                series.len() - 1
            }
        };
        let [p99, lo, hi] = r.p99_us;
        if p99.is_finite() && p99 > 0.0 {
            let spread = (lo > 0.0 && hi >= lo).then_some((lo, hi));
            series[idx]
                .points
                .push((f64::from(r.load_pct), p99, spread));
        }
    }
    apart(&mut series);
    let title = records.first().map_or_else(String::new, |r| {
        format!("Figure {} ({}): ", r.figure, r.carrier.to_uppercase())
    }) + "round trip p99 beside a load through a shaped link";
    draw_chart(
        path,
        &title,
        "load (% of the shaped rate)",
        "round trip p99 (µs)",
        &series,
        XKind::Count,
        text_enabled(),
    )
}

/// `tagwire perf napa`'s charts, shaped like the NAPA paper's Figures 7
/// and 8: for each bottleneck rate and loss, delivered Mbit/s and p50
/// one-way latency (with the repetitions' spread, and the floor) against
/// the message size, one line per system. Returns the files written
/// (`napa-{throughput,latency}-{rate}M-{loss}pct.png` in `dir`).
pub fn napa_plots(
    dir: &Path,
    records: &[crate::napa::NapaRecord],
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut cells: Vec<(u64, u8)> = records
        .iter()
        .map(|r| (r.rate_bit_per_s, r.loss_pct))
        .collect();
    cells.sort_unstable();
    cells.dedup();
    let mut written = Vec::new();
    for (rate, loss) in cells {
        let of_cell = || {
            records
                .iter()
                .filter(move |r| r.rate_bit_per_s == rate && r.loss_pct == loss)
        };
        let mut latency: Vec<Series> = Vec::new();
        let mut throughput: Vec<Series> = Vec::new();
        for r in of_cell() {
            let color = match r.system.as_str() {
                "tagwire paced" => system_color("tagwire", 0),
                "tagwire unpaced" => RGBColor(31, 119, 180),
                other => system_color(other, latency.len()),
            };
            let x = (r.size as f64).log2();
            let spread = |v: [f64; 3]| (v[1] > 0.0 && v[2] >= v[1]).then_some((v[1], v[2]));
            for (out, y) in [(&mut latency, r.p50_ms), (&mut throughput, r.mbit_s)] {
                let i = match out.iter().position(|s| s.label == r.system) {
                    Some(i) => i,
                    None => {
                        out.push(Series {
                            label: r.system.clone(),
                            color,
                            points: Vec::new(),
                        });
                        out.len() - 1
                    }
                };
                if y[0] > 0.0 {
                    out[i].points.push((x, y[0], spread(y)));
                }
            }
        }
        // The floor: the message's wire time plus the idle link's one way.
        let mut floor: Vec<(usize, f64)> = of_cell().map(|r| (r.size, r.floor_ms)).collect();
        floor.sort_by_key(|f| f.0);
        floor.dedup_by_key(|f| f.0);
        latency.push(Series {
            label: "floor (wire time + idle one way)".into(),
            color: system_color("raw-udp", 0),
            points: floor
                .into_iter()
                .filter(|f| f.1 > 0.0)
                .map(|(size, ms)| ((size as f64).log2(), ms, None))
                .collect(),
        });
        for s in latency.iter_mut().chain(throughput.iter_mut()) {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let mbit = rate / 1_000_000;
        let at = format!("{mbit} Mbit/s, {loss} % loss");
        let path = dir.join(format!("napa-latency-{mbit}M-{loss}pct.png"));
        draw_chart(
            &path,
            &format!("One-way latency p50 through a bottleneck: {at}"),
            "message size",
            "one-way latency p50 (ms)",
            &latency,
            XKind::Log2Size,
            text_enabled(),
        )?;
        written.push(path);
        let path = dir.join(format!("napa-throughput-{mbit}M-{loss}pct.png"));
        draw_chart(
            &path,
            &format!("Throughput through a bottleneck: {at}"),
            "message size",
            "delivered payload (Mbit/s)",
            &throughput,
            XKind::Log2Size,
            text_enabled(),
        )?;
        written.push(path);
    }
    Ok(written)
}

/// PNG of messages per second (log) vs message size (log2), one line per
/// system. Uses records with `bench == "throughput"`.
pub fn throughput_plot(path: &Path, records: &[Record]) -> anyhow::Result<()> {
    draw_chart(
        path,
        "Throughput vs message size",
        "message size",
        "messages per second",
        &throughput_series(records),
        XKind::Log2Size,
        text_enabled(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Repeated, RepeatedRate};

    const PNG_SIG: &[u8] = b"\x89PNG\r\n\x1a\n";

    fn rep(p50: f64) -> Repeated {
        Repeated {
            median_p50_us: p50,
            min_p50_us: p50 * 0.85,
            max_p50_us: p50 * 1.3,
            median_p99_us: p50 * 3.0,
            reps: 3,
        }
    }

    fn records() -> Vec<Record> {
        let mut v = Vec::new();
        for (i, size) in [64u64, 256, 1024, 4096, 16384, 65536]
            .into_iter()
            .enumerate()
        {
            let g = 1.0 + i as f64 * 0.3;
            v.push(Record::rtt("tagwire", "block", size, &rep(6.0 * g)));
            v.push(Record::rtt("tagwire", "spin", size, &rep(0.7 * g)));
            v.push(Record::rtt("raw-futex", "block", size, &rep(4.5 * g)));
            v.push(Record::rtt("raw-spin", "spin", size, &rep(0.3 * g)));
            v.push(Record::rtt("raw-udp", "block", size, &rep(6.0 * g * g)));
            v.push(Record::rtt("cyclonedds", "block", size, &rep(14.0 * g)));
            let rate = RepeatedRate::from_rates(&[1.5e6 / g]).expect("rate");
            v.push(Record::throughput("tagwire", "block", size, &rate));
        }
        v.push(Record::skipped("rtt", "zenoh", "block", 64, "not built"));
        for n in [1u32, 2, 4, 8] {
            let f = f64::from(n);
            v.push(Record::fanout(
                "tagwire",
                "block",
                256,
                n,
                "all",
                &rep(6.0 + 2.0 * f),
            ));
            v.push(Record::fanout(
                "tagwire",
                "block",
                256,
                n,
                "last",
                &rep(6.0 + f),
            ));
        }
        v
    }

    fn is_png(p: &Path) -> bool {
        std::fs::read(p)
            .map(|b| b.starts_with(PNG_SIG))
            .unwrap_or(false)
    }

    #[test]
    fn writes_pngs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let recs = records();
        let p = dir.path().join("rtt.png");
        rtt_plot(&p, &recs).expect("rtt plot");
        assert!(is_png(&p));
        let f = dir.path().join("fanout.png");
        fanout_plot(&f, &recs).expect("fanout plot");
        assert!(is_png(&f));
        let t = dir.path().join("tput.png");
        throughput_plot(&t, &recs).expect("throughput plot");
        assert!(is_png(&t));
        // Keep a copy to look at when asked to.
        if let Some(out) = std::env::var_os("TAGWIRE_PLOT_TEST_OUT") {
            let out = Path::new(&out);
            for n in ["rtt.png", "fanout.png", "tput.png"] {
                std::fs::copy(dir.path().join(n), out.join(n)).expect("copy");
            }
        }
    }

    #[test]
    fn draws_without_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("notext.png");
        draw_chart(
            &p,
            "t",
            "x",
            "y",
            &rtt_series(&records()),
            XKind::Log2Size,
            false,
        )
        .expect("plot without text");
        assert!(is_png(&p));
        if let Some(out) = std::env::var_os("TAGWIRE_PLOT_TEST_OUT") {
            std::fs::copy(&p, Path::new(&out).join("notext.png")).expect("copy");
        }
    }

    #[test]
    fn empty_input_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(rtt_plot(&dir.path().join("x.png"), &[]).is_err());
        assert!(priority_plot(&dir.path().join("p.png"), &[]).is_err());
    }

    #[test]
    fn draws_the_priority_figure_one_line_per_system_and_policy() {
        let rec =
            |system: &str, sched: &str, load: u32, p99: f64| crate::priority::PriorityRecord {
                system: system.to_owned(),
                figure: "5b".to_owned(),
                carrier: "tcp".to_owned(),
                load_pct: load,
                rate_bit_per_s: 50_000_000,
                reps: 3,
                hogs: 2,
                sched: sched.to_owned(),
                load_sched: "other".to_owned(),
                round_trips: 100,
                mean_us: [p99 / 3.0; 3],
                std_us: [p99 / 4.0; 3],
                p50_us: [p99 / 2.0; 3],
                p99_us: [p99, p99 * 0.8, p99 * 1.2],
                p999_us: p99 * 2.0,
                max_us: p99 * 3.0,
                load_mbit_s: f64::from(load) / 2.5,
                load_lost: 0,
            };
        let mut recs = Vec::new();
        for load in [0, 20, 70, 120] {
            let f = f64::from(load + 10);
            recs.push(rec("tagwire critical", "fifo:40", load, 30.0 * f));
            recs.push(rec("tagwire normal", "other", load, 300.0 * f));
            recs.push(rec("udp floor", "fifo:40", load, 20.0 * f));
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("priority.png");
        priority_plot(&p, &recs).expect("priority plot");
        assert!(is_png(&p));
    }

    #[test]
    fn napa_draws_a_latency_and_a_throughput_chart_per_rate_and_loss() {
        let rec =
            |system: &str, rate: u64, loss: u8, size: usize, p50: f64| crate::napa::NapaRecord {
                system: system.to_owned(),
                rate_bit_per_s: rate,
                size,
                loss_pct: loss,
                reps: 3,
                mbit_s: [90.0, 88.0, 91.0],
                p50_ms: [p50, p50 * 0.9, p50 * 1.1],
                p99_ms: [p50 * 2.0; 3],
                max_ms: p50 * 3.0,
                resent: 0.0,
                lost: 0,
                floor_ms: p50 / 4.0,
                p99_over_floor: 8.0,
                goodput_share: 0.9,
                unacked: 0.0,
                pace_window: 0.0,
                min_rtt_us: 0.0,
                rate_estimate_mbit_s: 0.0,
            };
        let mut recs = Vec::new();
        for (rate, loss) in [(100_000_000, 0), (100_000_000, 1), (1_000_000_000, 0)] {
            for size in [5000, 20_000, 200_000] {
                let f = size as f64 / 5000.0;
                recs.push(rec("tagwire paced", rate, loss, size, 3.0 * f));
                recs.push(rec("tagwire unpaced", rate, loss, size, 200.0 * f));
                recs.push(rec("zenoh", rate, loss, size, 90.0));
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let files = napa_plots(dir.path(), &recs).expect("napa plots");
        let names: Vec<String> = files
            .iter()
            .filter_map(|p| Some(p.file_name()?.to_str()?.to_owned()))
            .collect();
        assert_eq!(
            names,
            [
                "napa-latency-100M-0pct.png",
                "napa-throughput-100M-0pct.png",
                "napa-latency-100M-1pct.png",
                "napa-throughput-100M-1pct.png",
                "napa-latency-1000M-0pct.png",
                "napa-throughput-1000M-0pct.png",
            ]
        );
        assert!(files.iter().all(|p| is_png(p)));
        assert!(napa_plots(dir.path(), &[])
            .expect("nothing to draw")
            .is_empty());
    }
}
