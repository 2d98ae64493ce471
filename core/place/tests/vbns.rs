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
//! * **busy sites**: the sites east of it have no CPU for proxies and the
//!   bound is loose; cost would put the proxy at CMU, the CPU caps move it
//!   to the first site with CPU (`Placement::displaced_by` says so).
//!
//! On a chain the bandwidth objective alone always pulls the proxy east
//! (towards the publisher), so thin links only ever forbid western sites;
//! the candidate table shows them rejected for it.
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

#[derive(Debug, Clone, Copy, PartialEq)]
enum Way {
    ThinLinks,
    DelayOnly,
    BusySites,
}

fn chain(k: usize, way: Way) -> Topology {
    let mut b = TopologyBuilder::new();
    for (i, s) in VBNS_SITES.iter().enumerate() {
        b.node(
            s,
            if way == Way::BusySites && i < k {
                0.0
            } else {
                0.5
            },
        );
    }
    let scaled = K / (T * N as f64);
    for (i, w) in VBNS_SITES.windows(2).enumerate() {
        let bw = if way == Way::ThinLinks && i >= k {
            scaled
        } else {
            OC12_BYTES_PER_S
        };
        b.link(w[0], w[1], bw);
    }
    let bound = if way == Way::BusySites {
        delay_at(0)
    } else {
        delay_at(k)
    };
    b.tag("/vbns/video", "cmu", T, K)
        .subscription("sd", "/vbns/video", "san-diego", N, bound);
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
    for way in [Way::ThinLinks, Way::DelayOnly, Way::BusySites] {
        let thin = way == Way::ThinLinks;
        let topo = chain(k, way);
        for solver in [Solver::Exhaustive, Solver::Milp] {
            for model in [CostModel::Unicast, CostModel::Shared] {
                let p = solve(&topo, solver, model);
                let what = format!("{site} {way:?} {solver:?} {model:?}");
                let a = p.assignment("sd").unwrap();
                assert_eq!(a.proxy, site, "{what}");
                assert_eq!((a.hops_pub, a.hops_sub), (k as u32, 6 - k as u32), "{what}");
                assert_eq!(a.delay, delay_at(k), "{what}");
                let f = 1.0 / T;
                assert_eq!(
                    p.bandwidth,
                    K * (k as f64 * f + (6 - k) as f64 * f / N as f64)
                );
                let delay_binds = p.binding.iter().any(
                    |l| matches!(l, Limit::DelayBound { subscription, .. } if subscription == "sd"),
                );
                assert_eq!(
                    delay_binds,
                    way != Way::BusySites || k == 0,
                    "{what}: {:?}",
                    p.binding
                );
                let full_links = p
                    .binding
                    .iter()
                    .filter(|l| matches!(l, Limit::Link { .. }))
                    .count();
                assert_eq!(full_links, if thin { 6 - k } else { 0 }, "{what}");
                // The bound, or CMU's missing CPU, keeps the proxy off CMU,
                // the cheapest site.
                let held: Vec<(&str, &str)> = p
                    .held_back_by
                    .iter()
                    .map(|h| (h.subscription.as_str(), h.node.as_str()))
                    .collect();
                let by_delay = k > 0 && way != Way::BusySites;
                let expected: &[(&str, &str)] = if by_delay { &[("sd", "cmu")] } else { &[] };
                assert_eq!(held, expected, "{what}");
                let displaced: Vec<&Limit> = p.displaced_by.iter().collect();
                if k > 0 && way == Way::BusySites {
                    assert!(
                        matches!(displaced.as_slice(), [Limit::NodeCpu { node, .. }] if node == "cmu"),
                        "{what}: {displaced:?}"
                    );
                } else {
                    assert!(displaced.is_empty(), "{what}: {displaced:?}");
                }
            }
        }
        // The candidate table says why the other sites lose: east of the
        // site the bound is missed, west of it (thin links) a link overflows.
        let table = &exhaustive::candidates(&topo, &Options::default())[0];
        for (j, row) in table.rows.iter().enumerate() {
            let expected = match j {
                j if j < k && way == Way::BusySites => "overloads",
                j if j < k => "misses",
                j if j > k && thin => "overloads",
                _ => "feasible",
            };
            let got = match row.verdict {
                Verdict::Feasible => "feasible",
                Verdict::MissesBound { .. } => "misses",
                Verdict::Overloads { .. } => "overloads",
            };
            assert_eq!(got, expected, "{site} {way:?}: candidate {}", row.node);
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
        let p = milp::solve(&chain(k, Way::ThinLinks), &Options::default()).unwrap();
        assert_eq!(p.assignment("sd").unwrap().proxy, *site);
    }
}
