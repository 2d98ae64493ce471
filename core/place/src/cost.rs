//! The two cost models, the objectives, and what a placement uses.
//!
//! A placement assigns every subscription a proxy node. What it uses is
//! built from two kinds of stream:
//!
//! * the **full-rate copy** of tag t from its publisher P to a proxy X:
//!   K·f bytes/s on every link of the path P→X, and c·f CPU at X (the proxy
//!   receives every message);
//! * the **scaled stream** of subscription s from its proxy X to its node S:
//!   K·f′ bytes/s on every link of X→S, and c·f′ CPU at X (it sends every
//!   n-th message).
//!
//! In the **unicast** model (the paper's) every subscription has its own
//! full-rate copy; in the **shared** model one full-rate copy per
//! (tag, proxy node) serves all the tag's subscriptions at that proxy. Two
//! proxies of one tag each get their own copy, even where their paths from
//! the publisher overlap (no multicast tree).

use serde::Serialize;

use crate::topology::{within, LinkId, NodeId, SubId, TagId, Topology};

/// How bandwidth and CPU are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CostModel {
    /// The paper's: one full-rate flow per subscription.
    #[default]
    Unicast,
    /// tagwire's delivery: one full-rate copy per (tag, proxy node).
    Shared,
}

/// What a placement minimises.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Bytes per second summed over links (the paper's TotalCost).
    #[default]
    Bandwidth,
    /// Proxy CPU summed over nodes, fractions of one CPU.
    Cpu,
    /// `bandwidth · bandwidth_total / bandwidth_reference + cpu · cpu_total`,
    /// where the reference is [`Topology::bandwidth_reference`] (every
    /// subscriber sent the full-rate stream from its publisher), so both
    /// terms are dimensionless.
    Weighted {
        /// Weight of the normalised bandwidth.
        bandwidth: f64,
        /// Weight of the CPU.
        cpu: f64,
    },
}

/// Solver options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Cost model.
    pub model: CostModel,
    /// Objective.
    pub objective: Objective,
    /// MILP only: all subscriptions of a tag share one proxy node (the
    /// problem the exhaustive search solves). The exhaustive search always
    /// behaves so.
    pub one_proxy_per_tag: bool,
    /// Exhaustive only: give up after this many search-tree nodes.
    pub search_limit: u64,
    /// MILP only: stop each program (see [`crate::milp`]: one per group of
    /// tags linked by capacity rows, per round of row generation, and the
    /// small per-tag programs that settle a tag apart from the rows) after
    /// this many seconds with the best placement found, then reported as
    /// not proven optimal. `None`: solve to optimality.
    pub time_limit: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            model: CostModel::Unicast,
            objective: Objective::Bandwidth,
            one_proxy_per_tag: false,
            search_limit: 10_000_000,
            time_limit: None,
        }
    }
}

/// What some streams use: bytes/s per link and CPU per node.
#[derive(Debug, Clone, Default)]
pub(crate) struct Usage {
    pub(crate) links: Vec<(LinkId, f64)>,
    pub(crate) cpu: Vec<(NodeId, f64)>,
    pub(crate) bandwidth: f64,
    pub(crate) cpu_total: f64,
}

impl Usage {
    fn add_stream(&mut self, topo: &Topology, from: NodeId, to: NodeId, bytes_per_s: f64) {
        for l in topo.path(from, to) {
            self.links.push((l, bytes_per_s));
            self.bandwidth += bytes_per_s;
        }
    }

    fn add_cpu(&mut self, node: NodeId, cpu: f64) {
        self.cpu.push((node, cpu));
        self.cpu_total += cpu;
    }

    /// The full-rate copy of `t` to a proxy at `x`.
    pub(crate) fn full(topo: &Topology, t: TagId, x: NodeId) -> Usage {
        let tag = topo.tag(t);
        let mut u = Usage::default();
        u.add_stream(topo, tag.publisher, x, tag.size * tag.rate());
        u.add_cpu(x, tag.cpu_per_msg * tag.rate());
        u
    }

