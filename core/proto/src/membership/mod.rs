//! Membership: which peer daemons are up, over which link, and who still has
//! to apply which table change. A sans-IO state machine, one per node.
//!
//! The runtime owns the sockets. It tells the core what happened
//! (`handle_*(now, …)`), then drains what the core wants done
//! ([`Membership::poll_transmit`]: send a message on a link, dial a node,
//! close a link) and what it learnt ([`Membership::poll_event`]), and sleeps
//! until [`Membership::poll_timeout`]. Time is always an argument; the core
//! never reads a clock, so a simulator can drive many of them on one thread.
//!
//! # Links
//!
//! One TCP link per pair of nodes: the node with the lower address dials,
//! the other accepts. Each side speaks first with a `Hello`; the link is up
//! once the other's `Hello` arrived. The runtime then builds this node's
//! `Sync` (every tag and every right its clients hold, `TagTable::sync_ops`)
//! and hands it to [`Membership::send_sync`]:
//!
//! ```text
//!   lower address (dials)                 higher address (accepts)
//!        |------------- TCP connect ------------->|
//!        |-- Hello{node, incarnation} ----------->|   PeerUp: build a Sync
//!        |<----------- Hello{node, incarnation} --|
//!   PeerUp: build a Sync                          |
//!        |-- Sync{ops} -------------------------->|   Event::Sync: merge
//!        |<-------------------------- Sync{ops} --|
//!        |-- Op{id, op} ------------------------->|   Event::Op: apply, then
//!        |<------------------------ Applied{id} --|   acknowledge(id)
//!        |<-------- Heartbeat (when idle) --------|
//! ```
//!
//! Ordering: a peer counts as up (and so among the peers a replication
//! waits for) from its `Hello`; an `Op` for a link whose `Sync` has not
//! been handed over yet is held back and sent right after it. So every
//! change is either in the `Sync` (built after the peer came up) or reaches
//! the peer after it, whatever the runtime's threads interleave.
//!
//! # Incarnations
//!
//! A daemon's incarnation changes (grows) with every start. A `Hello` with a
//! larger incarnation than the one known for that node, on a new link or in
//! a beacon, is a restart: the old link is closed, the old life declared
//! down ([`DownReason::Restarted`]: its clients' rights are dropped) and the
//! new one synchronised afresh. A second link with the *same* incarnation
//! while one is up is refused ([`MembershipError::DuplicateLink`]), and one
//! with a smaller incarnation is a stale link from a previous life
//! ([`MembershipError::StaleIncarnation`]). So a pair never holds two links.
//!
//! # Leases
//!
//! Every up link carries a `Heartbeat` when nothing else was sent for
//! [`Config::heartbeat`]. A peer silent for [`Config::lease`] is declared
//! dead: its link closed, [`Event::PeerDown`] emitted (the runtime drops the
//! rights its clients held; each daemon decides this for itself, nothing is
//! relayed), and every replication waiting for it released. The dialing side
//! keeps dialing, so a node that comes back is re-synchronised.
//!
//! # Replication
//!
//! [`Membership::begin_replication`] sends an op to every up peer and waits
//! for each one's `Applied`: [`Event::Replicated`] when all answered (a peer
//! that goes down meanwhile no longer counts), or, after
//! [`Config::apply_timeout`], [`Event::ReplicationTimedOut`] naming those
//! that did not.
//!
//! Input that breaks these rules (an unknown node when only listed nodes
//! are admitted, a message before `Hello`, a second `Hello`) is refused with
//! a [`MembershipError`], counted in [`Stats`], and its link closed.

mod acks;
mod links;
mod outputs;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tagwire_wire::control::{ErrorCode, HistoryQuery, NodeState, NodeSummary};
use tagwire_wire::peer::{Beacon, PeerMessage, TableOp};
use tagwire_wire::{Member, NodeAddr, QosChange, TagName};

