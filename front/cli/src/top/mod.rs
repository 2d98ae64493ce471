//! `tagwire top`: a live view of this node's tags, refreshed every
//! interval: senders and receivers, messages per second through the node
//! and from the network, losses per second (best-effort gaps, subscribers'
//! overflows and messages missing on the way), what is held back, and each
//! stream to another node (sent, resent, unacknowledged).
//!
//! On a terminal it is interactive (`ui`: sort, filter, the node's
//! peers; `q` quits); with `--count`, `--json` or its output not a
//! terminal it prints frames as text or JSON lines.
//!
//! Every figure is the difference of two readings of `tagwire stats` (the
//! daemon's counters and its subscribers'), so `top` itself subscribes to
//! nothing and costs the node one stats request per interval.

use std::collections::BTreeMap;
use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

use tagwire::{StatsKind, StatsRow};

use crate::ConnectArgs;

mod ui;

/// Arguments of `tagwire top`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Print this many frames as text, one after another, and exit
    /// (default: the interactive view on a terminal, frames as text until
    /// interrupted elsewhere).
    #[arg(long)]
    count: Option<u64>,
    /// One JSON object per frame instead of a table.
    #[arg(long)]
    json: bool,
    /// Rows per frame at most, busiest first.
    #[arg(long, default_value_t = 40)]
    rows: usize,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// One tag's counters at one reading: the daemon's tag row and the sums
/// of its subscribers' rows.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct TagReading {
    senders: u64,
    receivers: u64,
    records: u64,
    from_network: u64,
    best_effort_lost: u64,
    overflowed: u64,
    missing: u64,
    held_now: u64,
}

/// One stream to another node at one reading.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct StreamReading {
    sent: u64,
    resent: u64,
    unacked: u64,
}

/// Everything `top` reads from one stats answer.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Reading {
    tags: BTreeMap<String, TagReading>,
    streams: BTreeMap<(String, String), StreamReading>,
}

impl Reading {
    /// Folds a stats answer's rows.
    pub(crate) fn of(rows: &[StatsRow]) -> Reading {
        let mut r = Reading::default();
        for row in rows {
            let c = |k: &str| row.get(k).unwrap_or(0);
            match row.kind {
                StatsKind::Tag => {
                    let t = r.tags.entry(row.tag.clone()).or_default();
                    t.senders = c("senders");
                    t.receivers = c("receivers");
                    t.records = c("records");
                    t.from_network = c("from_network");
                    t.best_effort_lost = c("best_effort_lost");
                    t.held_now = c("held_now");
                }
                StatsKind::Subscriber => {
                    let t = r.tags.entry(row.tag.clone()).or_default();
                    t.overflowed += c("overflowed");
                    t.missing += c("missing");
                }
                StatsKind::Outbound => {
                    let s = r
                        .streams
                        .entry((row.tag.clone(), row.who.clone()))
                        .or_default();
                    s.sent = c("sent");
                    s.resent = c("resent");
                    s.unacked = c("unacked");
                }
                _ => {}
            }
        }
        r
    }
}

/// A tag's line of a frame: per-second rates over the interval.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct TagLine {
    tag: String,
    senders: u64,
    receivers: u64,
    msgs_per_s: f64,
    from_network_per_s: f64,
    lost_per_s: f64,
    lost_total: u64,
    held_now: u64,
}

/// A stream's line of a frame.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct StreamLine {
    tag: String,
    to: String,
    datagrams_per_s: f64,
    resent_per_s: f64,
    unacked: u64,
}

/// Rate of a counter that went from `a` to `b` over `secs` (a counter that
/// went back, a subscriber gone, counts as none).
fn per_s(a: u64, b: u64, secs: f64) -> f64 {
    b.saturating_sub(a) as f64 / secs
}

/// The frame between two readings `secs` apart, busiest tags first.
pub(crate) fn frame(before: &Reading, now: &Reading, secs: f64) -> (Vec<TagLine>, Vec<StreamLine>) {
    let secs = secs.max(1e-9);
    let mut tags: Vec<TagLine> = now
        .tags
        .iter()
        .map(|(name, n)| {
            let b = before.tags.get(name).copied().unwrap_or(*n);
            let lost = |t: &TagReading| t.best_effort_lost + t.overflowed + t.missing;
            TagLine {
                tag: name.clone(),
                senders: n.senders,
                receivers: n.receivers,
                msgs_per_s: per_s(b.records, n.records, secs),
                from_network_per_s: per_s(b.from_network, n.from_network, secs),
                lost_per_s: per_s(lost(&b), lost(n), secs),
                lost_total: lost(n),
                held_now: n.held_now,
            }
        })
        .collect();
    tags.sort_by(|a, b| {
        (b.msgs_per_s + b.from_network_per_s)
            .total_cmp(&(a.msgs_per_s + a.from_network_per_s))
            .then_with(|| a.tag.cmp(&b.tag))
    });
    let streams = now
        .streams
        .iter()
        .map(|((tag, to), n)| {
            let b = before
                .streams
                .get(&(tag.clone(), to.clone()))
                .copied()
                .unwrap_or(*n);
            StreamLine {
                tag: tag.clone(),
                to: to.clone(),
                datagrams_per_s: per_s(b.sent, n.sent, secs),
                resent_per_s: per_s(b.resent, n.resent, secs),
                unacked: n.unacked,
            }
        })
        .collect();
    (tags, streams)
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    if !(a.interval > 0.0 && a.interval.is_finite()) {
        anyhow::bail!("--interval must be above 0 seconds, got {}", a.interval);
    }
    let client = a.connect.connect()?;
    let me = client.me();
    if a.count.is_none() && !a.json && std::io::stdout().is_terminal() {
        return ui::run(&client, Duration::from_secs_f64(a.interval));
    }
    let mut before = Reading::of(&client.stats()?);
    let mut at = Instant::now();
    let mut frames = 0u64;
    while a.count.is_none_or(|c| frames < c) {
        std::thread::sleep(Duration::from_secs_f64(a.interval));
        let now = Reading::of(&client.stats()?);
        let secs = at.elapsed().as_secs_f64();
        at = Instant::now();
        let (tags, streams) = frame(&before, &now, secs);
        before = now;
        frames += 1;
        let mut out = std::io::stdout().lock();
        if a.json {
            let v = serde_json::json!({
                "node": me.node.to_string(),
                "seconds": secs,
                "tags": &tags[..tags.len().min(a.rows)],
                "streams": &streams[..streams.len().min(a.rows)],
            });
            writeln!(out, "{v}")?;
            continue;
        }
        write!(
            out,
            "{}",
            table(&me.node.to_string(), secs, &tags, &streams, a.rows)
        )?;
        out.flush()?;
    }
    Ok(())
}

