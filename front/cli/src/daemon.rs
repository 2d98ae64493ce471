//! `tagwire daemon`: run the node daemon in the foreground.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

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
    /// This node's address: join the other nodes' daemons from here. Without
    /// it the daemon serves this node alone.
    #[arg(long, env = "TAGWIRE_NODE")]
    node: Option<IpAddr>,
    /// A name for this node (default: its address).
    #[arg(long)]
    name: Option<String>,
    /// Static node list: lines of `name address [control_port [delivery_port]]`,
    /// the same file on every node.
    #[arg(long, env = "TAGWIRE_NODES")]
    nodes: Option<PathBuf>,
    /// Do not find nodes by multicast beacon.
    #[arg(long)]
    no_discovery: bool,
    /// Multicast group and port of the discovery beacon.
    #[arg(long, default_value = "239.255.74.1:7400")]
    discovery_group: std::net::SocketAddrV4,
    /// TCP port of the update manager.
    #[arg(long, default_value_t = tagwire_daemon::peers::DEFAULT_CONTROL_PORT)]
    control_port: u16,
    /// UDP port of the delivery manager.
    #[arg(long, default_value_t = tagwire_daemon::peers::DEFAULT_DELIVERY_PORT)]
    delivery_port: u16,
    /// UDP port of the multicast data carrier (the same on every node).
    #[arg(long, default_value_t = tagwire_daemon::peers::DEFAULT_MULTICAST_PORT)]
    multicast_port: u16,
    /// Pace reliable streams to other nodes (NAPA): each stream keeps the
    /// path's queue short from its measured round trip and delivery rate,
    /// holding its publishers back meanwhile.
    #[arg(long, requires = "node")]
    pacing: bool,
    /// A peer silent this long (ms) is declared dead.
    #[arg(long, default_value_t = 3000)]
    lease_ms: u64,
    /// How long (ms) a table change waits for every live peer to apply it.
    #[arg(long, default_value_t = 1000)]
    apply_timeout_ms: u64,
    /// Topology in which `--proxy auto` subscriptions get their proxy placed
    /// (the `tagwire place` format, with `address = "IP"` per node; the same
    /// file on every node).
    #[arg(long, env = "TAGWIRE_TOPOLOGY")]
    topology: Option<PathBuf>,
    /// Who may publish, subscribe, create and destroy which tags: a TOML
    /// file of `[[grant]]`s (tags = "/robot/**", users, groups, rights).
    /// Without it, root, the daemon's user and each tag's creator may do
    /// everything, and the members of --shared-group.
    #[arg(long, env = "TAGWIRE_POLICY")]
    policy: Option<PathBuf>,
    /// Without --policy: a group whose members get every right on every tag.
    #[arg(long, conflicts_with = "policy")]
    shared_group: Option<String>,
    /// The scheduling of the daemon's roles, `ROLE=POLICY,...`: roles
    /// delivery, forward, update, local; policies `other[:NICE]`, `fifo:P`,
    /// `rr:P`. The paper's order is delivery above update above local, e.g.
    /// `delivery=fifo:40,forward=fifo:35,update=fifo:20,local=fifo:10`. A
    /// policy the daemon may not use is named in a warning at start and
    /// the role runs at the default.
    #[arg(long, env = "TAGWIRE_SCHED", default_value = "", value_parser = str::parse::<tagwire_daemon::roles::Roles>)]
    sched: tagwire_daemon::roles::Roles,
    /// Lock the daemon's memory (mlockall), so that no page fault stalls a
    /// real-time role; refused, it is a warning.
    #[arg(long)]
    mlock: bool,
    /// The domain key file (`tagwire keygen`; the same on every node, mode
    /// 0600): peers must hold it, and every datagram and control link is
    /// authenticated with it. Read again whenever it changes: a key roll
    /// it announces (`tagwire keygen --next`) needs no restart.
    #[arg(long, env = "TAGWIRE_KEY")]
    key: Option<PathBuf>,
    /// With --key: encrypt data between nodes too (not only authenticate).
    #[arg(long, requires = "key")]
    encrypt: bool,
    /// Stand in DDS domain N for the tags of --dds-map (RTPS on UDP: DDS
    /// and ROS 2 applications exchange samples with those tags).
    #[arg(long, requires = "dds_map")]
    dds_domain: Option<u32>,
    /// With --dds-domain: lines of `TAG TOPIC TYPE [reliable|best-effort]`.
    #[arg(long, requires = "dds_domain")]
    dds_map: Option<PathBuf>,
    /// With --dds-domain: the address DDS participants reach this node at
    /// (default: --node if IPv4, else 127.0.0.1).
    #[arg(long, requires = "dds_domain")]
    dds_address: Option<Ipv4Addr>,
    /// With --dds-domain: the participant's USER_DATA (some DDS tools
    /// recognise their peers by it, e.g. ddsperf's `DDSPerf:0:PID:HOST`).
    #[arg(long, requires = "dds_domain", default_value = "tagwire gateway")]
    dds_user_data: String,
    /// With --dds-domain: the gateway's tag subscriptions spin this many
    /// microseconds before sleeping (costs a busy core).
    #[arg(long, requires = "dds_domain")]
    dds_busy_poll_us: Option<u64>,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let mut cfg = tagwire_daemon::Config::default();
    if let Some(s) = a.socket {
        cfg.socket = s;
    }
    cfg.default_ring.slots = a.slots;
    cfg.default_ring.slot_payload = a.slot_payload;
    cfg.topology = a.topology;
    cfg.policy = a.policy;
    cfg.shared_group = a.shared_group;
    cfg.sched = a.sched;
    cfg.mlock = a.mlock;
    if let Some(addr) = a.node {
        let mut net = tagwire_daemon::NetConfig::new(addr);
        if let Some(n) = a.name {
            net.name = n;
        }
        net.nodes_file = a.nodes;
        net.key = a
            .key
            .as_deref()
            .map(tagwire_daemon::read_key_file)
            .transpose()?;
        net.key_file = a.key.clone();
        net.encrypt = a.encrypt;
        net.control_port = a.control_port;
        net.delivery_port = a.delivery_port;
        net.multicast_port = a.multicast_port;
        net.lease = Duration::from_millis(a.lease_ms);
        net.apply_timeout = Duration::from_millis(a.apply_timeout_ms);
        net.pacing = a.pacing.then(tagwire_daemon::PacerConfig::default);
        net.discovery = (!a.no_discovery).then(|| tagwire_daemon::Discovery {
            group: *a.discovery_group.ip(),
            port: a.discovery_group.port(),
            ..Default::default()
        });
        if net.discovery.is_some() && !matches!(addr, IpAddr::V4(a) if a != Ipv4Addr::UNSPECIFIED) {
            anyhow::bail!("multicast discovery needs an IPv4 --node address; add --no-discovery");
        }
        cfg.net = Some(net);
    } else if a.key.is_some() {
        anyhow::bail!("--key needs --node ADDRESS (it authenticates this node to the others)");
    } else if a.nodes.is_some() {
        anyhow::bail!("--nodes needs --node ADDRESS (this node's address in the list)");
    }
    let Some(domain) = a.dds_domain else {
        tagwire_daemon::run_until_signal(cfg)?;
        return Ok(());
    };
    // The daemon, then its DDS gateway (a client of it), until a signal.
    let address = a.dds_address.unwrap_or(match a.node {
        Some(IpAddr::V4(v4)) if !v4.is_unspecified() => v4,
        _ => Ipv4Addr::LOCALHOST,
    });
    let client = tagwire::ClientOptions {
        socket: cfg.socket.clone(),
        autostart: false,
        ..tagwire::ClientOptions::default()
    };
    let map = a.dds_map.unwrap_or_default();
    let mut gw = crate::gateway::config(domain, &map, address, a.dds_user_data, client)?;
    gw.busy_poll = a.dds_busy_poll_us.map(Duration::from_micros);
    let daemon = tagwire_daemon::Daemon::start(cfg)?;
    crate::gateway::run_until_signal(gw, Some(daemon))
}
