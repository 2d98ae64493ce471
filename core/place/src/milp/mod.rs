//! Proxy placement as a mixed-integer linear program over all tags jointly.
//!
//! Variables (all binary):
//!
//! * `x[s,X]`: subscription s takes its scaled stream from a proxy at X.
//!   Only nodes X meeting s's delay bound get a variable, so the delay
//!   constraints hold by construction. `Σ_X x[s,X] = 1`.
//! * shared model: `y[t,X] ≥ x[s,X]` for every s of t: tag t sends a
//!   full-rate copy to X. It is charged once, whatever the number of
//!   subscriptions served there.
//! * `one_proxy_per_tag`: one `y[t,X]` per node X meeting the bounds of all
//!   of t's subscriptions, `Σ_X y[t,X] = 1`, and `x[s,X]` is `y[t,X]` itself.
//!   This is the problem the exhaustive search solves.
//!
//! Constraints: for every link, the bytes per second of all streams over it
//! (both directions) ≤ its bandwidth; for every node, the CPU of the proxies
//! on it ≤ its capacity. Rows are divided by their capacity and the
//! objective by a reference value, so the solver sees coefficients near 1.
//!
//! ## Solving it fast
//!
//! Capacity rows are added lazily (row generation): the program is first
//! solved without them, which is the capacity-free optimum (needed anyway to
//! report [`Placement::displaced_by`]); every row that solution violates is
//! added and the program solved again, until a solution violates none. That
//! solution is optimal: it is feasible, and optimal for a relaxation. Rows
//! that no assignment can violate (their worst case fits) are never
//! considered.
//!
//! Tags that share no active row are independent, so each group of tags
//! linked by rows is a program of its own. Before grouping, a tag whose
//! cheapest choice on its own can avoid every active row is settled alone
//! at that choice and links no rows (`Model::settle`): only the tags whose
//! cheap routes compete for a thin link stay coupled. Within a program,
//! before solving, these columns are dropped (each rule keeps some optimum,
//! argued at its function; `tests/brute.rs` checks the result against
//! brute force):
//!
//! * proxy nodes dominated for a whole tag by another node: no dearer and
//!   no heavier on any row for the copy and for every subscription
//!   (`Model::undominated`; without rows: no farther from the publisher and
//!   from every subscriber);
//! * a subscription's proxy at X when moving it to X′ and paying X′'s copy
//!   in full is no dearer and no heavier on any row
//!   (`Model::undominated_assignments`);
//! * columns that overload a row even when every other subscription takes
//!   its lightest choice on that row, copies they take along, and copies no
//!   assignment needs any more (`Model::fit`).
//!
//! On the thin-links instance of `tagwire perf place` (shared model, a
//! proxy per subscription; four link rows in the end) settling left 30 of
//! 50 tags coupled and took the solve from 1.7 s to about 1.4 s; the last
//! two rules then cut the final program's branch and bound from about 450
//! nodes and 16,000 pivots to 290 and 7,400, and the solve to about 0.6 s.
//! Most of that is the third rule's: the second alone changed nothing
//! measurable, and adds about 10% on top of the third.
//!
//! ## Solver choice
//!
//! `good_lp` with its pure-Rust `microlp` backend: no C/C++ toolchain, a few
//! seconds to build. HiGHS (`good_lp` feature `highs`) was measured as the
//! alternative on the same machine (2 cores): its C++ library took about
//! 8 minutes to build and needs cmake and libclang. On the generated
//! 100-node / 50-tag / 200-subscription instances (three seeds, delay bounds
//! loose enough that every node is a candidate, about 10,000 binaries) with
//! the formulation above, microlp solved each in 2-26 ms and HiGHS in
//! 12-210 ms; with links 5x thinner, so capacities bind, 3-86 ms vs
//! 13-369 ms, except one instance (shared model, a proxy per subscription)
//! where both needed 1.7 s (microlp: about 0.6 s since the presolve
//! above; HiGHS was not measured again). Before the row generation and the
//! decomposition, one program with every capacity row took microlp 1.4-2.2 s and HiGHS
//! 1.1-1.8 s on the loose instances: the formulation mattered, the backend
//! did not. `tagwire perf place` reports current numbers
//! (`bench/results/place.txt`). Whatever the backend returns is re-evaluated
//! here from the chosen binaries, so reported costs and loads carry no
//! solver tolerance.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use good_lp::{
    microlp, variable, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus,
    SolverModel, Variable, WithTimeLimit,
};

