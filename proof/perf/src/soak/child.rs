//! A soak's publisher or subscriber: a process of its own (so that the
//! soak can kill it), started in a host's namespace as `tagwire perf
//! soak-child SPEC` with [`ChildSpec`] as JSON. It prints a line of JSON
//! every [`ChildSpec::report_ms`]: a publisher its [`PubReport`], a
//! subscriber its [`SubReport`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tagwire::{Client, ClientOptions, Domain, Error, SubscribeOptions};

use super::check::{payload, At, Checker, Tally};

/// How a soak subscriber subscribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Reliable (the default).
    Reliable,
    /// Lossless: the publishers wait for it.
    Lossless,
    /// Best effort: losses counted.
    BestEffort,
    /// Reliable over the TCP carrier.
    Tcp,
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        super::named(s).ok_or_else(|| {
            format!("no subscriber kind `{s}` (reliable, lossless, best-effort, tcp)")
        })
    }
}

impl Kind {
    /// All of them, in a soak's round-robin order.
    pub const ALL: [Kind; 4] = [Kind::Reliable, Kind::Lossless, Kind::BestEffort, Kind::Tcp];

    fn options(self) -> SubscribeOptions {
        let o = SubscribeOptions::default();
        match self {
            Kind::Reliable => o,
            Kind::Lossless => o.lossless(),
            Kind::BestEffort => o.best_effort(),
            Kind::Tcp => o.tcp(),
        }
    }
}

/// What a child does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildSpec {
    /// `true`: publish; `false`: subscribe.
    pub publish: bool,
    /// Its daemon's socket.
    pub socket: PathBuf,
    /// The tag.
    pub tag: String,
    /// How a subscriber subscribes.
    pub kind: Kind,
    /// A publisher's message sizes: the least and the largest, bytes (each
    /// drawn log-uniformly between).
    pub sizes: (usize, usize),
    /// A publisher's messages a second.
    pub rate_hz: f64,
    /// Randomness (with the process id: each life differs).
    pub seed: u64,
    /// How often it reports, ms.
    pub report_ms: u64,
}

/// A publisher's report.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct PubReport {
    /// Messages sent (their sends succeeded).
    pub sent: u64,
    /// Sends that failed (and were made again).
    pub errors: u64,
    /// The first few failures, in words, with the message's counter.
    #[serde(default)]
    pub failures: Vec<String>,
}

/// A subscriber's report.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct SubReport {
    /// What it checked.
    pub tally: Tally,
    /// Receives that failed with another error than a timeout or a loss.
    pub errors: u64,
    /// The first few messages that broke an invariant, in words.
    #[serde(default)]
    pub anomalies: Vec<String>,
    /// The first few jumps larger than the losses reported just before
    /// them (see [`Checker::clues`]).
    #[serde(default)]
    pub clues: Vec<String>,
}

/// Runs a child until it is killed.
pub fn run(spec: &ChildSpec) -> anyhow::Result<()> {
    let client = connect(spec)?;
    let mut rng = Rng(spec.seed ^ u64::from(std::process::id()).rotate_left(32) ^ now_ns());
    let report = Duration::from_millis(spec.report_ms.max(10));
    let mut next_report = Instant::now() + report;
    if spec.publish {
        let mut p = retry(|| client.publisher(&spec.tag))?;
        let run = rng.next();
        let mut r = PubReport::default();
        let period = Duration::from_secs_f64(1.0 / spec.rate_hz.max(0.1));
        let mut due = Instant::now();
        loop {
            let size = rng.log_uniform(spec.sizes.0, spec.sizes.1);
            match p.send(&payload(run, r.sent, size)) {
                Ok(_) => r.sent += 1,
                // Not sent: the same message again.
                Err(e) => {
                    r.errors += 1;
                    if r.failures.len() < 8 {
                        r.failures.push(format!("message {}: {e}", r.sent));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            if Instant::now() >= next_report {
                println!("{}", serde_json::to_string(&r)?);
                next_report += report;
            }
            due += period;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            } else {
                due = Instant::now();
            }
        }
    } else {
        let mut sub = retry(|| client.subscribe(&spec.tag, spec.kind.options()))?;
        let mut check = Checker::default();
        let mut errors = 0u64;
        loop {
            match sub.receive(Some(Duration::from_millis(100))) {
                Ok(m) => {
                    let at = At {
                        seq: m.seq.0,
                        direct: sub.is_direct(),
                    };
                    check.on_message(&m.payload, at)
                }
                Err(Error::Overflowed { lost }) => check.on_lost(lost),
                Err(Error::Timeout) => {}
                Err(_) => {
                    errors += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            if Instant::now() >= next_report {
                let r = SubReport {
                    tally: check.tally(),
                    errors,
                    anomalies: check.anomalies().to_vec(),
                    clues: check.clues().to_vec(),
                };
                println!("{}", serde_json::to_string(&r)?);
                next_report += report;
            }
        }
    }
}

/// A client of the spec's daemon, once it answers (it may be starting
/// again), with the tag created.
fn connect(spec: &ChildSpec) -> anyhow::Result<Client> {
    retry(|| {
        let c = Client::with_options(ClientOptions {
            socket: spec.socket.clone(),
            timeout: Duration::from_secs(5),
            autostart: false,
            name: if spec.publish { "soak-pub" } else { "soak-sub" }.into(),
        })?;
        c.create_tag(&spec.tag, Domain::Global)?;
        Ok(c)
    })
}

/// `f` until it succeeds, for up to 30 s (a daemon restarting).
fn retry<T>(mut f: impl FnMut() -> tagwire::Result<T>) -> anyhow::Result<T> {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        match f() {
            Ok(t) => return Ok(t),
            Err(e) if Instant::now() >= give_up => return Err(e.into()),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// xorshift64*: sizes and run names, not cryptography.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `lo..=hi`, log-uniformly.
    pub(super) fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let (lo, hi) = (lo.max(1) as f64, hi.max(lo.max(1)) as f64);
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (lo * (hi / lo).powf(u)).round() as usize
    }

    /// A number in `0..n`.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
