//! A LAN of Linux network namespaces: one switch (a bridge), N hosts on veth pairs.
//!
//! Everything is driven through the `ip` and `tc` programs, except entering a
//! namespace, which is a `setns(2)` on the calling thread.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Once, OnceLock};
use std::thread::{self, JoinHandle};

use rustix::thread::LinkNameSpaceType;
use tracing::{debug, trace};

/// Prefix of every namespace this crate creates; [`cleanup_stale`] relies on it.
const PREFIX: &str = "twk";
/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";
/// Serialises subnet choice between concurrently running test processes.
const LOCK_PATH: &str = "/run/tagwire-testkit.lock";
/// Subnets 10.200.0.0/24 … 10.255.255.0/24.
const SUBNETS: u32 = 56 * 256;
/// Host addresses are .1 ….253 of the subnet.
const MAX_HOSTS: usize = 253;
/// The bridge in the switch namespace.
const BRIDGE: &str = "br0";
/// The host side of each veth pair.
const ETH: &str = "eth0";
/// The route that lets multicast leave through `eth0` without a default route.
const MULTICAST: &str = "224.0.0.0/4";

/// Why a LAN could not be built or changed.
///
/// `Clone + Eq` so tests can match on it; I/O errors are kept as text for that reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An `ip` or `tc` command ran and reported failure.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line, program first.
        command: String,
        /// How the process ended, e.g. `exit status: 2`.
        status: String,
        /// What the command wrote on stderr, trimmed.
        stderr: String,
    },
    /// A command could not be started at all (program missing, out of processes, …).
    #[error("cannot run `{command}`: {reason}")]
    Spawn {
        /// The command line, program first.
        command: String,
        /// The operating system's error.
        reason: String,
    },
    /// [`Lan::new`] was asked for no hosts or more than fit in a /24.
    #[error("a Lan holds 1 to 253 hosts, not {0}")]
    HostCount(usize),
    /// Every subnet 10.200.0.0/24 … 10.255.255.0/24 is held by a live `Lan`.
    #[error("no free /24 left in 10.200.0.0 - 10.255.255.0")]
    NoFreeSubnet,
    /// The lock file that serialises subnet choice could not be opened or locked.
    #[error("cannot lock {path}: {reason}")]
    Lock {
        /// The lock file.
        path: String,
        /// The operating system's error.
        reason: String,
    },
}

/// Why network-namespace tests cannot run on this machine, or `None` if they can.
///
/// Checks, in order: the process runs as root; `ip` (iproute2) can be run; a test
/// namespace holding a bridge can be created (and is deleted again). The answer is
/// computed once per process. Tests print `skipped: <reason>` and return when this
/// is `Some`; CI runs as root, so there they always run.
pub fn skip_reason() -> Option<String> {
    static REASON: OnceLock<Option<String>> = OnceLock::new();
    REASON.get_or_init(probe).clone()
}

/// Deletes namespaces left behind by test processes that no longer exist.
///
/// A test killed by SIGKILL never runs [`Lan`]'s `Drop`. Every namespace this crate
/// creates carries the creating pid in its name; this deletes those whose pid has no
/// `/proc` entry. Errors are ignored; returns how many namespaces were deleted. The
/// first [`Lan::new`] in each process calls it.
///
/// Assumes the processes sharing `/run/netns` share a pid namespace, as test
/// processes on one machine or in one container do.
pub fn cleanup_stale() -> usize {
    let mut deleted = 0;
    for name in namespaces() {
        let Some((pid, _)) = parse_name(&name) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if delete_netns(&name) {
            deleted += 1;
        }
    }
    deleted
}

/// A switched LAN: a bridge in its own namespace and hosts attached to it.
///
/// Dropping it deletes all its namespaces.
#[derive(Debug)]
pub struct Lan {
    switch: String,
    hosts: Vec<Host>,
    /// Every namespace created so far, so a half-built `Lan` is cleaned up too.
    created: Vec<String>,
}

