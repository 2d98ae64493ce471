//! Cyclone DDS's `ddsperf` as an external peer.
//!
//! Two `ddsperf` processes are started per measurement, with
//! `CYCLONEDDS_URI=file://<config>` pointing at a loopback-only
//! configuration (without it Cyclone picks the outside interface), on a
//! private DDS domain (`-i`, derived from our pid) so that concurrent
//! `ddsperf` runs by others on the same host do not match ours.
//!
//! * Latency ([`rtt`]): `ddsperf -D<s+5> pong` and `ddsperf -D<s+2> ping size S`
//!   (the pong is stopped once the ping has exited).
//!   The ping side prints one line per second per peer:
//!
//!   ```text
//!   [4907] 3.000  vm:4897 size 256 mean 94.967us min 10.189us 50% 60.774us 90% 191.009us 99% 366.314us max 5246.752us cnt 5259
//!   ```
//!
//!   Its latency figures are **half** the round trip ((t_now − t_send)/2);
//!   `cnt` is the number of round trips in that second (ping sends the next
//!   ping when the pong arrives). Usually no line appears for the first
//!   second (discovery); the first line that does appear is dropped as well;
//!   the two extra seconds of `-D` make up for both. [`DdsRtt`] holds
//!   the **doubled** values: p50 = median over the seconds of the per-second
//!   `50%` figure ×2, p99 likewise from `99%`.
//! * Throughput ([`throughput`]): `ddsperf -D<s+5> sub` and
//!   `ddsperf -D<s+2> pub size S`. The subscriber prints
//!
//!   ```text
//!   [4934] 2.000  size 256 total 971819 lost 0 delta 524844 lost 0 rate 524.84 kS/s 1074.86 Mb/s (97.18 kS/s 199.03 Mb/s)
//!   ```
//!
//!   Lines with no data are ignored, the first data line (discovery, partial
//!   second) and the last (publisher stopping) are dropped, and the result
//!   is the median `rate` of the rest.
//!   The subscriber is stopped (SIGTERM) once the publisher has exited.
//!
//! **Size:** `ddsperf`'s `size` is the whole sample including its 12-byte
//! fixed header (sequence number, key, length), so it cannot go below 12.
//! The `size` given here is passed as `max(size, 12)`: the sample size
//! equals the requested message size; the size actually used is reported
//! back ([`DdsRtt::size`], [`DdsThroughput::size`]).
//!
//! Child processes are owned by a guard that terminates them on every path
//! out of a measurement, errors and panics included.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

use crate::child::Proc;
use crate::stats::median;

/// File name of the loopback configuration.
pub const CONFIG_FILE_NAME: &str = "cyclone-loopback.xml";

/// The loopback configuration shipped with this crate
/// (`proof/perf/cyclone-loopback.xml`).
pub const BUNDLED_CONFIG_XML: &str = include_str!("../cyclone-loopback.xml");

/// Smallest sample `ddsperf` can send (its fixed header).
pub const MIN_SIZE: u64 = 12;

/// Finds the `ddsperf` executable: `$PATH`, then `/usr/bin/ddsperf`.
/// The error is a reason meant to be printed.
pub fn available() -> Result<PathBuf, String> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("ddsperf"))
                .collect()
        })
        .unwrap_or_default();
    candidates.push(PathBuf::from("/usr/bin/ddsperf"));
    candidates
        .into_iter()
        .find(|p| is_executable(p))
        .ok_or_else(|| "ddsperf not found; install Debian package cyclonedds-tools".to_string())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The crate's own copy of the loopback configuration, on disk.
pub fn bundled_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(CONFIG_FILE_NAME)
}

/// The loopback configuration: `$TAGWIRE_CYCLONE_CONFIG` if it names a
/// file, else the copy shipped in this crate ([`bundled_config`]).
pub fn default_config() -> Option<PathBuf> {
    let chosen = std::env::var_os("TAGWIRE_CYCLONE_CONFIG").map(PathBuf::from);
    [chosen, Some(bundled_config())]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or(p))
}

