//! Zenoh and iceoryx2 as peers in the same run: their programs are the
//! `tagwire-peers` binary of `proof/peers` (a crate of its own, so that the
//! default build stays lean; `.ci/run` builds it), run as processes the way
//! [`crate::ddsperf`] runs Cyclone DDS: on the same CPUs as tagwire's sender
//! and receiver, and across hosts inside the same network namespaces.
//!
//! * Zenoh: TCP, peer mode, no scouting; throughput is `zenoh-pub` (flat
//!   out, congestion control `Block`: nothing dropped) into `zenoh-sub`,
//!   which counts and compares with what the publisher says it sent; round
//!   trip is `zenoh-ping` against `zenoh-pong`.
//! * iceoryx2: round trip, blocking on an event service or busy-polling;
//!   throughput, `iox2-pub` flat out (held back while the subscriber's
//!   buffer is full, so nothing is dropped) into a busy-polling `iox2-sub`
//!   that checks the numbering.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;

use crate::child::Proc;
use crate::report::Record;
use crate::stats::Point;

/// The environment variable naming the `tagwire-peers` binary (`off`: do
/// not run the peers).
pub const ENV: &str = "TAGWIRE_PEERS";

/// Where and how the two sides of a peer run.
#[derive(Debug, Clone)]
pub struct PeerOpts {
    /// The `tagwire-peers` binary.
    pub exe: PathBuf,
    /// CPUs of the sending side (publisher, ping) and the receiving side
    /// (subscriber, pong).
    pub cpus: Option<(usize, usize)>,
    /// Network namespaces of the sending and the receiving side, and the
    /// receiving side's address there (multi-host runs).
    pub netns: Option<(String, String, IpAddr)>,
}

/// The `tagwire-peers` binary: `$TAGWIRE_PEERS`, or
/// `target/peers/release/tagwire-peers` beside the running `tagwire`'s
/// target directory, or the reason it is not there.
pub fn available() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(ENV) {
        if p == "off" {
            return Err(format!("the peers are off ({ENV}=off)"));
        }
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{ENV}={} is not a file", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    // target/<profile>/tagwire or target/<profile>/deps/<test>.
    let found = exe
        .ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join("peers/release/tagwire-peers"))
        .find(|p| p.is_file());
    found.ok_or_else(|| {
        "tagwire-peers is not built (Zenoh, iceoryx2): cargo build --release \
         --manifest-path proof/peers/Cargo.toml --target-dir target/peers"
            .to_string()
    })
}

impl PeerOpts {
    /// On this host, pinned to `cpus`.
    pub fn local(exe: PathBuf, cpus: Option<(usize, usize)>) -> Self {
        Self {
            exe,
            cpus,
            netns: None,
        }
    }

    fn spawn(&self, receiving: bool, args: &[String]) -> anyhow::Result<Proc> {
        let cpu = self.cpus.map(|c| if receiving { c.1 } else { c.0 });
        let ns = self.netns.as_ref().map(|n| {
            if receiving {
                n.1.as_str()
            } else {
                n.0.as_str()
            }
        });
        Proc::spawn(&self.exe, args, &[], cpu, ns)
    }

    /// A fresh TCP endpoint on the receiving side.
    fn endpoint(&self) -> String {
        static NEXT: AtomicU16 = AtomicU16::new(0);
        let port = 17400 + NEXT.fetch_add(1, Ordering::Relaxed) % 500;
        let addr = self
            .netns
            .as_ref()
            .map_or(IpAddr::from([127, 0, 0, 1]), |n| n.2);
        format!("tcp/{addr}:{port}")
    }
}

/// A Zenoh or iceoryx2 throughput measurement.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct PeerThroughput {
    /// Samples per second at the subscriber, over the measured window.
    pub msgs_per_s: f64,
    /// Samples the publisher sent, and the subscriber received, in all.
    pub sent: u64,
    /// See `sent`.
    pub received: u64,
    /// `sent - received`.
    pub lost: u64,
}

