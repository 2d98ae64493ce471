//! `tagwire sub TAG`: print what arrives, with sender and latency.

use std::time::{Duration, Instant, SystemTime};

use tagwire::{Domain, Error, Proxy, SubscribeOptions};

use crate::ConnectArgs;

/// Arguments of `tagwire sub`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Tag name (created if missing).
    tag: String,
    /// Exit after this many messages.
    #[arg(long)]
    count: Option<u64>,
    /// Exit if nothing arrives for this many seconds.
    #[arg(long)]
    idle_timeout: Option<f64>,
    /// Queue depth (default: 64, or the tag's ring slots when it has fewer;
    /// a depth given must fit them).
    #[arg(long)]
    depth: Option<u32>,
    /// Busy-poll for this many microseconds before blocking.
    #[arg(long)]
    spin_us: Option<u64>,
    /// Instead of a line per message, a latency summary per second.
    #[arg(long, conflicts_with = "format")]
    stats: bool,
    /// How each message prints: `preview` (a line with sequence, sender,
    /// latency and the first 40 bytes), `text` (the same with the whole
    /// payload as text), `hex` (the whole payload in hex), `raw` (the
    /// payload's bytes alone, back to back, binary-safe; the rest goes to
    /// stderr) or `json` (one object per message). A keyed message's key
    /// shows in every format but `raw`.
    #[arg(long, value_enum, default_value_t = Format::Preview)]
    format: Format,
    /// A label printed in front of every line.
    #[arg(long, default_value = "")]
    label: String,
    /// Temporal scaling: only every N-th sample (by the publisher's sequence
    /// number).
    #[arg(long, default_value_t = 1, value_name = "N")]
    every: u32,
    /// Where the every-N-th filter runs: `subscriber` (this process),
    /// `publisher` (the publishing node sends only those samples), the
    /// address of an intermediate node whose daemon forwards them, or
    /// `auto[:BOUND]` (the daemons place it over their `--topology`: the
    /// cheapest place meeting the end-to-end delay bound, e.g. `auto:15ms`).
    #[arg(long, default_value = "subscriber", value_parser = str::parse::<Proxy>)]
    proxy: Proxy,
    /// Lose nothing: hold the publishers back instead of dropping the
    /// oldest message (DDS reliable KEEP_ALL; `SubscribeOptions::lossless`).
    #[arg(long)]
    lossless: bool,
    /// Messages from other nodes always through this node's daemon, never
    /// straight to this process's own socket (direct delivery, used while
    /// it is the node's only subscriber of the tag;
    /// `SubscribeOptions::through_daemon`).
    #[arg(long)]
    through_daemon: bool,
    /// The packet class of the datagrams that bring this subscription's
    /// messages from other nodes: `low` (AF11, last), `normal`, `high`
    /// (AF42, first in the sending host's queue), `critical` (VOICE-ADMIT,
    /// first) or `dscp:N`.
    #[arg(long, default_value = "normal", value_parser = str::parse::<tagwire::Priority>)]
    class: tagwire::Priority,
    /// The scheduling of the threads that bring this subscription its
    /// messages, and of this command's receiving thread: `other`,
    /// `other:NICE`, `fifo:P` or `rr:P` (P in 1..=99; a real-time policy
    /// needs CAP_SYS_NICE or `ulimit -r`).
    #[arg(long, default_value = "other", value_parser = str::parse::<tagwire::Sched>)]
    sched: tagwire::Sched,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    client.create_tag(&a.tag, Domain::Global)?;
    let mut opts = SubscribeOptions::default()
        .every(a.every)
        .proxy(a.proxy)
        .priority(a.class)
        .sched(a.sched);
    opts.depth = a.depth;
    if let Some(us) = a.spin_us {
        opts = opts.busy_poll(Duration::from_micros(us));
    }
    if a.lossless {
        opts = opts.lossless();
    }
    if a.through_daemon {
        opts = opts.through_daemon();
    }
    let mut sub = client.subscribe(&a.tag, opts)?;
    if !a.sched.is_default() {
        tagwire::set_thread_sched(a.sched)?;
    }
    let idle = a.idle_timeout.map(Duration::from_secs_f64);
    let mut n = 0u64;
    let mut window: Vec<f64> = Vec::new();
    let mut window_start = Instant::now();
    let label = if a.label.is_empty() {
        String::new()
    } else {
        format!("[{}] ", a.label)
    };
    while a.count.is_none_or(|c| n < c) {
        let m = match sub.receive(idle) {
            Ok(m) => m,
            Err(Error::Overflowed { lost }) => {
                let depth = a
                    .depth
                    .map_or_else(|| "default".to_owned(), |d| d.to_string());
                let line = format!("{label}LOST {lost} messages (queue depth {depth} exceeded)");
                match a.format {
                    Format::Raw | Format::Json => eprintln!("{line}"),
                    _ => println!("{line}"),
                }
                continue;
            }
            Err(Error::Timeout) => break,
            Err(e) => return Err(e.into()),
        };
        n += 1;
        let lat_us = SystemTime::now()
            .duration_since(m.timestamp)
            .map(|d| d.as_secs_f64() * 1e6)
            .unwrap_or(0.0);
        if a.stats {
            window.push(lat_us);
            if window_start.elapsed() >= Duration::from_secs(1) {
                print_stats(&label, &mut window, sub.lost());
                window_start = Instant::now();
            }
            continue;
        }
        print_message(a.format, &label, &m, lat_us)?;
    }
    if a.stats && !window.is_empty() {
        print_stats(&label, &mut window, sub.lost());
    }
    // stdout is line-buffered: one write per line, so concurrent subscribers'
    // summaries do not interleave.
    let summary = format!("{label}received {n} messages, lost {}", sub.lost());
    match a.format {
        Format::Raw | Format::Json => eprintln!("{summary}"),
        _ => println!("{summary}"),
    }
    Ok(())
}

