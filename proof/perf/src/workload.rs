//! tagwire's own workloads for `tagwire perf`, the paper's sender-based method:
//! the sender publishes on a *ping* tag and waits for acknowledgements on an
//! *ack* tag; receivers run in **separate processes** (the `perf-worker` hidden
//! subcommand of the `tagwire` binary), as in the paper's Figures 4-1 and 4-2.
//!
//! * `acks = all`: every receiver acknowledges every ping; the round trip ends at
//!   the last ack (Figure 4-4).
//! * `acks = last`: only the last receiver to subscribe acknowledges (Figure 4-5).
//!
//! Each ack carries the same payload size as the ping, like the raw ping-pong
//! baselines that echo their payload.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tagwire::{
    Client, ClientOptions, Domain, Error, HistoryQuery, KeepHistory, Proxy, RingParams, Sched,
    SubscribeOptions,
};

pub use crate::sender_priority::SenderPriority;

/// Who acknowledges a ping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Every receiver.
    All,
    /// Only the last receiver.
    Last,
}

impl Acks {
    /// "all" or "last".
    pub fn as_str(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::Last => "last",
        }
    }
}

/// Where workers come from and which daemon they use.
#[derive(Debug, Clone)]
pub struct Env {
    /// The `tagwire` binary (has the hidden `perf-worker` subcommand).
    pub exe: PathBuf,
    /// The daemon socket.
    pub socket: PathBuf,
    /// `(sender_cpu, receiver_cpu)`: pin the measuring thread and the worker
    /// processes (the same placement the raw baselines and ddsperf get).
    pub cpus: Option<(usize, usize)>,
    /// Daemon sockets of the nodes the receivers run on, used in turn
    /// (receiver `i` on `receivers_at[i % len]`); empty: the sender's node.
    /// With other nodes the tags are global.
    pub receivers_at: Vec<PathBuf>,
}

impl Env {
    /// Same node, given worker binary and daemon socket.
    pub fn local(exe: PathBuf, socket: PathBuf, cpus: Option<(usize, usize)>) -> Self {
        Env {
            exe,
            socket,
            cpus,
            receivers_at: Vec::new(),
        }
    }

    fn receiver_socket(&self, i: usize) -> &PathBuf {
        if self.receivers_at.is_empty() {
            &self.socket
        } else {
            &self.receivers_at[i % self.receivers_at.len()]
        }
    }

    pub(crate) fn domain(&self) -> Domain {
        if self.receivers_at.is_empty() {
            Domain::Local
        } else {
            Domain::Global
        }
    }
}

/// Arguments of one worker process.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    /// `echo` (receive pings, send acks) or `sink` (count messages).
    pub role: String,
    /// Tag to receive on.
    pub ping: String,
    /// Tag to acknowledge on (echo role).
    pub ack: String,
    /// Whether this worker acknowledges.
    pub acks: bool,
    /// How it waits for a ping.
    pub mode: Mode,
    /// Queue depth.
    pub depth: u32,
    /// Pin the worker to this CPU.
    pub cpu: Option<usize>,
    /// Temporal scaling of the subscription: every n-th ping (1: all).
    pub every: u32,
    /// Where that filter runs.
    pub proxy: Proxy,
    /// Echo role: acknowledge only pings whose sequence number is a
    /// multiple of this (the application filtering, no proxy).
    pub ack_every: u32,
    /// Sink role: a lossless subscription (publishers held back, nothing lost).
    pub lossless: bool,
    /// Messages from other nodes through the daemon, never by direct
    /// delivery (`SubscribeOptions::through_daemon`).
    pub through_daemon: bool,
    /// Its node's copy comes over the TCP carrier (`SubscribeOptions::tcp`).
    pub tcp: bool,
    /// The policy the worker runs at (`None`: the default).
    pub sched: Option<Sched>,
}