impl PeerThroughput {
    /// Hands a peer's throughput run to `add` (repetition, system, size,
    /// rate, note: `how`, then what was sent, received and lost) or, when
    /// it failed, a skipped record saying why to `skipped`.
    pub fn record(
        run: anyhow::Result<Self>,
        (rep, system, size, how): (usize, &str, u64, &str),
        add: &mut impl FnMut(usize, &str, u64, f64, String),
        skipped: &mut Vec<Record>,
    ) {
        match run {
            Ok(t) => add(
                rep,
                system,
                size,
                t.msgs_per_s,
                format!(
                    "{how}; sent {} received {} lost {}",
                    t.sent, t.received, t.lost
                ),
            ),
            Err(e) => skipped.push(Record::skipped(
                "throughput",
                system,
                "block",
                size,
                &format!("{system} failed: {e:#}"),
            )),
        }
    }
}

#[derive(Deserialize)]
struct Rtt {
    p50_us: f64,
    p99_us: f64,
}

fn last_json<T: for<'a> Deserialize<'a>>(out: &str, what: &str) -> anyhow::Result<T> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("{what} printed no result; output:\n{out}"))?;
    serde_json::from_str(line).with_context(|| format!("{what}'s result line: {line}"))
}

/// `size`-byte samples from a flat-out `zenoh-pub` into `zenoh-sub` for
/// about `seconds` seconds.
pub fn zenoh_throughput(o: &PeerOpts, size: usize, seconds: f64) -> anyhow::Result<PeerThroughput> {
    let ep = o.endpoint();
    let sub = ["zenoh-sub", "--listen", &ep].map(String::from);
    let publ = ["zenoh-pub", "--connect", &ep].map(String::from);
    pub_sub(o, &sub, &publ, size, seconds, 300)
}

/// `size`-byte samples from a flat-out `iox2-pub` into `iox2-sub` on this
/// host for about `seconds` seconds.
pub fn iox2_throughput(o: &PeerOpts, size: usize, seconds: f64) -> anyhow::Result<PeerThroughput> {
    let name = iox2_name(o);
    let sub = ["iox2-sub", "--name", &name].map(String::from);
    let publ = ["iox2-pub", "--name", &name].map(String::from);
    pub_sub(o, &sub, &publ, size, seconds, 200)
}

/// A service name of its own for one iceoryx2 measurement.
fn iox2_name(o: &PeerOpts) -> String {
    format!(
        "tagwire-perf-{}-{}",
        std::process::id(),
        o.endpoint().rsplit(':').next().unwrap_or("0")
    )
}

/// Starts the subscriber (`sub` arguments, measuring `seconds`), lets it
/// settle `settle_ms`, runs the publisher (`publ` arguments) flat out past
/// the subscriber's window (its warm-up is 0.5 s), and reads the
/// subscriber's result line.
fn pub_sub(
    o: &PeerOpts,
    sub: &[String],
    publ: &[String],
    size: usize,
    seconds: f64,
    settle_ms: u64,
) -> anyhow::Result<PeerThroughput> {
    let mut sub_args = sub.to_vec();
    sub_args.extend(["--seconds".into(), format!("{seconds}")]);
    let what = sub.first().map_or("sub", String::as_str).to_owned();
    let sub = o.spawn(true, &sub_args)?;
    std::thread::sleep(Duration::from_millis(settle_ms));
    let mut pub_args = publ.to_vec();
    pub_args.extend([
        "--size".into(),
        size.to_string(),
        "--seconds".into(),
        format!("{}", seconds + 1.0),
    ]);
    o.spawn(false, &pub_args)?
        .output(Duration::from_secs_f64(seconds + 40.0))?;
    let out = sub.output(Duration::from_secs(10))?;
    last_json(&out, &what)
}

