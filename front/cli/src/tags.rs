//! `tagwire tags`: the tag table.

use crate::ConnectArgs;

/// Arguments of `tagwire tags`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Destroy this tag first (its publishers and subscribers are ended).
    #[arg(long, value_name = "TAG")]
    destroy: Option<String>,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let client = a.connect.connect()?;
    if let Some(t) = &a.destroy {
        client.destroy_tag(t)?;
    }
    let tags = client.tags()?;
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
