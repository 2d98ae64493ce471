//! Zenoh with its priorities beside a load (`tagwire perf priority`'s
//! Zenoh rows): the measured channel is a 256 B request/reply at a Zenoh
//! priority (`RealTime` for the prioritised channel), the load channel a
//! paced stream at the default priority (`Data`), congestion control
//! `Block` on both, so nothing is dropped.
//!
//! Both channels share one session and, by default, one TCP link: Zenoh
//! queues the priorities apart inside the session but the link's socket
//! buffer and the shaped queue behind it are shared. With `--own-link`
//! the measured priority gets a TCP link of its own (Zenoh's endpoint
//! metadata `prio=1-1`) whose socket carries a TOS byte (the endpoint
//! config `dscp=`, here the critical class's 0xb0, DSCP 44: `pfifo_fast`
//! band 0), which is Zenoh's best configuration for this. For Figure 5b
//! the load comes from a process of its own on another host
//! (`zenoh-prio-load`), to the pong's shared link.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use zenoh::qos::{CongestionControl, Priority};
use zenoh::Wait as _;

const PING: &str = "tagwire/perf/prio/ping";
const PONG: &str = "tagwire/perf/prio/pong";
const LOAD: &str = "tagwire/perf/prio/load";

/// The TOS byte of the measured channel's own link (DSCP 44 << 2).
const OWN_LINK_TOS: u8 = 0xb0;

/// A Zenoh priority by its name (`real-time`, `data`, …).
pub(crate) fn priority(name: &str) -> anyhow::Result<Priority> {
    Ok(match name {
        "real-time" => Priority::RealTime,
        "interactive-high" => Priority::InteractiveHigh,
        "interactive-low" => Priority::InteractiveLow,
        "data-high" => Priority::DataHigh,
        "data" => Priority::Data,
        "data-low" => Priority::DataLow,
        "background" => Priority::Background,
        other => bail!("no Zenoh priority {other:?}"),
    })
}

/// The endpoints of a session: the shared link, and with `own_link` a
/// second link for the real-time priority alone, one port up, whose
/// socket carries the critical class's TOS (a link per priority needs
/// Zenoh's `transport_multilink` and `max_links` > 1 on both sides).
fn endpoints(base: &str, own_link: bool) -> anyhow::Result<Vec<String>> {
    if !own_link {
        return Ok(vec![base.to_owned()]);
    }
    let (host, port) = base
        .rsplit_once(':')
        .context("an endpoint is tcp/ADDRESS:PORT")?;
    let port: u16 = port.parse().context("the endpoint's port")?;
    // The shared link names every priority: a link without a range would
    // be a fallback only, and Zenoh would send the load on whichever
    // link comes first (the smallest range that holds a priority wins).
    Ok(vec![
        format!("{base}?prio=0-7"),
        format!(
            "{host}:{}?prio=1-1#dscp={OWN_LINK_TOS:#04x}",
            port.checked_add(1)
                .context("no port above the endpoint's")?
        ),
    ])
}

fn open(listen: &[String], connect: &[String]) -> anyhow::Result<zenoh::Session> {
    let mut c = zenoh::Config::default();
    let set = |c: &mut zenoh::Config, k: &str, v: &str| {
        c.insert_json5(k, v)
            .map_err(|e| anyhow::anyhow!("zenoh config {k}={v}: {e}"))
    };
    let list = |v: &[String]| {
        let quoted: Vec<String> = v.iter().map(|e| format!("\"{e}\"")).collect();
        format!("[{}]", quoted.join(","))
    };
    set(&mut c, "mode", "\"peer\"")?;
    set(&mut c, "scouting/multicast/enabled", "false")?;
    let links = listen.len().max(connect.len());
    set(&mut c, "transport/unicast/max_links", &links.to_string())?;
    if !listen.is_empty() {
        set(&mut c, "listen/endpoints", &list(listen))?;
    }
    if !connect.is_empty() {
        set(&mut c, "connect/endpoints", &list(connect))?;
    }
    zenoh::open(c)
        .wait()
        .map_err(|e| anyhow::anyhow!("opening a zenoh session: {e}"))
}

