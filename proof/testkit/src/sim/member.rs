//! A daemon's update manager as a [`SimNode`]: the real membership core
//! ([`tagwire_proto::Membership`]) and a real tag table
//! ([`tagwire_proto::TagTable`]) over [`conn`](super::conn) connections
//! that carry `tagwire_wire::peer` frames, encoded and decoded as on a TCP
//! socket.
//!
//! ```text
//!  test API: create / destroy / add_* / remove_*      (a local client's change)
//!      │ TagTable::{create,destroy,add_*,remove_*} ─► Change.ops
//!      └─► Membership::begin_replication(op) ─► OpId ─► outcome: Replicated | TimedOut
//!
//!  datagrams ─► Conns ─► ConnEvent ──────────────┐
//!                 ▲      Connected/Accepted ─► handle_connected ─► LinkId
//!                 │      DialFailed ─────────► handle_dial_failed
//!                 │      Data ─► FrameReader ─► PeerMessage::decode ─► handle_message
//!                 │      Closed ─────────────► handle_closed
//!                 │                              ▼
//!                 │                         Membership ─► Event (as update.rs::consume):
//!                 │                              │   PeerUp   ─► table.sync_ops() ─► send_sync
//!                 │                              │   PeerDown ─► table.drop_node(peer)
//!                 │                              │   Sync     ─► table.apply_sync(peer, ops)
//!                 │                              │   Op       ─► table.apply_remote(op) ─► acknowledge
//!                 │                              ▼
//!                 └──── Transmit: Send ─► msg.encode() ─► Conns::send
//!                                 Dial ─► Conns::connect   Close ─► Conns::close
//! ```
//!
//! Every node is given the node list ([`Source::List`], only listed nodes
//! admitted, as a daemon started with a node list file). A restart is a
//! fresh node from the factory: a new, larger incarnation and a table whose
//! Lamport clock starts at the virtual "wall clock", as `tagwired` does
//! (`runtime/daemon/src/lib.rs`), with no client: its old rights are gone
//! with it.
//!
//! What the daemon does beside the table (rings, client broadcasts,
//! forwarder routes, history pulls) is not here; a peer's pull is answered
//! "no history".

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tagwire_proto::membership::{Config, DownReason, Event, LinkId, OpId, Source, Transmit};
use tagwire_proto::{replication, ClientId, Membership, TableError, TableOp, TagTable};
use tagwire_wire::control::{NodeState, RingParams};
use tagwire_wire::peer::PeerMessage;
use tagwire_wire::{Carrier, Domain, Member, NodeAddr, Pid, SenderInfo, TagId, TagName};

use super::conn::{ConnConfig, ConnEvent, ConnId, Conns};
use super::node::{Addr, Destination, NodeInit, Outgoing, SimNode};

/// Settings shared by every [`MemberNode`] of a network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberConfig {
    /// The node list: every daemon's control address (its simulator
    /// address), this node's included.
    pub nodes: Vec<Addr>,
    /// [`Config::lease`]; the heartbeat is a sixth of it.
    pub lease: Duration,
    /// [`Config::apply_timeout`].
    pub apply_timeout: Duration,
    /// The connection layer's settings.
    pub conn: ConnConfig,
}

impl MemberConfig {
    /// Lease 600 ms (heartbeat 100 ms, redial 100 ms), apply timeout 200 ms
    /// (the daemon's 3 s and 1 s, scaled down: only the ratios matter on a
    /// virtual clock), and [`ConnConfig::default`], whose 1 s before a
    /// silent connection breaks outlasts the lease, as a kernel's does.
    pub fn new(nodes: Vec<Addr>) -> Self {
        Self {
            nodes,
            lease: Duration::from_millis(600),
            apply_timeout: Duration::from_millis(200),
            conn: ConnConfig::default(),
        }
    }
}

/// What a node observed, in order, for the tests to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// [`Event::PeerUp`].
    Up {
        /// The peer.
        peer: NodeAddr,
        /// Its incarnation.
        incarnation: u64,
        /// A previous incarnation of it was known.
        restarted: bool,
    },
    /// [`Event::PeerDown`].
    Down {
        /// The peer.
        peer: NodeAddr,
        /// Why.
        reason: DownReason,
        /// Rights of its clients this node dropped.
        dropped: usize,
    },
    /// A replication this node began ended.
    Replication {
        /// The op.
        id: OpId,
        /// How.
        outcome: Outcome,
    },
}

