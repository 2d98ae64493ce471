//! The task set: what runs where, how often, at which priority, and which
//! tags each task sends and receives; flows across them. Read from TOML:
//!
//! ```toml
//! [platform]
//! network = 0.0005       # s a message takes between two nodes (one way)
//! table_block = 0.0002   # s a table change holds the tag tables
//! table_changes = 0.0    # table changes per second during operation
//!
//! [[task]]
//! name = "ctl"
//! node = "a"
//! priority = 50          # higher is more urgent (SCHED_FIFO)
//! period = 0.01          # s; or `on = "/tag"`: runs on each message of it
//! wcet = 0.001           # s of its own computation per release
//! deadline = 0.01        # s, default its period
//! sends = [{ tag = "/cmd", size = 64 }]
//! receives = [{ tag = "/sensor", size = 64, every = 1 }]
//!
//! [[thread]]            # not run by the application: only preempts
//! name = "forwarder of /cmd"
//! node = "a"
//! priority = 55
//! period = 0.01
//! cost = 0.00005
//! jitter = 0.0           # s
//!
//! [[flow]]
//! name = "sensor to actuator"
//! path = ["sensor", "ctl", "actuator"]   # tasks; consecutive ones share a tag
//! deadline = 0.05
//! ```

use std::collections::HashMap;

use serde::Deserialize;

use crate::{AnalyzeError, Costs, FlowBound};

/// Platform parameters.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Seconds a message takes between two nodes, one way, at most.
    #[serde(default = "default_network")]
    pub network: f64,
    /// Seconds a table change may hold the tables a task's calls need.
    #[serde(default)]
    pub table_block: f64,
    /// Table changes per second while the task set runs.
    #[serde(default)]
    pub table_changes: f64,
}

fn default_network() -> f64 {
    0.0005
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            network: default_network(),
            table_block: 0.0,
            table_changes: 0.0,
        }
    }
}

/// A tag a task sends or receives.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TagUse {
    /// The tag.
    pub tag: String,
    /// Message size, bytes.
    #[serde(default = "default_size")]
    pub size: usize,
    /// Receives only: every n-th message (1: all).
    #[serde(default = "one")]
    pub every: u32,
}

fn default_size() -> usize {
    64
}

fn one() -> u32 {
    1
}

/// A task.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Its name (unique in the set).
    pub name: String,
    /// The node it runs on.
    pub node: String,
    /// Fixed priority; higher is more urgent.
    pub priority: u32,
    /// Period, s (a periodic task).
    #[serde(default)]
    pub period: Option<f64>,
    /// Or the tag whose messages release it.
    #[serde(default)]
    pub on: Option<String>,
    /// Worst-case execution time of its own code per release, s.
    pub wcet: f64,
    /// Deadline, s (default: its period).
    #[serde(default)]
    pub deadline: Option<f64>,
    /// What it sends, one message each per release.
    #[serde(default)]
    pub sends: Vec<TagUse>,
    /// What it receives, one message each per release.
    #[serde(default)]
    pub receives: Vec<TagUse>,
}

/// An end-to-end flow.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    /// Its name.
    pub name: String,
    /// Tasks in order; each sends a tag the next receives.
    pub path: Vec<String>,
    /// Its end-to-end deadline, s.
    #[serde(default)]
    pub deadline: Option<f64>,
}

/// A thread that is not the application's but preempts its tasks: one
/// of tagwire's (a forwarder or a delivery thread raised to a
/// subscription's policy, run by each message it carries) or the kernel's.
/// Only its interference is analysed.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Thread {
    /// What it is.
    pub name: String,
    /// The node it runs on.
    pub node: String,
    /// Its fixed priority.
    pub priority: u32,
    /// How often it runs, at most, s.
    pub period: f64,
    /// Its cost each time, s.
    pub cost: f64,
    /// How late after its period's start it may run, s.
    #[serde(default)]
    pub jitter: f64,
}

/// A task set.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct TaskSet {
    /// Platform parameters.
    #[serde(default)]
    pub platform: Platform,
    /// Tasks.
    #[serde(default)]
    pub task: Vec<Task>,
    /// Threads besides the tasks that preempt them.
    #[serde(default)]
    pub thread: Vec<Thread>,
    /// Flows.
    #[serde(default)]
    pub flow: Vec<Flow>,
}

