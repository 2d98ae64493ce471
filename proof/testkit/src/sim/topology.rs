//! Links, partitions, groups and what a run observed: the parts of
//! [`Sim`] test code configures and reads.

use super::engine::Sim;
use super::link::{Bottleneck, BottleneckConfig, BottleneckStats, Link, LinkConfig, LinkStats};
use super::node::{Addr, SimNode};
use super::trace::TraceEntry;
use super::SimStats;

impl<N: SimNode + 'static> Sim<N> {
    // ----- links, partitions, groups ----------------------------------------

    /// Sets the link `from → to`.
    pub fn set_link(&mut self, from: Addr, to: Addr, config: LinkConfig) {
        self.link_entry(from, to).config = config;
    }

    /// Sets both directions between `a` and `b`.
    pub fn set_link_pair(&mut self, a: Addr, b: Addr, config: LinkConfig) {
        self.set_link(a, b, config);
        self.set_link(b, a, config);
    }

    /// Sets every existing link and the default for new ones.
    pub fn set_all_links(&mut self, config: LinkConfig) {
        self.config.default_link = config;
        for link in self.links.values_mut() {
            link.config = config;
        }
    }

    /// The configuration of the link `from → to`.
    pub fn link_config(&self, from: Addr, to: Addr) -> LinkConfig {
        self.links
            .get(&(from, to))
            .map_or(self.config.default_link, |l| l.config)
    }

    /// Counters of the link `from → to` (zero if it never carried anything).
    pub fn link_stats(&self, from: Addr, to: Addr) -> LinkStats {
        self.links
            .get(&(from, to))
            .map(|l| l.stats)
            .unwrap_or_default()
    }

    /// Every link that exists and its counters, in (from, to) order.
    pub fn links(&self) -> impl Iterator<Item = ((Addr, Addr), LinkStats)> + '_ {
        self.links.iter().map(|(&k, l)| (k, l.stats))
    }

    /// All links' counters added up.
    pub fn total_link_stats(&self) -> LinkStats {
        let mut total = LinkStats::default();
        for l in self.links.values() {
            total.add(&l.stats);
        }
        total
    }

    /// Puts the links `links` (each `from → to`) behind one shared queue
    /// and serialiser (see [`BottleneckConfig`]); returns its index for
    /// [`Sim::set_bottleneck`] and [`Sim::bottleneck_stats`]. A link that
    /// was in another bottleneck leaves it.
    pub fn share_bottleneck(&mut self, links: &[(Addr, Addr)], config: BottleneckConfig) -> usize {
        let index = self.bottlenecks.len();
        self.bottlenecks.push(Bottleneck::new(config));
        for &(from, to) in links {
            self.link_entry(from, to).bottleneck = Some(index);
        }
        index
    }

    /// Changes bottleneck `index`'s rate and queue from now on (datagrams
    /// already queued keep their times). Unknown indices are ignored.
    pub fn set_bottleneck(&mut self, index: usize, config: BottleneckConfig) {
        if let Some(b) = self.bottlenecks.get_mut(index) {
            b.config = config;
        }
    }

    /// Counters of bottleneck `index` (zero for an unknown index).
    pub fn bottleneck_stats(&self, index: usize) -> BottleneckStats {
        self.bottlenecks
            .get(index)
            .map(|b| b.stats)
            .unwrap_or_default()
    }

    /// Brings the link `from → to` up or down. Datagrams on a down link are
    /// dropped, including those in flight when they arrive.
    pub fn set_link_up(&mut self, from: Addr, to: Addr, up: bool) {
        self.link_entry(from, to).up = up;
    }

    /// Cuts every link between a node of `a` and a node of `b`, both ways.
    pub fn partition(&mut self, a: &[Addr], b: &[Addr]) {
        self.set_between(a, b, false);
    }

    /// Restores every link between `a` and `b`, both ways.
    pub fn heal(&mut self, a: &[Addr], b: &[Addr]) {
        self.set_between(a, b, true);
    }

    /// Restores every link.
    pub fn heal_all(&mut self) {
        for link in self.links.values_mut() {
            link.up = true;
        }
    }

    /// Adds `member` to `group` (for [`Destination::Group`](super::Destination::Group)).
    pub fn join(&mut self, group: Addr, member: Addr) {
        self.groups.entry(group).or_default().insert(member);
    }

    /// Removes `member` from `group`.
    pub fn leave(&mut self, group: Addr, member: Addr) {
        if let Some(m) = self.groups.get_mut(&group) {
            m.remove(&member);
        }
    }

    // ----- observing --------------------------------------------------------

    /// A hash of every event so far: equal for equal runs.
    pub fn trace_hash(&self) -> u64 {
        self.trace.hash
    }

    /// Events traced so far.
    pub fn trace_len(&self) -> u64 {
        self.trace.len
    }

    /// The recorded trace (empty unless [`SimConfig::record_trace`](super::SimConfig::record_trace)).
    pub fn trace(&self) -> &[TraceEntry] {
        self.trace.entries.as_deref().unwrap_or(&[])
    }

    /// Counters of the run.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    // ----- helpers ------------------------------------------------------------

    pub(super) fn link_entry(&mut self, from: Addr, to: Addr) -> &mut Link {
        let default = self.config.default_link;
        self.links
            .entry((from, to))
            .or_insert_with(|| Link::new(default))
    }

    fn set_between(&mut self, a: &[Addr], b: &[Addr], up: bool) {
        for &x in a {
            for &y in b {
                self.set_link_up(x, y, up);
                self.set_link_up(y, x, up);
            }
        }
    }
}
