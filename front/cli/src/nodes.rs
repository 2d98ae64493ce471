//! `tagwire nodes`: the nodes this node's daemon knows.

use crate::ConnectArgs;

/// Arguments of `tagwire nodes`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// One JSON object per node instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    let nodes = client.nodes()?;
    if a.json {
        for n in nodes {
            let v = serde_json::json!({
                "node": n.node.to_string(),
                "name": n.name,
                "state": state(n.state),
                "last_heard_ms": (n.last_heard_ms != u64::MAX).then_some(n.last_heard_ms),
                "source": n.source.to_string(),
            });
            println!("{v}");
        }
        return Ok(());
    }
    println!(
        "{:<20} {:<16} {:<11} {:<12} SOURCE",
        "NODE", "NAME", "STATE", "LAST HEARD"
    );
    for n in nodes {
        let state = state(n.state);
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

fn state(s: tagwire::NodeState) -> &'static str {
    match s {
        tagwire::NodeState::Up => "up",
        tagwire::NodeState::Connecting => "connecting",
        tagwire::NodeState::Dead => "dead",
    }
}
