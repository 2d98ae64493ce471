//! `tagwire perf`: the paper's sender-based benchmarks, with raw baselines and
//! Cyclone DDS measured in the same run. The library behind it is `tagwire-perf`.

use std::path::PathBuf;

use anyhow::Context;
use tagwire_perf::report::{self, Record};
use tagwire_perf::suite::{self, Mode, SuiteOpts};
use tagwire_perf::workload::{self, Acks, Env};

mod hosts;
mod own;
mod play;
mod record;

/// Arguments of `tagwire perf`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    bench: Bench,
    /// Repetitions of every point (median and spread are reported).
    #[arg(long, global = true, default_value_t = 3)]
    reps: usize,
    /// Round trips per repetition.
    #[arg(long, global = true, default_value_t = 2000)]
    iters: usize,
    /// Unmeasured round trips before each repetition.
    #[arg(long, global = true, default_value_t = 200)]
    warmup: usize,
    /// Print one JSON object per line instead of the table.
    #[arg(long, global = true)]
    json: bool,
    /// Where results (JSON lines, table, PNG) are written.
    #[arg(long, global = true, default_value = "bench/results")]
    out: PathBuf,
    /// Do not run Cyclone DDS beside tagwire.
    #[arg(long, global = true)]
    no_dds: bool,
    /// Do not run Zenoh and iceoryx2 beside tagwire (they run when
    /// `proof/peers` is built: target/peers/release/tagwire-peers, or
    /// $TAGWIRE_PEERS).
    #[arg(long, global = true)]
    no_peers: bool,
    /// Seconds per Cyclone DDS measurement.
    #[arg(long, global = true, default_value_t = 4)]
    dds_seconds: u32,
    /// CPU placement `SENDER,RECEIVER` for every system (tagwire, raw
    /// baselines, ddsperf, the peers), or `none` to leave it to the
    /// scheduler (whose placement makes blocking round trips bimodal on a
    /// 2-vCPU VM). Default: across two cores. In `throughput` tagwire's
    /// publisher runs on the sender's CPU, and with `--remote` each
    /// host's daemon on its side's CPU too; in the remote round trips the
    /// daemons are left to the scheduler.
    #[arg(long, global = true, default_value = "0,1")]
    pin: String,
    /// Use the daemon at this socket instead of starting a private one.
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    /// remote-rtt and throughput --remote: daemons without a domain key
    /// (`off`), with one (`on`: every datagram and link authenticated), or
    /// both in the same run (`on,off`: `tagwire+auth` paired with `tagwire`).
    #[arg(long, global = true, value_delimiter = ',', default_value = "off")]
    auth: Vec<String>,
    /// The multi-host benchmarks: every daemon paces its reliable streams
    /// (`tagwire daemon --pacing`).
    #[arg(long, global = true)]
    pacing: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Bench {
    /// Idle daemon memory and client threads per subscription.
    Footprint,
    /// A lossless `tagwire record` of a flat-out local publisher, beside a
    /// lossless subscriber of the same publisher: messages per second to
    /// disk, each file read back (PyPI's mcap reader, when its venv is
    /// there).
    Record {
        /// Message size in bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
        /// Messages per repetition.
        #[arg(long, default_value_t = 2_000_000)]
        count: u64,
        /// The recorder's compressions to run (none, lz4, zstd).
        #[arg(long, value_delimiter = ',', default_value = "none,lz4,zstd")]
        compression: Vec<String>,
    },
    /// How closely `tagwire play` keeps a recording's timing: three
    /// publishers at `--hz` each recorded, played back, each message's
    /// time against its log time, beside the publishers' own (the floor).
    Play {
        /// Messages per second of each publisher.
        #[arg(long, default_value_t = 10_000.0)]
        hz: f64,
        /// Messages of each publisher per repetition.
        #[arg(long, default_value_t = 33_334)]
        count: usize,
        /// Publishers, recorder, player and subscribers at this policy.
        #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
        sched: Option<tagwire::Sched>,
    },
    /// What each API call costs its caller (create/destroy tag, get and
    /// release send access, subscribe/unsubscribe, send and receive per
    /// size, senders/receivers, pull): p50, p99.9, maximum, for timing
    /// analysis, and the time the platform takes from the most urgent
    /// thread of each CPU (`stolen`, per window; needs SCHED_FIFO 99);
    /// `--remote` adds the same with the tag known on another node
    /// (network namespaces; root).
    Costs {
        /// Calls timed per call kind (table changes across nodes: at most
        /// 2,000; 1 MiB sends and receives: at most 2,000).
        #[arg(long, default_value_t = 10_000)]
        calls: usize,
        /// Message sizes for send and receive, bytes.
        #[arg(long, value_delimiter = ',', default_value = "64,1024,65536,1048576")]
        sizes: Vec<usize>,
        /// Also with a subscriber and a publisher of the tag on another
        /// host.
        #[arg(long)]
        remote: bool,
        /// Make the calls at this policy (`fifo:50`), as the application
        /// analysed runs its tasks (root or CAP_SYS_NICE).
        #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
        sched: Option<tagwire::Sched>,
    },
    /// Proxy-placement solve times (push-pull paper Table 3): vBNS and
    /// generated topologies, exhaustive search and MILP.
    Place {
        /// Skip generated topologies larger than this.
        #[arg(long, default_value_t = 100)]
        max_nodes: usize,
    },
    /// Round trip against message size (1 receiver).
    Rtt {
        /// Message sizes, bytes.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "32,64,128,256,512,1024,2048,4096,8192"
        )]
        sizes: Vec<usize>,
        /// Receive modes: block (a blocking receive as it comes: a stream
        /// that flows is polled 20 µs before sleeping, which keeps both ends
        /// of a fast ping-pong awake), sleep (the same with that poll off:
        /// a futex wake-up per message), spin (busy-poll 50 ms).
        #[arg(long, value_delimiter = ',', default_value = "block,sleep,spin")]
        modes: Vec<String>,
        /// Languages of both ends: rust (always), cpp (the C++ API over the C
        /// ABI), python (the pyo3 binding), java (the FFM binding over the C
        /// ABI); blocking receives, paired with Rust.
        #[arg(long, value_delimiter = ',', default_value = "rust")]
        lang: Vec<String>,
        /// Also `ddsperf ping` against a tagwire pong through the DDS
        /// gateway, beside ddsperf ping against ddsperf pong.
        #[arg(long)]
        dds: bool,
    },
    /// Round trip against the number of receivers (paper Figures 4-4, 4-5).
    Fanout {
        /// Receiver counts: a range `1..8` or a list `1,2,4,8`.
        #[arg(long, default_value = "1..8")]
        receivers: String,
        /// Who acknowledges: all, last or both.
        #[arg(long, default_value = "both")]
        acks: String,
        /// Message size, bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
        /// Receive mode.
        #[arg(long, default_value = "block")]
        mode: String,
        /// Also run the sender at SCHED_FIFO above, below or level with
        /// its receivers (the 1995 paper's Figures 4-4 and 4-5; root or
        /// CAP_SYS_NICE; `--pin 0,0` shares one CPU as the paper's did).
        #[arg(long, value_delimiter = ',')]
        sender_priority: Vec<String>,
    },
    /// Messages per second at the subscriber, publisher flat out.
    Throughput {
        /// Message sizes, bytes.
        #[arg(long, value_delimiter = ',', default_value = "256,8192")]
        size: Vec<usize>,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Also run tagwire paced at this multiple of Cyclone DDS's rate (0 = off).
        #[arg(long, default_value_t = 3.0)]
        paced: f64,
        /// Publisher and subscriber on two hosts (network namespaces; root).
        #[arg(long)]
        remote: bool,
        /// Also `ddsperf pub` into a tagwire subscriber through the DDS
        /// gateway, beside ddsperf pub into ddsperf sub.
        #[arg(long)]
        dds: bool,
    },
    /// Round trip to a receiver on another host against size, beside raw UDP
    /// and Cyclone DDS across the same link (network namespaces; root).
    RemoteRtt {
        /// Message sizes, bytes.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "32,64,128,256,512,1024,2048,4096,8192"
        )]
        sizes: Vec<usize>,
    },
    /// Tags on several nodes for a long time while faults come at random
    /// (kills of publishers, subscribers and daemons, link cuts, drops,
    /// rate limits, partitions), checking that no message is corrupt,
    /// repeated, out of order or lost without being reported (network
    /// namespaces; root).
    Soak {
        /// Hosts.
        #[arg(long, default_value_t = 4)]
        nodes: usize,
        /// Tags (each one publisher, two subscribers).
        #[arg(long, default_value_t = 20)]
        tags: usize,
        /// Seconds of faults.
        #[arg(long, default_value_t = 1800)]
        seconds: u64,
        /// Seconds between two faults.
        #[arg(long, default_value_t = 4)]
        fault_every: u64,
        /// The draw's seed (printed; the same seed, the same faults).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The faults drawn from.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "kill-publisher,kill-subscriber,restart-daemon,link-down,drops,rate,partition"
        )]
        faults: Vec<tagwire_perf::soak::Fault>,
        /// The subscriber kinds, given to the tags by turns.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "reliable,lossless,best-effort,tcp"
        )]
        kinds: Vec<tagwire_perf::soak::child::Kind>,
    },
    /// A soak's publisher or subscriber (internal: `perf soak` starts them).
    #[command(hide = true)]
    SoakChild {
        /// What it does (JSON).
        spec: String,
    },
    /// Round trip against the number of receivers, all on one other host
    /// (paper Figure 4-6; network namespaces; root).
    RemoteFanout {
        /// Receiver counts: a range `1..8` or a list `1,2,4,8`.
        #[arg(long, default_value = "1..8")]
        receivers: String,
        /// Who acknowledges: all, last or both.
        #[arg(long, default_value = "both")]
        acks: String,
        /// Message size, bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
    },
    /// Round trip to a subscriber on another host asking for every n-th
    /// sample, by proxy placement: none, subscriber, publisher, a third host
    /// (push-pull; network namespaces; root).
    ProxyRtt {
        /// Message size, bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
        /// The subscriber's scale n.
        #[arg(long, default_value_t = 10)]
        every: u32,
    },
    /// Pull the last N messages of a tag's history from the local daemon,
    /// beside receiving the same N messages from a subscription's queue.
    Pull {
        /// Messages pulled.
        #[arg(long, default_value_t = 1000)]
        count: u32,
        /// Message size, bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
    },
    /// The ORTE paper's Table 2: N 4-byte messages from a flat-out publisher
    /// to a lossless subscriber, C->C, Java->Java, C->Java, Java->C and
    /// Rust->Rust runners, each paired with C->C.
    Table2 {
        /// Messages per run.
        #[arg(long, default_value_t = 10000)]
        count: u64,
        /// Untimed messages each runner first sends to itself through a
        /// private tag (the JIT of the Java runners; 0: cold runners).
        #[arg(long, default_value_t = 200000)]
        warmup_msgs: u64,
        /// PUBLISHER:SUBSCRIBER language pairs (cpp, java, rust, python); the
        /// first is the baseline. Default: ORTE's cells and Rust->Rust.
        #[arg(long, default_value = "cpp:cpp,java:java,cpp:java,java:cpp,rust:rust")]
        pairs: String,
        /// Bytes per message: the integer, padded (only the Rust publisher
        /// and the Rust and Python subscribers take more than 4).
        #[arg(long, default_value_t = 4)]
        size: usize,
    },
    /// A reliable stream flat out through a deep bottleneck (`tc tbf`),
    /// paced (NAPA) and unpaced, beside the idle link's one-way latency
    /// (NAPA paper Figures 7 and 8; network namespaces; root).
    Napa {
        /// Bottleneck rates: `100M`, `1G` or bit/s.
        #[arg(long, value_delimiter = ',', default_value = "100M,1G")]
        rates: Vec<String>,
        /// Message sizes, bytes.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "5000,20000,65536,100000,200000"
        )]
        sizes: Vec<usize>,
        /// Flat-out seconds before the measured window (the pacer settles,
        /// the unpaced queue fills).
        #[arg(long, default_value_t = 3.0)]
        settle: f64,
        /// Measured seconds per run.
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// The bottleneck's queue, in ms at its rate.
        #[arg(long, default_value_t = 100)]
        queue_ms: u64,
        /// Random loss on the bottleneck, % of the packets the far host
        /// receives (nftables on its input hook), one pass per value.
        #[arg(long, value_delimiter = ',', default_value = "0")]
        losses: Vec<u8>,
    },
    /// A 256 B request/reply channel beside a load channel through a
    /// shaped link (`htb` with a `pfifo_fast` leaf), its subscriptions
    /// critical and normal (channel-prioritisation paper Figures 5a and
    /// 5b; network namespaces; root).
    Priority {
        /// `5a`: the congestion at the publishing host's egress, both
        /// channels from host 0 to host 1. `5b`: at a router's port toward
        /// host 2, where host 0's measured channel meets host 1's load.
        #[arg(long, default_value = "5a", value_parser = str::parse::<tagwire_perf::priority::Figure>)]
        figure: tagwire_perf::priority::Figure,
        /// Every channel over TCP (`tagwire sub --tcp`); the floor a TCP
        /// connection.
        #[arg(long)]
        tcp: bool,
        /// The shaped rate (the publishing host's egress, or the router's
        /// port): `50M` or bit/s.
        #[arg(long, default_value = "50M")]
        rate: String,
        /// Load levels, percent of the shaped rate (0: idle link).
        #[arg(long, value_delimiter = ',', default_value = "0,20,70,120")]
        loads: Vec<u32>,
        /// Load message size, bytes.
        #[arg(long, default_value_t = 1400)]
        load_size: usize,
        /// Request and reply size, bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
        /// Pause between a reply and the next request, ms.
        #[arg(long, default_value_t = 2.0)]
        gap_ms: f64,
        /// Seconds of load before the measured window.
        #[arg(long, default_value_t = 1.0)]
        settle: f64,
        /// Measured seconds per run.
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// Busy threads at the default policy competing for the CPUs.
        #[arg(long, default_value_t = 0)]
        hogs: usize,
        /// The prioritised channel also runs its threads at this policy
        /// (`fifo:P`, `rr:P`, `other:NICE`): the prober and the echo, and
        /// through its subscriptions the daemons' forwarders and inbound
        /// threads. Default: the class alone.
        #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
        sched: Option<tagwire::Sched>,
        /// The load channel runs its threads at this policy too: its
        /// publishing and receiving threads, and through its publisher and
        /// subscription the daemons' forwarder and inbound threads (Zenoh's
        /// rows run their load in the process `chrt` starts at --sched
        /// anyway). Default: the default policy.
        #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
        load_sched: Option<tagwire::Sched>,
    },
    /// Round trip against the number of receivers spread over three other
    /// hosts, all acknowledging (paper Figure 4-7; network namespaces; root).
    MultiNode {
        /// Receiver counts: a range `1..8` or a list `1,2,4,8`.
        #[arg(long, default_value = "1..8")]
        receivers: String,
        /// Message size, bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
    },
}

