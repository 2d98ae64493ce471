//! The push-pull paper's Appendix A algorithm: every tag gets a single proxy
//! node shared by all its subscriptions; try every node, keep those meeting
//! every delay bound, take the cheapest.
//!
//! Tags are independent in the paper. Here link and CPU capacities couple
//! them, so [`solve`] searches the product of the tags' candidate lists
//! depth-first, cheapest candidates first, pruning a branch as soon as it
//! overloads a capacity or cannot beat the best complete placement found
//! (its cost plus the cheapest candidate of every remaining tag). With
//! capacities that do not bind, the first leaf is optimal and the search is
//! linear in tags × nodes; in the worst case it is exponential, and it stops
//! at [`Options::search_limit`] search-tree nodes rather than run for ever.

use serde::Serialize;

use crate::cost::{placement, Costing, Limit, Loads, Options, Placement, Usage};
use crate::explain::{delay_reasons, Infeasible, PlaceError, Reason};
use crate::topology::{within, NodeId, SubId, TagId, Topology};

/// The paper's per-tag table: every node as the tag's single proxy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateTable {
    /// The tag.
    pub tag: String,
    /// Its publisher's node.
    pub publisher: String,
    /// Its subscriptions (the order of [`Candidate::delays`]).
    pub subscriptions: Vec<String>,
    /// Their delay bounds, seconds.
    pub bounds: Vec<f64>,
    /// One row per node, in declaration order.
    pub rows: Vec<Candidate>,
}

/// One node as a tag's proxy, the tag alone on the network.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The node.
    pub node: String,
    /// δ of each subscription, seconds.
    pub delays: Vec<f64>,
    /// Bytes per second over all links (the paper's TotalCost).
    pub bandwidth: f64,
    /// Proxy CPU, fractions of one CPU.
    pub cpu: f64,
    /// The objective's value.
    pub cost: f64,
    /// Whether the node can be the tag's proxy.
    pub verdict: Verdict,
}

/// Whether a candidate is admissible on its own.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// Meets every bound and fits the capacities (with this tag alone).
    Feasible,
    /// Misses the delay bound of these subscriptions.
    MissesBound {
        /// The subscriptions.
        subscriptions: Vec<String>,
    },
    /// Meets the bounds but this tag alone overloads these.
    Overloads {
        /// The capacities exceeded.
        limits: Vec<Limit>,
    },
}

/// The per-tag candidate tables (tags without subscriptions are left out).
pub fn candidates(topo: &Topology, opts: &Options) -> Vec<CandidateTable> {
    let costing = Costing::new(topo, opts.objective);
    let mut out = Vec::new();
    for (ti, tag) in topo.tags().iter().enumerate() {
        let t = TagId(ti);
        let subs: Vec<SubId> = topo.subscriptions_of(t).collect();
        if subs.is_empty() {
            continue;
        }
        let rows = (0..topo.nodes().len())
            .map(NodeId)
            .map(|x| {
                let u = Usage::tag_at(topo, opts.model, t, x);
                let missed: Vec<String> = subs
                    .iter()
                    .filter(|&&s| !topo.meets_bound(s, x))
                    .map(|&s| topo.subscription(s).name.clone())
                    .collect();
                let verdict = if !missed.is_empty() {
                    Verdict::MissesBound {
                        subscriptions: missed,
                    }
                } else {
                    let over = alone(topo, opts, t, x).overloads(topo);
                    if over.is_empty() {
                        Verdict::Feasible
                    } else {
                        Verdict::Overloads { limits: over }
                    }
                };
                Candidate {
                    node: topo.node(x).name.clone(),
                    delays: subs.iter().map(|&s| topo.delay(s, x)).collect(),
                    bandwidth: u.bandwidth,
                    cpu: u.cpu_total,
                    cost: costing.of(&u),
                    verdict,
                }
            })
            .collect();
        out.push(CandidateTable {
            tag: tag.name.clone(),
            publisher: topo.node(tag.publisher).name.clone(),
            subscriptions: subs
                .iter()
                .map(|&s| topo.subscription(s).name.clone())
                .collect(),
            bounds: subs
                .iter()
                .map(|&s| topo.subscription(s).delay_bound)
                .collect(),
            rows,
        });
    }
    out
}