pub use outputs::{DownReason, Event, MembershipError, Stats, Transmit};

use acks::Acks;
use links::{Dial, Link, Peer, Phase};

/// How a node joins the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// This node's address (what it stamps on messages).
    pub node: NodeAddr,
    /// A name for people.
    pub name: String,
    /// This start of the daemon; larger at each start.
    pub incarnation: u64,
    /// UDP port of this node's delivery manager, told to peers in `Hello`.
    pub delivery_port: u16,
    /// A peer silent this long is declared dead; also how long a new link
    /// may take to say `Hello`.
    pub lease: Duration,
    /// An up link silent (from our side) this long carries a `Heartbeat`.
    pub heartbeat: Duration,
    /// How long a replicated op waits for every live peer to apply it.
    pub apply_timeout: Duration,
    /// Wait after a failed dial before the next.
    pub redial: Duration,
    /// Only nodes given with [`Source::List`] are admitted (a node list file
    /// was given); otherwise any node that says `Hello` or sends a beacon.
    pub listed_only: bool,
}

impl Config {
    /// A node at `node`; heartbeat a sixth of the lease (at least 20 ms),
    /// redial after the heartbeat (at most 100 ms).
    pub fn new(node: NodeAddr, incarnation: u64, lease: Duration, apply_timeout: Duration) -> Self {
        let heartbeat = (lease / 6).max(Duration::from_millis(20));
        Self {
            node,
            name: node.to_string(),
            incarnation,
            delivery_port: 0,
            lease,
            heartbeat,
            apply_timeout,
            redial: heartbeat.min(Duration::from_millis(100)),
            listed_only: false,
        }
    }
}

/// A connection as the core knows it; the runtime maps it to its socket.
/// Ids are never reused by one [`Membership`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u64);

/// A replicated op (the id its `Op` and `Applied` messages carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// How this node learnt of a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The node list.
    List,
    /// A discovery beacon.
    Beacon,
    /// It connected to us.
    Inbound,
}

impl Source {
    /// The word `tagwire nodes` shows.
    pub fn label(self) -> &'static str {
        match self {
            Source::List => "list",
            Source::Beacon => "beacon",
            Source::Inbound => "inbound",
        }
    }
}

/// The membership state machine of one node.
#[derive(Debug)]
pub struct Membership {
    config: Config,
    peers: BTreeMap<NodeAddr, Peer>,
    links: BTreeMap<LinkId, Link>,
    acks: Acks,
    next_link: u64,
    next_op: u64,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: Stats,
}

