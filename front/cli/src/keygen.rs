//! `tagwire keygen`: a new random domain key (give every node the same file,
//! `tagwire daemon --key FILE`).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// Arguments of `tagwire keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Write the key here (created with mode 0600); without it, print it.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let mut bytes = [0u8; tagwire_daemon::DOMAIN_KEY_LEN];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("no randomness from the operating system: {e}"))?;
    let text = tagwire_daemon::DomainKey::from_bytes(bytes).to_text();
    let Some(path) = a.out else {
        print!("{text}");
        return Ok(());
    };
    let mut open = std::fs::OpenOptions::new();
    open.write(true).mode(0o600);
    if a.force {
        open.create(true).truncate(true);
    } else {
        open.create_new(true);
    }
    let mut f = open.open(&path).map_err(|e| {
        anyhow::anyhow!(
            "cannot create {}: {e}{}",
            path.display(),
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                " (--force replaces it)"
            } else {
                ""
            }
        )
    })?;
    // An existing file keeps its mode on truncation: make it private too.
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(text.as_bytes())?;
    eprintln!(
        "wrote a new domain key to {}; copy it to every node and start each daemon with --key {}",
        path.display(),
        path.display()
    );
    Ok(())
}
