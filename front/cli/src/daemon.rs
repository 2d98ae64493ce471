//! `tagwire daemon`: run the node daemon in the foreground.

use std::path::PathBuf;

/// Arguments of `tagwire daemon`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Socket path (default: $TAGWIRE_SOCKET or the per-user runtime dir).
    #[arg(long, env = "TAGWIRE_SOCKET")]
    socket: Option<PathBuf>,
    /// Slots per tag ring (the deepest subscriber queue).
    #[arg(long, default_value_t = 256)]
    slots: u32,
    /// Largest message on the shared-memory fast path, bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    slot_payload: u32,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let mut cfg = tagwire_daemon::Config::default();
    if let Some(s) = a.socket {
        cfg.socket = s;
    }
    cfg.default_ring.slots = a.slots;
    cfg.default_ring.slot_payload = a.slot_payload;
    tagwire_daemon::run_until_signal(cfg)?;
    Ok(())
}
