//! [`Site`]: hosts in network namespaces with a daemon each, what the
//! multi-host benchmarks and the soak run on (see the parent module).

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tagwire::{Client, ClientOptions, NodeState};
use tagwire_daemon::{Config, Daemon, DomainKey, KeyFile, NetConfig, PacerConfig};
use tagwire_testkit::{Host, Lan};

use crate::ddsperf::DdsOpts;
use crate::peers::{self, PeerOpts};
use crate::raw;
use crate::suite::SuiteOpts;
use crate::workload::Env;

mod keys;

/// Hosts in namespaces, one daemon each. Dropping it stops the daemons and
/// deletes the namespaces.
pub struct Site {
    // Field order is drop order: daemons first, then their namespaces.
    /// (`None` while [`Site::restart`] starts it again.)
    daemons: Vec<Option<Daemon>>,
    /// Each daemon's settings and CPU, to start it again ([`Site::restart`]).
    configs: Vec<(Config, Option<usize>)>,
    lan: Lan,
    dir: PathBuf,
}

impl std::fmt::Debug for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Site")
            .field("hosts", &self.lan.hosts().len())
            .field("dir", &self.dir)
            .finish()
    }
}

impl Site {
    /// Builds `hosts` hosts, starts a daemon on each (static node list, no
    /// multicast discovery) and waits until every daemon sees every other.
    pub fn new(hosts: usize) -> anyhow::Result<Site> {
        Self::with_key(hosts, None, None)
    }

    /// The same, every daemon authenticating with the domain key `key`
    /// (`tagwire perf ... --auth on`), and with `cpus` (`SENDER,RECEIVER`)
    /// each host's daemon on its side's CPU: host 0's (the publishing
    /// host's) on the sender's, every other's on the receiver's, as a
    /// peer's publishing and subscribing processes are pinned with every
    /// thread they run (the daemon's threads inherit the placement).
    pub fn with_key(
        hosts: usize,
        key: Option<DomainKey>,
        cpus: Option<(usize, usize)>,
    ) -> anyhow::Result<Site> {
        Self::with_net(hosts, key, cpus, None)
    }

    /// [`Site::with_key`], every daemon pacing its reliable streams with
    /// `pacing` (`tagwire daemon --pacing`; `None`: unpaced).
    pub fn with_net(
        hosts: usize,
        key: Option<DomainKey>,
        cpus: Option<(usize, usize)>,
        pacing: Option<PacerConfig>,
    ) -> anyhow::Result<Site> {
        Self::build(hosts, false, key, cpus, pacing)
    }

    /// [`Site::with_key`] without a key, the hosts joined by a router
    /// instead of a bridge (`Lan::route`: a shaped port there queues by
    /// the packets' DSCP).
    pub fn routed(hosts: usize, cpus: Option<(usize, usize)>) -> anyhow::Result<Site> {
        Self::build(hosts, true, None, cpus, None)
    }