impl Lan {
    /// Builds a LAN of `hosts` hosts (1 to 253) on a /24 no other live `Lan` holds.
    ///
    /// Host `i` gets address `.i+1`, `lo` and `eth0` up and a route
    /// `224.0.0.0/4 dev eth0`. If any step fails, whatever was created is deleted and
    /// the error names the failing command.
    pub fn new(hosts: usize) -> Result<Lan, Error> {
        if hosts == 0 || hosts > MAX_HOSTS {
            return Err(Error::HostCount(hosts));
        }
        static CLEANED: Once = Once::new();
        CLEANED.call_once(|| {
            let deleted = cleanup_stale();
            if deleted > 0 {
                debug!(deleted, "deleted stale test namespaces");
            }
        });
        let pid = std::process::id();
        let (subnet, switch) = claim_subnet(pid)?;
        // From here on, an early return drops `lan`, which deletes what exists.
        let mut lan = Lan {
            switch: switch.clone(),
            hosts: Vec::with_capacity(hosts),
            created: vec![switch.clone()],
        };
        let sw = switch.as_str();
        ip(&["-n", sw, "link", "set", "lo", "up"])?;
        // No multicast snooping: the bridge floods multicast instead of waiting for
        // IGMP state that no querier would keep fresh.
        ip(&[
            "-n",
            sw,
            "link",
            "add",
            BRIDGE,
            "type",
            "bridge",
            "mcast_snooping",
            "0",
            "forward_delay",
            "0",
        ])?;
        ip(&["-n", sw, "link", "set", BRIDGE, "up"])?;
        for i in 0..hosts {
            let netns = format!("{PREFIX}{pid}-{subnet}h{i}");
            ip(&["netns", "add", &netns])?;
            trace!(%netns, "created host namespace");
            lan.created.push(netns.clone());
            let host = Host {
                name: format!("h{i}"),
                addr: host_addr(subnet, i),
                netns,
                switch: switch.clone(),
                port: format!("p{i}"),
            };
            host.configure()?;
            lan.hosts.push(host);
        }
        Ok(lan)
    }

    /// Host `i`, in creation order.
    ///
    /// # Panics
    ///
    /// If `i` is not below the number of hosts, like slice indexing.
    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    /// All hosts, in creation order.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// Makes the switch a router: every port leaves the bridge, the switch
    /// forwards IPv4 between them (a route per host, proxy ARP so that the
    /// hosts keep their one /24 and need no change) and has the subnet's
    /// `.254` on each port. A forwarded packet's queueing priority is then
    /// its TOS byte's (`rt_tos2priority`), so a shaped port
    /// ([`Host::shape_htb_inbound`]) serves band 0 first, as a router that
    /// honours DSCP does; a bridge would queue by whatever priority the
    /// sending host gave it. Multicast is not routed: hosts find each
    /// other by address. Call it before the hosts talk (their neighbour
    /// caches are flushed). [`Host::link_down`] removes the port's route
    /// and [`Host::link_up`] does not put it back: cut links on a bridged
    /// LAN.
    pub fn route(&self) -> Result<(), Error> {
        let sw = self.switch.as_str();
        sysctl(sw, "net/ipv4/ip_forward", "1")?;
        let o = self
            .hosts
            .first()
            .map_or([10, 200, 0, 0], |h| h.addr.octets());
        let router = format!("{}.{}.{}.254/32", o[0], o[1], o[2]);
        for h in &self.hosts {
            ip(&["-n", sw, "link", "set", &h.port, "nomaster"])?;
            ip(&["-n", sw, "addr", "add", &router, "dev", &h.port])?;
            let to = format!("{}/32", h.addr);
            ip(&["-n", sw, "route", "add", &to, "dev", &h.port])?;
            sysctl(sw, &format!("net/ipv4/conf/{}/proxy_arp", h.port), "1")?;
            // Answer at once: by default a proxy answer waits up to 0.8 s
            // (`proxy_delay`), and everything sent meanwhile waits with it.
            sysctl(sw, &format!("net/ipv4/neigh/{}/proxy_delay", h.port), "0")?;
            ip(&["-n", &h.netns, "neigh", "flush", "all"])?;
        }
        Ok(())
    }

