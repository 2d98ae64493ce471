//! Links to the other nodes' daemons: the sockets and threads under the
//! membership core ([`tagwire_proto::membership`]), which decides everything
//! else: who dials (the lower address), the Hello/Sync handshake,
//! incarnations, heartbeats, leases and replication acknowledgements.
//!
//! This module only moves bytes and reports what happened, as an `Input`
//! on one channel that the update manager (`update.rs`) drains into
//! the core:
//!
//! ```text
//!  accept thread ──┐                         ┌── flush(): Send → link's writer thread
//!  dial threads ───┤                         │            Dial → a dial thread
//!  link readers ───┼─ Input ─▶ update manager ─▶ core ──┤  Close → drop the writer: it
//!  discovery ──────┘   channel   (one thread)           │         shuts the socket down
//! ```
//!
//! Each link has a reader thread (blocking reads, whole frames decoded and
//! sent on as `Input::Message`, a malformed one counted and the link
//! closed) and a writer thread fed in the order the core queued its
//! transmits (`flush` runs under the state lock, so the order of a
//! `Sync` and later `Op`s is the core's). Nothing here polls on a tick: the
//! update manager sleeps on the input channel until the core's next
//! timeout, discovery until its next beacon.
//!
//! Also here: the node list file, and remote pulls (`pull_remote`), which
//! ask every up peer for a history this node does not keep.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tagwire_proto::membership::{self, LinkId, Source, Transmit};
use tagwire_wire::control::HistoryQuery;
use tagwire_wire::peer::{Beacon, PeerMessage};
use tagwire_wire::{NodeAddr, TagName};

use crate::secure::{self, SecureRead, SecureWrite};
use crate::{lock, Shared, State};

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
    /// The static node list (same file on every node), if any. When given,
    /// only its nodes are admitted as peers (docs/design.md §7), also by discovery.
    pub nodes_file: Option<PathBuf>,
    /// Multicast discovery, if on.
    pub discovery: Option<Discovery>,
    /// The domain key (`tagwire keygen`; the same on every node). With it,
    /// control links run an authenticated handshake and every datagram is
    /// sealed and checked ([`crate::guard`]); without it this node trusts
    /// every host that reaches its ports.
    pub key: Option<tagwire_auth::DomainKey>,
    /// The file `key` came from: read again whenever it changes, so that
    /// a key roll it announces (`tagwire keygen --next`) happens without a
    /// restart (`tagwire_auth::KeyFile`).
    pub key_file: Option<PathBuf>,
    /// With a key, also encrypt datagram bodies (not only authenticate).
    pub encrypt: bool,
    /// A peer silent this long is declared dead.
    pub lease: Duration,
    /// How long a table change waits for every live peer to apply it.
    pub apply_timeout: Duration,
    /// Pace reliable streams to other nodes (NAPA, see
    /// `tagwire_reliable::pacer`): each stream's datagrams go at the
    /// interval its controller sets from the measured round trip and
    /// delivery rate, so that a bottleneck's queue stays short; its
    /// publishers are held back meanwhile. Off: as fast as the windows
    /// allow.
    pub pacing: Option<crate::PacerConfig>,
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
            key: None,
            encrypt: false,
            key_file: None,
            lease: Duration::from_secs(3),
            apply_timeout: Duration::from_secs(1),
            pacing: None,
        }
    }

    /// The membership core's settings for this node's `incarnation`: the
    /// heartbeat a sixth of the lease, only listed nodes when a node list is
    /// given (docs/design.md §7).
    pub(crate) fn membership(&self, incarnation: u64) -> membership::Config {
        let mut c = membership::Config::new(
            NodeAddr(self.addr),
            incarnation,
            self.lease,
            self.apply_timeout,
        );
        c.name = self.name.clone();
        c.delivery_port = self.delivery_port;
        c.listed_only = self.nodes_file.is_some();
        c
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

/// What the sockets tell the update manager, which hands it to the core.
#[derive(Debug)]
pub(crate) enum Input {
    /// A connection opened (accepted, or dialed to `dialed`).
    Connected {
        stream: TcpStream,
        remote: SocketAddr,
        dialed: Option<NodeAddr>,
        /// The authenticated session (with a domain key).
        secure: Option<Box<secure::Session>>,
    },
    /// A dial failed.
    DialFailed(NodeAddr),
    /// A whole message arrived on a link.
    Message(LinkId, PeerMessage),
    /// A link's stream ended (closed, failed or malformed).
    Closed(LinkId),
    /// A discovery beacon arrived.
    Beacon(SocketAddr, Beacon),
    /// Something changed the core's next timeout (a replication began).
    Wake,
    /// The daemon stops.
    Stop,
}

/// The network side's handles, in [`Shared`].
#[derive(Debug)]
pub(crate) struct Net {
    inputs: Mutex<Sender<Input>>,
    /// Taken by the update manager when networking starts.
    receiver: Mutex<Option<Receiver<Input>>>,
    /// Open links' writers, by the core's link id.
    links: Mutex<HashMap<LinkId, Writer>>,
    listener: OnceLock<Arc<TcpListener>>,
    /// Handshakes under way on accepted connections, per remote address.
    handshakes: Mutex<HashMap<IpAddr, usize>>,
}

/// A link's writer thread's queue, and the socket to shut down.
#[derive(Debug)]
struct Writer {
    queue: Sender<Vec<u8>>,
}

impl Default for Net {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        Self {
            inputs: Mutex::new(tx),
            receiver: Mutex::new(Some(rx)),
            links: Mutex::new(HashMap::new()),
            listener: OnceLock::new(),
            handshakes: Mutex::new(HashMap::new()),
        }
    }
}