    /// The scaled stream of `s` from a proxy at `x`.
    pub(crate) fn scaled(topo: &Topology, s: SubId, x: NodeId) -> Usage {
        let sub = topo.subscription(s);
        let tag = topo.tag(sub.tag);
        let rate = tag.rate() / sub.scale as f64;
        let mut u = Usage::default();
        u.add_stream(topo, x, sub.node, tag.size * rate);
        u.add_cpu(x, tag.cpu_per_msg * rate);
        u
    }

    /// Subscription `s` alone at `x` in the unicast model.
    pub(crate) fn unicast(topo: &Topology, s: SubId, x: NodeId) -> Usage {
        let mut u = Usage::full(topo, topo.subscription(s).tag, x);
        u.merge(Usage::scaled(topo, s, x));
        u
    }

    /// All subscriptions of `t` at one proxy `x`, in `model`.
    pub(crate) fn tag_at(topo: &Topology, model: CostModel, t: TagId, x: NodeId) -> Usage {
        let mut u = Usage::default();
        let mut any = false;
        for s in topo.subscriptions_of(t) {
            any = true;
            match model {
                CostModel::Unicast => u.merge(Usage::unicast(topo, s, x)),
                CostModel::Shared => u.merge(Usage::scaled(topo, s, x)),
            }
        }
        if any && model == CostModel::Shared {
            u.merge(Usage::full(topo, t, x));
        }
        u
    }

    pub(crate) fn merge(&mut self, o: Usage) {
        self.links.extend(o.links);
        self.cpu.extend(o.cpu);
        self.bandwidth += o.bandwidth;
        self.cpu_total += o.cpu_total;
    }
}

/// Turns bandwidth and CPU into the objective's value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Costing {
    objective: Objective,
    bandwidth_reference: f64,
}

impl Costing {
    pub(crate) fn new(topo: &Topology, objective: Objective) -> Costing {
        Costing {
            objective,
            bandwidth_reference: topo.bandwidth_reference(),
        }
    }

    pub(crate) fn value(&self, bandwidth: f64, cpu: f64) -> f64 {
        match self.objective {
            Objective::Bandwidth => bandwidth,
            Objective::Cpu => cpu,
            Objective::Weighted {
                bandwidth: wb,
                cpu: wc,
            } => wb * bandwidth / self.bandwidth_reference + wc * cpu,
        }
    }

    pub(crate) fn of(&self, u: &Usage) -> f64 {
        self.value(u.bandwidth, u.cpu_total)
    }

    /// A positive factor that brings objective values near 1 for the MILP.
    pub(crate) fn scale(&self, topo: &Topology) -> f64 {
        let cpu_reference: f64 = topo
            .subscriptions()
            .iter()
            .map(|s| {
                let t = topo.tag(s.tag);
                t.cpu_per_msg * t.rate() * (1.0 + 1.0 / s.scale as f64)
            })
            .sum();
        let s = match self.objective {
            Objective::Bandwidth => self.bandwidth_reference,
            Objective::Cpu => cpu_reference,
            Objective::Weighted { .. } => 1.0,
        };
        if s > 0.0 && s.is_finite() {
            s
        } else {
            1.0
        }
    }
}

/// Loads of a complete assignment (one proxy per subscription).
#[derive(Debug, Clone)]
pub(crate) struct Loads {
    pub(crate) link: Vec<f64>,
    pub(crate) cpu: Vec<f64>,
    pub(crate) bandwidth: f64,
    pub(crate) cpu_total: f64,
}

impl Loads {
    pub(crate) fn of(topo: &Topology, model: CostModel, assign: &[NodeId]) -> Loads {
        let mut total = Usage::default();
        let mut shared = Vec::new();
        for (i, &x) in assign.iter().enumerate() {
            let s = SubId(i);
            match model {
                CostModel::Unicast => total.merge(Usage::unicast(topo, s, x)),
                CostModel::Shared => {
                    total.merge(Usage::scaled(topo, s, x));
                    shared.push((topo.subscription(s).tag, x));
                }
            }
        }
        shared.sort_unstable();
        shared.dedup();
        for (t, x) in shared {
            total.merge(Usage::full(topo, t, x));
        }
        Loads::from_usage(topo, &total)
    }

