//! # tagwire-analyze: response-time and end-to-end bounds for a task set
//!
//! The real-time publisher/subscriber paper (§3.6) asks that applications
//! can analyse their timing: the model's threads, priorities and call
//! costs are known, so fixed-priority response-time analysis applies. This
//! crate does that analysis for a task set on tagwire nodes ([`TaskSet`],
//! read from TOML by [`TaskSet::from_toml`]) with the call costs that
//! `tagwire perf costs` measured ([`Costs`], its JSON lines).
//!
//! **Model.** Each node is analysed as one processor under preemptive
//! fixed priorities (higher number, more urgent, as `SCHED_FIFO`); on a
//! node with more CPUs this is pessimistic, never optimistic (a task waits
//! only while every CPU runs more urgent work). A task is periodic
//! (`period`) or runs on each message of a tag (`on`), then with the
//! period of that tag's messages. Its cost per release is its own
//! worst-case execution time plus the measured cost of each call it makes
//! per release: one `send` per tag it sends, one `receive` per tag it
//! receives, at the message's size (the next measured size up), local or
//! remote as its tag's other end is. Threads of tagwire that compete
//! (the daemon's inbound or forwarding threads, when they run above the
//! application's tasks) and the kernel's are listed as `[[thread]]`s of
//! the node with their period and cost: they preempt, nothing bounds
//! them. Blocking: the longest time a lower-priority task can hold
//! what a task needs, here the client's and the daemon's tag tables while
//! a table change is applied (`table_block`, given, or when the tables
//! change while the set runs, at least the costs' measured `table_hold`
//! and `state_hold`), plus
//! the update-storm term, `table_changes` per second each costing a table
//! change's measured time (the caller's whole wait for the call, of which
//! the work on this node is a part: pessimistic until the update thread's
//! own share is measured).
//!
//! The platform's own work, which no task or thread of the set is (the
//! kernel's interrupts and deferred work, the hypervisor taking the CPU),
//! is the costs' `stolen` records: what a thread at the highest priority
//! lost per window, measured under the set's load; the analysis takes its
//! mean share `ρ` of the CPU ([`Costs::platform_share`]).
//!
//! Worst-case response time ([`analyze`]): `R = J + w`, `w` the least
//! fixed point of `w = C + B + ρw + Σ_{j more urgent} ⌈(w + J_j) / T_j⌉ C_j`,
//! unschedulable if `R` passes the task's deadline (its period unless
//! given). `J` is a task's release jitter: for a periodic task, how late
//! its timer may wake it (the costs' `wakeup` record), so that `R` counts
//! from the release it was due at; for a task run by messages, 0 in its
//! own `R` (a flow adds its senders' responses) and their arrival jitter
//! where it interferes with others. A flow's end-to-end
//! bound: along its tasks and tags, each hop adds the sender's response
//! time, the tag's network time when its ends are on two nodes (the
//! costs' `deliver` record, from a send to the far subscriber's receive,
//! when measured; else the platform's `network`), the
//! every-n-th wait `(n - 1)` sender periods, and at the receiver, a
//! periodic one's full period (it samples) or nothing for a task run by
//! the message, then the receiver's response time.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

mod taskset;
pub use taskset::{Flow, Platform, TagUse, Task, TaskSet, Thread};

/// Why a task set cannot be analysed.
#[derive(Debug, Error, PartialEq)]
pub enum AnalyzeError {
    /// The TOML does not parse or does not have the expected shape.
    #[error("task set: {0}")]
    Toml(String),
    /// A costs line is not a `tagwire perf costs` record.
    #[error("costs line {line}: {why}")]
    Costs {
        /// 1-based line number.
        line: usize,
        /// The parser's words.
        why: String,
    },
    /// Something named that does not exist, or a value out of range.
    #[error("{0}")]
    Invalid(String),
    /// A call the task set needs has no measured cost.
    #[error("no measured cost for {call} of {size} B ({place}): run `tagwire perf costs{remote}` with that size")]
    NoCost {
        /// The call.
        call: String,
        /// Its size.
        size: usize,
        /// `local` or `remote`.
        place: String,
        /// ` --remote` when a remote cost is missing.
        remote: &'static str,
    },
}

