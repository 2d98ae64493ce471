//! `tagwire tags`: the tag table.

use crate::ConnectArgs;

/// Arguments of `tagwire tags`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Destroy this tag first (its publishers and subscribers are ended;
    /// the same as `tagwire destroy TAG`).
    #[arg(long, value_name = "TAG", hide = true)]
    destroy: Option<String>,
    /// One JSON object per tag instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `tagwire destroy`.
#[derive(Debug, clap::Args)]
pub(crate) struct DestroyArgs {
    /// The tag (its publishers and subscribers on every node are ended).
    tag: String,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub(crate) fn destroy(a: DestroyArgs) -> anyhow::Result<()> {
    a.connect.connect()?.destroy_tag(&a.tag)?;
    println!("destroyed {}", a.tag);
    Ok(())
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    if let Some(t) = &a.destroy {
        client.destroy_tag(t)?;
    }
    let tags = client.tags()?;
    if a.json {
        let who = |v: &[tagwire::Member]| -> Vec<String> {
            v.iter().map(|m| m.who.to_string()).collect()
        };
        for t in tags {
            let v = serde_json::json!({
                "tag": t.name.as_str(),
                "domain": t.domain.to_string(),
                "senders": who(&t.senders),
                "receivers": who(&t.receivers),
            });
            println!("{v}");
        }
        return Ok(());
    }
    println!("{:<32} {:<7} {:<28} RECEIVERS", "TAG", "DOMAIN", "SENDERS");
    for t in tags {
        let list = |v: &[tagwire::Member]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter()
                    .map(|m| m.who.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        println!(
            "{:<32} {:<7} {:<28} {}",
            t.name.as_str(),
            t.domain.to_string(),
            list(&t.senders),
            list(&t.receivers)
        );
    }
    Ok(())
}