impl Membership {
    /// A node that knows no peer yet.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            peers: BTreeMap::new(),
            links: BTreeMap::new(),
            acks: Acks::default(),
            next_link: 1,
            next_op: 1,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters of refused input.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Learns of a node from the node list (or a beacon, through
    /// [`Membership::handle_beacon`]): where its update manager (`control`)
    /// and delivery manager listen. Dials it if this node is the lower.
    pub fn add_node(
        &mut self,
        now: Instant,
        node: NodeAddr,
        name: &str,
        control: SocketAddr,
        delivery: SocketAddr,
        source: Source,
    ) {
        if node == self.config.node {
            return;
        }
        let fresh = !self.peers.contains_key(&node);
        let p = self
            .peers
            .entry(node)
            .or_insert_with(|| Peer::new(name, delivery, source));
        if p.source == Source::Inbound || source == Source::List {
            p.source = source;
        }
        p.control = Some(control);
        p.delivery = delivery;
        if !name.is_empty() {
            p.name = name.to_owned();
        }
        if fresh {
            self.events.push_back(Event::Discovered {
                node,
                name: name.to_owned(),
                source,
            });
        }
        self.maybe_dial(now, node);
    }

    /// A discovery beacon arrived from `from`. A larger incarnation than the
    /// one up on a link means that peer restarted: its old link is closed.
    /// `from` is where the datagram came from; the beacon's own fields are
    /// what counts (`from` only serves a caller's logs).
    pub fn handle_beacon(&mut self, now: Instant, from: SocketAddr, beacon: &Beacon) {
        let _ = from;
        if beacon.node == self.config.node {
            return;
        }
        if self.config.listed_only
            && self
                .peers
                .get(&beacon.node)
                .is_none_or(|p| p.source != Source::List)
        {
            self.stats.ignored_beacons += 1;
            return;
        }
        let ip = beacon.node.0;
        self.add_node(
            now,
            beacon.node,
            &beacon.name,
            SocketAddr::new(ip, beacon.control_port),
            SocketAddr::new(ip, beacon.delivery_port),
            Source::Beacon,
        );
        let restarted = self.peers.get(&beacon.node).is_some_and(|p| {
            p.link.is_some() && p.incarnation.is_some_and(|i| beacon.incarnation > i)
        });
        if restarted {
            // Its new life is listening already: dial it without waiting.
            self.peer_down(now, beacon.node, DownReason::Restarted);
            if let Some(p) = self.peers.get_mut(&beacon.node) {
                p.dial = Dial::Idle;
            }
            self.maybe_dial(now, beacon.node);
        }
    }

    /// A connection opened: dialed by us to `dialed` (answering a
    /// [`Transmit::Dial`]), or accepted from `remote`. Queues our `Hello`.
    pub fn handle_connected(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        dialed: Option<NodeAddr>,
    ) -> LinkId {
        let id = LinkId(self.next_link);
        self.next_link += 1;
        if let Some(p) = dialed.and_then(|n| self.peers.get_mut(&n)) {
            p.dial = Dial::Connected(id);
        }
        self.links.insert(id, Link::new(now, remote, dialed));
        let hello = PeerMessage::Hello {
            node: self.config.node,
            name: self.config.name.clone(),
            incarnation: self.config.incarnation,
            delivery_port: self.config.delivery_port,
        };
        self.send(id, hello);
        id
    }

    /// A dial to `node` failed; the core tries again after
    /// [`Config::redial`].
    pub fn handle_dial_failed(&mut self, now: Instant, node: NodeAddr) {
        if let Some(p) = self.peers.get_mut(&node) {
            if p.dial == Dial::Pending {
                p.dial = Dial::Wait(now + self.config.redial);
            }
        }
    }

    /// `link` closed (end of stream, an error, or our own [`Transmit::Close`]).
    pub fn handle_closed(&mut self, now: Instant, link: LinkId) {
        self.drop_link(now, link, DownReason::LinkClosed);
    }

    /// A message arrived on `link`. Refused input closes the link.
    pub fn handle_message(
        &mut self,
        now: Instant,
        link: LinkId,
        msg: PeerMessage,
    ) -> Result<(), MembershipError> {
        let result = self.message(now, link, msg);
        if let Err(e) = &result {
            self.stats.rejected += 1;
            if self.links.contains_key(&link) {
                self.drop_link(now, link, DownReason::Protocol(e.clone()));
                self.transmits.push_back(Transmit::Close { link });
            }
        }
        result
    }

    /// Timers: `Hello` and lease deadlines, heartbeats, redials, apply
    /// timeouts. Call at (or after) [`Membership::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        let lease = self.config.lease;
        let mut close = Vec::new();
        let mut beat = Vec::new();
        for (id, l) in &self.links {
            match l.phase {
                Phase::AwaitHello if now >= l.opened + lease => close.push((*id, None)),
                Phase::Up(peer) if now >= l.last_heard + lease => close.push((*id, Some(peer))),
                Phase::Up(_) if now >= l.last_sent + self.config.heartbeat => beat.push(*id),
                _ => {}
            }
        }
        for (id, peer) in close {
            let reason = match peer {
                Some(_) => {
                    self.stats.leases_expired += 1;
                    DownReason::LeaseExpired
                }
                None => {
                    self.stats.rejected += 1;
                    DownReason::Protocol(MembershipError::HelloTimeout)
                }
            };
            self.drop_link(now, id, reason);
            self.transmits.push_back(Transmit::Close { link: id });
        }
        for id in beat {
            if let Some(l) = self.links.get_mut(&id) {
                l.last_sent = now;
            }
            self.send(id, PeerMessage::Heartbeat);
        }
        let waiting: Vec<NodeAddr> = self
            .peers
            .iter()
            .filter(|(_, p)| matches!(p.dial, Dial::Wait(t) if t <= now))
            .map(|(n, _)| *n)
            .collect();
        for node in waiting {
            if let Some(p) = self.peers.get_mut(&node) {
                p.dial = Dial::Idle;
            }
            self.maybe_dial(now, node);
        }
        self.acks.expire(now, &mut self.events);
    }

