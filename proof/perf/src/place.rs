//! `tagwire perf place`: how long the proxy-placement solvers take, like the
//! push-pull paper's Table 3 (solve time against publishers × subscribers
//! on the vBNS topology), extended to generated topologies of 10, 50 and
//! 100 nodes with proportional tags and subscriptions.
//!
//! Every instance is solved by three solvers in both cost models, with the
//! bandwidth objective:
//!
//! * `exhaustive`: the paper's Appendix A search (one proxy per tag);
//! * `milp-one-per-tag`: the MILP restricted to the same problem;
//! * `milp`: the MILP with a proxy per subscription.
//!
//! Each is timed `reps` times (wall clock around the library call: model
//! building, solving, and the report with its explanations); the median and
//! the spread are reported. Solvers are interleaved within a repetition so
//! drift in the machine's speed hits them alike. An infeasible instance or
//! an exhaustive search that reaches its limit is reported with its status,
//! not dropped: that is where a solver does not apply.

use std::time::Instant;

use serde::Serialize;
use tagwire_place::generate::{self, Params};
use tagwire_place::{CostModel, NodeId, Options, PlaceError, Solver, SubId, Topology};

/// One (instance, model, solver) measurement.
#[derive(Debug, Clone, Serialize)]
pub struct PlaceRecord {
    /// Always "place".
    pub bench: &'static str,
    /// Instance name, e.g. `vbns-1x5` or `generated-100`.
    pub instance: String,
    /// Nodes.
    pub nodes: usize,
    /// Links.
    pub links: usize,
    /// Tags (one publisher each).
    pub tags: usize,
    /// Subscriptions.
    pub subscriptions: usize,
    /// (subscription, node) pairs meeting the delay bound: the MILP's
    /// assignment variables.
    pub candidates: usize,
    /// `exhaustive`, `milp-one-per-tag` or `milp`.
    pub solver: &'static str,
    /// `unicast` or `shared`.
    pub model: &'static str,
    /// Median solve time over the repetitions, milliseconds.
    pub solve_ms: f64,
    /// Fastest repetition, milliseconds.
    pub solve_ms_min: f64,
    /// Slowest repetition, milliseconds.
    pub solve_ms_max: f64,
    /// Repetitions.
    pub reps: usize,
    /// `optimal`, `not-proven-optimal`, `infeasible`, `search-limit` or `error`.
    pub status: &'static str,
    /// The objective (bandwidth, bytes/s over all links); `null` without a
    /// placement.
    pub cost: Option<f64>,
    /// Subscriptions whose proxy is not at their publisher's node.
    pub moved_proxies: Option<usize>,
}

/// A named topology to solve.
pub struct Instance {
    /// Name in the records.
    pub name: String,
    /// The topology.
    pub topology: Topology,
}

/// The instances, up to `max_nodes` nodes: vBNS with 1 publisher and 1, 2,
/// 5, 10 subscribers; generated topologies of 10/50/100 nodes with
/// nodes/2 tags and 2·nodes subscriptions (seed 1), with delay bounds loose
/// enough for one proxy per tag (stretch 1-2, see [`Params::bound_stretch`]);
/// and two harder variants of the 100-node one: the generator's default
/// bounds (tight: one proxy per tag is mostly impossible) and links five
/// times thinner (capacities bind).
pub fn instances(max_nodes: usize) -> anyhow::Result<Vec<Instance>> {
    let mut out = Vec::new();
    for subs in [1, 2, 5, 10] {
        out.push(Instance {
            name: format!("vbns-1x{subs}"),
            topology: generate::vbns(1, subs)?,
        });
    }
    for nodes in [10, 50, 100] {
        if nodes > max_nodes {
            continue;
        }
        let mut p = Params::new(nodes, nodes / 2, 2 * nodes, 1);
        p.bound_stretch = (1.0, 2.0);
        out.push(Instance {
            name: format!("generated-{nodes}"),
            topology: generate::random(&p)?,
        });
        if nodes == 100 {
            out.push(Instance {
                name: "generated-100-tight-bounds".into(),
                topology: generate::random(&Params::new(nodes, nodes / 2, 2 * nodes, 1))?,
            });
            p.bandwidth = (2e6, 2e7);
            out.push(Instance {
                name: "generated-100-thin-links".into(),
                topology: generate::random(&p)?,
            });
        }
    }
    Ok(out)
}

const SOLVERS: [(&str, Solver, bool); 3] = [
    ("exhaustive", Solver::Exhaustive, true),
    ("milp-one-per-tag", Solver::Milp, true),
    ("milp", Solver::Milp, false),
];

