//! Per-peer and per-link state, and the handshake and teardown rules.

use std::net::SocketAddr;
use std::time::Instant;

use tagwire_wire::control::NodeState;
use tagwire_wire::peer::PeerMessage;
use tagwire_wire::NodeAddr;

use super::{DownReason, Event, LinkId, Membership, MembershipError, OpId, Source, Transmit};

/// A peer daemon.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) name: String,
    /// Where its update manager listens (unknown for a node that only
    /// connected to us).
    pub(super) control: Option<SocketAddr>,
    pub(super) delivery: SocketAddr,
    pub(super) source: Source,
    pub(super) state: NodeState,
    pub(super) last_heard: Option<Instant>,
    /// The last incarnation that said `Hello` (or none yet).
    pub(super) incarnation: Option<u64>,
    /// Its link, while it is up. Invariant: `link == Some(l)` exactly when
    /// link `l` is in `Phase::Up(this peer)`.
    pub(super) link: Option<LinkId>,
    pub(super) dial: Dial,
}

impl Peer {
    pub(super) fn new(name: &str, delivery: SocketAddr, source: Source) -> Self {
        Self {
            name: name.to_owned(),
            control: None,
            delivery,
            source,
            state: NodeState::Connecting,
            last_heard: None,
            incarnation: None,
            link: None,
            dial: Dial::Idle,
        }
    }
}

/// Whether we are dialing a peer (only the lower address dials).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dial {
    /// Not dialing; dial when due.
    Idle,
    /// A [`Transmit::Dial`] is out; its answer is awaited.
    Pending,
    /// A link to it is open.
    Connected(LinkId),
    /// Dial again at this time.
    Wait(Instant),
}

/// Where a link is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Opened; the other side's `Hello` is awaited.
    AwaitHello,
    /// The peer said `Hello`.
    Up(NodeAddr),
}

/// One connection.
#[derive(Debug)]
pub(super) struct Link {
    pub(super) phase: Phase,
    /// The other end's address.
    pub(super) remote: SocketAddr,
    /// The node we dialed, for a link we opened.
    pub(super) dialed: Option<NodeAddr>,
    pub(super) opened: Instant,
    pub(super) last_heard: Instant,
    pub(super) last_sent: Instant,
    /// Our `Sync` was handed over ([`Membership::send_sync`]).
    pub(super) synced: bool,
    /// Ops replicated before our `Sync`, sent right after it.
    pub(super) held: Vec<PeerMessage>,
}

impl Link {
    pub(super) fn new(now: Instant, remote: SocketAddr, dialed: Option<NodeAddr>) -> Self {
        Self {
            phase: Phase::AwaitHello,
            remote,
            dialed,
            opened: now,
            last_heard: now,
            last_sent: now,
            synced: false,
            held: Vec::new(),
        }
    }
}

/// What a `Hello` says.
struct Hello {
    node: NodeAddr,
    name: String,
    incarnation: u64,
    delivery_port: u16,
}

impl Membership {
    pub(super) fn message(
        &mut self,
        now: Instant,
        link: LinkId,
        msg: PeerMessage,
    ) -> Result<(), MembershipError> {
        let l = self
            .links
            .get_mut(&link)
            .ok_or(MembershipError::UnknownLink(link))?;
        l.last_heard = now;
        let peer = match (l.phase, msg) {
            (
                Phase::AwaitHello,
                PeerMessage::Hello {
                    node,
                    name,
                    incarnation,
                    delivery_port,
                },
            ) => {
                let hello = Hello {
                    node,
                    name,
                    incarnation,
                    delivery_port,
                };
                return self.hello(now, link, hello);
            }
            (Phase::AwaitHello, other) => return Err(MembershipError::BeforeHello(kind(&other))),
            (Phase::Up(peer), msg) => (peer, msg),
        };
        let (peer, msg) = peer;
        if let Some(p) = self.peers.get_mut(&peer) {
            p.last_heard = Some(now);
        }
        match msg {
            PeerMessage::Hello { .. } => return Err(MembershipError::SecondHello),
            PeerMessage::Heartbeat => {}
            PeerMessage::Sync { ops } => self.events.push_back(Event::Sync { peer, ops }),
            PeerMessage::Op { id, op } => {
                self.events.push_back(Event::Op { peer, link, id, op });
            }
            PeerMessage::Applied { id } => {
                if !self.acks.applied(OpId(id), peer, &mut self.events) {
                    self.stats.stray_acks += 1;
                }
            }
            PeerMessage::Pull { id, name, query } => self.events.push_back(Event::Pull {
                peer,
                link,
                id,
                name,
                query,
            }),
            PeerMessage::Pulled {
                id,
                found,
                count,
                records,
            } => self.events.push_back(Event::Pulled {
                peer,
                id,
                answer: found.then_some((count, records)),
            }),
            PeerMessage::SetQos { id, name, change } => self.events.push_back(Event::SetQos {
                peer,
                link,
                id,
                name,
                change,
            }),
            PeerMessage::QosSet { id, outcome } => {
                self.events.push_back(Event::QosSet { peer, id, outcome });
            }
        }
        Ok(())
    }

