//! `tagwire perf priority`: a measured request/reply channel beside a load
//! channel through a shaped link, with and without a packet class (the
//! channel-prioritisation paper's Figures 5a and 5b on this machine).
//!
//! **Figure 5b** ([`Figure::B`]) moves the congestion from the sending
//! host's own link to a router where two hosts send to a third: the
//! switch namespace routes (`Lan::route`), its port toward host 2 is the
//! shaped `htb` class with a `pfifo_fast` leaf, the measured channel runs
//! between hosts 0 and 2 and the load from host 1 to host 2. The router
//! picks each packet's band from its TOS byte as it forwards. With
//! [`Spec::tcp`] every subscription (measured and load) comes over TCP and
//! the floor is a plain TCP connection. The description below is Figure
//! 5a's.
//!
//! Two hosts in network namespaces; host 0's egress is an `htb` class of
//! the given rate whose leaf is a `pfifo_fast` queue (three bands, band 0
//! first). On host 0 a prober sends a 256 B request on one tag and waits
//! for the reply that an echo thread on host 1 publishes on another; beside
//! it a load publisher on host 0 sends 1400 B messages on a third tag to a
//! reliable subscriber on host 1, at a share of the shaped rate (20 %, 70 %,
//! 120 %: overload, where the load stream is held back by its window and
//! the leaf's queue stays full). The measured channel's two subscriptions
//! are `critical` in one system and `normal` (the default) in the other;
//! the load is always `normal`. A third system is the floor: the same
//! request and reply between plain UDP sockets in the two namespaces, with
//! the critical class's TOS, beside the same load. The systems rotate
//! repetition by repetition on the same daemons, and each load's cells run
//! back to back, so all see the same machine. Optional CPU hogs (busy
//! threads at the default scheduling policy) compete with every thread for
//! the two cores; `Spec::sched` runs the prioritised channel's threads (and
//! the floor's) at a policy of their own.
//!
//! Figures: the round trip's mean, standard deviation, p50, p99, p99.9 and
//! maximum over the measured window, medians over repetitions; the load
//! actually carried (payload Mbit/s at the subscriber).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use tagwire::{Domain, Priority, Sched, SubscribeOptions};

mod floor;
mod table;
pub use table::table;

use crate::napa::wait_known;
use crate::remote::Site;
use crate::stats::{percentile_sorted, spread};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The shaped rate of host 0's egress, bit/s.
    pub rate: u64,
    /// Load levels, percent of `rate` (0: the idle link).
    pub loads: Vec<u32>,
    /// Load message size, bytes.
    pub load_size: usize,
    /// Request and reply size, bytes.
    pub probe_size: usize,
    /// Pause between one reply and the next request.
    pub gap: Duration,
    /// Seconds of load before the measured window.
    pub warmup: Duration,
    /// Measured seconds.
    pub measure: Duration,
    /// Repetitions of every cell.
    pub reps: usize,
    /// Busy threads at the default policy, running through every cell.
    pub hogs: usize,
    /// The prioritised channel's thread policy, if any: its prober and
    /// echo threads run at it, and its subscriptions ask it of the
    /// daemons' threads (`SubscribeOptions::sched`).
    pub sched: Option<Sched>,
    /// The load channel's thread policy, if any: its publishing and
    /// counting threads run at it, and its publisher and subscription ask
    /// it of the daemons' threads (a deployment's answer to CPU hogs that
    /// starve a bulk channel's forwarder; Zenoh's rows run their load
    /// under `chrt` at `sched` in any case).
    pub load_sched: Option<Sched>,
    /// The `tagwire-peers` binary, for the Zenoh rows (`None`: no Zenoh
    /// rows). In Figure 5b Zenoh's load runs in a process of its own on
    /// host 1.
    pub zenoh: Option<std::path::PathBuf>,
    /// `ddsperf` for the Cyclone DDS rows (`None`: none). Its ping/pong
    /// is the measured channel, its pub/sub the load, on two DDS domains
    /// (the base options' and the next); no rows over TCP.
    pub cyclone: Option<crate::ddsperf::DdsOpts>,
    /// Where the link is congested.
    pub figure: Figure,
    /// Every subscription over TCP (`SubscribeOptions::tcp`), the floor a
    /// TCP connection.
    pub tcp: bool,
}

