//! `Proxy::Auto`: the daemons place scaled subscriptions' proxies with
//! `tagwire-place` over the topology file they were started with
//! (`tagwired --topology FILE`, the `tagwire place` format with an
//! `address` per node).
//!
//! Every daemon resolves the same way from the same replicated table and
//! the same file (give every node the same file, as with the node list), so
//! the publishers', proxies' and subscribers' nodes agree without talking:
//!
//! * the tag's `[[tag]]` entry gives its period, message size and proxy CPU
//!   per message; its publisher is the node of the live sender (the lowest
//!   address when several nodes publish), or the file's `publisher` while
//!   nobody publishes; the file's `[[subscription]]`s are not used;
//! * the tag's `Auto` receivers are the subscriptions (node, scale, delay
//!   bound); receivers with a fixed place are not part of the problem;
//! * a node without an address, or that is not up (other than the
//!   publisher's and the subscribers' own), offers no CPU, so no proxy
//!   lands there;
//! * the push-pull paper's exhaustive algorithm (one proxy node for the
//!   tag, [`CostModel::Shared`]: one full-rate copy per proxy node, which is
//!   what the delivery managers send) takes the cheapest node meeting every
//!   bound. When no single node meets them all, each subscription is placed
//!   alone; one that no node serves keeps the place with the least delay,
//!   its own node;
//! * the chosen node becomes [`Proxy::Subscriber`] on the subscriber's node,
//!   [`Proxy::Publisher`] on the publisher's, and [`Proxy::Node`] elsewhere,
//!   which `tagwire_session::plan::Plan` routes.
//!
//! A subscription is admitted by its own daemon only if it can be placed
//! alone ([`Placer::admit`]): otherwise the subscriber gets the solver's
//! explanation. Pure but for a log line when a placement changes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use tagwire_place::{
    exhaustive, CostModel, NodeId, Objective, Options, PlaceError, Topology, TopologyBuilder,
};
use tagwire_wire::{ChannelQos, NodeAddr, Proxy, TagName};

/// The topology a daemon places `Auto` proxies in.
#[derive(Debug)]
pub(crate) struct Placer {
    topo: Topology,
    /// Where the file came from, for messages.
    origin: String,
    /// Each node's address, by [`NodeId`].
    addrs: Vec<Option<NodeAddr>>,
    /// The last placement of each tag, to log changes.
    last: Mutex<HashMap<TagName, Vec<Placed>>>,
}

/// A subscriber's node, its scale and where its proxy was placed.
type Placed = (NodeAddr, u32, Proxy);

/// One `Auto` subscription of a tag.
#[derive(Debug, Clone, Copy)]
struct Want {
    node: NodeId,
    every: u32,
    /// Seconds (`inf`: unbounded).
    bound: f64,
}

impl Placer {
    /// Reads a topology file.
    pub(crate) fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Parses a topology; every node's `address` (or a name that is an IP
    /// address) must be a valid and unique IP address.
    pub(crate) fn from_toml(text: &str, origin: &str) -> Result<Self, String> {
        let topo = Topology::from_toml(text).map_err(|e| format!("{origin}: {e}"))?;
        let mut addrs = Vec::with_capacity(topo.nodes().len());
        let mut seen = HashMap::new();
        for n in topo.nodes() {
            let addr = match &n.address {
                Some(a) => Some(a.parse::<IpAddr>().map_err(|_| {
                    format!(
                        "{origin}: node {:?} has address {a:?}, which is not an IP address",
                        n.name
                    )
                })?),
                None => n.name.parse::<IpAddr>().ok(),
            }
            .map(NodeAddr);
            if let Some(a) = addr {
                if let Some(other) = seen.insert(a, n.name.clone()) {
                    return Err(format!(
                        "{origin}: nodes {other:?} and {:?} both have address {a}",
                        n.name
                    ));
                }
            }
            addrs.push(addr);
        }
        Ok(Self {
            topo,
            origin: origin.to_owned(),
            addrs,
            last: Mutex::new(HashMap::new()),
        })
    }

    fn node_of(&self, a: NodeAddr) -> Option<NodeId> {
        self.addrs.iter().position(|x| *x == Some(a)).map(NodeId)
    }