/// One measured call cost (a `tagwire perf costs` record; other fields
/// are ignored).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct CallCost {
    /// The call.
    pub call: String,
    /// Message size, bytes (0 for calls without one).
    pub size: usize,
    /// `local` or `remote`.
    #[serde(rename = "where")]
    pub place: String,
    /// The longest time measured, µs.
    pub max_us: f64,
    /// The 99.9th percentile, µs.
    pub p999_us: f64,
    /// The mean, µs (read for `stolen`).
    #[serde(default)]
    pub mean_us: Option<f64>,
}

/// Which figure of the measured costs stands for a call's worst case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CostFigure {
    /// The longest call measured (the default: a bound wants the worst).
    #[default]
    Max,
    /// The 99.9th percentile (a bound for all but one call in a thousand).
    P999,
}

/// The measured costs, by call, place and size.
#[derive(Debug, Clone, Default)]
pub struct Costs {
    calls: Vec<CallCost>,
    figure: CostFigure,
}

impl Costs {
    /// Reads `tagwire perf costs --json` output (one record per line;
    /// lines that are not `costs` records are refused).
    pub fn from_json_lines(text: &str, figure: CostFigure) -> Result<Costs, AnalyzeError> {
        let mut calls = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let c: CallCost = serde_json::from_str(line).map_err(|e| AnalyzeError::Costs {
                line: i + 1,
                why: e.to_string(),
            })?;
            if !(c.max_us.is_finite()
                && c.p999_us.is_finite()
                && c.max_us >= 0.0
                && c.p999_us >= 0.0)
            {
                return Err(AnalyzeError::Costs {
                    line: i + 1,
                    why: "a cost that is not a finite, non-negative number".into(),
                });
            }
            calls.push(c);
        }
        Ok(Costs { calls, figure })
    }

    /// A periodic task's release jitter, s: the latest a thread sleeping
    /// until an absolute time woke after it (the `wakeup` record, at the
    /// policy `perf costs --sched` ran at); 0 when the costs have none.
    pub fn wakeup(&self) -> f64 {
        self.of("wakeup", 0, false).unwrap_or(0.0)
    }

    /// The longest the tag tables were measured held (the `table_hold` and
    /// `state_hold` records, s; 0 without them).
    pub fn table_hold(&self) -> f64 {
        ["table_hold", "state_hold"]
            .iter()
            .flat_map(|call| [self.of(call, 0, false), self.of(call, 0, true)])
            .filter_map(Result::ok)
            .fold(0.0, f64::max)
    }

    /// The share of a CPU the platform (interrupts, the kernel's deferred
    /// work, the hypervisor) takes from the most urgent thread: the
    /// `stolen` records' mean per window over the window's length (the
    /// worst CPU's). 0 without records.
    ///
    /// A rate, not a worst case: the platform's rare stalls (a CPU taken
    /// for milliseconds, which a record's maximum shows) would make every
    /// short task's bound vacuous; like a late wake-up, a response they
    /// hold up passes its bound, and the records show how far.
    pub fn platform_share(&self) -> f64 {
        self.calls
            .iter()
            .filter(|c| c.call == "stolen" && c.size > 0)
            .filter_map(|c| Some(c.mean_us? / c.size as f64))
            .filter(|r| r.is_finite())
            .fold(0.0, f64::max)
            .min(1.0)
    }

    /// The costs given directly (for tests and tools).
    pub fn new(calls: Vec<CallCost>, figure: CostFigure) -> Costs {
        Costs { calls, figure }
    }

    /// The worst-case cost of `call` at `size` bytes, seconds: the record
    /// of the least measured size at or above `size` (for calls without
    /// a size, size 0).
    pub fn of(&self, call: &str, size: usize, remote: bool) -> Result<f64, AnalyzeError> {
        let place = if remote { "remote" } else { "local" };
        self.calls
            .iter()
            .filter(|c| c.call == call && c.place == place && c.size >= size)
            .min_by_key(|c| c.size)
            .map(|c| {
                let us = match self.figure {
                    CostFigure::Max => c.max_us,
                    CostFigure::P999 => c.p999_us,
                };
                us / 1e6
            })
            .ok_or_else(|| AnalyzeError::NoCost {
                call: call.into(),
                size,
                place: place.into(),
                remote: if remote { " --remote" } else { "" },
            })
    }
}