fn zerr(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Answers every ping at `prio` and swallows the load, until killed.
pub(crate) fn pong(listen: &str, own_link: bool, prio: Priority) -> anyhow::Result<()> {
    let s = open(&endpoints(listen, own_link)?, &[])?;
    let p = s
        .declare_publisher(PONG)
        .congestion_control(CongestionControl::Block)
        .priority(prio)
        .express(true)
        .wait()
        .map_err(zerr)?;
    let carried = Arc::new(AtomicU64::new(0));
    let c = carried.clone();
    let _load = s
        .declare_subscriber(LOAD)
        .callback(move |sample| {
            c.fetch_add(sample.payload().len() as u64, Ordering::Relaxed);
        })
        .wait()
        .map_err(zerr)?;
    let sub = s.declare_subscriber(PING).wait().map_err(zerr)?;
    while let Ok(sample) = sub.recv() {
        // The reply is the request with the load bytes received so far in
        // its first 8 bytes: the far side's count, read by the ping.
        let mut reply = sample.payload().to_bytes().into_owned();
        if let Some(head) = reply.get_mut(..8) {
            head.copy_from_slice(&carried.load(Ordering::Relaxed).to_le_bytes());
        }
        p.put(reply).wait().map_err(zerr)?;
    }
    Ok(())
}

/// What the measuring side is asked to do.
pub(crate) struct Probe {
    pub connect: String,
    pub own_link: bool,
    pub prio: Priority,
    pub size: usize,
    pub gap: Duration,
    pub warmup: Duration,
    pub measure: Duration,
    pub load_size: usize,
    pub load_per_s: f64,
}

/// Round trips at `prio` while a paced load at `Data` runs on the same
/// session; prints the round trips' summary and the load received (the
/// far side's count, carried in its replies) as one JSON line.
pub(crate) fn ping(o: &Probe) -> anyhow::Result<()> {
    let s = open(&[], &endpoints(&o.connect, o.own_link)?)?;
    let p = s
        .declare_publisher(PING)
        .congestion_control(CongestionControl::Block)
        .priority(o.prio)
        .express(true)
        .wait()
        .map_err(zerr)?;
    let sub = s.declare_subscriber(PONG).wait().map_err(zerr)?;
    let load = load_publisher(&s)?;
    let payload = zenoh::bytes::ZBytes::from(vec![0x11u8; o.size]);
    crate::zenoh_peer::matched(&p, &sub, &payload)?;
    let done = AtomicBool::new(false);
    let (rtts, window) = std::thread::scope(|sc| -> anyhow::Result<(Vec<f64>, Window)> {
        let loader = sc.spawn(|| -> anyhow::Result<()> {
            if o.load_per_s <= 0.0 {
                return Ok(());
            }
            paced(&load, o.load_size, o.load_per_s, || {
                !done.load(Ordering::Relaxed)
            })
        });
        let measured = measure(o, &p, &sub, &payload);
        done.store(true, Ordering::Relaxed);
        loader
            .join()
            .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
        measured
    })
    .context("measuring round trips beside the load")?;
    print_summary(rtts, window)
}

/// The load's publisher: `Data` priority, congestion control `Block`.
fn load_publisher(s: &zenoh::Session) -> anyhow::Result<zenoh::pubsub::Publisher<'static>> {
    s.declare_publisher(LOAD)
        .congestion_control(CongestionControl::Block)
        .priority(Priority::Data)
        .wait()
        .map_err(zerr)
}

/// The load alone, from a process of its own (Figure 5b: from another
/// host than the prober's): a paced stream at `Data` to the pong's shared
/// link for `seconds`, congestion control `Block`.
pub(crate) fn load(connect: &str, size: usize, per_s: f64, seconds: f64) -> anyhow::Result<()> {
    let s = open(&[], &[connect.to_owned()])?;
    let load = load_publisher(&s)?;
    let start = Instant::now();
    let end = Duration::from_secs_f64(seconds.max(0.0));
    paced(&load, size, per_s, || start.elapsed() < end)
}

/// Puts `size`-byte samples on `load` at `per_s` a second while `going`.
fn paced(
    load: &zenoh::pubsub::Publisher<'_>,
    size: usize,
    per_s: f64,
    going: impl Fn() -> bool,
) -> anyhow::Result<()> {
    let bytes = zenoh::bytes::ZBytes::from(vec![0x5au8; size]);
    let start = Instant::now();
    let mut n = 0u64;
    while going() {
        let owed = (start.elapsed().as_secs_f64() * per_s) as u64;
        while n < owed && going() {
            load.put(bytes.clone()).wait().map_err(zerr)?;
            n += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The load the far side received over the measured window.
#[derive(Clone, Copy)]
struct Window {
    bytes: u64,
    seconds: f64,
}

type Pub = zenoh::pubsub::Publisher<'static>;
type Sub = zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>;

fn measure(
    o: &Probe,
    p: &Pub,
    sub: &Sub,
    payload: &zenoh::bytes::ZBytes,
) -> anyhow::Result<(Vec<f64>, Window)> {
    let start = Instant::now();
    let (from, until) = (start + o.warmup, start + o.warmup + o.measure);
    let mut rtts = Vec::new();
    // (when, load bytes the far side had received) at the window's first
    // reply and at its last.
    let mut first: Option<(Instant, u64)> = None;
    let mut last = None;
    loop {
        if Instant::now() >= until {
            break;
        }
        let t0 = Instant::now();
        p.put(payload.clone()).wait().map_err(zerr)?;
        let reply = sub
            .recv_timeout(Duration::from_secs(5))
            .map_err(zerr)?
            .context("no reply within 5 s")?;
        let now = Instant::now();
        if t0 >= from {
            rtts.push((now - t0).as_secs_f64() * 1e6);
            let bytes = reply.payload().to_bytes();
            let carried = bytes
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes);
            first.get_or_insert((now, carried));
            last = Some((now, carried));
        }
        std::thread::sleep(o.gap);
    }
    let window = match (first, last) {
        (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => Window {
            bytes: b1.saturating_sub(b0),
            seconds: (t1 - t0).as_secs_f64(),
        },
        _ => Window {
            bytes: 0,
            seconds: 1.0,
        },
    };
    Ok((rtts, window))
}

/// One JSON line: the round trips' count, mean, standard deviation, p50,
/// p99, p99.9 and maximum (µs), and the load's payload Mbit/s received.
fn print_summary(mut us: Vec<f64>, w: Window) -> anyhow::Result<()> {
    if us.is_empty() {
        bail!("no round trips measured");
    }
    us.sort_by(f64::total_cmp);
    let n = us.len();
    let mean = us.iter().sum::<f64>() / n as f64;
    let var = us.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
    let at = |q: f64| us[((n - 1) as f64 * q).round() as usize];
    println!(
        "{{\"n\":{n},\"mean_us\":{mean:.3},\"std_us\":{:.3},\"p50_us\":{:.3},\"p99_us\":{:.3},\
         \"p999_us\":{:.3},\"max_us\":{:.3},\"load_mbit_s\":{:.3}}}",
        var.sqrt(),
        at(0.5),
        at(0.99),
        at(0.999),
        us[n - 1],
        w.bytes as f64 * 8.0 / w.seconds / 1e6,
    );
    Ok(())
}