/// Where the shaped queue is: the channel-prioritisation paper's two
/// set-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Figure {
    /// Figure 5a: host 0's own egress; both channels from host 0 to 1.
    #[default]
    A,
    /// Figure 5b: a router's port toward host 2; the measured channel
    /// between hosts 0 and 2, the load from host 1 to 2.
    B,
}

impl Figure {
    /// Hosts the set-up needs.
    pub fn hosts(self) -> usize {
        match self {
            Figure::A => 2,
            Figure::B => 3,
        }
    }

    /// Whether the hosts talk through a router rather than a bridge.
    pub fn routed(self) -> bool {
        self == Figure::B
    }

    /// The hosts of the prober, of the echo and load subscriber, and of
    /// the load publisher.
    fn ends(self) -> (usize, usize, usize) {
        match self {
            Figure::A => (0, 1, 0),
            Figure::B => (0, 2, 1),
        }
    }

    /// `5a` or `5b`.
    pub fn name(self) -> &'static str {
        match self {
            Figure::A => "5a",
            Figure::B => "5b",
        }
    }
}

impl std::str::FromStr for Figure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "5a" | "a" => Ok(Figure::A),
            "5b" | "b" => Ok(Figure::B),
            other => Err(format!("a figure is 5a or 5b, not {other:?}")),
        }
    }
}

/// One cell's runs: one system and load.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityRecord {
    /// `tagwire critical`, `tagwire normal`, the floor or a Zenoh row.
    pub system: String,
    /// The set-up: `5a` (congested at the sending host) or `5b` (at a
    /// router where two hosts send to a third).
    pub figure: String,
    /// What carries the tagwire channels and the floor: `udp` or `tcp`.
    pub carrier: String,
    /// Offered load, percent of the shaped rate.
    pub load_pct: u32,
    /// The shaped rate, bit/s.
    pub rate_bit_per_s: u64,
    /// Repetitions.
    pub reps: usize,
    /// CPU hogs running.
    pub hogs: usize,
    /// The measured channel's thread policy (`other`: the default).
    pub sched: String,
    /// The load channel's thread policy in tagwire's rows and the floor's
    /// (`other`: the default; Zenoh's load runs at `sched`).
    pub load_sched: String,
    /// Round trips measured, total over reps.
    pub round_trips: usize,
    /// Round trip mean, µs: median, min, max over reps.
    pub mean_us: [f64; 3],
    /// Round trip standard deviation, µs: median, min, max over reps
    /// (null for Cyclone DDS: ddsperf prints per-second percentiles only).
    pub std_us: [f64; 3],
    /// Round trip p50, µs: median, min, max over reps.
    pub p50_us: [f64; 3],
    /// Round trip p99, µs: median, min, max over reps.
    pub p99_us: [f64; 3],
    /// Round trip p99.9, µs: median over reps (null for Cyclone DDS).
    pub p999_us: f64,
    /// Longest round trip, µs: median over reps.
    pub max_us: f64,
    /// Load payload carried, Mbit/s at the subscriber: median over reps.
    pub load_mbit_s: f64,
    /// Load messages lost (reported to the reliable subscriber): total.
    pub load_lost: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Run {
    n: usize,
    mean: f64,
    std: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    load_mbit_s: f64,
    load_lost: u64,
}

