//! `tagwire perf napa`: a reliable stream flat out through a bottleneck
//! with a deep queue, paced (NAPA) and unpaced (the NAPA paper's Figures 7
//! and 8 on this machine).
//!
//! Two hosts in network namespaces; host 0's link leaves through a `tbf` of
//! the given rate whose queue holds `queue` of it (100 ms by default, the
//! paper's deep buffer). One publisher on host 0 sends messages of one size
//! as fast as tagwire lets it, to one lossless subscriber on host 1 that
//! reads through its daemon. A [`Site`] of paced daemons (`NetConfig::
//! pacing`) and one of unpaced ones run alternately, repetition by
//! repetition, in the same invocation. One-way latency is measured from the
//! message's timestamp (taken as the publisher hands it to tagwire, so the
//! time it waits for room in the ring counts) to its receipt; the two
//! namespaces share one clock. The floor of each cell is the message's
//! serialisation at the bottleneck's rate (its bytes on the wire: 1514 per
//! 1472 of UDP payload) plus the same size's one-way latency on the
//! unshaped, idle link (messages 20 ms apart), measured in the same run.
//!
//! With the `tagwire-peers` binary, **Zenoh** runs the same cell in the
//! same namespaces through the same shaped link, interleaved with
//! tagwire's runs: a flat-out publisher (congestion control `Block`) on
//! host 0, a subscriber on host 1, over TCP, each sample stamped as it is
//! handed to Zenoh (`zenoh-stream-pub` / `zenoh-stream-sub`). With
//! `ddsperf`, **Cyclone DDS** runs it too: `ddsperf pub` flat out to
//! `ddsperf sub`, reliable and keep-all, its latency the round trip of
//! the data samples it marks as pings (ddsperf gives no one-way latency).

use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;
use tagwire::{Domain, RingParams, SubscribeOptions};

use crate::remote::Site;
use crate::stats::{median, spread, Summary};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Bottleneck rates, bit/s.
    pub rates: Vec<u64>,
    /// Message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Flat-out seconds before the measured window (the pacer's estimates
    /// settle; the unpaced queue fills).
    pub warmup: Duration,
    /// Measured seconds.
    pub measure: Duration,
    /// The bottleneck's queue, as time at its rate.
    pub queue: Duration,
    /// Random loss on the bottleneck, % of the packets host 1 receives
    /// from host 0 (an nftables rule on its input hook; 0: none), one
    /// pass over every cell per value.
    pub losses: Vec<u8>,
    /// Repetitions of every cell.
    pub reps: usize,
    /// The `tagwire-peers` binary, for the Zenoh rows (`None`: none).
    pub zenoh: Option<std::path::PathBuf>,
    /// `ddsperf`, for the Cyclone DDS rows (`None`: none).
    pub cyclone: Option<crate::ddsperf::DdsOpts>,
}

/// One cell's runs: one system, rate and size.
#[derive(Debug, Clone, Serialize)]
pub struct NapaRecord {
    /// `tagwire paced`, `tagwire unpaced`, `zenoh` or `cyclone dds`
    /// (whose latency is the round trip of pinged data samples: see
    /// `cyclone_stream`).
    pub system: String,
    /// Bottleneck rate, bit/s.
    pub rate_bit_per_s: u64,
    /// Message size, bytes.
    pub size: usize,
    /// Random loss on the bottleneck, %.
    pub loss_pct: u8,
    /// Repetitions.
    pub reps: usize,
    /// Delivered payload throughput, Mbit/s: median, min, max over reps.
    pub mbit_s: [f64; 3],
    /// One-way latency p50, ms: median, min, max over reps.
    pub p50_ms: [f64; 3],
    /// One-way latency p99, ms: median, min, max over reps.
    pub p99_ms: [f64; 3],
    /// Largest one-way latency, ms: median over reps.
    pub max_ms: f64,
    /// Datagrams resent per run: median over reps.
    pub resent: f64,
    /// Messages lost (reported or not): total over reps; must be 0.
    pub lost: u64,
    /// The floor, ms: the message's time on the wire at the bottleneck's
    /// rate plus the p50 one-way latency of its size on the unshaped, idle
    /// link (median over reps).
    pub floor_ms: f64,
    /// p99 / floor.
    pub p99_over_floor: f64,
    /// Delivered / bottleneck rate.
    pub goodput_share: f64,
    /// The stream's state halfway through the measured window, medians
    /// over reps (`tagwire stats`): datagrams unacknowledged, the pacer's
    /// window W (0: unpaced), its minimum RTT (µs) and rate estimate
    /// (Mbit/s).
    pub unacked: f64,
    /// See `unacked`.
    pub pace_window: f64,
    /// See `unacked`.
    pub min_rtt_us: f64,
    /// See `unacked`.
    pub rate_estimate_mbit_s: f64,
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    mbit_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    resent: u64,
    lost: u64,
    /// unacked, pace_window, min_rtt_us, rate_bytes_per_s from the stream's
    /// stats row halfway through the measured window.
    state: [f64; 4],
}

