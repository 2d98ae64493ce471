//! `ddsperf` against tagwire through the DDS gateway (issue 20 item 5),
//! each beside `ddsperf` against `ddsperf` in the same run:
//!
//! * `tagwire perf rtt --dds`: ddsperf ping → tagwire pong ([`rtt`]);
//! * `tagwire perf throughput --dds`: ddsperf pub → tagwire subscriber
//!   ([`throughput`]).
//!
//! The pong is what a tagwire user would build: a DDS gateway
//! (`tagwire_gateway`, a client of the benchmark's daemon, here in the
//! perf process as `tagwire dds-gateway` would run) maps ddsperf's topics
//! to two tags, and a tagwire process subscribes to the ping tag and
//! publishes each ping on the pong tag with the ping's source timestamp
//! (ddsperf computes the latency from it, as from its own pong's):
//!
//! ```text
//! ddsperf ping ─UDP─▶ gateway ─▶ /ddsperf/ping ─▶ pong thread ─▶ /ddsperf/pong ─▶ gateway ─UDP─▶ ddsperf ping
//! ```
//!
//! ddsperf's topics and type (`DDSPerfRPingKS`, `DDSPerfRPongKS`, the
//! keyed `KeyedSeq`, its key `keyval` at offset 4); its pong reader sits in
//! a partition named after its participant, so the pong topic is mapped
//! with `partition=*`; and ddsperf answers only participants whose
//! USER_DATA says `DDSPerf:0:<pid>:<host>` (seen in its discovery traffic).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use tagwire::{Client, ClientOptions, Ext, SubscribeOptions};
use tagwire_gateway::{Gateway, GatewayConfig};

use crate::ddsperf::{self, DdsOpts, DdsRtt};

/// The ping tag.
pub const PING_TAG: &str = "/ddsperf/ping";
/// The pong tag.
pub const PONG_TAG: &str = "/ddsperf/pong";

/// The data tag (ddsperf pub's samples).
pub const DATA_TAG: &str = "/ddsperf/data";

/// The gateway's mapping of ddsperf's default topics.
pub fn mapping() -> String {
    format!(
        "{PING_TAG} DDSPerfRPingKS KeyedSeq key=u32@4\n\
         {PONG_TAG} DDSPerfRPongKS KeyedSeq key=u32@4 partition=*\n\
         {DATA_TAG} DDSPerfRDataKS KeyedSeq key=u32@4\n"
    )
}

/// A gateway in `domain` that ddsperf takes for a peer (with a data reader:
/// `has_data`), a client of the daemon at `client`.
fn gateway(
    client: &ClientOptions,
    domain: u32,
    has_data: bool,
    spin: Option<Duration>,
) -> anyhow::Result<Gateway> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "localhost".to_owned(), |h| h.trim().to_owned());
    let user_data = format!(
        "DDSPerf:{}:{}:{host}",
        u8::from(has_data),
        std::process::id()
    );
    Gateway::start(GatewayConfig {
        domain,
        address: Ipv4Addr::LOCALHOST,
        mappings: tagwire_gateway::parse(&mapping())?,
        user_data: user_data.into_bytes(),
        client: client.clone(),
        busy_poll: spin,
    })
    .context("starting the DDS gateway")
}

/// Runs `f` with the calling thread pinned to `cpu` (threads it starts,
/// such as the gateway's, inherit the placement), then restores the
/// thread's placement. With `None`, just runs `f`.
fn on_cpu<T>(cpu: Option<usize>, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let Some(cpu) = cpu else {
        return f();
    };
    let before = rustix::thread::sched_getaffinity(None).context("reading this thread's CPUs")?;
    crate::raw::pin_current_thread(cpu)?;
    let r = f();
    rustix::thread::sched_setaffinity(None, &before).context("restoring this thread's CPUs")?;
    r
}

