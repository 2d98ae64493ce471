//! A task set (`tagwire_analyze::TaskSet`) run for real on tagwire nodes,
//! and what it did set beside what `tagwire analyze` bounds.
//!
//! `taskset-node` (src/main.rs) runs one node's tasks as threads at their
//! priorities and writes what it observed ([`Observed`]); the test
//! (tests/check.rs) runs the nodes in network namespaces under load and
//! compares ([`compare`]). This file holds what both share and nothing
//! that does I/O: the messages' stamps, the observations, the comparison.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use tagwire_analyze::{Analysis, Costs, TaskSet};

/// What a task's message carries for the measurement: when it was sent,
/// and for each flow source whose release reached it (directly or through
/// the tasks between), that release's due time. Times are
/// `CLOCK_MONOTONIC` nanoseconds, which every namespace of one machine
/// shares (on several machines they would need a synchronised clock).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamp {
    /// When the message was sent.
    pub sent_ns: u64,
    /// (source task's index in the set, its release's due time), the
    /// latest of each source.
    pub origins: Vec<(u8, u64)>,
}

/// Bytes of a stamp with `n` origins.
pub fn stamp_len(n: usize) -> usize {
    9 + 9 * n
}

impl Stamp {
    /// The stamp as the start of a payload of at least `size` bytes
    /// (zeros after it).
    pub fn encode(&self, size: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(size.max(stamp_len(self.origins.len())));
        b.extend_from_slice(&self.sent_ns.to_le_bytes());
        b.push(u8::try_from(self.origins.len()).unwrap_or(u8::MAX));
        for (s, t) in self.origins.iter().take(usize::from(u8::MAX)) {
            b.push(*s);
            b.extend_from_slice(&t.to_le_bytes());
        }
        if b.len() < size {
            b.resize(size, 0);
        }
        b
    }

    /// The stamp at the start of `payload`; `None` if it is not one.
    pub fn decode(payload: &[u8]) -> Option<Stamp> {
        let sent_ns = u64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
        let n = usize::from(*payload.get(8)?);
        let mut origins = Vec::with_capacity(n);
        for i in 0..n {
            let at = 9 + 9 * i;
            let s = *payload.get(at)?;
            let t = u64::from_le_bytes(payload.get(at + 1..at + 9)?.try_into().ok()?);
            origins.push((s, t));
        }
        Some(Stamp { sent_ns, origins })
    }
}

/// The latest release of each flow source a task has heard of.
#[derive(Debug, Clone, Default)]
pub struct Origins(HashMap<u8, u64>);

impl Origins {
    /// Takes in what a received message carries.
    pub fn merge(&mut self, s: &Stamp) {
        for &(src, t) in &s.origins {
            let e = self.0.entry(src).or_insert(t);
            *e = (*e).max(t);
        }
    }

    /// A release of source `src` itself, due at `t`.
    pub fn release(&mut self, src: u8, t: u64) {
        self.0.insert(src, t);
    }

    /// The latest release of `src` heard of.
    pub fn get(&self, src: u8) -> Option<u64> {
        self.0.get(&src).copied()
    }

    /// A stamp sent at `sent_ns` with every origin known.
    pub fn stamp(&self, sent_ns: u64) -> Stamp {
        let mut origins: Vec<(u8, u64)> = self.0.iter().map(|(s, t)| (*s, *t)).collect();
        origins.sort_unstable();
        Stamp { sent_ns, origins }
    }
}

/// One quantity's observations, µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    /// Observations.
    pub count: u64,
    /// The longest, µs.
    pub max_us: f64,
    /// Their sum, µs (the mean is `sum_us / count`).
    pub sum_us: f64,
    /// Every observation, µs, in order.
    #[serde(default)]
    pub samples_us: Vec<f64>,
}

impl Seen {
    /// Adds one observation of `ns` nanoseconds.
    pub fn add_ns(&mut self, ns: u64) {
        let us = ns as f64 / 1e3;
        self.count += 1;
        self.max_us = self.max_us.max(us);
        self.sum_us += us;
        self.samples_us.push(us);
    }

    /// Both sets of observations.
    pub fn merge(&mut self, o: &Seen) {
        self.count += o.count;
        self.max_us = self.max_us.max(o.max_us);
        self.sum_us += o.sum_us;
        self.samples_us.extend_from_slice(&o.samples_us);
    }