impl Net {
    /// Hands `input` to the update manager (dropped if it is gone: stopping).
    pub(crate) fn input(&self, input: Input) {
        let _ = lock(&self.inputs).send(input);
    }

    /// The update manager's end of the input channel (once).
    pub(crate) fn take_receiver(&self) -> Option<Receiver<Input>> {
        lock(&self.receiver).take()
    }
}

/// Loads the node list into the core, starts the listener and discovery.
pub(crate) fn start(shared: &Arc<Shared>, net: &NetConfig) -> io::Result<()> {
    if let Some(path) = &net.nodes_file {
        let list = read_node_list(path).map_err(io::Error::other)?;
        let now = Instant::now();
        let mut st = shared.lock();
        for e in &list {
            st.peers.add_node(
                now,
                NodeAddr(e.addr),
                &e.name,
                SocketAddr::new(e.addr, e.control_port),
                SocketAddr::new(e.addr, e.delivery_port),
                Source::List,
            );
        }
        flush(shared, &mut st);
    }
    let at = SocketAddr::new(net.addr, net.control_port);
    let listener = Arc::new(
        tagwire_net::tcp_listener(at)
            .map_err(|e| crate::naming(e, "the control port (TCP)", at))?,
    );
    let _ = shared.net.listener.set(listener.clone());
    let s = shared.clone();
    spawn(shared, "tagwired-peer-accept", move || {
        // Blocks in accept; `stop` shuts the listener down to end it.
        while !s.is_stopping() {
            match listener.accept() {
                Ok((stream, remote)) if s.guard.is_keyed() => accepted(&s, stream, remote),
                Ok((stream, remote)) => s.net.input(Input::Connected {
                    stream,
                    remote,
                    dialed: None,
                    secure: None,
                }),
                Err(e) if s.is_stopping() => tracing::trace!(error = %e, "peer accept ends"),
                Err(e) => tracing::debug!(error = %e, "peer accept failed"),
            }
        }
    })?;
    if let Some(d) = &net.discovery {
        let IpAddr::V4(iface) = net.addr else {
            return Err(io::Error::other(
                "multicast discovery needs an IPv4 node address",
            ));
        };
        let sock = tagwire_net::beacon_socket(d.group, d.port, iface).map_err(|e| {
            crate::naming(
                e,
                "the discovery beacon (UDP)",
                SocketAddr::from((d.group, d.port)),
            )
        })?;
        let beacon = Beacon {
            node: NodeAddr(net.addr),
            name: net.name.clone(),
            incarnation: shared.incarnation,
            control_port: net.control_port,
            delivery_port: net.delivery_port,
        }
        .encode();
        let s = shared.clone();
        let (group, interval) = (SocketAddr::from((d.group, d.port)), d.interval);
        if shared.guard.is_keyed() && net.discovery.is_some() {
            tracing::debug!("beacons are sealed with the domain key");
        }
        spawn(shared, "tagwired-discovery", move || {
            discovery_loop(&s, &sock, &beacon, group, interval)
        })?;
    }
    Ok(())
}