const STOP: &[u8] = b"\xffSTOP";
/// Sink workers print this prefix, then `received lost seconds`.
const SINK_REPORT: &str = "SINK";

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn client(env: &Env) -> anyhow::Result<Client> {
    Ok(Client::with_options(ClientOptions {
        socket: env.socket.clone(),
        timeout: Duration::from_secs(5),
        autostart: false,
        name: "tagwire-perf".into(),
    })?)
}

fn spawn_worker(env: &Env, i: usize, a: &WorkerArgs, stdout: Stdio) -> anyhow::Result<Child> {
    let mut cmd = Command::new(&env.exe);
    cmd.arg("perf-worker")
        .args([
            "--role",
            &a.role,
            "--ping",
            &a.ping,
            "--ack",
            &a.ack,
            "--depth",
            &a.depth.to_string(),
        ])
        .env("TAGWIRE_SOCKET", env.receiver_socket(i))
        .stdout(stdout);
    if a.acks {
        cmd.arg("--acks");
    }
    cmd.args(["--mode", a.mode.as_str()]);
    if let Some(c) = a.cpu {
        cmd.args(["--cpu", &c.to_string()]);
    }
    cmd.args([
        "--every",
        &a.every.to_string(),
        "--proxy",
        &a.proxy.to_string(),
        "--ack-every",
        &a.ack_every.to_string(),
    ]);
    if a.lossless {
        cmd.arg("--lossless");
    }
    if a.through_daemon {
        cmd.arg("--through-daemon");
    }
    if a.tcp {
        cmd.arg("--tcp");
    }
    if let Some(sched) = a.sched {
        cmd.args(["--sched", &sched.to_string()]);
    }
    cmd.spawn()
        .with_context(|| format!("starting worker {}", env.exe.display()))
}

fn wait_for(mut f: impl FnMut() -> anyhow::Result<bool>, what: &str) -> anyhow::Result<()> {
    let start = Instant::now();
    while !f()? {
        if start.elapsed() > Duration::from_secs(20) {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn unique(kind: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("/perf/{}/{kind}{n}", std::process::id())
}

/// How a receiver waits: what a round trip or a fan-out measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A blocking receive as it comes (a stream that flows is polled
    /// `tagwire::FLOW_POLL` before sleeping: a ping-pong faster than that
    /// keeps both ends awake).
    Block,
    /// A blocking receive that sleeps at once (`flow_poll` zero): the
    /// futex wake-up on every message.
    Sleep,
    /// Busy-poll (50 ms) before sleeping.
    Spin,
}

impl Mode {
    /// "block", "sleep" or "spin".
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Block => "block",
            Mode::Sleep => "sleep",
            Mode::Spin => "spin",
        }
    }

    /// The mode `as_str` names.
    pub fn parse(s: &str) -> Option<Self> {
        [Mode::Block, Mode::Sleep, Mode::Spin]
            .into_iter()
            .find(|m| m.as_str() == s)
    }

    /// Subscription options waiting this way, `depth` deep.
    fn options(self, depth: u32) -> SubscribeOptions {
        let o = SubscribeOptions::default().depth(depth);
        match self {
            Mode::Block => o,
            Mode::Sleep => o.flow_poll(Duration::ZERO),
            Mode::Spin => o.busy_poll(Duration::from_millis(50)),
        }
    }
}

/// One round-trip measurement: the ping, how many rounds, who answers.
#[derive(Debug, Clone, Copy)]
pub struct Rounds {
    /// Ping (and ack) size in bytes.
    pub size: usize,
    /// Measured round trips.
    pub iters: usize,
    /// Unmeasured round trips first.
    pub warmup: usize,
    /// Receiver processes (at least 1).
    pub receivers: usize,
    /// Who acknowledges.
    pub acks: Acks,
    /// How both sides wait.
    pub mode: Mode,
    /// The receivers want every n-th ping (1: all): each round publishes n
    /// pings back to back and times the n-th from its send to its acks.
    pub every: u32,
    /// Where the every-n-th filter runs; `None`: no proxy, the receivers
    /// take every ping and acknowledge only the n-th (the application
    /// filters).
    pub proxy: Option<Proxy>,
    /// Pings and acks from other nodes through the daemons, never by
    /// direct delivery (the path before it, for comparison).
    pub through_daemon: bool,
    /// The sender (the calling thread) and the receivers at `SCHED_FIFO`,
    /// so related (`None`: every one at the default policy).
    pub priority: Option<SenderPriority>,
}

