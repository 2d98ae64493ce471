//! `tagwire history` (the admin command that sizes a tag's pull buffer on
//! this node) and `tagwire pull` (read from it).

use std::time::{Duration, UNIX_EPOCH};

use tagwire::HistoryQuery;

use crate::ConnectArgs;

/// Arguments of `tagwire history`.
#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    /// The tag.
    tag: String,
    /// Messages to keep (0 stops keeping them).
    #[arg(long)]
    depth: u32,
    /// Payload bytes to keep at most (default: the daemon's, 16 MiB).
    #[arg(long, default_value_t = 0)]
    max_bytes: u64,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// Arguments of `tagwire pull`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["last", "since", "from_ms"])))]
pub(crate) struct PullArgs {
    /// The tag.
    tag: String,
    /// The last N messages.
    #[arg(long)]
    last: Option<u32>,
    /// Messages with a sequence number at least this.
    #[arg(long)]
    since: Option<u64>,
    /// Messages sent at or after this time (ms since the Unix epoch) ...
    #[arg(long)]
    from_ms: Option<u64>,
    /// ... and at or before this one (default: now).
    #[arg(long, requires = "from_ms")]
    to_ms: Option<u64>,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn set(a: HistoryArgs) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    client.set_history(&a.tag, a.depth, a.max_bytes)?;
    match a.depth {
        0 => println!("{}: history off", a.tag),
        n => println!("{}: keeping the last {n} messages", a.tag),
    }
    Ok(())
}

pub(crate) fn pull(a: PullArgs) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    let ms = |m: u64| m.saturating_mul(1_000_000);
    let query = match (a.last, a.since, a.from_ms) {
        (Some(n), _, _) => HistoryQuery::Last(n),
        (_, Some(s), _) => HistoryQuery::Since(s),
        (_, _, Some(from)) => HistoryQuery::Between {
            from_ns: ms(from),
            to_ns: a.to_ms.map_or(u64::MAX, ms),
        },
        (None, None, None) => anyhow::bail!("say which messages: --last, --since or --from-ms"),
    };
    let messages = client.pull(&a.tag, query)?;
    println!(
        "{:>8}  {:<26} {:>15}  PAYLOAD",
        "SEQ", "SENDER", "SENT (ms)"
    );
    for m in &messages {
        let sent = m
            .timestamp
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        let preview: String = String::from_utf8_lossy(&m.payload[..m.payload.len().min(32)])
            .chars()
            .map(|c| if c.is_control() { '.' } else { c })
            .collect();
        println!(
            "{:>8}  {:<26} {:>15}  {preview} ({} B)",
            m.seq.0,
            m.sender.to_string(),
            sent,
            m.payload.len()
        );
    }
    println!("{} messages", messages.len());
    Ok(())
}
