//! Links to the other nodes' daemons: finding them (node list file, multicast
//! beacon), one TCP link per pair, heartbeats and leases.
//!
//! The update manager ([`crate::update`]) replicates table changes over these
//! links. Who connects: the daemon with the lower node address dials, the other
//! accepts, so a pair never holds two links. Both sides send `Hello`, then a
//! `Sync` with everything the other must merge (DESIGN.md §2). The `Sync` is
//! built under the state lock while this link's writer lock is held and the
//! peer is marked up in the same critical section, so every later change is
//! either in the `Sync` or sent after it as an `Op`.
//!
//! Liveness: every link carries a heartbeat when idle; a peer silent for the
//! lease is declared dead, its link closed, and every right its clients held
//! removed here (each daemon decides this for itself; nothing is relayed). The
//! dialing side keeps trying, so a node that comes back is re-synchronised.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tagwire_wire::control::{HistoryQuery, NodeState, NodeSummary};
use tagwire_wire::peer::{Beacon, PeerMessage, TableOp};
use tagwire_wire::{NodeAddr, TagName};

use crate::{lock, update, Shared};

/// How a daemon joins the other nodes.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// A name for people (`tagwire nodes`).
    pub name: String,
    /// This node's address: peers reach us here, and it is stamped on messages.
    pub addr: IpAddr,
    /// TCP port of the update manager.
    pub control_port: u16,
    /// UDP port of the delivery manager.
    pub delivery_port: u16,
    /// UDP port of the multicast data carrier (the same on every node).
    pub multicast_port: u16,
    /// The static node list (same file on every node), if any.
    pub nodes_file: Option<PathBuf>,
    /// Multicast discovery, if on.
    pub discovery: Option<Discovery>,
    /// A peer silent this long is declared dead.
    pub lease: Duration,
    /// How long a table change waits for every live peer to apply it.
    pub apply_timeout: Duration,
}

impl NetConfig {
    /// Defaults for a node at `addr`: ports 7401 (TCP) and 7402 (UDP), discovery
    /// on 239.255.74.1:7400, lease 3 s, apply timeout 1 s.
    pub fn new(addr: IpAddr) -> Self {
        Self {
            name: addr.to_string(),
            addr,
            control_port: DEFAULT_CONTROL_PORT,
            delivery_port: DEFAULT_DELIVERY_PORT,
            multicast_port: DEFAULT_MULTICAST_PORT,
            nodes_file: None,
            discovery: Some(Discovery::default()),
            lease: Duration::from_secs(3),
            apply_timeout: Duration::from_secs(1),
        }
    }

    fn heartbeat(&self) -> Duration {
        (self.lease / 6).max(Duration::from_millis(20))
    }
}

/// Default TCP port of the update manager.
pub const DEFAULT_CONTROL_PORT: u16 = 7401;
/// Default UDP port of the delivery manager.
pub const DEFAULT_DELIVERY_PORT: u16 = 7402;
/// Default UDP port of the multicast data carrier.
pub const DEFAULT_MULTICAST_PORT: u16 = 7403;

/// Multicast beacon settings.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The group.
    pub group: Ipv4Addr,
    /// The port.
    pub port: u16,
    /// Time between beacons.
    pub interval: Duration,
}

impl Default for Discovery {
    fn default() -> Self {
        Self {
            group: Ipv4Addr::new(239, 255, 74, 1),
            port: 7400,
            interval: Duration::from_millis(500),
        }
    }
}

/// One line of a node list file: `name address [control_port [delivery_port]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeListEntry {
    /// Name.
    pub name: String,
    /// Address.
    pub addr: IpAddr,
    /// TCP port of its update manager.
    pub control_port: u16,
    /// UDP port of its delivery manager.
    pub delivery_port: u16,
}

/// Parses a node list: one node per line, `#` starts a comment.
pub fn parse_node_list(text: &str) -> Result<Vec<NodeListEntry>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = |what: &str| format!("line {}: {what} in {line:?}", i + 1);
        if f.len() < 2 || f.len() > 4 {
            return Err(bad(
                "expected `name address [control_port [delivery_port]]`",
            ));
        }
        let addr = f[1].parse().map_err(|_| bad("bad address"))?;
        let port = |j: usize, default: u16| match f.get(j) {
            Some(p) => p.parse::<u16>().map_err(|_| bad("bad port")),
            None => Ok(default),
        };
        out.push(NodeListEntry {
            name: f[0].to_owned(),
            addr,
            control_port: port(2, DEFAULT_CONTROL_PORT)?,
            delivery_port: port(3, DEFAULT_DELIVERY_PORT)?,
        });
    }
    Ok(out)
}

