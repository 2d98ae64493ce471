//! `tagwire perf costs`: what each call of the API costs its caller, for
//! timing analysis (the real-time publisher/subscriber paper's §3.6: an
//! application can bound its response times only if it knows the cost of
//! every call it makes).
//!
//! Every call is timed on its own, many times, on the calling thread:
//! creating and destroying a tag, getting and releasing send access,
//! subscribing and unsubscribing, sending and receiving at several sizes,
//! asking a tag's senders and receivers, pulling a tag's history. Each is
//! measured locally (one daemon) and, with [`Where::Remote`], with the tag
//! known on another node (a subscriber and a publisher of it there, so
//! that table changes replicate and sends are forwarded). Figures: p50,
//! p99.9, maximum and mean, µs. The records are what `tagwire analyze`
//! reads as its call costs.
//!
//! The paper's blocking term: the longest the client's local tag table
//! (its update thread applying a change) and the daemons' state were held
//! (`table_hold`, `state_hold`), read after the table changes were timed.
//! And what no call costs but every response time pays: the time the
//! platform (interrupts, the kernel's deferred work, the hypervisor) takes
//! from the most urgent thread of each CPU (`stolen`).

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tagwire::{Client, Domain, HistoryQuery, KeepHistory, RingParams, SubscribeOptions};

use crate::stats::percentile_sorted;

pub mod stolen;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Calls timed per call kind (fewer for the largest sends: see
    /// [`Spec::calls_for`]).
    pub calls: usize,
    /// Message sizes for send and receive, bytes.
    pub sizes: Vec<usize>,
    /// The policy the calling thread (and the threads it starts) runs
    /// at, as the application's would (`None`: as it is).
    pub sched: Option<tagwire::Sched>,
    /// The CPU the far subscriber's threads run on (its library's and
    /// the one receiving), as the far task's would (`None`: the caller's
    /// placement).
    pub far_cpu: Option<usize>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            calls: 10_000,
            sizes: vec![64, 1024, 64 * 1024, 1 << 20],
            sched: None,
            far_cpu: None,
        }
    }
}

/// Runs `f` on a thread of its own on `cpu` (`None`: here), at the
/// calling thread's policy.
fn on_cpu<T: Send>(cpu: Option<usize>, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
    let Some(cpu) = cpu else {
        return Ok(f());
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            crate::raw::pin_current_thread(cpu)?;
            Ok(f())
        })
        .join()
        .map_err(|_| anyhow::anyhow!("a thread on cpu {cpu} panicked"))?
    })
}

impl Spec {
    /// Calls for a send or receive of `size` bytes: [`Spec::calls`], but
    /// at most 2,000 MiB copied per kind (2,000 calls of 1 MiB), so that
    /// the whole run stays within a minute.
    pub fn calls_for(&self, size: usize) -> usize {
        let cap = (2_000usize << 20) / size.max(1);
        self.calls.min(cap.max(100))
    }
}

/// Where the other parties of the tag are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Where {
    /// Every party on this node.
    Local,
    /// A subscriber and a publisher of the tag on another node.
    Remote,
}

/// The cost of one call kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CostRecord {
    /// Always `costs`.
    pub bench: String,
    /// The call: `create_tag`, `destroy_tag`, `publisher`,
    /// `release_publisher`, `subscribe`, `unsubscribe`, `send`, `receive`,
    /// `senders`, `receivers`, `pull`; and two that are not calls:
    /// `wakeup`, how late a thread sleeping until an absolute time wakes
    /// (a periodic task's release jitter), `deliver` (remote), from a
    /// send to the far subscriber's receive, `table_hold` and
    /// `state_hold`, the longest the client's tag table and the daemons'
    /// state were held (one value each), and `stolen`, the time the
    /// platform took from the most urgent thread of a CPU per window of
    /// `size` µs ([`stolen`]).
    pub call: String,
    /// Message size for `send`, `receive` and `pull` (each message), else 0.
    pub size: usize,
    /// `local` or `remote`.
    #[serde(rename = "where")]
    pub place: Where,
    /// Calls timed.
    pub calls: usize,
    /// Median, µs.
    pub p50_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Longest, µs.
    pub max_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// The CPU measured, for `stolen` (whose `size` is its window, µs;
    /// see [`stolen`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
}

fn record(call: &str, size: usize, place: Where, mut t: Vec<f64>) -> anyhow::Result<CostRecord> {
    t.sort_by(f64::total_cmp);
    let n = t.len();
    anyhow::ensure!(n > 0, "no {call} timed");
    Ok(CostRecord {
        bench: "costs".into(),
        call: call.into(),
        size,
        place,
        calls: n,
        p50_us: percentile_sorted(&t, 50.0).unwrap_or(0.0),
        p999_us: percentile_sorted(&t, 99.9).unwrap_or(0.0),
        max_us: t[n - 1],
        mean_us: t.iter().sum::<f64>() / n as f64,
        cpu: None,
    })
}

