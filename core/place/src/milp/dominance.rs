//! Shrinking a part before the solver sees it (columns that cannot fit a
//! row whatever the others choose, assignments another one dominates), and
//! reading the chosen columns back as an assignment.

use std::collections::HashSet;

use super::*;

impl<'a> Model<'a> {
    /// The columns left after dropping those that cannot be 1 in any
    /// solution meeting the part's rows.
    ///
    /// Each exactly-one group puts at least its smallest coefficient on a
    /// row, whatever it chooses; a column whose own coefficient plus every
    /// other group's smallest one exceeds the row's right-hand side cannot be
    /// chosen. A copy that cannot be chosen takes the assignments that need
    /// it along (x ≤ y), and a copy no assignment needs any more is dropped
    /// too (it only costs). Repeated until nothing changes, since a dropped
    /// column can raise its group's smallest coefficient. A group left empty
    /// makes the part infeasible.
    pub(super) fn fit(&self, cols: &[usize], p: &Part<'_>) -> Result<Vec<usize>, Failure> {
        if p.rows.is_empty() {
            return Ok(cols.to_vec());
        }
        let mut alive: HashSet<usize> = cols.iter().copied().collect();
        let mut group_of: HashMap<usize, usize> = HashMap::new();
        for (gi, g) in p.groups.iter().enumerate() {
            for &c in g.iter() {
                group_of.insert(c, gi);
            }
        }
        let mut needs: HashMap<usize, Vec<usize>> = HashMap::new();
        for &(x, y) in &p.implies {
            needs.entry(y).or_default().push(x);
        }
        let coefs: Vec<HashMap<usize, f64>> = p
            .rows
            .iter()
            .map(|r| r.coefs.iter().copied().collect())
            .collect();
        loop {
            let mut dead: Vec<usize> = Vec::new();
            for (row, coef) in p.rows.iter().zip(&coefs) {
                let a = |c: usize| coef.get(&c).copied().unwrap_or(0.0);
                let mut least = Vec::with_capacity(p.groups.len());
                for g in &p.groups {
                    let m = g
                        .iter()
                        .filter(|c| alive.contains(c))
                        .map(|&c| a(c))
                        .reduce(f64::min)
                        .ok_or(Failure::Infeasible)?;
                    least.push(m);
                }
                let forced: f64 = least.iter().sum();
                for (&c, &ac) in coef.iter().filter(|(c, _)| alive.contains(c)) {
                    let others = match group_of.get(&c) {
                        Some(&g) => forced - least[g],
                        None => forced,
                    };
                    if !within(others + ac, row.rhs) {
                        dead.push(c);
                    }
                }
            }
            for &(x, y) in &p.implies {
                if alive.contains(&x) && !alive.contains(&y) {
                    dead.push(x);
                }
            }
            for (y, xs) in &needs {
                if alive.contains(y) && !xs.iter().any(|x| alive.contains(x)) {
                    dead.push(*y);
                }
            }
            if dead.is_empty() {
                break;
            }
            for c in dead {
                alive.remove(&c);
                if let Some(xs) = needs.get(&c) {
                    for x in xs {
                        alive.remove(x);
                    }
                }
            }
        }
        // (Every group kept a column: the last pass found each one's least.)
        Ok(cols.iter().copied().filter(|c| alive.contains(c)).collect())
    }

    /// The columns left after dropping dominated assignments of single
    /// subscriptions (after [`Model::undominated`], which drops whole nodes).
    ///
    /// Subscription s's column at X is dominated by its column at X′ when
    /// the column at X′ plus X′'s copy for s's tag (shared model; its
    /// positive parts: the copy may already be paid for) costs no more and
    /// puts no more on any given row than the column at X alone (strictly
    /// less somewhere, or X′ declared first). Moving s from X to X′ (opening
    /// the copy at X′ if it is not open, keeping X's) then keeps every bound
    /// and row satisfied at no more cost, so some optimum never uses s at X.
    /// The relation is transitive and acyclic, so every dropped column has an
    /// undropped dominator.
    pub(super) fn undominated_assignments(
        &self,
        cols: &[usize],
        implies: &[(usize, usize)],
        rows: &[&Row],
    ) -> Vec<usize> {
        let live: HashSet<usize> = cols.iter().copied().collect();
        let copy_of: HashMap<usize, usize> = implies
            .iter()
            .copied()
            .filter(|(x, _)| live.contains(x))
            .collect();
        let coefs: Vec<HashMap<usize, f64>> = rows
            .iter()
            .map(|r| r.coefs.iter().copied().collect())
            .collect();
        let vector = |c: usize| -> Vec<f64> {
            std::iter::once(self.columns[c].cost)
                .chain(coefs.iter().map(|m| m.get(&c).copied().unwrap_or(0.0)))
                .collect()
        };
        let mut by_sub: HashMap<SubId, Vec<(NodeId, usize)>> = HashMap::new();
        for &c in cols {
            if let Kind::Sub(s, x) = self.columns[c].kind {
                by_sub.entry(s).or_default().push((x, c));
            }
        }
        let mut dropped: HashSet<usize> = HashSet::new();
        for (_, mut xs) in by_sub {
            xs.sort_unstable();
            // (own vector, own vector + positive part of its copy's)
            let vs: Vec<(Vec<f64>, Vec<f64>)> = xs
                .iter()
                .map(|&(_, c)| {
                    let own = vector(c);
                    let mut with = own.clone();
                    if let Some(&y) = copy_of.get(&c) {
                        for (w, v) in with.iter_mut().zip(vector(y)) {
                            *w += v.max(0.0);
                        }
                    }
                    (own, with)
                })
                .collect();
            for (i, &(x, c)) in xs.iter().enumerate() {
                let own = &vs[i].0;
                let dominated = xs.iter().enumerate().any(|(j, &(y, _))| {
                    let with = &vs[j].1;
                    j != i
                        && with.iter().zip(own).all(|(a, b)| a <= b)
                        && (y < x || with.iter().zip(own).any(|(a, b)| a < b))
                });
                if dominated {
                    dropped.insert(c);
                }
            }
        }
        cols.iter()
            .copied()
            .filter(|c| !dropped.contains(c))
            .collect()
    }