impl Rounds {
    /// `iters` round trips after `warmup` of `size`-byte pings to one
    /// blocking receiver that takes every ping.
    pub fn new(size: usize, iters: usize, warmup: usize) -> Self {
        Self {
            size,
            iters,
            warmup,
            receivers: 1,
            acks: Acks::All,
            mode: Mode::Block,
            every: 1,
            proxy: Some(Proxy::Subscriber),
            through_daemon: false,
            priority: None,
        }
    }

    /// The sender and its receivers at `SCHED_FIFO`, related as `p` says.
    pub fn priority(self, p: Option<SenderPriority>) -> Self {
        Self {
            priority: p,
            ..self
        }
    }

    /// Through the daemons (no direct delivery).
    pub fn through_daemon(self) -> Self {
        Self {
            through_daemon: true,
            ..self
        }
    }

    /// `receivers` receivers, of which `acks` answer.
    pub fn fan(self, receivers: usize, acks: Acks) -> Self {
        Self {
            receivers,
            acks,
            ..self
        }
    }

    /// Both sides wait as `mode` says.
    pub fn mode(self, mode: Mode) -> Self {
        Self { mode, ..self }
    }

    /// Receivers that want every `n`-th ping, filtered at `proxy`.
    pub fn every(self, n: u32, proxy: Option<Proxy>) -> Self {
        Self {
            every: n,
            proxy,
            ..self
        }
    }
}

/// Sender-based round trips as `r` says, with worker processes as the
/// receivers. Returns one duration per measured round trip. With a
/// [`Rounds::priority`] the sender runs on a thread of its own at its
/// policy (the caller's is left as it was); refused: an error saying what
/// would grant it.
pub fn rtt(env: &Env, r: Rounds) -> anyhow::Result<Vec<Duration>> {
    let Some(p) = r.priority else {
        return rtt_here(env, r);
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            tagwire::set_thread_sched(p.sender())
                .context("--sender-priority runs the sender at SCHED_FIFO")?;
            rtt_here(env, r)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the sending thread panicked"))?
    })
}