/// How `tagwire sub` prints a message (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A line: sequence, sender, latency, size, the first 40 bytes.
    Preview,
    /// The line with the whole payload as text (invalid UTF-8 replaced).
    Text,
    /// The line with the whole payload in hex.
    Hex,
    /// The payload's bytes alone, back to back.
    Raw,
    /// One JSON object per message.
    Json,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Prints `m` as `format` says (`lat_us`: its latency from the
/// publisher's timestamp).
fn print_message(
    format: Format,
    label: &str,
    m: &tagwire::Message,
    lat_us: f64,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let key = m.key.map(|k| hex(&k.0));
    let head = format!(
        "{label}seq={} from={} latency={:.1}us size={}{}",
        m.seq,
        m.sender,
        lat_us,
        m.payload.len(),
        key.as_ref()
            .map_or_else(String::new, |k| format!(" key={k}"))
    );
    match format {
        Format::Preview => {
            let preview: String = String::from_utf8_lossy(&m.payload[..m.payload.len().min(40)])
                .chars()
                .map(|c| if c.is_control() { '.' } else { c })
                .collect();
            println!("{head} payload={preview:?}");
        }
        Format::Text => println!("{head} payload={:?}", String::from_utf8_lossy(&m.payload)),
        Format::Hex => println!("{head} payload={}", hex(&m.payload)),
        Format::Raw => {
            let mut out = std::io::stdout().lock();
            out.write_all(&m.payload)?;
            out.flush()?;
        }
        Format::Json => {
            let timestamp_ns = m
                .timestamp
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let v = serde_json::json!({
                "seq": m.seq.0,
                "sender": m.sender.to_string(),
                "stream": m.stream,
                "timestamp_ns": timestamp_ns,
                "latency_us": lat_us,
                "size": m.payload.len(),
                "key": key,
                "payload_hex": hex(&m.payload),
                "text": std::str::from_utf8(&m.payload).ok(),
            });
            // (No label: each line stays one JSON object.)
            println!("{v}");
        }
    }
    Ok(())
}

fn print_stats(label: &str, w: &mut Vec<f64>, lost: u64) {
    w.sort_by(f64::total_cmp);
    let pct = |p: f64| w[((w.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{label}{} msgs  latency p50={:.1}us p99={:.1}us max={:.1}us  lost={lost}",
        w.len(),
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    w.clear();
}
