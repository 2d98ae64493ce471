//! The topology model: nodes, links, tags and subscriptions, built by
//! [`TopologyBuilder`] or parsed from a TOML file, validated once.
//!
//! Units everywhere: seconds, bytes, bytes per second; CPU as a fraction of
//! one CPU (1.0 = one core fully busy).

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

mod routes;

pub(crate) use routes::Routes;

/// Default CPU capacity a node offers to proxies: half a CPU.
pub const DEFAULT_CPU_CAPACITY: f64 = 0.5;
/// Default CPU a proxy spends per message it receives or sends, seconds.
pub const DEFAULT_CPU_PER_MSG: f64 = 5e-6;

/// Index of a node in its [`Topology`] (declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct NodeId(pub usize);
/// Index of a link in its [`Topology`] (declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LinkId(pub usize);
/// Index of a tag in its [`Topology`] (declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TagId(pub usize);
/// Index of a subscription in its [`Topology`] (declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SubId(pub usize);

/// A host that may run a proxy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Unique name.
    pub name: String,
    /// CPU available to proxies, fraction of one CPU (`inf` = unlimited).
    pub cpu_capacity: f64,
    /// Where tagwire's daemons find this node (its IP address), for
    /// `Proxy::Auto`; free text here, checked by the daemon.
    pub address: Option<String>,
}

/// An undirected link. Its capacity is **shared by both directions**: the
/// bytes per second of every stream crossing it, either way, add up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// One end.
    pub a: NodeId,
    /// The other end.
    pub b: NodeId,
    /// Capacity in **bytes** per second (`inf` = unlimited).
    pub bandwidth: f64,
}

/// A published stream: one publisher sending every `period` seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tag {
    /// Unique name, e.g. `/robot/laser`.
    pub name: String,
    /// The node of the publisher.
    pub publisher: NodeId,
    /// Publication period T, seconds (> 0).
    pub period: f64,
    /// Message size K, bytes (> 0).
    pub size: f64,
    /// CPU a proxy of this tag spends per message handled, seconds (>= 0).
    pub cpu_per_msg: f64,
}

impl Tag {
    /// Publication rate f = 1/T, messages per second.
    pub fn rate(&self) -> f64 {
        1.0 / self.period
    }
}

/// A subscriber asking for every `scale`-th sample of a tag.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Subscription {
    /// Unique name (given in the file or generated as `TAG@NODE`).
    pub name: String,
    /// The tag.
    pub tag: TagId,
    /// The subscriber's node.
    pub node: NodeId,
    /// Scale n >= 1: every n-th sample, so period T' = n·T.
    pub scale: u32,
    /// End-to-end delay bound D, seconds.
    pub delay_bound: f64,
}

/// A validated, connected topology with its shortest paths.
#[derive(Debug, Clone)]
pub struct Topology {
    nodes: Vec<Node>,
    links: Vec<Link>,
    tags: Vec<Tag>,
    subscriptions: Vec<Subscription>,
    routes: Routes,
}