fn rtt_here(env: &Env, r: Rounds) -> anyhow::Result<Vec<Duration>> {
    let Rounds {
        size,
        iters,
        warmup,
        receivers,
        acks,
        mode,
        every,
        proxy,
        through_daemon,
        priority,
    } = r;
    anyhow::ensure!(receivers >= 1, "at least one receiver");
    anyhow::ensure!(every >= 1, "a scale of at least 1");
    let _pinned = pin(env)?;
    let c = client(env)?;
    let ping = unique("ping");
    let ack = unique("ack");
    c.create_tag(&ping, env.domain())?;
    c.create_tag(&ack, env.domain())?;
    let mut ack_opts = mode.options(256);
    if through_daemon {
        ack_opts = ack_opts.through_daemon();
    }
    let mut acks_sub = c.subscribe(&ack, ack_opts)?;
    let mut publ = c.publisher(&ping)?;
    let mut workers = Workers(Vec::new());
    for i in 0..receivers {
        let acking = acks == Acks::All || i + 1 == receivers;
        let a = WorkerArgs {
            role: "echo".into(),
            ping: ping.clone(),
            ack: ack.clone(),
            acks: acking,
            mode,
            depth: 64,
            cpu: env.cpus.map(|c| c.1),
            every: if proxy.is_some() { every } else { 1 },
            proxy: proxy.unwrap_or_default(),
            ack_every: if proxy.is_some() { 1 } else { every },
            lossless: false,
            through_daemon,
            tcp: false,
            sched: priority.map(|_| SenderPriority::receivers()),
        };
        workers.0.push(spawn_worker(env, i, &a, Stdio::null())?);
        // Start them one by one so the last one really is the last to subscribe.
        wait_for(
            || Ok(c.receivers(&ping)?.len() > i),
            "a worker to subscribe",
        )?;
        // Subscribed, so past setting its policy: it runs at it.
        if let Some(want) = a.sched {
            check_policy(workers.0[i].id(), want)?;
        }
    }
    let expected = if acks == Acks::All { receivers } else { 1 };
    wait_for(
        || Ok(c.senders(&ack)?.len() >= expected),
        "workers' ack access",
    )?;
    let payload = vec![0x5au8; size];
    let mut ack_buf = Vec::with_capacity(size + 64);
    let mut out = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        // Samples the receivers did not ask for (the proxy drops them).
        for _ in 1..every {
            publ.send(&payload)?;
        }
        let t0 = Instant::now();
        publ.send(&payload)?;
        let mut got = 0;
        while got < expected {
            match acks_sub.receive_into(Some(Duration::from_secs(10)), &mut ack_buf) {
                Ok(_) => got += 1,
                Err(Error::Timeout) => bail!("no ack within 10 s (round trip {i})"),
                Err(e) => return Err(e.into()),
            }
        }
        if i >= warmup {
            out.push(t0.elapsed());
        }
    }
    // One of these is a sample the receivers asked for.
    for _ in 0..every {
        publ.send(STOP)?;
    }
    drop(workers);
    let _ = c.destroy_tag(&ping);
    let _ = c.destroy_tag(&ack);
    Ok(out)
}

/// Result of a throughput run, measured at the subscriber.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Messages the publisher sent.
    pub sent: u64,
    /// Messages the subscriber received.
    pub received: u64,
    /// Messages the subscriber reported lost.
    pub lost: u64,
    /// Received messages per second (first to last receive).
    pub msgs_per_s: f64,
}

