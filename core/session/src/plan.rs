//! Routing plan of one tag: which nodes a node's forwarder sends to, how,
//! and which samples (temporal scaling by proxies, push-pull model).
//!
//! Every daemon computes the plan from the same replicated tag table, so the
//! publishers' nodes, the proxy nodes and the subscribers' nodes agree on
//! it without talking. Each node with receivers gets each sample exactly
//! once, by one of three routes:
//!
//! * **direct**: every publishing node sends it the samples any of its
//!   receivers wants: all of them, or with proxies at the publisher
//!   ([`Proxy::Publisher`]) only every n-th (the gcd over its receivers);
//! * **via a proxy node** P, when all its receivers name the same
//!   [`Proxy::Node`] P: every publishing node sends P the whole stream (P
//!   is *fed*), and P's forwarder relays every n-th sample, whichever node
//!   published it, to the subscribers' node. A node that is itself a proxy
//!   is fed directly and never routed through another proxy (no chains,
//!   no second copy). A proxy node that is not up (unknown, or dead after
//!   its lease) is not used: its subscribers' nodes fall back to the
//!   direct route with the filter at the publisher, so a proxy's death
//!   costs at most a lease of samples;
//! * **multicast**: a node whose receivers want the multicast carrier is
//!   never routed through a proxy (its copy comes from the group).
//!
//! Pure: no sockets, no locks; unit-tested below. The daemon computes a
//! plan per tag from its table and hands this node's legs, with addresses,
//! to [`crate::SendSession::set_routes`] as [`crate::Dest`]s.

use std::collections::{BTreeMap, BTreeSet};

use tagwire_wire::{Carrier, ChannelQos, NodeAddr, Priority, Proxy, Reliability};

/// How a node gets its copy: the strongest any of its receivers asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// Datagrams with sequence numbers only.
    BestEffort,
    /// Best-effort datagrams to the tag's multicast group, one for all such
    /// nodes.
    Multicast,
    /// Datagrams through a window (`tagwire_reliable::Writer`).
    Reliable,
    /// A TCP connection.
    Tcp,
}

impl Mode {
    /// The mode a receiver's subscription options ask for.
    pub fn of(q: &ChannelQos) -> Self {
        match (q.carrier, q.reliability) {
            (Carrier::Tcp, _) => Mode::Tcp,
            (Carrier::Multicast, _) => Mode::Multicast,
            (Carrier::Udp, Reliability::Reliable) => Mode::Reliable,
            (Carrier::Udp, Reliability::BestEffort) => Mode::BestEffort,
        }
    }
}

/// Where one of a node's forwarder sends a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leg {
    /// The node that gets the samples.
    pub node: NodeAddr,
    /// How it gets them.
    pub mode: Mode,
    /// Only samples whose publisher sequence number is a multiple of this.
    pub every: u32,
    /// Also samples other nodes published (this node is the proxy of
    /// `node`), except those `node` published itself.
    pub relay: bool,
    /// The packet class: the highest its receivers ask (a proxy's: the
    /// highest of the nodes it serves too).
    pub priority: Priority,
}

/// What a node's receivers ask, folded.
#[derive(Debug, Clone, Copy)]
struct Need {
    mode: Mode,
    /// gcd of what the filter at the sending side may keep.
    every: u32,
    /// The proxy node all receivers name; `None` once one names another
    /// place.
    proxy: Option<NodeAddr>,
    /// The highest packet class its receivers ask.
    priority: Priority,
}

/// One tag's routes, seen from any node.
#[derive(Debug)]
pub struct Plan {
    needs: BTreeMap<NodeAddr, Need>,
    /// Subscribers' node → the proxy node feeding it.
    via: BTreeMap<NodeAddr, NodeAddr>,
    /// Proxy node → the strongest mode of the nodes it feeds.
    fed: BTreeMap<NodeAddr, (Mode, Priority)>,
}

/// Greatest common divisor (`gcd(a, 0) == a`).
pub fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The one of two packet classes that goes first ([`Priority::rank`]).
pub fn highest(a: Priority, b: Priority) -> Priority {
    if b.rank() > a.rank() {
        b
    } else {
        a
    }
}

