//! `tagwire-peers`: the peer middlewares `tagwire perf` measures beside
//! tagwire in the same run, each side a process of its own the way each
//! system's users run it (docs/design.md §5: peers in the same run, placed
//! alike):
//!
//! * **Zenoh** (its Rust crate, TCP, peer mode, no scouting): a flat-out
//!   publisher and a counting subscriber (`zenoh-pub` / `zenoh-sub`, the
//!   shape of Zenoh's own `z_pub_thr` / `z_sub_thr`: one payload, cloned,
//!   congestion control `Block` so nothing is dropped), and a round trip
//!   (`zenoh-ping` / `zenoh-pong`, express publishers as in `z_ping`).
//! * **Zenoh flat out through a bottleneck** (`zenoh-stream-pub` /
//!   `zenoh-stream-sub`, module `zenoh_stream`): stamped samples, one-way
//!   latency at the subscriber.
//! * **Zenoh with its priorities** beside a load (`zenoh-prio-ping` /
//!   `zenoh-prio-pong`, and `zenoh-prio-load` for a load from another
//!   host; module `zenoh_prio`).
//! * **iceoryx2** (its Rust crate, zero-copy shared memory): a round trip
//!   (`iox2-ping` / `iox2-pong`), blocking on an event service or
//!   busy-polling the subscriber, each side copying the sample it gets
//!   (or, `--peek`, the ping looking at the answer's header only); and a flat-out publisher (held back while
//!   the subscriber's buffer is full: no overflow, nothing dropped) into a
//!   busy-polling counting subscriber (`iox2-pub` / `iox2-sub`).
//!
//! Every measuring side prints one JSON line on stdout; errors go to
//! stderr with a non-zero exit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand, ValueEnum};

mod zenoh_peer;
mod zenoh_prio;
mod zenoh_stream;

#[derive(Parser)]
#[command(about = "Peer middlewares for `tagwire perf`: Zenoh and iceoryx2")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Count samples from `zenoh-pub`; print the rate and what was lost.
    ZenohSub {
        /// Endpoint to listen on, e.g. `tcp/10.0.0.2:7447`.
        #[arg(long)]
        listen: String,
        /// Seconds measured, after `--warm`.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Seconds skipped after the first sample.
        #[arg(long, default_value_t = 0.5)]
        warm: f64,
    },
    /// Publish `size`-byte samples flat out for `seconds`, then the count.
    ZenohPub {
        /// Endpoint of the subscriber, e.g. `tcp/10.0.0.2:7447`.
        #[arg(long)]
        connect: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        seconds: f64,
    },
    /// Receive stamped samples from `zenoh-stream-pub`; print the
    /// measured window's Mbit/s and one-way latency (ms) as JSON.
    ZenohStreamSub {
        #[arg(long)]
        listen: String,
        /// Seconds after the first sample's stamp before the window.
        #[arg(long)]
        warm: f64,
        /// The window, seconds of send stamps.
        #[arg(long)]
        seconds: f64,
    },
    /// Publish stamped, numbered samples flat out for `seconds`.
    ZenohStreamPub {
        #[arg(long)]
        connect: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        seconds: f64,
    },
    /// Answer every ping with its payload, until killed.
    ZenohPong {
        #[arg(long)]
        listen: String,
    },
    /// Round trips through `zenoh-pong`; print p50 and p99 in µs.
    ZenohPing {
        #[arg(long)]
        connect: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        iters: usize,
        #[arg(long)]
        warmup: usize,
    },
    /// Answer every ping at a priority, and swallow the load, until
    /// killed (the far side of `zenoh-prio-ping`).
    ZenohPrioPong {
        #[arg(long)]
        listen: String,
        /// A second link for the real-time priority, one port up, with
        /// the critical class's TOS.
        #[arg(long)]
        own_link: bool,
        /// The replies' priority (`real-time`, `data`, …).
        #[arg(long, default_value = "data")]
        priority: String,
    },
    /// A paced load at `data` to a `zenoh-prio-pong`'s shared link, for
    /// `--seconds` (Figure 5b's load, from another host than the ping).
    ZenohPrioLoad {
        #[arg(long)]
        connect: String,
        #[arg(long, default_value_t = 1400)]
        load_size: usize,
        #[arg(long)]
        load_per_s: f64,
        #[arg(long)]
        seconds: f64,
    },
    /// Round trips at a priority beside a paced load at `data` on the
    /// same session; print their mean, std, p50, p99, p99.9, max (µs)
    /// and the load's Mbit/s as one JSON line.
    ZenohPrioPing {
        #[arg(long)]
        connect: String,
        #[arg(long)]
        own_link: bool,
        #[arg(long, default_value = "data")]
        priority: String,
        #[arg(long, default_value_t = 256)]
        size: usize,
        /// Pause between a reply and the next request, µs.
        #[arg(long, default_value_t = 1000)]
        gap_us: u64,
        #[arg(long)]
        warmup: f64,
        #[arg(long)]
        seconds: f64,
        #[arg(long, default_value_t = 1400)]
        load_size: usize,
        /// Load messages per second (0: no load).
        #[arg(long)]
        load_per_s: f64,
    },
    /// Answer every ping with its payload, until killed.
    Iox2Pong {
        #[arg(long, value_enum)]
        mode: Wait,
        /// Service name prefix (distinct per run).
        #[arg(long)]
        name: String,
    },
    /// Count samples from `iox2-pub` (busy-polling); print the rate and
    /// the samples missing from its numbering after the warm-up.
    Iox2Sub {
        #[arg(long)]
        name: String,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        #[arg(long, default_value_t = 0.5)]
        warm: f64,
    },
    /// Publish `size`-byte numbered samples flat out for `seconds`.
    Iox2Pub {
        #[arg(long)]
        name: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        seconds: f64,
    },
    /// Round trips through `iox2-pong`; print p50 and p99 in µs.
    Iox2Ping {
        #[arg(long, value_enum)]
        mode: Wait,
        #[arg(long)]
        name: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        iters: usize,
        #[arg(long)]
        warmup: usize,
        /// Do not copy the answer out: look at the sample's header only
        /// (the way iceoryx2's own benchmark does; the answer's bytes stay
        /// on the pong's core).
        #[arg(long)]
        peek: bool,
    },
}