    /// The name of the switch namespace, which holds the bridge `br0`.
    pub fn switch_netns(&self) -> &str {
        &self.switch
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        // Deleting a namespace destroys the interfaces in it, so veths and bridge go too.
        for name in self.created.iter().rev() {
            delete_netns(name);
        }
    }
}

/// One host of a [`Lan`]: a network namespace with `lo` and `eth0`.
#[derive(Debug)]
pub struct Host {
    name: String,
    netns: String,
    addr: Ipv4Addr,
    switch: String,
    /// The bridge-side end of this host's veth pair, in the switch namespace.
    port: String,
}

impl Host {
    /// A short name for logs and thread names: `h0`, `h1`, ….
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of `eth0`.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The namespace's name, as `ip netns list` shows it.
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// A command that runs `program` inside this host: `ip netns exec NS program`.
    ///
    /// Add the program's arguments to the returned command as usual.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.netns]).arg(program);
        command
    }

    /// Moves the calling thread into this host's network namespace.
    ///
    /// Sockets it creates afterwards belong to the host, and threads it spawns
    /// afterwards start there too. Sockets stay in the namespace they were created
    /// in, whichever thread later uses them.
    pub fn enter_current_thread(&self) -> io::Result<()> {
        enter(&File::open(self.netns_path())?)
    }

    /// Runs `f` on a new thread (named after the host) inside this host's namespace.
    ///
    /// Returns once the thread runs in the namespace; `f` never runs anywhere else:
    /// if the namespace cannot be entered, the error is returned and `f` is dropped.
    pub fn spawn<F, T>(&self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let file = File::open(self.netns_path())?;
        let name = self.name.clone();
        // A short-lived helper enters the namespace and spawns the real thread, which
        // inherits it; the caller's own thread never changes namespace.
        let helper = thread::Builder::new()
            .name(format!("{}-enter", self.name))
            .spawn(move || {
                enter(&file)?;
                thread::Builder::new().name(name).spawn(f)
            })?;
        helper
            .join()
            .map_err(|_| io::Error::other("namespace-entering helper thread panicked"))?
    }

    /// Cuts this host's link: both ends of its veth pair go down, so no traffic
    /// passes in either direction.
    ///
    /// Taking `eth0` down also removes its routes; [`Host::link_up`] restores them.
    pub fn link_down(&self) -> Result<(), Error> {
        ip(&["-n", &self.switch, "link", "set", &self.port, "down"])?;
        ip(&["-n", &self.netns, "link", "set", ETH, "down"])
    }

    /// Restores this host's link after [`Host::link_down`], with its multicast route.
    pub fn link_up(&self) -> Result<(), Error> {
        ip(&["-n", &self.switch, "link", "set", &self.port, "up"])?;
        ip(&["-n", &self.netns, "link", "set", ETH, "up"])?;
        ip(&["-n", &self.netns, "route", "replace", MULTICAST, "dev", ETH])
    }

    /// Limits what this host sends: a token bucket (`tc … tbf`) as `eth0`'s root
    /// qdisc, replacing any earlier shaping.
    ///
    /// `rate_bit_per_s` is the sustained rate, `burst_bytes` the bucket size and
    /// `limit_bytes` how much may queue before packets are dropped.
    pub fn shape(
        &self,
        rate_bit_per_s: u64,
        burst_bytes: u64,
        limit_bytes: u64,
    ) -> Result<(), Error> {
        let rate = format!("{rate_bit_per_s}bit");
        let burst = burst_bytes.to_string();
        let limit = limit_bytes.to_string();
        tc(&[
            "-n",
            &self.netns,
            "qdisc",
            "replace",
            "dev",
            ETH,
            "root",
            "tbf",
            "rate",
            &rate,
            "burst",
            &burst,
            "limit",
            &limit,
        ])
    }

    /// Limits what this host sends to `rate_bit_per_s` through an `htb`
    /// class whose leaf is a `pfifo_fast` queue (the channel-prioritisation
    /// paper's setup): packets wait in the leaf's three bands, band 0 first,
    /// each packet's band from its priority (the TOS byte's mapping, or
    /// `SO_PRIORITY`). Replaces any earlier shaping.
    pub fn shape_htb(&self, rate_bit_per_s: u64) -> Result<(), Error> {
        htb(&self.netns, ETH, rate_bit_per_s)
    }

    /// Limits what reaches this host to `rate_bit_per_s`, at the switch:
    /// the same `htb` class and `pfifo_fast` leaf as [`Host::shape_htb`],
    /// on the switch's port toward the host (congestion where several
    /// hosts send to one). Bands follow each packet's priority there: on
    /// a routed LAN ([`Lan::route`]) the router takes it from the TOS byte
    /// as it forwards; a bridge leaves it as the sending host set it.
    pub fn shape_htb_inbound(&self, rate_bit_per_s: u64) -> Result<(), Error> {
        htb(&self.switch, &self.port, rate_bit_per_s)
    }

    /// Removes the shaping of [`Host::shape_htb_inbound`]; does nothing if
    /// there is none.
    pub fn unshape_inbound(&self) -> Result<(), Error> {
        unshape(&self.switch, &self.port)
    }

    /// Bytes received so far on this host's `eth0` (its interface counter,
    /// from `ip -s link`): what crossed the link toward the host.
    pub fn rx_bytes(&self) -> Result<u64, Error> {
        let command = format!("ip -n {} -s link show {ETH}", self.netns);
        let output = Command::new("ip")
            .args(["-n", &self.netns, "-s", "link", "show", ETH])
            .output()
            .map_err(|e| Error::Spawn {
                command: command.clone(),
                reason: e.to_string(),
            })?;
        let text = String::from_utf8_lossy(&output.stdout);
        // "    RX:  bytes packets errors ..." then a line of numbers.
        let mut lines = text.lines();
        let value = lines
            .by_ref()
            .find(|l| l.trim_start().starts_with("RX:"))
            .and_then(|_| lines.next())
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse().ok());
        value.ok_or_else(|| Error::Command {
            command,
            status: output.status.to_string(),
            stderr: format!("no RX byte count in: {}", text.trim()),
        })
    }

    /// Drops `percent` % of the UDP and TCP packets this host receives from
    /// `from` (all of them at 100 or more), at random (an nftables rule on the input hook: `netem` is not
    /// available here); replaces any earlier rule. Returns how many it
    /// dropped so far with [`Host::dropped`]. Needs `nft` (Debian's
    /// `nftables`).
    pub fn drop_input(&self, from: Ipv4Addr, percent: u8) -> Result<(), Error> {
        let _ = self.stop_dropping();
        let ns = self.netns.as_str();
        let nft = |args: &str| -> Result<(), Error> {
            let mut v = vec!["netns", "exec", ns, "nft"];
            v.extend(args.split(' '));
            run("ip", &v)
        };
        nft("add table inet tagwire-loss")?;
        nft("add chain inet tagwire-loss input { type filter hook input priority 0 ; }")?;
        // (nft takes `numgen random mod 100 < N` only for N ≤ 99: 100 %
        // is every packet.)
        let random = if percent >= 100 {
            String::new()
        } else {
            format!("numgen random mod 100 < {percent} ")
        };
        nft(&format!(
            "add rule inet tagwire-loss input ip saddr {from} meta l4proto {{ udp, tcp }} \
             {random}counter drop"
        ))
    }

    /// Packets [`Host::drop_input`] dropped so far (0 without a rule).
    pub fn dropped(&self) -> Result<u64, Error> {
        let command = format!(
            "ip netns exec {} nft list table inet tagwire-loss",
            self.netns
        );
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.netns,
                "nft",
                "list",
                "table",
                "inet",
                "tagwire-loss",
            ])
            .output()
            .map_err(|e| Error::Spawn {
                command: command.clone(),
                reason: e.to_string(),
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        // "... counter packets N bytes M drop"
        Ok(text
            .split_whitespace()
            .skip_while(|w| *w != "packets")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    /// Removes the rule of [`Host::drop_input`].
    pub fn stop_dropping(&self) -> Result<(), Error> {
        run(
            "ip",
            &[
                "netns",
                "exec",
                &self.netns,
                "nft",
                "delete",
                "table",
                "inet",
                "tagwire-loss",
            ],
        )
    }

    /// Removes shaping set by [`Host::shape`]; does nothing if there is none.
    pub fn unshape(&self) -> Result<(), Error> {
        unshape(&self.netns, ETH)
    }

    /// Sets up a freshly created host namespace and its veth pair.
    fn configure(&self) -> Result<(), Error> {
        let ns = self.netns.as_str();
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        // Both ends are created inside their namespaces: the root namespace never
        // holds them, so their names only need to be unique per namespace.
        ip(&[
            "-n",
            ns,
            "link",
            "add",
            ETH,
            "type",
            "veth",
            "peer",
            "name",
            &self.port,
            "netns",
            &self.switch,
        ])?;
        ip(&[
            "-n",
            &self.switch,
            "link",
            "set",
            &self.port,
            "master",
            BRIDGE,
        ])?;
        ip(&["-n", &self.switch, "link", "set", &self.port, "up"])?;
        let cidr = format!("{}/24", self.addr);
        ip(&["-n", ns, "addr", "add", &cidr, "dev", ETH])?;
        ip(&["-n", ns, "link", "set", ETH, "up"])?;
        ip(&["-n", ns, "route", "add", MULTICAST, "dev", ETH])
    }

    fn netns_path(&self) -> PathBuf {
        Path::new(NETNS_DIR).join(&self.netns)
    }
}

/// Moves the calling thread into the network namespace `file` refers to.
fn enter(file: &File) -> io::Result<()> {
    rustix::thread::move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))?;
    Ok(())
}