    /// The tag's entry in the file and its publisher's node.
    fn tag(
        &self,
        name: &TagName,
        publishers: &[NodeAddr],
    ) -> Result<(&tagwire_place::Tag, NodeId), String> {
        let tag = self
            .topo
            .tags()
            .iter()
            .find(|t| t.name == name.as_str())
            .ok_or_else(|| {
                format!(
                    "tag {name} is not in the topology file {}: add a [[tag]] with its \
                     publisher, rate (or period) and size",
                    self.origin
                )
            })?;
        let publisher = match publishers.iter().min() {
            Some(p) => self.node_of(*p).ok_or_else(|| {
                format!(
                    "tag {name} is published on {p}, which no [[node]] of {} has as its address",
                    self.origin
                )
            })?,
            None => tag.publisher,
        };
        Ok((tag, publisher))
    }

    /// Checks, on the subscriber's own daemon, that a new `Auto`
    /// subscription of `qos` on `node` can be placed on its own.
    pub(crate) fn admit(
        &self,
        name: &TagName,
        publishers: &[NodeAddr],
        node: NodeAddr,
        qos: &ChannelQos,
    ) -> Result<(), String> {
        let (tag, publisher) = self.tag(name, publishers)?;
        let at = self.node_of(node).ok_or_else(|| {
            format!(
                "this node ({node}) is not in the topology file {}: give its [[node]] \
                 `address = \"{node}\"`",
                self.origin
            )
        })?;
        let want = Want {
            node: at,
            every: qos.every.max(1),
            bound: bound_of(qos),
        };
        let problem = self
            .problem(tag, publisher, &[want], |_| true)
            .map_err(|e| format!("{}: {e}", self.origin))?;
        match exhaustive::solve(&problem, &options()) {
            Ok(_) => Ok(()),
            Err(e) => Err(format!(
                "{name} every {} with proxy {}: {}",
                want.every,
                qos.proxy,
                explain(&e)
            )),
        }
    }

    /// Replaces the `Auto` places of a tag's receivers by concrete ones.
    /// Receivers whose node is not in the file, and tags not in it, get
    /// [`Proxy::Publisher`].
    pub(crate) fn resolve(
        &self,
        name: &TagName,
        publishers: &[NodeAddr],
        receivers: &mut [(NodeAddr, ChannelQos)],
        up: impl Fn(NodeAddr) -> bool,
    ) {
        let auto: Vec<usize> = (0..receivers.len())
            .filter(|&i| matches!(receivers[i].1.proxy, Proxy::Auto { .. }))
            .collect();
        if auto.is_empty() {
            return;
        }
        let placed = self.place(name, publishers, receivers, &auto, up);
        for (&i, p) in auto.iter().zip(&placed) {
            receivers[i].1.proxy = *p;
        }
        let mut now: Vec<Placed> = auto
            .iter()
            .map(|&i| (receivers[i].0, receivers[i].1.every, receivers[i].1.proxy))
            .collect();
        now.sort_by_key(|(n, e, p)| (*n, *e, p.to_string()));
        let mut last = crate::lock(&self.last);
        if last.get(name) != Some(&now) {
            for (node, every, proxy) in &now {
                tracing::info!(tag = %name, subscriber = %node, every, %proxy, "auto proxy placed");
            }
            last.insert(name.clone(), now);
        }
    }

    fn place(
        &self,
        name: &TagName,
        publishers: &[NodeAddr],
        receivers: &[(NodeAddr, ChannelQos)],
        auto: &[usize],
        up: impl Fn(NodeAddr) -> bool,
    ) -> Vec<Proxy> {
        let Ok((tag, publisher)) = self.tag(name, publishers) else {
            return vec![Proxy::Publisher; auto.len()];
        };
        let wants: Vec<Option<Want>> = auto
            .iter()
            .map(|&i| {
                let (node, q) = &receivers[i];
                Some(Want {
                    node: self.node_of(*node)?,
                    every: q.every.max(1),
                    bound: bound_of(q),
                })
            })
            .collect();
        let known: Vec<Want> = wants.iter().flatten().copied().collect();
        let usable = |x: NodeId| {
            x == publisher || known.iter().any(|w| w.node == x) || self.addrs[x.0].is_some_and(&up)
        };
        let to_proxy = |w: &Want, x: NodeId| {
            if x == w.node {
                Proxy::Subscriber
            } else if x == publisher {
                Proxy::Publisher
            } else {
                self.addrs[x.0].map_or(Proxy::Publisher, Proxy::Node)
            }
        };
        let solve = |ws: &[Want]| -> Option<Vec<NodeId>> {
            let problem = self.problem(tag, publisher, ws, usable).ok()?;
            let placed = exhaustive::solve(&problem, &options()).ok()?;
            placed
                .assignments
                .iter()
                .map(|a| problem.node_id(&a.proxy))
                .collect()
        };
        // One proxy node for all, else each alone, else its own node.
        let chosen: Vec<NodeId> = solve(&known).unwrap_or_else(|| {
            known
                .iter()
                .map(|w| {
                    solve(std::slice::from_ref(w))
                        .and_then(|x| x.first().copied())
                        .unwrap_or(w.node)
                })
                .collect()
        });
        let mut chosen = known.iter().zip(chosen).map(|(w, x)| to_proxy(w, x));
        wants
            .iter()
            .map(|w| match w {
                Some(_) => chosen.next().unwrap_or(Proxy::Publisher),
                None => Proxy::Publisher,
            })
            .collect()
    }

