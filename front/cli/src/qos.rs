//! `tagwire qos`: a tag's channels with their packet classes and thread
//! policies, and the admin command that changes subscriptions' at run
//! time, on any node.

use crate::ConnectArgs;

/// Arguments of `tagwire qos`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The tag.
    tag: String,
    /// Give the chosen subscriptions to the tag this packet class (`low`,
    /// `normal`, `high`, `critical` or `dscp:N`) from now on: every sending
    /// node's streams carry it from their next datagram. Without it (and
    /// `--sched`), list the tag's channels.
    #[arg(long, value_parser = str::parse::<tagwire::Priority>)]
    class: Option<tagwire::Priority>,
    /// Give the chosen subscriptions to the tag this thread policy
    /// (`other`, `other:NICE`, `fifo:P`, `rr:P`) from now on: the sending
    /// nodes' forwarders of the tag and the receiving nodes' inbound
    /// threads run at it from their next wake-up.
    #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
    sched: Option<tagwire::Sched>,
    /// Whose subscriptions --class or --sched change: `PID@NODE`, `@NODE`
    /// (every process there), `PID` or `here` (this node), `all` (the
    /// default: every subscription on every node). NODE is an address or
    /// a name from `tagwire nodes`; another node's subscriptions only
    /// root, the tag's owner or a user the policy lets destroy the tag may
    /// change.
    #[arg(long, conflicts_with = "pid")]
    subscriber: Option<String>,
    /// Change the send rights of these publishers instead (spelled as
    /// `--subscriber`; with `--subscriber` too, both): their nodes send
    /// the tag in at least --class and run its forwarder at least at
    /// --sched, as `tagwire pub --class --sched` asks at the start.
    #[arg(long)]
    publisher: Option<String>,
    /// Pace the --publisher's reliable streams so from now on (`adaptive`,
    /// `fixed:RATE`, `off`, `daemon`), as `tagwire pub --pacing` asks at
    /// the start.
    #[arg(long, requires = "publisher", value_parser = str::parse::<tagwire::Pacing>)]
    pacing: Option<tagwire::Pacing>,
    /// Only the subscriptions of this process on this node (the same as
    /// `--subscriber PID`).
    #[arg(long)]
    pid: Option<u32>,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// `--subscriber`'s choice.
fn subscribers(client: &tagwire::Client, a: &Args) -> anyhow::Result<tagwire::Processes> {
    match &a.subscriber {
        Some(spec) => processes(client, "--subscriber", spec),
        None => Ok(match a.pid {
            Some(p) => tagwire::Processes::here().of(p),
            None => tagwire::Processes::everywhere(),
        }),
    }
}