use crate::cost::{placement, CostModel, Costing, Limit, Loads, Options, Placement, Usage};
use crate::explain::{delay_reasons, Infeasible, PlaceError, Reason};
use crate::topology::{within, LinkId, NodeId, SubId, TagId, Topology};

mod dominance;

/// The cheapest placement (per [`Options`]), or why there is none.
pub fn solve(topo: &Topology, opts: &Options) -> Result<Placement, PlaceError> {
    let reasons = delay_reasons(topo, opts.one_proxy_per_tag);
    if !reasons.is_empty() {
        return Err(PlaceError::Infeasible(Infeasible { reasons }));
    }
    let model = Model::build(topo, opts);
    let mut active: Vec<Row> = Vec::new();
    let mut unconstrained: Option<Vec<NodeId>> = None;
    loop {
        let (assign, optimal) = match model.run(&active, opts.time_limit) {
            Ok(r) => r,
            Err(Failure::Infeasible) => {
                let overloads = unconstrained
                    .map(|u| Loads::of(topo, opts.model, &u).overloads(topo))
                    .unwrap_or_default();
                return Err(PlaceError::Infeasible(Infeasible {
                    reasons: vec![Reason::Capacity { overloads }],
                }));
            }
            Err(Failure::Other(e)) => return Err(PlaceError::Solver(e)),
        };
        let loads = Loads::of(topo, opts.model, &assign);
        let violated: Vec<Row> = violated(topo, &loads)
            .filter(|r| !active.iter().any(|a| a.resource == *r))
            .map(|r| model.row(r))
            .collect();
        if unconstrained.is_none() {
            unconstrained = Some(assign.clone());
        }
        if violated.is_empty() {
            check_capacities(topo, &loads)?;
            return Ok(placement(
                topo,
                opts,
                "milp",
                optimal,
                &assign,
                unconstrained.as_deref(),
            ));
        }
        active.extend(violated);
    }
}

/// What a column (binary variable) stands for.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// One proxy per tag: every subscription of t at X.
    Tag(TagId, NodeId),
    /// Subscription s at X (its scaled stream; in the unicast model also
    /// its own full-rate copy).
    Sub(SubId, NodeId),
    /// Shared model: the full-rate copy of t to X.
    Copy(TagId, NodeId),
}

struct Column {
    kind: Kind,
    usage: Usage,
    cost: f64,
}

struct Model<'a> {
    topo: &'a Topology,
    columns: Vec<Column>,
    /// Exactly-one groups (a subscription's or a tag's proxy choice).
    groups: Vec<Vec<usize>>,
    /// (x, y): x ≤ y.
    implies: Vec<(usize, usize)>,
    /// The objective is divided by this.
    scale: f64,
    /// Per tag, the cost of its cheapest choice alone with no rows and
    /// whether it is proven optimal, once computed (see [`Model::settle`]).
    alone: RefCell<Vec<Option<(f64, bool)>>>,
}

/// An independent part of the program (indices into [`Model`]'s vectors).
#[derive(Default)]
struct Part<'m> {
    columns: Vec<usize>,
    groups: Vec<&'m Vec<usize>>,
    implies: Vec<(usize, usize)>,
    rows: Vec<&'m Row>,
}

/// Union-find over tag indices (path halving).
struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind((0..n).collect())
    }

    fn find(&mut self, mut a: usize) -> usize {
        while self.0[a] != a {
            self.0[a] = self.0[self.0[a]];
            a = self.0[a];
        }
        a
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
}

/// A capacity row: Σ coef·column ≤ rhs, coefficients divided by the
/// capacity and rhs 1 (or, for a zero capacity, coefficients 1 and rhs 0).
struct Row {
    resource: Resource,
    coefs: Vec<(usize, f64)>,
    rhs: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Link(LinkId),
    Cpu(NodeId),
}

/// The capacities an assignment's true loads exceed.
fn violated<'a>(topo: &'a Topology, loads: &'a Loads) -> impl Iterator<Item = Resource> + 'a {
    let links = topo
        .links()
        .iter()
        .enumerate()
        .filter(|(i, l)| !within(loads.link[*i], l.bandwidth))
        .map(|(i, _)| Resource::Link(LinkId(i)));
    let cpus = topo
        .nodes()
        .iter()
        .enumerate()
        .filter(|(i, n)| !within(loads.cpu[*i], n.cpu_capacity))
        .map(|(i, _)| Resource::Cpu(NodeId(i)));
    links.chain(cpus)
}

enum Failure {
    Infeasible,
    Other(String),
}

