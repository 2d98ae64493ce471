//! On random small topologies (≤ 6 nodes, ≤ 2 tags, ≤ 4 subscriptions, link
//! and CPU capacities from "none at all" to unlimited), the MILP restricted
//! to one proxy per tag and the exhaustive search find the same optimum
//! cost or both say infeasible, in both cost models and for every
//! objective. Every placement returned meets every bound and capacity, and
//! the unrestricted MILP (a proxy per subscription) is never dearer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{build, close, objective, Ranges};

use proptest::prelude::*;
use tagwire_place::{exhaustive, milp, CostModel, Limit, Options, PlaceError, Placement, Topology};

/// Small topologies, drawn so that capacities often matter (streams carry
/// 1 kB/s to 100 kB/s).
fn spec() -> impl Strategy<Value = common::Spec> {
    let inf = f64::INFINITY;
    common::spec(Ranges {
        cpu: vec![0.0, 0.1, 0.5, inf, inf, inf],
        bandwidth: vec![2e3, 2e4, 1e5, inf, inf],
        nodes: 1..=6,
        extra: 0..=3,
        tags: 1..=2,
        subs: 0..=4,
        stretch: 0.0..3.0,
    })
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
    let (moved, total) = common::moved_optima(spec(), 500, compare);
    assert!(
        moved * 100 >= total,
        "capacities moved {moved} of {total} optima"
    );
}