/// Arguments of the hidden worker subcommand.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    role: String,
    #[arg(long)]
    ping: String,
    #[arg(long, default_value = "")]
    ack: String,
    #[arg(long)]
    acks: bool,
    #[arg(long, default_value = "block", value_parser = parse_mode)]
    mode: Mode,
    #[arg(long, default_value_t = 64)]
    depth: u32,
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long, default_value_t = 1)]
    every: u32,
    #[arg(long, default_value = "subscriber", value_parser = str::parse::<tagwire::Proxy>)]
    proxy: tagwire::Proxy,
    #[arg(long, default_value_t = 1)]
    ack_every: u32,
    #[arg(long)]
    lossless: bool,
    #[arg(long)]
    through_daemon: bool,
    #[arg(long)]
    tcp: bool,
    #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
    sched: Option<tagwire::Sched>,
}

/// Arguments of the hidden language-runner subcommand (see `tagwire_perf::lang`).
#[derive(Debug, clap::Args)]
pub(crate) struct RunnerArgs {
    /// ping, pong, sub-ints or pub-ints.
    role: String,
    #[arg(long)]
    socket: PathBuf,
    #[arg(long)]
    data: String,
    #[arg(long, default_value = "")]
    ack: String,
    #[arg(long, default_value_t = 256)]
    size: usize,
    #[arg(long, default_value_t = 1000)]
    rounds: usize,
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    #[arg(long, default_value_t = 10000)]
    count: u64,
}