/// How an iceoryx2 side waits for a sample.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Wait {
    /// Sleep on an event service, woken by the sender's notifier.
    Block,
    /// Poll the subscriber in a loop.
    Spin,
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::ZenohSub {
            listen,
            seconds,
            warm,
        } => zenoh_peer::sub(&listen, seconds, warm),
        Cmd::ZenohPub {
            connect,
            size,
            seconds,
        } => zenoh_peer::publish(&connect, size, seconds),
        Cmd::ZenohStreamSub {
            listen,
            warm,
            seconds,
        } => zenoh_stream::sub(&listen, warm, seconds),
        Cmd::ZenohStreamPub {
            connect,
            size,
            seconds,
        } => zenoh_stream::publish(&connect, size, seconds),
        Cmd::ZenohPong { listen } => zenoh_peer::pong(&listen),
        Cmd::ZenohPing {
            connect,
            size,
            iters,
            warmup,
        } => zenoh_peer::ping(&connect, size, iters, warmup),
        Cmd::ZenohPrioPong {
            listen,
            own_link,
            priority,
        } => zenoh_prio::priority(&priority).and_then(|p| zenoh_prio::pong(&listen, own_link, p)),
        Cmd::ZenohPrioLoad {
            connect,
            load_size,
            load_per_s,
            seconds,
        } => zenoh_prio::load(&connect, load_size, load_per_s, seconds),
        Cmd::ZenohPrioPing {
            connect,
            own_link,
            priority,
            size,
            gap_us,
            warmup,
            seconds,
            load_size,
            load_per_s,
        } => zenoh_prio::priority(&priority).and_then(|prio| {
            zenoh_prio::ping(&zenoh_prio::Probe {
                connect,
                own_link,
                prio,
                size,
                gap: Duration::from_micros(gap_us),
                warmup: Duration::from_secs_f64(warmup),
                measure: Duration::from_secs_f64(seconds),
                load_size,
                load_per_s,
            })
        }),
        Cmd::Iox2Pong { mode, name } => iox2_peer::pong(mode, &name),
        Cmd::Iox2Sub {
            name,
            seconds,
            warm,
        } => iox2_peer::sub(&name, seconds, warm),
        Cmd::Iox2Pub {
            name,
            size,
            seconds,
        } => iox2_peer::publish(&name, size, seconds),
        Cmd::Iox2Ping {
            mode,
            name,
            size,
            iters,
            warmup,
            peek,
        } => iox2_peer::ping(mode, &name, size, (iters, warmup), peek),
    };
    if let Err(e) = r {
        eprintln!("tagwire-peers: {e:#}");
        std::process::exit(1);
    }
}

/// Prints the round trips' median and 99th percentile as one JSON line.
fn print_rtt(mut us: Vec<f64>) -> anyhow::Result<()> {
    if us.is_empty() {
        bail!("no round trips measured");
    }
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
    println!(
        "{{\"p50_us\":{:.3},\"p99_us\":{:.3},\"n\":{}}}",
        at(0.5),
        at(0.99),
        us.len()
    );
    Ok(())
}

