//! Times the MILP on `tagwire perf place`'s hardest instance: 100 nodes,
//! 50 tags, 200 subscriptions, links five times thinner than the default
//! (capacities bind), shared cost model, a proxy per subscription.
//!
//! `cargo run --release -p tagwire-place --example thin_links [reps]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use tagwire_place::generate::{self, Params};
use tagwire_place::{milp, CostModel, Options};

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let mut p = Params::new(100, 50, 200, 1);
    p.bound_stretch = (1.0, 2.0);
    p.bandwidth = (2e6, 2e7);
    let topo = generate::random(&p).expect("valid parameters");
    let models = match std::env::args().nth(2).as_deref() {
        Some("shared") => vec![CostModel::Shared],
        Some("unicast") => vec![CostModel::Unicast],
        _ => vec![CostModel::Unicast, CostModel::Shared],
    };
    for model in models {
        let opts = Options {
            model,
            ..Options::default()
        };
        let mut times = Vec::new();
        let mut cost = 0.0;
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            let placement = milp::solve(&topo, &opts).expect("feasible");
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            assert!(placement.optimal);
            cost = placement.cost;
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{model:?}: median {:.1} ms [{:.1}-{:.1}], cost {cost:.0}",
            times[times.len() / 2],
            times[0],
            times[times.len() - 1]
        );
    }
}