/// One task's result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskBound {
    /// `node/task`.
    pub task: String,
    /// Its priority.
    pub priority: u32,
    /// Its period (or its messages' period), s.
    pub period: f64,
    /// Its cost per release with its calls, s.
    pub cost: f64,
    /// Its blocking term, s.
    pub blocking: f64,
    /// What the platform takes within its response time
    /// ([`Costs::platform_share`] of it), s.
    pub platform: f64,
    /// Worst-case response time, s (`None`: it passes the deadline).
    pub response: Option<f64>,
    /// When it passes its deadline: by at least this much, s.
    pub overrun: Option<f64>,
    /// Its deadline, s.
    pub deadline: f64,
    /// Whether `response <= deadline`.
    pub schedulable: bool,
}

/// One flow's result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowBound {
    /// The flow.
    pub flow: String,
    /// Its end-to-end bound, s (`None` if a task on it is unschedulable).
    pub bound: Option<f64>,
    /// Its deadline, if it has one, s.
    pub deadline: Option<f64>,
    /// Whether the bound meets the deadline (true without one).
    pub met: bool,
    /// The bound's parts, in order: (what, seconds).
    pub parts: Vec<(String, f64)>,
}

/// The whole analysis.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Analysis {
    /// Every task, node by node, most urgent first.
    pub tasks: Vec<TaskBound>,
    /// Every flow.
    pub flows: Vec<FlowBound>,
}

impl Analysis {
    /// Whether every task and flow meets its deadline.
    pub fn ok(&self) -> bool {
        self.tasks.iter().all(|t| t.schedulable) && self.flows.iter().all(|f| f.met)
    }
}

/// The least fixed point of `R = c + b + ρR + Σ ⌈(R + J_j) / T_j⌉ C_j`
/// over `hp` (period `T_j`, cost `C_j`, release jitter `J_j`), `ρ` the
/// platform's share of the CPU (`share`, below 1); `Err(r)` once an
/// iterate `r` passes `limit` (the response time is at least `r`).
pub fn response_time(
    c: f64,
    b: f64,
    hp: &[(f64, f64, f64)],
    share: f64,
    limit: f64,
) -> Result<f64, f64> {
    // (With the preemptions' count fixed, `R = (c + b + Σ) / (1 - ρ)`
    // solves the rest at once.)
    let keep = 1.0 - share.clamp(0.0, 0.99);
    let mut r = (c + b) / keep;
    for _ in 0..100_000 {
        if r > limit {
            return Err(r);
        }
        let next = (c
            + b
            + hp.iter()
                .map(|(t, cj, j)| ((r + j) / t).ceil() * cj)
                .sum::<f64>())
            / keep;
        // Equal within rounding: the fixed point.
        if (next - r).abs() <= 1e-12 * next.max(1.0) {
            return if next <= limit { Ok(next) } else { Err(next) };
        }
        r = next;
    }
    Err(r)
}