    /// Sends `op` to every up peer and waits for each one's `Applied`.
    /// `None` when no peer is up (nothing to wait for); otherwise the op's
    /// id, which a later [`Event::Replicated`] or
    /// [`Event::ReplicationTimedOut`] names.
    pub fn begin_replication(&mut self, now: Instant, op: TableOp) -> Option<OpId> {
        let up: Vec<(NodeAddr, LinkId)> = self.up_links().collect();
        if up.is_empty() {
            return None;
        }
        let id = OpId(self.next_op);
        self.next_op += 1;
        let msg = PeerMessage::Op { id: id.0, op };
        for (_, link) in &up {
            match self.links.get_mut(link) {
                Some(l) if !l.synced => l.held.push(msg.clone()),
                Some(_) => self.send(*link, msg.clone()),
                None => {}
            }
        }
        let peers: BTreeSet<NodeAddr> = up.iter().map(|(n, _)| *n).collect();
        self.acks.begin(id, peers, now + self.config.apply_timeout);
        Some(id)
    }

    /// Hands over this node's `Sync` for `link` (after [`Event::PeerUp`]),
    /// then the ops held back for it. `false` when the link is no longer up
    /// or already synchronised (the call is then ignored).
    pub fn send_sync(&mut self, link: LinkId, ops: Vec<TableOp>) -> bool {
        let held = match self.links.get_mut(&link) {
            Some(l) if matches!(l.phase, Phase::Up(_)) && !l.synced => {
                l.synced = true;
                std::mem::take(&mut l.held)
            }
            _ => return false,
        };
        self.send(link, PeerMessage::Sync { ops });
        for m in held {
            self.send(link, m);
        }
        true
    }

    /// Confirms to the peer on `link` that its op `id` was applied.
    pub fn acknowledge(&mut self, link: LinkId, id: u64) {
        if self.is_up(link) {
            self.send(link, PeerMessage::Applied { id });
        }
    }

    /// Asks every up peer for messages from its history of `name`; returns
    /// the peers asked (their answers come as [`Event::Pulled`]; a peer that
    /// goes down meanwhile will not answer: [`Event::PeerDown`]).
    pub fn pull(&mut self, id: u64, name: &TagName, query: HistoryQuery) -> Vec<NodeAddr> {
        let up: Vec<(NodeAddr, LinkId)> = self.up_links().collect();
        for (_, link) in &up {
            let msg = PeerMessage::Pull {
                id,
                name: name.clone(),
                query,
            };
            self.send(*link, msg);
        }
        up.into_iter().map(|(n, _)| n).collect()
    }

    /// Answers a peer's [`Event::Pull`].
    pub fn answer_pull(&mut self, link: LinkId, id: u64, answer: Option<(u32, Vec<u8>)>) {
        if !self.is_up(link) {
            return;
        }
        let (found, (count, records)) = (answer.is_some(), answer.unwrap_or_default());
        let msg = PeerMessage::Pulled {
            id,
            found,
            count,
            records,
        };
        self.send(link, msg);
    }