mod iox2_peer {
    use super::*;
    use iceoryx2::prelude::*;

    type Pub = iceoryx2::port::publisher::Publisher<ipc::Service, [u8], ()>;
    type Sub = iceoryx2::port::subscriber::Subscriber<ipc::Service, [u8], ()>;
    type Notifier = iceoryx2::port::notifier::Notifier<ipc::Service>;
    type Listener = iceoryx2::port::listener::Listener<ipc::Service>;

    struct Ends {
        tx: Pub,
        rx: Sub,
        /// Block mode: wakes the other side / is woken.
        notifier: Option<Notifier>,
        listener: Option<Listener>,
        _node: Node<ipc::Service>,
    }

    fn err(e: impl std::fmt::Debug) -> anyhow::Error {
        anyhow::anyhow!("iceoryx2: {e:?}")
    }

    /// This side's ports: publishes on `out`, subscribes to `inp`.
    fn ends(mode: Wait, name: &str, out: &str, inp: &str, size: usize) -> anyhow::Result<Ends> {
        let node = NodeBuilder::new().create::<ipc::Service>().map_err(err)?;
        let svc = |s: &str| -> anyhow::Result<ServiceName> {
            format!("{name}/{s}").as_str().try_into().map_err(err)
        };
        let o = node
            .service_builder(&svc(out)?)
            .publish_subscribe::<[u8]>()
            .open_or_create()
            .map_err(err)?;
        let i = node
            .service_builder(&svc(inp)?)
            .publish_subscribe::<[u8]>()
            .open_or_create()
            .map_err(err)?;
        let tx = o
            .publisher_builder()
            .initial_max_slice_len(size.max(1))
            .create()
            .map_err(err)?;
        let rx = i.subscriber_builder().create().map_err(err)?;
        let (notifier, listener) = if mode == Wait::Block {
            let oe = node
                .service_builder(&svc(&format!("{out}-event"))?)
                .event()
                .open_or_create()
                .map_err(err)?;
            let ie = node
                .service_builder(&svc(&format!("{inp}-event"))?)
                .event()
                .open_or_create()
                .map_err(err)?;
            (
                Some(oe.notifier_builder().create().map_err(err)?),
                Some(ie.listener_builder().create().map_err(err)?),
            )
        } else {
            (None, None)
        };
        Ok(Ends {
            tx,
            rx,
            notifier,
            listener,
            _node: node,
        })
    }

    impl Ends {
        fn send(&self, bytes: &[u8]) -> anyhow::Result<()> {
            let s = self.tx.loan_slice_uninit(bytes.len()).map_err(err)?;
            s.write_from_slice(bytes).send().map_err(err)?;
            if let Some(n) = &self.notifier {
                n.notify().map_err(err)?;
            }
            Ok(())
        }