    /// The `q` quantile of the observations, µs (0 without any).
    pub fn quantile(&self, q: f64) -> f64 {
        let mut v = self.samples_us.clone();
        v.sort_by(f64::total_cmp);
        let i = ((v.len() as f64 - 1.0) * q.clamp(0.0, 1.0)).round() as usize;
        v.get(i).copied().unwrap_or(0.0)
    }

    /// Observations above `bound_us`.
    pub fn above(&self, bound_us: f64) -> u64 {
        self.samples_us.iter().filter(|s| **s > bound_us).count() as u64
    }

    /// The mean, µs (0 without observations).
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_us / self.count as f64
        }
    }
}

/// What one or more nodes observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// Per task: a periodic task's response from its due release to the
    /// end of its work; a task run by messages, from the sending of the
    /// message that released it to the end of its work.
    pub tasks: BTreeMap<String, Seen>,
    /// Per flow: from its first task's due release to the end of the work
    /// of its last task that first carried that release.
    pub flows: BTreeMap<String, Seen>,
    /// Per periodic task: how late it woke after its due release (a part
    /// of its response, shown apart).
    #[serde(default)]
    pub late: BTreeMap<String, Seen>,
    /// CPU time of the node process's threads that are not tasks, by
    /// thread name (`node/name`), ns: tagwire's, which a `[[thread]]` of
    /// the task set stands for.
    #[serde(default)]
    pub threads: BTreeMap<String, u64>,
}

impl Observed {
    /// Adds another node's observations.
    pub fn merge(&mut self, o: &Observed) {
        for (k, v) in &o.tasks {
            self.tasks.entry(k.clone()).or_default().merge(v);
        }
        for (k, v) in &o.flows {
            self.flows.entry(k.clone()).or_default().merge(v);
        }
        for (k, v) in &o.late {
            self.late.entry(k.clone()).or_default().merge(v);
        }
        for (k, v) in &o.threads {
            *self.threads.entry(k.clone()).or_default() += v;
        }
    }
}

/// One line of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// `task NAME` or `flow NAME`.
    pub what: String,
    /// Observations.
    pub count: u64,
    /// The longest observed, µs.
    pub observed_us: f64,
    /// The median observed, µs.
    pub p50_us: f64,
    /// The 99th percentile observed, µs.
    pub p99_us: f64,
    /// The bound, µs (`None`: the analysis has none: unschedulable).
    pub bound_us: Option<f64>,
    /// Observations above the bound.
    pub above: u64,
}

impl Row {
    /// `what`'s observations (none: never observed) beside `bound_us`.
    fn of(what: String, seen: Option<&Seen>, bound_us: Option<f64>) -> Row {
        let empty = Seen::default();
        let s = seen.unwrap_or(&empty);
        Row {
            what,
            count: s.count,
            observed_us: s.max_us,
            p50_us: s.quantile(0.5),
            p99_us: s.quantile(0.99),
            bound_us,
            above: bound_us.map_or(s.count, |b| s.above(b)),
        }
    }

    /// bound / observed (`None` without a bound or an observation).
    pub fn ratio(&self) -> Option<f64> {
        self.bound_us
            .filter(|_| self.observed_us > 0.0)
            .map(|b| b / self.observed_us)
    }

    /// Observed at most the bound, observed at all.
    pub fn within(&self) -> bool {
        self.count > 0 && self.bound_us.is_some_and(|b| self.observed_us <= b)
    }
}

/// Each task's and flow's longest observation beside its bound. A
/// periodic task's bound is its response time; a task run by messages is
/// observed from its message's sending, so its bound adds the network's
/// time (`TaskSet::network`) when a sender of that tag is on another node.
pub fn compare(set: &TaskSet, a: &Analysis, costs: &Costs, seen: &Observed) -> Vec<Row> {
    let mut rows = Vec::new();
    for t in &set.task {
        let key = format!("{}/{}", t.node, t.name);
        let response = a
            .tasks
            .iter()
            .find(|b| b.task == key)
            .and_then(|b| b.response);
        let net = t.on.as_ref().map_or(0.0, |tag| {
            let remote = set
                .task
                .iter()
                .any(|o| o.node != t.node && o.sends.iter().any(|s| &s.tag == tag));
            if remote {
                set.network(tag, costs)
            } else {
                0.0
            }
        });
        rows.push(Row::of(
            format!("task {}", t.name),
            seen.tasks.get(&t.name),
            response.map(|r| (r + net) * 1e6),
        ));
    }
    for f in &a.flows {
        rows.push(Row::of(
            format!("flow {}", f.flow),
            seen.flows.get(&f.flow),
            f.bound.map(|b| b * 1e6),
        ));
    }
    rows
}