    /// The columns left after dropping dominated proxy nodes.
    ///
    /// The columns of tag t at node X form a *slot vector*: per slot (t's
    /// full-rate copy, each subscription's scaled stream, or the whole tag
    /// with one proxy per tag) the column's cost and its coefficient in
    /// every given row, +∞ where X has no such column (it misses that
    /// subscription's bound). X is dominated by X′ when X′'s vector is no
    /// larger anywhere (and smaller somewhere, or equal and X′ declared
    /// first): moving every subscription of t from X to X′ then keeps every
    /// bound and every row satisfied at no more cost, so some optimum never
    /// uses X.
    pub(super) fn undominated(&self, cols: &[usize], rows: &[&Row]) -> Vec<usize> {
        let topo = self.topo;
        let key = |c: usize| match self.columns[c].kind {
            Kind::Tag(_, x) | Kind::Copy(_, x) | Kind::Sub(_, x) => (self.tag_of(c), x),
        };
        // Slot 0: the tag (one proxy per tag) or its copy; 1 + i: its i-th
        // subscription.
        let mut sub_slot: HashMap<SubId, usize> = HashMap::new();
        for t in 0..topo.tags().len() {
            for (i, s) in topo.subscriptions_of(TagId(t)).enumerate() {
                sub_slot.insert(s, 1 + i);
            }
        }
        let slot = |c: usize| match self.columns[c].kind {
            Kind::Tag(..) | Kind::Copy(..) => 0,
            Kind::Sub(s, _) => sub_slot.get(&s).copied().unwrap_or(0),
        };
        let coefs: Vec<HashMap<usize, f64>> = rows
            .iter()
            .map(|r| r.coefs.iter().copied().collect())
            .collect();
        let width = 1 + rows.len();
        let mut vectors: HashMap<(TagId, NodeId), Vec<f64>> = HashMap::new();
        for &c in cols {
            let (t, x) = key(c);
            let slots = 1 + topo.subscriptions_of(t).count();
            let v = vectors
                .entry((t, x))
                .or_insert_with(|| vec![f64::INFINITY; slots * width]);
            let base = slot(c) * width;
            v[base] = self.columns[c].cost;
            for (r, m) in coefs.iter().enumerate() {
                v[base + 1 + r] = m.get(&c).copied().unwrap_or(0.0);
            }
        }
        let mut by_tag: HashMap<TagId, Vec<NodeId>> = HashMap::new();
        for &(t, x) in vectors.keys() {
            by_tag.entry(t).or_default().push(x);
        }
        let mut dropped: HashSet<(TagId, NodeId)> = HashSet::new();
        for (t, mut xs) in by_tag {
            xs.sort_unstable();
            for &x in &xs {
                let vx = &vectors[&(t, x)];
                let dominated = xs.iter().any(|&y| {
                    let vy = &vectors[&(t, y)];
                    y != x
                        && vy.iter().zip(vx).all(|(a, b)| a <= b)
                        && (y < x || vy.iter().zip(vx).any(|(a, b)| a < b))
                });
                if dominated {
                    dropped.insert((t, x));
                }
            }
        }
        cols.iter()
            .copied()
            .filter(|&c| !dropped.contains(&key(c)))
            .collect()
    }

    /// The assignment the chosen columns make, checked to be complete.
    pub(super) fn assignment(&self, chosen: &[usize]) -> Result<Vec<NodeId>, Failure> {
        let topo = self.topo;
        let mut assign: Vec<Option<NodeId>> = vec![None; topo.subscriptions().len()];
        let mut set = |s: SubId, x: NodeId| {
            if assign[s.0].replace(x).is_some() {
                return Err(Failure::Other(format!(
                    "the solution gives subscription {} two proxies",
                    topo.subscription(s).name
                )));
            }
            Ok(())
        };
        for &c in chosen {
            match self.columns[c].kind {
                Kind::Tag(t, x) => {
                    for s in topo.subscriptions_of(t) {
                        set(s, x)?;
                    }
                }
                Kind::Sub(s, x) => set(s, x)?,
                Kind::Copy(..) => {}
            }
        }
        assign
            .into_iter()
            .enumerate()
            .map(|(i, x)| {
                x.ok_or_else(|| {
                    Failure::Other(format!(
                        "the solution gives subscription {} no proxy",
                        topo.subscription(SubId(i)).name
                    ))
                })
            })
            .collect()
    }
}
