//! `tagwire perf soak`: many tags on several nodes for a long time, while
//! faults come at random, checking that nothing is lost in silence.
//!
//! Hosts in network namespaces, a daemon each ([`Site`], with a domain
//! key, each node following its own copy of the key file). Each tag has one
//! publisher and two subscribers, each a process of its own
//! ([`child`], started in its host's namespace), so that the soak can
//! kill it; a tag's subscribers are reliable, lossless, best-effort or
//! TCP by turns, its messages small (24-512 B, 200 a second), medium
//! (512 B-64 KiB, 50) or large (64 KiB-1 MiB, 5). Every `fault_every`
//! one fault, drawn with the printed seed: a publisher or a subscriber
//! killed (SIGKILL) and started again, a daemon stopped and started
//! again, a host's link cut for a second, a host's input dropping 1-5 %
//! at random, its egress through a `tbf` of 20-200 Mbit/s, or two hosts
//! unable to hear each other (a partition), each for a few seconds, then
//! healed; or the domain key rolled (a new key in every node's file, the
//! switch two seconds later, the roll ended a second after it). At the end, after a quiet spell, every subscriber's [`Tally`]:
//! no message corrupt, repeated or out of order, and none missing that
//! the subscription did not report lost (`silent`). The soak process's
//! memory and descriptors (the daemons run in it) are sampled each
//! second.

pub mod check;
pub mod child;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::remote::Site;
use check::Tally;
use child::{ChildSpec, Kind, PubReport, Rng, SubReport};

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Hosts (at least 2).
    pub nodes: usize,
    /// Tags.
    pub tags: usize,
    /// How long faults come.
    pub duration: Duration,
    /// Time between two faults' starts.
    pub fault_every: Duration,
    /// The draw's seed.
    pub seed: u64,
    /// The faults drawn from (every kind by default).
    pub faults: Vec<Fault>,
    /// The subscriber kinds given to the tags by turns (every kind by
    /// default).
    pub kinds: Vec<Kind>,
    /// The program that plays the children (`tagwire`, which has `perf
    /// soak-child`).
    pub exe: PathBuf,
}

/// The faults a soak injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// A publisher killed and started again.
    KillPublisher,
    /// A subscriber killed and started again.
    KillSubscriber,
    /// A daemon stopped and started again.
    RestartDaemon,
    /// A host's link down for a second.
    LinkDown,
    /// A host dropping 1-5 % of what another sends it, at random.
    Drops,
    /// A host's egress through a token bucket of 20-200 Mbit/s.
    Rate,
    /// Two hosts that cannot hear each other.
    Partition,
    /// The domain key rolled: a new key in every node's key file, the
    /// switch 2 s later, the roll ended 1 s after it.
    KeyRoll,
}

/// The variant of `T` (a kebab-case serde enum) named `s`.
pub(crate) fn named<T: serde::de::DeserializeOwned>(s: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(s.into())).ok()
}

impl std::str::FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        named(s).ok_or_else(|| {
            format!("no fault `{s}` (kill-publisher, kill-subscriber, restart-daemon, link-down, drops, rate, partition, key-roll)")
        })
    }
}

impl Fault {
    /// Every kind.
    pub const ALL: [Fault; 8] = [
        Fault::KillPublisher,
        Fault::KillSubscriber,
        Fault::RestartDaemon,
        Fault::LinkDown,
        Fault::Drops,
        Fault::Rate,
        Fault::Partition,
        Fault::KeyRoll,
    ];
}

/// One subscriber kind's counts, over every subscriber of that kind and
/// every life of each.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindTally {
    /// The kind.
    pub kind: Kind,
    /// The counts.
    pub tally: Tally,
}

