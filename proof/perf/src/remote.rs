//! The multi-host benchmarks of `tagwire perf` (paper Figures 4-3 column 4,
//! 4-6 and 4-7, and throughput across a link).
//!
//! A [`Site`] is a LAN of network namespaces joined by a bridge
//! (`tagwire-testkit`), with one daemon per host. The daemons run in this
//! process, each with its threads inside its host's namespace; the measuring
//! thread and the worker processes reach their host's daemon through its Unix
//! socket (Unix sockets are not part of a network namespace), so every byte
//! between nodes crosses the veth links and the bridge. The raw UDP baseline
//! uses sockets created inside the two namespaces, and Cyclone DDS's
//! `ddsperf` runs in them through `ip netns exec`: all three systems take the
//! same path, in the same run.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tagwire::{Client, ClientOptions, NodeState, Proxy};
use tagwire_daemon::{Config, Daemon, DomainKey, KeyFile, NetConfig, PacerConfig};
use tagwire_testkit::{Host, Lan};

mod keys;

use crate::ddsperf::{self, DdsOpts};
use crate::peers::{self, PeerOpts};
use crate::raw;
use crate::report::Record;
use crate::suite::{dds_opts, note, push, Acc, Point, Rates, Series, SuiteOpts};
use crate::workload::{self, Acks, Env, Rounds};