fn invalid(s: impl Into<String>) -> AnalyzeError {
    AnalyzeError::Invalid(s.into())
}

impl TaskSet {
    /// Parses a task set.
    pub fn from_toml(text: &str) -> Result<TaskSet, AnalyzeError> {
        let set: TaskSet = toml::from_str(text).map_err(|e| AnalyzeError::Toml(e.to_string()))?;
        set.check()?;
        Ok(set)
    }

    /// Checks names, references and ranges.
    pub fn check(&self) -> Result<(), AnalyzeError> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        let p = &self.platform;
        if !(ok(p.network) && ok(p.table_block) && ok(p.table_changes)) {
            return Err(invalid("platform values are finite and not negative"));
        }
        for t in &self.thread {
            let ok = |v: f64| v.is_finite() && v >= 0.0;
            if !(t.period.is_finite() && t.period > 0.0 && ok(t.cost) && ok(t.jitter)) {
                return Err(invalid(format!(
                    "thread {}: a period above 0, a cost and a jitter not negative",
                    t.name
                )));
            }
        }
        let mut names = std::collections::HashSet::new();
        for t in &self.task {
            if !names.insert(t.name.as_str()) {
                return Err(invalid(format!("two tasks named {}", t.name)));
            }
            match (t.period, &t.on) {
                (Some(p), None) if p.is_finite() && p > 0.0 => {}
                (None, Some(tag)) => {
                    if !t.receives.iter().any(|r| &r.tag == tag) {
                        return Err(invalid(format!(
                            "task {} runs on {tag} but does not receive it",
                            t.name
                        )));
                    }
                }
                _ => {
                    return Err(invalid(format!(
                        "task {}: a period above 0 or `on` a tag, one of the two",
                        t.name
                    )))
                }
            }
            if !ok(t.wcet) || t.deadline.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
                return Err(invalid(format!("task {}: wcet and deadline", t.name)));
            }
            if t.receives.iter().any(|r| r.every == 0) {
                return Err(invalid(format!("task {}: every is at least 1", t.name)));
            }
        }
        for t in &self.task {
            for r in &t.receives {
                if self.senders(&r.tag).next().is_none() {
                    return Err(invalid(format!(
                        "task {} receives {}, which no task sends",
                        t.name, r.tag
                    )));
                }
            }
        }
        for f in &self.flow {
            if f.path.is_empty() {
                return Err(invalid(format!("flow {}: an empty path", f.name)));
            }
            for n in &f.path {
                if self.task(n).is_none() {
                    return Err(invalid(format!("flow {}: no task {n}", f.name)));
                }
            }
        }
        Ok(())
    }

    fn task(&self, name: &str) -> Option<&Task> {
        self.task.iter().find(|t| t.name == name)
    }

    fn senders<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a Task> + 'a {
        self.task
            .iter()
            .filter(move |t| t.sends.iter().any(|s| s.tag == tag))
    }

    fn receivers<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a Task> + 'a {
        self.task
            .iter()
            .filter(move |t| t.receives.iter().any(|s| s.tag == tag))
    }

    /// Whether any tag `t` sends has a receiver on another node.
    pub(crate) fn is_remote(&self, t: &Task) -> bool {
        t.sends
            .iter()
            .any(|s| self.receivers(&s.tag).any(|r| r.node != t.node))
    }

    /// The measured cost of `t`'s calls per release, s: a send per tag it
    /// sends (remote when a receiver of the tag is on another node) and a
    /// receive per tag it receives (a local read either way).
    pub(crate) fn call_costs(&self, t: &Task, costs: &Costs) -> Result<f64, AnalyzeError> {
        let mut c = 0.0;
        for s in &t.sends {
            let remote = self.receivers(&s.tag).any(|r| r.node != t.node);
            c += costs.of("send", s.size, remote)?;
        }
        for r in &t.receives {
            c += costs.of("receive", r.size, false)?;
        }
        Ok(c)
    }

    /// `t`'s period: its own, or for a task run by a tag's messages, the
    /// sender's period times the every-n-th it takes.
    pub(crate) fn period_of(&self, t: &Task) -> Result<f64, AnalyzeError> {
        let mut t = t;
        let mut factor = 1.0;
        for _ in 0..=self.task.len() {
            if let Some(p) = t.period {
                return Ok(p * factor);
            }
            let Some(tag) = &t.on else {
                break;
            };
            let every = t
                .receives
                .iter()
                .find(|r| &r.tag == tag)
                .map_or(1, |r| r.every);
            factor *= f64::from(every);
            // The fastest sender sets the messages' period.
            let sender = self
                .senders(tag)
                .min_by(|a, b| {
                    let pa = a.period.unwrap_or(f64::MAX);
                    let pb = b.period.unwrap_or(f64::MAX);
                    pa.total_cmp(&pb)
                })
                .ok_or_else(|| invalid(format!("no task sends {tag}")))?;
            t = sender;
        }
        Err(invalid(format!(
            "task {}: its `on` tags run in a circle",
            t.name
        )))
    }

    /// `t`'s release jitter: a periodic task's, its timer's wake-up
    /// (`wakeup`); a task run by a tag's messages, their latest arrival
    /// after their senders' releases.
    pub(crate) fn jitter(
        &self,
        t: &Task,
        response: &HashMap<&str, Option<f64>>,
        wakeup: f64,
        costs: &Costs,
    ) -> Option<f64> {
        let Some(tag) = &t.on else {
            return Some(wakeup);
        };
        let mut worst: f64 = 0.0;
        for s in self.senders(tag) {
            let r = (*response.get(s.name.as_str())?)?;
            let net = if s.node == t.node {
                0.0
            } else {
                self.network(tag, costs)
            };
            worst = worst.max(r + net);
        }
        Some(worst)
    }

    /// A flow's end-to-end bound.
    /// How long a message of `tag` takes between two nodes, s: measured
    /// (the costs' `deliver` record at the tag's largest size), else the
    /// platform's `network`.
    pub fn network(&self, tag: &str, costs: &Costs) -> f64 {
        let size = self
            .task
            .iter()
            .flat_map(|t| t.sends.iter().chain(&t.receives))
            .filter(|u| u.tag == tag)
            .map(|u| u.size)
            .max()
            .unwrap_or(0);
        costs
            .of("deliver", size, true)
            .unwrap_or(self.platform.network)
    }

    pub(crate) fn flow_bound(
        &self,
        f: &Flow,
        period: &HashMap<&str, f64>,
        response: &HashMap<&str, Option<f64>>,
        costs: &Costs,
    ) -> Result<FlowBound, AnalyzeError> {
        let mut parts: Vec<(String, f64)> = Vec::new();
        let mut schedulable = true;
        let r = |name: &str, schedulable: &mut bool| {
            let v = response.get(name).copied().flatten();
            *schedulable &= v.is_some();
            v.unwrap_or(0.0)
        };
        let first = &f.path[0];
        parts.push((format!("R({first})"), r(first, &mut schedulable)));
        for w in f.path.windows(2) {
            let (a, b) = (self.task(&w[0]), self.task(&w[1]));
            let (Some(a), Some(b)) = (a, b) else {
                return Err(invalid(format!("flow {}: no such task", f.name)));
            };
            let used = b
                .receives
                .iter()
                .find(|u| a.sends.iter().any(|s| s.tag == u.tag))
                .ok_or_else(|| {
                    invalid(format!(
                        "flow {}: {} sends no tag {} receives",
                        f.name, a.name, b.name
                    ))
                })?;
            if a.node != b.node {
                parts.push((format!("net({})", used.tag), self.network(&used.tag, costs)));
            }
            if used.every > 1 {
                let pa = period[a.name.as_str()];
                parts.push((
                    format!("every {}", used.every),
                    f64::from(used.every - 1) * pa,
                ));
            }
            // A task run by this tag's messages starts on arrival; any
            // other samples it at its next release, a period later at most.
            if b.on.as_deref() != Some(used.tag.as_str()) {
                parts.push((format!("sample({})", b.name), period[b.name.as_str()]));
            }
            parts.push((format!("R({})", b.name), r(&b.name, &mut schedulable)));
        }
        let bound = schedulable.then(|| parts.iter().map(|p| p.1).sum::<f64>());
        Ok(FlowBound {
            flow: f.name.clone(),
            bound,
            deadline: f.deadline,
            met: match (bound, f.deadline) {
                (None, _) => false,
                (Some(b), Some(d)) => b <= d,
                (Some(_), None) => true,
            },
            parts,
        })
    }
}