/// How to run `ddsperf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdsOpts {
    /// The `ddsperf` executable.
    pub ddsperf: PathBuf,
    /// Cyclone XML configuration (loopback only).
    pub config: PathBuf,
    /// DDS domain id (`-i`); keep it private to this run.
    pub domain: u32,
    /// `(first, second)`: pin pong/sub to `first` and ping/pub to `second`.
    pub cpus: Option<(usize, usize)>,
    /// `(first, second)`: run pong/sub and ping/pub in these network
    /// namespaces (`ip netns exec`), for the multi-host benchmarks.
    pub netns: Option<(String, String)>,
}

impl DdsOpts {
    /// Options with a domain id derived from our pid (100..=199) and no pinning.
    pub fn new(ddsperf: PathBuf, config: PathBuf) -> DdsOpts {
        DdsOpts {
            ddsperf,
            config,
            domain: 100 + std::process::id() % 100,
            cpus: None,
            netns: None,
        }
    }

    /// [`available`] + [`default_config`]; the error is a printable reason.
    pub fn detect() -> Result<DdsOpts, String> {
        let exe = available()?;
        let cfg = default_config().ok_or_else(|| format!("no {CONFIG_FILE_NAME} found"))?;
        Ok(DdsOpts::new(exe, cfg))
    }
}

/// One second of `ddsperf ping` output, converted to **true round trips**
/// (the printed latencies doubled).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdsRttSecond {
    /// ddsperf's timestamp (seconds since its start).
    pub t_s: f64,
    /// Sample size as printed.
    pub size: u64,
    /// Mean round trip, µs.
    pub mean_us: f64,
    /// Minimum round trip, µs.
    pub min_us: f64,
    /// Median round trip, µs.
    pub p50_us: f64,
    /// 90th percentile round trip, µs.
    pub p90_us: f64,
    /// 99th percentile round trip, µs.
    pub p99_us: f64,
    /// Maximum round trip, µs.
    pub max_us: f64,
    /// Round trips completed in that second.
    pub count: u64,
}

/// Result of a `ddsperf` ping-pong.
#[derive(Debug, Clone, PartialEq)]
pub struct DdsRtt {
    /// The `ddsperf` sample size used (`max(size, 12)`).
    pub size: u64,
    /// Median over the seconds of the per-second median round trip, µs.
    pub p50_us: f64,
    /// Median over the seconds of the per-second 99th percentile round trip, µs.
    pub p99_us: f64,
    /// Count-weighted mean round trip, µs.
    pub mean_us: f64,
    /// Mean round trip derived from the counts (1 s / round trips per s), µs:
    /// a cross-check that includes ping's own processing.
    pub rtt_from_count_us: f64,
    /// Total round trips in the kept seconds.
    pub roundtrips: u64,
    /// The kept per-second lines (first line dropped).
    pub seconds: Vec<DdsRttSecond>,
}

/// Result of a `ddsperf` pub/sub throughput run.
#[derive(Debug, Clone, PartialEq)]
pub struct DdsThroughput {
    /// The `ddsperf` sample size used (`max(size, 12)`).
    pub size: u64,
    /// Median of the kept per-second rates, samples/s.
    pub msgs_per_s: f64,
    /// Kept per-second rates, samples/s (first data line dropped).
    pub per_second: Vec<f64>,
    /// Samples the subscriber reported lost (over the whole run).
    pub lost: u64,
}

fn parse_value(tok: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = tok.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = tok.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = tok.strip_suffix("ns") {
        (n, 1e-3)
    } else if let Some(n) = tok.strip_suffix('s') {
        (n, 1e6)
    } else {
        (tok, 1.0)
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale)
}

/// Token following the first occurrence of `key` in `toks`.
fn after<'a>(toks: &[&'a str], key: &str) -> Option<&'a str> {
    let i = toks.iter().position(|t| *t == key)?;
    toks.get(i + 1).copied()
}

