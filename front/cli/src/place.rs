//! `tagwire place`: choose proxy nodes for a topology file (push-pull model),
//! with the exhaustive search of the paper's Appendix A or a MILP. The
//! library behind it is `tagwire-place`.

use std::path::PathBuf;

use anyhow::Context;
use tagwire_place::exhaustive::{self, CandidateTable, Verdict};
use tagwire_place::{
    seconds, CostModel, Objective, Options, PlaceError, Placement, Solver, Topology,
};

/// Arguments of `tagwire place`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The topology file (TOML: `[[node]]`, `[[link]]`, `[[tag]]`, `[[subscription]]`).
    topology: PathBuf,
    /// exhaustive: one proxy per tag, every node tried (the paper's
    /// Appendix A); milp: a mixed-integer program over all tags.
    #[arg(long, value_parser = ["exhaustive", "milp"], default_value = "milp")]
    solver: String,
    /// unicast: a full-rate flow per subscription (the paper's model);
    /// shared: one full-rate copy per tag and proxy node (tagwire's delivery).
    #[arg(long, value_parser = ["unicast", "shared"], default_value = "unicast")]
    model: String,
    /// What to minimise: bytes/s over links, proxy CPU, or both weighted.
    #[arg(long, value_parser = ["bandwidth", "cpu", "weighted"], default_value = "bandwidth")]
    cost: String,
    /// Weight of the normalised bandwidth in --cost weighted.
    #[arg(long, default_value_t = 1.0)]
    w_bw: f64,
    /// Weight of the CPU in --cost weighted.
    #[arg(long, default_value_t = 1.0)]
    w_cpu: f64,
    /// milp: all subscriptions of a tag share one proxy (what exhaustive does).
    #[arg(long)]
    one_proxy_per_tag: bool,
    /// milp: give up proving optimality after this many seconds.
    #[arg(long)]
    time_limit: Option<f64>,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.topology)
        .with_context(|| format!("reading {}", a.topology.display()))?;
    let topo = Topology::from_toml(&text).with_context(|| a.topology.display().to_string())?;
    let solver = match a.solver.as_str() {
        "exhaustive" => Solver::Exhaustive,
        _ => Solver::Milp,
    };
    let opts = Options {
        model: match a.model.as_str() {
            "shared" => CostModel::Shared,
            _ => CostModel::Unicast,
        },
        objective: match a.cost.as_str() {
            "cpu" => Objective::Cpu,
            "weighted" => Objective::Weighted {
                bandwidth: a.w_bw,
                cpu: a.w_cpu,
            },
            _ => Objective::Bandwidth,
        },
        one_proxy_per_tag: a.one_proxy_per_tag || solver == Solver::Exhaustive,
        time_limit: a.time_limit,
        ..Options::default()
    };
    let candidates = (solver == Solver::Exhaustive).then(|| exhaustive::candidates(&topo, &opts));
    let result = tagwire_place::solve(&topo, solver, &opts);
    if a.json {
        let mut out = serde_json::json!({
            "topology": a.topology.display().to_string(),
            "solver": a.solver,
            "model": opts.model,
            "objective": opts.objective,
            "one_proxy_per_tag": opts.one_proxy_per_tag,
        });
        if let Some(c) = &candidates {
            out["candidates"] = serde_json::to_value(c)?;
        }
        match &result {
            Ok(p) => out["placement"] = serde_json::to_value(p)?,
            Err(PlaceError::Infeasible(why)) => out["infeasible"] = serde_json::to_value(why)?,
            Err(e) => out["error"] = e.to_string().into(),
        }
        println!("{out}");
    } else {
        println!(
            "{}: nodes {}, links {}, tags {}, subscriptions {}",
            a.topology.display(),
            topo.nodes().len(),
            topo.links().len(),
            topo.tags().len(),
            topo.subscriptions().len()
        );
        println!(
            "solver {}{}, model {}, objective {}\n",
            a.solver,
            if opts.one_proxy_per_tag {
                " (one proxy per tag)"
            } else {
                " (a proxy per subscription)"
            },
            a.model,
            a.cost
        );
        let chosen = result.as_ref().ok();
        for t in candidates.iter().flatten() {
            print!("{}", candidate_table(t, chosen));
        }
        if let Ok(p) = &result {
            print!("{}", placement_table(p));
        }
    }
    result.map(|_| ()).map_err(Into::into)
}

