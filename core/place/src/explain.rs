//! Why a placement problem has no solution, in terms a user can act on.

use std::fmt;

use serde::Serialize;

use crate::cost::{seconds, Limit};
use crate::topology::{NodeId, SubId, TagId, Topology};

/// Why solving failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlaceError {
    /// No placement meets the constraints; the reasons say which.
    #[error("no feasible placement:\n{0}")]
    Infeasible(Infeasible),
    /// The exhaustive search visited its limit of search-tree nodes.
    #[error(
        "the exhaustive search gave up after {limit} search-tree nodes \
         (tags x candidate nodes is too large); use the MILP solver"
    )]
    SearchLimit {
        /// The limit ([`crate::Options::search_limit`]).
        limit: u64,
    },
    /// The MILP solver failed or returned an inconsistent answer.
    #[error("MILP solver: {0}")]
    Solver(String),
}

/// The reasons no placement exists (at least one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Infeasible {
    /// One entry per problem found.
    pub reasons: Vec<Reason>,
}

/// One reason a placement problem is infeasible.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// No node at all meets this subscription's delay bound.
    DelayBound {
        /// The subscription.
        subscription: String,
        /// Its tag.
        tag: String,
        /// The node giving the smallest delay.
        best_node: String,
        /// That delay, seconds.
        best_delay: f64,
        /// The bound, seconds.
        bound: f64,
    },
    /// One proxy per tag: every node misses the delay bound of at least one
    /// of the tag's subscriptions (each could be met on its own).
    NoCommonProxy {
        /// The tag.
        tag: String,
        /// The node that comes closest (smallest worst delay/bound ratio).
        best_node: String,
        /// The subscription that misses its bound worst there.
        subscription: String,
        /// Its delay there, seconds.
        delay: f64,
        /// Its bound, seconds.
        bound: f64,
        /// For every node, its worst miss.
        misses: Vec<Miss>,
    },
    /// Placements meeting every delay bound exist, but each overloads a link
    /// or a node's CPU. `overloads` are those of the cheapest of them.
    Capacity {
        /// What the cheapest delay-feasible placement overloads.
        overloads: Vec<Limit>,
    },
}

/// A candidate node's worst delay-bound miss.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Miss {
    /// The candidate node.
    pub node: String,
    /// The subscription that misses its bound worst there.
    pub subscription: String,
    /// Its delay, seconds.
    pub delay: f64,
    /// Its bound, seconds.
    pub bound: f64,
}

impl fmt::Display for Infeasible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reasons.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  {r}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::DelayBound {
                subscription,
                tag,
                best_node,
                best_delay,
                bound,
            } => write!(
                f,
                "subscription {subscription} (tag {tag}): no node meets its delay bound {}; \
                 the best is node {best_node} with delay {}",
                seconds(*bound),
                seconds(*best_delay)
            ),
            Reason::NoCommonProxy {
                tag,
                best_node,
                subscription,
                delay,
                bound,
                misses,
            } => {
                write!(
                    f,
                    "tag {tag}: no single proxy node meets the delay bounds of all its \
                     subscriptions; the closest is node {best_node}, where subscription \
                     {subscription} gets delay {} vs bound {}; per node:",
                    seconds(*delay),
                    seconds(*bound)
                )?;
                for m in misses {
                    write!(
                        f,
                        "\n    {}: {} delay {} > bound {}",
                        m.node,
                        m.subscription,
                        seconds(m.delay),
                        seconds(m.bound)
                    )?;
                }
                Ok(())
            }
            Reason::Capacity { overloads } => {
                write!(
                    f,
                    "every placement that meets the delay bounds overloads a link or a \
                     node's CPU; the cheapest of them would put"
                )?;
                for (i, o) in overloads.iter().enumerate() {
                    write!(f, "{} {o}", if i == 0 { "" } else { ";" })?;
                }
                Ok(())
            }
        }
    }
}

/// The delay-bound reasons of infeasibility, empty if every subscription
/// (and, with `one_proxy_per_tag`, every tag) has a node meeting its bounds.
pub(crate) fn delay_reasons(topo: &Topology, one_proxy_per_tag: bool) -> Vec<Reason> {
    let nodes = || (0..topo.nodes().len()).map(NodeId);
    let mut out = Vec::new();
    let mut unmet = vec![false; topo.subscriptions().len()];
    for (i, sub) in topo.subscriptions().iter().enumerate() {
        let s = SubId(i);
        if nodes().any(|x| topo.meets_bound(s, x)) {
            continue;
        }
        unmet[i] = true;
        // Lowest delay, lowest index on ties. There is at least one node.
        let best = nodes().min_by(|a, b| topo.delay(s, *a).total_cmp(&topo.delay(s, *b)));
        let Some(best) = best else { continue };
        out.push(Reason::DelayBound {
            subscription: sub.name.clone(),
            tag: topo.tag(sub.tag).name.clone(),
            best_node: topo.node(best).name.clone(),
            best_delay: topo.delay(s, best),
            bound: sub.delay_bound,
        });
    }
    if !one_proxy_per_tag {
        return out;
    }
    for (ti, tag) in topo.tags().iter().enumerate() {
        let t = TagId(ti);
        let subs: Vec<SubId> = topo.subscriptions_of(t).collect();
        if subs.is_empty() || subs.iter().any(|s| unmet[s.0]) {
            continue;
        }
        if nodes().any(|x| subs.iter().all(|&s| topo.meets_bound(s, x))) {
            continue;
        }
        // Per node, the subscription with the largest delay/bound ratio.
        let ratio = |s: SubId, x: NodeId| {
            let (d, b) = (topo.delay(s, x), topo.subscription(s).delay_bound);
            if b > 0.0 {
                d / b
            } else {
                f64::INFINITY
            }
        };
        let mut misses = Vec::new();
        let mut best: Option<(f64, usize)> = None;
        for x in nodes() {
            // The first (declaration order) of the worst.
            let Some(worst) =
                subs.iter()
                    .copied()
                    .reduce(|a, b| if ratio(b, x) > ratio(a, x) { b } else { a })
            else {
                continue;
            };
            let r = ratio(worst, x);
            if best.is_none_or(|(br, _)| r < br) {
                best = Some((r, misses.len()));
            }
            misses.push(Miss {
                node: topo.node(x).name.clone(),
                subscription: topo.subscription(worst).name.clone(),
                delay: topo.delay(worst, x),
                bound: topo.subscription(worst).delay_bound,
            });
        }
        let Some((_, b)) = best else { continue };
        let m = misses[b].clone();
        out.push(Reason::NoCommonProxy {
            tag: tag.name.clone(),
            best_node: m.node,
            subscription: m.subscription,
            delay: m.delay,
            bound: m.bound,
            misses,
        });
    }
    out
}