    /// The loads of one usage.
    pub(crate) fn from_usage(topo: &Topology, total: &Usage) -> Loads {
        let mut link = vec![0.0; topo.links().len()];
        let mut cpu = vec![0.0; topo.nodes().len()];
        for (l, b) in &total.links {
            link[l.0] += b;
        }
        for (n, c) in &total.cpu {
            cpu[n.0] += c;
        }
        Loads {
            link,
            cpu,
            bandwidth: total.bandwidth,
            cpu_total: total.cpu_total,
        }
    }

    /// The capacities these loads exceed.
    pub(crate) fn overloads(&self, topo: &Topology) -> Vec<Limit> {
        self.limits(topo, |load, cap| !within(load, cap))
    }

    /// The capacities at 100% (zero slack).
    fn full(&self, topo: &Topology) -> Vec<Limit> {
        self.limits(topo, |load, cap| {
            cap.is_finite() && load > 0.0 && tight(load, cap)
        })
    }

    fn limits(&self, topo: &Topology, pick: impl Fn(f64, f64) -> bool) -> Vec<Limit> {
        let mut out = Vec::new();
        for (i, l) in topo.links().iter().enumerate() {
            if pick(self.link[i], l.bandwidth) {
                out.push(Limit::Link {
                    link: topo.link_name(LinkId(i)),
                    load: self.link[i],
                    capacity: l.bandwidth,
                });
            }
        }
        for (i, n) in topo.nodes().iter().enumerate() {
            if pick(self.cpu[i], n.cpu_capacity) {
                out.push(Limit::NodeCpu {
                    node: n.name.clone(),
                    load: self.cpu[i],
                    capacity: n.cpu_capacity,
                });
            }
        }
        out
    }
}

/// `a == b` up to a relative 1e-9.
fn tight(a: f64, b: f64) -> bool {
    within(a, b) && within(b, a)
}

/// A constraint of the placement problem, with its value in a placement.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Limit {
    /// The delay bound of a subscription.
    DelayBound {
        /// The subscription.
        subscription: String,
        /// Its end-to-end delay δ, seconds.
        delay: f64,
        /// Its bound D, seconds.
        bound: f64,
    },
    /// A link's bandwidth (both directions together).
    Link {
        /// `a-b`.
        link: String,
        /// Bytes per second over it.
        load: f64,
        /// Its capacity, bytes per second.
        capacity: f64,
    },
    /// A node's CPU for proxies.
    NodeCpu {
        /// The node.
        node: String,
        /// Proxy CPU on it, fraction of one CPU.
        load: f64,
        /// Its capacity.
        capacity: f64,
    },
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::DelayBound {
                subscription,
                delay,
                bound,
            } => write!(
                f,
                "delay bound of {subscription}: delay {} vs bound {}",
                seconds(*delay),
                seconds(*bound)
            ),
            Limit::Link {
                link,
                load,
                capacity,
            } => write!(
                f,
                "link {link} at {} ({load:.0} of {capacity:.0} B/s)",
                percent(*load, *capacity)
            ),
            Limit::NodeCpu {
                node,
                load,
                capacity,
            } => write!(
                f,
                "node {node} CPU at {} ({load:.4} of {capacity:.4} CPU)",
                percent(*load, *capacity)
            ),
        }
    }
}

fn percent(load: f64, capacity: f64) -> String {
    if capacity > 0.0 {
        format!("{:.0}%", 100.0 * load / capacity)
    } else {
        "over a zero capacity".into()
    }
}

/// `0.08 s` style, enough digits to tell 2T from 2T′.
pub fn seconds(s: f64) -> String {
    format!("{} s", trim(s))
}

fn trim(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.into()
    }
}

/// Where one subscription's proxy sits, and its delay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assignment {
    /// The subscription.
    pub subscription: String,
    /// Its tag.
    pub tag: String,
    /// Its node S.
    pub node: String,
    /// Its scale n.
    pub scale: u32,
    /// The proxy node X.
    pub proxy: String,
    /// hops(P, X).
    pub hops_pub: u32,
    /// hops(X, S).
    pub hops_sub: u32,
    /// δ = hops_pub·T + hops_sub·T′, seconds.
    pub delay: f64,
    /// The bound D, seconds.
    pub bound: f64,
}