/// A gateway and a pong thread, answering `ddsperf ping` in `domain`.
pub struct TagwirePong {
    gateway: Option<Gateway>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl TagwirePong {
    /// Starts both, as clients of the daemon at `client`, their threads on
    /// `cpu` if given (where ddsperf's own pong would sit); with `spin`, the
    /// pong's and the gateway's subscriptions busy-poll that long before
    /// sleeping.
    pub fn start(
        client: ClientOptions,
        domain: u32,
        spin: Option<Duration>,
        cpu: Option<usize>,
    ) -> anyhow::Result<Self> {
        on_cpu(cpu, || Self::start_here(client, domain, spin))
    }

    fn start_here(
        client: ClientOptions,
        domain: u32,
        spin: Option<Duration>,
    ) -> anyhow::Result<Self> {
        let gateway = gateway(&client, domain, false, spin)?;
        let c = Client::with_options(client)?;
        let mut so = SubscribeOptions::default();
        if let Some(spin) = spin {
            so = so.busy_poll(spin);
        }
        let mut sub = c.subscribe(PING_TAG, so)?;
        let mut publ = c.publisher(PONG_TAG)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tagwire-pong".into())
            .spawn(move || {
                let mut answered = 0;
                let mut buf = Vec::new();
                while !s.load(Ordering::Acquire) {
                    let Ok(info) = sub.receive_into(Some(Duration::from_millis(100)), &mut buf)
                    else {
                        continue;
                    };
                    // The same instance, the ping's own timestamp.
                    let ext = Ext {
                        key: info.key,
                        ..Ext::default()
                    };
                    if publ.send_with(&buf, &ext, Some(info.timestamp)).is_ok() {
                        answered += 1;
                    }
                }
                answered
            })?;
        Ok(Self {
            gateway: Some(gateway),
            stop,
            thread: Some(thread),
        })
    }

    /// Stops both; returns how many pings were answered.
    pub fn stop(mut self) -> u64 {
        self.end()
    }

    fn end(&mut self) -> u64 {
        self.stop.store(true, Ordering::Release);
        let n = self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0);
        if let Some(g) = self.gateway.take() {
            g.stop();
        }
        n
    }
}

impl Drop for TagwirePong {
    fn drop(&mut self) {
        self.end();
    }
}

/// How long the pong and the gateway spin in [`rtt`]'s busy-poll runs.
pub const SPIN: Duration = Duration::from_micros(200);