/// A `PID@NODE` choice, with a node name looked up in the node list.
fn processes(
    client: &tagwire::Client,
    flag: &str,
    spec: &str,
) -> anyhow::Result<tagwire::Processes> {
    let spec = match spec.split_once('@') {
        Some((pid, node)) if node.parse::<std::net::IpAddr>().is_err() => {
            let nodes = client.nodes()?;
            let Some(n) = nodes.iter().find(|n| n.name == node) else {
                let known: Vec<String> = nodes
                    .iter()
                    .map(|n| format!("{} ({})", n.name, n.node))
                    .collect();
                anyhow::bail!("no node {node:?}; the nodes are: {}", known.join(", "));
            };
            format!("{pid}@{}", n.node)
        }
        _ => spec.to_owned(),
    };
    spec.parse()
        .map_err(|e: String| anyhow::anyhow!("{flag} {spec}: {e}"))
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    let chooses = a.pid.is_some() || a.subscriber.is_some() || a.publisher.is_some();
    if let (Some(pacing), Some(spec)) = (a.pacing, &a.publisher) {
        let whose = processes(&client, "--publisher", spec)?;
        let changed = client.change_pacing(&a.tag, whose, pacing)?;
        let who: Vec<String> = changed.iter().map(|m| m.who.to_string()).collect();
        println!(
            "{}: pacing {pacing} for {} publisher(s) ({})",
            a.tag,
            changed.len(),
            who.join(", ")
        );
        if a.class.is_none() && a.sched.is_none() {
            return Ok(());
        }
    }
    if chooses && a.class.is_none() && a.sched.is_none() {
        anyhow::bail!(
            "--pid, --subscriber and --publisher choose whose rights --class or --sched changes: \
             give one"
        );
    }
    if a.class.is_some() || a.sched.is_some() {
        let what: Vec<String> = a
            .class
            .map(|c| format!("class {c}"))
            .into_iter()
            .chain(a.sched.map(|s| format!("policy {s}")))
            .collect();
        let what = what.join(" and ");
        let report = |rights: &str, changed: Vec<tagwire::Member>| match changed.len() {
            0 => println!("{}: every {rights} chosen already had {what}", a.tag),
            n => {
                let who: Vec<String> = changed.iter().map(|m| m.who.to_string()).collect();
                let s = if n == 1 { "" } else { "s" };
                println!("{}: {what} for {n} {rights}{s} ({})", a.tag, who.join(", "));
            }
        };
        if let Some(spec) = &a.publisher {
            let whose = processes(&client, "--publisher", spec)?;
            report(
                "publisher",
                client.change_publishers(&a.tag, whose, a.class, a.sched)?,
            );
        }
        if a.publisher.is_none() || a.subscriber.is_some() || a.pid.is_some() {
            let whose = subscribers(&client, &a)?;
            report(
                "subscriber",
                client.change_channels(&a.tag, whose, a.class, a.sched)?,
            );
        }
        return Ok(());
    }
    let ch = client.channels(&a.tag)?;
    if !ch.senders.is_empty() {
        println!("{:<28} {:<12} {:<10} PACING", "PUBLISHER", "CLASS", "SCHED");
        for (m, qos) in &ch.senders {
            println!(
                "{:<28} {:<12} {:<10} {}",
                m.who.to_string(),
                qos.priority.to_string(),
                qos.sched.to_string(),
                qos.pacing
            );
        }
    }
    println!(
        "{:<28} {:<28} {:<12} {:<10} RELIABILITY",
        "SENDER", "RECEIVER", "CLASS", "SCHED"
    );
    let senders: Vec<String> = match ch.senders.is_empty() {
        true => vec!["-".to_owned()],
        false => ch.senders.iter().map(|(m, _)| m.who.to_string()).collect(),
    };
    for (r, qos) in &ch.receivers {
        for s in &senders {
            println!(
                "{:<28} {:<28} {:<12} {:<10} {}",
                s,
                r.who.to_string(),
                qos.priority.to_string(),
                qos.sched.to_string(),
                qos.reliability
            );
        }
    }
    if ch.receivers.is_empty() {
        println!("({}: no receivers)", a.tag);
    }
    print_counters(&a.tag, &client.stats()?);
    Ok(())
}

/// The tag's reliable streams leaving this node, each with the class its
/// datagrams carry now and its counters, then the datagrams each class
/// carried (a stream whose class changed counts in both), from `tagwire
/// stats` rows; nothing when no reliable stream of the tag leaves here.
fn print_counters(tag: &str, rows: &[tagwire::StatsRow]) {
    let streams: Vec<&tagwire::StatsRow> = rows
        .iter()
        .filter(|r| r.kind == tagwire::StatsKind::Outbound && r.tag == tag)
        .collect();
    if streams.is_empty() {
        return;
    }
    let class = |code: u64| {
        u8::try_from(code)
            .ok()
            .and_then(|c| tagwire::Priority::from_u8(c).ok())
            .map_or_else(|| format!("code {code}"), |c| c.to_string())
    };
    let n = |r: &tagwire::StatsRow, k: &str| r.get(k).unwrap_or(0);
    println!(
        "\n{:<28} {:<12} {:>10} {:>8} {:>10} {:>8}",
        "STREAM FROM HERE TO", "CLASS", "SENT", "RESENT", "ACKED", "UNACKED"
    );
    let mut per_class: Vec<(u64, u64)> = Vec::new();
    for r in &streams {
        println!(
            "{:<28} {:<12} {:>10} {:>8} {:>10} {:>8}",
            r.who,
            r.get("class").map_or_else(|| "?".to_owned(), class),
            n(r, "sent"),
            n(r, "resent"),
            n(r, "acked"),
            n(r, "unacked")
        );
        let tallies = r.counters.iter().filter_map(|(k, v)| {
            let code = k.strip_prefix("class_")?.strip_suffix("_datagrams")?;
            Some((code.parse::<u64>().ok()?, *v))
        });
        for (code, v) in tallies {
            match per_class.iter_mut().find(|(c, _)| *c == code) {
                Some((_, sum)) => *sum += v,
                None => per_class.push((code, v)),
            }
        }
    }
    println!(
        "{:<12} DATAGRAMS (sent and resent while the stream had it)",
        "CLASS"
    );
    for (code, v) in per_class {
        println!("{:<12} {v}", class(code));
    }
}