/// Analyses `set` with `costs`. Event-run tasks are released with the
/// jitter of their messages' arrival, which depends on their senders'
/// response times: the analysis repeats until no response time changes
/// (holistic analysis).
pub fn analyze(set: &TaskSet, costs: &Costs) -> Result<Analysis, AnalyzeError> {
    set.check()?;
    let mut period: HashMap<&str, f64> = HashMap::new();
    let mut cost: HashMap<&str, f64> = HashMap::new();
    for t in &set.task {
        cost.insert(&t.name, t.wcet + set.call_costs(t, costs)?);
        period.insert(&t.name, set.period_of(t)?);
    }
    let storm = if set.platform.table_changes > 0.0 {
        // A table change's worst cost: the costliest call that makes one
        // (remote when the set spans nodes: it waits for them).
        let remote = set.task.iter().any(|t| set.is_remote(t));
        let worst = ["create_tag", "publisher", "subscribe"]
            .iter()
            .map(|c| costs.of(c, 0, remote))
            .collect::<Result<Vec<f64>, _>>()?
            .into_iter()
            .fold(0.0, f64::max);
        Some((1.0 / set.platform.table_changes, worst, 0.0))
    } else {
        None
    };
    let mut order: Vec<&Task> = set.task.iter().collect();
    order.sort_by(|a, b| a.node.cmp(&b.node).then(b.priority.cmp(&a.priority)));
    let mut response: HashMap<&str, Option<f64>> = HashMap::new();
    let mut overrun: HashMap<&str, f64> = HashMap::new();
    let wakeup = costs.wakeup();
    let share = costs.platform_share();
    // Blocking: the tables' measured hold when they change while the set
    // runs (a call that reads them can wait that long), never below what
    // the set gives.
    let block = if set.platform.table_changes > 0.0 {
        set.platform.table_block.max(costs.table_hold())
    } else {
        set.platform.table_block
    };
    // Periodic tasks wake late by up to `wakeup`; event-run ones start
    // with their messages' arrival (updated as senders' responses are).
    let own_jitter = |t: &Task| if t.on.is_none() { wakeup } else { 0.0 };
    let mut jitter: HashMap<&str, f64> = set
        .task
        .iter()
        .map(|t| (t.name.as_str(), own_jitter(t)))
        .collect();
    for _ in 0..=set.task.len() + 1 {
        let mut next: HashMap<&str, Option<f64>> = HashMap::new();
        for t in &order {
            let deadline = t.deadline.unwrap_or(period[t.name.as_str()]);
            let mut hp: Vec<(f64, f64, f64)> = set
                .task
                .iter()
                .filter(|o| o.node == t.node && o.name != t.name && o.priority >= t.priority)
                .map(|o| {
                    let n = o.name.as_str();
                    (period[n], cost[n], jitter[n])
                })
                .collect();
            hp.extend(
                set.thread
                    .iter()
                    .filter(|o| o.node == t.node && o.priority >= t.priority)
                    .map(|o| (o.period, o.cost, o.jitter)),
            );
            hp.extend(storm);
            // A periodic task's response counts from its due release: its
            // own wake-up jitter comes first.
            let late = own_jitter(t);
            let r = response_time(cost[t.name.as_str()], block, &hp, share, deadline - late)
                .map(|w| w + late)
                .map_err(|w| w + late);
            if let Err(past) = r {
                overrun.insert(&t.name, past - deadline);
            } else {
                overrun.remove(t.name.as_str());
            }
            next.insert(&t.name, r.ok());
        }
        let settled = next == response;
        response = next;
        if settled {
            break;
        }
        for t in &set.task {
            // An unschedulable sender: its receivers' jitter is unbounded;
            // their own results stand as computed with the last known.
            if let Some(j) = set.jitter(t, &response, wakeup, costs) {
                jitter.insert(&t.name, j);
            }
        }
    }
    let tasks = order
        .iter()
        .map(|t| {
            let p = period[t.name.as_str()];
            let deadline = t.deadline.unwrap_or(p);
            let r = response[t.name.as_str()];
            TaskBound {
                task: format!("{}/{}", t.node, t.name),
                priority: t.priority,
                period: p,
                cost: cost[t.name.as_str()],
                blocking: block,
                // (Within the response less its own release jitter.)
                platform: r.map_or(0.0, |r| share * (r - own_jitter(t))),
                response: r,
                overrun: overrun.get(t.name.as_str()).copied(),
                deadline,
                schedulable: r.is_some_and(|r| r <= deadline),
            }
        })
        .collect();
    let mut flows = Vec::new();
    for f in &set.flow {
        flows.push(set.flow_bound(f, &period, &response, costs)?);
    }
    Ok(Analysis { tasks, flows })
}

/// The analysis as a table.
pub fn table(a: &Analysis) -> String {
    let ms = |s: f64| s * 1e3;
    let mut out = String::from(
        "task                         prio  period ms    cost ms  block ms  platf ms   response ms  deadline ms  ok\n\
         (a response of +X: past the deadline by at least X)\n",
    );
    for t in &a.tasks {
        out += &format!(
            "{:<28} {:>4} {:>10.3} {:>10.4} {:>9.4} {:>9.4} {:>13} {:>12.3}  {}\n",
            t.task,
            t.priority,
            ms(t.period),
            ms(t.cost),
            ms(t.blocking),
            ms(t.platform),
            t.response.map_or_else(
                || format!("+{:.4}", ms(t.overrun.unwrap_or(0.0))),
                |r| format!("{:.4}", ms(r))
            ),
            ms(t.deadline),
            if t.schedulable { "yes" } else { "NO" },
        );
    }
    if !a.flows.is_empty() {
        out += "\nflow                         bound ms  deadline ms  ok   parts (ms)\n";
        for f in &a.flows {
            let parts: Vec<String> = f
                .parts
                .iter()
                .map(|(w, s)| format!("{w} {:.3}", ms(*s)))
                .collect();
            out += &format!(
                "{:<28} {:>9} {:>12}  {:<4} {}\n",
                f.flow,
                f.bound
                    .map_or_else(|| "none".into(), |b| format!("{:.3}", ms(b))),
                f.deadline
                    .map_or_else(|| "-".into(), |d| format!("{:.3}", ms(d))),
                if f.met { "yes" } else { "NO" },
                parts.join(" + "),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;