/// Runs every cell `spec.reps` times, paced and unpaced alternately, and
/// returns one record per system, rate and size; `progress` is told each
/// run as it ends.
pub fn napa(
    paced: &Site,
    unpaced: &Site,
    spec: &Spec,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<NapaRecord>> {
    let mut records = Vec::new();
    for &loss in &spec.losses {
        records.extend(napa_at(paced, unpaced, spec, loss, &mut progress)?);
    }
    Ok(records)
}

/// Every rate and size at `loss` % of random loss on the bottleneck.
fn napa_at(
    paced: &Site,
    unpaced: &Site,
    spec: &Spec,
    loss: u8,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<NapaRecord>> {
    let mut records = Vec::new();
    for &rate in &spec.rates {
        for &size in &spec.sizes {
            let (mut runs_p, mut runs_u, mut runs_z, mut runs_c, mut floors) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for rep in 0..spec.reps {
                let wire = size as f64 * 1514.0 / 1472.0 * 8.0 / rate as f64;
                floors.push(wire * 1000.0 + idle_one_way(unpaced, size, rep)?);
                shape(paced, rate, spec.queue, loss)?;
                shape(unpaced, rate, spec.queue, loss)?;
                // Alternate which goes first: neither gets the warmer machine.
                let order: [(&Site, bool); 2] = if rep % 2 == 0 {
                    [(paced, true), (unpaced, false)]
                } else {
                    [(unpaced, false), (paced, true)]
                };
                for (site, is_paced) in order {
                    let run = stream(site, size, spec, &format!("{rate}-{size}-{rep}"))?;
                    progress(&format!(
                        "{} {} Mbit/s {loss} % loss {size} B rep {}: {:.1} Mbit/s p50 {:.2} ms p99 {:.2} ms, {} resent",
                        label(is_paced),
                        rate / 1_000_000,
                        rep + 1,
                        run.mbit_s,
                        run.p50_ms,
                        run.p99_ms,
                        run.resent
                    ));
                    if is_paced { &mut runs_p } else { &mut runs_u }.push(run);
                }
                if let Some(exe) = &spec.zenoh {
                    let run = zenoh_stream(unpaced, exe, size, spec)?;
                    progress(&format!(
                        "zenoh {} Mbit/s {loss} % loss {size} B rep {}: {:.1} Mbit/s p50 {:.2} ms p99 {:.2} ms",
                        rate / 1_000_000,
                        rep + 1,
                        run.mbit_s,
                        run.p50_ms,
                        run.p99_ms,
                    ));
                    runs_z.push(run);
                }
                if let Some(base) = &spec.cyclone {
                    let run = cyclone_stream(unpaced, base, (rate, size), spec)?;
                    progress(&format!(
                        "cyclone dds {} Mbit/s {loss} % loss {size} B rep {}: {:.1} Mbit/s p50 {:.2} ms p99 {:.2} ms (round trips)",
                        rate / 1_000_000,
                        rep + 1,
                        run.mbit_s,
                        run.p50_ms,
                        run.p99_ms,
                    ));
                    runs_c.push(run);
                }
                unshape(paced)?;
                unshape(unpaced)?;
            }
            let floor = median(&floors).unwrap_or(0.0);
            for (is_paced, runs) in [(true, &runs_p), (false, &runs_u)] {
                records.push(record(label(is_paced), (rate, size, loss), runs, floor));
            }
            if !runs_z.is_empty() {
                records.push(record("zenoh", (rate, size, loss), &runs_z, floor));
            }
            if !runs_c.is_empty() {
                records.push(record("cyclone dds", (rate, size, loss), &runs_c, floor));
            }
        }
    }
    Ok(records)
}

fn label(paced: bool) -> &'static str {
    if paced {
        "tagwire paced"
    } else {
        "tagwire unpaced"
    }
}

/// Host 0's egress through a `tbf` of `rate` whose queue holds `queue` of
/// it. The bucket holds 1 ms of the rate (at least 16 kB): a segmented
/// send of up to 64 KiB is split into the bucket's size, and a bucket much
/// shorter than the pacer's release quantum would make every release wait.
/// With `loss` > 0, host 1 drops that share of what it receives from host
/// 0 at random.
fn shape(site: &Site, rate: u64, queue: Duration, loss: u8) -> anyhow::Result<()> {
    let bytes_per_s = rate / 8;
    let burst = (bytes_per_s / 1000).max(16_000);
    let limit = (bytes_per_s as f64 * queue.as_secs_f64()) as u64;
    site.host(0)
        .shape(rate, burst, limit.max(burst))
        .context("shaping host 0's link (tc tbf)")?;
    if loss > 0 {
        site.host(1)
            .drop_input(site.host(0).addr(), loss)
            .context("random loss on host 1's input (nftables)")?;
    }
    Ok(())
}

/// Undoes [`shape`].
fn unshape(site: &Site) -> anyhow::Result<()> {
    site.host(0).unshape()?;
    // (No rule: nothing to remove.)
    let _ = site.host(1).stop_dropping();
    Ok(())
}

/// Ring of about 4 MiB for `size`-byte messages (16 to 512 slots): what
/// the publisher can queue in tagwire before it is held back.
fn ring(size: usize) -> RingParams {
    let slots = ((4usize << 20) / size.max(1))
        .clamp(16, 512)
        .next_power_of_two();
    RingParams {
        slots: u32::try_from(slots).unwrap_or(512),
        slot_payload: u32::try_from(size + 256).unwrap_or(u32::MAX),
    }
}

/// One flat-out stream of `size`-byte messages for `warmup + measure`.
fn stream(site: &Site, size: usize, spec: &Spec, id: &str) -> anyhow::Result<Run> {
    let (c0, c1) = (site.client(0)?, site.client(1)?);
    let tag = format!("/perf/napa/{id}-{}", std::process::id());
    c0.create_tag_with(&tag, Domain::Global, ring(size))?;
    let opts = SubscribeOptions::default().lossless().through_daemon();
    let mut sub = c1.subscribe(&tag, opts)?;
    let mut publisher = c0.publisher(&tag)?;
    publisher.set_send_timeout(Duration::from_secs(60));
    wait_known(&c0, &tag)?;
    let resent_before = site.retransmissions(0);
    let start = SystemTime::now();
    let from = start + spec.warmup;
    let until = Instant::now() + spec.warmup + spec.measure;
    let result = std::thread::scope(|s| {
        let reader = s.spawn(
            || -> anyhow::Result<(Vec<Duration>, usize, Duration, u64)> {
                let mut lat = Vec::new();
                let mut bytes = 0usize;
                let (mut first, mut last) = (None, Instant::now());
                let mut expected = 1u64;
                loop {
                    let m = match sub.receive(Some(Duration::from_secs(30))) {
                        Ok(m) => m,
                        Err(tagwire::Error::Timeout) => bail!("no message for 30 s"),
                        Err(e) => return Err(e.into()),
                    };
                    if m.payload.is_empty() {
                        break; // the end marker
                    }
                    let lost = m.seq.0.saturating_sub(expected);
                    expected = m.seq.0 + 1;
                    if lost > 0 {
                        return Ok((lat, bytes, Duration::ZERO, lost));
                    }
                    if m.timestamp >= from {
                        let now = Instant::now();
                        first.get_or_insert(now);
                        last = now;
                        bytes += m.payload.len();
                        lat.push(
                            SystemTime::now()
                                .duration_since(m.timestamp)
                                .unwrap_or_default(),
                        );
                    }
                }
                let span = first.map_or(Duration::ZERO, |f| last.duration_since(f));
                Ok((lat, bytes, span, sub.lost()))
            },
        );
        let payload = vec![7u8; size];
        let halfway = until - spec.measure / 2;
        let mut state = None;
        while Instant::now() < until {
            publisher.send(&payload)?;
            if state.is_none() && Instant::now() >= halfway {
                state = Some(stream_state(&c0, &tag));
            }
        }
        publisher.send(&[])?;
        let got = reader
            .join()
            .map_err(|_| anyhow::anyhow!("the subscriber thread panicked"))??;
        anyhow::Ok((got, state.unwrap_or_default()))
    });
    let resent = site.retransmissions(0) - resent_before;
    drop(publisher);
    drop(sub);
    let _ = c0.destroy_tag(&tag);
    let ((lat, bytes, span, lost), state) = result?;
    let s = Summary::from_durations(&lat).context("no message in the measured window")?;
    let secs = span.as_secs_f64().max(1e-9);
    Ok(Run {
        mbit_s: bytes as f64 * 8.0 / secs / 1e6,
        p50_ms: s.p50_us / 1000.0,
        p99_ms: s.p99_us / 1000.0,
        max_ms: s.max_us / 1000.0,
        resent,
        lost,
        state,
    })
}

/// One Zenoh run of the cell, on `site`'s hosts (its link shaped): the
/// stream's figures as a [`Run`] (resends and the stream's state are not
/// Zenoh's to report: zero; `lost` counts missing and disordered
/// samples).
fn zenoh_stream(
    site: &Site,
    exe: &std::path::Path,
    size: usize,
    spec: &Spec,
) -> anyhow::Result<Run> {
    let o = crate::peers::PeerOpts {
        exe: exe.to_owned(),
        cpus: None,
        netns: Some((
            site.host(0).netns().to_owned(),
            site.host(1).netns().to_owned(),
            site.host(1).addr().into(),
        )),
    };
    let z = crate::peers::zenoh_stream(&o, size, spec.warmup, spec.measure)?;
    Ok(Run {
        mbit_s: z.mbit_s,
        p50_ms: z.p50_ms,
        p99_ms: z.p99_ms,
        max_ms: z.max_ms,
        resent: 0,
        lost: z.lost + z.disordered,
        state: [0.0; 4],
    })
}

/// One Cyclone DDS run of the cell, on `site`'s hosts (its link shaped):
/// `ddsperf pub` flat out, reliable and keep-all, to `ddsperf sub`, about
/// 100 of its samples a second (1-100 %) treated as pings. Their latency
/// is a **round trip** (the data's way through the bottleneck, the pong's
/// way back on the idle reverse link), an upper bound of the one-way
/// latency the other rows give; ddsperf prints it per second, so p50 and
/// p99 are medians over the seconds of each second's percentile and the
/// maximum the largest second's.
fn cyclone_stream(
    site: &Site,
    base: &crate::ddsperf::DdsOpts,
    (rate, size): (u64, usize),
    spec: &Spec,
) -> anyhow::Result<Run> {
    let opts = site.dds(base, 1, 0)?;
    let per_s = rate as f64 / 8.0 / size as f64;
    let pct = (100.0 * 100.0 / per_s).ceil().clamp(1.0, 100.0) as u32;
    let secs = |d: Duration| d.as_secs_f64().ceil().max(1.0) as u32;
    let r = crate::ddsperf::stream_with_pings(
        &opts,
        size as u64,
        pct,
        secs(spec.warmup),
        secs(spec.measure),
    )?;
    let med = |f: fn(&crate::ddsperf::DdsRttSecond) -> f64| {
        median(&r.rtt.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0) / 1000.0
    };
    Ok(Run {
        mbit_s: median(&r.per_second).unwrap_or(0.0) * r.size as f64 * 8.0 / 1e6,
        p50_ms: med(|s| s.p50_us),
        p99_ms: med(|s| s.p99_us),
        max_ms: r.rtt.iter().map(|s| s.max_us).fold(0.0, f64::max) / 1000.0,
        resent: 0,
        lost: r.lost,
        state: [0.0; 4],
    })
}

/// unacked, pace_window, min_rtt_us and rate_bytes_per_s of `tag`'s stream
/// (zeros where the row or a counter is missing).
fn stream_state(c0: &tagwire::Client, tag: &str) -> [f64; 4] {
    let Ok(rows) = c0.stats() else {
        return [0.0; 4];
    };
    let Some(row) = rows
        .into_iter()
        .find(|r| r.kind == tagwire::StatsKind::Outbound && r.tag == tag)
    else {
        return [0.0; 4];
    };
    let get = |name: &str| {
        row.counters
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0.0, |(_, v)| *v as f64)
    };
    [
        get("unacked"),
        get("pace_window"),
        get("min_rtt_us"),
        get("rate_bytes_per_s"),
    ]
}