impl<'a> Model<'a> {
    fn build(topo: &'a Topology, opts: &Options) -> Model<'a> {
        let costing = Costing::new(topo, opts.objective);
        let nodes = || (0..topo.nodes().len()).map(NodeId);
        let mut m = Model {
            topo,
            columns: Vec::new(),
            groups: Vec::new(),
            implies: Vec::new(),
            scale: costing.scale(topo),
            alone: RefCell::new(vec![None; topo.tags().len()]),
        };
        let push = |m: &mut Model<'_>, kind: Kind, usage: Usage| {
            m.columns.push(Column {
                kind,
                cost: costing.of(&usage),
                usage,
            });
            m.columns.len() - 1
        };
        if opts.one_proxy_per_tag {
            for ti in 0..topo.tags().len() {
                let t = TagId(ti);
                let subs: Vec<SubId> = topo.subscriptions_of(t).collect();
                if subs.is_empty() {
                    continue;
                }
                let group = nodes()
                    .filter(|&x| subs.iter().all(|&s| topo.meets_bound(s, x)))
                    .map(|x| {
                        push(
                            &mut m,
                            Kind::Tag(t, x),
                            Usage::tag_at(topo, opts.model, t, x),
                        )
                    })
                    .collect();
                m.groups.push(group);
            }
            return m;
        }
        let mut copies: HashMap<(TagId, NodeId), usize> = HashMap::new();
        for si in 0..topo.subscriptions().len() {
            let s = SubId(si);
            let t = topo.subscription(s).tag;
            let mut group = Vec::new();
            for x in nodes().filter(|&x| topo.meets_bound(s, x)) {
                let xi = match opts.model {
                    CostModel::Unicast => push(&mut m, Kind::Sub(s, x), Usage::unicast(topo, s, x)),
                    CostModel::Shared => {
                        let xi = push(&mut m, Kind::Sub(s, x), Usage::scaled(topo, s, x));
                        let yi = match copies.get(&(t, x)) {
                            Some(&yi) => yi,
                            None => {
                                let yi = push(&mut m, Kind::Copy(t, x), Usage::full(topo, t, x));
                                copies.insert((t, x), yi);
                                yi
                            }
                        };
                        m.implies.push((xi, yi));
                        xi
                    }
                };
                group.push(xi);
            }
            m.groups.push(group);
        }
        m
    }

    /// The capacity row of a link or a node's CPU.
    fn row(&self, resource: Resource) -> Row {
        let cap = match resource {
            Resource::Link(l) => self.topo.link(l).bandwidth,
            Resource::Cpu(n) => self.topo.node(n).cpu_capacity,
        };
        let mut coefs = Vec::new();
        for (ci, c) in self.columns.iter().enumerate() {
            // A column's streams may cross a link more than once.
            let v: f64 = match resource {
                Resource::Link(l) => c.usage.links.iter().filter(|e| e.0 == l).map(|e| e.1).sum(),
                Resource::Cpu(n) => c.usage.cpu.iter().filter(|e| e.0 == n).map(|e| e.1).sum(),
            };
            if v > 0.0 {
                // A zero capacity forbids every column that uses it.
                coefs.push((ci, if cap > 0.0 { v / cap } else { 1.0 }));
            }
        }
        let rhs = if cap > 0.0 { 1.0 } else { 0.0 };
        Row {
            resource,
            coefs,
            rhs,
        }
    }