impl Plan {
    /// The plan for a tag with these receivers (node and subscription
    /// options), where `up` says which nodes may serve as proxies.
    pub fn new(
        receivers: impl IntoIterator<Item = (NodeAddr, ChannelQos)>,
        up: impl Fn(NodeAddr) -> bool,
    ) -> Self {
        let mut needs: BTreeMap<NodeAddr, Need> = BTreeMap::new();
        for (node, q) in receivers {
            let mode = Mode::of(&q);
            let (every, proxy) = match q.proxy {
                // The node's own daemon as proxy: the whole stream reaches
                // it, as with the subscriber's library.
                Proxy::Subscriber => (1, None),
                Proxy::Node(p) if p == node => (1, None),
                // `Auto` is resolved before (crate::auto); unresolved, it
                // is at the publisher.
                Proxy::Publisher | Proxy::Auto { .. } => (q.every.max(1), None),
                Proxy::Node(p) => (q.every.max(1), Some(p)),
            };
            let priority = q.priority;
            needs
                .entry(node)
                .and_modify(|n| {
                    n.mode = n.mode.max(mode);
                    n.every = gcd(n.every, every);
                    if n.proxy != proxy {
                        n.proxy = None;
                    }
                    n.priority = highest(n.priority, priority);
                })
                .or_insert(Need {
                    mode,
                    every,
                    proxy,
                    priority,
                });
        }
        let named: BTreeSet<NodeAddr> = needs
            .iter()
            .filter_map(|(node, n)| n.proxy.filter(|p| p != node))
            .collect();
        let mut via = BTreeMap::new();
        let mut fed: BTreeMap<NodeAddr, (Mode, Priority)> = BTreeMap::new();
        for (node, n) in &needs {
            let Some(p) = n.proxy else { continue };
            if n.mode == Mode::Multicast || named.contains(node) || !up(p) {
                continue;
            }
            via.insert(*node, p);
            let m = fed.entry(p).or_insert((n.mode, n.priority));
            *m = (m.0.max(n.mode), highest(m.1, n.priority));
        }
        Self { needs, via, fed }
    }

    /// How `node` gets its copy from a node that does not proxy for it:
    /// `None` if it needs none.
    fn direct(&self, node: NodeAddr) -> Option<(Mode, u32, Priority)> {
        let own = self.needs.get(&node).map(|n| (n.mode, n.every, n.priority));
        match (own, self.fed.get(&node)) {
            (None, None) => None,
            (Some(own), None) => Some(own),
            (own, Some(&(feed, feed_priority))) => {
                let mode = own.map_or(feed, |o| o.0.max(feed));
                let priority = own.map_or(feed_priority, |o| highest(o.2, feed_priority));
                // A fed proxy needs every sample on one unicast stream; its
                // own multicast receivers take them from it.
                let mode = if mode == Mode::Multicast {
                    Mode::BestEffort
                } else {
                    mode
                };
                Some((mode, 1, priority))
            }
        }
    }

    /// Where the forwarder of node `me` sends the tag.
    pub fn legs(&self, me: NodeAddr) -> Vec<Leg> {
        let nodes: BTreeSet<NodeAddr> = self
            .needs
            .keys()
            .chain(self.fed.keys())
            .copied()
            .filter(|n| *n != me)
            .collect();
        let mut legs = Vec::new();
        for node in nodes {
            match self.via.get(&node) {
                Some(p) if *p == me => {
                    if let Some(n) = self.needs.get(&node) {
                        legs.push(Leg {
                            node,
                            mode: n.mode,
                            every: n.every,
                            relay: true,
                            priority: n.priority,
                        });
                    }
                }
                Some(_) => {} // its proxy node is fed instead
                None => {
                    if let Some((mode, every, priority)) = self.direct(node) {
                        legs.push(Leg {
                            node,
                            mode,
                            every,
                            relay: false,
                            priority,
                        });
                    }
                }
            }
        }
        legs
    }

    /// Whether `node` is a proxy that other nodes' copies go through.
    pub fn feeds_others(&self, node: NodeAddr) -> bool {
        self.fed.contains_key(&node)
    }

    /// How node `me` receives the tag from other nodes (`None`: it has no
    /// receivers and proxies for nobody): whether to join the multicast
    /// group.
    pub fn mode_of(&self, me: NodeAddr) -> Option<Mode> {
        match self.via.get(&me) {
            Some(_) => self.needs.get(&me).map(|n| n.mode),
            None => self.direct(me).map(|(mode, _, _)| mode),
        }
    }
}