/// The cheapest placement with one proxy per tag, or why there is none.
pub fn solve(topo: &Topology, opts: &Options) -> Result<Placement, PlaceError> {
    let reasons = delay_reasons(topo, true);
    if !reasons.is_empty() {
        return Err(PlaceError::Infeasible(Infeasible { reasons }));
    }
    let costing = Costing::new(topo, opts.objective);
    // Per tag with subscriptions: the nodes meeting every bound, cheapest
    // first (node order on ties), with what each uses.
    let mut tags: Vec<TagChoices> = Vec::new();
    for ti in 0..topo.tags().len() {
        let t = TagId(ti);
        let subs: Vec<SubId> = topo.subscriptions_of(t).collect();
        if subs.is_empty() {
            continue;
        }
        let mut all: Vec<Choice> = (0..topo.nodes().len())
            .map(NodeId)
            .filter(|&x| subs.iter().all(|&s| topo.meets_bound(s, x)))
            .map(|x| {
                let usage = Usage::tag_at(topo, opts.model, t, x);
                let fits = alone(topo, opts, t, x).overloads(topo).is_empty();
                Choice {
                    node: x,
                    cost: costing.of(&usage),
                    usage,
                    fits,
                }
            })
            .collect();
        all.sort_by(|a, b| a.cost.total_cmp(&b.cost).then(a.node.cmp(&b.node)));
        mark_dominated(topo, &mut all);
        tags.push(TagChoices { subs, all });
    }
    // The capacity-free optimum: each tag's cheapest node.
    let mut unconstrained = vec![NodeId(0); topo.subscriptions().len()];
    for tc in &tags {
        if let Some(c) = tc.all.first() {
            for &s in &tc.subs {
                unconstrained[s.0] = c.node;
            }
        }
    }
    // Fail-first: tags with the fewest admissible candidates are decided first.
    tags.sort_by_key(|tc| tc.all.iter().filter(|c| c.fits).count());
    let mut search = Search {
        topo,
        tags: &tags,
        link: vec![0.0; topo.links().len()],
        cpu: vec![0.0; topo.nodes().len()],
        chosen: vec![0; tags.len()],
        best: None,
        visited: 0,
        limit: opts.search_limit,
    };
    search.dfs(0, 0.0)?;
    let Some((_, best)) = search.best else {
        let overloads = Loads::of(topo, opts.model, &unconstrained).overloads(topo);
        return Err(PlaceError::Infeasible(Infeasible {
            reasons: vec![Reason::Capacity { overloads }],
        }));
    };
    let mut assign = vec![NodeId(0); topo.subscriptions().len()];
    for (tc, &ci) in tags.iter().zip(&best) {
        for &s in &tc.subs {
            assign[s.0] = tc.all[ci].node;
        }
    }
    Ok(placement(
        topo,
        opts,
        "exhaustive",
        true,
        &assign,
        Some(&unconstrained),
    ))
}

/// The loads of tag `t` alone at `x`.
fn alone(topo: &Topology, opts: &Options, t: TagId, x: NodeId) -> Loads {
    Loads::from_usage(topo, &Usage::tag_at(topo, opts.model, t, x))
}