/// Solves every instance with every solver and model, `reps` times;
/// `progress` gets a line per instance.
pub fn measure(
    max_nodes: usize,
    reps: usize,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<PlaceRecord>> {
    let reps = reps.max(1);
    let mut out = Vec::new();
    for inst in instances(max_nodes)? {
        progress(&inst.name);
        let topo = &inst.topology;
        let candidates = (0..topo.subscriptions().len())
            .map(|s| {
                (0..topo.nodes().len())
                    .filter(|&x| topo.meets_bound(SubId(s), NodeId(x)))
                    .count()
            })
            .sum();
        for (model_name, model) in [
            ("unicast", CostModel::Unicast),
            ("shared", CostModel::Shared),
        ] {
            // times[solver][rep]
            let mut times = vec![Vec::with_capacity(reps); SOLVERS.len()];
            let mut last = Vec::new();
            for _ in 0..reps {
                last.clear();
                for (i, &(_, solver, one)) in SOLVERS.iter().enumerate() {
                    let opts = Options {
                        model,
                        one_proxy_per_tag: one,
                        ..Options::default()
                    };
                    let t0 = Instant::now();
                    let r = tagwire_place::solve(topo, solver, &opts);
                    times[i].push(t0.elapsed().as_secs_f64() * 1e3);
                    last.push(r);
                }
            }
            for (i, &(name, _, _)) in SOLVERS.iter().enumerate() {
                let t = &mut times[i];
                t.sort_by(f64::total_cmp);
                let (status, cost, moved) = match &last[i] {
                    Ok(p) => (
                        if p.optimal {
                            "optimal"
                        } else {
                            "not-proven-optimal"
                        },
                        Some(p.cost),
                        Some(moved_proxies(topo, p)),
                    ),
                    Err(PlaceError::Infeasible(_)) => ("infeasible", None, None),
                    Err(PlaceError::SearchLimit { .. }) => ("search-limit", None, None),
                    Err(PlaceError::Solver(_)) => ("error", None, None),
                };
                out.push(PlaceRecord {
                    bench: "place",
                    instance: inst.name.clone(),
                    nodes: topo.nodes().len(),
                    links: topo.links().len(),
                    tags: topo.tags().len(),
                    subscriptions: topo.subscriptions().len(),
                    candidates,
                    solver: name,
                    model: model_name,
                    solve_ms: t[t.len() / 2],
                    solve_ms_min: t[0],
                    solve_ms_max: t[t.len() - 1],
                    reps,
                    status,
                    cost,
                    moved_proxies: moved,
                });
            }
        }
    }
    Ok(out)
}

fn moved_proxies(topo: &Topology, p: &tagwire_place::Placement) -> usize {
    p.assignments
        .iter()
        .zip(topo.subscriptions())
        .filter(|(a, s)| a.proxy != topo.node(topo.tag(s.tag).publisher).name)
        .count()
}

/// A readable table, one line per record.
pub fn table(records: &[PlaceRecord]) -> String {
    let reps = records.first().map_or(0, |r| r.reps);
    let mut s = format!(
        "Proxy placement solve time, ms: median [min-max] over {reps} repetitions; cost = bytes/s over all links\n\
         (exhaustive and milp-one-per-tag solve the same problem; milp gives each subscription its own proxy)\n",
    );
    s += &format!(
        "{:<28} {:>5} {:>5} {:>4} {:>5} {:>6}  {:<7} {:<16} {:>26}  {:<13} {:>14}\n",
        "instance",
        "nodes",
        "links",
        "tags",
        "subs",
        "cands",
        "model",
        "solver",
        "solve ms",
        "status",
        "cost B/s"
    );
    s += &"-".repeat(143);
    s += "\n";
    for r in records {
        s += &format!(
            "{:<28} {:>5} {:>5} {:>4} {:>5} {:>6}  {:<7} {:<16} {:>26}  {:<13} {:>14}\n",
            r.instance,
            r.nodes,
            r.links,
            r.tags,
            r.subscriptions,
            r.candidates,
            r.model,
            r.solver,
            format!(
                "{} [{}-{}]",
                ms(r.solve_ms),
                ms(r.solve_ms_min),
                ms(r.solve_ms_max)
            ),
            r.status,
            r.cost.map_or("-".into(), |c| format!("{c:.0}")),
        );
    }
    s
}

fn ms(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.0}")
    }
}