    /// Solves with the given capacity rows: the assignment and whether it is
    /// proven optimal.
    ///
    /// Tags that share no capacity row are independent problems: each group
    /// of tags linked by rows is solved on its own (with no row binding, one
    /// small program per tag instead of one with ten thousand variables).
    /// Before the grouping, a tag whose cheapest choice can avoid every row
    /// is settled on its own (see [`Model::settle`]) and links nothing.
    fn run(&self, caps: &[Row], time_limit: Option<f64>) -> Result<(Vec<NodeId>, bool), Failure> {
        let ntags = self.topo.tags().len();
        let tag_of = |c: usize| self.tag_of(c).0;
        let mut tags: Vec<Part<'_>> = (0..ntags).map(|_| Part::default()).collect();
        for ci in 0..self.columns.len() {
            tags[tag_of(ci)].columns.push(ci);
        }
        for g in &self.groups {
            if let Some(&c) = g.first() {
                tags[tag_of(c)].groups.push(g);
            }
        }
        for &(x, y) in &self.implies {
            tags[tag_of(x)].implies.push((x, y));
        }
        let mut chosen = Vec::new();
        let mut optimal = true;
        // Tags some row touches, and whether each is settled.
        let touching: HashSet<usize> = caps
            .iter()
            .flat_map(|r| r.coefs.iter().map(|&(c, _)| c))
            .collect();
        let mut touched = vec![false; ntags];
        for &c in &touching {
            touched[tag_of(c)] = true;
        }
        let mut settled = vec![false; ntags];
        for t in 0..ntags {
            if touched[t] {
                if let Some(c) = self.settle(&tags[t], &touching, time_limit) {
                    chosen.extend(c);
                    settled[t] = true;
                }
            }
        }
        let mut parts = UnionFind::new(ntags);
        // Per row, its first column of an unsettled tag (None: every column
        // it has is of settled tags, which use none of it).
        let mut anchor: Vec<Option<usize>> = Vec::with_capacity(caps.len());
        for row in caps.iter() {
            let mut live = row
                .coefs
                .iter()
                .map(|&(c, _)| c)
                .filter(|&c| !settled[tag_of(c)]);
            let first = live.next();
            if let Some(f) = first {
                for c in live {
                    parts.union(tag_of(f), tag_of(c));
                }
            }
            anchor.push(first);
        }
        let mut part_of_tag: HashMap<usize, usize> = HashMap::new();
        let mut problems: Vec<Part<'_>> = Vec::new();
        for (t, tag) in tags.into_iter().enumerate() {
            // (A tag nobody subscribes to has nothing to place.)
            if settled[t] || tag.columns.is_empty() {
                continue;
            }
            let root = parts.find(t);
            let p = *part_of_tag.entry(root).or_insert_with(|| {
                problems.push(Part::default());
                problems.len() - 1
            });
            let part = &mut problems[p];
            part.columns.extend(tag.columns);
            part.groups.extend(tag.groups);
            part.implies.extend(tag.implies);
        }
        for (row, first) in caps.iter().zip(&anchor) {
            if let Some(&p) = first.and_then(|c| part_of_tag.get(&parts.find(tag_of(c)))) {
                problems[p].rows.push(row);
            }
        }
        for p in &problems {
            let (c, o) = self.run_part(p, time_limit)?;
            chosen.extend(c);
            optimal &= o;
        }
        self.assignment(&chosen).map(|a| (a, optimal))
    }

    /// The tag a column belongs to.
    fn tag_of(&self, c: usize) -> TagId {
        match self.columns[c].kind {
            Kind::Tag(t, _) | Kind::Copy(t, _) => t,
            Kind::Sub(s, _) => self.topo.subscription(s).tag,
        }
    }

    /// Settles one tag apart from the others when it can: if its cheapest
    /// choice using no column that `touching` (the columns in some row)
    /// holds costs no more than its cheapest choice with every column and no
    /// rows, that choice is the tag's part of an optimum. Proof: take any
    /// optimum of the whole program and put this choice in place of the
    /// tag's; every row's load can only drop (coefficients are
    /// non-negative and this choice adds none), the other tags are
    /// untouched, and the tag's cost does not rise, since no feasible choice
    /// of the tag is cheaper than its row-free optimum. So the tag links no
    /// rows to other tags, and a thin link that only a few tags' cheap
    /// routes cross makes a program of those few, not of every tag that
    /// could cross it.
    ///
    /// Returns the chosen columns (optimal: they cost no more than a proven
    /// optimum of a relaxation), or `None` when the tag cannot be settled,
    /// also when either solve fails: the tag then stays in the grouped
    /// program, whose solve reports any real trouble.
    fn settle(
        &self,
        tag: &Part<'_>,
        touching: &HashSet<usize>,
        time_limit: Option<f64>,
    ) -> Option<Vec<usize>> {
        // x ≤ y: with its copy y out, an assignment x is out too.
        let mut out: HashSet<usize> = tag
            .columns
            .iter()
            .copied()
            .filter(|c| touching.contains(c))
            .collect();
        for &(x, y) in &tag.implies {
            if out.contains(&y) {
                out.insert(x);
            }
        }
        if tag.groups.iter().any(|g| g.iter().all(|c| out.contains(c))) {
            return None;
        }
        let free = Part {
            columns: tag
                .columns
                .iter()
                .copied()
                .filter(|c| !out.contains(c))
                .collect(),
            groups: tag.groups.clone(),
            implies: tag
                .implies
                .iter()
                .copied()
                .filter(|(x, _)| !out.contains(x))
                .collect(),
            rows: Vec::new(),
        };
        let (avoid, _) = self.run_part(&free, time_limit).ok()?;
        let (best, best_optimal) = self.alone(tag, time_limit).ok()?;
        let cost: f64 = avoid.iter().map(|&c| self.columns[c].cost).sum();
        (best_optimal && within(cost, best)).then_some(avoid)
    }

