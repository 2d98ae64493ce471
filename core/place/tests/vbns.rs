//! The paper's vBNS experiment: a chain of seven sites from CMU to San
//! Diego, the publisher at CMU, one subscriber at San Diego taking every 4th
//! sample. Each test puts the optimum proxy at one site in turn, two ways:
//!
//! * **thin links**: every link from the site westwards carries exactly the
//!   scaled stream (K·f′ bytes/s) and not the full-rate one, so the proxy
//!   cannot sit west of the site; the delay bound is the delay with the
//!   proxy at the site, so it cannot sit east of it either. The thin links
//!   run at 100% and the delay bound binds.
//! * **delay only**: links are unlimited and the bound is the same; cost
//!   pulls the proxy east, the bound pushes it west, and they meet at the
//!   site.
//!
//! Both solvers, both cost models (identical with one subscriber).
//! T = 1/16 s, T′ = 1/4 s, K = 1000 bytes: δ(k) = k·T + (6−k)·T′ is exact.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tagwire_place::exhaustive::{self, Verdict};
use tagwire_place::generate::{OC12_BYTES_PER_S, VBNS_SITES};
use tagwire_place::{
    milp, CostModel, Limit, Options, Placement, Solver, Topology, TopologyBuilder,
};

const T: f64 = 0.0625;
const N: i64 = 4;
const K: f64 = 1000.0;

fn delay_at(k: usize) -> f64 {
    k as f64 * T + (6 - k) as f64 * T * N as f64
}

fn chain(k: usize, thin: bool) -> Topology {
    let mut b = TopologyBuilder::new();
    for s in VBNS_SITES {
        b.node(s, 0.5);
    }
    let scaled = K / (T * N as f64);
    for (i, w) in VBNS_SITES.windows(2).enumerate() {
        let bw = if thin && i >= k {
            scaled
        } else {
            OC12_BYTES_PER_S
        };
        b.link(w[0], w[1], bw);
    }
    b.tag("/vbns/video", "cmu", T, K).subscription(
        "sd",
        "/vbns/video",
        "san-diego",
        N,
        delay_at(k),
    );
    b.build().unwrap()
}

fn solve(topo: &Topology, solver: Solver, model: CostModel) -> Placement {
    let opts = Options {
        model,
        one_proxy_per_tag: true,
        ..Options::default()
    };
    tagwire_place::solve(topo, solver, &opts).unwrap()
}

fn proxy_sits_at(k: usize) {
    let site = VBNS_SITES[k];
    for thin in [true, false] {
        let topo = chain(k, thin);
        for solver in [Solver::Exhaustive, Solver::Milp] {
            for model in [CostModel::Unicast, CostModel::Shared] {
                let p = solve(&topo, solver, model);
                let what = format!("{site} thin={thin} {solver:?} {model:?}");
                let a = p.assignment("sd").unwrap();
                assert_eq!(a.proxy, site, "{what}");
                assert_eq!((a.hops_pub, a.hops_sub), (k as u32, 6 - k as u32), "{what}");
                assert_eq!(a.delay, delay_at(k), "{what}");
                let f = 1.0 / T;
                assert_eq!(
                    p.bandwidth,
                    K * (k as f64 * f + (6 - k) as f64 * f / N as f64)
                );
                assert!(
                    p.binding
                        .iter()
                        .any(|l| matches!(l, Limit::DelayBound { subscription, .. } if subscription == "sd")),
                    "{what}: {:?}",
                    p.binding
                );
                let full_links = p
                    .binding
                    .iter()
                    .filter(|l| matches!(l, Limit::Link { .. }))
                    .count();
                assert_eq!(full_links, if thin { 6 - k } else { 0 }, "{what}");
            }
        }
        // The candidate table says why the other sites lose: east of the
        // site the bound is missed, west of it (thin links) a link overflows.
        let table = &exhaustive::candidates(&topo, &Options::default())[0];
        for (j, row) in table.rows.iter().enumerate() {
            let expected = match j {
                j if j < k => "misses",
                j if j > k && thin => "overloads",
                _ => "feasible",
            };
            let got = match row.verdict {
                Verdict::Feasible => "feasible",
                Verdict::MissesBound { .. } => "misses",
                Verdict::Overloads { .. } => "overloads",
            };
            assert_eq!(got, expected, "{site} thin={thin}: candidate {}", row.node);
        }
    }
}

#[test]
fn proxy_sits_at_cmu() {
    proxy_sits_at(0);
}

#[test]
fn proxy_sits_at_pittsburgh() {
    proxy_sits_at(1);
}

#[test]
fn proxy_sits_at_cleveland() {
    proxy_sits_at(2);
}

#[test]
fn proxy_sits_at_chicago() {
    proxy_sits_at(3);
}

#[test]
fn proxy_sits_at_denver() {
    proxy_sits_at(4);
}

#[test]
fn proxy_sits_at_los_angeles() {
    proxy_sits_at(5);
}

#[test]
fn proxy_sits_at_san_diego() {
    proxy_sits_at(6);
}

#[test]
fn a_proxy_per_subscription_gives_the_same_answer_on_a_chain() {
    for (k, site) in VBNS_SITES.iter().enumerate() {
        let p = milp::solve(&chain(k, true), &Options::default()).unwrap();
        assert_eq!(p.assignment("sd").unwrap().proxy, *site);
    }
}
