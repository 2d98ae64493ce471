//! `tagwire analyze`: worst-case response times and end-to-end bounds of a
//! task set, from the call costs `tagwire perf costs` measured. The model
//! and its assumptions are `tagwire-analyze`'s (and `--help`'s).

use std::path::PathBuf;

use anyhow::Context;
use tagwire_analyze::{analyze, table, CostFigure, Costs, TaskSet};

/// Arguments of `tagwire analyze`.
#[derive(Debug, clap::Args)]
#[command(long_about = "\
Worst-case response times and end-to-end bounds of a task set on tagwire.

Model: each node is one processor under preemptive fixed priorities (higher
is more urgent, as SCHED_FIFO); on a node with more CPUs the bounds are
pessimistic, never optimistic. A task is periodic (`period`) or runs on each
message of a tag (`on`). Its cost per release is its own `wcet` plus the
measured cost of one send per tag it sends (remote when a receiver is on
another node) and one receive per tag it receives, at the next measured size
up. A periodic task's response counts from its due release: it adds how
late a timer wakes (the costs' `wakeup`). Event-run tasks are released with
their messages' arrival jitter (holistic analysis). `[[thread]]`s (tagwire's
forwarder and delivery threads raised to a subscription's policy) preempt
the tasks below them with their period and cost. The platform's own work
(interrupts, the kernel's deferred work, the hypervisor) takes what the
costs' `stolen` records measured from a thread at the highest priority:
their mean share of the CPU (the worst CPU's) stretches every response
(R = (C + B + preemptions) / (1 - share)). A rate, not a worst case: the
platform's rare stalls of milliseconds, which the records' maxima show,
are left out as late wake-ups are, or every short task's bound would be
vacuous.
Blocking: `table_block`, the time a table change holds the tag tables
(given; when `table_changes` is above 0, at least the costs' measured
`table_hold` and `state_hold`), and `table_changes` per second, each
costing a measured table change. A flow's bound adds, hop by hop, the sender's
response time, the time between two nodes (the costs' `deliver`, else
`network`), (n - 1) sender periods for every-n-th, a periodic receiver's
period (it samples) and its response time.

The costs are measured on this machine with `tagwire perf costs --json`
(`--remote` too when tags cross nodes; `--sched fifo:P` at the tasks'
policy); the bounds are only as good as the measured figures, and a kernel
that is not PREEMPT_RT can exceed them (examples/taskset checks them
against a run).

Exit status 2 when a task or a flow misses its deadline.")]
pub(crate) struct Args {
    /// The task set (TOML: `[platform]`, `[[task]]`, `[[thread]]`,
    /// `[[flow]]`).
    taskset: PathBuf,
    /// Call costs: the JSON lines of `tagwire perf costs --json` (or its
    /// `costs.json`).
    #[arg(long)]
    costs: PathBuf,
    /// Which measured figure stands for a call's worst case.
    #[arg(long, value_parser = ["max", "p999"], default_value = "max")]
    figure: String,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.taskset)
        .with_context(|| format!("reading {}", a.taskset.display()))?;
    let set = TaskSet::from_toml(&text).with_context(|| a.taskset.display().to_string())?;
    let figure = match a.figure.as_str() {
        "p999" => CostFigure::P999,
        _ => CostFigure::Max,
    };
    let costs_text = std::fs::read_to_string(&a.costs)
        .with_context(|| format!("reading {}", a.costs.display()))?;
    let costs = Costs::from_json_lines(&costs_text, figure)
        .with_context(|| a.costs.display().to_string())?;
    let analysis = analyze(&set, &costs)?;
    if a.json {
        println!("{}", serde_json::to_string(&analysis)?);
    } else {
        print!("{}", table(&analysis));
    }
    if !analysis.ok() {
        std::process::exit(2);
    }
    Ok(())
}
