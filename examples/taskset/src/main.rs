//! `taskset-node`: runs one node's tasks of a task set (the TOML that
//! `tagwire analyze` reads) on the tagwire daemon of `TAGWIRE_SOCKET`, for
//! a while, and writes what it observed as JSON (`tagwire_example_taskset::
//! Observed`).
//!
//! Each task is a thread at `SCHED_FIFO` at its priority (where permitted;
//! else a warning and the default policy), pinned to `--cpu` if given. A
//! periodic task sleeps until each due release; a task with `on` waits for
//! that tag's messages. Each release takes what arrived on the other tags
//! it receives, works its `wcet` of CPU time (the thread's own clock: time
//! preempted does not count), then sends one message of the given size on
//! each tag it sends. Subscriptions ask the task's policy for tagwire's
//! threads that carry them. Optionally a bulk tag runs beside, at the
//! default policy: flat out (`--bulk-send`) or drained (`--bulk-receive`).

use std::path::PathBuf;
use std::sync::{Barrier, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use rustix::time::{clock_gettime, ClockId};
use tagwire::{Client, Domain, PublishOptions, Sched, SubscribeOptions, Subscriber};
use tagwire_analyze::{Task, TaskSet};
use tagwire_example_taskset::{Observed, Origins, Seen, Stamp};

#[derive(Parser)]
struct Args {
    /// The task set (TOML).
    #[arg(long)]
    set: PathBuf,
    /// Which node's tasks to run (none: only the bulk tag).
    #[arg(long)]
    node: Option<String>,
    /// How long, seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Observations start this long after the tasks do, seconds.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Pin every thread to this CPU (the node as one processor).
    #[arg(long)]
    cpu: Option<usize>,
    /// Publish this tag beside the tasks (8 KiB messages, best effort to
    /// its subscribers, at `--bulk-rate`).
    #[arg(long)]
    bulk_send: Option<String>,
    /// Messages per second on the bulk tag (0: flat out).
    #[arg(long, default_value_t = 100.0)]
    bulk_rate: f64,
    /// Drain this tag beside the tasks (best effort).
    #[arg(long)]
    bulk_receive: Option<String>,
    /// Where to write the observations.
    #[arg(long)]
    out: PathBuf,
}

fn now_ns() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

fn cpu_ns() -> u64 {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// Works `ns` of this thread's CPU time.
fn work(ns: u64) {
    let until = cpu_ns() + ns;
    while cpu_ns() < until {
        std::hint::spin_loop();
    }
}

fn sleep_until(t_ns: u64) {
    let now = now_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

fn pin(cpu: Option<usize>) -> anyhow::Result<()> {
    if let Some(c) = cpu {
        let mut set = rustix::thread::CpuSet::new();
        set.set(c);
        rustix::thread::sched_setaffinity(None, &set).context("pinning")?;
    }
    Ok(())
}

/// What every task thread shares.
struct Run {
    set: TaskSet,
    client: Client,
    cpu: Option<usize>,
    /// Set once every task is ready.
    times: OnceLock<Times>,
    /// Every task thread and `main` meet here twice: when all are ready
    /// (subscriptions made), and once the times are set.
    meet: Barrier,
    seen: Mutex<Observed>,
}

/// When the tasks start, observe and stop (`CLOCK_MONOTONIC` ns).
#[derive(Debug, Clone, Copy)]
struct Times {
    start_ns: u64,
    observe_from_ns: u64,
    end_ns: u64,
}

impl Run {
    /// Waits for every task to be ready and for the times.
    fn go(&self) -> anyhow::Result<Times> {
        self.meet.wait();
        self.meet.wait();
        self.times
            .get()
            .copied()
            .context("the run's times were not set")
    }
}

impl Run {
    /// The index of `name` among the set's flow sources, if it is one.
    fn source(&self, name: &str) -> Option<u8> {
        let i = self.set.task.iter().position(|t| t.name == name)?;
        self.set
            .flow
            .iter()
            .any(|f| f.path.first().is_some_and(|p| p == name))
            .then(|| u8::try_from(i).ok())
            .flatten()
    }

    /// The flows that end at `name`: (flow, its source's index).
    fn ending_at(&self, name: &str) -> Vec<(String, u8)> {
        self.set
            .flow
            .iter()
            .filter(|f| f.path.last().is_some_and(|l| l == name))
            .filter_map(|f| Some((f.name.clone(), self.source(f.path.first()?)?)))
            .collect()
    }
}

/// One task's loop.
fn task(run: &Run, t: &Task) -> anyhow::Result<()> {
    pin(run.cpu)?;
    let prio = u8::try_from(t.priority.clamp(1, 99)).unwrap_or(99);
    let sched = Sched::Fifo(prio);
    let real_time = match tagwire::set_thread_sched(sched) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("warning: task {} at the default policy: {e}", t.name);
            false
        }
    };
    let sub_opts = |every: u32| {
        let o = SubscribeOptions::default().every(every.max(1));
        if real_time {
            o.sched(sched)
        } else {
            o
        }
    };
    let pub_opts = if real_time {
        PublishOptions::default().sched(sched)
    } else {
        PublishOptions::default()
    };
    let mut pubs = Vec::new();
    for s in &t.sends {
        pubs.push((run.client.publisher_with(&s.tag, pub_opts)?, s.size));
    }
    let mut trigger: Option<Subscriber> = None;
    let mut others: Vec<Subscriber> = Vec::new();
    for r in &t.receives {
        let s = run.client.subscribe(&r.tag, sub_opts(r.every))?;
        if t.on.as_deref() == Some(r.tag.as_str()) {
            trigger = Some(s);
        } else {
            others.push(s);
        }
    }
    let me = run.source(&t.name);
    let ends = run.ending_at(&t.name);
    let mut last_end: Vec<u64> = vec![0; ends.len()];
    let mut origins = Origins::default();
    let mut mine = Seen::default();
    let mut late = Seen::default();
    let mut flows = vec![Seen::default(); ends.len()];
    let times = run.go()?;
    let period_ns = t.period.map(|p| (p * 1e9) as u64);
    let wcet_ns = (t.wcet * 1e9) as u64;
    let mut k = 1u64;
    loop {
        // The release: due (periodic) or a message's sending (event run).
        let begun_ns = if let Some(p) = period_ns {
            let due = times.start_ns + k * p;
            k += 1;
            if due >= times.end_ns {
                break;
            }
            sleep_until(due);
            if due >= times.observe_from_ns {
                late.add_ns(now_ns().saturating_sub(due));
            }
            if let Some(src) = me {
                origins.release(src, due);
            }
            due
        } else {
            let Some(sub) = trigger.as_mut() else {
                anyhow::bail!("task {} has `on` but does not receive it", t.name);
            };
            if now_ns() >= times.end_ns {
                break;
            }
            let m = match sub.receive(Some(Duration::from_millis(100))) {
                Ok(m) => m,
                Err(tagwire::Error::Timeout) => continue,
                Err(tagwire::Error::Overflowed { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(s) = Stamp::decode(&m.payload) else {
                continue;
            };
            origins.merge(&s);
            s.sent_ns
        };
        for sub in &mut others {
            loop {
                match sub.receive(Some(Duration::ZERO)) {
                    Ok(m) => {
                        if let Some(s) = Stamp::decode(&m.payload) {
                            origins.merge(&s);
                        }
                    }
                    Err(tagwire::Error::Overflowed { .. }) => {}
                    Err(_) => break,
                }
            }
        }
        work(wcet_ns);
        for (p, size) in &mut pubs {
            p.send(&origins.stamp(now_ns()).encode(*size))?;
        }
        let done = now_ns();
        if begun_ns >= times.observe_from_ns {
            mine.add_ns(done.saturating_sub(begun_ns));
            for (i, (_, src)) in ends.iter().enumerate() {
                // Releases before the observing starts are not counted.
                if let Some(o) = origins.get(*src).filter(|o| *o >= times.observe_from_ns) {
                    if o > last_end[i] {
                        last_end[i] = o;
                        flows[i].add_ns(done.saturating_sub(o));
                    }
                }
            }
        }
    }
    let mut seen = run
        .seen
        .lock()
        .map_err(|_| anyhow::anyhow!("a task thread panicked"))?;
    seen.tasks.entry(t.name.clone()).or_default().merge(&mine);
    if late.count > 0 {
        seen.late.entry(t.name.clone()).or_default().merge(&late);
    }
    for ((name, _), f) in ends.iter().zip(&flows) {
        seen.flows.entry(name.clone()).or_default().merge(f);
    }
    Ok(())
}

fn bulk(run: &Run, send: Option<&str>, rate: f64, receive: Option<&str>) -> anyhow::Result<()> {
    pin(run.cpu)?;
    let times = run.go()?;
    if let Some(tag) = send {
        let mut p = run.client.publisher(tag)?;
        p.set_send_timeout(Duration::from_millis(200));
        let payload = vec![0xb5u8; 8192];
        let gap_ns = if rate > 0.0 { (1e9 / rate) as u64 } else { 0 };
        let mut next = now_ns();
        while now_ns() < times.end_ns {
            if gap_ns > 0 {
                sleep_until(next);
                next += gap_ns;
            }
            match p.send(&payload) {
                Ok(_) | Err(tagwire::Error::Timeout) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    if let Some(tag) = receive {
        let mut s = run
            .client
            .subscribe(tag, SubscribeOptions::default().best_effort())?;
        while now_ns() < times.end_ns {
            let _ = s.receive(Some(Duration::from_millis(100)));
        }
    }
    Ok(())
}

/// CPU time of this process's threads that tagwire's library started
/// (named `tagwire-…`), by name, ns (`/proc/self/task/*/schedstat`).
fn library_threads(node: &str) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let p = e.path();
        let name = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        let name = name.trim();
        if !name.starts_with("tagwire") {
            continue;
        }
        let ns = std::fs::read_to_string(p.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        *out.entry(format!("{node}/{name}")).or_default() += ns;
    }
    out
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let text =
        std::fs::read_to_string(&a.set).with_context(|| format!("reading {}", a.set.display()))?;
    let set = TaskSet::from_toml(&text)?;
    let mine: Vec<Task> = set
        .task
        .iter()
        .filter(|t| a.node.as_ref() == Some(&t.node))
        .cloned()
        .collect();
    if let Some(node) = &a.node {
        anyhow::ensure!(!mine.is_empty(), "no task of the set runs on node {node}");
    }
    let client = Client::connect()?;
    let mut tags: Vec<&str> = set
        .task
        .iter()
        .flat_map(|t| t.sends.iter().chain(&t.receives).map(|u| u.tag.as_str()))
        .collect();
    tags.extend(a.bulk_send.as_deref());
    tags.extend(a.bulk_receive.as_deref());
    tags.sort_unstable();
    tags.dedup();
    for tag in tags {
        // (Already there, made by the other node: fine.)
        client
            .create_tag(tag, Domain::Global)
            .with_context(|| format!("creating {tag}"))?;
    }
    let bulky = a.bulk_send.is_some() || a.bulk_receive.is_some();
    let run = Run {
        set: set.clone(),
        client,
        cpu: a.cpu,
        times: OnceLock::new(),
        meet: Barrier::new(mine.len() + usize::from(bulky) + 1),
        seen: Mutex::new(Observed::default()),
    };
    std::thread::scope(|s| -> anyhow::Result<()> {
        let mut threads = Vec::new();
        for t in &mine {
            let run = &run;
            threads.push((
                t.name.clone(),
                s.spawn(move || {
                    let r = task(run, t);
                    if r.is_err() {
                        // Whoever still waits to meet would wait forever.
                        std::process::exit(1);
                    }
                    r
                }),
            ));
        }
        if bulky {
            let run = &run;
            let (send, receive) = (a.bulk_send.as_deref(), a.bulk_receive.as_deref());
            let rate = a.bulk_rate;
            threads.push((
                "bulk".into(),
                s.spawn(move || bulk(run, send, rate, receive)),
            ));
        }
        run.meet.wait();
        // Ready: a little time for the subscriptions to reach the other
        // node, then go.
        let start_ns = now_ns() + 500_000_000;
        let secs = |x: f64| (x * 1e9) as u64;
        let _ = run.times.set(Times {
            start_ns,
            observe_from_ns: start_ns + secs(a.warmup),
            end_ns: start_ns + secs(a.seconds),
        });
        run.meet.wait();
        for (name, h) in threads {
            h.join()
                .map_err(|_| anyhow::anyhow!("{name} panicked"))?
                .with_context(|| format!("task {name}"))?;
        }
        Ok(())
    })?;
    let mut seen = run
        .seen
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a task thread panicked"))?;
    if let Some(node) = &a.node {
        seen.threads = library_threads(node);
    }
    std::fs::write(&a.out, serde_json::to_vec_pretty(&seen)?)
        .with_context(|| format!("writing {}", a.out.display()))?;
    for (name, s) in &seen.tasks {
        println!(
            "task {name}: {} releases, max {:.1} us, mean {:.1} us",
            s.count,
            s.max_us,
            s.mean_us()
        );
    }
    for (name, s) in &seen.late {
        println!(
            "task {name}: woke late by max {:.1} us, mean {:.1} us",
            s.max_us,
            s.mean_us()
        );
    }
    for (name, s) in &seen.flows {
        println!(
            "flow {name}: {} observed, max {:.1} us, mean {:.1} us",
            s.count,
            s.max_us,
            s.mean_us()
        );
    }
    Ok(())
}