/// Load and capacity of a link or node in a placement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Load {
    /// Link `a-b` or node name.
    pub name: String,
    /// Bytes/s (link) or CPU (node).
    pub load: f64,
    /// Capacity; `null` in JSON when unlimited.
    pub capacity: Option<f64>,
}

/// A solved placement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    /// "exhaustive" or "milp".
    pub solver: &'static str,
    /// The cost model.
    pub model: CostModel,
    /// The objective.
    pub objective: Objective,
    /// False only when a MILP time limit cut the search short.
    pub optimal: bool,
    /// One per subscription, in declaration order.
    pub assignments: Vec<Assignment>,
    /// Bytes per second summed over links.
    pub bandwidth: f64,
    /// Proxy CPU summed over nodes, fractions of one CPU.
    pub cpu: f64,
    /// The objective's value.
    pub cost: f64,
    /// Every link's load.
    pub links: Vec<Load>,
    /// Every node's proxy CPU.
    pub nodes: Vec<Load>,
    /// Constraints with zero slack in this placement: delay bounds met with
    /// equality, links and node CPUs at 100%.
    pub binding: Vec<Limit>,
    /// Capacities that moved the optimum: the cheapest placement that meets
    /// every delay bound but ignores capacities would overload these (with
    /// the loads it would put on them). Empty when capacities cost nothing.
    pub displaced_by: Vec<Limit>,
    /// The cost of that capacity-free placement, when it differs.
    pub unconstrained_cost: Option<f64>,
    /// Delay bounds that keep a proxy from a cheaper node (they may have
    /// slack: delays come in whole hops). Per subscription (per tag with one
    /// proxy per tag), the node that would lower the objective most if that
    /// subscription (tag) alone moved there, capacities aside, when its
    /// bound forbids it.
    pub held_back_by: Vec<HeldBack>,
}

/// A delay bound that keeps a proxy from a cheaper node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldBack {
    /// The subscription whose bound the cheaper node misses.
    pub subscription: String,
    /// The cheaper node.
    pub node: String,
    /// The subscription's delay with its proxy there, seconds.
    pub delay: f64,
    /// Its bound, seconds.
    pub bound: f64,
    /// The objective with the proxy moved there.
    pub cost: f64,
}

impl std::fmt::Display for HeldBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "delay bound of {} ({}) keeps its proxy off {} (delay there {}, objective {})",
            self.subscription,
            seconds(self.bound),
            self.node,
            seconds(self.delay),
            trim(self.cost)
        )
    }
}

impl Placement {
    /// The assignment of a subscription, by name.
    pub fn assignment(&self, subscription: &str) -> Option<&Assignment> {
        self.assignments
            .iter()
            .find(|a| a.subscription == subscription)
    }
}

/// Builds the report of an assignment. `unconstrained` is the capacity-free
/// optimum, if known.
pub(crate) fn placement(
    topo: &Topology,
    opts: &Options,
    solver: &'static str,
    optimal: bool,
    assign: &[NodeId],
    unconstrained: Option<&[NodeId]>,
) -> Placement {
    let one_proxy = opts.one_proxy_per_tag || solver == "exhaustive";
    let held_back_by = held_back(topo, opts, one_proxy, assign);
    let costing = Costing::new(topo, opts.objective);
    let loads = Loads::of(topo, opts.model, assign);
    let cost = costing.value(loads.bandwidth, loads.cpu_total);
    let mut assignments = Vec::with_capacity(assign.len());
    let mut binding = Vec::new();
    for (i, &x) in assign.iter().enumerate() {
        let s = SubId(i);
        let sub = topo.subscription(s);
        let tag = topo.tag(sub.tag);
        let delay = topo.delay(s, x);
        if tight(delay, sub.delay_bound) {
            binding.push(Limit::DelayBound {
                subscription: sub.name.clone(),
                delay,
                bound: sub.delay_bound,
            });
        }
        assignments.push(Assignment {
            subscription: sub.name.clone(),
            tag: tag.name.clone(),
            node: topo.node(sub.node).name.clone(),
            scale: sub.scale,
            proxy: topo.node(x).name.clone(),
            hops_pub: topo.hops(tag.publisher, x),
            hops_sub: topo.hops(x, sub.node),
            delay,
            bound: sub.delay_bound,
        });
    }
    binding.extend(loads.full(topo));
    let (mut displaced_by, mut unconstrained_cost) = (Vec::new(), None);
    if let Some(u) = unconstrained {
        let ul = Loads::of(topo, opts.model, u);
        let ucost = costing.value(ul.bandwidth, ul.cpu_total);
        if ucost < cost && !tight(ucost, cost) {
            displaced_by = ul.overloads(topo);
            unconstrained_cost = Some(ucost);
        }
    }
    let finite = |c: f64| c.is_finite().then_some(c);
    Placement {
        solver,
        model: opts.model,
        objective: opts.objective,
        optimal,
        assignments,
        bandwidth: loads.bandwidth,
        cpu: loads.cpu_total,
        cost,
        links: topo
            .links()
            .iter()
            .enumerate()
            .map(|(i, l)| Load {
                name: topo.link_name(LinkId(i)),
                load: loads.link[i],
                capacity: finite(l.bandwidth),
            })
            .collect(),
        nodes: topo
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, n)| Load {
                name: n.name.clone(),
                load: loads.cpu[i],
                capacity: finite(n.cpu_capacity),
            })
            .collect(),
        binding,
        displaced_by,
        unconstrained_cost,
        held_back_by,
    }
}