    /// The cost of a tag's cheapest choice with no rows, and whether it is
    /// proven optimal (computed once per tag).
    fn alone(&self, tag: &Part<'_>, time_limit: Option<f64>) -> Result<(f64, bool), Failure> {
        let Some(&first) = tag.columns.first() else {
            return Ok((0.0, true));
        };
        let t = self.tag_of(first).0;
        if let Some(Some(r)) = self.alone.borrow().get(t) {
            return Ok(*r);
        }
        let (chosen, optimal) = self.run_part(tag, time_limit)?;
        let r = (chosen.iter().map(|&c| self.columns[c].cost).sum(), optimal);
        if let Some(slot) = self.alone.borrow_mut().get_mut(t) {
            *slot = Some(r);
        }
        Ok(r)
    }

    /// Solves one independent part: the chosen columns and whether proven
    /// optimal.
    fn run_part(
        &self,
        p: &Part<'_>,
        time_limit: Option<f64>,
    ) -> Result<(Vec<usize>, bool), Failure> {
        let columns = self.undominated(&p.columns, &p.rows);
        let columns = self.undominated_assignments(&columns, &p.implies, &p.rows);
        let columns = self.fit(&columns, p)?;
        let mut vars = ProblemVariables::new();
        let v: HashMap<usize, Variable> = columns
            .iter()
            .map(|&c| (c, vars.add(variable().binary())))
            .collect();
        let var = |c: usize| {
            v.get(&c)
                .copied()
                .ok_or_else(|| Failure::Other(format!("column {c} outside its part")))
        };
        let mut objective = Expression::with_capacity(v.len());
        for &c in &columns {
            objective.add_mul(self.columns[c].cost / self.scale, var(c)?);
        }
        let mut problem = vars.minimise(objective).using(microlp);
        if let Some(t) = time_limit {
            problem = problem.with_time_limit(t);
        }
        for g in &p.groups {
            let mut e = Expression::with_capacity(g.len());
            for &c in g.iter().filter(|c| v.contains_key(c)) {
                e.add_mul(1.0, var(c)?);
            }
            problem.add_constraint(e.eq(1.0));
        }
        for &(x, y) in p.implies.iter().filter(|(x, _)| v.contains_key(x)) {
            problem.add_constraint((var(x)? - var(y)?).leq(0.0));
        }
        for row in &p.rows {
            let mut e = Expression::with_capacity(row.coefs.len());
            // Dropped (dominated) columns are zero.
            for &(c, coef) in row.coefs.iter().filter(|(c, _)| v.contains_key(c)) {
                e.add_mul(coef, var(c)?);
            }
            problem.add_constraint(e.leq(row.rhs));
        }
        // microlp asserts its own numerical invariants; a failed one must
        // come back as an error, not take the caller down.
        let solved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| problem.solve()));
        let solution = match solved {
            Ok(Ok(s)) => s,
            Ok(Err(ResolutionError::Infeasible)) => return Err(Failure::Infeasible),
            Ok(Err(e)) => return Err(Failure::Other(e.to_string())),
            Err(_) => {
                return Err(Failure::Other(
                    "the solver panicked (numerical trouble)".into(),
                ))
            }
        };
        let optimal = matches!(solution.status(), SolutionStatus::Optimal);
        let chosen = columns
            .iter()
            .copied()
            .filter(|c| v.get(c).is_some_and(|&x| solution.value(x) > 0.5))
            .collect();
        Ok((chosen, optimal))
    }
}

/// The solver works to a tolerance; a placement it returns must still fit
/// the capacities to one part in a million.
fn check_capacities(topo: &Topology, loads: &Loads) -> Result<(), PlaceError> {
    let over = loads.overloads(topo);
    let bad: Vec<String> = over
        .iter()
        .filter(|l| match l {
            Limit::Link { load, capacity, .. } | Limit::NodeCpu { load, capacity, .. } => {
                *load > *capacity * (1.0 + 1e-6)
            }
            Limit::DelayBound { .. } => false,
        })
        .map(ToString::to_string)
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(PlaceError::Solver(format!(
        "the solver's placement overloads {}",
        bad.join(", ")
    )))
}