/// Ends the accept thread and tells the update manager to stop.
pub(crate) fn stop(shared: &Shared) {
    if let Some(l) = shared.net.listener.get() {
        // On Linux this wakes a thread blocked in accept().
        let _ = rustix::net::shutdown(l.as_ref(), rustix::net::Shutdown::Both);
    }
    shared.net.input(Input::Stop);
}

/// Carries out what the core queued, in its order: called under the state
/// lock by whoever fed the core last.
pub(crate) fn flush(shared: &Arc<Shared>, st: &mut State) {
    let now = Instant::now();
    while let Some(t) = st.peers.poll_transmit(now) {
        match t {
            Transmit::Send { link, msg } => {
                let links = lock(&shared.net.links);
                if let Some(w) = links.get(&link) {
                    let _ = w.queue.send(msg.encode());
                }
            }
            Transmit::Close { link } => {
                // The writer drains what was queued, then shuts the socket.
                lock(&shared.net.links).remove(&link);
            }
            Transmit::Dial { node, addr } => {
                let s = shared.clone();
                let spawned = spawn(shared, "tagwired-dial", move || {
                    let me = s.node().0;
                    let dialed =
                        tagwire_net::tcp_connect_from(me, addr, Duration::from_millis(500))
                            .map_err(secure::HandshakeError::Io)
                            .and_then(|stream| {
                                let session = secure::handshake(&stream, &s.guard, true)
                                    .inspect_err(|_| refused_link(&s, addr.ip()))?;
                                Ok((stream, session))
                            });
                    match dialed {
                        Ok((stream, session)) => {
                            if let Some(sn) = &session {
                                s.guard.admit(&sn.peer);
                            }
                            s.net.input(Input::Connected {
                                stream,
                                remote: addr,
                                dialed: Some(node),
                                secure: session.map(Box::new),
                            });
                        }
                        Err(e) => {
                            tracing::trace!(%node, error = %e, "cannot reach peer yet");
                            s.net.input(Input::DialFailed(node));
                        }
                    }
                });
                if spawned.is_err() {
                    st.peers.handle_dial_failed(now, node);
                }
            }
        }
    }
}

/// Starts the reader and writer threads of a link the core just opened as
/// `link`. `false` (and the core told) when the socket cannot be set up.
pub(crate) fn open(
    shared: &Arc<Shared>,
    link: LinkId,
    stream: TcpStream,
    secure: Option<Box<secure::Session>>,
) -> bool {
    let set_up = tagwire_net::tune_link(&stream)
        .and_then(|()| stream.set_write_timeout(Some(Duration::from_secs(1))))
        .and_then(|()| stream.try_clone());
    let writer = match set_up {
        Ok(w) => w,
        Err(e) => {
            tracing::debug!(error = %e, "cannot set up peer link");
            return false;
        }
    };
    let (sender, receiver) = match secure {
        Some(sn) => (Some(sn.sender), Some(sn.receiver)),
        None => (None, None),
    };
    let writer = SecureWrite::new(writer, sender);
    let reader = SecureRead::new(stream, receiver);
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let w = spawn(shared, "tagwired-link-tx", move || write_loop(writer, &rx));
    let s = shared.clone();
    let r = spawn(shared, "tagwired-link-rx", move || {
        read_loop(&s, link, reader)
    });
    if w.is_err() || r.is_err() {
        return false;
    }
    lock(&shared.net.links).insert(link, Writer { queue: tx });
    true
}

/// Forgets a link's writer (its socket is shut down once the queue drains).
pub(crate) fn forget(shared: &Shared, link: LinkId) {
    lock(&shared.net.links).remove(&link);
}

/// Closes every link (the daemon stops).
pub(crate) fn close_all(shared: &Shared) {
    lock(&shared.net.links).clear();
}

fn write_loop(mut stream: SecureWrite<TcpStream>, queue: &Receiver<Vec<u8>>) {
    while let Ok(bytes) = queue.recv() {
        if let Err(e) = stream.write_all(&bytes).and_then(|()| stream.flush()) {
            tracing::debug!(error = %e, "peer link write failed");
            break;
        }
    }
    // Closed by the core, or failed: either way the reader sees the end.
    let _ = stream.get_ref().shutdown(Shutdown::Both);
}