/// The publisher sends `size`-byte messages for `duration`, as fast as it can
/// (`rate = None`) or paced to `rate` messages per second; one subscriber process
/// counts them, a lossless one (holding the publisher back) when `lossless`.
pub fn throughput(
    env: &Env,
    size: usize,
    duration: Duration,
    rate: Option<f64>,
    lossless: bool,
    through_daemon: bool,
    tcp: bool,
) -> anyhow::Result<Throughput> {
    // The publisher on the sender's CPU, as the sink on the receiver's and
    // the peers' publishing and subscribing processes on theirs (`--pin`).
    let _pinned = pin(env)?;
    let c = client(env)?;
    let tag = unique("tput");
    // A deep ring so that scheduling hiccups of the subscriber do not drop
    // data: at least 4096 slots, and for small messages up to 32 MiB of
    // them (16384 at 256 B). At a million small messages a second 4096
    // slots are 4 ms of data, less than a time slice the subscriber may
    // lose on 2 cores to the daemons' threads; on one node at 2M msg/s
    // (the paced run) they were 2 ms, and 3 of 3 paced repetitions lost
    // messages to such stalls, against 1 of 3 with 16384.
    //
    // Across nodes the reliable window holds the publisher back and the
    // subscriber's queue is its own: the ring is only the publisher's
    // outbox, and 4 MiB of it stays in the caches where 32 MiB does not
    // (8 KiB flat out: 92k msg/s with 4096 slots, 128k with 512, same run).
    let slot_payload = u32::try_from(size.max(64)).unwrap_or(u32::MAX);
    let remote = env.receivers_at.iter().any(|r| *r != env.socket);
    let (bytes, least) = if remote {
        (4usize << 20, 256)
    } else {
        (32usize << 20, 4096)
    };
    let slots = u32::try_from(bytes / size.max(1))
        .unwrap_or(u32::MAX)
        .clamp(least, 16384)
        .next_power_of_two();
    c.create_tag_with(
        &tag,
        env.domain(),
        RingParams {
            slots,
            slot_payload,
        },
    )?;
    let mut publ = c.publisher(&tag)?;
    // Across nodes the publisher is held back by the reliable window; a
    // stall this long is a failure worth reporting, not a pause.
    publ.set_send_timeout(Duration::from_secs(10));
    let a = WorkerArgs {
        role: "sink".into(),
        ping: tag.clone(),
        ack: String::new(),
        acks: false,
        mode: Mode::Block,
        depth: slots,
        cpu: env.cpus.map(|c| c.1),
        every: 1,
        proxy: Proxy::Subscriber,
        ack_every: 1,
        lossless,
        through_daemon,
        tcp,
        sched: None,
    };
    let mut workers = Workers(vec![spawn_worker(env, 0, &a, Stdio::piped())?]);
    wait_for(
        || Ok(!c.receivers(&tag)?.is_empty()),
        "the sink to subscribe",
    )?;
    let payload = vec![0xa5u8; size];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < duration {
        for _ in 0..64 {
            publ.send(&payload)?;
        }
        sent += 64;
        if let Some(r) = rate {
            // Pace in batches of 64; yield (not sleep: too coarse) until due.
            let due = start + Duration::from_secs_f64(sent as f64 / r);
            while Instant::now() < due {
                std::thread::yield_now();
            }
        }
    }
    publ.send(STOP)?;
    let child = workers.0.pop().context("sink worker")?;
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with(SINK_REPORT))
        .with_context(|| format!("sink printed no report: {text:?}"))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    let received: u64 = f.get(1).context("report")?.parse()?;
    let lost: u64 = f.get(2).context("report")?.parse()?;
    let secs: f64 = f.get(3).context("report")?.parse()?;
    let _ = c.destroy_tag(&tag);
    Ok(Throughput {
        sent,
        received,
        lost,
        msgs_per_s: if secs > 0.0 {
            received as f64 / secs
        } else {
            0.0
        },
    })
}

/// Times of pulling the last `count` messages of a tag's history from the
/// daemon, and of receiving the same number of messages already queued
/// for a subscription (the push path of the same data), `iters` of each.
pub fn pull(
    env: &Env,
    count: u32,
    size: usize,
    iters: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let _pinned = pin(env)?;
    let c = client(env)?;
    let tag = unique("pull");
    let ring = RingParams {
        slots: count.next_power_of_two().max(64),
        slot_payload: u32::try_from(size.max(64)).unwrap_or(u32::MAX),
    };
    let keep = KeepHistory {
        depth: count,
        max_bytes: 0,
    };
    c.create_tag_keeping(&tag, Domain::Local, ring, keep)?;
    let mut publ = c.publisher(&tag)?;
    let mut sub = c.subscribe(&tag, SubscribeOptions::default().depth(ring.slots))?;
    let payload = vec![0x3cu8; size];
    let mut buf = Vec::with_capacity(size);
    let (mut pulls, mut drains) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
    for _ in 0..iters {
        for _ in 0..count {
            publ.send(&payload)?;
        }
        let t0 = Instant::now();
        for _ in 0..count {
            sub.receive_into(Some(Duration::from_secs(5)), &mut buf)?;
        }
        drains.push(t0.elapsed());
        let t0 = Instant::now();
        let got = c.pull(&tag, HistoryQuery::Last(count))?;
        pulls.push(t0.elapsed());
        if got.len() != count as usize || got.iter().any(|m| m.payload.len() != size) {
            bail!(
                "a pull returned {} messages, not {count} of {size} B",
                got.len()
            );
        }
    }
    let _ = c.destroy_tag(&tag);
    Ok((pulls, drains))
}