    fn build(
        hosts: usize,
        routed: bool,
        key: Option<DomainKey>,
        cpus: Option<(usize, usize)>,
        pacing: Option<PacerConfig>,
    ) -> anyhow::Result<Site> {
        if let Some(reason) = tagwire_testkit::skip_reason() {
            bail!("the multi-host benchmarks need network namespaces: {reason}");
        }
        let lan = Lan::new(hosts).context("building the test hosts")?;
        if routed {
            lan.route().context("making the switch a router")?;
        }
        // One directory per site: a process may hold several at once.
        static SITES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "tagwire-perf-site-{}-{n}-{}{}",
            std::process::id(),
            if key.is_some() { "auth" } else { "plain" },
            if pacing.is_some() { "-paced" } else { "" }
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let list: String = lan
            .hosts()
            .iter()
            .map(|h| format!("{} {}\n", h.name(), h.addr()))
            .collect();
        let nodes_file = dir.join("nodes");
        std::fs::write(&nodes_file, list)?;
        let mut site = Site {
            daemons: Vec::new(),
            configs: Vec::new(),
            lan,
            dir,
        };
        for i in 0..hosts {
            let h = site.lan.host(i);
            let mut net = NetConfig::new(h.addr().into());
            net.name = h.name().to_owned();
            net.nodes_file = Some(nodes_file.clone());
            net.discovery = None;
            net.key = key.clone();
            if let Some(k) = &key {
                // Each node's own copy of the key file, which its daemon
                // follows (a key roll: `Site::roll_key`).
                let path = site.key_file(i);
                let file = KeyFile {
                    current: k.clone(),
                    next: None,
                };
                tagwire_daemon::write_key_file(&path, &file)?;
                net.key_file = Some(path);
            }
            net.pacing = pacing;
            let cfg = Config {
                socket: site.socket(i),
                net: Some(net),
                ..Config::default()
            };
            let cpu = cpus.map(|c| if i == 0 { c.0 } else { c.1 });
            site.configs.push((cfg.clone(), cpu));
            let d = start_in(h, cfg, cpu)?;
            site.daemons.push(Some(d));
        }
        for i in 0..hosts {
            let c = site.client(i)?;
            let start = Instant::now();
            loop {
                let up = c
                    .nodes()?
                    .iter()
                    .filter(|n| n.source != "self" && n.state == NodeState::Up)
                    .count();
                if up + 1 >= hosts {
                    break;
                }
                if start.elapsed() > Duration::from_secs(20) {
                    bail!("the daemon on h{i} sees {up} of {} peers", hosts - 1);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(site)
    }

    /// Daemon socket of host `i`.
    pub fn socket(&self, i: usize) -> PathBuf {
        self.dir.join(format!("h{i}.sock"))
    }

    /// Stops host `i`'s daemon (its clients lose it) and starts it again
    /// with the same settings: a new incarnation, as after a crash.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<Duration> {
        let (cfg, cpu) = self.configs.get(i).context("no such host")?.clone();
        if let Some(old) = self.daemons.get_mut(i).and_then(Option::take) {
            old.shutdown();
        }
        // The old daemon's sockets close when its last thread lets it go,
        // within a few hundred milliseconds of its stop (its threads look
        // at the stop at least that often); a daemon restarted as a
        // process finds them closed. An in-process restart waits for
        // them, a few seconds at most. Returns how long it took.
        let start = Instant::now();
        loop {
            match start_in(self.lan.host(i), cfg.clone(), cpu) {
                Ok(d) => {
                    self.daemons[i] = Some(d);
                    return Ok(start.elapsed());
                }
                Err(e)
                    if start.elapsed() < Duration::from_secs(5)
                        && format!("{e:#}").contains("Address already in use") =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Host `i`'s daemon (`None` only during a restart).
    pub(super) fn daemon(&self, i: usize) -> Option<&Daemon> {
        self.daemons.get(i).and_then(Option::as_ref)
    }

    /// Host `i`.
    pub fn host(&self, i: usize) -> &Host {
        self.lan.host(i)
    }

    /// Datagrams host `i`'s daemon has sent again so far (after a NACK or
    /// on its resend timer): loss repair a run needed.
    pub fn retransmissions(&self, i: usize) -> u64 {
        self.daemon(i).map_or(0, Daemon::retransmissions)
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.lan.hosts().len()
    }

    /// A client of host `i`'s daemon.
    pub fn client(&self, i: usize) -> anyhow::Result<Client> {
        Ok(Client::with_options(ClientOptions {
            socket: self.socket(i),
            timeout: Duration::from_secs(5),
            autostart: false,
            name: "tagwire-perf".into(),
        })?)
    }

    /// A workload environment: the sender on host 0, receivers on `hosts`
    /// in turn.
    pub fn env(&self, exe: PathBuf, cpus: Option<(usize, usize)>, hosts: &[usize]) -> Env {
        Env {
            exe,
            socket: self.socket(0),
            cpus,
            receivers_at: hosts.iter().map(|&i| self.socket(i)).collect(),
        }
    }

    /// Two UDP sockets connected to each other, created inside hosts `a` and
    /// `b` (so their traffic crosses the link).
    pub fn udp_pair(&self, a: usize, b: usize) -> anyhow::Result<(UdpSocket, UdpSocket)> {
        let bind = |i: usize| -> anyhow::Result<UdpSocket> {
            let addr = self.host(i).addr();
            self.host(i)
                .spawn(move || UdpSocket::bind((addr, 0)))?
                .join()
                .map_err(|_| anyhow::anyhow!("socket thread panicked"))?
                .with_context(|| format!("binding UDP on {addr}"))
        };
        let (sa, sb) = (bind(a)?, bind(b)?);
        sa.connect(sb.local_addr()?)?;
        sb.connect(sa.local_addr()?)?;
        Ok((sa, sb))
    }

    /// Zenoh (`tagwire-peers`) with its sending side on host `from` and
    /// its receiving side on host `to`, on tagwire's CPUs, or why not.
    pub fn peers(&self, o: &SuiteOpts, from: usize, to: usize) -> Result<PeerOpts, String> {
        if !o.peers {
            return Err("the peers are off (--no-peers)".into());
        }
        let exe = peers::available()?;
        Ok(PeerOpts {
            exe,
            cpus: o.env.cpus,
            netns: Some((
                self.host(from).netns().to_owned(),
                self.host(to).netns().to_owned(),
                self.host(to).addr().into(),
            )),
        })
    }

    /// `ddsperf` options for a pair across hosts `first` (pong/sub) and
    /// `second` (ping/pub): a Cyclone configuration on the hosts' `eth0`,
    /// discovery by unicast to every host.
    pub fn dds(&self, base: &DdsOpts, first: usize, second: usize) -> anyhow::Result<DdsOpts> {
        let peers: String = self
            .lan
            .hosts()
            .iter()
            .map(|h| format!("        <Peer address=\"{}\"/>\n", h.addr()))
            .collect();
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <CycloneDDS>\n  <Domain id=\"any\">\n    <General>\n      <Interfaces>\n        \
             <NetworkInterface name=\"eth0\"/>\n      </Interfaces>\n      \
             <AllowMulticast>false</AllowMulticast>\n    </General>\n    <Discovery>\n      \
             <ParticipantIndex>auto</ParticipantIndex>\n      \
             <MaxAutoParticipantIndex>16</MaxAutoParticipantIndex>\n      <Peers>\n{peers}      \
             </Peers>\n    </Discovery>\n  </Domain>\n</CycloneDDS>\n"
        );
        let config = self.dir.join("cyclone-lan.xml");
        std::fs::write(&config, xml)?;
        let mut o = base.clone();
        o.config = config;
        o.netns = Some((
            self.host(first).netns().to_owned(),
            self.host(second).netns().to_owned(),
        ));
        Ok(o)
    }
}

/// Starts a daemon with `cfg` inside `h` (its threads there, pinned to
/// `cpu`).
fn start_in(h: &Host, cfg: Config, cpu: Option<usize>) -> anyhow::Result<Daemon> {
    h.spawn(move || {
        if let Some(c) = cpu {
            raw::pin_current_thread(c)?;
        }
        Daemon::start(cfg).map_err(anyhow::Error::from)
    })?
    .join()
    .map_err(|_| anyhow::anyhow!("daemon start panicked"))?
    .with_context(|| format!("starting the daemon on {}", h.name()))
}

impl Drop for Site {
    fn drop(&mut self) {
        for d in self.daemons.drain(..).flatten() {
            d.shutdown();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