/// The p50 one-way latency, ms, of 40 `size`-byte messages 20 ms apart on
/// the idle link.
fn idle_one_way(site: &Site, size: usize, rep: usize) -> anyhow::Result<f64> {
    let (c0, c1) = (site.client(0)?, site.client(1)?);
    let tag = format!("/perf/napa/idle-{size}-{rep}-{}", std::process::id());
    c0.create_tag_with(&tag, Domain::Global, ring(size))?;
    let mut sub = c1.subscribe(&tag, SubscribeOptions::default().through_daemon())?;
    let mut publisher = c0.publisher(&tag)?;
    wait_known(&c0, &tag)?;
    let payload = vec![1u8; size];
    let mut lat = Vec::new();
    for _ in 0..40 {
        publisher.send(&payload)?;
        let m = sub.receive(Some(Duration::from_secs(10)))?;
        lat.push(
            SystemTime::now()
                .duration_since(m.timestamp)
                .unwrap_or_default(),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(publisher);
    drop(sub);
    let _ = c0.destroy_tag(&tag);
    let s = Summary::from_durations(&lat).context("no idle sample")?;
    Ok(s.p50_us / 1000.0)
}

/// Waits (up to 10 s) until the publishing node (`c0`'s) sees a receiver
/// of `tag`.
pub(crate) fn wait_known(c0: &tagwire::Client, tag: &str) -> anyhow::Result<()> {
    let start = Instant::now();
    while c0.receivers(tag)?.is_empty() {
        if start.elapsed() > Duration::from_secs(10) {
            bail!("the subscriber of {tag} is not known to the publishing node after 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn record(
    system: &str,
    (rate, size, loss): (u64, usize, u8),
    runs: &[Run],
    floor: f64,
) -> NapaRecord {
    let spread = |f: fn(&Run) -> f64| spread(&runs.iter().map(f).collect::<Vec<_>>());
    let p99 = spread(|r| r.p99_ms);
    let mbit = spread(|r| r.mbit_s);
    NapaRecord {
        system: system.to_owned(),
        rate_bit_per_s: rate,
        size,
        loss_pct: loss,
        reps: runs.len(),
        mbit_s: mbit,
        p50_ms: spread(|r| r.p50_ms),
        p99_ms: p99,
        max_ms: spread(|r| r.max_ms)[0],
        resent: spread(|r| r.resent as f64)[0],
        lost: runs.iter().map(|r| r.lost).sum(),
        floor_ms: floor,
        p99_over_floor: if floor > 0.0 { p99[0] / floor } else { 0.0 },
        goodput_share: mbit[0] * 1e6 / rate as f64,
        unacked: spread(|r| r.state[0])[0],
        pace_window: spread(|r| r.state[1])[0],
        min_rtt_us: spread(|r| r.state[2])[0],
        rate_estimate_mbit_s: spread(|r| r.state[3])[0] * 8.0 / 1e6,
    }
}

/// The records as a table, with paced ÷ unpaced ratios per cell.
pub fn table(records: &[NapaRecord]) -> String {
    let mut out = String::from(
        "system           rate loss    size  Mbit/s (min-max)     p50 ms (min-max)        p99 ms (min-max)        max ms  resent lost floor ms p99/floor  unacked  W  minRTT us  rate est\n",
    );
    for r in records {
        out += &format!(
            "{:<16} {:>5}M {:>3}% {:>7}  {:>6.1} ({:.1}-{:.1})  {:>8.2} ({:.2}-{:.2})  {:>8.2} ({:.2}-{:.2})  {:>7.1} {:>6} {:>4} {:>8.2} {:>8.1} {:>8.0} {:>3.0} {:>9.0} {:>8.1}\n",
            r.system,
            r.rate_bit_per_s / 1_000_000,
            r.loss_pct,
            r.size,
            r.mbit_s[0],
            r.mbit_s[1],
            r.mbit_s[2],
            r.p50_ms[0],
            r.p50_ms[1],
            r.p50_ms[2],
            r.p99_ms[0],
            r.p99_ms[1],
            r.p99_ms[2],
            r.max_ms,
            r.resent,
            r.lost,
            r.floor_ms,
            r.p99_over_floor,
            r.unacked,
            r.pace_window,
            r.min_rtt_us,
            r.rate_estimate_mbit_s,
        );
    }
    for other in ["tagwire unpaced", "zenoh", "cyclone dds"] {
        if !records.iter().any(|r| r.system == other) {
            continue;
        }
        out += &format!("\npaced / {other}, same run (medians): p50, p99, throughput\n");
        for p in records.iter().filter(|r| r.system == "tagwire paced") {
            if let Some(u) = records.iter().find(|u| {
                u.system == other
                    && u.rate_bit_per_s == p.rate_bit_per_s
                    && u.size == p.size
                    && u.loss_pct == p.loss_pct
            }) {
                let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
                out += &format!(
                    "{:>5}M {:>3}% {:>7}  p50 {:.3}  p99 {:.3}  throughput {:.3}\n",
                    p.rate_bit_per_s / 1_000_000,
                    p.loss_pct,
                    p.size,
                    ratio(p.p50_ms[0], u.p50_ms[0]),
                    ratio(p.p99_ms[0], u.p99_ms[0]),
                    ratio(p.mbit_s[0], u.mbit_s[0])
                );
            }
        }
    }
    let lossy: Vec<&NapaRecord> = records
        .iter()
        .filter(|r| r.system == "tagwire paced" && r.loss_pct > 0)
        .collect();
    if !lossy.is_empty() {
        out += "\npaced with loss / paced without, throughput (medians)\n";
    }
    for p in lossy {
        if let Some(clean) = records.iter().find(|c| {
            c.system == p.system
                && c.rate_bit_per_s == p.rate_bit_per_s
                && c.size == p.size
                && c.loss_pct == 0
        }) {
            out += &format!(
                "{:>5}M {:>3}% {:>7}  throughput {:.3}\n",
                p.rate_bit_per_s / 1_000_000,
                p.loss_pct,
                p.size,
                p.mbit_s[0] / clean.mbit_s[0].max(1e-9)
            );
        }
    }
    out
}
