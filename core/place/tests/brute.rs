//! The MILP with a proxy per subscription against brute force: on random
//! small topologies (≤ 5 nodes, ≤ 3 tags, ≤ 5 subscriptions, thin links and
//! small CPUs so capacities often bind), every assignment of a proxy node
//! to each subscription is tried, its loads and cost computed here from the
//! public topology alone, and the cheapest one meeting every bound and
//! capacity must cost what the MILP's placement costs (or both find none).
//!
//! This guards the presolve in [`tagwire_place::milp`] (tags settled apart
//! from the rows, dominated assignments and nodes dropped, columns that
//! cannot fit a row dropped): a rule that dropped the only optimum would
//! show up as a dearer MILP placement, one that kept an infeasible column as
//! an overloaded placement or a cheaper one than brute force finds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{build, close, objective, Ranges};

use proptest::prelude::*;
use tagwire_place::{milp, CostModel, NodeId, Objective, Options, PlaceError, SubId, Topology};

/// Small topologies with thin links and small CPUs, so capacities often
/// bind (streams carry 1 kB/s to 100 kB/s).
fn spec() -> impl Strategy<Value = common::Spec> {
    let inf = f64::INFINITY;
    common::spec(Ranges {
        cpu: vec![0.02, 0.05, 0.2, inf, inf],
        bandwidth: vec![1e4, 2e4, 4e4, 8e4, inf],
        nodes: 1..=5,
        extra: 0..=2,
        tags: 1..=3,
        subs: 1..=5,
        stretch: 0.5..3.0,
    })
}

/// The objective of one assignment, or `None` if it misses a bound or
/// overloads a capacity (beyond a relative 1e-9, the library's tolerance).
fn evaluate(topo: &Topology, model: CostModel, obj: Objective, assign: &[usize]) -> Option<f64> {
    let mut link = vec![0.0; topo.links().len()];
    let mut cpu = vec![0.0; topo.nodes().len()];
    let mut stream = |from: usize, to: usize, bytes: f64, at: usize, load: f64| {
        for l in topo.path(NodeId(from), NodeId(to)) {
            link[l.0] += bytes;
        }
        cpu[at] += load;
    };
    let mut copies = std::collections::HashSet::new();
    for (i, &x) in assign.iter().enumerate() {
        let s = topo.subscription(SubId(i));
        if !topo.meets_bound(SubId(i), NodeId(x)) {
            return None;
        }
        let tag = topo.tag(s.tag);
        let (rate, scaled) = (tag.rate(), tag.rate() / f64::from(s.scale));
        stream(x, s.node.0, tag.size * scaled, x, tag.cpu_per_msg * scaled);
        let full = match model {
            CostModel::Unicast => true,
            CostModel::Shared => copies.insert((s.tag, x)),
        };
        if full {
            stream(
                tag.publisher.0,
                x,
                tag.size * rate,
                x,
                tag.cpu_per_msg * rate,
            );
        }
    }
    let within = |v: f64, cap: f64| v <= cap + 1e-9 * cap.abs().max(1e-12);
    let fits = link
        .iter()
        .zip(topo.links())
        .all(|(&v, l)| within(v, l.bandwidth))
        && cpu
            .iter()
            .zip(topo.nodes())
            .all(|(&v, n)| within(v, n.cpu_capacity));
    if !fits {
        return None;
    }
    let (bw, cpu): (f64, f64) = (link.iter().sum(), cpu.iter().sum());
    Some(match obj {
        Objective::Bandwidth => bw,
        Objective::Cpu => cpu,
        Objective::Weighted {
            bandwidth: wb,
            cpu: wc,
        } => wb * bw / topo.bandwidth_reference() + wc * cpu,
    })
}

/// The cheapest feasible assignment's cost, by trying them all.
fn brute_force(topo: &Topology, model: CostModel, obj: Objective) -> Option<f64> {
    let (n, k) = (topo.nodes().len(), topo.subscriptions().len());
    let mut assign = vec![0usize; k];
    let mut best: Option<f64> = None;
    loop {
        if let Some(c) = evaluate(topo, model, obj, &assign) {
            best = Some(best.map_or(c, |b: f64| b.min(c)));
        }
        // Next assignment (odometer).
        let mut i = 0;
        while i < k {
            assign[i] += 1;
            if assign[i] < n {
                break;
            }
            assign[i] = 0;
            i += 1;
        }
        if i == k {
            return best;
        }
    }
}

/// Compares on one instance; true if capacities moved the optimum.
fn compare(topo: &Topology, model: CostModel, obj: u8) -> Result<bool, TestCaseError> {
    let objective = objective(obj);
    let opts = Options {
        model,
        objective,
        ..Options::default()
    };
    let best = brute_force(topo, model, objective);
    match (best, milp::solve(topo, &opts)) {
        (Some(b), Ok(p)) => {
            prop_assert!(p.optimal);
            prop_assert!(
                close(b, p.cost),
                "{model:?} {objective:?}: brute force {b}, milp {}",
                p.cost
            );
            let assign: Vec<usize> = p
                .assignments
                .iter()
                .map(|a| topo.node_id(&a.proxy).unwrap().0)
                .collect();
            let own = evaluate(topo, model, objective, &assign);
            prop_assert!(
                own.is_some_and(|c| close(c, p.cost)),
                "{model:?} {objective:?}: the milp's placement evaluates to {own:?}, reported {}",
                p.cost
            );
            Ok(!p.displaced_by.is_empty())
        }
        (None, Err(PlaceError::Infeasible(_))) => Ok(false),
        (b, r) => Err(TestCaseError::fail(format!(
            "{model:?} {objective:?}: brute force {b:?}\nmilp {r:?}"
        ))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn milp_with_a_proxy_per_subscription_agrees_with_brute_force(s in spec(), obj in 0u8..3) {
        let topo = build(&s);
        for model in [CostModel::Unicast, CostModel::Shared] {
            compare(&topo, model, obj)?;
        }
    }
}

/// Guards the distribution above: capacities must move the optimum in a
/// good share of the instances, or the test would not exercise the
/// presolve under binding rows.
#[test]
fn random_instances_include_capacities_that_move_the_optimum() {
    let (moved, total) = common::moved_optima(spec(), 300, compare);
    assert!(
        moved * 20 >= total,
        "capacities moved {moved} of {total} optima"
    );
}