/// Why a topology was rejected. Every message names the offending entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// The TOML text is malformed or has a field of the wrong type or name.
    #[error("topology file: {0}")]
    Parse(String),
    /// No node at all.
    #[error("the topology has no node: add at least one [[node]]")]
    NoNodes,
    /// Two nodes, tags or subscriptions share a name.
    #[error("duplicate {kind} name {name:?}: names must be unique")]
    Duplicate {
        /// "node", "tag" or "subscription".
        kind: &'static str,
        /// The repeated name.
        name: String,
    },
    /// A link, tag or subscription names a node that is not declared.
    #[error("{place} names node {node:?}, which is not declared as a [[node]]")]
    UnknownNode {
        /// Where it was named, e.g. `link 3 (a)` or `tag "/x" publisher`.
        place: String,
        /// The unknown name.
        node: String,
    },
    /// A subscription names a tag that is not declared.
    #[error("subscription {subscription:?} names tag {tag:?}, which is not declared as a [[tag]]")]
    UnknownTag {
        /// The subscription.
        subscription: String,
        /// The unknown tag.
        tag: String,
    },
    /// A link joins a node to itself.
    #[error("link {index} joins node {node:?} to itself")]
    SelfLink {
        /// Link index (0-based, declaration order).
        index: usize,
        /// The node.
        node: String,
    },
    /// Two links join the same pair of nodes.
    #[error("links {first} and {second} both join {a:?} and {b:?}: declare one link per pair")]
    DuplicateLink {
        /// Index of the first.
        first: usize,
        /// Index of the second.
        second: usize,
        /// One end.
        a: String,
        /// The other end.
        b: String,
    },
    /// Some nodes cannot be reached from the first node.
    #[error(
        "the topology is disconnected: {unreachable:?} cannot be reached from {from:?}; add links"
    )]
    Disconnected {
        /// The first node.
        from: String,
        /// The nodes not reachable from it.
        unreachable: Vec<String>,
    },
    /// A subscription's scale n is not an integer >= 1.
    #[error("subscription {subscription:?} has scale {scale}: it must be an integer >= 1 (1 = every sample)")]
    BadScale {
        /// The subscription.
        subscription: String,
        /// The value given.
        scale: i64,
    },
    /// A tag gives both `period` and `rate`, or neither.
    #[error("tag {tag:?}: give exactly one of `period` (seconds) or `rate` (messages per second)")]
    PeriodOrRate {
        /// The tag.
        tag: String,
    },
    /// A quantity that must be positive (or non-negative) is not.
    #[error("{what} is {value}: it must be {rule}")]
    OutOfRange {
        /// What, e.g. `tag "/x" period`.
        what: String,
        /// The value given.
        value: f64,
        /// The rule, e.g. "> 0" or ">= 0".
        rule: &'static str,
    },
}

impl Topology {
    /// Parses and validates a topology file (format: the crate documentation).
    pub fn from_toml(text: &str) -> Result<Topology, TopologyError> {
        let file: TopologyFile =
            toml::from_str(text).map_err(|e| TopologyError::Parse(e.to_string().trim().into()))?;
        file.into_builder().build()
    }

    /// The nodes, indexed by [`NodeId`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// The links, indexed by [`LinkId`].
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    /// The tags, indexed by [`TagId`].
    pub fn tags(&self) -> &[Tag] {
        &self.tags
    }
    /// The subscriptions, indexed by [`SubId`].
    pub fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }
    /// One node. Ids index declaration order; like slice indexing, an id
    /// not from this topology panics (the same holds for [`Topology::link`],
    /// [`Topology::tag`], [`Topology::subscription`], [`Topology::hops`],
    /// [`Topology::path`] and [`Topology::delay`]).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }
    /// One link.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0]
    }
    /// One tag.
    pub fn tag(&self, id: TagId) -> &Tag {
        &self.tags[id.0]
    }
    /// One subscription.
    pub fn subscription(&self, id: SubId) -> &Subscription {
        &self.subscriptions[id.0]
    }
    /// A node by name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name).map(NodeId)
    }
    /// A subscription by name.
    pub fn subscription_id(&self, name: &str) -> Option<SubId> {
        self.subscriptions
            .iter()
            .position(|s| s.name == name)
            .map(SubId)
    }
    /// The subscriptions of a tag, in declaration order.
    pub fn subscriptions_of(&self, tag: TagId) -> impl Iterator<Item = SubId> + '_ {
        self.subscriptions
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.tag == tag)
            .map(|(i, _)| SubId(i))
    }
    /// Hop count of the shortest path from `a` to `b`.
    pub fn hops(&self, a: NodeId, b: NodeId) -> u32 {
        self.routes.hops(a, b)
    }
    /// The links of the path a stream from `a` to `b` takes, in order from `a`.
    pub fn path(&self, a: NodeId, b: NodeId) -> Vec<LinkId> {
        self.routes.path(a, b)
    }
    /// A link's name, `a–b`.
    pub fn link_name(&self, id: LinkId) -> String {
        let l = self.link(id);
        format!("{}-{}", self.node(l.a).name, self.node(l.b).name)
    }

    /// End-to-end delay δ = hops(P,X)·T + hops(X,S)·T′ of subscription `s`
    /// with its proxy at `x` (one period per hop, the push-pull paper's model).
    pub fn delay(&self, s: SubId, x: NodeId) -> f64 {
        let sub = self.subscription(s);
        let tag = self.tag(sub.tag);
        let d_pub = self.hops(tag.publisher, x) as f64;
        let d_sub = self.hops(x, sub.node) as f64;
        d_pub * tag.period + d_sub * tag.period * sub.scale as f64
    }

    /// Whether `x` meets subscription `s`'s delay bound (with a relative
    /// tolerance of 1e-9, so a bound written as the exact delay is met).
    pub fn meets_bound(&self, s: SubId, x: NodeId) -> bool {
        within(self.delay(s, x), self.subscription(s).delay_bound)
    }

    /// The bandwidth used to normalise the weighted objective: every
    /// subscription sent the full-rate stream straight from its publisher
    /// (Σ K·f·hops(P,S)), or 1 B/s if that is zero.
    pub fn bandwidth_reference(&self) -> f64 {
        let r: f64 = self
            .subscriptions
            .iter()
            .map(|s| {
                let t = self.tag(s.tag);
                t.size * t.rate() * self.hops(t.publisher, s.node) as f64
            })
            .sum();
        if r > 0.0 {
            r
        } else {
            1.0
        }
    }
}

