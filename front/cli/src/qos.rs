//! `tagwire qos`: a tag's channels and their packet classes, and the admin
//! command that changes a subscription's class at run time.

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
    /// Only the subscriptions of this process (default: every process on
    /// this node).
    #[arg(long, requires = "class")]
    pid: Option<u32>,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    if let Some(class) = a.class {
        let changed = client.set_channel_qos(&a.tag, a.pid, class)?;
        match changed.len() {
            0 => println!(
                "{}: every subscription chosen already had class {class}",
                a.tag
            ),
            n => {
                let who: Vec<String> = changed.iter().map(|m| m.who.to_string()).collect();
                println!("{}: class {class} for {n} ({})", a.tag, who.join(", "));
            }
        }
        return Ok(());
    }
    let ch = client.channels(&a.tag)?;
    println!(
        "{:<28} {:<28} {:<12} RELIABILITY",
        "SENDER", "RECEIVER", "CLASS"
    );
    let senders: Vec<String> = match ch.senders.is_empty() {
        true => vec!["-".to_owned()],
        false => ch.senders.iter().map(|m| m.who.to_string()).collect(),
    };
    for (r, qos) in &ch.receivers {
        for s in &senders {
            println!(
                "{:<28} {:<28} {:<12} {}",
                s,
                r.who.to_string(),
                qos.priority.to_string(),
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