/// Pins the calling thread to the sender's CPU until the guard drops,
/// which gives the thread back the CPUs it had: threads the caller starts
/// afterwards (a raw baseline's unpinned dispatcher, say) must not inherit
/// the sender's CPU by accident.
fn pin(env: &Env) -> anyhow::Result<Pinned> {
    let Some((cpu, _)) = env.cpus else {
        return Ok(Pinned(None));
    };
    let before = rustix::thread::sched_getaffinity(None).context("reading CPU affinity")?;
    crate::raw::pin_current_thread(cpu)?;
    Ok(Pinned(Some(before)))
}

/// See [`pin`].
struct Pinned(Option<rustix::thread::CpuSet>);

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(set) = &self.0 {
            let _ = rustix::thread::sched_setaffinity(None, set);
        }
    }
}

/// Fails unless process `pid`'s main thread runs at `want`, a real-time
/// policy (`/proc/PID/stat`: `rt_priority` and `policy`, fields 40 and
/// 41).
fn check_policy(pid: u32, want: Sched) -> anyhow::Result<()> {
    let (policy, prio) = match want {
        Sched::Fifo(p) => (1, p),
        Sched::RoundRobin(p) => (2, p),
        Sched::Other { .. } => return Ok(()),
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading worker {pid}'s policy"))?;
    // Fields after the command's closing parenthesis start at field 3.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u32>().ok());
    let got = (field(41), field(40));
    anyhow::ensure!(
        got == (Some(policy), Some(u32::from(prio))),
        "worker {pid} runs at policy {:?} priority {:?}, not {want}",
        got.0,
        got.1
    );
    Ok(())
}

/// Body of a worker process.
pub fn worker_main(a: &WorkerArgs) -> anyhow::Result<()> {
    if let Some(c) = a.cpu {
        crate::raw::pin_current_thread(c)?;
    }
    if let Some(sched) = a.sched {
        // Before the client's threads start: they inherit it.
        tagwire::set_thread_sched(sched)?;
    }
    let c = Client::connect()?;
    let mut opts = a.mode.options(a.depth).every(a.every).proxy(a.proxy);
    if a.lossless {
        opts = opts.lossless();
    }
    if a.through_daemon {
        opts = opts.through_daemon();
    }
    if a.tcp {
        opts = opts.tcp();
    }
    let mut sub = c.subscribe(&a.ping, opts)?;
    match a.role.as_str() {
        "echo" => {
            let mut publ = if a.acks {
                Some(c.publisher(&a.ack)?)
            } else {
                None
            };
            let mut buf = Vec::with_capacity(64 * 1024);
            let ack_every = u64::from(a.ack_every.max(1));
            loop {
                let seq = match sub.receive_into(Some(Duration::from_secs(60)), &mut buf) {
                    Ok(m) => m.seq.0,
                    Err(Error::Overflowed { .. }) => continue,
                    Err(e) => return Err(e.into()),
                };
                if buf == STOP {
                    return Ok(());
                }
                if seq % ack_every != 0 {
                    continue;
                }
                if let Some(p) = publ.as_mut() {
                    p.send(&buf)?;
                }
            }
        }
        "sink" => {
            // The clock is read at the first message and at the stop marker
            // (which the publisher sends right after its last message, in
            // the same ordered stream), not at every message: the Zenoh and
            // iceoryx2 sinks count without reading it either.
            let mut received = 0u64;
            let mut first = None;
            let mut buf = Vec::with_capacity(64 * 1024);
            let last = loop {
                match sub.receive_into(Some(Duration::from_secs(60)), &mut buf) {
                    Ok(_) => {
                        if buf == STOP {
                            break Instant::now();
                        }
                        if first.is_none() {
                            first = Some(Instant::now());
                        }
                        received += 1;
                    }
                    Err(Error::Overflowed { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            };
            let secs = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
            println!("{SINK_REPORT} {received} {} {secs}", sub.lost());
            Ok(())
        }
        r => bail!("unknown worker role {r}"),
    }
}