/// Parses a `ddsperf ping` latency line, doubling the latencies. Returns
/// `None` for any other line.
pub fn parse_ping_line(line: &str) -> Option<DdsRttSecond> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    // "[pid] t  peer size S mean ..": require the latency keys.
    if !toks.first()?.starts_with('[') || !toks.contains(&"mean") || !toks.contains(&"cnt") {
        return None;
    }
    let lat = |k: &str| after(&toks, k).and_then(parse_value).map(|v| 2.0 * v);
    Some(DdsRttSecond {
        t_s: toks.get(1)?.parse().ok()?,
        size: after(&toks, "size")?.parse().ok()?,
        mean_us: lat("mean")?,
        min_us: lat("min")?,
        p50_us: lat("50%")?,
        p90_us: lat("90%")?,
        p99_us: lat("99%")?,
        max_us: lat("max")?,
        count: after(&toks, "cnt")?.parse().ok()?,
    })
}

/// One second of `ddsperf sub` output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdsSubSecond {
    /// ddsperf's timestamp (seconds since its start).
    pub t_s: f64,
    /// Sample size as printed.
    pub size: u64,
    /// Samples received since the start.
    pub total: u64,
    /// Samples lost since the start.
    pub lost: u64,
    /// Samples received in this interval.
    pub delta: u64,
    /// Rate in this interval, samples/s.
    pub rate: f64,
}

/// Parses a `ddsperf sub` rate line. Returns `None` for any other line.
pub fn parse_sub_line(line: &str) -> Option<DdsSubSecond> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    if !toks.first()?.starts_with('[') || !toks.contains(&"delta") || !toks.contains(&"rate") {
        return None;
    }
    let rate_at = toks.iter().position(|t| *t == "rate")?;
    let value: f64 = toks.get(rate_at + 1)?.parse().ok()?;
    let scale = match *toks.get(rate_at + 2)? {
        "S/s" => 1.0,
        "kS/s" => 1e3,
        "MS/s" => 1e6,
        "GS/s" => 1e9,
        _ => return None,
    };
    Some(DdsSubSecond {
        t_s: toks.get(1)?.parse().ok()?,
        size: after(&toks, "size")?.parse().ok()?,
        total: after(&toks, "total")?.parse().ok()?,
        lost: after(&toks, "lost")?.parse().ok()?,
        delta: after(&toks, "delta")?.parse().ok()?,
        rate: value * scale,
    })
}

/// Turns a ping's whole output into a [`DdsRtt`], dropping the first
/// latency line.
pub fn summarize_ping_output(text: &str) -> anyhow::Result<DdsRtt> {
    let lines: Vec<DdsRttSecond> = text.lines().filter_map(parse_ping_line).collect();
    let kept: Vec<DdsRttSecond> = lines
        .iter()
        .skip(1)
        .copied()
        .filter(|l| l.count > 0)
        .collect();
    if kept.is_empty() {
        bail!(
            "ddsperf ping printed {} latency line(s), none left after dropping the first",
            lines.len()
        );
    }
    let p50: Vec<f64> = kept.iter().map(|l| l.p50_us).collect();
    let p99: Vec<f64> = kept.iter().map(|l| l.p99_us).collect();
    let roundtrips: u64 = kept.iter().map(|l| l.count).sum();
    let mean_us = kept.iter().map(|l| l.mean_us * l.count as f64).sum::<f64>() / roundtrips as f64;
    Ok(DdsRtt {
        size: kept[0].size,
        p50_us: median(&p50).ok_or_else(|| anyhow!("no p50"))?,
        p99_us: median(&p99).ok_or_else(|| anyhow!("no p99"))?,
        mean_us,
        rtt_from_count_us: kept.len() as f64 * 1e6 / roundtrips as f64,
        roundtrips,
        seconds: kept,
    })
}