/// A Zenoh stream flat out through a bottleneck (`zenoh-stream-pub` into
/// `zenoh-stream-sub`): the measured window's payload Mbit/s and one-way
/// latency (ms), and what was sent, received, missing and out of order.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct ZenohStream {
    /// Delivered payload, Mbit/s, over the window's receipts.
    pub mbit_s: f64,
    /// One-way latency, ms.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// See `p50_ms`.
    pub max_ms: f64,
    /// Samples in the window.
    pub n: u64,
    /// Samples sent in all.
    pub sent: u64,
    /// Samples received in all.
    pub received: u64,
    /// `sent - received`.
    pub lost: u64,
    /// Samples whose number was not the one after the previous one's.
    pub disordered: u64,
}

/// `size`-byte stamped samples from a flat-out `zenoh-stream-pub` into
/// `zenoh-stream-sub` for `warm + seconds` (plus a second), measuring the
/// samples sent in the last `seconds`.
pub fn zenoh_stream(
    o: &PeerOpts,
    size: usize,
    warm: Duration,
    seconds: Duration,
) -> anyhow::Result<ZenohStream> {
    let ep = o.endpoint();
    let (warm, seconds) = (warm.as_secs_f64(), seconds.as_secs_f64());
    let sub = o.spawn(
        true,
        &[
            "zenoh-stream-sub".into(),
            "--listen".into(),
            ep.clone(),
            "--warm".into(),
            format!("{warm}"),
            "--seconds".into(),
            format!("{seconds}"),
        ],
    )?;
    std::thread::sleep(Duration::from_millis(300));
    o.spawn(
        false,
        &[
            "zenoh-stream-pub".into(),
            "--connect".into(),
            ep,
            "--size".into(),
            size.to_string(),
            "--seconds".into(),
            format!("{}", warm + seconds + 1.0),
        ],
    )?
    .output(Duration::from_secs_f64(warm + seconds + 60.0))?;
    let out = sub.output(Duration::from_secs(30))?;
    last_json(&out, "zenoh-stream-sub")
}

/// Round trip of `size`-byte samples, `zenoh-ping` against `zenoh-pong`.
pub fn zenoh_rtt(o: &PeerOpts, size: usize, iters: usize, warmup: usize) -> anyhow::Result<Point> {
    let ep = o.endpoint();
    let pong = ["zenoh-pong", "--listen", &ep].map(String::from);
    let ping = ["zenoh-ping", "--connect", &ep].map(String::from);
    ping_pong(o, &pong, &ping, (size, iters, warmup), 300)
}

/// Round trip of `size`-byte samples, `iox2-ping` against `iox2-pong`,
/// both waiting the same way: `block` (event service) or `spin`. The pong
/// copies each ping out; the ping copies each answer out too, or, with
/// `peek`, looks at its header only (as iceoryx2's own benchmark does).
pub fn iox2_rtt(
    o: &PeerOpts,
    (spin, peek): (bool, bool),
    size: usize,
    iters: usize,
    warmup: usize,
) -> anyhow::Result<Point> {
    let mode = if spin { "spin" } else { "block" };
    let name = iox2_name(o);
    let pong = ["iox2-pong", "--mode", mode, "--name", &name].map(String::from);
    let mut ping = ["iox2-ping", "--mode", mode, "--name", &name]
        .map(String::from)
        .to_vec();
    if peek {
        ping.push("--peek".into());
    }
    ping_pong(o, &pong, &ping, (size, iters, warmup), 200)
}

/// Starts the pong (`pong` arguments), lets it settle `settle_ms`, runs the
/// ping (`ping` arguments and the round trips' size, count and warm-up) to
/// its result line, then stops the pong.
fn ping_pong(
    o: &PeerOpts,
    pong: &[String],
    ping: &[String],
    (size, iters, warmup): (usize, usize, usize),
    settle_ms: u64,
) -> anyhow::Result<Point> {
    let mut pong = o.spawn(true, pong)?;
    std::thread::sleep(Duration::from_millis(settle_ms));
    let mut args = ping.to_vec();
    for (k, v) in [("--size", size), ("--iters", iters), ("--warmup", warmup)] {
        args.push(k.into());
        args.push(v.to_string());
    }
    let what = ping.first().map_or("ping", String::as_str).to_owned();
    let r = o.spawn(false, &args)?.output(Duration::from_secs(120));
    pong.finish();
    let r: Rtt = last_json(&r?, &what)?;
    Ok(Point {
        p50_us: r.p50_us,
        p99_us: r.p99_us,
    })
}