    /// The file's network with one tag and these subscriptions (named by
    /// their node); nodes `usable` rejects offer no CPU.
    fn problem(
        &self,
        tag: &tagwire_place::Tag,
        publisher: NodeId,
        wants: &[Want],
        usable: impl Fn(NodeId) -> bool,
    ) -> Result<Topology, tagwire_place::TopologyError> {
        let nodes = self.topo.nodes();
        let mut b = TopologyBuilder::new();
        for (i, n) in nodes.iter().enumerate() {
            let usable = self.addrs[i].is_some() && usable(NodeId(i));
            b.node(&n.name, if usable { n.cpu_capacity } else { 0.0 });
        }
        for l in self.topo.links() {
            b.link(&nodes[l.a.0].name, &nodes[l.b.0].name, l.bandwidth);
        }
        b.tag_with_cpu(
            &tag.name,
            &nodes[publisher.0].name,
            tag.period,
            tag.size,
            tag.cpu_per_msg,
        );
        for (k, w) in wants.iter().enumerate() {
            let node = &nodes[w.node.0].name;
            let name = if wants.len() == 1 {
                format!("on {node}")
            } else {
                format!("#{k} on {node}")
            };
            b.subscription(
                &name,
                &tag.name,
                &nodes[w.node.0].name,
                i64::from(w.every),
                w.bound,
            );
        }
        b.build()
    }
}

fn options() -> Options {
    Options {
        model: CostModel::Shared,
        objective: Objective::Bandwidth,
        ..Options::default()
    }
}

fn bound_of(q: &ChannelQos) -> f64 {
    q.proxy
        .delay_bound()
        .map_or(f64::INFINITY, |d| d.as_secs_f64())
}

