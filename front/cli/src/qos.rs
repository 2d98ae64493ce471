//! `tagwire qos`: a tag's channels with their packet classes and thread
//! policies, and the admin command that changes a subscription's at run
//! time.

use crate::ConnectArgs;

/// Arguments of `tagwire qos`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The tag.
    tag: String,
    /// Give this node's subscriptions to the tag this packet class (`low`,
    /// `normal`, `high`, `critical` or `dscp:N`) from now on: every sending
    /// node's streams carry it from their next datagram. Without it, list
    /// the tag's channels.
    #[arg(long, value_parser = str::parse::<tagwire::Priority>)]
    class: Option<tagwire::Priority>,
    /// Give this node's subscriptions to the tag this thread policy
    /// (`other`, `other:NICE`, `fifo:P`, `rr:P`) from now on: the sending
    /// nodes' forwarders of the tag and this node's inbound threads run at
    /// it from their next wake-up.
    #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
    sched: Option<tagwire::Sched>,
    /// Only the subscriptions of this process (default: every process on
    /// this node).
    #[arg(long)]
    pid: Option<u32>,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    if a.pid.is_some() && a.class.is_none() && a.sched.is_none() {
        anyhow::bail!("--pid chooses whose subscriptions --class or --sched changes: give one");
    }
    let report = |what: String, changed: Vec<tagwire::Member>| match changed.len() {
        0 => println!("{}: every subscription chosen already had {what}", a.tag),
        n => {
            let who: Vec<String> = changed.iter().map(|m| m.who.to_string()).collect();
            println!("{}: {what} for {n} ({})", a.tag, who.join(", "));
        }
    };
    if let Some(class) = a.class {
        report(
            format!("class {class}"),
            client.set_channel_qos(&a.tag, a.pid, class)?,
        );
    }
    if let Some(sched) = a.sched {
        report(
            format!("policy {sched}"),
            client.set_channel_sched(&a.tag, a.pid, sched)?,
        );
    }
    if a.class.is_some() || a.sched.is_some() {
        return Ok(());
    }
    let ch = client.channels(&a.tag)?;
    println!(
        "{:<28} {:<28} {:<12} {:<10} RELIABILITY",
        "SENDER", "RECEIVER", "CLASS", "SCHED"
    );
    let senders: Vec<String> = match ch.senders.is_empty() {
        true => vec!["-".to_owned()],
        false => ch.senders.iter().map(|m| m.who.to_string()).collect(),
    };
    for (r, qos) in &ch.receivers {
        for s in &senders {
            println!(
                "{:<28} {:<28} {:<12} {:<10} {}",
                s,
                r.who.to_string(),
                qos.priority.to_string(),
                qos.sched.to_string(),
                match qos.reliability {
                    tagwire::Reliability::Reliable => "reliable",
                    tagwire::Reliability::BestEffort => "best-effort",
                }
            );
        }
    }
    if ch.receivers.is_empty() {
        println!("({}: no receivers)", a.tag);
    }
    Ok(())
}
