//! Seeded instances for tests and benchmarks: random connected topologies,
//! and the push-pull paper's vBNS chain.
//!
//! The generator uses its own SplitMix64 so an instance depends only on its
//! [`Params`] (and this file), never on a dependency's version.

use crate::topology::{NodeId, Topology, TopologyBuilder, TopologyError, DEFAULT_CPU_PER_MSG};

/// The seven vBNS sites of the paper's Table 3 experiment, east to west: a
/// chain from Carnegie Mellon to San Diego.
pub const VBNS_SITES: [&str; 7] = [
    "cmu",
    "pittsburgh",
    "cleveland",
    "chicago",
    "denver",
    "los-angeles",
    "san-diego",
];

/// OC-12 (622.08 Mbit/s), the vBNS backbone links, in bytes per second.
pub const OC12_BYTES_PER_S: f64 = 622.08e6 / 8.0;

/// What [`random`] builds.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Nodes (>= 1).
    pub nodes: usize,
    /// Tags (publishers, one each, on random nodes).
    pub tags: usize,
    /// Subscriptions, on random tags and nodes.
    pub subscriptions: usize,
    /// Links beyond the random spanning tree.
    pub extra_links: usize,
    /// Link bandwidth range, bytes/s (uniform).
    pub bandwidth: (f64, f64),
    /// Node CPU capacity range, fractions of one CPU (uniform).
    pub cpu_capacity: (f64, f64),
    /// Publication periods drawn from, seconds.
    pub periods: Vec<f64>,
    /// Message size range, bytes (uniform).
    pub size: (f64, f64),
    /// Largest scale n (drawn from 1..=max_scale).
    pub max_scale: u32,
    /// CPU per message a proxy handles, seconds.
    pub cpu_per_msg: f64,
    /// Where each delay bound lies, drawn uniformly from this range: 0 is
    /// the smallest achievable delay (proxy at the subscriber, hops·T), 1
    /// the delay with the proxy at the publisher (hops·T′). From 1 up, the
    /// publisher's node meets every bound, so one proxy per tag is feasible
    /// as far as delays go.
    pub bound_stretch: (f64, f64),
    /// Seed.
    pub seed: u64,
}

impl Params {
    /// Defaults for a network of `nodes` nodes: average degree about 3,
    /// links of 10–100 MB/s, half a CPU per node, 1–100 ms periods,
    /// 64–8192-byte messages, scales 1–10, delay bounds anywhere between the
    /// smallest achievable and the delay with the proxy at the publisher.
    pub fn new(nodes: usize, tags: usize, subscriptions: usize, seed: u64) -> Params {
        Params {
            nodes,
            tags,
            subscriptions,
            extra_links: nodes / 2,
            bandwidth: (1e7, 1e8),
            cpu_capacity: (0.5, 0.5),
            periods: vec![0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1],
            size: (64.0, 8192.0),
            max_scale: 10,
            cpu_per_msg: DEFAULT_CPU_PER_MSG,
            bound_stretch: (0.0, 1.0),
            seed,
        }
    }
}

/// A random connected topology: a random spanning tree (node i joins a
/// random earlier node) plus `extra_links` random extra links (repeats
/// skipped). Every delay bound is at least the smallest achievable delay
/// (see [`Params::bound_stretch`]), so each subscription can be served.
/// Errors only for out-of-range parameters (a bandwidth or size range
/// reaching 0, a negative CPU).
pub fn random(p: &Params) -> Result<Topology, TopologyError> {
    let mut rng = SplitMix64(p.seed);
    let n = p.nodes.max(1);
    let name = |i: usize| format!("n{i}");
    let mut b = TopologyBuilder::new();
    for i in 0..n {
        b.node(&name(i), rng.range(p.cpu_capacity.0, p.cpu_capacity.1));
    }
    let mut pairs = std::collections::HashSet::new();
    for i in 1..n {
        let j = rng.below(i);
        pairs.insert((j, i));
        b.link(&name(j), &name(i), rng.range(p.bandwidth.0, p.bandwidth.1));
    }
    if n > 2 {
        for _ in 0..p.extra_links {
            let (i, j) = (rng.below(n), rng.below(n));
            let key = (i.min(j), i.max(j));
            if i != j && pairs.insert(key) {
                b.link(&name(i), &name(j), rng.range(p.bandwidth.0, p.bandwidth.1));
            }
        }
    }
    let mut tags = Vec::with_capacity(p.tags);
    for t in 0..p.tags {
        let publisher = rng.below(n);
        let period = if p.periods.is_empty() {
            0.01
        } else {
            p.periods[rng.below(p.periods.len())]
        };
        let size = rng.range(p.size.0, p.size.1).round().max(1.0);
        let tag = format!("/t{t}");
        b.tag_with_cpu(&tag, &name(publisher), period, size, p.cpu_per_msg);
        tags.push((tag, publisher, period));
    }
    // Hop counts need the links: build once without subscriptions.
    let bare = b.build()?;
    if tags.is_empty() {
        return Ok(bare);
    }
    for s in 0..p.subscriptions {
        let (tag, publisher, period) = &tags[rng.below(tags.len())];
        let node = rng.below(n);
        let scale = 1 + rng.below(p.max_scale.max(1) as usize) as i64;
        let hops = bare.hops(NodeId(*publisher), NodeId(node)) as f64;
        // δ(X=S) = hops·T, δ(X=P) = hops·T′.
        let bound = if hops == 0.0 {
            *period
        } else {
            let stretch = rng.range(p.bound_stretch.0, p.bound_stretch.1);
            hops * period * (1.0 + stretch * (scale as f64 - 1.0))
        };
        b.subscription(&format!("s{s}"), tag, &name(node), scale, bound);
    }
    b.build()
}

/// The vBNS chain (OC-12 links, half a CPU per site) with `publishers` tags
/// (100 Hz, 1000-byte messages) published from CMU westwards, round robin,
/// and `subscribers` subscriptions on the three western sites (denver,
/// los-angeles, san-diego), round robin over sites and tags, scales 1-4.
/// Each bound is the subscription's delay with its proxy halfway along its
/// path (rounded towards the publisher), so the cheapest site, the
/// publisher's, is too slow for scaled subscriptions, while one site serves
/// all of a tag's subscriptions: the paper's Appendix A search applies.
pub fn vbns(publishers: usize, subscribers: usize) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new();
    for s in VBNS_SITES {
        b.node(s, 0.5);
    }
    for w in VBNS_SITES.windows(2) {
        b.link(w[0], w[1], OC12_BYTES_PER_S);
    }
    let publishers = publishers.max(1);
    let period = 0.01;
    for p in 0..publishers {
        b.tag(&format!("/vbns/{p}"), VBNS_SITES[p % 7], period, 1000.0);
    }
    for s in 0..subscribers {
        let p = s % publishers;
        let (from, to) = ((p % 7) as i64, (4 + s % 3) as i64);
        let scale = 1 + (s % 4) as i64;
        let half = from + (to - from) / 2;
        let bound = period * ((half - from).abs() + (to - half).abs() * scale) as f64;
        b.subscription(
            &format!("sub{s}"),
            &format!("/vbns/{p}"),
            VBNS_SITES[to as usize],
            scale,
            bound,
        );
    }
    b.build()
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, good enough for test data.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi].
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