/// `value <= limit`, with a relative tolerance of 1e-9.
pub(crate) fn within(value: f64, limit: f64) -> bool {
    value <= limit + 1e-9 * limit.abs().max(1e-12)
}

/// Builds a [`Topology`] by names; [`TopologyBuilder::build`] validates.
#[derive(Debug, Clone, Default)]
pub struct TopologyBuilder {
    nodes: Vec<(String, f64, Option<String>)>,
    links: Vec<(String, String, f64)>,
    tags: Vec<TagSpec>,
    subs: Vec<SubSpec>,
}

#[derive(Debug, Clone)]
struct TagSpec {
    name: String,
    publisher: String,
    period: Option<f64>,
    rate: Option<f64>,
    size: f64,
    cpu_per_msg: f64,
}

#[derive(Debug, Clone)]
struct SubSpec {
    name: Option<String>,
    tag: String,
    node: String,
    scale: i64,
    delay_bound: f64,
}

impl TopologyBuilder {
    /// An empty topology.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node with its CPU capacity (fraction of one CPU).
    pub fn node(&mut self, name: &str, cpu_capacity: f64) -> &mut Self {
        self.node_at(name, cpu_capacity, None)
    }

    /// [`TopologyBuilder::node`] with the node's address.
    pub fn node_at(&mut self, name: &str, cpu_capacity: f64, address: Option<&str>) -> &mut Self {
        self.nodes
            .push((name.into(), cpu_capacity, address.map(str::to_owned)));
        self
    }

    /// Adds a link; `bandwidth` in bytes per second, shared by both directions.
    pub fn link(&mut self, a: &str, b: &str, bandwidth: f64) -> &mut Self {
        self.links.push((a.into(), b.into(), bandwidth));
        self
    }

    /// Adds a tag published on `publisher` every `period` seconds, `size`
    /// bytes per message, with the default CPU cost per message.
    pub fn tag(&mut self, name: &str, publisher: &str, period: f64, size: f64) -> &mut Self {
        self.tag_with_cpu(name, publisher, period, size, DEFAULT_CPU_PER_MSG)
    }

    /// [`TopologyBuilder::tag`] with a CPU cost per message (seconds).
    pub fn tag_with_cpu(
        &mut self,
        name: &str,
        publisher: &str,
        period: f64,
        size: f64,
        cpu_per_msg: f64,
    ) -> &mut Self {
        self.tags.push(TagSpec {
            name: name.into(),
            publisher: publisher.into(),
            period: Some(period),
            rate: None,
            size,
            cpu_per_msg,
        });
        self
    }

    /// Adds a subscription named `name` to `tag` on `node`, every `scale`-th
    /// sample, delay bound in seconds.
    pub fn subscription(
        &mut self,
        name: &str,
        tag: &str,
        node: &str,
        scale: i64,
        delay_bound: f64,
    ) -> &mut Self {
        self.subs.push(SubSpec {
            name: Some(name.into()),
            tag: tag.into(),
            node: node.into(),
            scale,
            delay_bound,
        });
        self
    }