/// Reads and parses a node list file.
pub fn read_node_list(path: &Path) -> Result<Vec<NodeListEntry>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read node list {}: {e}", path.display()))?;
    parse_node_list(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// How we learnt of a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    List,
    Beacon,
    Inbound,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Source::List => "list",
            Source::Beacon => "beacon",
            Source::Inbound => "inbound",
        }
    }
}

/// A peer daemon as the rest of the daemon sees it.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) name: String,
    pub(crate) control: Option<SocketAddr>,
    pub(crate) delivery: SocketAddr,
    source: Source,
    pub(crate) state: NodeState,
    last_heard: Option<Instant>,
    incarnation: u64,
    link: Option<Arc<Link>>,
    dialing: bool,
}

/// Every peer, behind the daemon's state lock.
#[derive(Debug, Default)]
pub(crate) struct PeerSet {
    pub(crate) peers: BTreeMap<NodeAddr, Peer>,
}

impl PeerSet {
    /// Links of peers that are up.
    pub(crate) fn up_links(&self) -> Vec<Arc<Link>> {
        self.peers
            .values()
            .filter(|p| p.state == NodeState::Up)
            .filter_map(|p| p.link.clone())
            .collect()
    }

    /// Where the delivery manager of `node` listens, if it is up.
    pub(crate) fn delivery_addr(&self, node: NodeAddr) -> Option<SocketAddr> {
        self.peers
            .get(&node)
            .filter(|p| p.state == NodeState::Up)
            .map(|p| p.delivery)
    }

    pub(crate) fn summaries(&self, now: Instant) -> Vec<NodeSummary> {
        self.peers
            .iter()
            .map(|(node, p)| NodeSummary {
                node: *node,
                name: p.name.clone(),
                state: p.state,
                last_heard_ms: p.last_heard.map_or(u64::MAX, |t| {
                    u64::try_from(now.duration_since(t).as_millis()).unwrap_or(u64::MAX)
                }),
                source: p.source.label().to_owned(),
            })
            .collect()
    }

    fn learn(
        &mut self,
        node: NodeAddr,
        name: &str,
        control: SocketAddr,
        delivery: SocketAddr,
        source: Source,
    ) {
        let p = self.peers.entry(node).or_insert_with(|| Peer {
            name: name.to_owned(),
            control: Some(control),
            delivery,
            source,
            state: NodeState::Connecting,
            last_heard: None,
            incarnation: 0,
            link: None,
            dialing: false,
        });
        if p.source == Source::Inbound {
            p.source = source;
        }
        p.control = Some(control);
        p.delivery = delivery;
        if !name.is_empty() {
            p.name = name.to_owned();
        }
    }
}

/// One TCP link to a peer.
#[derive(Debug)]
pub(crate) struct Link {
    id: u64,
    /// The peer, once its Hello arrived.
    node: std::sync::OnceLock<NodeAddr>,
    stream: TcpStream,
    writer: Mutex<TcpStream>,
}

impl Link {
    pub(crate) fn send(&self, msg: &PeerMessage) -> io::Result<()> {
        let bytes = msg.encode();
        let mut w = lock(&self.writer);
        w.write_all(&bytes)
    }

    pub(crate) fn kill(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    pub(crate) fn peer(&self) -> Option<NodeAddr> {
        self.node.get().copied()
    }
}

/// Acknowledgements the update manager waits for: op id → peers yet to apply.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    pub(crate) pending: Mutex<HashMap<u64, HashSet<NodeAddr>>>,
    pub(crate) changed: std::sync::Condvar,
    pub(crate) next: AtomicU64,
}

impl Acks {
    fn applied(&self, id: u64, node: NodeAddr) {
        let mut p = lock(&self.pending);
        if let Some(set) = p.get_mut(&id) {
            set.remove(&node);
        }
        self.changed.notify_all();
    }

    fn gone(&self, node: NodeAddr) {
        let mut p = lock(&self.pending);
        for set in p.values_mut() {
            set.remove(&node);
        }
        self.changed.notify_all();
    }
}

