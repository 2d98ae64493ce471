//! What the random-topology property tests share: a small topology drawn
//! from ranges each test chooses, built through the public builder.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ops::RangeInclusive;

use proptest::prelude::*;
use tagwire_place::{NodeId, Objective, Topology, TopologyBuilder};

/// A small topology.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// CPU capacity per node.
    pub(crate) cpu: Vec<f64>,
    /// Node i+1 joins node `parent % (i+1)` over a link of this bandwidth.
    pub(crate) tree: Vec<(usize, f64)>,
    /// Extra links (repeats and self-links skipped).
    pub(crate) extra: Vec<(usize, usize, f64)>,
    /// (publisher, period, size).
    pub(crate) tags: Vec<(usize, f64, f64)>,
    /// (tag, node, scale, stretch): the bound is hops·T·(1 + stretch·(n−1)),
    /// or stretch·T on the publisher's node.
    pub(crate) subs: Vec<(usize, usize, i64, f64)>,
}

/// The ranges a test draws its topologies from.
pub(crate) struct Ranges {
    /// CPU capacities to pick from.
    pub(crate) cpu: Vec<f64>,
    /// Link bandwidths to pick from.
    pub(crate) bandwidth: Vec<f64>,
    /// Nodes (at least 1).
    pub(crate) nodes: RangeInclusive<usize>,
    /// Extra links.
    pub(crate) extra: RangeInclusive<usize>,
    /// Tags (at least 1).
    pub(crate) tags: RangeInclusive<usize>,
    /// Subscriptions.
    pub(crate) subs: RangeInclusive<usize>,
    /// The bound's stretch (see [`Spec::subs`]).
    pub(crate) stretch: std::ops::Range<f64>,
}

/// Topologies drawn from `r`.
pub(crate) fn spec(r: Ranges) -> impl Strategy<Value = Spec> {
    let Ranges {
        cpu,
        bandwidth,
        nodes,
        extra,
        tags,
        subs,
        stretch,
    } = r;
    let cpu = prop::sample::select(cpu);
    let bw = prop::sample::select(bandwidth);
    let max_nodes = *nodes.end();
    let max_tags = *tags.end();
    nodes.prop_flat_map(move |n| {
        (
            prop::collection::vec(cpu.clone(), n),
            prop::collection::vec((0usize..max_nodes, bw.clone()), n - 1),
            prop::collection::vec((0..n, 0..n, bw.clone()), extra.clone()),
            prop::collection::vec(
                (
                    0..n,
                    prop::sample::select(vec![0.01, 0.02, 0.05, 0.1]),
                    prop::sample::select(vec![100.0, 400.0, 1000.0]),
                ),
                tags.clone(),
            ),
            prop::collection::vec(
                (0usize..max_tags, 0..n, 1i64..=5, stretch.clone()),
                subs.clone(),
            ),
        )
            .prop_map(|(cpu, tree, extra, tags, subs)| Spec {
                cpu,
                tree,
                extra,
                tags,
                subs,
            })
    })
}

/// The topology `s` describes.
pub(crate) fn build(s: &Spec) -> Topology {
    let name = |i: usize| format!("n{i}");
    let mut b = TopologyBuilder::new();
    for (i, &c) in s.cpu.iter().enumerate() {
        b.node(&name(i), c);
    }
    let mut pairs = std::collections::HashSet::new();
    for (i, &(p, bw)) in s.tree.iter().enumerate() {
        let (child, parent) = (i + 1, p % (i + 1));
        pairs.insert((parent, child));
        b.link(&name(parent), &name(child), bw);
    }
    for &(a, c, bw) in &s.extra {
        if a != c && pairs.insert((a.min(c), a.max(c))) {
            b.link(&name(a), &name(c), bw);
        }
    }
    for (i, &(p, period, size)) in s.tags.iter().enumerate() {
        b.tag_with_cpu(&format!("/t{i}"), &name(p), period, size, 1e-3);
    }
    let bare = b.build().unwrap();
    for (i, &(t, node, scale, stretch)) in s.subs.iter().enumerate() {
        let t = t % s.tags.len();
        let (publisher, period, _) = s.tags[t];
        let hops = bare.hops(NodeId(publisher), NodeId(node)) as f64;
        let bound = if hops == 0.0 {
            stretch * period
        } else {
            hops * period * (1.0 + stretch * (scale - 1) as f64)
        };
        b.subscription(
            &format!("s{i}"),
            &format!("/t{t}"),
            &name(node),
            scale,
            bound,
        );
    }
    b.build().unwrap()
}

/// Relative equality for costs.
pub(crate) fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-12)
}

/// The objectives the property tests run: 0 bandwidth, 1 CPU, else
/// weighted.
pub(crate) fn objective(i: u8) -> Objective {
    match i {
        0 => Objective::Bandwidth,
        1 => Objective::Cpu,
        _ => Objective::Weighted {
            bandwidth: 1.0,
            cpu: 2.0,
        },
    }
}

/// Runs `compare` (true: the capacities moved the optimum) on `instances`
/// instances drawn from `spec` by proptest's deterministic runner, under
/// both cost models; returns (moved, compared).
pub(crate) fn moved_optima(
    spec: impl Strategy<Value = Spec>,
    instances: usize,
    compare: impl Fn(&Topology, tagwire_place::CostModel, u8) -> Result<bool, TestCaseError>,
) -> (usize, usize) {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut moved, mut total) = (0, 0);
    for _ in 0..instances {
        let topo = build(&spec.new_tree(&mut runner).unwrap().current());
        for model in [
            tagwire_place::CostModel::Unicast,
            tagwire_place::CostModel::Shared,
        ] {
            total += 1;
            moved += usize::from(compare(&topo, model, 0).unwrap());
        }
    }
    (moved, total)
}