    /// Validates and computes the shortest paths.
    pub fn build(&self) -> Result<Topology, TopologyError> {
        if self.nodes.is_empty() {
            return Err(TopologyError::NoNodes);
        }
        let mut node_ix = HashMap::new();
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for (name, cpu, address) in &self.nodes {
            if node_ix.insert(name.as_str(), NodeId(nodes.len())).is_some() {
                return Err(dup("node", name));
            }
            non_negative(&format!("node {name:?} cpu_capacity"), *cpu)?;
            nodes.push(Node {
                name: name.clone(),
                cpu_capacity: *cpu,
                address: address.clone(),
            });
        }
        let lookup = |place: String, name: &str| {
            node_ix
                .get(name)
                .copied()
                .ok_or_else(|| TopologyError::UnknownNode {
                    place,
                    node: name.into(),
                })
        };
        let mut links = Vec::with_capacity(self.links.len());
        let mut pairs = HashMap::new();
        for (i, (a, b, bw)) in self.links.iter().enumerate() {
            let na = lookup(format!("link {i} (a)"), a)?;
            let nb = lookup(format!("link {i} (b)"), b)?;
            if na == nb {
                return Err(TopologyError::SelfLink {
                    index: i,
                    node: a.clone(),
                });
            }
            if let Some(first) = pairs.insert((na.min(nb), na.max(nb)), i) {
                return Err(TopologyError::DuplicateLink {
                    first,
                    second: i,
                    a: a.clone(),
                    b: b.clone(),
                });
            }
            positive(&format!("link {i} ({a}-{b}) bandwidth"), *bw)?;
            links.push(Link {
                a: na,
                b: nb,
                bandwidth: *bw,
            });
        }
        let mut tag_ix = HashMap::new();
        let mut tags = Vec::with_capacity(self.tags.len());
        for t in &self.tags {
            if tag_ix.insert(t.name.as_str(), TagId(tags.len())).is_some() {
                return Err(dup("tag", &t.name));
            }
            let period = match (t.period, t.rate) {
                (Some(p), None) => {
                    positive(&format!("tag {:?} period", t.name), p)?;
                    p
                }
                (None, Some(r)) => {
                    positive(&format!("tag {:?} rate", t.name), r)?;
                    1.0 / r
                }
                _ => {
                    return Err(TopologyError::PeriodOrRate {
                        tag: t.name.clone(),
                    })
                }
            };
            positive(&format!("tag {:?} size", t.name), t.size)?;
            non_negative(&format!("tag {:?} cpu_per_msg", t.name), t.cpu_per_msg)?;
            if !t.size.is_finite() || !period.is_finite() || !t.cpu_per_msg.is_finite() {
                return Err(TopologyError::OutOfRange {
                    what: format!("tag {:?} period, size or cpu_per_msg", t.name),
                    value: f64::INFINITY,
                    rule: "finite",
                });
            }
            tags.push(Tag {
                name: t.name.clone(),
                publisher: lookup(format!("tag {:?} publisher", t.name), &t.publisher)?,
                period,
                size: t.size,
                cpu_per_msg: t.cpu_per_msg,
            });
        }
        let mut sub_names = HashMap::new();
        let mut subscriptions = Vec::with_capacity(self.subs.len());
        for s in &self.subs {
            let name = s
                .name
                .clone()
                .unwrap_or_else(|| format!("{}@{}", s.tag, s.node));
            if sub_names.insert(name.clone(), ()).is_some() {
                return Err(dup("subscription", &name));
            }
            let tag =
                tag_ix
                    .get(s.tag.as_str())
                    .copied()
                    .ok_or_else(|| TopologyError::UnknownTag {
                        subscription: name.clone(),
                        tag: s.tag.clone(),
                    })?;
            let node = lookup(format!("subscription {name:?} node"), &s.node)?;
            let scale = u32::try_from(s.scale)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| TopologyError::BadScale {
                    subscription: name.clone(),
                    scale: s.scale,
                })?;
            non_negative(&format!("subscription {name:?} delay_bound"), s.delay_bound)?;
            subscriptions.push(Subscription {
                name,
                tag,
                node,
                scale,
                delay_bound: s.delay_bound,
            });
        }
        let routes = Routes::new(nodes.len(), &links);
        let unreachable: Vec<String> = (0..nodes.len())
            .filter(|&v| !routes.reachable(NodeId(0), NodeId(v)))
            .map(|v| nodes[v].name.clone())
            .collect();
        if !unreachable.is_empty() {
            return Err(TopologyError::Disconnected {
                from: nodes[0].name.clone(),
                unreachable,
            });
        }
        Ok(Topology {
            nodes,
            links,
            tags,
            subscriptions,
            routes,
        })
    }
}