/// What carries the request and the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Two tagwire tags whose subscriptions have this class.
    Tagwire(Priority),
    /// A plain UDP socket per host (a TCP connection with
    /// [`Spec::tcp`]) with the critical class's TOS, beside the same load:
    /// the floor this machine puts under the prioritised channel (the same
    /// namespaces, link, queue, hogs and thread policy).
    Floor,
    /// Zenoh's request/reply at `Priority::RealTime` beside its own load
    /// at the default priority, in the same namespaces (`zenoh-prio-ping`
    /// on host 0, `zenoh-prio-pong` on host 1): on one shared TCP link,
    /// or with the real-time priority on a link of its own whose socket
    /// carries the critical class's TOS (band 0); with `Spec::sched`
    /// real-time, both processes run at it (`chrt`).
    Zenoh {
        /// A link of its own for the measured channel.
        own_link: bool,
    },
    /// Cyclone DDS: `ddsperf ping` / `pong` (256 B, reliable, keeping
    /// the last sample) beside `ddsperf pub` / `sub` at the same offered load, in the
    /// same namespaces; no packet class (Cyclone has none per writer);
    /// with `Spec::sched` real-time, ping and pong run at it (`chrt`),
    /// the load at the default policy.
    Cyclone,
}

/// The systems measured: tagwire at both classes, the floor, and Zenoh in
/// both configurations when its program is there.
fn systems(spec: &Spec) -> Vec<(&'static str, Probe)> {
    let mut v = vec![
        ("tagwire critical", Probe::Tagwire(Priority::Critical)),
        ("tagwire normal", Probe::Tagwire(Priority::Normal)),
        (floor_name(spec), Probe::Floor),
    ];
    if spec.zenoh.is_some() {
        v.push(("zenoh realtime", Probe::Zenoh { own_link: false }));
        v.push(("zenoh rt own link", Probe::Zenoh { own_link: true }));
    }
    if spec.cyclone.is_some() && !spec.tcp {
        v.push(("cyclone dds", Probe::Cyclone));
    }
    v
}

/// The floor's row: `udp floor` or `tcp floor`.
fn floor_name(spec: &Spec) -> &'static str {
    if spec.tcp {
        "tcp floor"
    } else {
        "udp floor"
    }
}

/// The thread policy of a system's probe: the prioritised channel's and
/// the floor's are the spec's, the normal one's the default; Zenoh's
/// processes run at the spec's real-time policy under `chrt` (it has none
/// per channel), else at the default.
fn sched_of(spec: &Spec, probe: Probe) -> Sched {
    match (probe, spec.sched) {
        (Probe::Tagwire(Priority::Normal), _) => Sched::default(),
        (Probe::Zenoh { .. } | Probe::Cyclone, Some(s)) if chrt(s).is_none() => Sched::default(),
        _ => spec.sched.unwrap_or_default(),
    }
}

/// `chrt`'s arguments for a real-time policy.
fn chrt(s: Sched) -> Option<[String; 2]> {
    match s {
        Sched::Fifo(p) => Some(["-f".into(), p.to_string()]),
        Sched::RoundRobin(p) => Some(["-r".into(), p.to_string()]),
        Sched::Other { .. } => None,
    }
}

/// Load messages per second at `load` percent of the shaped rate.
fn load_per_s(spec: &Spec, load: u32) -> f64 {
    spec.rate as f64 / 8.0 * f64::from(load) / 100.0 / wire_bytes(spec.load_size) as f64
}

/// Runs every cell `spec.reps` times and returns one record per system and
/// load; `progress` is told each run as it ends.
pub fn priority(
    site: &Site,
    spec: &Spec,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<PriorityRecord>> {
    if site.hosts() < spec.figure.hosts() {
        bail!(
            "Figure {} needs {} hosts, the site has {}",
            spec.figure.name(),
            spec.figure.hosts(),
            site.hosts()
        );
    }
    match spec.figure {
        Figure::A => site
            .host(0)
            .shape_htb(spec.rate)
            .context("shaping host 0's link (tc htb + pfifo_fast)")?,
        Figure::B => site
            .host(2)
            .shape_htb_inbound(spec.rate)
            .context("shaping the router's port toward host 2 (tc htb + pfifo_fast)")?,
    }
    let stop = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        for _ in 0..spec.hogs {
            s.spawn(|| {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            });
        }
        let r = cells(site, spec, &mut progress);
        stop.store(true, Ordering::Relaxed);
        r
    });
    match spec.figure {
        Figure::A => site.host(0).unshape()?,
        Figure::B => site.host(2).unshape_inbound()?,
    }
    result
}

