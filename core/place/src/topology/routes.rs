//! All-pairs shortest paths by hop count (one breadth-first search per
//! source node).
//!
//! Ties are broken deterministically: a search visits a node's neighbours
//! in ascending node index (declaration order), and a node keeps the first
//! parent that discovered it. The path from `a` to `b` is read from the
//! search rooted at `a`, so it is the direction the stream flows in; the
//! path from `b` to `a` may be a different path of the same length.

use std::collections::VecDeque;

use super::{Link, LinkId, NodeId};

const UNREACHED: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub(crate) struct Routes {
    n: usize,
    /// `hops[src * n + v]`: hop count from src to v, or UNREACHED.
    hops: Vec<u32>,
    /// `parent[src * n + v]`: (previous node, link) on the path from src to v.
    parent: Vec<Option<(u32, u32)>>,
}

impl Routes {
    pub(crate) fn new(n: usize, links: &[Link]) -> Routes {
        let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
        for (i, l) in links.iter().enumerate() {
            adj[l.a.0].push((l.b.0, i));
            adj[l.b.0].push((l.a.0, i));
        }
        for a in &mut adj {
            a.sort_unstable();
        }
        let mut hops = vec![UNREACHED; n * n];
        let mut parent = vec![None; n * n];
        let mut queue = VecDeque::new();
        for src in 0..n {
            let row = src * n;
            hops[row + src] = 0;
            queue.push_back(src);
            while let Some(u) = queue.pop_front() {
                let d = hops[row + u];
                for &(v, link) in &adj[u] {
                    if hops[row + v] == UNREACHED {
                        hops[row + v] = d + 1;
                        parent[row + v] = Some((u as u32, link as u32));
                        queue.push_back(v);
                    }
                }
            }
        }
        Routes { n, hops, parent }
    }

    pub(crate) fn reachable(&self, a: NodeId, b: NodeId) -> bool {
        self.hops[a.0 * self.n + b.0] != UNREACHED
    }

    /// Hop count; only called on a connected topology (checked at build).
    pub(crate) fn hops(&self, a: NodeId, b: NodeId) -> u32 {
        self.hops[a.0 * self.n + b.0]
    }

    pub(crate) fn path(&self, a: NodeId, b: NodeId) -> Vec<LinkId> {
        let row = a.0 * self.n;
        let mut out = Vec::new();
        let mut v = b.0;
        while let Some((u, link)) = self.parent[row + v] {
            out.push(LinkId(link as usize));
            v = u as usize;
        }
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::TopologyBuilder;

    #[test]
    fn ties_go_to_the_lower_node_index() {
        // A square a-b-d, a-c-d: two 2-hop paths from a to d; b is declared first.
        let mut b = TopologyBuilder::new();
        for n in ["a", "b", "c", "d"] {
            b.node(n, 1.0);
        }
        b.link("a", "c", 1.0)
            .link("c", "d", 1.0)
            .link("a", "b", 1.0)
            .link("b", "d", 1.0);
        let t = b.build().unwrap();
        let (a, d) = (t.node_id("a").unwrap(), t.node_id("d").unwrap());
        assert_eq!(t.hops(a, d), 2);
        let names: Vec<String> = t.path(a, d).into_iter().map(|l| t.link_name(l)).collect();
        assert_eq!(names, ["a-b", "b-d"]);
        assert_eq!(t.path(a, a), []);
    }
}