/// The paper's per-tag table: δ of every subscription and the TotalCost
/// with each node as the tag's proxy.
fn candidate_table(t: &CandidateTable, chosen: Option<&Placement>) -> String {
    let mut s = format!(
        "tag {} (publisher {}): every node as its single proxy\n",
        t.tag, t.publisher
    );
    let mut head = format!("  {:<12}", "NODE");
    for (name, bound) in t.subscriptions.iter().zip(&t.bounds) {
        head += &format!(" {:>16}", format!("δ {name} ≤{}", trim(*bound)));
    }
    head += &format!(
        " {:>14} {:>10} {:>14}  VERDICT\n",
        "TOTALCOST B/s", "CPU", "OBJECTIVE"
    );
    s += &head;
    let chosen_node = chosen.and_then(|p| {
        p.assignments
            .iter()
            .find(|a| a.tag == t.tag)
            .map(|a| a.proxy.clone())
    });
    for r in &t.rows {
        let mut line = format!("  {:<12}", r.node);
        for d in &r.delays {
            line += &format!(" {:>16}", seconds(*d));
        }
        let verdict = match &r.verdict {
            Verdict::Feasible => "meets every bound".to_string(),
            Verdict::MissesBound { subscriptions } => {
                format!("misses the bound of {}", subscriptions.join(", "))
            }
            Verdict::Overloads { limits } => format!(
                "overloads {}",
                limits
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        let mark = if chosen_node.as_deref() == Some(r.node.as_str()) {
            "  <= chosen"
        } else {
            ""
        };
        line += &format!(
            " {:>14.0} {:>10} {:>14}  {verdict}{mark}\n",
            r.bandwidth,
            num(r.cpu),
            num(r.cost)
        );
        s += &line;
    }
    s + "\n"
}

fn placement_table(p: &Placement) -> String {
    let mut s = format!(
        "  {:<16} {:<16} {:<12} {:>3} {:<12} {:>5} {:>5} {:>12} {:>12}\n",
        "SUBSCRIPTION", "TAG", "NODE", "n", "PROXY", "P→X", "X→S", "DELAY", "BOUND"
    );
    for a in &p.assignments {
        s += &format!(
            "  {:<16} {:<16} {:<12} {:>3} {:<12} {:>5} {:>5} {:>12} {:>12}\n",
            a.subscription,
            a.tag,
            a.node,
            a.scale,
            a.proxy,
            a.hops_pub,
            a.hops_sub,
            seconds(a.delay),
            seconds(a.bound)
        );
    }
    s += &format!(
        "\ntotal: bandwidth {:.0} B/s over all links, proxy CPU {} (fractions of one CPU), objective {}{}\n",
        p.bandwidth,
        num(p.cpu),
        num(p.cost),
        if p.optimal {
            ""
        } else {
            " (time limit: best found, not proven optimal)"
        }
    );
    if p.binding.is_empty() {
        s += "binding: none (every bound and capacity has slack)\n";
    } else {
        s += "binding (zero slack):\n";
        for b in &p.binding {
            s += &format!("  {b}\n");
        }
    }
    if !p.held_back_by.is_empty() {
        s += "delay bounds that keep proxies from cheaper nodes:\n";
        for h in &p.held_back_by {
            s += &format!("  {h}\n");
        }
    }
    if !p.displaced_by.is_empty() {
        s += &format!(
            "capacities that moved the optimum (without them the objective would be {}, but that placement puts):\n",
            p.unconstrained_cost.map_or("?".into(), num)
        );
        for b in &p.displaced_by {
            s += &format!("  {b}\n");
        }
    }
    s
}

/// Six decimals without trailing zeros; scientific below 0.001.
fn num(x: f64) -> String {
    if x != 0.0 && x.abs() < 1e-3 {
        return format!("{x:.3e}");
    }
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn trim(x: f64) -> String {
    seconds(x).trim_end_matches(" s").to_string() + "s"
}