fn cells(
    site: &Site,
    spec: &Spec,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<PriorityRecord>> {
    let mut records = Vec::new();
    let systems = systems(spec);
    for &load in &spec.loads {
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); systems.len()];
        for rep in 0..spec.reps {
            // Rotate which goes first: none gets the warmer machine.
            for k in 0..systems.len() {
                let which = (rep + k) % systems.len();
                let (name, probe) = systems[which];
                let id = format!("{load}-{rep}-{which}");
                let run = cell(site, spec, load, probe, &id)
                    .with_context(|| format!("{name} at {load} %"))?;
                progress(&format!(
                    "{name} load {load} % rep {}: p50 {:.0} us p99 {:.0} us max {:.0} us, load {:.1} Mbit/s",
                    rep + 1,
                    run.p50,
                    run.p99,
                    run.max,
                    run.load_mbit_s
                ));
                runs[which].push(run);
            }
        }
        for (which, (name, probe)) in systems.iter().enumerate() {
            let sched = sched_of(spec, *probe);
            records.push(record(name, load, spec, sched, &runs[which]));
        }
    }
    Ok(records)
}

/// Wire bytes of one load message: its payload with tagwire's data header
/// (about 60 bytes with the tag) and UDP, IP and Ethernet headers.
fn wire_bytes(size: usize) -> usize {
    size + 60 + 8 + 20 + 14
}

/// The tags of the measured channel (the floor's run keeps them idle).
struct Channel {
    ping_sub: tagwire::Subscriber,
    pong_sub: tagwire::Subscriber,
    ping_pub: tagwire::Publisher,
    pong_pub: tagwire::Publisher,
}