pub(crate) fn lang_runner(a: RunnerArgs) -> anyhow::Result<()> {
    tagwire_perf::lang::runner_main(&tagwire_perf::lang::RunnerArgs {
        role: a.role,
        socket: a.socket,
        data: a.data,
        ack: a.ack,
        size: a.size,
        rounds: a.rounds,
        warmup: a.warmup,
        count: a.count,
    })
}

pub(crate) fn worker(a: WorkerArgs) -> anyhow::Result<()> {
    workload::worker_main(&workload::WorkerArgs {
        role: a.role,
        ping: a.ping,
        ack: a.ack,
        acks: a.acks,
        mode: a.mode,
        depth: a.depth,
        cpu: a.cpu,
        every: a.every,
        proxy: a.proxy,
        ack_every: a.ack_every,
        lossless: a.lossless,
        through_daemon: a.through_daemon,
        tcp: a.tcp,
        sched: a.sched,
    })
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    if let Some(done) = own::run(&a) {
        return done;
    }
    if a.bench.is_remote() {
        return hosts::run(&a);
    }
    let (socket, _daemon) = daemon_for(&a)?;
    let o = suite_opts(&a, socket)?;
    let (name, records) = match &a.bench {
        Bench::Footprint
        | Bench::Record { .. }
        | Bench::Play { .. }
        | Bench::Costs { .. }
        | Bench::Soak { .. }
        | Bench::SoakChild { .. }
        | Bench::Place { .. }
        | Bench::Napa { .. }
        | Bench::Priority { .. }
        | Bench::RemoteRtt { .. }
        | Bench::RemoteFanout { .. }
        | Bench::ProxyRtt { .. }
        | Bench::MultiNode { .. } => unreachable!("handled above"),
        Bench::Rtt {
            sizes,
            modes,
            lang,
            dds,
        } => {
            let modes = modes
                .iter()
                .map(|m| parse_mode(m))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let root = std::env::current_dir()?;
            let mut langs = Vec::new();
            let others: Vec<&str> = lang
                .iter()
                .map(|l| l.trim())
                .filter(|l| *l != "rust")
                .collect();
            if !others.is_empty() {
                // Rust in the runners' two-process shape, to pair them with.
                langs.push(("rust".to_string(), tagwire_perf::lang::find("rust", &root)));
            }
            for l in others {
                anyhow::ensure!(
                    l == "cpp" || l == "python" || l == "java",
                    "--lang takes rust, cpp, python and java, not {l}"
                );
                let runner = tagwire_perf::lang::find(l, &root);
                if let Err(reason) = &runner {
                    eprintln!("perf: {l} skipped: {reason}");
                }
                langs.push((l.to_string(), runner));
            }
            ("rtt", suite::rtt(&o, sizes, &modes, &langs, *dds)?)
        }
        Bench::Fanout {
            receivers,
            acks,
            size,
            mode,
            sender_priority,
        } => {
            let acks = parse_acks(acks)?;
            let receivers = parse_receivers(receivers)?;
            let mut priorities = vec![None];
            for p in sender_priority {
                let p = suite::SenderPriority::parse(p).with_context(|| {
                    format!("--sender-priority takes above, below and same, not {p}")
                })?;
                priorities.push(Some(p));
            }
            let mode = parse_mode(mode)?;
            let records = suite::fanout(&o, &receivers, &acks, *size, mode, &priorities)?;
            ("fanout", records)
        }
        Bench::Throughput {
            size,
            seconds,
            paced,
            dds,
            ..
        } => (
            "throughput",
            suite::throughput(&o, size, *seconds, *paced, *dds)?,
        ),
        Bench::Pull { count, size } => ("pull", suite::pull(&o, *count, *size)?),
        Bench::Table2 {
            count,
            warmup_msgs,
            pairs,
            size,
        } => {
            let spec = tagwire_perf::table2::Spec {
                count: *count,
                warmup: *warmup_msgs,
                size: (*size).max(4),
                pairs: tagwire_perf::table2::parse_pairs(pairs)?,
            };
            let name = if spec.size == 4 {
                "table2"
            } else {
                "table2-sized"
            };
            (
                name,
                tagwire_perf::table2::table2(&o, &spec, &std::env::current_dir()?)?,
            )
        }
    };
    drop(_daemon);
    let _ = std::fs::remove_dir_all(tempfile_path());
    emit(&a, name, &records)
}