/// The address of host `i` in subnet `subnet` (an index below [`SUBNETS`]).
fn host_addr(subnet: u32, i: usize) -> Ipv4Addr {
    // subnet < SUBNETS = 56 * 256 and i < MAX_HOSTS = 253, checked by the callers,
    // so every octet fits in a u8 and the truncating casts below are exact.
    let second = 200 + (subnet / 256) as u8;
    let third = (subnet % 256) as u8;
    Ipv4Addr::new(10, second, third, i as u8 + 1)
}

/// Chooses a subnet no live `Lan` holds and creates the switch namespace that marks
/// it as taken, all under an exclusive file lock shared by every test process.
fn claim_subnet(pid: u32) -> Result<(u32, String), Error> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let _lock = lock()?;
    let used: HashSet<u32> = namespaces()
        .iter()
        .filter_map(|name| parse_name(name).and_then(|(_, tail)| subnet_of(tail)))
        .collect();
    // Start somewhere pid-dependent so concurrent processes rarely probe the same
    // subnets; the lock makes the choice correct either way.
    let start = pid
        .wrapping_mul(97)
        .wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
        % SUBNETS;
    let Some(subnet) = (0..SUBNETS)
        .map(|k| (start + k) % SUBNETS)
        .find(|subnet| !used.contains(subnet))
    else {
        return Err(Error::NoFreeSubnet);
    };
    let switch = format!("{PREFIX}{pid}-{subnet}s");
    ip(&["netns", "add", &switch])?;
    trace!(%switch, subnet, "created switch namespace");
    Ok((subnet, switch))
}

