//! Capacities bind: a CPU cap that forbids the cheapest node moves the
//! proxy, the report says which capacity moved it, and a capacity met
//! exactly shows as binding. The star of the paper's Appendix A again
//! (bound 2T′, so nodes 1 and 5 meet it; node 1 is the cheaper), with a
//! proxy costing 1/1024 CPU-second per message so loads are exact:
//! unicast, two subscriptions, (f + f′)·2 = 20 messages/s = 20/1024 CPU,
//! one alone 10/1024 ≈ 0.0098 CPU. Node 1's cap, 0.005, fits neither.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tagwire_place::exhaustive::{self, Verdict};
use tagwire_place::{
    milp, CostModel, Limit, Objective, Options, PlaceError, Reason, Solver, Topology,
    TopologyBuilder,
};

const C: f64 = 1.0 / 1024.0;
const LOAD: f64 = 20.0 / 1024.0;

fn star(cpu_n1: f64, cpu_n5: f64, hub_link: f64) -> Topology {
    let mut b = TopologyBuilder::new();
    b.node("n1", cpu_n1);
    for n in ["n2", "n3", "n4"] {
        b.node(n, 0.5);
    }
    b.node("n5", cpu_n5);
    b.link("n5", "n1", hub_link);
    for n in ["n2", "n3", "n4"] {
        b.link("n5", n, f64::INFINITY);
    }
    b.tag_with_cpu("/sensor", "n1", 0.125, 1024.0, C)
        .subscription("s3", "/sensor", "n3", 4, 1.0)
        .subscription("s4", "/sensor", "n4", 4, 1.0);
    b.build().unwrap()
}

fn opts(one: bool) -> Options {
    Options {
        one_proxy_per_tag: one,
        ..Options::default()
    }
}

#[test]
fn a_cpu_cap_on_the_cheapest_node_moves_the_proxy_to_the_hub() {
    let topo = star(0.005, 0.5, f64::INFINITY);
    for (solver, one) in [
        (Solver::Exhaustive, true),
        (Solver::Milp, true),
        (Solver::Milp, false),
    ] {
        let p = tagwire_place::solve(&topo, solver, &opts(one)).unwrap();
        assert_eq!(p.assignment("s3").unwrap().proxy, "n5", "{solver:?}");
        assert_eq!(p.assignment("s4").unwrap().proxy, "n5");
        // K(2f + 2f′) instead of the unconstrained 4·K·f′.
        assert_eq!(p.bandwidth, 1024.0 * 20.0);
        assert_eq!(p.unconstrained_cost, Some(4.0 * 1024.0 * 2.0));
        assert_eq!(
            p.displaced_by,
            [Limit::NodeCpu {
                node: "n1".into(),
                load: LOAD,
                capacity: 0.005
            }],
            "{solver:?}"
        );
        let cpu_n5 = p.nodes.iter().find(|l| l.name == "n5").unwrap();
        assert_eq!(cpu_n5.load, LOAD);
    }
    let table = &exhaustive::candidates(&topo, &Options::default())[0];
    let n1 = table.rows.iter().find(|r| r.node == "n1").unwrap();
    assert!(matches!(&n1.verdict, Verdict::Overloads { limits } if limits.len() == 1));
}

#[test]
fn a_capacity_met_exactly_is_reported_as_binding() {
    // n5's CPU is exactly the proxy's load: zero slack.
    let topo = star(0.005, LOAD, f64::INFINITY);
    for solver in [Solver::Exhaustive, Solver::Milp] {
        let p = tagwire_place::solve(&topo, solver, &opts(true)).unwrap();
        assert_eq!(p.assignment("s3").unwrap().proxy, "n5");
        assert!(
            p.binding.contains(&Limit::NodeCpu {
                node: "n5".into(),
                load: LOAD,
                capacity: LOAD
            }),
            "{solver:?}: {:?}",
            p.binding
        );
    }
}

#[test]
fn a_thin_link_and_a_cpu_cap_together_leave_no_placement() {
    // n1 has no CPU to spare and the n1-n5 link cannot carry the full-rate
    // stream (8 kB/s) to the hub: nothing meets the bound within capacity.
    let topo = star(0.005, 0.5, 4096.0);
    for (solver, one) in [
        (Solver::Exhaustive, true),
        (Solver::Milp, true),
        (Solver::Milp, false),
    ] {
        let err = tagwire_place::solve(&topo, solver, &opts(one)).unwrap_err();
        let PlaceError::Infeasible(why) = &err else {
            panic!("{err:?}")
        };
        let [Reason::Capacity { overloads }] = why.reasons.as_slice() else {
            panic!("{why:?}")
        };
        // The cheapest delay-feasible placement is node 1, over its CPU.
        assert_eq!(
            overloads,
            &[Limit::NodeCpu {
                node: "n1".into(),
                load: LOAD,
                capacity: 0.005
            }]
        );
        assert!(err.to_string().contains("node n1 CPU at 391%"), "{err}");
    }
}

#[test]
fn the_cpu_objective_prefers_fewer_copies_in_the_shared_model() {
    // Shared model: one copy per proxy node. Two proxies (one per
    // subscriber) receive the full rate twice; one proxy receives it once.
    let topo = star(0.5, 0.5, f64::INFINITY);
    let opts = Options {
        model: CostModel::Shared,
        objective: Objective::Cpu,
        ..Options::default()
    };
    let p = milp::solve(&topo, &opts).unwrap();
    let (a, b) = (
        &p.assignment("s3").unwrap().proxy,
        &p.assignment("s4").unwrap().proxy,
    );
    assert_eq!(a, b);
    // f + 2f′ messages per second.
    assert_eq!(p.cpu, (8.0 + 2.0 * 2.0) * C);
}