/// The rows as a table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "what                           count    p50 us    p99 us    max us   bound us   bound/max   above bound\n",
    );
    for r in rows {
        out += &format!(
            "{:<30} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>10} {:>11} {:>13}\n",
            r.what,
            r.count,
            r.p50_us,
            r.p99_us,
            r.observed_us,
            r.bound_us
                .map_or_else(|| "none".into(), |b| format!("{b:.1}")),
            r.ratio().map_or_else(|| "-".into(), |x| format!("{x:.2}")),
            r.above,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_stamp_comes_back_as_it_went_and_garbage_is_refused() {
        let s = Stamp {
            sent_ns: 42,
            origins: vec![(0, 7), (3, u64::MAX)],
        };
        let b = s.encode(64);
        assert_eq!(b.len(), 64);
        assert_eq!(Stamp::decode(&b), Some(s.clone()));
        // Larger than the size asked: whole anyway.
        assert_eq!(s.encode(4).len(), stamp_len(2));
        assert_eq!(Stamp::decode(&[1, 2, 3]), None);
        let mut short = s.encode(0);
        short.truncate(stamp_len(2) - 1);
        assert_eq!(Stamp::decode(&short), None);
    }

    #[test]
    fn origins_keep_the_latest_release_of_each_source() {
        let mut o = Origins::default();
        o.merge(&Stamp {
            sent_ns: 0,
            origins: vec![(1, 10), (2, 5)],
        });
        o.merge(&Stamp {
            sent_ns: 0,
            origins: vec![(1, 8)],
        });
        o.release(0, 3);
        assert_eq!(o.stamp(9).origins, vec![(0, 3), (1, 10), (2, 5)]);
        assert_eq!(o.get(2), Some(5));
    }

    #[test]
    fn the_comparison_adds_the_network_to_a_remote_message_run_task() {
        let set = TaskSet::from_toml(
            r#"
            [platform]
            network = 0.001
            [[task]]
            name = "src"
            node = "a"
            priority = 2
            period = 0.01
            wcet = 0.001
            sends = [{ tag = "/x", size = 64 }]
            [[task]]
            name = "dst"
            node = "b"
            priority = 1
            on = "/x"
            wcet = 0.002
            receives = [{ tag = "/x", size = 64 }]
            [[flow]]
            name = "f"
            path = ["src", "dst"]
            "#,
        )
        .unwrap();
        // The calls cost nothing here.
        let free = |call: &str, place: &str| tagwire_analyze::CallCost {
            call: call.into(),
            size: 64,
            place: place.into(),
            max_us: 0.0,
            p999_us: 0.0,
            mean_us: None,
        };
        let costs = Costs::new(
            vec![free("send", "remote"), free("receive", "local")],
            tagwire_analyze::CostFigure::Max,
        );
        let a = tagwire_analyze::analyze(&set, &costs).unwrap();
        let mut seen = Observed::default();
        seen.tasks.entry("src".into()).or_default().add_ns(900_000);
        seen.tasks
            .entry("dst".into())
            .or_default()
            .add_ns(2_500_000);
        let rows = compare(&set, &a, &costs, &seen);
        assert_eq!(rows[0].bound_us, Some(1000.0));
        assert!(rows[0].within());
        // 2 ms of work + 1 ms of network.
        assert_eq!(rows[1].bound_us, Some(3000.0));
        assert!(rows[1].within());
        assert!((rows[1].ratio().unwrap() - 1.2).abs() < 1e-9);
        assert_eq!(rows[1].p50_us, 2500.0);
        // Never observed: not within.
        seen.tasks.clear();
        assert!(!compare(&set, &a, &costs, &seen)[0].within());
        assert!(table(&rows).contains("task dst"));
    }
}