/// Turns a subscriber's whole output into a [`DdsThroughput`]: lines with
/// no data are ignored, the first data line (discovery, partial second) and
/// the last (the publisher stopping, possibly a partial second) are
/// dropped, and the result is the median of the rest.
pub fn summarize_sub_output(text: &str) -> anyhow::Result<DdsThroughput> {
    let lines: Vec<DdsSubSecond> = text.lines().filter_map(parse_sub_line).collect();
    let data: Vec<&DdsSubSecond> = lines.iter().filter(|l| l.delta > 0).collect();
    let per_second: Vec<f64> = data
        .iter()
        .skip(1)
        .take(data.len().saturating_sub(2))
        .map(|l| l.rate)
        .collect();
    let msgs_per_s = median(&per_second).ok_or_else(|| {
        anyhow!(
            "ddsperf sub printed {} data line(s), none left after dropping the first and last",
            data.len()
        )
    })?;
    Ok(DdsThroughput {
        size: data.first().map(|l| l.size).unwrap_or(0),
        msgs_per_s,
        per_second,
        lost: lines.iter().map(|l| l.lost).max().unwrap_or(0),
    })
}

/// `ddsperf` with `args` under `opts`' Cyclone configuration.
fn spawn(
    opts: &DdsOpts,
    args: &[String],
    cpu: Option<usize>,
    netns: Option<&str>,
) -> anyhow::Result<Proc> {
    let config = opts
        .config
        .canonicalize()
        .with_context(|| format!("Cyclone config {}", opts.config.display()))?;
    let env = [(
        "CYCLONEDDS_URI".to_string(),
        format!("file://{}", config.display()),
    )];
    Proc::spawn(&opts.ddsperf, args, &env, cpu, netns)
}

/// Runs `first` (pong/sub, `-D<secs+3>`), then `second` (ping/pub,
/// `-D<secs>`) to completion, then stops `first`. Returns both outputs.
fn run_pair(
    opts: &DdsOpts,
    first_mode: &[&str],
    second_mode: &[&str],
    seconds: u32,
) -> anyhow::Result<(String, String)> {
    let common = |d: u32, mode: &[&str]| -> Vec<String> {
        let mut v = vec![format!("-D{d}"), "-i".to_string(), opts.domain.to_string()];
        v.extend(mode.iter().map(|s| s.to_string()));
        v
    };
    let (cpu_a, cpu_b) = match opts.cpus {
        Some((a, b)) => (Some(a), Some(b)),
        None => (None, None),
    };
    let (ns_a, ns_b) = match &opts.netns {
        Some((a, b)) => (Some(a.as_str()), Some(b.as_str())),
        None => (None, None),
    };
    let mut first = spawn(opts, &common(seconds + 3, first_mode), cpu_a, ns_a)?;
    thread::sleep(Duration::from_millis(100));
    let mut second = spawn(opts, &common(seconds, second_mode), cpu_b, ns_b)?;
    let status = second.wait_timeout(Duration::from_secs(u64::from(seconds) + 20))?;
    let second_out = second.finish();
    let first_out = first.finish();
    match status {
        None => bail!(
            "{} did not finish in time; output:\n{second_out}",
            second.what()
        ),
        Some(st) if !st.success() => bail!(
            "{} failed ({st}); output:\n{second_out}\npeer output:\n{first_out}",
            second.what()
        ),
        Some(_) => Ok((first_out, second_out)),
    }
}

/// Round trip of `size`-byte samples for about `seconds` seconds against a
/// `ddsperf pong`, using the `ddsperf` found by [`available`] and the given
/// Cyclone configuration.
pub fn rtt(size: u64, seconds: u32, config: &Path) -> anyhow::Result<DdsRtt> {
    let exe = available().map_err(|e| anyhow!(e))?;
    rtt_with(size, seconds, &DdsOpts::new(exe, config.to_path_buf()))
}

/// [`rtt`] with explicit options.
pub fn rtt_with(size: u64, seconds: u32, opts: &DdsOpts) -> anyhow::Result<DdsRtt> {
    if seconds == 0 {
        bail!("seconds must be at least 1");
    }
    let s = size.max(MIN_SIZE).to_string();
    // ping prints no line for the first second (discovery) and the first
    // line it prints is dropped: two extra seconds keep `seconds` lines.
    let (_, ping_out) = run_pair(opts, &["pong"], &["ping", "size", &s], seconds + 2)?;
    summarize_ping_output(&ping_out).with_context(|| format!("ddsperf ping output:\n{ping_out}"))
}