impl Bench {
    fn is_remote(&self) -> bool {
        matches!(
            self,
            Bench::RemoteRtt { .. }
                | Bench::RemoteFanout { .. }
                | Bench::MultiNode { .. }
                | Bench::ProxyRtt { .. }
                | Bench::Throughput { remote: true, .. }
        )
    }
}

fn suite_opts(a: &Args, socket: PathBuf) -> anyhow::Result<SuiteOpts> {
    Ok(SuiteOpts {
        env: Env::local(std::env::current_exe()?, socket, parse_pin(&a.pin)?),
        reps: a.reps.max(1),
        iters: a.iters.max(1),
        warmup: a.warmup,
        dds: !a.no_dds,
        dds_seconds: a.dds_seconds.max(1),
        peers: !a.no_peers,
        progress: true,
    })
}

/// `all`, `last`, `both`, or a list of them (`all,last`).
fn parse_acks(s: &str) -> anyhow::Result<Vec<Acks>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let more: &[Acks] = match part {
            "all" => &[Acks::All],
            "last" => &[Acks::Last],
            "both" => &[Acks::All, Acks::Last],
            other => anyhow::bail!("--acks takes all, last, both or a list of them, not {other}"),
        };
        for a in more {
            if !out.contains(a) {
                out.push(*a);
            }
        }
    }
    Ok(out)
}

