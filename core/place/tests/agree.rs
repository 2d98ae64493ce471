//! On random small topologies (≤ 6 nodes, ≤ 2 tags, ≤ 4 subscriptions, link
//! and CPU capacities from "none at all" to unlimited), the MILP restricted
//! to one proxy per tag and the exhaustive search find the same optimum
//! cost or both say infeasible, in both cost models and for every
//! objective. Every placement returned meets every bound and capacity, and
//! the unrestricted MILP (a proxy per subscription) is never dearer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use tagwire_place::{
    exhaustive, milp, CostModel, Limit, NodeId, Objective, Options, PlaceError, Placement,
    Topology, TopologyBuilder,
};

/// A small topology, drawn so that capacities often matter.
#[derive(Debug, Clone)]
struct Spec {
    /// CPU capacity per node.
    cpu: Vec<f64>,
    /// Node i+1 joins node `parent % (i+1)` over a link of this bandwidth.
    tree: Vec<(usize, f64)>,
    /// Extra links (repeats and self-links skipped).
    extra: Vec<(usize, usize, f64)>,
    /// (publisher, period, size).
    tags: Vec<(usize, f64, f64)>,
    /// (tag, node, scale, stretch): the bound is hops·T·(1 + stretch·(n−1)),
    /// or stretch·T on the publisher's node.
    subs: Vec<(usize, usize, i64, f64)>,
}

fn spec() -> impl Strategy<Value = Spec> {
    let inf = f64::INFINITY;
    let cpu = prop::sample::select(vec![0.0, 0.1, 0.5, inf, inf, inf]);
    // Streams carry 1 kB/s to 100 kB/s.
    let bw = prop::sample::select(vec![2e3, 2e4, 1e5, inf, inf]);
    (1usize..=6).prop_flat_map(move |n| {
        (
            prop::collection::vec(cpu.clone(), n),
            prop::collection::vec((0usize..6, bw.clone()), n - 1),
            prop::collection::vec((0..n, 0..n, bw.clone()), 0..=3),
            prop::collection::vec(
                (
                    0..n,
                    prop::sample::select(vec![0.01, 0.02, 0.05, 0.1]),
                    prop::sample::select(vec![100.0, 400.0, 1000.0]),
                ),
                1..=2,
            ),
            prop::collection::vec((0usize..2, 0..n, 1i64..=5, 0.0f64..3.0), 0..=4),
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

fn build(s: &Spec) -> Topology {
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

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-12)
}

/// Every bound met, nothing overloaded, binding capacities at 100%.
fn check_valid(topo: &Topology, p: &Placement) {
    assert_eq!(p.assignments.len(), topo.subscriptions().len());
    for a in &p.assignments {
        assert!(a.delay <= a.bound * (1.0 + 1e-9), "{a:?}");
    }
    for l in p.links.iter().chain(&p.nodes) {
        if let Some(c) = l.capacity {
            assert!(l.load <= c * (1.0 + 1e-6), "{l:?}");
        }
    }
    for b in &p.binding {
        if let Limit::Link { load, capacity, .. } | Limit::NodeCpu { load, capacity, .. } = b {
            assert!((load - capacity).abs() <= 1e-6 * capacity);
        }
    }
    for h in &p.held_back_by {
        assert!(h.delay > h.bound && h.cost < p.cost, "{h:?} vs {}", p.cost);
    }
    if let Some(u) = p.unconstrained_cost {
        assert!(u < p.cost && !p.displaced_by.is_empty());
    }
}

fn objective(i: u8) -> Objective {
    match i {
        0 => Objective::Bandwidth,
        1 => Objective::Cpu,
        _ => Objective::Weighted {
            bandwidth: 1.0,
            cpu: 2.0,
        },
    }
}

/// Compares the solvers on one instance; true if capacities moved the
/// optimum (for the distribution guard below).
fn compare(topo: &Topology, model: CostModel, obj: u8) -> Result<bool, TestCaseError> {
    let opts = Options {
        model,
        objective: objective(obj),
        one_proxy_per_tag: true,
        ..Options::default()
    };
    let ex = exhaustive::solve(topo, &opts);
    let mi = milp::solve(topo, &opts);
    match (&ex, &mi) {
        (Ok(e), Ok(m)) => {
            prop_assert!(
                close(e.cost, m.cost),
                "{model:?}: exhaustive {} milp {}",
                e.cost,
                m.cost
            );
            check_valid(topo, e);
            check_valid(topo, m);
            // Lifting the one-proxy restriction can only help.
            let free = milp::solve(
                topo,
                &Options {
                    one_proxy_per_tag: false,
                    ..opts.clone()
                },
            )
            .unwrap();
            check_valid(topo, &free);
            prop_assert!(free.cost <= m.cost * (1.0 + 1e-6) + 1e-12);
            Ok(!e.displaced_by.is_empty())
        }
        (Err(PlaceError::Infeasible(_)), Err(PlaceError::Infeasible(_))) => Ok(false),
        _ => Err(TestCaseError::fail(format!(
            "{model:?}: exhaustive {ex:?}\nmilp {mi:?}"
        ))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn milp_with_one_proxy_per_tag_agrees_with_exhaustive_search(s in spec(), obj in 0u8..3) {
        let topo = build(&s);
        for model in [CostModel::Unicast, CostModel::Shared] {
            compare(&topo, model, obj)?;
        }
    }
}

/// Guards the distribution above: capacities must move the optimum in some
/// of the instances (20 of 1000 with proptest's deterministic runner when
/// written; a third of the others are infeasible, mostly for capacities),
/// or the agreement test would not exercise optimisation under them.
#[test]
fn random_instances_include_capacities_that_move_the_optimum() {
    let mut runner = TestRunner::deterministic();
    let strategy = spec();
    let (mut moved, mut total) = (0, 0);
    for _ in 0..500 {
        let topo = build(&strategy.new_tree(&mut runner).unwrap().current());
        for model in [CostModel::Unicast, CostModel::Shared] {
            total += 1;
            moved += usize::from(compare(&topo, model, 0).unwrap());
        }
    }
    assert!(
        moved * 100 >= total,
        "capacities moved {moved} of {total} optima"
    );
}