/// One run of one cell: the prober's round trips while the load runs.
fn cell(site: &Site, spec: &Spec, load: u32, probe: Probe, id: &str) -> anyhow::Result<Run> {
    match probe {
        Probe::Zenoh { own_link } => return zenoh_cell(site, spec, load, own_link),
        Probe::Cyclone => return cyclone_cell(site, spec, load),
        Probe::Tagwire(_) | Probe::Floor => {}
    }
    let (prober, sink, source) = spec.figure.ends();
    let (c0, c1) = (site.client(prober)?, site.client(sink)?);
    let c_load = site.client(source)?;
    let base = format!("/perf/priority/{id}-{}", std::process::id());
    let (ping, pong, bulk) = (
        format!("{base}/ping"),
        format!("{base}/pong"),
        format!("{base}/load"),
    );
    let sched = sched_of(spec, probe);
    // The floor's run keeps an idle critical channel too: the load's
    // sender then yields to band 0 as it does beside the critical probe
    // (one datagram per send, `Train::yield_to`), so both face one load.
    let class = match probe {
        Probe::Tagwire(class) => class,
        Probe::Floor | Probe::Zenoh { .. } | Probe::Cyclone => Priority::Critical,
    };
    c0.create_tag(&ping, Domain::Global)?;
    c1.create_tag(&pong, Domain::Global)?;
    let carried = |o: SubscribeOptions| if spec.tcp { o.tcp() } else { o };
    let classed = carried(SubscribeOptions::default().priority(class).sched(sched));
    let mut channel = Channel {
        ping_sub: c1.subscribe(&ping, classed)?,
        pong_sub: c0.subscribe(&pong, classed)?,
        ping_pub: c0.publisher(&ping)?,
        pong_pub: c1.publisher(&pong)?,
    };
    wait_known(&c0, &ping)?;
    wait_known(&c1, &pong)?;
    c_load.create_tag(&bulk, Domain::Global)?;
    let load_sched = spec.load_sched.unwrap_or_default();
    let mut load_sub = c1.subscribe(
        &bulk,
        carried(SubscribeOptions::default().sched(load_sched)),
    )?;
    let mut load_pub =
        c_load.publisher_with(&bulk, tagwire::PublishOptions::default().sched(load_sched))?;
    load_pub.set_send_timeout(Duration::from_secs(30));
    wait_known(&c_load, &bulk)?;
    let done = AtomicBool::new(false);
    let load_bytes = Arc::new(AtomicU64::new(0));
    let result = std::thread::scope(|s| -> anyhow::Result<Run> {
        let Channel {
            ping_sub,
            pong_sub,
            ping_pub,
            pong_pub,
        } = &mut channel;
        let (mut measured, echo) = match probe {
            Probe::Floor | Probe::Zenoh { .. } | Probe::Cyclone => (None, None),
            Probe::Tagwire(_) => {
                let done = &done;
                let echo = s.spawn(move || -> anyhow::Result<()> {
                    tagwire::set_thread_sched(sched)?;
                    while !done.load(Ordering::Relaxed) {
                        match ping_sub.receive(Some(Duration::from_millis(100))) {
                            Ok(m) => {
                                pong_pub.send(&m.payload)?;
                            }
                            Err(tagwire::Error::Timeout) => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    Ok(())
                });
                (Some((ping_pub, pong_sub)), Some(echo))
            }
        };
        let counter = s.spawn(|| -> anyhow::Result<u64> {
            tagwire::set_thread_sched(load_sched)?;
            while !done.load(Ordering::Relaxed) {
                match load_sub.receive(Some(Duration::from_millis(100))) {
                    Ok(m) => {
                        load_bytes.fetch_add(m.payload.len() as u64, Ordering::Relaxed);
                    }
                    Err(tagwire::Error::Timeout) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(load_sub.lost())
        });
        let loader = s.spawn(|| -> anyhow::Result<()> {
            if load == 0 {
                return Ok(());
            }
            tagwire::set_thread_sched(load_sched)?;
            let per_s = load_per_s(spec, load);
            let payload = vec![0x5au8; spec.load_size];
            let start = Instant::now();
            let mut sent = 0u64;
            while !done.load(Ordering::Relaxed) {
                let owed = (start.elapsed().as_secs_f64() * per_s) as u64;
                while sent < owed && !done.load(Ordering::Relaxed) {
                    load_pub.send(&payload)?;
                    sent += 1;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        });
        let probed = match measured.as_mut() {
            // The prober is this thread: at the channel's policy for the run.
            Some((ping_pub, pong_sub)) => tagwire::set_thread_sched(sched)
                .map_err(anyhow::Error::from)
                .and_then(|()| {
                    let mut round_trip = |payload: &[u8]| -> anyhow::Result<()> {
                        ping_pub.send(payload)?;
                        match pong_sub.receive(Some(Duration::from_secs(5))) {
                            Ok(_) => Ok(()),
                            Err(tagwire::Error::Timeout) => bail!("no reply within 5 s"),
                            Err(e) => Err(e.into()),
                        }
                    };
                    round_trips(spec, &mut round_trip, &load_bytes)
                }),
            None if spec.tcp => floor::tcp(site, spec, sched, &load_bytes),
            None => floor::udp(site, spec, sched, &load_bytes),
        };
        let back = tagwire::set_thread_sched(Sched::default());
        done.store(true, Ordering::Relaxed);
        joined(loader.join(), "load publisher")?;
        if let Some(echo) = echo {
            joined(echo.join(), "echo")?;
        }
        let lost = joined(counter.join(), "load subscriber")?;
        back?;
        let (rtts, load_mbit_s) = probed?;
        let mut run = summarise(rtts).context("no round trip in the measured window")?;
        run.load_mbit_s = load_mbit_s;
        run.load_lost = lost;
        Ok(run)
    });
    drop((channel, load_pub));
    let _ = c0.destroy_tag(&ping);
    let _ = c1.destroy_tag(&pong);
    let _ = c_load.destroy_tag(&bulk);
    result
}

/// One run of a Zenoh cell: its request/reply beside its own load at the
/// same offered rate as tagwire's, in the same namespaces through the same
/// shaped link (Figure 5b: the load from its own process on host 1).
fn zenoh_cell(site: &Site, spec: &Spec, load: u32, own_link: bool) -> anyhow::Result<Run> {
    let exe = spec.zenoh.clone().context("no tagwire-peers binary")?;
    let (prober, sink, source) = spec.figure.ends();
    let o = crate::peers::PeerOpts {
        exe,
        cpus: None,
        netns: Some((
            site.host(prober).netns().to_owned(),
            site.host(sink).netns().to_owned(),
            site.host(sink).addr().into(),
        )),
    };
    let load_netns = (source != prober).then(|| site.host(source).netns().to_owned());
    let z = crate::peers::ZenohPrio {
        own_link,
        size: spec.probe_size,
        gap: spec.gap,
        warmup: spec.warmup,
        measure: spec.measure,
        load_size: spec.load_size,
        load_per_s: load_per_s(spec, load),
        chrt: spec.sched.and_then(chrt),
        load_netns,
    };
    let r = crate::peers::zenoh_priority(&o, &z)?;
    Ok(Run {
        n: r.n,
        mean: r.mean_us,
        std: r.std_us,
        p50: r.p50_us,
        p99: r.p99_us,
        p999: r.p999_us,
        max: r.max_us,
        load_mbit_s: r.load_mbit_s,
        // Congestion control `Block`: Zenoh drops nothing, it holds the
        // publisher back.
        load_lost: 0,
    })
}

/// One run of a Cyclone DDS cell: `ddsperf ping` at one ping per
/// `Spec::gap` beside `ddsperf pub` at the same offered load as
/// tagwire's, through the same shaped link. ddsperf prints each second's
/// percentiles, not each round trip: p50 and p99 are medians over the
/// seconds, the maximum the largest second's, the mean weighted by
/// count; no standard deviation or p99.9 (NaN).
fn cyclone_cell(site: &Site, spec: &Spec, load: u32) -> anyhow::Result<Run> {
    let base = spec.cyclone.clone().context("no ddsperf")?;
    let (prober, sink, source) = spec.figure.ends();
    let ping = site.dds(&base, sink, prober)?;
    let load_opts = {
        let mut o = base.clone();
        o.domain = base.domain + 1;
        site.dds(&o, sink, source)?
    };
    let p = crate::ddsperf::PingBesideLoad {
        size: spec.probe_size as u64,
        ping_hz: (1.0 / spec.gap.as_secs_f64().max(1e-4)).round() as u32,
        warmup: spec.warmup,
        seconds: spec.measure.as_secs_f64().ceil().max(1.0) as u32,
        chrt: spec.sched.and_then(chrt),
        load: (load > 0).then(|| {
            let per_s = load_per_s(spec, load).round().max(1.0) as u32;
            (load_opts, spec.load_size as u64, per_s)
        }),
    };
    let r = crate::ddsperf::ping_beside_load(&ping, &p)?;
    let (load_mbit_s, load_lost) = r.load.as_ref().map_or((0.0, 0), |t| {
        (t.msgs_per_s * t.size as f64 * 8.0 / 1e6, t.lost)
    });
    Ok(Run {
        n: r.rtt.roundtrips as usize,
        mean: r.rtt.mean_us,
        std: f64::NAN,
        p50: r.rtt.p50_us,
        p99: r.rtt.p99_us,
        p999: f64::NAN,
        max: r.rtt.seconds.iter().map(|s| s.max_us).fold(0.0, f64::max),
        load_mbit_s,
        load_lost,
    })
}

fn joined<T>(r: std::thread::Result<anyhow::Result<T>>, what: &str) -> anyhow::Result<T> {
    r.map_err(|_| anyhow::anyhow!("the {what} thread panicked"))?
}

/// Round trips (µs) in the measured window, each `round_trip` one request
/// and its reply, and the load's payload Mbit/s over it.
fn round_trips(
    spec: &Spec,
    round_trip: &mut impl FnMut(&[u8]) -> anyhow::Result<()>,
    load_bytes: &AtomicU64,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let payload = vec![0x11u8; spec.probe_size];
    let start = Instant::now();
    let from = start + spec.warmup;
    let until = from + spec.measure;
    let mut rtts = Vec::new();
    let mut bytes_from = None;
    loop {
        let now = Instant::now();
        if now >= until {
            break;
        }
        if now >= from && bytes_from.is_none() {
            bytes_from = Some((now, load_bytes.load(Ordering::Relaxed)));
        }
        let t0 = Instant::now();
        round_trip(&payload)?;
        let rtt = t0.elapsed();
        if t0 >= from {
            rtts.push(rtt.as_secs_f64() * 1e6);
        }
        std::thread::sleep(spec.gap);
    }
    let mbit = bytes_from.map_or(0.0, |(t, b)| {
        let bytes = load_bytes.load(Ordering::Relaxed).saturating_sub(b);
        bytes as f64 * 8.0 / t.elapsed().as_secs_f64().max(1e-9) / 1e6
    });
    Ok((rtts, mbit))
}

fn summarise(mut v: Vec<f64>) -> Option<Run> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
    Some(Run {
        n,
        mean,
        std: var.sqrt(),
        p50: percentile_sorted(&v, 50.0)?,
        p99: percentile_sorted(&v, 99.0)?,
        p999: percentile_sorted(&v, 99.9)?,
        max: *v.last()?,
        load_mbit_s: 0.0,
        load_lost: 0,
    })
}

fn record(system: &str, load: u32, spec: &Spec, sched: Sched, runs: &[Run]) -> PriorityRecord {
    // What a system does not measure (ddsperf's σ and p99.9) stays NaN.
    let spread = |f: fn(&Run) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).collect();
        match v.iter().all(|x| x.is_nan()) {
            true => [f64::NAN; 3],
            false => spread(&v),
        }
    };
    PriorityRecord {
        system: system.to_owned(),
        figure: spec.figure.name().to_owned(),
        carrier: if spec.tcp { "tcp" } else { "udp" }.to_owned(),
        load_pct: load,
        rate_bit_per_s: spec.rate,
        reps: runs.len(),
        hogs: spec.hogs,
        sched: sched.to_string(),
        load_sched: spec.load_sched.unwrap_or_default().to_string(),
        round_trips: runs.iter().map(|r| r.n).sum(),
        mean_us: spread(|r| r.mean),
        std_us: spread(|r| r.std),
        p50_us: spread(|r| r.p50),
        p99_us: spread(|r| r.p99),
        p999_us: spread(|r| r.p999)[0],
        max_us: spread(|r| r.max)[0],
        load_mbit_s: spread(|r| r.load_mbit_s)[0],
        load_lost: runs.iter().map(|r| r.load_lost).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_summary_has_the_population_spread() {
        let r = summarise(vec![1.0, 2.0, 3.0, 4.0, f64::NAN]).unwrap();
        assert_eq!(r.n, 4);
        assert!((r.mean - 2.5).abs() < 1e-9);
        assert!((r.std - 1.25f64.sqrt()).abs() < 1e-9);
        assert_eq!(r.max, 4.0);
        assert!(summarise(vec![]).is_none());
    }
}