/// Times `f` once, µs.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t0 = Instant::now();
    let r = f();
    (r, t0.elapsed().as_secs_f64() * 1e6)
}

/// Every call kind's cost from `c`, with `other` (a client of another
/// node's daemon, if any) holding a subscriber and a publisher of the tag
/// the calls use.
/// `progress` hears each kind as it is done.
pub fn measure(
    c: &Client,
    other: Option<&Client>,
    spec: &Spec,
    mut progress: impl FnMut(&CostRecord),
) -> anyhow::Result<Vec<CostRecord>> {
    let place = if other.is_some() {
        Where::Remote
    } else {
        Where::Local
    };
    if let Some(s) = spec.sched {
        tagwire::set_thread_sched(s).with_context(|| format!("perf costs --sched {s}"))?;
    }
    let pid = std::process::id();
    let mut out = Vec::new();
    let mut push = |r: CostRecord, out: &mut Vec<CostRecord>| {
        progress(&r);
        out.push(r);
    };

    // Tags: create and destroy, a new name each time.
    let (mut create, mut destroy) = (Vec::new(), Vec::new());
    let table_calls = spec.calls.min(match place {
        Where::Local => spec.calls,
        // Each is a table change every node acknowledges.
        Where::Remote => 2_000,
    });
    for i in 0..table_calls {
        let name = format!("/perf/costs/{pid}/t{i}");
        let (r, us) = timed(|| c.create_tag(&name, Domain::Global));
        r.with_context(|| format!("create_tag {name}"))?;
        create.push(us);
        let (r, us) = timed(|| c.destroy_tag(&name));
        r.with_context(|| format!("destroy_tag {name}"))?;
        destroy.push(us);
    }
    push(record("create_tag", 0, place, create)?, &mut out);
    push(record("destroy_tag", 0, place, destroy)?, &mut out);

    // One tag for the rest, known to the other node if there is one.
    let tag = format!("/perf/costs/{pid}/main");
    c.create_tag(&tag, Domain::Global)?;
    let mut far = match other {
        Some(o) => {
            // Its library's threads start where it subscribes.
            let s = on_cpu(spec.far_cpu, || o.subscribe(&tag, subscribe_options(spec)))??;
            let p = o.publisher(&tag)?;
            crate::napa::wait_known(c, &tag)?;
            Some((s, p))
        }
        None => None,
    };

    let (mut get, mut release) = (Vec::new(), Vec::new());
    for _ in 0..table_calls {
        let (p, us) = timed(|| c.publisher(&tag));
        let p = p.context("publisher")?;
        get.push(us);
        let ((), us) = timed(|| drop(p));
        release.push(us);
    }
    push(record("publisher", 0, place, get)?, &mut out);
    push(record("release_publisher", 0, place, release)?, &mut out);

    let (mut sub, mut unsub) = (Vec::new(), Vec::new());
    for _ in 0..table_calls {
        let (s, us) = timed(|| c.subscribe(&tag, SubscribeOptions::default()));
        let s = s.context("subscribe")?;
        sub.push(us);
        let ((), us) = timed(|| drop(s));
        unsub.push(us);
    }
    push(record("subscribe", 0, place, sub)?, &mut out);
    push(record("unsubscribe", 0, place, unsub)?, &mut out);
    // What those table changes held (the longest hold so far).
    for r in holds(c, other, place)? {
        push(r, &mut out);
    }

    for (call, f) in [
        (
            "senders",
            &(|| c.senders(&tag).map(drop)) as &dyn Fn() -> tagwire::Result<()>,
        ),
        ("receivers", &|| c.receivers(&tag).map(drop)),
    ] {
        let mut t = Vec::with_capacity(spec.calls);
        for _ in 0..spec.calls {
            let (r, us) = timed(f);
            r.with_context(|| call.to_owned())?;
            t.push(us);
        }
        push(record(call, 0, place, t)?, &mut out);
    }

    for &size in &spec.sizes {
        for r in send_cost(c, &tag, size, place, spec, far.as_mut().map(|f| &mut f.0))? {
            push(r, &mut out);
        }
        if place == Where::Local {
            push(receive_cost(c, &tag, size, spec.calls_for(size))?, &mut out);
        }
    }
    push(pull_cost(c, pid, place, spec.calls.min(2_000))?, &mut out);
    let _ = c.destroy_tag(&tag);
    if place == Where::Local {
        push(wakeup_cost(spec.calls.min(2_000))?, &mut out);
        for cpu in stolen_cpus(spec)? {
            match stolen::measure(cpu)? {
                Some(records) => records.into_iter().for_each(|r| push(r, &mut out)),
                None => eprintln!(
                    "perf costs: no stolen time measured on cpu {cpu}: SCHED_FIFO 99 not permitted"
                ),
            }
        }
    }
    Ok(out)
}