        /// Waits up to `limit` for a sample; calls `f` with it.
        fn recv(&self, limit: Duration, mut f: impl FnMut(&[u8])) -> anyhow::Result<bool> {
            let until = Instant::now() + limit;
            let mut polls = 0u32;
            loop {
                if let Some(s) = self.rx.receive().map_err(err)? {
                    f(s.payload());
                    return Ok(true);
                }
                if self.listener.is_none() {
                    // Busy-polling: the clock only every 64 polls, so that a
                    // clock read does not slow every poll (tagwire's and the
                    // raw baseline's spinners do the same).
                    polls += 1;
                    if polls % 64 != 0 {
                        std::hint::spin_loop();
                        continue;
                    }
                }
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                if let Some(l) = &self.listener {
                    l.timed_wait(|_| {}, left).map_err(err)?;
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// The throughput service: no overflow (a full subscriber buffer
    /// holds the publisher back), both sides alike.
    fn thr(
        node: &Node<ipc::Service>,
        name: &str,
    ) -> anyhow::Result<
        iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u8], ()>,
    > {
        let svc: ServiceName = format!("{name}/thr").as_str().try_into().map_err(err)?;
        node.service_builder(&svc)
            .publish_subscribe::<[u8]>()
            .enable_safe_overflow(false)
            .subscriber_max_buffer_size(THR_BUFFER)
            .open_or_create()
            .map_err(err)
    }

    /// Samples a subscriber's buffer holds.
    const THR_BUFFER: usize = 256;

    /// The end marker's number.
    const END: u64 = u64::MAX;

    pub(crate) fn sub(name: &str, seconds: f64, warm: f64) -> anyhow::Result<()> {
        let node = NodeBuilder::new().create::<ipc::Service>().map_err(err)?;
        let rx = thr(&node, name)?
            .subscriber_builder()
            .buffer_size(THR_BUFFER)
            .create()
            .map_err(err)?;
        let (mut received, mut lost, mut next) = (0u64, 0u64, 1u64);
        let mut window: Option<(Instant, u64)> = None;
        let mut rate = None;
        let mut first: Option<Instant> = None;
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            let Some(sample) = rx.receive().map_err(err)? else {
                if Instant::now() > give_up {
                    bail!("the publisher never ended");
                }
                std::hint::spin_loop();
                continue;
            };
            let p = sample.payload();
            let seq = u64::from_le_bytes(
                p.get(..8)
                    .and_then(|b| b.try_into().ok())
                    .context("a sample shorter than its number")?,
            );
            if seq == END {
                break;
            }
            if window.is_none() {
                // Samples sent while the connection is being made may
                // reach nobody: gaps count from the measured window on.
                next = seq;
            }
            received += 1;
            lost += seq.saturating_sub(next);
            next = seq + 1;
            let now = Instant::now();
            let t0 = *first.get_or_insert(now);
            match window {
                None if now >= t0 + Duration::from_secs_f64(warm) => window = Some((now, received)),
                Some((at, n)) if rate.is_none() && now >= at + Duration::from_secs_f64(seconds) => {
                    rate = Some((received - n) as f64 / (now - at).as_secs_f64());
                }
                _ => {}
            }
        }
        let rate = rate.context("the publisher ended before the measured window did")?;
        println!(
            "{{\"msgs_per_s\":{rate:.1},\"received\":{received},\"sent\":{},\"lost\":{lost}}}",
            received + lost
        );
        Ok(())
    }

    pub(crate) fn publish(name: &str, size: usize, seconds: f64) -> anyhow::Result<()> {
        let node = NodeBuilder::new().create::<ipc::Service>().map_err(err)?;
        let svc = thr(&node, name)?;
        let tx = svc
            .publisher_builder()
            .initial_max_slice_len(size.max(8))
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()
            .map_err(err)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while svc.dynamic_config().number_of_subscribers() == 0 {
            if Instant::now() > deadline {
                bail!("no subscriber in 20 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut buf = vec![0x5au8; size.max(8)];
        let stop = Instant::now() + Duration::from_secs_f64(seconds);
        let mut seq = 0u64;
        while Instant::now() < stop {
            for _ in 0..64 {
                seq += 1;
                buf[..8].copy_from_slice(&seq.to_le_bytes());
                let s = tx.loan_slice_uninit(buf.len()).map_err(err)?;
                s.write_from_slice(&buf).send().map_err(err)?;
            }
        }
        buf[..8].copy_from_slice(&END.to_le_bytes());
        let s = tx.loan_slice_uninit(buf.len()).map_err(err)?;
        s.write_from_slice(&buf).send().map_err(err)?;
        Ok(())
    }

    pub(crate) fn pong(mode: Wait, name: &str) -> anyhow::Result<()> {
        let e = ends(mode, name, "pong", "ping", 64 << 10)?;
        let mut buf = Vec::new();
        loop {
            let mut got = false;
            e.recv(Duration::from_secs(3600), |p| {
                buf.clear();
                buf.extend_from_slice(p);
                got = true;
            })?;
            if got {
                e.send(&buf)?;
            }
        }
    }

    pub(crate) fn ping(
        mode: Wait,
        name: &str,
        size: usize,
        (iters, warmup): (usize, usize),
        peek: bool,
    ) -> anyhow::Result<()> {
        let e = ends(mode, name, "ping", "pong", size)?;
        let payload = vec![0x5au8; size];
        let deadline = Instant::now() + Duration::from_secs(20);
        // Until the pong answers (its subscriber exists), retry.
        while !e.recv(Duration::from_millis(100), |_| {})? {
            if Instant::now() > deadline {
                bail!("no pong in 20 s");
            }
            e.send(&payload)?;
        }
        std::thread::sleep(Duration::from_millis(200));
        while e.recv(Duration::ZERO, |_| {})? {}
        let mut us = Vec::with_capacity(iters);
        // The answer is copied out, as the pong copies the ping and as
        // tagwire's and the raw baselines' pings do: every system hands
        // the application the answer's bytes (a sample only looked at
        // through its header leaves its lines on the other core). With
        // `peek`, only the header is looked at.
        let mut back = Vec::with_capacity(size);
        for i in 0..warmup + iters {
            let t = Instant::now();
            e.send(&payload)?;
            if !e.recv(Duration::from_secs(5), |p| {
                if !peek {
                    back.clear();
                    back.extend_from_slice(p);
                }
            })? {
                bail!("a pong did not come in 5 s");
            }
            if i >= warmup {
                us.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        print_rtt(us)
    }
}