/// A peer's answer to a pull: the message count and the records.
type Pulled = (u32, Vec<u8>);

/// One pull's wait: the peers yet to answer, and the answers with a history.
type PullWait = (HashSet<NodeAddr>, Vec<Pulled>);

/// Pulls of histories kept on other nodes, waiting for their answers.
#[derive(Debug, Default)]
pub(crate) struct RemotePulls {
    /// By request id.
    pending: Mutex<HashMap<u64, PullWait>>,
    changed: std::sync::Condvar,
    next: AtomicU64,
}

impl RemotePulls {
    fn answered(&self, id: u64, node: NodeAddr, answer: Option<Pulled>) {
        let mut p = lock(&self.pending);
        if let Some((waiting, found)) = p.get_mut(&id) {
            waiting.remove(&node);
            found.extend(answer);
        }
        self.changed.notify_all();
    }

    fn gone(&self, node: NodeAddr) {
        let mut p = lock(&self.pending);
        for (waiting, _) in p.values_mut() {
            waiting.remove(&node);
        }
        self.changed.notify_all();
    }
}

/// Asks every live peer for the messages `query` selects from its history
/// of `name` and returns the fullest answer (count, records), or `None`
/// when no peer that answered within the apply timeout keeps one.
pub(crate) fn pull_remote(shared: &Shared, name: &TagName, query: HistoryQuery) -> Option<Pulled> {
    let net = shared.config.net.as_ref()?;
    let links = shared.lock().peers.up_links();
    if links.is_empty() {
        return None;
    }
    let pulls = &shared.pulls;
    let id = pulls.next.fetch_add(1, Ordering::Relaxed);
    let waiting: HashSet<NodeAddr> = links.iter().filter_map(|l| l.peer()).collect();
    lock(&pulls.pending).insert(id, (waiting, Vec::new()));
    let msg = PeerMessage::Pull {
        id,
        name: name.clone(),
        query,
    };
    for l in &links {
        if l.send(&msg).is_err() {
            l.kill();
        }
    }
    let deadline = Instant::now() + net.apply_timeout;
    let mut p = lock(&pulls.pending);
    loop {
        let now = Instant::now();
        let done = p.get(&id).is_none_or(|(w, _)| w.is_empty());
        if done || now >= deadline {
            let (_, found) = p.remove(&id)?;
            return found.into_iter().max_by_key(|(count, _)| *count);
        }
        p = pulls
            .changed
            .wait_timeout(p, deadline - now)
            .map_or_else(|e| e.into_inner().0, |(g, _)| g);
    }
}

static NEXT_LINK: AtomicU64 = AtomicU64::new(1);