/// The longest hold of the client's tag table (`table_hold`: its update
/// thread applying a change) and of the daemons' state (`state_hold`:
/// this node's daemon's, and the other node's if any) so far, one value
/// each (the blocking term of `tagwire analyze`).
fn holds(c: &Client, other: Option<&Client>, place: Where) -> anyhow::Result<Vec<CostRecord>> {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let table = other
        .map_or(Duration::ZERO, Client::table_hold_max)
        .max(c.table_hold_max());
    let mut state = 0u64;
    for client in std::iter::once(c).chain(other) {
        for row in client.stats()? {
            if row.kind == tagwire::StatsKind::Node {
                state = state.max(row.get("state_hold_max_us").unwrap_or(0));
            }
        }
    }
    Ok(vec![
        record("table_hold", 0, place, vec![us(table)])?,
        record("state_hold", 0, place, vec![state as f64])?,
    ])
}

/// The CPUs whose stolen time is measured: those the calling thread may
/// run on, and the far subscriber's.
fn stolen_cpus(spec: &Spec) -> anyhow::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None).context("the caller's CPUs")?;
    let mut cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|c| set.is_set(*c))
        .chain(spec.far_cpu)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// How late a sleep until an absolute time ends (`calls` of them, 1 ms
/// apart), the way a periodic task waits for its next release.
fn wakeup_cost(calls: usize) -> anyhow::Result<CostRecord> {
    const PERIOD: Duration = Duration::from_millis(1);
    let mut t = Vec::with_capacity(calls);
    let mut due = Instant::now() + PERIOD;
    for _ in 0..calls {
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        t.push(due.elapsed().as_secs_f64() * 1e6);
        due += PERIOD;
        // A wake-up later than a period: the next due time from now.
        due = due.max(Instant::now() + PERIOD / 2);
    }
    record("wakeup", 0, Where::Local, t)
}

/// Subscriptions at the policy the calls run at (`Spec::sched`), so that
/// tagwire's threads carrying them run at it too, as an application's
/// would.
fn subscribe_options(spec: &Spec) -> SubscribeOptions {
    let o = SubscribeOptions::default();
    match spec.sched {
        Some(s) => o.sched(s),
        None => o,
    }
}

/// `send` of `size` bytes with a local subscriber draining the tag (and
/// `far`, the other node's, if any): the publisher's own cost, each send
/// made once every subscriber has the one before, as a periodic task's
/// sends are. (Flat out, a reliable publisher is held back whenever the
/// window to the far node is full: that is the stream's throughput, not
/// the call's cost, and it took the remote maxima to 1.5-2.9 ms.) With
/// a far subscriber, also `deliver`: from the send's start to that
/// subscriber's receive (what a task's message takes between nodes).
fn send_cost(
    c: &Client,
    tag: &str,
    size: usize,
    place: Where,
    spec: &Spec,
    far: Option<&mut tagwire::Subscriber>,
) -> anyhow::Result<Vec<CostRecord>> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let calls = spec.calls_for(size);
    let mut sub = c.subscribe(tag, subscribe_options(spec))?;
    let mut p = c.publisher(tag)?;
    p.set_send_timeout(Duration::from_secs(30));
    let payload = vec![0x5au8; size];
    let stop = AtomicBool::new(false);
    let (here, there) = (AtomicU64::new(0), AtomicU64::new(0));
    let expect_far = far.is_some();
    // When the far subscriber got each message.
    let arrived = std::sync::Mutex::new(Vec::with_capacity(calls));
    let drain = |s: &mut tagwire::Subscriber, n: &AtomicU64, far: bool| {
        while !stop.load(Ordering::Relaxed) {
            if s.receive(Some(Duration::from_millis(50))).is_ok() {
                if far {
                    if let Ok(mut a) = arrived.lock() {
                        a.push(Instant::now());
                    }
                }
                n.fetch_add(1, Ordering::Release);
            }
        }
    };
    let mut starts = Vec::with_capacity(calls);
    let record_send = std::thread::scope(|s| -> anyhow::Result<CostRecord> {
        s.spawn(|| drain(&mut sub, &here, false));
        if let Some(f) = far {
            s.spawn(|| {
                if let Some(cpu) = spec.far_cpu {
                    if crate::raw::pin_current_thread(cpu).is_err() {
                        return;
                    }
                }
                drain(f, &there, true)
            });
        }
        // Until every subscriber has `n` messages (bounded: 10 s).
        let delivered = |n: u64| -> anyhow::Result<()> {
            let start = Instant::now();
            while here.load(Ordering::Acquire) < n
                || (expect_far && there.load(Ordering::Acquire) < n)
            {
                anyhow::ensure!(
                    start.elapsed() < Duration::from_secs(10),
                    "send {n} of {size} B not delivered within 10 s"
                );
                std::thread::sleep(Duration::from_micros(20));
            }
            Ok(())
        };
        let mut t = Vec::with_capacity(calls);
        let result = (|| -> anyhow::Result<()> {
            for i in 0..calls as u64 {
                delivered(i)?;
                starts.push(Instant::now());
                let (r, us) = timed(|| p.send(&payload));
                r.context("send")?;
                t.push(us);
            }
            delivered(calls as u64)
        })();
        stop.store(true, Ordering::Relaxed);
        result?;
        record("send", size, place, t)
    })?;
    let arrived = arrived
        .into_inner()
        .map_err(|_| anyhow::anyhow!("the far drain panicked"))?;
    if !expect_far {
        return Ok(vec![record_send]);
    }
    anyhow::ensure!(
        arrived.len() == starts.len(),
        "{} of {} messages reached the far subscriber",
        arrived.len(),
        starts.len()
    );
    let d = starts
        .iter()
        .zip(&arrived)
        .map(|(s, a)| a.saturating_duration_since(*s).as_secs_f64() * 1e6)
        .collect();
    Ok(vec![record_send, record("deliver", size, place, d)?])
}

