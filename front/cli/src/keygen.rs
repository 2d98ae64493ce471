//! `tagwire keygen`: a new random domain key (give every node the same file,
//! `tagwire daemon --key FILE`), or the next key of a key roll
//! (`--next FILE`).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Arguments of `tagwire keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Write the key here (created with mode 0600); without it, print it.
    #[arg(long, conflicts_with = "next")]
    out: Option<PathBuf>,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
    /// Roll the key of this key file without downtime: add a new random
    /// key to it as the next one. Copy the file to every node (the daemons
    /// read it again when it changes): each opens with both keys at once,
    /// seals with the new one from the switch time, and stops opening the
    /// old one a minute after it. A file whose last roll's switch time has
    /// passed starts from its new key.
    #[arg(long, value_name = "FILE")]
    next: Option<PathBuf>,
    /// With --next: the switch time, in seconds from now (leave enough to
    /// copy the file to every node).
    #[arg(long, requires = "next", default_value_t = 300, value_name = "SECONDS")]
    switch_in: u64,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let mut bytes = [0u8; tagwire_daemon::DOMAIN_KEY_LEN];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("no randomness from the operating system: {e}"))?;
    if let Some(path) = a.next {
        return roll(&path, bytes, a.switch_in);
    }
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

/// Adds `key` to the key file at `path` as the next one, switched to in
/// `switch_in` seconds (the file replaced whole: a daemon never reads half
/// of it).
fn roll(
    path: &Path,
    key: [u8; tagwire_daemon::DOMAIN_KEY_LEN],
    switch_in: u64,
) -> anyhow::Result<()> {
    let file = tagwire_daemon::read_key_roll(path)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let at = now.saturating_add(switch_in);
    let rolled = file.roll(key, at, now);
    tagwire_daemon::write_key_file(path, &rolled)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    let generation = rolled.next.as_ref().map_or(0, |(k, _)| k.generation());
    eprintln!(
        "{}: generation {generation} is the next key; every node seals with it from Unix time {at} \
         (in {switch_in} s) and opens the old one until {}. Copy the file to every node before then.",
        path.display(),
        at + tagwire_daemon::ROLL_GRACE
    );
    Ok(())
}
