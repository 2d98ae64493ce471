//! `tagwire hz TAG` and `tagwire bw TAG`: a tag's message rate and
//! bandwidth as they arrive at this process, per sender, once a second
//! (what `ros2 topic hz` and `ros2 topic bw` print).
//!
//! Each sender (pid@node) keeps a window of its last arrivals (time and
//! size). The rate is the window's intervals over its span; the bandwidth
//! the bytes that arrived after its first message over the same span.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use tagwire::{Domain, Error, SubscribeOptions};

use crate::ConnectArgs;

/// Arguments of `tagwire hz` and `tagwire bw`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Tag name (created if missing).
    tag: String,
    /// Arrivals per sender the figures are computed over.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(2..))]
    window: u32,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    seconds: Option<f64>,
    /// One JSON object per sender and report instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// Which figures a report gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measure {
    /// Messages per second and the spread of the intervals.
    Rate,
    /// Bytes per second and the spread of the sizes.
    Bandwidth,
}

/// One sender's last arrivals.
#[derive(Debug, Default)]
pub(crate) struct Window {
    arrivals: VecDeque<(Instant, usize)>,
}

impl Window {
    /// Adds an arrival, forgetting the oldest past `cap`.
    pub(crate) fn push(&mut self, at: Instant, size: usize, cap: usize) {
        if self.arrivals.len() >= cap {
            self.arrivals.pop_front();
        }
        self.arrivals.push_back((at, size));
    }

    /// The rate and its intervals' spread, `None` below two arrivals or
    /// over no time.
    pub(crate) fn rate(&self) -> Option<RateReport> {
        let span = self.span()?;
        let gaps: Vec<f64> = self
            .arrivals
            .iter()
            .zip(self.arrivals.iter().skip(1))
            .map(|(a, b)| b.0.duration_since(a.0).as_secs_f64())
            .collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean) * (g - mean)).sum::<f64>() / n;
        Some(RateReport {
            rate_hz: n / span,
            min_s: gaps.iter().copied().fold(f64::INFINITY, f64::min),
            max_s: gaps.iter().copied().fold(0.0, f64::max),
            std_s: var.sqrt(),
            window: self.arrivals.len(),
        })
    }

    /// The bandwidth and the sizes' spread, `None` below two arrivals or
    /// over no time.
    pub(crate) fn bandwidth(&self) -> Option<BandwidthReport> {
        let span = self.span()?;
        let sizes = self.arrivals.iter().map(|a| a.1);
        let after_first: usize = self.arrivals.iter().skip(1).map(|a| a.1).sum();
        let total: usize = sizes.clone().sum();
        Some(BandwidthReport {
            bytes_per_s: after_first as f64 / span,
            mean_size: total as f64 / self.arrivals.len() as f64,
            min_size: sizes.clone().min()?,
            max_size: sizes.max()?,
            window: self.arrivals.len(),
        })
    }

    fn span(&self) -> Option<f64> {
        let (first, last) = (self.arrivals.front()?, self.arrivals.back()?);
        let span = last.0.duration_since(first.0).as_secs_f64();
        (self.arrivals.len() >= 2 && span > 0.0).then_some(span)
    }
}

/// `tagwire hz`'s figures for one sender.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RateReport {
    /// Messages per second over the window.
    pub(crate) rate_hz: f64,
    /// Shortest interval, seconds.
    pub(crate) min_s: f64,
    /// Longest interval, seconds.
    pub(crate) max_s: f64,
    /// The intervals' standard deviation, seconds.
    pub(crate) std_s: f64,
    /// Arrivals in the window.
    pub(crate) window: usize,
}

/// `tagwire bw`'s figures for one sender.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BandwidthReport {
    /// Payload bytes per second over the window.
    pub(crate) bytes_per_s: f64,
    /// Mean payload size, bytes.
    pub(crate) mean_size: f64,
    /// Smallest payload, bytes.
    pub(crate) min_size: usize,
    /// Largest payload, bytes.
    pub(crate) max_size: usize,
    /// Arrivals in the window.
    pub(crate) window: usize,
}