    /// Asks `node` to change the subscriptions to `name` that it holds;
    /// false when `node` is not up (nothing was sent). Its answer comes as
    /// [`Event::QosSet`]; if it goes down first, as [`Event::PeerDown`].
    pub fn set_qos(&mut self, node: NodeAddr, id: u64, name: &TagName, change: QosChange) -> bool {
        let Some((_, link)) = self.up_links().find(|(n, _)| *n == node) else {
            return false;
        };
        let msg = PeerMessage::SetQos {
            id,
            name: name.clone(),
            change,
        };
        self.send(link, msg);
        true
    }

    /// Answers a peer's [`Event::SetQos`].
    pub fn answer_set_qos(
        &mut self,
        link: LinkId,
        id: u64,
        outcome: Result<Vec<Member>, (ErrorCode, String)>,
    ) {
        if self.is_up(link) {
            self.send(link, PeerMessage::QosSet { id, outcome });
        }
    }

    /// The next thing to do with the sockets. `now` stamps the link's last
    /// send (heartbeats are due only when a link was idle).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let t = self.transmits.pop_front()?;
        if let Transmit::Send { link, .. } = &t {
            if let Some(l) = self.links.get_mut(link) {
                l.last_sent = now;
            }
        }
        Some(t)
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Membership::handle_timeout`] is next due: the earliest `Hello`
    /// or lease deadline, heartbeat, redial or apply timeout.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let links = self.links.values().flat_map(|l| match l.phase {
            Phase::AwaitHello => [Some(l.opened + self.config.lease), None],
            Phase::Up(_) => [
                Some(l.last_heard + self.config.lease),
                Some(l.last_sent + self.config.heartbeat),
            ],
        });
        let dials = self.peers.values().filter_map(|p| match p.dial {
            Dial::Wait(t) => Some(t),
            _ => None,
        });
        links
            .flatten()
            .chain(dials)
            .chain(self.acks.next_deadline())
            .min()
    }

    /// Where `node`'s delivery manager listens, if it is up.
    pub fn delivery_addr(&self, node: NodeAddr) -> Option<SocketAddr> {
        self.peers
            .get(&node)
            .filter(|p| p.state == NodeState::Up)
            .map(|p| p.delivery)
    }

    /// `node`'s name, if known.
    pub fn name(&self, node: NodeAddr) -> Option<&str> {
        self.peers.get(&node).map(|p| p.name.as_str())
    }

    /// `node`'s state, if known.
    pub fn state(&self, node: NodeAddr) -> Option<NodeState> {
        self.peers.get(&node).map(|p| p.state)
    }

    /// The up peers.
    pub fn up_peers(&self) -> impl Iterator<Item = NodeAddr> + '_ {
        self.up_links().map(|(n, _)| n)
    }

    /// Open links (handshaking or up).
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// The other end's address of `link`, as the runtime reported it.
    pub fn link_remote(&self, link: LinkId) -> Option<SocketAddr> {
        self.links.get(&link).map(|l| l.remote)
    }

    /// The peer on `link`, once its `Hello` arrived.
    pub fn link_peer(&self, link: LinkId) -> Option<NodeAddr> {
        match self.links.get(&link)?.phase {
            Phase::Up(peer) => Some(peer),
            Phase::AwaitHello => None,
        }
    }

    /// Replicated ops still waiting for acknowledgements.
    pub fn pending_replications(&self) -> usize {
        self.acks.len()
    }

    /// Every known peer, for `tagwire nodes`.
    pub fn summaries(&self, now: Instant) -> Vec<NodeSummary> {
        self.peers
            .iter()
            .map(|(node, p)| NodeSummary {
                node: *node,
                name: p.name.clone(),
                state: p.state,
                last_heard_ms: p.last_heard.map_or(u64::MAX, |t| {
                    u64::try_from(now.saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX)
                }),
                source: p.source.label().to_owned(),
            })
            .collect()
    }
}