fn dup(kind: &'static str, name: &str) -> TopologyError {
    TopologyError::Duplicate {
        kind,
        name: name.into(),
    }
}

fn positive(what: &str, value: f64) -> Result<(), TopologyError> {
    // `!(value > 0.0)` also rejects NaN.
    if value > 0.0 {
        return Ok(());
    }
    Err(TopologyError::OutOfRange {
        what: what.into(),
        value,
        rule: "> 0",
    })
}

fn non_negative(what: &str, value: f64) -> Result<(), TopologyError> {
    if value >= 0.0 {
        return Ok(());
    }
    Err(TopologyError::OutOfRange {
        what: what.into(),
        value,
        rule: ">= 0",
    })
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node#{}", self.0)
    }
}

// ---------------------------------------------------------------------------
// The file format (serde), turned into a builder.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    #[serde(default)]
    defaults: Defaults,
    #[serde(default)]
    node: Vec<NodeFile>,
    #[serde(default)]
    link: Vec<LinkFile>,
    #[serde(default)]
    tag: Vec<TagFile>,
    #[serde(default)]
    subscription: Vec<SubFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Defaults {
    #[serde(default = "default_cpu_capacity")]
    cpu_capacity: Number,
    #[serde(default = "default_cpu_per_msg")]
    cpu_per_msg: Number,
    #[serde(default = "unlimited")]
    bandwidth: Number,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            cpu_capacity: default_cpu_capacity(),
            cpu_per_msg: default_cpu_per_msg(),
            bandwidth: unlimited(),
        }
    }
}

fn default_cpu_capacity() -> Number {
    Number(DEFAULT_CPU_CAPACITY)
}
fn default_cpu_per_msg() -> Number {
    Number(DEFAULT_CPU_PER_MSG)
}
fn unlimited() -> Number {
    Number(f64::INFINITY)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFile {
    name: String,
    cpu_capacity: Option<Number>,
    address: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkFile {
    a: String,
    b: String,
    bandwidth: Option<Number>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TagFile {
    name: String,
    publisher: String,
    period: Option<Number>,
    rate: Option<Number>,
    size: Number,
    cpu_per_msg: Option<Number>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubFile {
    name: Option<String>,
    tag: String,
    node: String,
    #[serde(default = "one")]
    scale: i64,
    delay_bound: Number,
}

fn one() -> i64 {
    1
}

/// A TOML number written as an integer or a float.
#[derive(Debug, Clone, Copy)]
struct Number(f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Number, E> {
                Ok(Number(v))
            }
        }
        d.deserialize_any(Visit)
    }
}

impl TopologyFile {
    fn into_builder(self) -> TopologyBuilder {
        let d = &self.defaults;
        let mut b = TopologyBuilder::new();
        for n in &self.node {
            b.node_at(
                &n.name,
                n.cpu_capacity.unwrap_or(d.cpu_capacity).0,
                n.address.as_deref(),
            );
        }
        for l in &self.link {
            b.link(&l.a, &l.b, l.bandwidth.unwrap_or(d.bandwidth).0);
        }
        for t in self.tag {
            b.tags.push(TagSpec {
                name: t.name,
                publisher: t.publisher,
                period: t.period.map(|n| n.0),
                rate: t.rate.map(|n| n.0),
                size: t.size.0,
                cpu_per_msg: t.cpu_per_msg.unwrap_or(d.cpu_per_msg).0,
            });
        }
        for s in self.subscription {
            b.subs.push(SubSpec {
                name: s.name,
                tag: s.tag,
                node: s.node,
                scale: s.scale,
                delay_bound: s.delay_bound.0,
            });
        }
        b
    }
}