/// Takes the cross-process lock; it is released when the returned file is closed.
fn lock() -> Result<File, Error> {
    let failed = |e: &dyn std::fmt::Display| Error::Lock {
        path: LOCK_PATH.to_owned(),
        reason: e.to_string(),
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_PATH)
        .map_err(|e| failed(&e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).map_err(|e| failed(&e))?;
    Ok(file)
}

/// The names `ip netns list` would show.
fn namespaces() -> Vec<String> {
    let Ok(entries) = fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect()
}

/// Splits `twk<pid>-<tail>` into the pid and the tail; `None` for foreign names.
fn parse_name(name: &str) -> Option<(u32, &str)> {
    let (pid, tail) = name.strip_prefix(PREFIX)?.split_once('-')?;
    Some((pid.parse().ok()?, tail))
}

/// The subnet index at the start of a tail such as `1234s` or `1234h0`.
fn subnet_of(tail: &str) -> Option<u32> {
    let digits = tail.find(|c: char| !c.is_ascii_digit())?;
    tail.get(..digits)?.parse().ok()
}

/// Deletes a namespace, logging rather than returning a failure.
fn delete_netns(name: &str) -> bool {
    match ip(&["netns", "del", name]) {
        Ok(()) => {
            trace!(netns = name, "deleted namespace");
            true
        }
        Err(err) => {
            debug!(%err, "could not delete namespace");
            false
        }
    }
}

/// Finds out once why namespaces cannot be used here; see [`skip_reason`].
fn probe() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("network namespaces need root (CI runs the tests as root)".to_owned());
    }
    if let Err(err) = Command::new("ip").arg("-V").output() {
        return Some(format!("cannot run `ip` (iproute2): {err}"));
    }
    let name = format!("{PREFIX}{}-probe", std::process::id());
    if let Err(err) = ip(&["netns", "add", &name]) {
        return Some(format!("cannot create a network namespace: {err}"));
    }
    let bridge = ip(&["-n", &name, "link", "add", BRIDGE, "type", "bridge"]);
    delete_netns(&name);
    match bridge {
        Ok(()) => None,
        Err(err) => Some(format!(
            "cannot create a bridge in a network namespace: {err}"
        )),
    }
}