/// Zenoh's measured channel beside its load, as `tagwire perf priority`
/// runs it: round trips at `RealTime` while a paced stream at the default
/// priority shares the session.
#[derive(Debug, Clone)]
pub struct ZenohPrio {
    /// The real-time priority on a TCP link of its own, with the critical
    /// class's TOS (Zenoh's best configuration); else one shared link.
    pub own_link: bool,
    /// Request and reply size, bytes.
    pub size: usize,
    /// Pause between a reply and the next request.
    pub gap: Duration,
    /// Load before the measured window.
    pub warmup: Duration,
    /// The measured window.
    pub measure: Duration,
    /// Load message size, bytes.
    pub load_size: usize,
    /// Load messages per second (0: none).
    pub load_per_s: f64,
    /// `chrt` arguments (`-f 40`) to run both processes, every thread, at
    /// a real-time policy: Zenoh has no policy of its own per channel, so
    /// this is the nearest its users get to tagwire's `--sched`.
    pub chrt: Option<[String; 2]>,
    /// Figure 5b: the network namespace the load runs in, from a process
    /// of its own (`zenoh-prio-load`), to the pong's shared link; `None`:
    /// the ping's own session sends it.
    pub load_netns: Option<String>,
}

/// What `zenoh-prio-ping` measured: round trips (µs) and the load's
/// payload Mbit/s as the far side received it.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct ZenohPrioRun {
    /// Round trips measured.
    pub n: usize,
    /// Mean, µs.
    pub mean_us: f64,
    /// Standard deviation, µs.
    pub std_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Longest, µs.
    pub max_us: f64,
    /// Load payload the far side received over the window, Mbit/s.
    pub load_mbit_s: f64,
}