/// What a soak saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// Always `soak`.
    pub bench: String,
    /// The seed.
    pub seed: u64,
    /// Hosts and tags.
    pub nodes: usize,
    /// Tags.
    pub tags: usize,
    /// Seconds of faults.
    pub seconds: f64,
    /// Faults injected, by kind.
    pub faults: Vec<(Fault, u64)>,
    /// Messages the publishers sent (their sends succeeded).
    pub sent: u64,
    /// Sends that failed and were made again.
    pub send_errors: u64,
    /// Per subscriber kind.
    pub kinds: Vec<KindTally>,
    /// The soak process's resident memory (kB) and open descriptors, one
    /// sample a second.
    pub rss_kb: Vec<u64>,
    /// Open descriptors, one sample a second.
    pub fds: Vec<u64>,
    /// The bytes its allocator has handed out and not had back (kB), one
    /// sample a second: RSS growing while this stays flat is the
    /// allocator's keeping freed memory, not something kept.
    #[serde(default)]
    pub heap_kb: Vec<u64>,
    /// The RSS's anonymous part (heap, stacks) and its shared-memory part
    /// (the pages of the rings and large messages touched so far; bounded
    /// by their sizes), kB, one sample a second.
    #[serde(default)]
    pub anon_kb: Vec<u64>,
    /// See `anon_kb`.
    #[serde(default)]
    pub shmem_kb: Vec<u64>,
    /// What broke an invariant (empty: none).
    pub violations: Vec<String>,
    /// The first messages that did, in words (a few per subscriber).
    pub anomalies: Vec<String>,
    /// The first jumps larger than the losses reported just before them,
    /// in words (a few per subscriber): where to look for a loss in
    /// silence.
    #[serde(default)]
    pub clues: Vec<String>,
    /// The first sends that failed, in words (a few per publisher).
    pub failures: Vec<String>,
}

/// A child process and the last report it printed.
struct Running {
    spec: ChildSpec,
    host: usize,
    child: Child,
    last: Arc<Mutex<Option<String>>>,
}

impl Running {
    fn start(site: &Site, host: usize, spec: ChildSpec, exe: &PathBuf) -> anyhow::Result<Running> {
        let json = serde_json::to_string(&spec)?;
        let mut child = site
            .host(host)
            .command(exe)
            .args(["perf", "soak-child", &json])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting a soak child")?;
        let last = Arc::new(Mutex::new(None));
        let out = child.stdout.take().context("the child's output")?;
        let keep = last.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                *keep
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(line);
            }
        });
        Ok(Running {
            spec,
            host,
            child,
            last,
        })
    }

    fn last(&self) -> Option<String> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Kills it (SIGKILL): its last report stands for its life.
    fn kill(&mut self) -> Option<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.last()
    }
}

/// The counts of the lives that ended, and of those running.
#[derive(Default)]
struct Totals {
    pubs: PubReport,
    subs: Vec<(Kind, Tally, u64)>,
    anomalies: Vec<String>,
    clues: Vec<String>,
    failures: Vec<String>,
}

impl Totals {
    fn take(&mut self, r: &Running, line: Option<String>) {
        let Some(line) = line else { return };
        if r.spec.publish {
            if let Ok(p) = serde_json::from_str::<PubReport>(&line) {
                self.pubs.sent += p.sent;
                self.pubs.errors += p.errors;
                for f in p.failures {
                    self.failures
                        .push(format!("publisher of {} on h{}: {f}", r.spec.tag, r.host));
                }
            }
        } else if let Ok(s) = serde_json::from_str::<SubReport>(&line) {
            self.subs.push((r.spec.kind, s.tally, s.errors));
            let who = format!(
                "{:?} subscriber of {} on h{}",
                r.spec.kind, r.spec.tag, r.host
            );
            for a in s.anomalies {
                self.anomalies.push(format!("{who}: {a}"));
            }
            for c in s.clues {
                self.clues.push(format!("{who}: {c}"));
            }
        }
    }
}