/// How a replication ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// [`Event::Replicated`].
    Replicated,
    /// [`Event::ReplicationTimedOut`], naming who did not apply it.
    TimedOut(Vec<NodeAddr>),
}

/// Counters of a [`MemberNode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemberStats {
    /// Peer frames decoded and handed to the core.
    pub frames: u64,
    /// Frames that did not decode (the connection was reset).
    pub decode_errors: u64,
    /// Messages the core refused (it closed their link).
    pub refused: u64,
    /// `Op`s applied and acknowledged.
    pub ops_applied: u64,
    /// `Sync`s merged.
    pub syncs_applied: u64,
}

/// One tag as every daemon should see it once converged: a
/// [`TagSummary`](tagwire_wire::control::TagSummary) without the daemon's own
/// tag id, members sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagView {
    /// The name.
    pub name: TagName,
    /// The domain.
    pub domain: Domain,
    /// Senders, sorted by (node, pid, join time).
    pub senders: Vec<Member>,
    /// Receivers, sorted the same way.
    pub receivers: Vec<Member>,
}

/// `table`'s [`summaries`](TagTable::summaries), normalised for comparing
/// daemons: in name order, without tag ids, members sorted.
pub fn table_view(table: &TagTable) -> Vec<TagView> {
    let sorted = |mut v: Vec<Member>| {
        v.sort_by_key(|m| (m.who.node, m.who.pid.0, m.since_unix_ns));
        v
    };
    let mut out: Vec<TagView> = table
        .summaries()
        .into_iter()
        .map(|s| TagView {
            name: s.name,
            domain: s.domain,
            senders: sorted(s.senders),
            receivers: sorted(s.receivers),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The node address of the daemon at simulator address `addr`.
pub fn node_addr(addr: Addr) -> NodeAddr {
    NodeAddr(addr.ip())
}

/// A daemon's update manager (see the module doc).
#[derive(Debug)]
pub struct MemberNode {
    addr: Addr,
    node: NodeAddr,
    incarnation: u64,
    born: Instant,
    born_elapsed: Duration,
    membership: Membership,
    table: TagTable,
    conns: Conns,
    link_of: BTreeMap<ConnId, LinkId>,
    conn_of: BTreeMap<LinkId, ConnId>,
    readers: BTreeMap<ConnId, Vec<u8>>,
    dials: BTreeMap<ConnId, NodeAddr>,
    outcomes: BTreeMap<OpId, Option<Outcome>>,
    log: Vec<(Instant, Observed)>,
    stats: MemberStats,
    /// The core's `poll_timeout`, as of the last `pump` (the only place the
    /// core's state changes): asked once per event, not three times.
    core_timeout: Option<Instant>,
}

impl MemberNode {
    /// A freshly started daemon (call from the simulator's factory).
    pub fn new(init: &NodeInit, config: &MemberConfig) -> Self {
        let node = node_addr(init.addr);
        // As tagwired: the incarnation is the wall clock in ns, the table's
        // Lamport clock starts at it in µs. The restart count keeps two
        // lives at one virtual instant apart.
        let wall_ns = u64::try_from(init.elapsed.as_nanos()).unwrap_or(u64::MAX);
        let incarnation = wall_ns.saturating_add(u64::from(init.incarnation) + 1);
        let mut mc = Config::new(node, incarnation, config.lease, config.apply_timeout);
        mc.delivery_port = init.addr.port().wrapping_add(1);
        mc.listed_only = true;
        let mut membership = Membership::new(mc);
        for &peer in &config.nodes {
            let delivery = SocketAddr::new(peer.ip(), peer.port().wrapping_add(1));
            let name = node_addr(peer).to_string();
            membership.add_node(
                init.now,
                node_addr(peer),
                &name,
                peer,
                delivery,
                Source::List,
            );
        }
        let mut n = Self {
            addr: init.addr,
            node,
            incarnation,
            born: init.now,
            born_elapsed: init.elapsed,
            membership,
            table: TagTable::for_node(node, RingParams::default(), incarnation / 1000),
            conns: Conns::new(config.conn, init.seed),
            link_of: BTreeMap::new(),
            conn_of: BTreeMap::new(),
            readers: BTreeMap::new(),
            dials: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            log: Vec::new(),
            stats: MemberStats::default(),
            core_timeout: None,
        };
        n.pump(init.now);
        n
    }

    /// A factory for [`Sim::add_node`](super::Sim::add_node).
    pub fn factory(config: MemberConfig) -> impl FnMut(&NodeInit) -> MemberNode {
        move |init| MemberNode::new(init, &config)
    }

    // ----- a local client's changes -------------------------------------------

    /// Creates a global tag (nothing happens if it exists); returns the
    /// replications begun.
    pub fn create(&mut self, now: Instant, name: &TagName) -> Vec<OpId> {
        let (_, change) = self
            .table
            .create(name.clone(), Domain::Global, RingParams::default());
        self.replicate(now, change.ops)
    }

    /// Destroys a tag.
    pub fn destroy(&mut self, now: Instant, name: &TagName) -> Result<Vec<OpId>, TableError> {
        let (_, change) = self.table.destroy(name)?;
        Ok(self.replicate(now, change.ops))
    }

    /// Grants `client` (a process on this node, pid = the client id) send
    /// access on `name`.
    pub fn add_sender(
        &mut self,
        now: Instant,
        name: &TagName,
        client: ClientId,
    ) -> Result<Vec<OpId>, TableError> {
        let (tag, member) = (self.tag(name)?, self.member(now, client));
        let change = self.table.add_sender(tag, client, member)?;
        Ok(self.replicate(now, change.ops))
    }

    /// Releases one send access of `client` on `name`.
    pub fn remove_sender(
        &mut self,
        now: Instant,
        name: &TagName,
        client: ClientId,
    ) -> Result<Vec<OpId>, TableError> {
        let change = self.table.remove_sender(self.tag(name)?, client)?;
        Ok(self.replicate(now, change.ops))
    }

    /// Subscribes `client` to `name`.
    pub fn add_receiver(
        &mut self,
        now: Instant,
        name: &TagName,
        client: ClientId,
    ) -> Result<Vec<OpId>, TableError> {
        let (tag, member) = (self.tag(name)?, self.member(now, client));
        let change = self.table.add_receiver(tag, client, member)?;
        Ok(self.replicate(now, change.ops))
    }

    /// Cancels one subscription of `client` to `name`.
    pub fn remove_receiver(
        &mut self,
        now: Instant,
        name: &TagName,
        client: ClientId,
    ) -> Result<Vec<OpId>, TableError> {
        let change = self.table.remove_receiver(self.tag(name)?, client)?;
        Ok(self.replicate(now, change.ops))
    }

    /// `client` disconnected: every right it held is released.
    pub fn remove_client(&mut self, now: Instant, client: ClientId) -> Vec<OpId> {
        let change = self.table.remove_client(client);
        self.replicate(now, change.ops)
    }

    // ----- reading ------------------------------------------------------------

    /// The simulator address.
    pub fn addr(&self) -> Addr {
        self.addr
    }

    /// The node address.
    pub fn node(&self) -> NodeAddr {
        self.node
    }

    /// This life's incarnation.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The tag table.
    pub fn table(&self) -> &TagTable {
        &self.table
    }

    /// The table, normalised ([`table_view`]).
    pub fn view(&self) -> Vec<TagView> {
        table_view(&self.table)
    }

    /// The membership core.
    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    /// What the core thinks of `peer`.
    pub fn peer_state(&self, peer: NodeAddr) -> Option<NodeState> {
        self.membership.state(peer)
    }

    /// Whether every node of `peers` (this node aside) is up here.
    pub fn sees_up(&self, peers: &[NodeAddr]) -> bool {
        peers
            .iter()
            .filter(|p| **p != self.node)
            .all(|p| self.membership.state(*p) == Some(NodeState::Up))
    }

    /// How replication `id` ended (`None`: unknown, or still waiting).
    pub fn outcome(&self, id: OpId) -> Option<&Outcome> {
        self.outcomes.get(&id)?.as_ref()
    }

    /// Replications begun here that still wait.
    pub fn pending(&self) -> usize {
        self.membership.pending_replications()
    }

    /// What this life observed, in order.
    pub fn log(&self) -> &[(Instant, Observed)] {
        &self.log
    }

    /// The counters.
    pub fn stats(&self) -> MemberStats {
        self.stats
    }

    /// The connection layer.
    pub fn conns(&self) -> &Conns {
        &self.conns
    }

    // ----- internals ------------------------------------------------------------

    fn tag(&self, name: &TagName) -> Result<TagId, TableError> {
        self.table
            .entry(name)
            .map(|e| e.id)
            .ok_or_else(|| TableError::UnknownTag(name.to_string()))
    }

    fn member(&self, now: Instant, client: ClientId) -> Member {
        let wall = self.born_elapsed + now.saturating_duration_since(self.born);
        Member {
            who: SenderInfo {
                pid: Pid(u32::try_from(client.0).unwrap_or(u32::MAX)),
                node: self.node,
            },
            since_unix_ns: u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// What `update.rs::replicate` does: each op to every up peer.
    fn replicate(&mut self, now: Instant, ops: Vec<TableOp>) -> Vec<OpId> {
        let mut ids = Vec::new();
        for op in ops {
            if let Some(id) = self.membership.begin_replication(now, op) {
                self.outcomes.insert(id, None);
                ids.push(id);
            }
        }
        self.pump(now);
        ids
    }

    /// Moves everything between the connections, the core and the table
    /// until nothing is left to move.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut moved = false;
            while let Some(e) = self.conns.poll_event() {
                moved = true;
                self.conn_event(now, e);
            }
            while let Some(e) = self.membership.poll_event() {
                moved = true;
                self.consume(now, e);
            }
            while let Some(t) = self.membership.poll_transmit(now) {
                moved = true;
                self.transmit(now, t);
            }
            if !moved {
                self.core_timeout = self.membership.poll_timeout();
                return;
            }
        }
    }

    /// What `update.rs::feed` does with the sockets' inputs.
    fn conn_event(&mut self, now: Instant, e: ConnEvent) {
        match e {
            ConnEvent::Connected { conn, remote } => {
                let dialed = self.dials.remove(&conn);
                let link = self.membership.handle_connected(now, remote, dialed);
                self.map(conn, link);
            }
            ConnEvent::Accepted { conn, remote } => {
                let link = self.membership.handle_connected(now, remote, None);
                self.map(conn, link);
            }
            ConnEvent::DialFailed { conn, .. } => {
                if let Some(node) = self.dials.remove(&conn) {
                    self.membership.handle_dial_failed(now, node);
                }
            }
            ConnEvent::Data { conn, bytes } => self.data(now, conn, &bytes),
            ConnEvent::Closed { conn, .. } => {
                if let Some(link) = self.unmap(conn) {
                    self.membership.handle_closed(now, link);
                }
            }
        }
    }

    /// Bytes of a link: whole frames go to the core, as `peers.rs`'s
    /// `FrameReader` does.
    fn data(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        let Some(&link) = self.link_of.get(&conn) else {
            return;
        };
        let Some(buf) = self.readers.get_mut(&conn) else {
            return;
        };
        buf.extend_from_slice(bytes);
        loop {
            let Some(buf) = self.readers.get_mut(&conn) else {
                return;
            };
            let Some(prefix) = buf.get(..4) else {
                return;
            };
            let mut p = [0u8; 4];
            p.copy_from_slice(prefix);
            let decoded = match PeerMessage::frame_len(p) {
                Ok(n) => match buf.get(4..4 + n) {
                    None => return,
                    Some(body) => {
                        let d = PeerMessage::decode(body);
                        buf.drain(..4 + n);
                        d
                    }
                },
                Err(e) => Err(e),
            };
            let Ok(msg) = decoded else {
                // Out of step: the daemon closes such a link.
                self.stats.decode_errors += 1;
                self.unmap(conn);
                self.conns.reset(conn);
                self.membership.handle_closed(now, link);
                return;
            };
            // A link the core closed gets no more input (its Close is queued).
            if self.membership.link_remote(link).is_none() {
                return;
            }
            self.stats.frames += 1;
            if self.membership.handle_message(now, link, msg).is_err() {
                self.stats.refused += 1;
            }
        }
    }

    /// What `update.rs::consume` does with the core's events, minus the
    /// daemon's rings, client broadcasts and routes.
    fn consume(&mut self, now: Instant, e: Event) {
        match e {
            Event::Discovered { .. } | Event::Pulled { .. } | Event::QosSet { .. } => {}
            Event::PeerUp {
                peer,
                incarnation,
                restarted,
                ..
            } => {
                self.log.push((
                    now,
                    Observed::Up {
                        peer,
                        incarnation,
                        restarted,
                    },
                ));
                replication::apply(&mut self.table, &mut self.membership, now, &e);
            }
            Event::PeerDown { peer, ref reason } => {
                let dropped = replication::apply(&mut self.table, &mut self.membership, now, &e)
                    .map_or(0, |u| u.len());
                self.log.push((
                    now,
                    Observed::Down {
                        peer,
                        reason: reason.clone(),
                        dropped,
                    },
                ));
            }
            Event::Sync { .. } => {
                self.stats.syncs_applied += 1;
                replication::apply(&mut self.table, &mut self.membership, now, &e);
            }
            Event::Op { .. } => {
                self.stats.ops_applied += 1;
                replication::apply(&mut self.table, &mut self.membership, now, &e);
            }
            Event::Replicated { id } => self.finish(now, id, Outcome::Replicated),
            Event::ReplicationTimedOut { id, missing } => {
                self.finish(now, id, Outcome::TimedOut(missing));
            }
            Event::Pull { link, id, .. } => self.membership.answer_pull(link, id, None),
            // The simulated node holds no subscriptions of its own.
            Event::SetQos { link, id, name, .. } => self.membership.answer_set_qos(
                link,
                id,
                Err((
                    tagwire_wire::control::ErrorCode::NotSubscribed,
                    format!("no subscription to {name} here"),
                )),
            ),
        }
    }

    fn finish(&mut self, now: Instant, id: OpId, outcome: Outcome) {
        self.outcomes.insert(id, Some(outcome.clone()));
        self.log.push((now, Observed::Replication { id, outcome }));
    }

    /// What `peers.rs::flush` does with the core's transmits.
    fn transmit(&mut self, now: Instant, t: Transmit) {
        match t {
            Transmit::Send { link, msg } => {
                if let Some(&conn) = self.conn_of.get(&link) {
                    self.conns.send(now, conn, &msg.encode());
                }
            }
            Transmit::Close { link } => {
                if let Some(conn) = self.conn_of.get(&link).copied() {
                    self.unmap(conn);
                    self.conns.close(now, conn);
                }
            }
            Transmit::Dial { node, addr } => {
                let conn = self.conns.connect(now, addr);
                self.dials.insert(conn, node);
            }
        }
    }

    fn map(&mut self, conn: ConnId, link: LinkId) {
        self.link_of.insert(conn, link);
        self.conn_of.insert(link, conn);
        self.readers.insert(conn, Vec::new());
    }

    fn unmap(&mut self, conn: ConnId) -> Option<LinkId> {
        self.readers.remove(&conn);
        let link = self.link_of.remove(&conn)?;
        self.conn_of.remove(&link);
        Some(link)
    }
}

impl SimNode for MemberNode {
    fn handle_datagram(&mut self, now: Instant, from: Addr, bytes: &[u8]) {
        self.conns.handle_datagram(now, from, bytes);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.conns.handle_timeout(now);
        if self.core_timeout.is_some_and(|t| t <= now) {
            self.membership.handle_timeout(now);
        }
        self.pump(now);
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Outgoing> {
        let (to, bytes) = self.conns.poll_transmit()?;
        Some(Outgoing {
            destination: Destination::Unicast(to),
            carrier: Carrier::Tcp,
            class: 0,
            bytes,
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.conns.poll_timeout(), self.core_timeout]
            .into_iter()
            .flatten()
            .min()
    }
}
