//! The push-pull paper's Appendix A example: a five-node star, node 5 the
//! hub, the publisher on node 1, subscribers on nodes 3 and 4 with the same
//! scale. Numbers are powers of two so every δ and cost is exact:
//! T = 1/8 s (f = 8/s), n = 4 (T′ = 1/2 s, f′ = 2/s), K = 1024 bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tagwire_place::exhaustive::{self, Verdict};
use tagwire_place::{
    milp, CostModel, Limit, Options, PlaceError, Reason, Topology, TopologyBuilder,
};

const T: f64 = 0.125;
const T2: f64 = 0.5; // T′ = 4T
const K: f64 = 1024.0;
const F: f64 = 8.0;
const F2: f64 = 2.0;

fn star(bound: f64) -> Topology {
    star_with(bound, bound)
}

/// The star with subscriber s3's delay bound `b3` and s4's `b4`.
fn star_with(b3: f64, b4: f64) -> Topology {
    let mut b = TopologyBuilder::new();
    for n in ["n1", "n2", "n3", "n4", "n5"] {
        b.node(n, 0.5);
    }
    for n in ["n1", "n2", "n3", "n4"] {
        b.link("n5", n, f64::INFINITY);
    }
    b.tag("/sensor", "n1", T, K)
        .subscription("s3", "/sensor", "n3", 4, b3)
        .subscription("s4", "/sensor", "n4", 4, b4);
    b.build().unwrap()
}

fn one_proxy(model: CostModel) -> Options {
    Options {
        model,
        one_proxy_per_tag: true,
        ..Options::default()
    }
}

#[test]
fn candidate_table_matches_the_appendix() {
    let topo = star(2.0 * T2);
    let tables = exhaustive::candidates(&topo, &Options::default());
    assert_eq!(tables.len(), 1);
    let t = &tables[0];
    assert_eq!(t.subscriptions, ["s3", "s4"]);
    let row = |n: &str| t.rows.iter().find(|r| r.node == n).unwrap();
    // Node 1 (the publisher): δ = 2T′ for both, TotalCost = 4·K·f′.
    assert_eq!(row("n1").delays, [2.0 * T2, 2.0 * T2]);
    assert_eq!(row("n1").bandwidth, 4.0 * K * F2);
    // Node 5 (the hub): δ = T + T′ for both, K(2f + 2f′).
    assert_eq!(row("n5").delays, [T + T2, T + T2]);
    assert_eq!(row("n5").bandwidth, K * (2.0 * F + 2.0 * F2));
    // Node 3: s3 gets 2T, s4 gets 2T + 2T′; K(4f + 2f′). Node 4 mirrors it.
    assert_eq!(row("n3").delays, [2.0 * T, 2.0 * T + 2.0 * T2]);
    assert_eq!(row("n3").bandwidth, K * (4.0 * F + 2.0 * F2));
    assert_eq!(row("n4").delays, [2.0 * T + 2.0 * T2, 2.0 * T]);
    assert_eq!(row("n4").bandwidth, K * (4.0 * F + 2.0 * F2));
    // Node 2: both 2T + 2T′, each its own 2-hop full-rate and scaled flow.
    assert_eq!(row("n2").delays, [2.0 * T + 2.0 * T2; 2]);
    assert_eq!(row("n2").bandwidth, K * (4.0 * F + 4.0 * F2));
    // With the bound 2T′ only nodes 1 and 5 qualify.
    for (n, ok) in [
        ("n1", true),
        ("n2", false),
        ("n3", false),
        ("n4", false),
        ("n5", true),
    ] {
        assert_eq!(row(n).verdict == Verdict::Feasible, ok, "{n}");
    }
    // The bandwidth objective is the TotalCost.
    assert_eq!(row("n5").cost, row("n5").bandwidth);
}

#[test]
fn optimum_is_the_publisher_node_with_bound_two_scaled_periods() {
    let topo = star(2.0 * T2);
    for model in [CostModel::Unicast, CostModel::Shared] {
        let ex = exhaustive::solve(&topo, &one_proxy(model)).unwrap();
        let mi = milp::solve(&topo, &one_proxy(model)).unwrap();
        let free = milp::solve(
            &topo,
            &Options {
                model,
                ..Options::default()
            },
        )
        .unwrap();
        for p in [&ex, &mi, &free] {
            assert_eq!(
                p.assignment("s3").unwrap().proxy,
                "n1",
                "{model:?} {}",
                p.solver
            );
            assert_eq!(p.assignment("s4").unwrap().proxy, "n1");
            assert_eq!(p.bandwidth, 4.0 * K * F2);
            assert_eq!(p.assignment("s3").unwrap().delay, 2.0 * T2);
            // δ = D exactly: both delay bounds bind.
            assert!(p.binding.iter().any(
                |l| matches!(l, Limit::DelayBound { subscription, .. } if subscription == "s3")
            ));
            assert!(p.displaced_by.is_empty());
        }
    }
}

#[test]
fn bound_two_periods_has_no_single_proxy_and_says_which_subscription() {
    let topo = star(2.0 * T);
    for result in [
        exhaustive::solve(&topo, &Options::default()),
        milp::solve(&topo, &one_proxy(CostModel::Unicast)),
    ] {
        let Err(PlaceError::Infeasible(why)) = result else {
            panic!("expected infeasible, got {result:?}");
        };
        assert_eq!(why.reasons.len(), 1);
        let Reason::NoCommonProxy {
            tag,
            best_node,
            subscription,
            delay,
            bound,
            misses,
        } = &why.reasons[0]
        else {
            panic!("expected NoCommonProxy, got {why:?}");
        };
        assert_eq!(tag, "/sensor");
        // The hub comes closest: T + T′ against 2T.
        assert_eq!(best_node, "n5");
        assert_eq!(subscription, "s3");
        assert_eq!((*delay, *bound), (T + T2, 2.0 * T));
        assert_eq!(misses.len(), 5);
        let text = PlaceError::Infeasible(why.clone()).to_string();
        assert!(text.contains("no single proxy node"), "{text}");
        assert!(
            text.contains("s3 gets delay 0.625 s vs bound 0.25 s"),
            "{text}"
        );
    }
}

#[test]
fn bound_two_periods_is_met_with_a_proxy_per_subscription() {
    // Without one proxy per tag each subscriber scales at its own node.
    let topo = star(2.0 * T);
    let p = milp::solve(&topo, &Options::default()).unwrap();
    assert_eq!(p.assignment("s3").unwrap().proxy, "n3");
    assert_eq!(p.assignment("s4").unwrap().proxy, "n4");
    assert_eq!(p.bandwidth, 2.0 * (2.0 * K * F));
}

#[test]
fn a_bound_no_node_meets_reports_the_best_delay() {
    let topo = star_with(T, 2.0 * T2);
    let err = milp::solve(&topo, &Options::default()).unwrap_err();
    let PlaceError::Infeasible(why) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        why.reasons,
        [Reason::DelayBound {
            subscription: "s3".into(),
            tag: "/sensor".into(),
            best_node: "n3".into(),
            best_delay: 2.0 * T,
            bound: T,
        }]
    );
    assert!(err.to_string().contains("s3"), "{err}");
}