    /// The other side's `Hello` on a new link: admit it, or refuse it.
    fn hello(&mut self, now: Instant, link: LinkId, h: Hello) -> Result<(), MembershipError> {
        let node = h.node;
        if node == self.config.node {
            return Err(MembershipError::OwnAddress(node));
        }
        if let Some(dialed) = self.links.get(&link).and_then(|l| l.dialed) {
            if dialed != node {
                return Err(MembershipError::WrongPeer {
                    dialed,
                    answered: node,
                });
            }
        }
        let known = self.peers.get(&node);
        if self.config.listed_only && known.is_none_or(|p| p.source != Source::List) {
            return Err(MembershipError::NotListed(node));
        }
        let before = known.and_then(|p| p.incarnation);
        if let Some(known) = before.filter(|k| h.incarnation < *k) {
            return Err(MembershipError::StaleIncarnation {
                node,
                known,
                offered: h.incarnation,
            });
        }
        if self.peers.get(&node).and_then(|p| p.link).is_some() {
            if before == Some(h.incarnation) {
                return Err(MembershipError::DuplicateLink(node));
            }
            // A new life while its old link still looks up.
            self.peer_down(now, node, DownReason::Restarted);
        }
        let delivery = SocketAddr::new(node.0, h.delivery_port);
        if let std::collections::btree_map::Entry::Vacant(v) = self.peers.entry(node) {
            v.insert(Peer::new(&h.name, delivery, Source::Inbound));
            self.events.push_back(Event::Discovered {
                node,
                name: h.name.clone(),
                source: Source::Inbound,
            });
        }
        if let Some(l) = self.links.get_mut(&link) {
            l.phase = Phase::Up(node);
        }
        let Some(p) = self.peers.get_mut(&node) else {
            return Ok(()); // inserted above
        };
        if !h.name.is_empty() {
            p.name = h.name.clone();
        }
        p.delivery = delivery;
        p.state = NodeState::Up;
        p.last_heard = Some(now);
        p.incarnation = Some(h.incarnation);
        p.link = Some(link);
        p.dial = Dial::Connected(link);
        self.events.push_back(Event::PeerUp {
            peer: node,
            link,
            name: p.name.clone(),
            delivery,
            incarnation: h.incarnation,
            restarted: before.is_some_and(|b| b != h.incarnation),
        });
        Ok(())
    }

    /// Declares `node` down and closes its link.
    pub(super) fn peer_down(&mut self, now: Instant, node: NodeAddr, reason: DownReason) {
        if let Some(link) = self.peers.get(&node).and_then(|p| p.link) {
            self.drop_link(now, link, reason);
            self.transmits.push_back(Transmit::Close { link });
        }
    }

    /// Forgets `link`; if it carried a peer, that peer is down.
    pub(super) fn drop_link(&mut self, now: Instant, link: LinkId, reason: DownReason) {
        let Some(l) = self.links.remove(&link) else {
            return;
        };
        let node = match l.phase {
            Phase::Up(peer) => Some(peer),
            Phase::AwaitHello => l.dialed,
        };
        let Some(node) = node else {
            return;
        };
        let Some(p) = self.peers.get_mut(&node) else {
            return;
        };
        if matches!(p.dial, Dial::Connected(c) if c == link) {
            p.dial = Dial::Wait(now + self.config.redial);
        }
        if p.link == Some(link) {
            p.link = None;
            p.state = NodeState::Dead;
            self.acks.gone(node, &mut self.events);
            self.events
                .push_back(Event::PeerDown { peer: node, reason });
        }
    }

    /// Dials `node` if this node is the lower address, it has no link, no
    /// dial is out and none is waiting.
    pub(super) fn maybe_dial(&mut self, now: Instant, node: NodeAddr) {
        if self.config.node >= node {
            return;
        }
        let Some(p) = self.peers.get_mut(&node) else {
            return;
        };
        let due = match p.dial {
            Dial::Idle => true,
            Dial::Wait(t) => t <= now,
            Dial::Pending | Dial::Connected(_) => false,
        };
        let Some(addr) = p.control.filter(|_| due && p.link.is_none()) else {
            return;
        };
        p.dial = Dial::Pending;
        self.transmits.push_back(Transmit::Dial { node, addr });
    }

    pub(super) fn send(&mut self, link: LinkId, msg: PeerMessage) {
        self.transmits.push_back(Transmit::Send { link, msg });
    }

    /// Up peers and their links.
    pub(super) fn up_links(&self) -> impl Iterator<Item = (NodeAddr, LinkId)> + '_ {
        self.links.iter().filter_map(|(id, l)| match l.phase {
            Phase::Up(peer) => Some((peer, *id)),
            Phase::AwaitHello => None,
        })
    }

    pub(super) fn is_up(&self, link: LinkId) -> bool {
        self.links
            .get(&link)
            .is_some_and(|l| matches!(l.phase, Phase::Up(_)))
    }
}

/// A message's name, for errors.
fn kind(msg: &PeerMessage) -> &'static str {
    match msg {
        PeerMessage::Hello { .. } => "Hello",
        PeerMessage::Sync { .. } => "Sync",
        PeerMessage::Op { .. } => "Op",
        PeerMessage::Applied { .. } => "Applied",
        PeerMessage::Heartbeat => "Heartbeat",
        PeerMessage::Pull { .. } => "Pull",
        PeerMessage::Pulled { .. } => "Pulled",
        PeerMessage::SetQos { .. } => "SetQos",
        PeerMessage::QosSet { .. } => "QosSet",
    }
}