/// The solver's explanation on one line.
fn explain(e: &PlaceError) -> String {
    e.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn addr(i: u8) -> NodeAddr {
        NodeAddr(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, i)))
    }

    fn auto(every: u32, bound_ms: u64) -> ChannelQos {
        ChannelQos {
            every,
            proxy: Proxy::auto(Duration::from_millis(bound_ms)),
            ..ChannelQos::default()
        }
    }

    /// The push-pull paper's Appendix A star: node 5 is the hub, the
    /// publisher is on node 1, subscribers on nodes 3 and 4; T = 10 ms and
    /// the subscribers ask for every 4th sample (T' = 40 ms).
    fn star() -> Placer {
        let mut text = String::from(
            "[[tag]]\nname = \"/star\"\npublisher = \"n1\"\nperiod = 0.01\nsize = 100\n",
        );
        for i in 1..=5 {
            text += &format!("[[node]]\nname = \"n{i}\"\naddress = \"10.0.0.{i}\"\n");
        }
        for i in 1..=4 {
            text += &format!("[[link]]\na = \"n{i}\"\nb = \"n5\"\n");
        }
        Placer::from_toml(&text, "star.toml").unwrap()
    }

    fn resolved(
        p: &Placer,
        receivers: &[(u8, ChannelQos)],
        up: impl Fn(NodeAddr) -> bool,
    ) -> Vec<Proxy> {
        let mut r: Vec<(NodeAddr, ChannelQos)> =
            receivers.iter().map(|(n, q)| (addr(*n), *q)).collect();
        let name = TagName::new("/star").unwrap();
        p.resolve(&name, &[addr(1)], &mut r, up);
        r.iter().map(|(_, q)| q.proxy).collect()
    }

    #[test]
    fn the_appendix_bound_of_two_scaled_periods_puts_the_proxy_at_the_publisher() {
        // δ at node 1 is 2T' = 80 ms for both, at the least cost (4Kf').
        let p = star();
        let got = resolved(&p, &[(3, auto(4, 80)), (4, auto(4, 80))], |_| true);
        assert_eq!(got, vec![Proxy::Publisher; 2]);
    }

    #[test]
    fn a_tighter_bound_moves_the_proxy_to_the_hub_then_to_the_subscribers() {
        let p = star();
        // At the hub δ = T + T' = 50 ms; at the publisher 80 ms.
        let got = resolved(&p, &[(3, auto(4, 50)), (4, auto(4, 50))], |_| true);
        assert_eq!(got, vec![Proxy::Node(addr(5)); 2]);
        // 20 ms: only each subscriber's own node (δ = 2T); no single node
        // serves both, so each is placed alone.
        let got = resolved(&p, &[(3, auto(4, 20)), (4, auto(4, 20))], |_| true);
        assert_eq!(got, vec![Proxy::Subscriber; 2]);
    }

    #[test]
    fn a_dead_hub_is_not_chosen() {
        let p = star();
        let got = resolved(&p, &[(3, auto(4, 50)), (4, auto(4, 50))], |n| n != addr(5));
        // The hub was the only node meeting 50 ms for both: each alone on
        // its own node.
        assert_eq!(got, vec![Proxy::Subscriber; 2]);
    }

    #[test]
    fn fixed_places_stay_and_unknown_nodes_fall_back_to_the_publisher() {
        let p = star();
        let fixed = ChannelQos {
            every: 4,
            proxy: Proxy::Node(addr(2)),
            ..ChannelQos::default()
        };
        let mut r = vec![
            (addr(3), fixed),
            (addr(9), auto(4, 80)),
            (addr(4), auto(4, 80)),
        ];
        p.resolve(&TagName::new("/star").unwrap(), &[addr(1)], &mut r, |_| {
            true
        });
        assert_eq!(r[0].1.proxy, Proxy::Node(addr(2)));
        assert_eq!(
            r[1].1.proxy,
            Proxy::Publisher,
            "10.0.0.9 is not in the file"
        );
        assert_eq!(r[2].1.proxy, Proxy::Publisher);
        let mut other = vec![(addr(3), auto(4, 80))];
        p.resolve(&TagName::new("/other").unwrap(), &[], &mut other, |_| true);
        assert_eq!(other[0].1.proxy, Proxy::Publisher, "undeclared tag");
    }

    #[test]
    fn admission_explains_what_is_missing_or_infeasible() {
        let p = star();
        let name = TagName::new("/star").unwrap();
        assert!(p.admit(&name, &[], addr(3), &auto(4, 80)).is_ok());
        let e = p.admit(&name, &[], addr(3), &auto(4, 5)).unwrap_err();
        assert!(e.contains("auto:5ms") && e.contains("/star"), "{e}");
        let e = p.admit(&name, &[], addr(9), &auto(4, 80)).unwrap_err();
        assert!(e.contains("10.0.0.9") && e.contains("address"), "{e}");
        let e = p
            .admit(&TagName::new("/nope").unwrap(), &[], addr(3), &auto(4, 80))
            .unwrap_err();
        assert!(e.contains("/nope") && e.contains("[[tag]]"), "{e}");
        let e = p
            .admit(&name, &[addr(8)], addr(3), &auto(4, 80))
            .unwrap_err();
        assert!(e.contains("published on 10.0.0.8"), "{e}");
    }

    #[test]
    fn bad_addresses_are_refused_when_loading() {
        let e =
            Placer::from_toml("[[node]]\nname = \"a\"\naddress = \"x\"\n", "t.toml").unwrap_err();
        assert!(e.contains("not an IP address"), "{e}");
        let e = Placer::from_toml(
            "[[node]]\nname = \"10.0.0.1\"\n[[node]]\nname = \"b\"\naddress = \"10.0.0.1\"\n[[link]]\na = \"10.0.0.1\"\nb = \"b\"\n",
            "t.toml",
        )
        .unwrap_err();
        assert!(e.contains("both have address 10.0.0.1"), "{e}");
    }
}