/// `receive` of a `size`-byte message that is already there (published
/// just before, in batches the ring holds).
fn receive_cost(c: &Client, tag: &str, size: usize, calls: usize) -> anyhow::Result<CostRecord> {
    let mut sub = c.subscribe(tag, SubscribeOptions::default())?;
    let mut p = c.publisher(tag)?;
    let payload = vec![0xa5u8; size];
    const BATCH: usize = 32;
    let mut t = Vec::with_capacity(calls);
    while t.len() < calls {
        let n = BATCH.min(calls - t.len());
        for _ in 0..n {
            p.send(&payload)?;
        }
        for _ in 0..n {
            let (r, us) = timed(|| sub.receive(Some(Duration::from_secs(5))));
            let m = r.context("receive")?;
            anyhow::ensure!(
                m.payload.len() == size,
                "a {size} B message came back as {}",
                m.payload.len()
            );
            t.push(us);
        }
    }
    record("receive", size, Where::Local, t)
}

/// `pull` of the last 10 of a history of 100 messages of 256 bytes.
fn pull_cost(c: &Client, pid: u32, place: Where, calls: usize) -> anyhow::Result<CostRecord> {
    let tag = format!("/perf/costs/{pid}/history");
    let history = KeepHistory {
        depth: 100,
        max_bytes: 0,
    };
    c.create_tag_keeping(&tag, Domain::Global, RingParams::default(), history)?;
    let mut p = c.publisher(&tag)?;
    for _ in 0..100 {
        p.send(&[7u8; 256])?;
    }
    // The daemon's history has them all before the pulls are timed.
    let start = Instant::now();
    while c.pull(&tag, HistoryQuery::Last(100))?.len() < 100 {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(10),
            "the history never filled"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut t = Vec::with_capacity(calls);
    for _ in 0..calls {
        let (r, us) = timed(|| c.pull(&tag, HistoryQuery::Last(10)));
        anyhow::ensure!(r.context("pull")?.len() == 10, "pull gave fewer than 10");
        t.push(us);
    }
    drop(p);
    let _ = c.destroy_tag(&tag);
    record("pull", 256, place, t)
}

/// The records as a table.
pub fn table(records: &[CostRecord]) -> String {
    let mut out = String::from(
        "call               size     where   calls     p50 us   p99.9 us     max us    mean us\n",
    );
    for r in records {
        out += &format!(
            "{:<18} {:>8} {:<7} {:>6} {:>10.2} {:>10.2} {:>10.1} {:>10.2}\n",
            match r.cpu {
                Some(cpu) => format!("{} cpu{cpu}", r.call),
                None => r.call.clone(),
            },
            r.size,
            match r.place {
                Where::Local => "local",
                Where::Remote => "remote",
            },
            r.calls,
            r.p50_us,
            r.p999_us,
            r.max_us,
            r.mean_us
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_has_its_percentiles_and_the_large_sends_are_capped() {
        let r = record(
            "send",
            64,
            Where::Local,
            (1..=1000).map(f64::from).collect(),
        )
        .unwrap();
        assert_eq!((r.calls, r.max_us), (1000, 1000.0));
        assert!((r.p50_us - 500.0).abs() <= 1.0 && r.p999_us >= 999.0);
        assert!((r.mean_us - 500.5).abs() < 1e-9);
        assert!(record("send", 64, Where::Local, vec![]).is_err());
        let s = Spec::default();
        assert_eq!(s.calls_for(64), 10_000);
        assert_eq!(s.calls_for(1 << 20), 2_000);
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains("\"where\":\"local\""), "{line}");
    }
}