/// One run of [`ZenohPrio`]: `zenoh-prio-pong` on the receiving side,
/// `zenoh-prio-ping` (with the load) on the sending side.
pub fn zenoh_priority(o: &PeerOpts, z: &ZenohPrio) -> anyhow::Result<ZenohPrioRun> {
    let ep = o.endpoint();
    // The own link listens one port up: keep the next endpoint off it.
    let _ = o.endpoint();
    let mut pong = vec![
        "zenoh-prio-pong",
        "--listen",
        &ep,
        "--priority",
        "real-time",
    ];
    let mut ping = vec![
        "zenoh-prio-ping",
        "--connect",
        &ep,
        "--priority",
        "real-time",
    ];
    if z.own_link {
        pong.push("--own-link");
        ping.push("--own-link");
    }
    let mut ping: Vec<String> = ping.into_iter().map(String::from).collect();
    for (k, v) in [
        ("--size", z.size.to_string()),
        ("--gap-us", z.gap.as_micros().to_string()),
        ("--warmup", z.warmup.as_secs_f64().to_string()),
        ("--seconds", z.measure.as_secs_f64().to_string()),
        ("--load-size", z.load_size.to_string()),
        ("--load-per-s", z.load_per_s.to_string()),
    ] {
        ping.push(k.into());
        ping.push(v);
    }
    let mut pong: Vec<String> = pong.into_iter().map(String::from).collect();
    // Figure 5b: the load from a process of its own on a third host, to
    // the pong's shared link; the ping sends none.
    let mut load: Option<(String, Vec<String>)> = z.load_netns.as_ref().map(|ns| {
        let seconds = z.warmup + z.measure + Duration::from_secs(2);
        let args = [
            "zenoh-prio-load".to_owned(),
            "--connect".into(),
            ep.clone(),
            "--load-size".into(),
            z.load_size.to_string(),
            "--load-per-s".into(),
            z.load_per_s.to_string(),
            "--seconds".into(),
            seconds.as_secs_f64().to_string(),
        ];
        (ns.clone(), args.to_vec())
    });
    if load.is_some() {
        if let Some(i) = ping.iter().position(|a| a == "--load-per-s") {
            ping[i + 1] = "0".into();
        }
    }
    let mut o = o.clone();
    if let Some(policy) = &z.chrt {
        // `chrt -f 40 tagwire-peers …`: the policy is inherited by every
        // thread the program starts.
        let exe = std::mem::replace(&mut o.exe, PathBuf::from("chrt"));
        let exe = exe.to_string_lossy().into_owned();
        let loads = load.iter_mut().map(|(_, a)| a);
        for args in [&mut pong, &mut ping].into_iter().chain(loads) {
            let mut with = policy.to_vec();
            with.push(exe.clone());
            with.append(args);
            *args = with;
        }
    }
    let mut pong = o.spawn(true, &pong)?;
    std::thread::sleep(Duration::from_millis(300));
    let mut loader = match &load {
        Some((ns, args)) => Some(Proc::spawn(&o.exe, args, &[], None, Some(ns.as_str()))?),
        None => None,
    };
    let limit = z.warmup + z.measure + Duration::from_secs(60);
    let r = o.spawn(false, &ping)?.output(limit);
    if let Some(l) = loader.as_mut() {
        l.finish();
    }
    pong.finish();
    last_json(&r?, "zenoh-prio-ping")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_are_read_past_log_lines() {
        let out = "log line\n{\"msgs_per_s\":10.5,\"received\":3,\"sent\":4,\"lost\":1}\n";
        let t: PeerThroughput = last_json(out, "x").unwrap();
        assert_eq!((t.sent, t.received, t.lost), (4, 3, 1));
        assert!(last_json::<PeerThroughput>("nothing", "x").is_err());
        assert!(last_json::<Rtt>("{\"p50_us\":\"x\"}", "x").is_err());
    }

    #[test]
    fn peers_run_if_built() {
        let exe = match available() {
            Ok(e) => e,
            Err(reason) => {
                println!("skipping: {reason}");
                return;
            }
        };
        let o = PeerOpts::local(exe, None);
        for how in [(false, false), (true, true)] {
            let p = iox2_rtt(&o, how, 256, 200, 20).expect("iceoryx2 round trip");
            assert!(p.p50_us > 0.0 && p.p99_us >= p.p50_us, "{p:?}");
        }
        let p = zenoh_rtt(&o, 256, 200, 20).expect("zenoh round trip");
        assert!(p.p50_us > 0.0 && p.p99_us >= p.p50_us, "{p:?}");
        let t = zenoh_throughput(&o, 1024, 1.0).expect("zenoh throughput");
        assert!(t.msgs_per_s > 0.0 && t.received > 0, "{t:?}");
        assert_eq!(t.lost, 0, "{t:?}");
        let t = iox2_throughput(&o, 1024, 1.0).expect("iceoryx2 throughput");
        assert!(t.msgs_per_s > 0.0 && t.received > 0, "{t:?}");
        assert_eq!(t.lost, 0, "{t:?}");
        let s = zenoh_stream(
            &o,
            20_000,
            Duration::from_millis(300),
            Duration::from_secs(1),
        )
        .expect("zenoh stream");
        assert!(s.mbit_s > 0.0 && s.n > 0 && s.received == s.sent, "{s:?}");
        assert!(
            s.p50_ms > 0.0 && s.max_ms >= s.p99_ms && s.p99_ms >= s.p50_ms,
            "{s:?}"
        );
        assert_eq!((s.lost, s.disordered), (0, 0), "{s:?}");
    }
}