/// `ddsperf -D<seconds> <mode…>` alone (its peer is a tagwire process:
/// `crate::ddsgateway`), on the second CPU and namespace of `opts`; returns
/// what it printed once it exited successfully.
pub fn run_alone(opts: &DdsOpts, mode: &[&str], seconds: u32) -> anyhow::Result<String> {
    let mut args = vec![
        format!("-D{seconds}"),
        "-i".to_string(),
        opts.domain.to_string(),
    ];
    args.extend(mode.iter().map(|m| m.to_string()));
    let (cpu, ns) = (
        opts.cpus.map(|c| c.1),
        opts.netns.as_ref().map(|n| n.1.as_str()),
    );
    spawn(opts, &args, cpu, ns)?.output(Duration::from_secs(u64::from(seconds) + 20))
}

/// `ddsperf ping` alone for about `seconds` seconds, against whatever
/// answers in its domain (a tagwire pong: `crate::ddsgateway`).
pub fn ping_with(size: u64, seconds: u32, opts: &DdsOpts) -> anyhow::Result<DdsRtt> {
    if seconds == 0 {
        bail!("seconds must be at least 1");
    }
    let s = size.max(MIN_SIZE).to_string();
    let out = run_alone(opts, &["ping", "size", &s], seconds + 2)?;
    summarize_ping_output(&out).with_context(|| format!("ddsperf ping output:\n{out}"))
}

/// Messages per second of `size`-byte samples, `ddsperf pub` to
/// `ddsperf sub`, for about `seconds` seconds.
pub fn throughput(size: u64, seconds: u32, config: &Path) -> anyhow::Result<f64> {
    let exe = available().map_err(|e| anyhow!(e))?;
    Ok(throughput_with(size, seconds, &DdsOpts::new(exe, config.to_path_buf()))?.msgs_per_s)
}

/// [`throughput`] with explicit options and the per-second detail.
pub fn throughput_with(size: u64, seconds: u32, opts: &DdsOpts) -> anyhow::Result<DdsThroughput> {
    if seconds == 0 {
        bail!("seconds must be at least 1");
    }
    let s = size.max(MIN_SIZE).to_string();
    // Two extra seconds: the first and last data lines are dropped.
    let (sub_out, _) = run_pair(opts, &["sub"], &["pub", "size", &s], seconds + 2)?;
    summarize_sub_output(&sub_out).with_context(|| format!("ddsperf sub output:\n{sub_out}"))
}

/// A `ddsperf` ping/pong beside a `ddsperf` pub/sub load on a domain of
/// its own (every `ddsperf` process answers pings, so a load on the ping's
/// domain would answer it too): the Cyclone DDS rows of
/// `crate::priority`.
#[derive(Debug, Clone)]
pub struct PingBesideLoad {
    /// Ping and pong sample size (`max(size, 12)`).
    pub size: u64,
    /// Pings per second (`ping R Hz`: sent at that rate whether or not
    /// the last pong came back).
    pub ping_hz: u32,
    /// Seconds of load before the ping starts.
    pub warmup: Duration,
    /// Seconds of ping kept (two more run: discovery, the first line).
    pub seconds: u32,
    /// `chrt` arguments for the ping and pong processes (every thread):
    /// Cyclone has no policy per channel.
    pub chrt: Option<[String; 2]>,
    /// The load: options whose first namespace runs `sub` and second
    /// `pub`, its sample size and samples per second (`None`: idle link).
    pub load: Option<(DdsOpts, u64, u32)>,
}

/// What [`ping_beside_load`] measured.
#[derive(Debug, Clone)]
pub struct PingBesideLoadRun {
    /// The round trips.
    pub rtt: DdsRtt,
    /// The load as its subscriber received it, if there was one.
    pub load: Option<DdsThroughput>,
}