/// Runs the soak. `say` hears what happens as it happens.
pub fn run(spec: &Spec, mut say: impl FnMut(&str)) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        spec.nodes >= 2 && spec.tags >= 1,
        "a soak needs at least 2 nodes and a tag"
    );
    anyhow::ensure!(
        !spec.faults.is_empty() && !spec.kinds.is_empty(),
        "a soak needs a fault kind and a subscriber kind"
    );
    // Keyed when the key is to roll (each node following its own copy of
    // the key file).
    let key = if spec.faults.contains(&Fault::KeyRoll) {
        let mut key = [0u8; tagwire_daemon::DOMAIN_KEY_LEN];
        getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        Some(tagwire_daemon::DomainKey::from_bytes(key))
    } else {
        None
    };
    let mut site = Site::with_key(spec.nodes, key, None)?;
    let mut rng = Rng(spec.seed.max(1));
    say(&format!(
        "soak: seed {}, {} nodes, {} tags, {:?} of faults",
        spec.seed, spec.nodes, spec.tags, spec.duration
    ));
    let classes = [
        ((24, 512), 200.0),
        ((512, 65_536), 50.0),
        ((65_536, 1 << 20), 5.0),
    ];
    let mut children = Vec::new();
    for t in 0..spec.tags {
        let tag = format!("/soak/{}/t{t}", std::process::id());
        // Kinds by turns, sizes shifted every round of kinds: twelve tags
        // make every pair.
        let kind = spec.kinds[t % spec.kinds.len()];
        let (sizes, rate_hz) = classes[(t + t / spec.kinds.len()) % classes.len()];
        let at = rng.below(spec.nodes as u64) as usize;
        let other = (at + 1 + rng.below(spec.nodes as u64 - 1) as usize) % spec.nodes;
        let anywhere = rng.below(spec.nodes as u64) as usize;
        let one = |publish: bool, host: usize| ChildSpec {
            publish,
            socket: site.socket(host),
            tag: tag.clone(),
            kind,
            sizes,
            rate_hz,
            seed: rng_seed(spec.seed, t, host, publish),
            report_ms: 200,
        };
        // Subscribers first: the publisher's first messages have readers.
        for (publish, host) in [(false, other), (false, anywhere), (true, at)] {
            let s = one(publish, host);
            children.push(Running::start(&site, host, s, &spec.exe)?);
        }
    }
    // Everyone connected and a stream under way before the faults.
    std::thread::sleep(Duration::from_secs(2));

    let mut totals = Totals::default();
    // (The kinds drawn from, each once, in the order of `Fault::ALL`.)
    let mut faults: Vec<(Fault, u64)> = Fault::ALL
        .iter()
        .filter(|f| spec.faults.contains(f))
        .map(|f| (*f, 0))
        .collect();
    let (mut rss_kb, mut fds, mut heap_kb) = (Vec::new(), Vec::new(), Vec::new());
    let (mut anon_kb, mut shmem_kb) = (Vec::new(), Vec::new());
    let mut sample = |rss_kb: &mut Vec<u64>, fds: &mut Vec<u64>| {
        rss_kb.push(own_rss_kb());
        fds.push(own_fds());
        heap_kb.push(heap_in_use_kb());
        anon_kb.push(own_status_kb("RssAnon:"));
        shmem_kb.push(own_status_kb("RssShmem:"));
    };
    let start = Instant::now();
    let mut next_sample = start;
    while start.elapsed() < spec.duration {
        let fault = spec.faults[rng.below(spec.faults.len() as u64) as usize];
        let began = Instant::now();
        let what = inject(&mut site, &mut children, &mut totals, &mut rng, fault, spec)?;
        if let Some(n) = faults.iter_mut().find(|(f, _)| *f == fault) {
            n.1 += 1;
        }
        say(&format!(
            "soak: {:>6.1} s {what} (RSS {} kB, {} descriptors)",
            start.elapsed().as_secs_f64(),
            own_rss_kb(),
            own_fds()
        ));
        while began.elapsed() < spec.fault_every && start.elapsed() < spec.duration {
            if Instant::now() >= next_sample {
                sample(&mut rss_kb, &mut fds);
                next_sample += Duration::from_secs(1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Quiet: every stream catches up, then the last reports.
    say("soak: faults over; quiet for 5 s");
    std::thread::sleep(Duration::from_secs(5));
    sample(&mut rss_kb, &mut fds);
    for r in &mut children {
        let line = r.kill();
        totals.take(r, line);
    }
    let kinds: Vec<KindTally> = spec
        .kinds
        .iter()
        .map(|k| {
            let mut tally = Tally::default();
            for (kind, t, _) in &totals.subs {
                if kind == k {
                    tally.add(t);
                }
            }
            KindTally { kind: *k, tally }
        })
        .collect();
    let mut violations = Vec::new();
    for k in &kinds {
        let t = &k.tally;
        for (what, n) in [
            ("corrupt", t.corrupt),
            ("repeated", t.duplicate),
            ("out of order", t.reordered),
            ("lost in silence", t.silent()),
        ] {
            if n > 0 {
                violations.push(format!("{:?} subscribers: {n} messages {what}", k.kind));
            }
        }
        if t.got == 0 {
            violations.push(format!("{:?} subscribers got nothing", k.kind));
        }
    }
    Ok(Outcome {
        bench: "soak".into(),
        seed: spec.seed,
        nodes: spec.nodes,
        tags: spec.tags,
        seconds: spec.duration.as_secs_f64(),
        faults,
        sent: totals.pubs.sent,
        send_errors: totals.pubs.errors,
        kinds,
        rss_kb,
        fds,
        heap_kb,
        anon_kb,
        shmem_kb,
        violations,
        anomalies: totals.anomalies,
        clues: totals.clues,
        failures: totals.failures,
    })
}

fn rng_seed(seed: u64, tag: usize, host: usize, publish: bool) -> u64 {
    seed ^ (tag as u64).rotate_left(20) ^ (host as u64).rotate_left(40) ^ u64::from(publish)
}

/// Injects one `fault` and heals it; says what it did.
fn inject(
    site: &mut Site,
    children: &mut [Running],
    totals: &mut Totals,
    rng: &mut Rng,
    fault: Fault,
    spec: &Spec,
) -> anyhow::Result<String> {
    let host = rng.below(spec.nodes as u64) as usize;
    let hold = |ms: u64| std::thread::sleep(Duration::from_millis(ms));
    Ok(match fault {
        Fault::KillPublisher | Fault::KillSubscriber => {
            let publish = fault == Fault::KillPublisher;
            let which: Vec<usize> = (0..children.len())
                .filter(|i| children[*i].spec.publish == publish)
                .collect();
            let i = which[rng.below(which.len() as u64) as usize];
            let line = children[i].kill();
            totals.take(&children[i], line);
            hold(200);
            let (h, s) = (children[i].host, children[i].spec.clone());
            children[i] = Running::start(site, h, s, &spec.exe)?;
            format!(
                "killed and restarted a {} of {} on h{h}",
                if publish { "publisher" } else { "subscriber" },
                children[i].spec.tag
            )
        }
        Fault::RestartDaemon => {
            let waited = site.restart(host)?;
            format!(
                "restarted h{host}'s daemon (up again after {} ms)",
                waited.as_millis()
            )
        }
        Fault::LinkDown => {
            site.host(host).link_down()?;
            hold(1_000);
            site.host(host).link_up()?;
            format!("cut h{host}'s link for 1 s")
        }
        Fault::Drops => {
            let pct = 1 + rng.below(5) as u8;
            let from = (host + 1 + rng.below(spec.nodes as u64 - 1) as usize) % spec.nodes;
            site.host(host).drop_input(site.host(from).addr(), pct)?;
            hold(3_000);
            site.host(host).stop_dropping()?;
            format!("h{host} dropped {pct} % of what h{from} sent it for 3 s")
        }
        Fault::Rate => {
            let mbit = 20 + rng.below(181);
            let bytes = mbit * 1_000_000 / 8;
            site.host(host)
                .shape(mbit * 1_000_000, (bytes / 1000).max(16_000), bytes / 20)?;
            hold(3_000);
            site.host(host).unshape()?;
            format!("h{host}'s egress at {mbit} Mbit/s for 3 s")
        }
        Fault::Partition => {
            let other = (host + 1 + rng.below(spec.nodes as u64 - 1) as usize) % spec.nodes;
            let (a, b) = (site.host(host), site.host(other));
            a.drop_input(b.addr(), 100)?;
            b.drop_input(a.addr(), 100)?;
            hold(2_000);
            a.stop_dropping()?;
            b.stop_dropping()?;
            format!("h{host} and h{other} partitioned for 2 s")
        }
        Fault::KeyRoll => {
            let generation = site.roll_key(Duration::from_secs(2))?;
            hold(3_000);
            site.finish_roll()?;
            hold(1_000);
            format!("rolled the domain key to generation {generation}")
        }
    })
}

/// This process's resident memory, kB.
fn own_rss_kb() -> u64 {
    own_status_kb("VmRSS:")
}

/// A line of this process's `/proc/self/status` in kB (`key` with its
/// colon), 0 if it has none.
fn own_status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// What this process's allocator has handed out and not had back, kB
/// (glibc's `mallinfo2`: in use in its arenas and in its own mappings).
fn heap_in_use_kb() -> u64 {
    // SAFETY: no arguments; glibc walks its arenas under their locks.
    let m = unsafe { libc::mallinfo2() };
    ((m.uordblks + m.hblkhd) / 1024) as u64
}

/// This process's open descriptors.
fn own_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// The outcome as a table.
pub fn table(o: &Outcome) -> String {
    let mut out = format!(
        "soak: seed {}, {} nodes, {} tags, {:.0} s of faults; {} messages sent ({} sends failed and were made again)\n",
        o.seed, o.nodes, o.tags, o.seconds, o.sent, o.send_errors
    );
    out += "faults:";
    for (f, n) in &o.faults {
        out += &format!(" {f:?} {n},");
    }
    out.pop();
    out += "\nsubscribers     got   lives   missing  reported  silent  corrupt  repeated  out-of-order\n";
    for k in &o.kinds {
        let t = &k.tally;
        out += &format!(
            "{:<12} {:>7} {:>7} {:>9} {:>9} {:>7} {:>8} {:>9} {:>13}\n",
            format!("{:?}", k.kind),
            t.got,
            t.lives,
            t.missing,
            t.reported,
            t.silent(),
            t.corrupt,
            t.duplicate,
            t.reordered
        );
    }
    let half = |v: &[u64]| -> (u64, u64) {
        let mid = v.len() / 2;
        let max = |s: &[u64]| s.iter().copied().max().unwrap_or(0);
        (max(&v[..mid]), max(&v[mid..]))
    };
    let (r1, r2) = half(&o.rss_kb);
    let (f1, f2) = half(&o.fds);
    out += &format!(
        "soak process (daemons in it): RSS max {r1} kB first half, {r2} kB second; descriptors max {f1}, {f2}\n"
    );
    // Whether it keeps growing once warm: the second half's two quarters.
    let quarters = |v: &[u64]| -> [u64; 4] {
        let q = v.len() / 4;
        let max = |s: &[u64]| s.iter().copied().max().unwrap_or(0);
        [
            max(&v[..q]),
            max(&v[q..2 * q]),
            max(&v[2 * q..3 * q]),
            max(&v[3 * q..]),
        ]
    };
    let [q1, q2, q3, q4] = quarters(&o.rss_kb);
    out += &format!("  RSS max by quarter: {q1}, {q2}, {q3}, {q4} kB\n");
    if !o.heap_kb.is_empty() {
        let (a1, a2) = half(&o.anon_kb);
        let (s1, s2) = half(&o.shmem_kb);
        let (h1, h2) = half(&o.heap_kb);
        out += &format!(
            "  of it anonymous {a1} kB, {a2} kB (heap in use {h1} kB, {h2} kB); shared memory {s1} kB, {s2} kB\n"
        );
    }
    for (what, list) in [
        ("messages broke an invariant", &o.anomalies),
        (
            "jumps exceeded the losses reported just before them",
            &o.clues,
        ),
        ("messages sends failed", &o.failures),
    ] {
        if !list.is_empty() {
            out += &format!("{} {what}, the first:\n", list.len());
        }
        for a in list.iter().take(6) {
            out += &format!("  {a}\n");
        }
    }
    if o.violations.is_empty() {
        out += "invariants: held\n";
    } else {
        for v in &o.violations {
            out += &format!("VIOLATED: {v}\n");
        }
    }
    out
}
