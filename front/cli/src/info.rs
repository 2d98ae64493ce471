//! `tagwire info TAG`: one tag as this node's daemon knows it: its domain,
//! every sender and receiver (pid@node) with the QoS each asked, and what
//! passes through this node (records, their rate over a short sample,
//! messages from other nodes, best-effort losses).

use std::time::{Duration, Instant};

use serde_json::json;
use tagwire::{StatsKind, StatsRow};

use crate::ConnectArgs;

/// Arguments of `tagwire info`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The tag.
    tag: String,
    /// Seconds over which the rate of records through this node is
    /// sampled (0: no rate).
    #[arg(long, default_value_t = 1.0)]
    sample: f64,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// The tag's stats row on this node, if it has one.
fn tag_row(client: &tagwire::Client, tag: &str) -> anyhow::Result<Option<StatsRow>> {
    Ok(client
        .stats()?
        .into_iter()
        .find(|r| r.kind == StatsKind::Tag && r.tag == tag))
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    let Some(summary) = client
        .tags()?
        .into_iter()
        .find(|t| t.name.as_str() == a.tag)
    else {
        anyhow::bail!("no tag {} (`tagwire tags` lists them)", a.tag);
    };
    let ch = client.channels(&a.tag)?;
    let first = tag_row(&client, &a.tag)?;
    let t0 = Instant::now();
    let rate = match a.sample > 0.0 {
        true => {
            std::thread::sleep(Duration::from_secs_f64(a.sample));
            let then = tag_row(&client, &a.tag)?;
            let n = |r: &Option<StatsRow>| r.as_ref().and_then(|r| r.get("records")).unwrap_or(0);
            Some(n(&then).saturating_sub(n(&first)) as f64 / t0.elapsed().as_secs_f64())
        }
        false => None,
    };
    let count = |k: &str| first.as_ref().and_then(|r| r.get(k)).unwrap_or(0);
    if a.json {
        let senders: Vec<_> = ch
            .senders
            .iter()
            .map(|(m, q)| {
                json!({"who": m.who.to_string(), "class": q.priority.to_string(),
                       "sched": q.sched.to_string(), "pacing": q.pacing.to_string()})
            })
            .collect();
        let receivers: Vec<_> = ch
            .receivers
            .iter()
            .map(|(m, q)| {
                json!({"who": m.who.to_string(), "reliability": q.reliability.to_string(),
                       "carrier": q.carrier.to_string(), "every": q.every, "proxy": q.proxy.to_string(),
                       "class": q.priority.to_string(), "sched": q.sched.to_string()})
            })
            .collect();
        let v = json!({
            "tag": a.tag,
            "domain": summary.domain.to_string(),
            "senders": senders,
            "receivers": receivers,
            "records": count("records"),
            "rate_per_s": rate,
            "from_network": count("from_network"),
            "best_effort_lost": count("best_effort_lost"),
        });
        println!("{v}");
        return Ok(());
    }
    println!("{}  domain {}", a.tag, summary.domain);
    let rate = rate.map_or_else(String::new, |r| {
        format!(", {r:.1}/s over {:.1} s", a.sample)
    });
    println!(
        "through this node: {} records{rate}; {} from other nodes; {} best-effort lost",
        count("records"),
        count("from_network"),
        count("best_effort_lost")
    );
    println!("senders ({}):", ch.senders.len());
    for (m, q) in &ch.senders {
        println!(
            "  {:<28} class {}  sched {}  pacing {}",
            m.who.to_string(),
            q.priority,
            q.sched,
            q.pacing
        );
    }
    println!("receivers ({}):", ch.receivers.len());
    for (m, q) in &ch.receivers {
        println!(
            "  {:<28} {} over {}  every {}  proxy {}  class {}  sched {}",
            m.who.to_string(),
            q.reliability,
            q.carrier,
            q.every,
            q.proxy,
            q.priority,
            q.sched
        );
    }
    Ok(())
}