/// Runs [`PingBesideLoad`]: the load's `sub` and `pub` first, then after
/// the warm-up `pong` (first namespace of `opts`) and `ping` (second) to
/// completion; then everything is stopped.
pub fn ping_beside_load(opts: &DdsOpts, p: &PingBesideLoad) -> anyhow::Result<PingBesideLoadRun> {
    if p.seconds == 0 || p.ping_hz == 0 {
        bail!("seconds and the ping rate must be at least 1");
    }
    let run = |o: &DdsOpts, secs: u32, mode: &[String], ns: Option<&String>, chrt: bool| {
        let mut args = vec![format!("-D{secs}"), "-i".into(), o.domain.to_string()];
        args.extend(mode.iter().cloned());
        match (&p.chrt, chrt) {
            (Some(policy), true) => {
                let mut with = policy.to_vec();
                with.push(o.ddsperf.to_string_lossy().into_owned());
                with.append(&mut args);
                let mut o = o.clone();
                o.ddsperf = PathBuf::from("chrt");
                spawn(&o, &with, None, ns.map(String::as_str))
            }
            _ => spawn(o, &args, None, ns.map(String::as_str)),
        }
    };
    let ping_secs = p.seconds + 2;
    // The load outlives the ping; it is stopped once the ping is done.
    let load_secs = ping_secs + p.warmup.as_secs() as u32 + 10;
    let mut load = Vec::new();
    if let Some((o, size, per_s)) = &p.load {
        if o.domain == opts.domain {
            bail!("the load needs a DDS domain of its own");
        }
        let ns = o.netns.as_ref();
        let sub = run(o, load_secs, &["sub".into()], ns.map(|n| &n.0), false)?;
        thread::sleep(Duration::from_millis(100));
        let publish = [
            "pub".to_string(),
            format!("{per_s}Hz"),
            "size".into(),
            (*size).max(MIN_SIZE).to_string(),
        ];
        let publisher = run(o, load_secs, &publish, ns.map(|n| &n.1), false)?;
        load = vec![sub, publisher];
    }
    thread::sleep(p.warmup);
    let ns = opts.netns.as_ref();
    let mut pong = run(
        opts,
        ping_secs + 3,
        &["pong".into()],
        ns.map(|n| &n.0),
        true,
    )?;
    thread::sleep(Duration::from_millis(100));
    let ping_mode = [
        "ping".to_string(),
        format!("{}Hz", p.ping_hz),
        "size".into(),
        p.size.max(MIN_SIZE).to_string(),
    ];
    let mut ping = run(opts, ping_secs, &ping_mode, ns.map(|n| &n.1), true)?;
    let status = ping.wait_timeout(Duration::from_secs(u64::from(ping_secs) + 20))?;
    let ping_out = ping.finish();
    let pong_out = pong.finish();
    let mut load_out: Vec<String> = load.iter_mut().map(Proc::finish).collect();
    match status {
        None => bail!("ddsperf ping did not finish in time; output:\n{ping_out}"),
        Some(st) if !st.success() => {
            bail!("ddsperf ping failed ({st}); output:\n{ping_out}\npong output:\n{pong_out}")
        }
        Some(_) => {}
    }
    let rtt = summarize_ping_output(&ping_out)
        .with_context(|| format!("ddsperf ping output:\n{ping_out}"))?;
    let load = match load_out.is_empty() {
        true => None,
        false => {
            let sub_out = load_out.swap_remove(0);
            Some(
                summarize_sub_output(&sub_out)
                    .with_context(|| format!("ddsperf sub (load) output:\n{sub_out}"))?,
            )
        }
    };
    Ok(PingBesideLoadRun { rtt, load })
}

/// What [`stream_with_pings`] measured in its window.
#[derive(Debug, Clone)]
pub struct PingedStream {
    /// Round trips of the pinged data samples, per kept second.
    pub rtt: Vec<DdsRttSecond>,
    /// Samples per second at the subscriber, per kept second.
    pub per_second: Vec<f64>,
    /// The sample size used.
    pub size: u64,
    /// Samples the subscriber reported lost.
    pub lost: u64,
}