/// Marks as not to be searched (`fits = false`) every candidate that
/// another one dominates: no more cost, and no more load on any link or
/// node CPU with a finite capacity (the earlier one, in cost-then-node
/// order, on a tie). Replacing a dominated candidate by its dominator keeps
/// a placement feasible and no dearer, so the search needs only the others.
fn mark_dominated(topo: &Topology, all: &mut [Choice]) {
    let loads: Vec<Vec<(usize, f64)>> = all
        .iter()
        .map(|c| {
            let mut v: Vec<(usize, f64)> = c
                .usage
                .links
                .iter()
                .filter(|(l, _)| topo.link(*l).bandwidth.is_finite())
                .map(|(l, b)| (l.0, *b))
                .chain(
                    c.usage
                        .cpu
                        .iter()
                        .filter(|(n, _)| topo.node(*n).cpu_capacity.is_finite())
                        .map(|(n, u)| (topo.links().len() + n.0, *u)),
                )
                .collect();
            v.sort_by_key(|e| e.0);
            // Merge repeated resources.
            let mut merged: Vec<(usize, f64)> = Vec::with_capacity(v.len());
            for (r, x) in v {
                match merged.last_mut() {
                    Some(last) if last.0 == r => last.1 += x,
                    _ => merged.push((r, x)),
                }
            }
            merged
        })
        .collect();
    // `a` uses no more of anything than `b`.
    let le = |a: &[(usize, f64)], b: &[(usize, f64)]| {
        a.iter().all(|(r, x)| {
            b.binary_search_by_key(r, |e| e.0)
                .is_ok_and(|i| *x <= b[i].1)
        })
    };
    for i in 0..all.len() {
        if !all[i].fits {
            continue;
        }
        // Sorted by cost: only earlier candidates can dominate.
        let dominated = (0..i).any(|j| all[j].fits && le(&loads[j], &loads[i]));
        if dominated {
            all[i].fits = false;
        }
    }
}

struct Choice {
    node: NodeId,
    cost: f64,
    usage: Usage,
    /// Fits the capacities with this tag alone.
    fits: bool,
}

struct TagChoices {
    subs: Vec<SubId>,
    all: Vec<Choice>,
}

struct Search<'a> {
    topo: &'a Topology,
    tags: &'a [TagChoices],
    link: Vec<f64>,
    cpu: Vec<f64>,
    chosen: Vec<usize>,
    best: Option<(f64, Vec<usize>)>,
    visited: u64,
    limit: u64,
}

impl Search<'_> {
    fn dfs(&mut self, depth: usize, cost: f64) -> Result<(), PlaceError> {
        if depth == self.tags.len() {
            if self.best.as_ref().is_none_or(|(b, _)| cost < *b) {
                self.best = Some((cost, self.chosen.clone()));
            }
            return Ok(());
        }
        // Forward checking: the cheapest candidate of each later tag that
        // still fits beside what is placed; none means a dead end.
        let tags = self.tags;
        let mut rest = 0.0;
        for later in &tags[depth + 1..] {
            let cheapest = later.all.iter().find(|c| c.fits && self.fits_now(&c.usage));
            match cheapest {
                Some(c) => rest += c.cost,
                None => return Ok(()),
            }
        }
        for (ci, c) in tags[depth].all.iter().enumerate() {
            if !c.fits {
                continue;
            }
            self.visited += 1;
            if self.visited > self.limit {
                return Err(PlaceError::SearchLimit { limit: self.limit });
            }
            if let Some((b, _)) = &self.best {
                // Candidates are sorted by cost: no later one can do better.
                if cost + c.cost + rest >= *b - 1e-12 * b.abs() {
                    break;
                }
            }
            if self.apply(&c.usage, 1.0) {
                self.chosen[depth] = ci;
                let r = self.dfs(depth + 1, cost + c.cost);
                self.apply(&c.usage, -1.0);
                r?;
            } else {
                self.apply(&c.usage, -1.0);
            }
        }
        Ok(())
    }

    /// A quick necessary condition for adding `u`: no single stream of it
    /// overflows what is left of a capacity. (A usage listing a link twice
    /// is checked fully by [`Search::apply`].)
    fn fits_now(&self, u: &Usage) -> bool {
        u.links
            .iter()
            .all(|(l, b)| within(self.link[l.0] + b, self.topo.link(*l).bandwidth))
            && u.cpu
                .iter()
                .all(|(n, c)| within(self.cpu[n.0] + c, self.topo.node(*n).cpu_capacity))
    }

    /// Adds (sign 1) or removes (sign -1) a usage; true if every touched
    /// capacity still holds.
    fn apply(&mut self, u: &Usage, sign: f64) -> bool {
        let mut ok = true;
        for (l, b) in &u.links {
            self.link[l.0] += sign * b;
            ok &= within(self.link[l.0], self.topo.link(*l).bandwidth);
        }
        for (n, c) in &u.cpu {
            self.cpu[n.0] += sign * c;
            ok &= within(self.cpu[n.0], self.topo.node(*n).cpu_capacity);
        }
        ok
    }
}