/// A frame as text.
fn table(node: &str, secs: f64, tags: &[TagLine], streams: &[StreamLine], rows: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tagwire top  node {node}  {} tags  over {secs:.1} s",
        tags.len()
    );
    let _ = writeln!(
        s,
        "{:<32} {:>4} {:>4} {:>10} {:>10} {:>8} {:>8} {:>6}",
        "TAG", "SEND", "RECV", "MSG/S", "NET/S", "LOST/S", "LOST", "HELD"
    );
    for t in tags.iter().take(rows) {
        let _ = writeln!(
            s,
            "{:<32} {:>4} {:>4} {:>10.1} {:>10.1} {:>8.1} {:>8} {:>6}",
            t.tag,
            t.senders,
            t.receivers,
            t.msgs_per_s,
            t.from_network_per_s,
            t.lost_per_s,
            t.lost_total,
            t.held_now
        );
    }
    if !streams.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<32} {:<22} {:>10} {:>10} {:>8}",
            "STREAM", "TO", "DGRAM/S", "RESENT/S", "UNACKED"
        );
        for st in streams.iter().take(rows) {
            let _ = writeln!(
                s,
                "{:<32} {:<22} {:>10.1} {:>10.1} {:>8}",
                st.tag, st.to, st.datagrams_per_s, st.resent_per_s, st.unacked
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag_row(tag: &str, records: u64, lost: u64) -> StatsRow {
        StatsRow::new(StatsKind::Tag, tag, "")
            .with("records", records)
            .with("senders", 1)
            .with("receivers", 2)
            .with("best_effort_lost", lost)
    }

    fn sub_row(tag: &str, overflowed: u64) -> StatsRow {
        StatsRow::new(StatsKind::Subscriber, tag, "pid 9 x (reliable)")
            .with("overflowed", overflowed)
            .with("missing", 1)
    }

    #[test]
    fn rates_are_the_counters_differences_over_the_interval_busiest_first() {
        let a = Reading::of(&[
            tag_row("/slow", 10, 0),
            tag_row("/fast", 100, 0),
            sub_row("/fast", 0),
        ]);
        let b = Reading::of(&[
            tag_row("/slow", 20, 0),
            tag_row("/fast", 1100, 4),
            sub_row("/fast", 6),
            sub_row("/fast", 0),
        ]);
        let (tags, _) = frame(&a, &b, 2.0);
        assert_eq!(tags[0].tag, "/fast");
        assert_eq!(tags[0].msgs_per_s, 500.0);
        // 4 best-effort gaps, 6 overflowed, a second subscriber's 1
        // missing (the first's was there before) over 2 s.
        assert_eq!(tags[0].lost_per_s, 5.5);
        assert_eq!(tags[0].lost_total, 12);
        assert_eq!(tags[1].tag, "/slow");
        assert_eq!(tags[1].msgs_per_s, 5.0);
        assert_eq!((tags[1].senders, tags[1].receivers), (1, 2));
    }

    #[test]
    fn a_tag_new_in_the_interval_starts_from_its_first_reading_and_gone_counters_are_not_negative()
    {
        let a = Reading::of(&[sub_row("/t", 50)]);
        let b = Reading::of(&[tag_row("/t", 30, 0), tag_row("/new", 1000, 0)]);
        let (tags, _) = frame(&a, &b, 1.0);
        let new = tags.iter().find(|t| t.tag == "/new").expect("listed");
        assert_eq!(new.msgs_per_s, 0.0, "no rate from a single reading");
        let t = tags.iter().find(|t| t.tag == "/t").expect("listed");
        assert_eq!(t.lost_per_s, 0.0, "a subscriber gone is no negative loss");
    }

    #[test]
    fn streams_show_datagrams_and_resends_per_second() {
        let row = |sent, resent| {
            StatsRow::new(StatsKind::Outbound, "/t", "10.0.0.2:7447")
                .with("sent", sent)
                .with("resent", resent)
                .with("unacked", 3)
        };
        let (_, streams) = frame(
            &Reading::of(&[row(100, 1)]),
            &Reading::of(&[row(400, 7)]),
            0.5,
        );
        assert_eq!(streams[0].datagrams_per_s, 600.0);
        assert_eq!(streams[0].resent_per_s, 12.0);
        assert_eq!(streams[0].unacked, 3);
    }
}