/// Starts the listener, the dialer/lease thread and discovery.
pub(crate) fn start(shared: &Arc<Shared>, net: &NetConfig) -> io::Result<()> {
    let node = NodeAddr(net.addr);
    if let Some(path) = &net.nodes_file {
        let list = read_node_list(path).map_err(io::Error::other)?;
        let mut st = shared.lock();
        for e in list.iter().filter(|e| NodeAddr(e.addr) != node) {
            st.peers.learn(
                NodeAddr(e.addr),
                &e.name,
                SocketAddr::new(e.addr, e.control_port),
                SocketAddr::new(e.addr, e.delivery_port),
                Source::List,
            );
        }
    }
    let listener = tagwire_net::tcp_listener(SocketAddr::new(net.addr, net.control_port))?;
    listener.set_nonblocking(true)?;
    let s = shared.clone();
    spawn("tagwired-peer-accept", move || {
        while !s.is_stopping() {
            match listener.accept() {
                Ok((stream, from)) => {
                    let s2 = s.clone();
                    if let Err(e) = spawn("tagwired-link", move || run_link(s2, stream, None, from))
                    {
                        tracing::warn!(error = %e, "cannot start a peer link thread");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "peer accept failed");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    })?;
    let s = shared.clone();
    spawn("tagwired-peer-timer", move || timer_loop(&s))?;
    if let Some(d) = &net.discovery {
        let IpAddr::V4(iface) = net.addr else {
            return Err(io::Error::other(
                "multicast discovery needs an IPv4 node address",
            ));
        };
        let sock = tagwire_net::beacon_socket(d.group, d.port, iface)?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        let beacon = Beacon {
            node,
            name: net.name.clone(),
            incarnation: shared.incarnation,
            control_port: net.control_port,
            delivery_port: net.delivery_port,
        }
        .encode();
        let s = shared.clone();
        let (group, interval) = (SocketAddr::from((d.group, d.port)), d.interval);
        spawn("tagwired-discovery", move || {
            discovery_loop(&s, &sock, &beacon, group, interval)
        })?;
    }
    Ok(())
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(|_| ())
}

fn discovery_loop(
    shared: &Arc<Shared>,
    sock: &std::net::UdpSocket,
    beacon: &[u8],
    group: SocketAddr,
    interval: Duration,
) {
    let me = shared.node();
    let mut next = Instant::now();
    let mut buf = [0u8; 2048];
    while !shared.is_stopping() {
        if Instant::now() >= next {
            if let Err(e) = sock.send_to(beacon, group) {
                tracing::debug!(error = %e, "cannot send beacon");
            }
            next = Instant::now() + interval;
        }
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let b = match Beacon::decode(&buf[..n]) {
            Ok(b) => b,
            Err(e) => {
                shared.stats.bad_beacons.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%from, error = %e, "malformed beacon dropped");
                continue;
            }
        };
        if b.node == me {
            continue;
        }
        let mut st = shared.lock();
        let known = st.peers.peers.contains_key(&b.node);
        st.peers.learn(
            b.node,
            &b.name,
            SocketAddr::new(b.node.0, b.control_port),
            SocketAddr::new(b.node.0, b.delivery_port),
            Source::Beacon,
        );
        if !known {
            tracing::info!(node = %b.node, name = b.name, "node discovered");
        }
    }
}

/// Dials peers we should dial, sends heartbeats, expires leases.
fn timer_loop(shared: &Arc<Shared>) {
    let Some(net) = shared.config.net.clone() else {
        return;
    };
    let me = shared.node();
    let beat = net.heartbeat();
    while !shared.is_stopping() {
        let now = Instant::now();
        let mut dial = Vec::new();
        let mut beat_links = Vec::new();
        let mut expired = Vec::new();
        {
            let mut st = shared.lock();
            for (node, p) in st.peers.peers.iter_mut() {
                match (&p.link, p.state) {
                    (Some(l), NodeState::Up) => {
                        if p.last_heard
                            .is_some_and(|t| now.duration_since(t) > net.lease)
                        {
                            expired.push((*node, l.clone()));
                        } else {
                            beat_links.push(l.clone());
                        }
                    }
                    (None, _) if me < *node && !p.dialing => {
                        if let Some(addr) = p.control {
                            p.dialing = true;
                            dial.push((*node, addr));
                        }
                    }
                    _ => {}
                }
            }
        }
        for l in beat_links {
            if l.send(&PeerMessage::Heartbeat).is_err() {
                l.kill();
            }
        }
        for (node, l) in expired {
            tracing::warn!(%node, lease = ?net.lease, "peer silent for its lease: declared dead");
            l.kill();
        }
        for (node, addr) in dial {
            let s = shared.clone();
            let spawned = spawn("tagwired-dial", move || {
                match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                    Ok(stream) => run_link(s, stream, Some(node), addr),
                    Err(e) => {
                        tracing::trace!(%node, error = %e, "cannot reach peer yet");
                        if let Some(p) = s.lock().peers.peers.get_mut(&node) {
                            p.dialing = false;
                        }
                    }
                }
            });
            if spawned.is_err() {
                if let Some(p) = shared.lock().peers.peers.get_mut(&node) {
                    p.dialing = false;
                }
            }
        }
        std::thread::sleep(beat.min(Duration::from_millis(100)));
    }
    // Stopping: close every link so their threads end.
    let links: Vec<_> = shared
        .lock()
        .peers
        .peers
        .values()
        .filter_map(|p| p.link.clone())
        .collect();
    for l in links {
        l.kill();
    }
}

/// Serves one TCP link until it fails; then forgets the peer's rights.
fn run_link(shared: Arc<Shared>, stream: TcpStream, dialed: Option<NodeAddr>, from: SocketAddr) {
    let link = match setup(&stream) {
        Ok(w) => Arc::new(Link {
            id: NEXT_LINK.fetch_add(1, Ordering::Relaxed),
            node: std::sync::OnceLock::new(),
            stream,
            writer: Mutex::new(w),
        }),
        Err(e) => {
            tracing::debug!(%from, error = %e, "cannot set up peer link");
            undial(&shared, dialed);
            return;
        }
    };
    let peer = serve(&shared, &link, from);
    link.kill();
    undial(&shared, dialed);
    let Some(peer) = peer else {
        return;
    };
    shared.acks.gone(peer);
    shared.pulls.gone(peer);
    let mut st = shared.lock();
    let ours = st
        .peers
        .peers
        .get(&peer)
        .and_then(|p| p.link.as_ref())
        .is_some_and(|l| l.id == link.id);
    if !ours {
        return;
    }
    if let Some(p) = st.peers.peers.get_mut(&peer) {
        p.link = None;
        p.state = NodeState::Dead;
    }
    let ups = st.table.drop_node(peer);
    tracing::info!(node = %peer, released = ups.len(), "peer link closed; its rights are gone");
    update::effects(&shared, &mut st, &ups);
    if ups.is_empty() {
        update::reroute(&shared, &st);
    }
}

fn undial(shared: &Shared, dialed: Option<NodeAddr>) {
    if let Some(node) = dialed {
        if let Some(p) = shared.lock().peers.peers.get_mut(&node) {
            p.dialing = false;
        }
    }
}

fn setup(stream: &TcpStream) -> io::Result<TcpStream> {
    tagwire_net::tune_link(stream)?;
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    stream.try_clone()
}

/// Hello exchange, sync, then the message loop. Returns the peer once known.
fn serve(shared: &Arc<Shared>, link: &Arc<Link>, from: SocketAddr) -> Option<NodeAddr> {
    let net = shared.config.net.as_ref()?;
    let hello = PeerMessage::Hello {
        node: shared.node(),
        name: net.name.clone(),
        incarnation: shared.incarnation,
        delivery_port: net.delivery_port,
    };
    link.send(&hello).ok()?;
    let mut reader = FrameReader::default();
    let deadline = Instant::now() + net.lease;
    let (peer, name, incarnation, delivery_port) = loop {
        match reader.next(&link.stream, shared) {
            Ok(Some(PeerMessage::Hello {
                node,
                name,
                incarnation,
                delivery_port,
            })) => break (node, name, incarnation, delivery_port),
            Ok(Some(other)) => {
                tracing::debug!(%from, ?other, "peer spoke before Hello; closing");
                return None;
            }
            Ok(None) if Instant::now() < deadline => continue,
            Ok(None) => return None,
            Err(e) => {
                tracing::debug!(%from, error = %e, "peer link failed before Hello");
                return None;
            }
        }
    };
    if peer == shared.node() {
        tracing::warn!(%from, "a peer claims our own node address; check the node list");
        return None;
    }
    let _ = link.node.set(peer);
    {
        // Register and sync atomically (see the module docs).
        let mut w = lock(&link.writer);
        let mut st = shared.lock();
        let stale = st
            .peers
            .peers
            .get(&peer)
            .and_then(|p| p.link.clone())
            .filter(|l| l.id != link.id);
        if let Some(old) = stale {
            if st
                .peers
                .peers
                .get(&peer)
                .is_some_and(|p| p.incarnation == incarnation)
            {
                tracing::debug!(node = %peer, "second link to a live peer; closing it");
                return None;
            }
            old.kill();
        }
        let delivery = SocketAddr::new(peer.0, delivery_port);
        let control = st.peers.peers.get(&peer).and_then(|p| p.control);
        if !st.peers.peers.contains_key(&peer) {
            st.peers.learn(
                peer,
                &name,
                control.unwrap_or(from),
                delivery,
                Source::Inbound,
            );
        }
        if let Some(p) = st.peers.peers.get_mut(&peer) {
            p.name = name.clone();
            p.delivery = delivery;
            p.state = NodeState::Up;
            p.last_heard = Some(Instant::now());
            p.incarnation = incarnation;
            p.link = Some(link.clone());
        }
        update::reroute(shared, &st);
        let ops = st.table.sync_ops();
        drop(st);
        if w.write_all(&PeerMessage::Sync { ops }.encode()).is_err() {
            return Some(peer);
        }
    }
    tracing::info!(node = %peer, name, "peer up");
    loop {
        let msg = match reader.next(&link.stream, shared) {
            Ok(Some(m)) => m,
            Ok(None) => {
                if shared.is_stopping() {
                    return Some(peer);
                }
                continue;
            }
            Err(e) => {
                tracing::debug!(node = %peer, error = %e, "peer link ended");
                return Some(peer);
            }
        };
        heard(shared, peer);
        match msg {
            PeerMessage::Heartbeat => {}
            PeerMessage::Applied { id } => shared.acks.applied(id, peer),
            PeerMessage::Op { id, op } => {
                apply(shared, &[op], None);
                if link.send(&PeerMessage::Applied { id }).is_err() {
                    return Some(peer);
                }
            }
            PeerMessage::Sync { ops } => apply(shared, &ops, Some(peer)),
            PeerMessage::Pull { id, name, query } => {
                // Room for the message's own fields within a peer frame.
                let max = tagwire_wire::peer::MAX_PEER_MESSAGE - 64;
                let answer = match shared.keepers.records(shared, &name, query, max) {
                    Some((count, records)) => PeerMessage::Pulled {
                        id,
                        found: true,
                        count,
                        records,
                    },
                    None => PeerMessage::Pulled {
                        id,
                        found: false,
                        count: 0,
                        records: Vec::new(),
                    },
                };
                if link.send(&answer).is_err() {
                    return Some(peer);
                }
            }
            PeerMessage::Pulled {
                id,
                found,
                count,
                records,
            } => shared
                .pulls
                .answered(id, peer, found.then_some((count, records))),
            PeerMessage::Hello { .. } => {
                tracing::debug!(node = %peer, "second Hello on a link; closing");
                return Some(peer);
            }
        }
    }
}

fn heard(shared: &Shared, peer: NodeAddr) {
    if let Some(p) = shared.lock().peers.peers.get_mut(&peer) {
        p.last_heard = Some(Instant::now());
    }
}

fn apply(shared: &Shared, ops: &[TableOp], sync_from: Option<NodeAddr>) {
    let mut st = shared.lock();
    let ups = match sync_from {
        Some(node) => st.table.apply_sync(node, ops),
        None => ops
            .iter()
            .flat_map(|op| st.table.apply_remote(op))
            .collect(),
    };
    update::effects(shared, &mut st, &ups);
}

/// Accumulates bytes from a stream with a read timeout into whole messages,
/// never losing a partial one to a timeout.
#[derive(Debug, Default)]
struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// `Ok(None)`: nothing complete yet (timeout). Errors end the link.
    fn next(&mut self, mut stream: &TcpStream, shared: &Shared) -> io::Result<Option<PeerMessage>> {
        loop {
            if let Some(msg) = self.take(shared)? {
                return Ok(Some(msg));
            }
            let mut chunk = [0u8; 16 * 1024];
            match stream.read(&mut chunk) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed")),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn take(&mut self, shared: &Shared) -> io::Result<Option<PeerMessage>> {
        let Some(prefix) = self.buf.get(..4) else {
            return Ok(None);
        };
        let mut p = [0u8; 4];
        p.copy_from_slice(prefix);
        let n = PeerMessage::frame_len(p).map_err(bad)?;
        if self.buf.len() < 4 + n {
            return Ok(None);
        }
        let decoded = PeerMessage::decode(&self.buf[4..4 + n]);
        self.buf.drain(..4 + n);
        match decoded {
            Ok(m) => Ok(Some(m)),
            Err(e) => {
                // A malformed message from a peer: count it and end the link
                // (the stream may be out of step); the dialer reconnects.
                shared
                    .stats
                    .bad_peer_messages
                    .fetch_add(1, Ordering::Relaxed);
                Err(bad(e))
            }
        }
    }
}

fn bad(e: tagwire_wire::DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_parse_with_defaults_comments_and_errors() {
        let l = parse_node_list(
            "# the lab\nalpha 10.0.0.1\nbeta 10.0.0.2 8001 8002 # custom ports\n\n",
        )
        .unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].control_port, DEFAULT_CONTROL_PORT);
        assert_eq!(l[1].delivery_port, 8002);
        assert!(parse_node_list("alpha").unwrap_err().contains("line 1"));
        assert!(parse_node_list("a 10.0.0.300")
            .unwrap_err()
            .contains("bad address"));
        assert!(parse_node_list("a 10.0.0.3 99999")
            .unwrap_err()
            .contains("bad port"));
    }
}