/// `ddsperf pub size S P%` flat out (reliable, keep all) on the second
/// namespace of `opts` to `ddsperf sub` on the first, `P` % of the data
/// samples treated as pings: the subscriber answers each with a pong, so
/// their round trip is the data's way through every queue plus the pong's
/// way back. Keeps the seconds after `warmup` (by each process's clock)
/// up to `warmup + seconds + 1` (the extra one in case discovery was
/// slow).
pub fn stream_with_pings(
    opts: &DdsOpts,
    size: u64,
    ping_pct: u32,
    warmup: u32,
    seconds: u32,
) -> anyhow::Result<PingedStream> {
    if seconds == 0 || !(1..=100).contains(&ping_pct) {
        bail!("seconds must be at least 1 and the ping share 1-100 %");
    }
    let s = size.max(MIN_SIZE).to_string();
    let pct = format!("{ping_pct}%");
    // One second more than the window: ddsperf's first line may come
    // late (discovery).
    let total = warmup + seconds + 2;
    // Keep all on both ends: a reliable writer that kept only the last
    // samples would drop the queue NAPA is about.
    let (sub_out, pub_out) = run_pair(
        opts,
        &["-k", "all", "sub"],
        &["-k", "all", "pub", "size", &s, &pct],
        total,
    )?;
    let window = |t: f64| t > f64::from(warmup) && t <= f64::from(warmup + seconds + 1);
    let rtt: Vec<DdsRttSecond> = pub_out
        .lines()
        .filter_map(parse_ping_line)
        .filter(|l| window(l.t_s) && l.count > 0)
        .collect();
    let subs: Vec<DdsSubSecond> = sub_out.lines().filter_map(parse_sub_line).collect();
    let per_second: Vec<f64> = subs
        .iter()
        .filter(|l| window(l.t_s))
        .map(|l| l.rate)
        .collect();
    if rtt.is_empty() || per_second.is_empty() {
        bail!(
            "ddsperf printed no pinged round trip or no rate in the window;\npub:\n{pub_out}\nsub:\n{sub_out}"
        );
    }
    Ok(PingedStream {
        size: rtt[0].size,
        rtt,
        per_second,
        lost: subs.iter().map(|l| l.lost).max().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PING: &str = "\
[4907] participant vm:4907: new (self)
[4907] participant vm:4897: new
[4907] 2.000  vm:4897 size 256 mean 47.896us min 8.723us 50% 45.267us 90% 59.693us 99% 260.987us max 1239.772us cnt 10412
[4907] 2.000  rss:7.5MB vcsw:9100 ivcsw:1381 recvUC:7%+34%
[4907] 3.000  vm:4897 size 256 mean 94.967us min 10.189us 50% 60.774us 90% 191.009us 99% 366.314us max 5246.752us cnt 5259
[4907] 3.000  rss:7.5MB vcsw:4924 ivcsw:396 recvUC:4%+37%
[4907] 4.000  vm:4897 size 256 mean 57.991us min 8.718us 50% 47.931us 90% 68.501us 99% 253.781us max 2719.097us cnt 8603
[4907] 5.001  vm:4897 size 256 mean 73.611us min 8.698us 50% 47.850us 90% 168.195us 99% 393.144us max 2954.946us cnt 6782
";

    const SUB: &str = "\
[4934] participant vm:4934: new (self)
[4934] 1.000  size 256 total 446975 lost 0 delta 446975 lost 0 rate 446.94 kS/s 915.33 Mb/s (44.69 kS/s 91.53 Mb/s)
[4934] 1.000  rss:7.4MB vcsw:2829 ivcsw:436 tev:0%+2% recvUC:44%+2%
[4934] 2.000  size 256 total 971819 lost 0 delta 524844 lost 0 rate 524.84 kS/s 1074.86 Mb/s (97.18 kS/s 199.03 Mb/s)
[4934] 3.000  size 256 total 1392107 lost 0 delta 420288 lost 0 rate 420.29 kS/s 860.75 Mb/s (139.21 kS/s 285.10 Mb/s)
[4934] 4.000  size 256 total 1932971 lost 0 delta 540864 lost 0 rate 1.2 MS/s 1107.67 Mb/s (193.29 kS/s 395.87 Mb/s)
";

    #[test]
    fn parses_ping_lines_and_doubles() {
        let l = parse_ping_line(PING.lines().nth(2).expect("line")).expect("latency line");
        assert_eq!(l.size, 256);
        assert_eq!(l.count, 10412);
        assert!((l.p50_us - 90.534).abs() < 1e-9);
        assert!((l.p99_us - 521.974).abs() < 1e-9);
        assert!(parse_ping_line(PING.lines().nth(3).expect("line")).is_none());
        assert!(parse_ping_line("[1] participant vm:1: new").is_none());
        let r = summarize_ping_output(PING).expect("summary");
        assert_eq!(r.seconds.len(), 3);
        // Median of 60.774, 47.931, 47.850 doubled.
        assert!((r.p50_us - 95.862).abs() < 1e-9, "{r:?}");
        assert!((r.p99_us - 2.0 * 366.314).abs() < 1e-9, "{r:?}");
        assert_eq!(r.roundtrips, 5259 + 8603 + 6782);
        assert!(summarize_ping_output("[1] 1.000 rss:1MB").is_err());
    }

    #[test]
    fn parses_sub_lines() {
        let l = parse_sub_line(SUB.lines().nth(1).expect("line")).expect("rate line");
        assert_eq!(l.delta, 446_975);
        assert!((l.rate - 446_940.0).abs() < 1e-6);
        let t = summarize_sub_output(SUB).expect("summary");
        // First (446.94k) and last (1.2M) dropped: median of 524.84k, 420.29k.
        assert_eq!(t.per_second.len(), 2);
        assert!((t.msgs_per_s - 472_565.0).abs() < 1e-6, "{t:?}");
        assert_eq!(t.size, 256);
        assert!(summarize_sub_output("").is_err());
    }

    #[test]
    fn values_with_units() {
        assert_eq!(parse_value("1.5ms"), Some(1500.0));
        assert_eq!(parse_value("2us"), Some(2.0));
        assert_eq!(parse_value("x"), None);
    }

    #[test]
    fn config_is_found() {
        let c = default_config().expect("at least the bundled config exists");
        assert!(c.is_file());
        assert!(BUNDLED_CONFIG_XML.contains("<CycloneDDS>"));
    }

    #[test]
    fn failures_are_errors() {
        let missing = DdsOpts::new(
            PathBuf::from("/bin/false"),
            PathBuf::from("/nonexistent.xml"),
        );
        assert!(rtt_with(256, 1, &missing).is_err());
        if Path::new("/bin/false").is_file() {
            let failing = DdsOpts::new(PathBuf::from("/bin/false"), bundled_config());
            let e = rtt_with(256, 1, &failing).expect_err("exit status 1");
            assert!(format!("{e:#}").contains("failed"), "{e:#}");
        }
        assert!(rtt_with(256, 0, &missing).is_err());
    }

    #[test]
    fn rtt_against_ddsperf_if_available() {
        let opts = match DdsOpts::detect() {
            Ok(o) => o,
            Err(reason) => {
                println!("skipping ddsperf test: {reason}");
                return;
            }
        };
        let r = rtt_with(256, 3, &opts).expect("ddsperf rtt");
        println!(
            "cyclonedds 256 B: p50 {:.1} µs p99 {:.1} µs (from counts {:.1} µs, {} seconds kept)",
            r.p50_us,
            r.p99_us,
            r.rtt_from_count_us,
            r.seconds.len()
        );
        assert!(r.p50_us > 0.0 && r.p50_us.is_finite());
        assert!(r.p99_us >= r.p50_us && r.p99_us.is_finite());
        assert_eq!(r.size, 256);
    }

    #[test]
    fn bundled_config_works_if_available() {
        let Ok(exe) = available() else {
            println!("skipping: ddsperf not available");
            return;
        };
        let mut opts = DdsOpts::new(exe, bundled_config());
        opts.domain = 1 + opts.domain % 99; // distinct from the other test running in parallel
        let t = throughput_with(256, 2, &opts).expect("ddsperf throughput");
        println!(
            "cyclonedds 256 B throughput: {:.0} msg/s {:?}",
            t.msgs_per_s, t.per_second
        );
        assert!(t.msgs_per_s > 0.0);
    }
}