/// `dev`'s egress in namespace `ns` through an `htb` class of `rate`
/// bit/s whose leaf is a `pfifo_fast` queue, replacing any root qdisc.
fn htb(ns: &str, dev: &str, rate_bit_per_s: u64) -> Result<(), Error> {
    let rate = format!("{rate_bit_per_s}bit");
    tc(&["-n", ns, "qdisc", "del", "dev", dev, "root"]).ok();
    tc(&[
        "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10",
    ])?;
    tc(&[
        "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate",
        &rate, "ceil", &rate,
    ])?;
    tc(&[
        "-n",
        ns,
        "qdisc",
        "add",
        "dev",
        dev,
        "parent",
        "1:10",
        "handle",
        "10:",
        "pfifo_fast",
    ])
}

/// Deletes `dev`'s root qdisc in `ns`; nothing if it has none.
fn unshape(ns: &str, dev: &str) -> Result<(), Error> {
    match tc(&["-n", ns, "qdisc", "del", "dev", dev, "root"]) {
        // tc's way of saying there is no root qdisc to delete.
        Err(Error::Command { stderr, .. }) if stderr.contains("handle of zero") => Ok(()),
        other => other,
    }
}

/// Writes `value` to `/proc/sys/<key>` inside namespace `ns`.
fn sysctl(ns: &str, key: &str, value: &str) -> Result<(), Error> {
    let script = format!("echo {value} > /proc/sys/{key}");
    run("ip", &["netns", "exec", ns, "sh", "-c", &script])
}

fn ip(args: &[&str]) -> Result<(), Error> {
    run("ip", args)
}

fn tc(args: &[&str]) -> Result<(), Error> {
    run("tc", args)
}

/// Runs a configuration command to completion; its stderr becomes the error.
fn run(program: &str, args: &[&str]) -> Result<(), Error> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program).args(args).output().map_err(|e| {
        let err = Error::Spawn {
            command: command.clone(),
            reason: e.to_string(),
        };
        debug!(%err);
        err
    })?;
    if output.status.success() {
        return Ok(());
    }
    let err = Error::Command {
        command,
        status: output.status.to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    };
    debug!(%err);
    Err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_pid_and_subnet() {
        assert_eq!(
            parse_name("twk4194304-14335h12"),
            Some((4194304, "14335h12"))
        );
        assert_eq!(subnet_of("14335h12"), Some(14335));
        assert_eq!(subnet_of("7s"), Some(7));
        assert_eq!(
            parse_name("twk77-probe").and_then(|(_, t)| subnet_of(t)),
            None
        );
        assert_eq!(parse_name("docker-1"), None);
        assert_eq!(parse_name("twkx-1s"), None);
    }

    #[test]
    fn subnets_span_10_200_to_10_255() {
        assert_eq!(host_addr(0, 0), Ipv4Addr::new(10, 200, 0, 1));
        assert_eq!(
            host_addr(SUBNETS - 1, MAX_HOSTS - 1),
            Ipv4Addr::new(10, 255, 255, 253)
        );
    }
}