/// Direct delivery (docs/design.md §6): whether the tag's stream to `node`
/// goes straight to the socket of its sole receiving process, and which
/// one (`key`) at which port. Every node decides it alike from the same
/// table: yes when `node` has exactly one receiver, it asked for the
/// default carrier (unicast UDP, every sample, no proxy node) with its own
/// socket (`ChannelQos::direct`), `node` has no publisher of the tag (its
/// messages reach that receiver through the ring, which the node's
/// delivery manager then also feeds) and proxies for no other node
/// (`proxy`: [`Plan::feeds_others`]).
pub fn direct_port<K>(
    node: NodeAddr,
    receivers: impl IntoIterator<Item = (NodeAddr, ChannelQos, K)>,
    mut senders: impl Iterator<Item = NodeAddr>,
    proxy: bool,
) -> Option<(K, u16)> {
    if proxy || senders.any(|s| s == node) {
        return None;
    }
    let mut sole = None;
    for (n, q, key) in receivers {
        if n != node {
            continue;
        }
        if sole.is_some() {
            return None;
        }
        sole = Some((q, key));
    }
    let (q, key) = sole?;
    let via_proxy = matches!(q.proxy, Proxy::Node(p) if p != node);
    let plain = q.carrier == Carrier::Udp && q.every <= 1 && !via_proxy;
    (plain && q.direct != 0).then_some((key, q.direct))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: u8) -> NodeAddr {
        NodeAddr(std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, i)))
    }

    fn qos(every: u32, proxy: Proxy) -> ChannelQos {
        ChannelQos {
            every,
            proxy,
            ..ChannelQos::default()
        }
    }

    fn leg(n: u8, mode: Mode, every: u32, relay: bool) -> Leg {
        Leg {
            priority: Default::default(),
            node: node(n),
            mode,
            every,
            relay,
        }
    }

    const R: Mode = Mode::Reliable;

    #[test]
    fn direct_routes_filter_at_the_publisher_only_when_asked() {
        let p = Plan::new(
            [
                (node(2), qos(10, Proxy::Publisher)),
                (node(3), qos(10, Proxy::Subscriber)),
                (node(4), qos(10, Proxy::Publisher)),
                (node(4), qos(4, Proxy::Publisher)),
            ],
            |_| true,
        );
        assert_eq!(
            p.legs(node(1)),
            vec![
                leg(2, R, 10, false),
                leg(3, R, 1, false),
                leg(4, R, 2, false)
            ]
        );
    }

    #[test]
    fn an_intermediate_proxy_is_fed_the_whole_stream_and_relays_every_nth() {
        let via2 = Proxy::Node(node(2));
        let p = Plan::new([(node(3), qos(10, via2)), (node(4), qos(5, via2))], |_| {
            true
        });
        // The publisher's node (1) feeds only the proxy.
        assert_eq!(p.legs(node(1)), vec![leg(2, R, 1, false)]);
        // The proxy relays to each subscribers' node at its own rate.
        assert_eq!(
            p.legs(node(2)),
            vec![leg(3, R, 10, true), leg(4, R, 5, true)]
        );
        // A publisher on a subscribers' node feeds the proxy too (the proxy
        // does not send that node its own messages back: `relay`).
        assert_eq!(p.legs(node(3)), vec![leg(2, R, 1, false)]);
        assert_eq!(p.mode_of(node(2)), Some(R));
        assert_eq!(p.mode_of(node(3)), Some(R));
    }

    #[test]
    fn a_proxy_with_its_own_receivers_gets_every_sample_once() {
        let p = Plan::new(
            [
                (node(2), qos(100, Proxy::Publisher)),
                (node(3), qos(10, Proxy::Node(node(2)))),
            ],
            |_| true,
        );
        assert_eq!(p.legs(node(1)), vec![leg(2, R, 1, false)]);
    }

    #[test]
    fn an_unresolved_auto_proxy_filters_at_the_publisher() {
        // A daemon without a topology leaves `Auto` as it is.
        let p = Plan::new(
            [(
                node(3),
                qos(10, Proxy::auto(std::time::Duration::from_millis(5))),
            )],
            |_| true,
        );
        assert_eq!(p.legs(node(1)), vec![leg(3, R, 10, false)]);
    }

    #[test]
    fn a_dead_proxy_falls_back_to_filtering_at_the_publisher() {
        let p = Plan::new([(node(3), qos(10, Proxy::Node(node(2))))], |n| n != node(2));
        assert_eq!(p.legs(node(1)), vec![leg(3, R, 10, false)]);
        assert!(p.legs(node(2)).iter().all(|l| !l.relay), "2 relays nothing");
    }

    #[test]
    fn mixed_or_self_named_or_multicast_nodes_are_served_directly() {
        let mcast = ChannelQos {
            carrier: Carrier::Multicast,
            ..qos(10, Proxy::Node(node(2)))
        };
        let p = Plan::new(
            [
                // Two receivers that disagree on the place.
                (node(3), qos(10, Proxy::Node(node(2)))),
                (node(3), qos(10, Proxy::Publisher)),
                // A node naming itself: the whole stream reaches it.
                (node(4), qos(10, Proxy::Node(node(4)))),
                (node(5), mcast),
            ],
            |_| true,
        );
        assert_eq!(
            p.legs(node(1)),
            vec![
                leg(3, R, 10, false),
                leg(4, R, 1, false),
                leg(5, Mode::Multicast, 10, false)
            ]
        );
        assert!(p.legs(node(2)).iter().all(|l| !l.relay), "2 relays nothing");
    }

    #[test]
    fn a_node_that_proxies_for_others_is_never_routed_through_a_proxy() {
        // 3 proxies for 4, and names 2 for itself: 3 is fed directly (by
        // the publisher), so it does not get the stream twice.
        let p = Plan::new(
            [
                (node(3), qos(10, Proxy::Node(node(2)))),
                (node(4), qos(10, Proxy::Node(node(3)))),
            ],
            |_| true,
        );
        assert_eq!(p.legs(node(1)), vec![leg(3, R, 1, false)]);
        assert!(p.legs(node(2)).iter().all(|l| !l.relay), "2 relays nothing");
        assert_eq!(p.legs(node(3)), vec![leg(4, R, 10, true)]);
    }

    #[test]
    fn a_fed_proxy_with_multicast_receivers_takes_a_unicast_copy() {
        let mcast = ChannelQos {
            carrier: Carrier::Multicast,
            ..ChannelQos::default()
        };
        let best = ChannelQos {
            reliability: Reliability::BestEffort,
            ..qos(10, Proxy::Node(node(2)))
        };
        let p = Plan::new([(node(2), mcast), (node(3), best)], |_| true);
        assert_eq!(p.legs(node(1)), vec![leg(2, Mode::BestEffort, 1, false)]);
        assert_eq!(p.mode_of(node(2)), Some(Mode::BestEffort));
    }

    #[test]
    fn a_sole_plain_receiver_with_its_own_socket_gets_the_stream_directly() {
        let direct = |port| ChannelQos {
            direct: port,
            ..ChannelQos::default()
        };
        let (a, b) = (node(1), node(2));
        let none = std::iter::empty;
        // One receiver on b, with a socket: direct, whoever publishes.
        assert_eq!(
            direct_port(b, [(b, direct(7000), 'x')], [a].into_iter(), false),
            Some(('x', 7000))
        );
        // Receivers elsewhere do not count.
        assert_eq!(
            direct_port(
                b,
                [(a, direct(1), 'y'), (b, direct(7000), 'x')],
                none(),
                false
            ),
            Some(('x', 7000))
        );
        // No socket, two receivers, a publisher on b, b a proxy: no.
        assert_eq!(direct_port(b, [(b, direct(0), 'x')], none(), false), None);
        assert_eq!(
            direct_port(
                b,
                [(b, direct(7000), 'x'), (b, direct(7001), 'z')],
                none(),
                false
            ),
            None
        );
        assert_eq!(
            direct_port(b, [(b, direct(7000), 'x')], [b].into_iter(), false),
            None
        );
        assert_eq!(direct_port(b, [(b, direct(7000), 'x')], none(), true), None);
        // Not the default carrier: TCP, multicast, scaled, through a proxy node.
        for q in [
            ChannelQos {
                carrier: Carrier::Tcp,
                ..direct(7000)
            },
            ChannelQos {
                carrier: Carrier::Multicast,
                ..direct(7000)
            },
            ChannelQos {
                every: 2,
                ..direct(7000)
            },
            ChannelQos {
                proxy: Proxy::Node(node(3)),
                ..direct(7000)
            },
        ] {
            assert_eq!(direct_port(b, [(b, q, 'x')], none(), false), None, "{q:?}");
        }
        // Best effort and its own node as proxy are fine.
        let best = ChannelQos {
            reliability: Reliability::BestEffort,
            ..direct(7000)
        };
        assert_eq!(
            direct_port(b, [(b, best, 'x')], none(), false),
            Some(('x', 7000))
        );
        let own = ChannelQos {
            proxy: Proxy::Node(b),
            ..direct(7000)
        };
        assert_eq!(
            direct_port(b, [(b, own, 'x')], none(), false),
            Some(('x', 7000))
        );
    }
}