fn read_loop(shared: &Shared, link: LinkId, mut stream: SecureRead<TcpStream>) {
    let mut reader = FrameReader::default();
    loop {
        match reader.next(&mut stream) {
            Ok(msg) => shared.net.input(Input::Message(link, msg)),
            Err(e) => {
                if e.kind() == io::ErrorKind::InvalidData {
                    // The stream may be out of step: count it and close.
                    shared
                        .stats
                        .bad_peer_messages
                        .fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!(?link, error = %e, "peer link ended");
                let _ = stream.get_ref().shutdown(Shutdown::Both);
                shared.net.input(Input::Closed(link));
                return;
            }
        }
    }
}

/// Handshakes under way on accepted connections from one address, and in
/// all: more are refused at once (a flood costs at most these threads,
/// each for at most `secure::HANDSHAKE_TIMEOUT`).
const HANDSHAKES_PER_ADDR: usize = 4;
const HANDSHAKES: usize = 64;

/// An accepted connection with a domain key: its handshake runs on a
/// thread of its own; only an authenticated link reaches the core.
fn accepted(shared: &Arc<Shared>, stream: TcpStream, remote: SocketAddr) {
    {
        let mut hs = lock(&shared.net.handshakes);
        let total: usize = hs.values().sum();
        let mine = hs.entry(remote.ip()).or_insert(0);
        if *mine >= HANDSHAKES_PER_ADDR || total >= HANDSHAKES {
            drop(hs);
            refused_link(shared, remote.ip());
            tracing::debug!(%remote, "too many handshakes under way; connection refused");
            return;
        }
        *mine += 1;
    }
    let s = shared.clone();
    let spawned = spawn(shared, "tagwired-handshake", move || {
        let result = secure::handshake(&stream, &s.guard, false);
        {
            let mut hs = lock(&s.net.handshakes);
            if let Some(n) = hs.get_mut(&remote.ip()) {
                *n -= 1;
                if *n == 0 {
                    hs.remove(&remote.ip());
                }
            }
        }
        match result {
            Ok(session) => {
                if let Some(sn) = &session {
                    s.guard.admit(&sn.peer);
                }
                s.net.input(Input::Connected {
                    stream,
                    remote,
                    dialed: None,
                    secure: session.map(Box::new),
                });
            }
            Err(e) => {
                refused_link(&s, remote.ip());
                tracing::debug!(%remote, error = %e, "peer link not authenticated; closed");
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    });
    if spawned.is_err() {
        let mut hs = lock(&shared.net.handshakes);
        if let Some(n) = hs.get_mut(&remote.ip()) {
            *n = n.saturating_sub(1);
        }
    }
}

/// Counts a control connection that did not authenticate.
fn refused_link(shared: &Shared, from: IpAddr) {
    shared
        .stats
        .unauthenticated_links
        .fetch_add(1, Ordering::Relaxed);
    shared
        .tallies
        .peers
        .add(&from, |c| c.unauthenticated_links += 1);
}

/// A thread of the update manager's (the peer links and discovery).
fn spawn(shared: &Shared, name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    shared
        .roles
        .spawn(crate::roles::Role::Update, name, f)
        .map(|_| ())
}

/// Multicasts our beacon every `interval` and hands the others' to the core.
fn discovery_loop(
    shared: &Shared,
    sock: &UdpSocket,
    beacon: &[u8],
    group: SocketAddr,
    interval: Duration,
) {
    let me = shared.node();
    let mut next = Instant::now();
    let mut buf = [0u8; 2048];
    while !shared.is_stopping() {
        let now = Instant::now();
        if now >= next {
            // Sealed anew each time: each beacon has its own counter.
            let mut sealed = Vec::new();
            let wire = shared.guard.seal(beacon, &mut sealed);
            if let Err(e) = sock.send_to(wire, group) {
                tracing::debug!(error = %e, "cannot send beacon");
            }
            next = now + interval;
        }
        // Sleep in the socket until a beacon arrives or ours is due.
        let wait = next.saturating_duration_since(Instant::now());
        if sock
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .is_err()
        {
            return;
        }
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        if from.ip() == me.0 {
            continue; // our own, looped back
        }
        let (body, life) = match shared.guard.open_beacon(from.ip(), &mut buf[..n]) {
            Ok(opened) => opened,
            Err(refusal) => {
                crate::stats::refused(shared, from.ip(), refusal);
                continue;
            }
        };
        match Beacon::decode(body) {
            Ok(b) if b.node == me => {}
            // A sealed beacon must speak for its sealer and its life.
            Ok(b) if life.is_some_and(|l| l != b.incarnation || b.node.0 != from.ip()) => {
                crate::stats::refused(shared, from.ip(), crate::guard::Refusal::Unauthenticated);
            }
            Ok(b) => shared.net.input(Input::Beacon(from, b)),
            Err(e) => {
                shared.stats.bad_beacons.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%from, error = %e, "malformed beacon dropped");
            }
        }
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
    changed: Condvar,
    next: AtomicU64,
}

impl RemotePulls {
    /// `node` answered pull `id`.
    pub(crate) fn answered(&self, id: u64, node: NodeAddr, answer: Option<Pulled>) {
        let mut p = lock(&self.pending);
        if let Some((waiting, found)) = p.get_mut(&id) {
            waiting.remove(&node);
            found.extend(answer);
        }
        self.changed.notify_all();
    }

    /// `node` is down: no pull waits for it.
    pub(crate) fn gone(&self, node: NodeAddr) {
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
    let me = shared.this.get().and_then(std::sync::Weak::upgrade)?;
    let pulls = &shared.pulls;
    let id = pulls.next.fetch_add(1, Ordering::Relaxed);
    {
        let mut st = shared.lock();
        let asked = st.peers.pull(id, name, query);
        if asked.is_empty() {
            return None;
        }
        // Registered before the request leaves, so no answer comes first.
        lock(&pulls.pending).insert(id, (asked.into_iter().collect(), Vec::new()));
        flush(&me, &mut st);
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

/// Accumulates bytes from a stream into whole messages.
#[derive(Debug, Default)]
struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// The next whole message. Errors end the link: `InvalidData` for a
    /// malformed message, `UnexpectedEof` when the peer closed.
    fn next(&mut self, stream: &mut impl Read) -> io::Result<PeerMessage> {
        loop {
            if let Some(msg) = self.take()? {
                return Ok(msg);
            }
            let mut chunk = [0u8; 16 * 1024];
            match stream.read(&mut chunk) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed")),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn take(&mut self) -> io::Result<Option<PeerMessage>> {
        let Some(prefix) = self.buf.get(..4) else {
            return Ok(None);
        };
        let mut p = [0u8; 4];
        p.copy_from_slice(prefix);
        let n = PeerMessage::frame_len(p).map_err(bad)?;
        let Some(body) = self.buf.get(4..4 + n) else {
            return Ok(None);
        };
        let decoded = PeerMessage::decode(body).map_err(bad);
        self.buf.drain(..4 + n);
        decoded.map(Some)
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

    #[test]
    fn frames_split_across_reads_decode_and_garbage_ends_the_link() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (rx, _) = listener.accept().unwrap();
        let hello = PeerMessage::Hello {
            node: NodeAddr::LOCALHOST,
            name: "a".into(),
            incarnation: 7,
            delivery_port: 1,
        };
        let bytes = [hello.encode(), PeerMessage::Heartbeat.encode()].concat();
        let (first, rest) = bytes.split_at(5);
        let mut reader = FrameReader::default();
        tx.write_all(first).unwrap();
        let writer = std::thread::spawn({
            let rest = rest.to_vec();
            let mut tx = tx.try_clone().unwrap();
            move || {
                std::thread::sleep(Duration::from_millis(20));
                tx.write_all(&rest).unwrap();
                tx.write_all(&[0xff; 8]).unwrap();
            }
        });
        let mut rx = &rx;
        assert_eq!(reader.next(&mut rx).unwrap(), hello);
        assert_eq!(reader.next(&mut rx).unwrap(), PeerMessage::Heartbeat);
        assert_eq!(
            reader.next(&mut rx).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        writer.join().unwrap();
        drop(tx);
        let mut eof = FrameReader::default();
        assert!(eof.next(&mut rx).is_err());
    }
}