/// Runs `tagwire hz` (`Measure::Rate`) or `tagwire bw`.
pub(crate) fn run(a: Args, measure: Measure) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    client.create_tag(&a.tag, Domain::Global)?;
    let mut sub = client.subscribe(&a.tag, SubscribeOptions::default())?;
    let cap = a.window as usize;
    let start = Instant::now();
    let until = a
        .seconds
        .map(|s| start + Duration::from_secs_f64(s.max(0.0)));
    let mut windows: BTreeMap<String, Window> = BTreeMap::new();
    let mut next_report = start + Duration::from_secs(1);
    // Senders heard since the last report: only their figures are new.
    let mut fresh: BTreeSet<String> = BTreeSet::new();
    loop {
        let now = Instant::now();
        let end = until.is_some_and(|u| now >= u);
        if now >= next_report || end {
            report(&a, measure, &windows, &fresh, sub.lost())?;
            fresh.clear();
            next_report += Duration::from_secs(1);
        }
        if end {
            return Ok(());
        }
        let wait = until.map_or(next_report, |u| u.min(next_report));
        match sub.receive(Some(wait.saturating_duration_since(Instant::now()))) {
            Ok(m) => {
                let at = Instant::now();
                let sender = m.sender.to_string();
                windows
                    .entry(sender.clone())
                    .or_default()
                    .push(at, m.payload.len(), cap);
                fresh.insert(sender);
            }
            Err(Error::Timeout) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Prints one report: a line (or JSON object) per sender heard since the
/// last one (`fresh`; a sender gone quiet has no new figures, as `ros2
/// topic hz` prints none), or that nothing came; `lost` counts what this
/// subscription lost so far (all senders).
fn report(
    a: &Args,
    measure: Measure,
    windows: &BTreeMap<String, Window>,
    fresh: &BTreeSet<String>,
    lost: u64,
) -> anyhow::Result<()> {
    if fresh.is_empty() {
        if a.json {
            println!(
                "{}",
                serde_json::json!({"tag": a.tag, "no_new_messages": true, "lost": lost})
            );
        } else {
            println!("{}: no new messages", a.tag);
        }
    }
    for (sender, w) in windows.iter().filter(|(s, _)| fresh.contains(*s)) {
        let line = match measure {
            Measure::Rate => w.rate().map(|r| {
                let text = format!(
                    "{} from {sender}: {:.2} Hz  interval min {:.6} s  max {:.6} s  std {:.6} s  window {}",
                    a.tag, r.rate_hz, r.min_s, r.max_s, r.std_s, r.window
                );
                let json = serde_json::json!({
                    "tag": a.tag, "sender": sender, "rate_hz": r.rate_hz, "min_s": r.min_s,
                    "max_s": r.max_s, "std_s": r.std_s, "window": r.window, "lost": lost,
                });
                (text, json)
            }),
            Measure::Bandwidth => w.bandwidth().map(|b| {
                let text = format!(
                    "{} from {sender}: {}/s  size mean {:.0} B  min {} B  max {} B  window {}",
                    a.tag,
                    bytes(b.bytes_per_s),
                    b.mean_size,
                    b.min_size,
                    b.max_size,
                    b.window
                );
                let json = serde_json::json!({
                    "tag": a.tag, "sender": sender, "bytes_per_s": b.bytes_per_s,
                    "mean_size": b.mean_size, "min_size": b.min_size, "max_size": b.max_size,
                    "window": b.window, "lost": lost,
                });
                (text, json)
            }),
        };
        match line {
            Some((_, json)) if a.json => println!("{json}"),
            Some((text, _)) => println!("{text}"),
            None => {}
        }
    }
    if lost > 0 && !a.json {
        println!(
            "{}: {lost} messages lost by this subscription so far",
            a.tag
        );
    }
    Ok(())
}

/// `1.23 MB` style (decimal units, as `ros2 topic bw`).
fn bytes(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2} GB", v / 1e9),
        v if v >= 1e6 => format!("{:.2} MB", v / 1e6),
        v if v >= 1e3 => format!("{:.2} KB", v / 1e3),
        v => format!("{v:.0} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_gives_the_rate_and_the_bandwidth_of_what_it_holds() {
        let t0 = Instant::now();
        let mut w = Window::default();
        assert!(w.rate().is_none() && w.bandwidth().is_none());
        w.push(t0, 100, 3);
        assert!(w.rate().is_none(), "one arrival has no interval");
        w.push(t0 + Duration::from_millis(10), 300, 3);
        w.push(t0 + Duration::from_millis(30), 200, 3);
        let r = w.rate().unwrap();
        assert!((r.rate_hz - 2.0 / 0.030).abs() < 1e-6, "{r:?}");
        assert!((r.min_s - 0.010).abs() < 1e-9 && (r.max_s - 0.020).abs() < 1e-9);
        assert!((r.std_s - 0.005).abs() < 1e-9, "{r:?}");
        let b = w.bandwidth().unwrap();
        assert!((b.bytes_per_s - 500.0 / 0.030).abs() < 1e-6, "{b:?}");
        assert_eq!((b.min_size, b.max_size, b.window), (100, 300, 3));
        assert!((b.mean_size - 200.0).abs() < 1e-9);
        // The window forgets the oldest: 10 ms and 20 ms gaps become one.
        w.push(t0 + Duration::from_millis(40), 200, 3);
        let r = w.rate().unwrap();
        assert_eq!(r.window, 3);
        assert!((r.rate_hz - 2.0 / 0.030).abs() < 1e-6, "{r:?}");
        assert_eq!(w.bandwidth().unwrap().min_size, 200);
    }

    #[test]
    fn arrivals_at_one_instant_give_no_figures() {
        let t0 = Instant::now();
        let mut w = Window::default();
        w.push(t0, 1, 10);
        w.push(t0, 1, 10);
        assert!(w.rate().is_none() && w.bandwidth().is_none());
    }

    #[test]
    fn sizes_print_in_decimal_units() {
        assert_eq!(bytes(999.0), "999 B");
        assert_eq!(bytes(1500.0), "1.50 KB");
        assert_eq!(bytes(2_345_000.0), "2.35 MB");
    }
}
