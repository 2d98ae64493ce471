//! The commands' consumer, which knows nothing of upgrades: it checks that
//! every cycle comes once and in order and measures the gaps (all, and
//! those where one build's commands give way to the next's), and after
//! `--after` commands of build `--until-build` (or `--seconds`) prints one
//! `RESULT` line.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use clap::Parser;
use tagwire::{Client, Domain, SubscribeOptions};
use tagwire_example_hot_upgrade::{Command, COMMAND_TAG};

#[derive(Parser)]
#[command(about = "The consumer of the hot-upgrade example")]
struct Args {
    /// Stop once this build has published `--after` commands.
    #[arg(long)]
    until_build: Option<u32>,
    /// See `--until-build`.
    #[arg(long, default_value_t = 50)]
    after: u64,
    /// Stop after this long whatever happened.
    #[arg(long, default_value_t = 120.0)]
    seconds: f64,
    /// Run at this scheduling policy (`fifo:30`, as a controller would);
    /// without the privilege, a warning and the default policy.
    #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
    sched: Option<tagwire::Sched>,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if let Some(sched) = a.sched {
        // Before any thread starts: they inherit it.
        if let Err(e) = tagwire::set_thread_sched(sched) {
            eprintln!("warning: running at the default policy: {e}");
        }
    }
    let tw = Client::connect()?;
    tw.create_tag(COMMAND_TAG, Domain::Global)?;
    // With a policy, the daemons' threads that carry the commands here
    // run at it too (where permitted).
    let mut sub = match a.sched {
        Some(s) => match tw.subscribe(COMMAND_TAG, SubscribeOptions::default().sched(s)) {
            Err(e @ tagwire::Error::NotPermitted(_)) => {
                eprintln!("warning: the commands' threads at the default policy: {e}");
                tw.subscribe(COMMAND_TAG, SubscribeOptions::default())?
            }
            r => r?,
        },
        None => tw.subscribe(COMMAND_TAG, SubscribeOptions::default())?,
    };
    println!("READY");
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let (mut got, mut lost, mut duplicated, mut reordered, mut reported) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut last: Option<(u64, Instant)> = None;
    // The three longest gaps: (gap, the cycle after it).
    let mut gaps: Vec<(Duration, u64)> = Vec::new();
    let mut switch_gap = Duration::ZERO;
    let mut builds: Vec<u32> = Vec::new();
    let mut last_build_count = 0u64;
    let mut seen = BTreeSet::new();
    while Instant::now() < end {
        let m = match sub.receive(Some(Duration::from_millis(200))) {
            Ok(m) => m,
            Err(tagwire::Error::Timeout) => continue,
            Err(tagwire::Error::Overflowed { lost: n }) => {
                reported += n;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let now = Instant::now();
        let Some(c) = Command::decode(&m.payload) else {
            continue;
        };
        got += 1;
        if !seen.insert(c.cycle) {
            duplicated += 1;
            continue;
        }
        if let Some((prev, at)) = last {
            if c.cycle < prev {
                reordered += 1;
            } else {
                lost += c.cycle - prev - 1;
                // The gap where one build hands over to the next.
                if builds.last().is_some_and(|b| *b != c.build) {
                    switch_gap = switch_gap.max(now - at);
                }
                gaps.push((now - at, c.cycle));
                gaps.sort_unstable_by(|a, b| b.cmp(a));
                gaps.truncate(3);
            }
        }
        last = Some((c.cycle, now));
        if builds.last() != Some(&c.build) {
            builds.push(c.build);
        }
        if Some(c.build) == a.until_build {
            last_build_count += 1;
            if last_build_count >= a.after {
                break;
            }
        }
    }
    let order: Vec<String> = builds.iter().map(u32::to_string).collect();
    let (max_gap, max_gap_at) = gaps.first().copied().unwrap_or_default();
    let longest: Vec<String> = gaps
        .iter()
        .map(|(g, c)| format!("{}@{c}", g.as_micros()))
        .collect();
    println!(
        "RESULT commands={got} lost={lost} duplicated={duplicated} reordered={reordered} reported_lost={reported} \
         max_gap_us={} max_gap_cycle={max_gap_at} longest_gaps_us={} max_switch_gap_us={} last_cycle={} builds={}",
        max_gap.as_micros(),
        longest.join(","),
        switch_gap.as_micros(),
        last.map_or(0, |l| l.0),
        order.join(","),
    );
    Ok(())
}