fn emit(a: &Args, name: &str, records: &[Record]) -> anyhow::Result<()> {
    if a.json {
        report::write_json_lines(records, &mut std::io::stdout().lock())?;
    } else {
        print!("{}", report::all_tables(records));
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    report::save_results(&a.out, name, records)?;
    let png = a.out.join(format!("{name}.png"));
    let plotted = match name {
        "rtt" | "remote-rtt" => tagwire_perf::plot::rtt_plot(&png, records),
        "fanout" | "remote-fanout" | "multi-node" => tagwire_perf::plot::fanout_plot(&png, records),
        _ => Ok(()),
    };
    if let Err(e) = plotted {
        eprintln!("perf: no plot: {e:#}");
    }
    eprintln!("perf: results in {}/{name}.{{json,txt}}", a.out.display());
    Ok(())
}

fn parse_pin(s: &str) -> anyhow::Result<Option<(usize, usize)>> {
    if s == "none" {
        return Ok(None);
    }
    let (a, b) = s
        .split_once(',')
        .context("--pin takes SENDER,RECEIVER or none")?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (a, b): (usize, usize) = (a.trim().parse()?, b.trim().parse()?);
    if a >= cpus || b >= cpus {
        eprintln!("perf: only {cpus} CPU(s); not pinning");
        return Ok(None);
    }
    Ok(Some((a, b)))
}

fn parse_mode(m: &str) -> anyhow::Result<Mode> {
    Mode::parse(m).with_context(|| format!("mode must be block, sleep or spin, not {m}"))
}

fn parse_receivers(s: &str) -> anyhow::Result<Vec<usize>> {
    if let Some((lo, hi)) = s.split_once("..") {
        let (lo, hi): (usize, usize) = (
            lo.trim().parse()?,
            hi.trim().trim_start_matches('=').parse()?,
        );
        anyhow::ensure!(lo >= 1 && hi >= lo, "receiver range must be like 1..8");
        return Ok((lo..=hi).collect());
    }
    s.split(',')
        .map(|x| x.trim().parse::<usize>().map_err(Into::into))
        .collect()
}

/// The daemon a local benchmark talks to: `--socket`'s, else a private
/// one (kept running while the returned handle lives), so runs do not
/// disturb (or get disturbed by) a user's daemon.
fn daemon_for(a: &Args) -> anyhow::Result<(PathBuf, Option<tagwire_daemon::Daemon>)> {
    if let Some(s) = &a.socket {
        return Ok((s.clone(), None));
    }
    let socket = tempfile_dir()?.join("perf.sock");
    let daemon = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
        socket: socket.clone(),
        ..tagwire_daemon::Config::default()
    })?;
    Ok((socket, Some(daemon)))
}

/// This run's scratch directory (made by [`tempfile_dir`]).
fn tempfile_path() -> PathBuf {
    std::env::temp_dir().join(format!("tagwire-perf-{}", std::process::id()))
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let d = tempfile_path();
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_take_a_word_or_a_list() {
        assert_eq!(parse_acks("all").unwrap(), vec![Acks::All]);
        assert_eq!(parse_acks("all,last").unwrap(), vec![Acks::All, Acks::Last]);
        assert_eq!(
            parse_acks("last, all,both").unwrap(),
            vec![Acks::Last, Acks::All]
        );
        assert!(parse_acks("some").is_err());
    }
}
