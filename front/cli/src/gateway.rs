//! `tagwire dds-gateway`: the DDS gateway (`tagwire_gateway`) as a process of
//! its own, a client of a running daemon; and what `tagwire daemon
//! --dds-domain` shares with it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::ConnectArgs;

/// Arguments of `tagwire dds-gateway`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The DDS domain id.
    #[arg(long)]
    domain: u32,
    /// Lines of `TAG TOPIC TYPE [reliable|best-effort] [keyed]
    /// [transient-local=N] [key=TYPE@OFFSET,…] [partition=NAME,…]`.
    #[arg(long)]
    map: PathBuf,
    /// The address DDS participants reach this one at (default 127.0.0.1).
    #[arg(long, default_value = "127.0.0.1")]
    address: Ipv4Addr,
    /// The participant's USER_DATA (some DDS tools recognise their peers by
    /// it, e.g. ddsperf's `DDSPerf:0:PID:HOST`).
    #[arg(long, default_value = "tagwire gateway")]
    user_data: String,
    /// Spin this many microseconds for a tag message before sleeping (a
    /// message to DDS then waits for no thread to wake; costs a busy core).
    #[arg(long)]
    busy_poll_us: Option<u64>,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// The gateway's configuration from its command-line pieces.
pub(crate) fn config(
    domain: u32,
    map: &Path,
    address: Ipv4Addr,
    user_data: String,
    client: tagwire::ClientOptions,
) -> anyhow::Result<tagwire_gateway::GatewayConfig> {
    let text = std::fs::read_to_string(map)
        .map_err(|e| anyhow::anyhow!("cannot read the DDS map {}: {e}", map.display()))?;
    let mappings = tagwire_gateway::parse(&text)
        .map_err(|e| anyhow::anyhow!("DDS map {}: {e}", map.display()))?;
    Ok(tagwire_gateway::GatewayConfig {
        domain,
        address,
        mappings,
        user_data: user_data.into_bytes(),
        client,
        busy_poll: None,
    })
}

/// Runs the gateway (after `daemon`, if it runs in this process) until
/// SIGINT or SIGTERM.
pub(crate) fn run_until_signal(
    cfg: tagwire_gateway::GatewayConfig,
    daemon: Option<tagwire_daemon::Daemon>,
) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let (domain, address) = (cfg.domain, cfg.address);
    let gateway = tagwire_gateway::Gateway::start(cfg)?;
    eprintln!(
        "tagwire: DDS gateway in domain {domain} on {address}:{}",
        gateway.port()
    );
    let _ = signals.forever().next();
    let c = gateway.counters();
    eprintln!(
        "tagwire: DDS gateway: {} to DDS, {} from DDS, {} from DDS not published (lost)",
        c.to_dds, c.from_dds, c.refused
    );
    gateway.stop();
    if let Some(d) = daemon {
        d.shutdown();
    }
    Ok(())
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let mut cfg = config(
        a.domain,
        &a.map,
        a.address,
        a.user_data,
        a.connect.options(),
    )?;
    cfg.busy_poll = a.busy_poll_us.map(std::time::Duration::from_micros);
    run_until_signal(cfg, None)
}
