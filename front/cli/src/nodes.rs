//! `tagwire nodes`: the nodes this node's daemon knows.

use crate::ConnectArgs;

/// Arguments of `tagwire nodes`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    println!(
        "{:<20} {:<16} {:<11} {:<12} SOURCE",
        "NODE", "NAME", "STATE", "LAST HEARD"
    );
    for n in client.nodes()? {
        let state = match n.state {
            tagwire::NodeState::Up => "up",
            tagwire::NodeState::Connecting => "connecting",
            tagwire::NodeState::Dead => "dead",
        };
        let heard = match n.last_heard_ms {
            u64::MAX => "never".to_owned(),
            ms => format!("{ms} ms ago"),
        };
        println!(
            "{:<20} {:<16} {:<11} {:<12} {}",
            n.node.to_string(),
            n.name,
            state,
            heard,
            n.source
        );
    }
    Ok(())
}