/// See [`Placement::held_back_by`]. Objectives are linear, so the change a
/// move makes is the difference of the moved streams' costs.
fn held_back(topo: &Topology, opts: &Options, one_proxy: bool, assign: &[NodeId]) -> Vec<HeldBack> {
    let costing = Costing::new(topo, opts.objective);
    let total = {
        let l = Loads::of(topo, opts.model, assign);
        costing.value(l.bandwidth, l.cpu_total)
    };
    let nodes = || (0..topo.nodes().len()).map(NodeId);
    // (subscription missing its bound, node, change of the objective)
    let mut out = Vec::new();
    let consider = |miss: SubId, x: NodeId, delta: f64, best: &mut Option<(SubId, NodeId, f64)>| {
        if delta < 0.0 && !tight(total + delta, total) && best.is_none_or(|b| delta < b.2) {
            *best = Some((miss, x, delta));
        }
    };
    if one_proxy {
        for ti in 0..topo.tags().len() {
            let t = TagId(ti);
            let subs: Vec<SubId> = topo.subscriptions_of(t).collect();
            let Some(&first) = subs.first() else { continue };
            let here = costing.of(&Usage::tag_at(topo, opts.model, t, assign[first.0]));
            let mut b = None;
            for x in nodes() {
                let Some(&miss) = subs.iter().find(|&&s| !topo.meets_bound(s, x)) else {
                    continue;
                };
                let delta = costing.of(&Usage::tag_at(topo, opts.model, t, x)) - here;
                consider(miss, x, delta, &mut b);
            }
            out.extend(b);
        }
    } else {
        for (i, &at) in assign.iter().enumerate() {
            let s = SubId(i);
            let t = topo.subscription(s).tag;
            // Shared model: is s the only user of its copy, and is a copy
            // already open at the other node?
            let alone_at = |x: NodeId| {
                !assign
                    .iter()
                    .enumerate()
                    .any(|(j, &y)| j != i && y == x && topo.subscription(SubId(j)).tag == t)
            };
            let cost_of = |x: NodeId| match opts.model {
                CostModel::Unicast => costing.of(&Usage::unicast(topo, s, x)),
                CostModel::Shared => {
                    let copy = if alone_at(x) {
                        costing.of(&Usage::full(topo, t, x))
                    } else {
                        0.0
                    };
                    costing.of(&Usage::scaled(topo, s, x)) + copy
                }
            };
            let here = cost_of(at);
            let mut b = None;
            for x in nodes().filter(|&x| !topo.meets_bound(s, x)) {
                consider(s, x, cost_of(x) - here, &mut b);
            }
            out.extend(b);
        }
    }
    out.into_iter()
        .map(|(s, x, delta)| HeldBack {
            subscription: topo.subscription(s).name.clone(),
            node: topo.node(x).name.clone(),
            delay: topo.delay(s, x),
            bound: topo.subscription(s).delay_bound,
            cost: total + delta,
        })
        .collect()
}