/// `ddsperf ping` against a tagwire pong on the daemon at `client`, in the
/// domain of `opts`, for about `seconds` seconds (busy-polling `spin`).
pub fn rtt(
    size: u64,
    seconds: u32,
    opts: &DdsOpts,
    client: ClientOptions,
    spin: Option<Duration>,
) -> anyhow::Result<DdsRtt> {
    // The sleeping pong side where ddsperf's pong sits in the paired run.
    // The spinning one is left to the scheduler: its two spinning threads
    // (the pong and the gateway's) on one CPU would only take turns.
    let cpu = opts.cpus.filter(|_| spin.is_none()).map(|c| c.0);
    let pong = TagwirePong::start(client, opts.domain, spin, cpu)?;
    let r = ddsperf::ping_with(size, seconds, opts);
    let answered = pong.stop();
    r.with_context(|| format!("the tagwire pong answered {answered} pings"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddsperf_ping_gets_a_tagwire_pong_and_ddsperf_pub_a_tagwire_subscriber_if_available() {
        let opts = match DdsOpts::detect() {
            Ok(mut o) => {
                // Its own domain: the ddsperf tests of this crate run beside it.
                o.domain = 200 + std::process::id() % 30;
                o
            }
            Err(why) => {
                println!("skipped: {why}");
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tagwired.sock");
        let daemon = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
            socket: socket.clone(),
            ..tagwire_daemon::Config::default()
        })
        .unwrap();
        let client = ClientOptions {
            socket,
            autostart: false,
            ..ClientOptions::default()
        };
        let r = rtt(256, 2, &opts, client.clone(), None).unwrap();
        assert_eq!(r.size, 256);
        assert!(r.roundtrips > 10, "{r:?}");
        assert!(r.p50_us > 0.0 && r.p50_us < 100_000.0, "{r:?}");
        let t = throughput(256, 3, &opts, client).unwrap();
        println!("ddsperf pub -> tagwire sub: {t:?}");
        assert!(t.msgs_per_s > 100.0 && t.received > 300, "{t:?}");
        assert_eq!(t.lost, 0, "lossless end to end: {t:?}");
        daemon.shutdown();
    }
}

/// What a tagwire subscriber of ddsperf pub's samples counted.
#[derive(Debug, Clone, PartialEq)]
pub struct DdsSubRate {
    /// Median of the per-second rates (first and last second dropped),
    /// samples/s.
    pub msgs_per_s: f64,
    /// The per-second rates kept.
    pub per_second: Vec<f64>,
    /// Samples the subscriber counted lost.
    pub lost: u64,
    /// Samples received.
    pub received: u64,
}

/// `ddsperf pub size S` for about `seconds` seconds into a lossless tagwire
/// subscriber of the mapped data tag (through the gateway, on the daemon at
/// `client`), counting per second.
pub fn throughput(
    size: u64,
    seconds: u32,
    opts: &DdsOpts,
    client: ClientOptions,
) -> anyhow::Result<DdsSubRate> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    // The gateway and the subscriber where ddsperf's sub sits in the paired
    // run.
    let (gw, counter) = on_cpu(opts.cpus.map(|c| c.0), || {
        let gw = gateway(&client, opts.domain, true, None)?;
        let c = Client::with_options(client)?;
        // Lossless, as a KEEP_ALL reliable DDS reader is: a subscriber behind
        // holds the gateway back, and through it the DDS writer.
        let mut sub = c.subscribe(DATA_TAG, SubscribeOptions::default().lossless())?;
        let counter = std::thread::Builder::new()
            .name("tagwire-ddssub".into())
            .spawn(move || {
                let (mut buf, mut per_second, mut n) = (Vec::new(), Vec::new(), 0u64);
                let mut lost = 0;
                let mut tick = None;
                while !s.load(Ordering::Acquire) {
                    match sub.receive_into(Some(Duration::from_millis(100)), &mut buf) {
                        Ok(_) => n += 1,
                        Err(tagwire::Error::Overflowed { lost: l }) => lost += l,
                        Err(_) => {}
                    }
                    // Seconds counted from the first sample.
                    let now = std::time::Instant::now();
                    let t0 = *tick.get_or_insert(now);
                    if n > 0 && now.duration_since(t0) >= Duration::from_secs(1) {
                        per_second.push(n as f64 / now.duration_since(t0).as_secs_f64());
                        n = 0;
                        tick = Some(now);
                    }
                }
                (per_second, lost, sub.received())
            })?;
        Ok((gw, counter))
    })?;
    let size_arg = size.max(ddsperf::MIN_SIZE).to_string();
    let out = ddsperf::run_alone(opts, &["pub", "size", &size_arg], seconds + 2);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Release);
    let (per_second, lost, received) = counter
        .join()
        .map_err(|_| anyhow::anyhow!("the counting thread panicked"))?;
    gw.stop();
    out?;
    // The first second (discovery, a partial second) and the last (pub
    // stopping) are dropped.
    let kept: Vec<f64> = per_second
        .iter()
        .copied()
        .skip(1)
        .take(per_second.len().saturating_sub(2))
        .collect();
    let Some(msgs_per_s) = crate::stats::median(&kept) else {
        anyhow::bail!(
            "the tagwire subscriber received {received} samples in {} seconds",
            per_second.len()
        );
    };
    Ok(DdsSubRate {
        msgs_per_s,
        per_second: kept,
        lost,
        received,
    })
}