/// UDP payload of one datagram on the site's links (MTU 1500, less the IP
/// and UDP headers).
const MTU_PAYLOAD: usize = 1472;

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
    fn daemon(&self, i: usize) -> Option<&Daemon> {
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

/// Round trip to one receiver on host 1 against size, beside a raw UDP
/// ping-pong, the same ping-pong through a dispatcher thread on each host
/// (`raw-relay`, [`raw::udp_relay_pingpong`]: the floor of a per-node
/// delivery manager) and Cyclone DDS across the same link.
///
/// With `keyed` (a second site whose daemons authenticate with a domain
/// key), each repetition also measures `tagwire+auth` there, right after
/// `tagwire`, and pairs it with it.
pub fn remote_rtt(
    o: &SuiteOpts,
    site: &Site,
    keyed: Option<&Site>,
    sizes: &[usize],
) -> anyhow::Result<Vec<Record>> {
    let env = site.env(o.env.exe.clone(), o.env.cpus, &[1]);
    let keyed_env = keyed.map(|k| k.env(o.env.exe.clone(), o.env.cpus, &[1]));
    let dds = dds_opts(o).and_then(|d| site.dds(&d, 1, 0).map_err(|e| format!("{e:#}")));
    let zenoh = site.peers(o, 0, 1);
    let ropts = raw::RawOpts {
        cpus: o.env.cpus,
        ..raw::RawOpts::default()
    };
    let mut acc = Acc::default();
    let mut skipped = Vec::new();
    if let Err(reason) = &zenoh {
        for &size in sizes {
            skipped.push(Record::skipped(
                "remote-rtt",
                "zenoh",
                "block",
                size as u64,
                reason,
            ));
        }
    }
    for rep in 0..o.reps {
        acc.rep = rep;
        for &size in sizes {
            note(
                o,
                format!("remote-rtt rep {}/{} size {size}", rep + 1, o.reps),
            );
            let s = size as u64;
            let d = workload::rtt(&env, Rounds::new(size, o.iters, o.warmup))?;
            push(&mut acc, "tagwire", "block", s, 1, "all", &d);
            // The same through the daemons (the path before direct delivery).
            let r = Rounds::new(size, o.iters, o.warmup).through_daemon();
            let d = workload::rtt(&env, r)?;
            push(&mut acc, "tagwire-via-daemon", "block", s, 1, "all", &d);
            if let Some(env) = &keyed_env {
                let d = workload::rtt(env, Rounds::new(size, o.iters, o.warmup))?;
                push(&mut acc, "tagwire+auth", "block", s, 1, "all", &d);
            }
            if let Ok(p) = &zenoh {
                match peers::zenoh_rtt(p, size, o.iters, o.warmup) {
                    Ok(pt) => acc.push("zenoh", "block", s, 1, "all", pt),
                    Err(e) => skipped.push(Record::skipped(
                        "remote-rtt",
                        "zenoh",
                        "block",
                        s,
                        &format!("zenoh failed: {e:#}"),
                    )),
                }
            }
            let (a, b) = site.udp_pair(0, 1)?;
            let d = raw::udp_pingpong(a, b, size, o.iters, o.warmup, &ropts)?;
            push(&mut acc, "raw-udp", "block", s, 1, "all", &d);
            let (a, b) = site.udp_pair(0, 1)?;
            let d = raw::udp_relay_pingpong(a, b, size, (o.iters, o.warmup), &ropts)?;
            push(&mut acc, "raw-relay", "block", s, 1, "all", &d);
            match &dds {
                Ok(opts) => match ddsperf::rtt_with(s, o.dds_seconds, opts) {
                    Ok(r) => acc.push(
                        "cyclonedds",
                        "block",
                        s,
                        1,
                        "all",
                        Point {
                            p50_us: r.p50_us,
                            p99_us: r.p99_us,
                        },
                    ),
                    Err(e) => skipped.push(Record::skipped(
                        "remote-rtt",
                        "cyclonedds",
                        "block",
                        s,
                        &format!("ddsperf failed: {e:#}"),
                    )),
                },
                Err(reason) if rep == 0 => skipped.push(Record::skipped(
                    "remote-rtt",
                    "cyclonedds",
                    "block",
                    s,
                    reason,
                )),
                Err(_) => {}
            }
        }
    }
    let pairs = |e: &Series| -> Vec<(String, Series)> {
        let against: &[&str] = match e.0.as_str() {
            "tagwire" => &[
                "raw-udp",
                "raw-relay",
                "cyclonedds",
                "zenoh",
                "tagwire-via-daemon",
            ],
            "tagwire-via-daemon" => &["raw-udp", "cyclonedds"],
            // A keyed daemon has no direct delivery: the key's own cost is
            // against the same path unkeyed, what a user sees against the
            // default.
            "tagwire+auth" => &["tagwire-via-daemon", "tagwire", "raw-udp"],
            // The two-sided floor, as a ratio of the one-hop one.
            "raw-relay" => &["raw-udp"],
            _ => &[],
        };
        against
            .iter()
            .filter_map(|b| {
                acc.find(b, "block", e.2, 1, "all")
                    .map(|s| (b.to_string(), s.clone()))
            })
            .collect()
    };
    let mut out: Vec<Record> = acc
        .records("remote-rtt", pairs)
        .into_iter()
        .chain(skipped)
        .map(|r| r.with_nodes(2))
        .collect();
    out.sort_by_key(|r| r.size);
    Ok(out)
}

/// Round trip to one subscriber on host 1 that asks for every `every`-th
/// sample, by where the filter (the push-pull proxy) runs: nowhere (the
/// plain round trip, every sample: the baseline), in the subscriber's
/// library, in the publishing node's delivery manager, or in the daemon of
/// host 2, a third host the samples then cross (one extra hop). Each round
/// publishes `every` samples back to back and times the one asked for; the
/// acknowledgement returns directly. A second baseline publishes the same
/// rounds without a proxy: every sample crosses and the subscribing
/// application acknowledges only the `every`-th (what a user without
/// scaling would do). A raw UDP ping-pong across the same link is measured
/// beside them.
pub fn proxy_rtt(
    o: &SuiteOpts,
    site: &Site,
    size: usize,
    every: u32,
) -> anyhow::Result<Vec<Record>> {
    anyhow::ensure!(site.hosts() >= 3, "the proxy round trip needs 3 hosts");
    let env = site.env(o.env.exe.clone(), o.env.cpus, &[1]);
    let node2 = Proxy::Node(tagwire::NodeAddr(site.host(2).addr().into()));
    let variants = [
        ("tagwire", 1, Some(Proxy::Subscriber)),
        ("tagwire+no-proxy", every, None),
        ("tagwire+proxy@subscriber", every, Some(Proxy::Subscriber)),
        ("tagwire+proxy@publisher", every, Some(Proxy::Publisher)),
        ("tagwire+proxy@third-host", every, Some(node2)),
    ];
    let ropts = raw::RawOpts {
        cpus: o.env.cpus,
        ..raw::RawOpts::default()
    };
    let mut acc = Acc::default();
    let s = size as u64;
    for rep in 0..o.reps {
        acc.rep = rep;
        for (name, n, proxy) in variants {
            note(
                o,
                format!("proxy-rtt rep {}/{} {name} every {n}", rep + 1, o.reps),
            );
            // The daemon that should filter, and its count before the run:
            // a placement that silently fell back would measure another path.
            let filter_at = match proxy {
                Some(Proxy::Publisher) => Some(0),
                Some(Proxy::Node(_)) => Some(2),
                _ => None,
            };
            let before = filter_at.map(|i| site.daemon(i).map_or(0, Daemon::scaled_out));
            let d = workload::rtt(&env, Rounds::new(size, o.iters, o.warmup).every(n, proxy))?;
            if let (Some(i), Some(before)) = (filter_at, before) {
                anyhow::ensure!(
                    site.daemon(i).map_or(0, Daemon::scaled_out) > before,
                    "{name}: host {i}'s daemon filtered nothing; the proxy was not where asked"
                );
            }
            push(&mut acc, name, "block", s, 1, "all", &d);
        }
        let (a, b) = site.udp_pair(0, 1)?;
        let d = raw::udp_pingpong(a, b, size, o.iters, o.warmup, &ropts)?;
        push(&mut acc, "raw-udp", "block", s, 1, "all", &d);
    }
    let pairs = |e: &Series| -> Vec<(String, Series)> {
        if !e.0.starts_with("tagwire") {
            return Vec::new();
        }
        ["tagwire", "tagwire+no-proxy", "raw-udp"]
            .iter()
            .filter(|b| **b != e.0)
            .filter_map(|b| {
                acc.find(b, "block", e.2, 1, "all")
                    .map(|s| (b.to_string(), s.clone()))
            })
            .collect()
    };
    Ok(acc
        .records("proxy-rtt", pairs)
        .into_iter()
        .map(|r| {
            let nodes = if r.system.ends_with("third-host") {
                3
            } else {
                2
            };
            let note = match r.system.as_str() {
                "tagwire" => "no proxy: every sample".to_string(),
                "tagwire+no-proxy" => format!(
                    "no proxy, {every} samples a round: all cross, the application acks every {every}th"
                ),
                "raw-udp" => "raw UDP ping-pong, host 0 and host 1".to_string(),
                _ => format!("every {every}th sample"),
            };
            r.with_nodes(nodes).with_note(&note)
        })
        .collect())
}

/// Round trip against the number of receivers, with the receivers spread
/// in turn over `hosts` (paper Figure 4-6: all on host 1; Figure 4-7: over
/// three hosts, all acknowledging). With one host, the same run measures
/// its floor, `raw-udp` ([`raw::udp_fanout_rtt`]): the operating system's
/// cost of one datagram handed to n sleeping receivers on that host.
pub fn remote_fanout(
    o: &SuiteOpts,
    site: &Site,
    bench: &str,
    hosts: &[usize],
    receivers: &[usize],
    acks: &[Acks],
    size: usize,
) -> anyhow::Result<Vec<Record>> {
    let env = site.env(o.env.exe.clone(), o.env.cpus, hosts);
    let mut acc = Acc::default();
    for rep in 0..o.reps {
        acc.rep = rep;
        for &n in receivers {
            for &a in acks {
                note(
                    o,
                    format!(
                        "{bench} rep {}/{} receivers {n} acks {}",
                        rep + 1,
                        o.reps,
                        a.as_str()
                    ),
                );
                let d = workload::rtt(&env, Rounds::new(size, o.iters, o.warmup).fan(n, a))?;
                push(
                    &mut acc,
                    "tagwire",
                    "block",
                    size as u64,
                    n as u32,
                    a.as_str(),
                    &d,
                );
                // The floor, with every receiver on one host: a datagram
                // across the same link to a dispatcher thread there that
                // wakes n receiver threads, placed alike.
                if let [host] = hosts {
                    let (x, y) = site.udp_pair(0, *host)?;
                    let d = raw::udp_fanout_rtt(
                        x,
                        y,
                        size,
                        n,
                        a == Acks::All,
                        (o.iters, o.warmup),
                        &raw::RawOpts {
                            cpus: o.env.cpus,
                            ..raw::RawOpts::default()
                        },
                    )?;
                    push(
                        &mut acc,
                        "raw-udp",
                        "block",
                        size as u64,
                        n as u32,
                        a.as_str(),
                        &d,
                    );
                }
            }
        }
    }
    let first = receivers.iter().copied().min().unwrap_or(1) as u32;
    Ok(acc
        .records(bench, |e| {
            acc.find(&e.0, &e.1, e.2, first, &e.4)
                .map(|b| vec![(format!("{first}-receiver"), b.clone())])
                .unwrap_or_default()
        })
        .into_iter()
        .map(|r| {
            let used = (r.receivers as usize).min(hosts.len()) as u32;
            r.with_nodes(1 + used)
        })
        .collect())
}

/// Messages per second from host 0 to a subscriber on host 1, reliable and
/// lossless, by direct delivery and (reliable) through the daemons,
/// publisher flat out (held back by the window), beside raw UDP and Cyclone
/// DDS (reliable) across the same link.
///
/// With `keyed`, also `tagwire+auth` on that site, paired with `tagwire`.
pub fn remote_throughput(
    o: &SuiteOpts,
    site: &Site,
    keyed: Option<&Site>,
    sizes: &[usize],
    seconds: f64,
) -> anyhow::Result<Vec<Record>> {
    let env = site.env(o.env.exe.clone(), o.env.cpus, &[1]);
    let keyed_env = keyed.map(|k| k.env(o.env.exe.clone(), o.env.cpus, &[1]));
    let dds = dds_opts(o).and_then(|d| site.dds(&d, 1, 0).map_err(|e| format!("{e:#}")));
    let zenoh = site.peers(o, 0, 1);
    let dur = Duration::from_secs_f64(seconds);
    let mut rates = Rates::default();
    let mut add = |rep: usize, system: &str, size: u64, rate: f64, extra: String| {
        rates.add(rep, system, size, rate, extra)
    };
    let mut skipped = Vec::new();
    for rep in 0..o.reps {
        for &size in sizes {
            note(
                o,
                format!("remote throughput rep {}/{} size {size}", rep + 1, o.reps),
            );
            let s = size as u64;
            // Reliable and lossless by direct delivery (the default), and
            // reliable through the daemons (the path before it).
            // And reliable over the TCP carrier (`SubscribeOptions::tcp`:
            // the node's copy by TCP, then its ring).
            for (system, lossless, via, tcp) in [
                ("tagwire", false, false, false),
                ("tagwire-lossless", true, false, false),
                ("tagwire-via-daemon", false, true, false),
                ("tagwire-tcp", false, false, true),
            ] {
                let resent = site.retransmissions(0);
                let t = workload::throughput(&env, size, dur, None, lossless, via, tcp)?;
                let resent = site.retransmissions(0) - resent;
                add(
                    rep,
                    system,
                    s,
                    t.msgs_per_s,
                    format!(
                        "sent {} received {} lost {} (datagrams resent {resent})",
                        t.sent, t.received, t.lost
                    ),
                );
            }
            if let Some(env) = &keyed_env {
                let t = workload::throughput(env, size, dur, None, false, false, false)?;
                add(
                    rep,
                    "tagwire+auth",
                    s,
                    t.msgs_per_s,
                    format!("sent {} received {} lost {}", t.sent, t.received, t.lost),
                );
            }
            let (tx, rx) = site.udp_pair(0, 1)?;
            add(
                rep,
                "raw-udp",
                s,
                raw::udp_throughput(tx, rx, size, dur)?,
                String::new(),
            );
            // The kernel's bulk floor: MTU-sized datagrams, 64 KiB a send.
            let (tx, rx) = site.udp_pair(0, 1)?;
            match raw::udp_gso_throughput(tx, rx, size, MTU_PAYLOAD, dur) {
                Ok(r) => add(
                    rep,
                    "raw-udp-gso",
                    s,
                    r,
                    format!("{MTU_PAYLOAD}-byte datagrams, 64 KiB per send, received coalesced"),
                ),
                Err(e) if rep == 0 => skipped.push(Record::skipped(
                    "throughput",
                    "raw-udp-gso",
                    "block",
                    s,
                    &format!("{e:#}"),
                )),
                Err(_) => {}
            }
            match &dds {
                Ok(opts) => match ddsperf::throughput_with(s, o.dds_seconds, opts) {
                    Ok(r) => add(
                        rep,
                        "cyclonedds",
                        s,
                        r.msgs_per_s,
                        format!("reliable; lost {}", r.lost),
                    ),
                    Err(e) => skipped.push(Record::skipped(
                        "throughput",
                        "cyclonedds",
                        "block",
                        s,
                        &format!("ddsperf failed: {e:#}"),
                    )),
                },
                Err(reason) if rep == 0 => skipped.push(Record::skipped(
                    "throughput",
                    "cyclonedds",
                    "block",
                    s,
                    reason,
                )),
                Err(_) => {}
            }
            if let Ok(p) = &zenoh {
                peers::PeerThroughput::record(
                    peers::zenoh_throughput(p, size, seconds),
                    (rep, "zenoh", s, "TCP, peer mode"),
                    &mut add,
                    &mut skipped,
                );
            }
        }
    }
    let mut out = rates.records(2);
    if let Err(reason) = &zenoh {
        for &size in sizes {
            skipped.push(Record::skipped(
                "throughput",
                "zenoh",
                "block",
                size as u64,
                reason,
            ));
        }
    }
    out.extend(skipped.into_iter().map(|r| r.with_nodes(2)));
    Ok(out)
}
