//! # tagwire-daemon: the per-node daemon `tagwired`
//!
//! docs/design.md §2: one daemon per node owns this node's copy of the global tag
//! table. Only daemons change the table; clients hold replicas. Its roles each
//! have a module:
//!
//! * [`local`]: the **local manager**. It serves client requests (create and
//!   destroy tags, send access, subscriptions, listings, history, large
//!   messages) over the Unix socket, one thread per client, and releases
//!   every right of a client whose connection closes (the kernel closes it
//!   when the process dies, however it dies).
//! * [`update`]: the **update manager**. It pushes every table change, in
//!   version order, to the local clients and replicates it to the peer
//!   daemons. Who is up, the handshake, incarnations, leases and
//!   acknowledgements are decided by the membership core
//!   ([`tagwire_proto::Membership`], in the state), which the update
//!   manager's thread drives; [`peers`] holds its sockets and threads (TCP
//!   links, the node list, the multicast beacon). The local manager calls
//!   the update manager, which calls `peers`: never the other way round.
//! * [`delivery`]: the **delivery manager**, data between nodes. Outbound, a
//!   forwarder per global tag with remote receivers (`forward`) reads the
//!   tag's ring like a subscriber and sends each message once per node, by
//!   the routing plan of `tagwire_session::plan` (carriers, every-n-th proxies; `auto` places
//!   `Proxy::Auto` ones); inbound, it writes what arrives into the local ring
//!   once for all local subscribers. Same-node data never touches the daemon:
//!   it goes from publisher to subscribers through the tag's shared-memory
//!   ring (docs/design.md §1 row 4).
//! * [`pull`]: the **pull manager** (push-pull): per-tag histories, and
//!   pulls answered from them or from a peer's.
//! * [`policy`]: who may publish, subscribe, create and destroy which tags
//!   (uid and groups from `SO_PEERCRED`, tag owners, a policy file).
//! * [`quota`]: the bounds of what one user and the daemon may hold.
//! * [`guard`]: the trust boundary with other hosts: every datagram sealed
//!   when sent and opened (authenticated, new, from an up peer) before it
//!   is parsed, with the domain key when one is given (`tagwire-auth`);
//!   `secure` runs the Noise handshake of control links and TCP data
//!   connections and encrypts every byte after it.
//! * [`blob`]: the store for messages too large for a shared-memory slot,
//!   each kept until every gated reader has passed its record.
//! * `stats`: the counters of `tagwire stats` (per node, tag, stream to
//!   another node, peer, and the clients' subscribers).
//!
//! The binary is a few lines over [`Daemon::start`], so tests run daemons in-process.

mod acks;
mod auto;
pub mod blob;
pub mod delivery;
mod forward;
pub mod guard;
mod keyroll;
pub mod local;
mod outbox;
pub mod peers;
pub mod policy;
pub mod pull;
pub mod quota;
mod remote_qos;
mod replies;
mod restate;
mod ring;
pub mod roles;
mod secure;
#[cfg(test)]
mod state_lock_tests;
mod stats;
mod tcpout;
mod train;
pub mod update;

pub use guard::{read_key_file, read_key_roll, write_key_file, KeyFileError};
pub use peers::{Discovery, NetConfig, NodeListEntry};
pub use tagwire_auth::key::KEY_LEN as DOMAIN_KEY_LEN;
pub use tagwire_auth::{DomainKey, KeyFile, ROLL_GRACE};
pub use tagwire_reliable::pacer::PacerConfig;

use priority_inheriting_lock::{PriorityInheritingLock, PriorityInheritingLockGuard};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use thiserror::Error;

use tagwire_proto::{membership, ClientId, Membership, TagTable};
use tagwire_shm::Ring;
use tagwire_unix::{Listener, SeqPacket};
use tagwire_wire::control::RingParams;
use tagwire_wire::{NodeAddr, TagId};

/// Daemon settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Socket path clients connect to.
    pub socket: PathBuf,
    /// Address stamped on messages as the sender's node.
    pub node: NodeAddr,
    /// Ring shape for tags created without one.
    pub default_ring: RingParams,
    /// Large messages kept per tag (see `blob`); `None`: as many as the
    /// tag's ring has slots, so a reader within the ring finds every one.
    /// Messages a lossless reader still needs are kept regardless: their
    /// publishers wait instead.
    pub blobs_per_tag: Option<usize>,
    /// Bytes of large messages kept per tag (with the same exception).
    pub blob_bytes_per_tag: u64,
    /// Networking with the daemons of other nodes; `None` for a single node.
    pub net: Option<NetConfig>,
    /// The topology file (`tagwire place` format, an `address` per node) in
    /// which subscriptions with `Proxy::Auto` get their proxies placed; give
    /// every node the same file. `None`: such subscriptions are refused.
    pub topology: Option<PathBuf>,
    /// Who may do what on which tag (see [`policy`]); `None`: root, the
    /// daemon's user and each tag's owner may do everything, and the
    /// members of `shared_group`.
    pub policy: Option<PathBuf>,
    /// Without a policy file, the group whose members get every right.
    pub shared_group: Option<String>,
    /// What one user and the daemon as a whole may hold.
    pub quotas: quota::Quotas,
    /// The scheduling policy of each role's threads (see [`roles`]).
    pub sched: roles::Roles,
    /// Lock the daemon's memory (`mlockall`), so that no page fault stalls
    /// a real-time role; refused (no `CAP_IPC_LOCK`, too low a limit): a
    /// warning, and the daemon runs unlocked.
    pub mlock: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            socket: tagwire_unix::default_socket_path(),
            node: NodeAddr::LOCALHOST,
            default_ring: RingParams {
                slots: 256,
                slot_payload: 64 * 1024,
            },
            blobs_per_tag: None,
            blob_bytes_per_tag: 512 << 20,
            net: None,
            topology: None,
            policy: None,
            shared_group: None,
            quotas: quota::Quotas::default(),
            sched: roles::Roles::default(),
            mlock: false,
        }
    }
}

/// Why the daemon could not start.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// Another daemon answers on the socket.
    #[error("a tagwire daemon is already running at {0}")]
    AlreadyRunning(PathBuf),
    /// The socket could not be created.
    #[error("cannot listen on {path}: {source}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Installing signal handlers failed.
    #[error("cannot install signal handlers: {0}")]
    Signals(io::Error),
    /// The policy file is unreadable or invalid, or the shared group unknown.
    #[error("access policy: {0}")]
    Policy(String),
    /// The topology file for `Proxy::Auto` is unreadable or invalid.
    #[error("topology for auto proxies: {0}")]
    Topology(String),
    /// The network side (peer links, discovery, delivery) could not start.
    #[error("cannot start networking: {0}")]
    Net(io::Error),
}

/// `e`, its kind kept, saying which socket at which address it is about:
/// "cannot start networking: the delivery port (UDP) 10.0.0.1:7402: Address
/// already in use".
pub(crate) fn naming(e: io::Error, socket: &str, at: std::net::SocketAddr) -> io::Error {
    io::Error::new(e.kind(), format!("{socket} {at}: {e}"))
}

/// A running daemon. Dropping it shuts it down.
#[derive(Debug)]
pub struct Daemon {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// State shared by the daemon's threads.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    /// Who may do what (from `config.policy` / `shared_group`).
    pub(crate) policy: policy::Policy,
    /// Live connections per uid (bounded by `config.quotas`).
    pub(crate) connections: quota::Connections,
    /// The local manager's event loop and workers.
    pub(crate) conns: local::conns::Conns,
    /// Priority-inheriting: a real-time role waiting for it lends its
    /// priority to the holder (a client request at the default policy).
    pub(crate) state: PriorityInheritingLock<State>,
    pub(crate) stopping: AtomicBool,
    pub(crate) next_client: AtomicU64,
    /// Changes at each start (nanoseconds since the epoch), so peers can tell
    /// a restarted daemon from a reconnecting one.
    pub(crate) incarnation: u64,
    /// Outcomes of replications awaited by client threads.
    pub(crate) replications: update::Replications,
    /// The sockets' side of membership: inputs to the update manager, links.
    pub(crate) net: peers::Net,
    /// Pulls of histories on other nodes awaiting answers.
    pub(crate) pulls: peers::RemotePulls,
    /// Changes of other nodes' subscriptions awaiting their answers.
    pub(crate) qos_asks: remote_qos::QosAsks,
    pub(crate) stats: Stats,
    /// Seals what this daemon sends to other hosts and opens what they send
    /// (`guard`; with a domain key, authenticated).
    pub(crate) guard: guard::Guard,
    /// Bumped whenever a ring comes or goes (`State::sinks`): the inbound
    /// threads' caches of sinks look again.
    pub(crate) sinks_gen: AtomicU64,
    /// Counts per tag and per peer address, and clients' reports awaited
    /// (`tagwire stats`).
    pub(crate) tallies: stats::Tallies,
    pub(crate) reports: stats::Reports,
    /// The pull manager's history keepers.
    pub(crate) keepers: pull::Keepers,
    /// The delivery manager, once networking started.
    pub(crate) delivery: std::sync::OnceLock<Arc<delivery::Delivery>>,
    /// Where `Proxy::Auto` subscriptions are placed, if a topology was given.
    pub(crate) placer: Option<auto::Placer>,
    /// The policies the roles' threads run at (`config.sched`, less what
    /// the system refused).
    pub(crate) roles: roles::Granted,
    /// Ourselves, for threads started from code that holds only `&Shared`.
    pub(crate) this: std::sync::OnceLock<std::sync::Weak<Shared>>,
    listener: Listener,
}

/// Counters of dropped input (never logged per packet at INFO).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) bad_beacons: AtomicU64,
    pub(crate) bad_peer_messages: AtomicU64,
    pub(crate) bad_datagrams: AtomicU64,
    /// Datagrams refused before parsing: not from an up peer, not sealed
    /// with the domain key by that peer in its current life, or changed.
    pub(crate) unauthenticated: AtomicU64,
    /// Authentic datagrams refused because they were accepted before.
    pub(crate) replayed: AtomicU64,
    /// Control connections whose handshake failed (or were refused).
    pub(crate) unauthenticated_links: AtomicU64,
    /// Peers' `Sync`s ignored for exceeding this daemon's bounds.
    pub(crate) refused_syncs: AtomicU64,
    pub(crate) unknown_tag: AtomicU64,
    pub(crate) forward_lost: AtomicU64,
    pub(crate) forward_dropped: AtomicU64,
    pub(crate) best_effort_lost: AtomicU64,
    pub(crate) tcp_frames: AtomicU64,
    /// The longest the daemon's state was held at once, ns: what a table
    /// change (or any other holder) can make another role wait
    /// (`tagwire stats`: `state_hold_max_us`; the blocking term of
    /// `tagwire analyze`).
    pub(crate) state_hold_max_ns: AtomicU64,
    pub(crate) multicast_sent: AtomicU64,
    pub(crate) scaled_out: AtomicU64,
    /// Records whose first copy their publisher sent itself (send ticket).
    pub(crate) direct_sent: AtomicU64,
    /// Such first copies received here that were new to their stream.
    pub(crate) direct_received: AtomicU64,
    /// Data datagrams refused, unacknowledged, because a lossless
    /// subscriber's tag already had a ring's worth held back here.
    pub(crate) held_back: AtomicU64,
    /// Messages from other nodes held back here for lossless subscribers
    /// (now, over all tags).
    pub(crate) held_now: AtomicU64,
    /// Such messages since the start.
    pub(crate) held: AtomicU64,
    /// Large messages refused to a local publisher (it waits and tries
    /// again) because every one kept was still needed by a gated reader.
    pub(crate) blobs_held: AtomicU64,
    /// Messages from other nodes that could not be written here (no memory
    /// for a large message's memfd, or a record the ring refused).
    pub(crate) inbound_failed: AtomicU64,
}

/// Everything behind the daemon's one lock. Requests are rare and short (the
/// data path never comes here), so one lock keeps the table, the rings and the
/// client list consistent, and makes update broadcasts leave in version order.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) table: TagTable,
    pub(crate) rings: HashMap<TagId, Ring>,
    pub(crate) blobs: HashMap<TagId, blob::BlobStore>,
    pub(crate) clients: HashMap<ClientId, Outbox>,
    /// The membership core: peers, links, leases, replication acks.
    pub(crate) peers: Membership,
    /// Each ring as the inbound path writes it, with the messages from
    /// other nodes a lossless subscriber has no room for yet (see
    /// `delivery::Sink`); kept with `rings` by `delivery::ring_added` and
    /// `ring_removed`.
    pub(crate) sinks: HashMap<TagId, Arc<delivery::Sink>>,
    /// Each local subscription's seat in its ring and the lossless gate
    /// held for it, ended on Unsubscribe or disconnect (`local::grant`).
    pub(crate) seats: HashMap<ClientId, Vec<local::Sitting>>,
    /// The uid that created each tag created on this node (see `policy`).
    pub(crate) owners: HashMap<TagId, u32>,
    /// Peers' changes of this node's subscriptions, answered once
    /// replicated (`remote_qos`).
    pub(crate) answering: Vec<remote_qos::Answering>,
}

/// A client's connection as the rest of the daemon sees it: a bounded queue
/// that the local manager's event loop drains (`local::conns`), so that a
/// client which stops reading delays only itself, never a broadcast made
/// under the state lock.
#[derive(Debug)]
pub(crate) struct Outbox {
    pub(crate) conn: Arc<SeqPacket>,
    pub(crate) tx: outbox::OutTx,
    /// The client's uid (`SO_PEERCRED`): who may change its subscriptions.
    pub(crate) uid: u32,
}

/// The daemon's state while [`Shared::lock`] holds it; dropping it records
/// how long it was held.
pub(crate) struct StateGuard<'a> {
    guard: PriorityInheritingLockGuard<'a, State>,
    since: std::time::Instant,
    max: &'a AtomicU64,
    /// Who took it (`Shared::lock`'s caller), named when it sets a new
    /// longest hold.
    at: &'static std::panic::Location<'static>,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let ns = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let before = self.max.fetch_max(ns, Ordering::Relaxed);
        // A new longest hold of a millisecond or more says who held it
        // (`TAGWIRE_LOG=tagwire_daemon::state=debug`): rare, so the line's
        // cost inside the hold does not matter.
        if ns > before && ns >= 1_000_000 {
            tracing::debug!(
                target: "tagwire_daemon::state",
                held_us = ns / 1000,
                at = %self.at,
                thread = std::thread::current().name().unwrap_or("?"),
                "longest hold of the daemon's state so far"
            );
        }
    }
}

/// Packets queued for one client before it counts as stuck and is disconnected.
pub(crate) const OUTBOX_DEPTH: usize = 4096;

impl Shared {
    /// The daemon's state, held until the guard drops (each hold timed:
    /// [`Stats::state_hold_max_ns`]).
    #[track_caller]
    pub(crate) fn lock(&self) -> StateGuard<'_> {
        let at = std::panic::Location::caller();
        let guard = self.state.lock();
        StateGuard {
            guard,
            since: std::time::Instant::now(),
            max: &self.stats.state_hold_max_ns,
            at,
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// This daemon's node address.
    pub(crate) fn node(&self) -> NodeAddr {
        self.config.node
    }
}

/// Locks a mutex, recovering it if a thread panicked while holding it: a panic
/// in one handler must not take the daemon down, and the state is only mutated
/// through methods that leave it consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Daemon {
    /// Binds the socket and starts serving.
    pub fn start(mut config: Config) -> Result<Self, DaemonError> {
        if let Some(net) = &config.net {
            config.node = NodeAddr(net.addr);
        }
        let placer = config
            .topology
            .as_deref()
            .map(auto::Placer::load)
            .transpose()
            .map_err(DaemonError::Topology)?;
        let me = rustix::process::geteuid().as_raw();
        let policy = match (&config.policy, &config.shared_group) {
            (Some(path), _) => policy::Policy::load(path, me).map_err(DaemonError::Policy)?,
            (None, Some(group)) => {
                let gid = uzers::get_group_by_name(group.as_str())
                    .map(|g| g.gid())
                    .or_else(|| group.parse().ok())
                    .ok_or_else(|| DaemonError::Policy(format!("no group named {group:?}")))?;
                policy::Policy::open(me, Some(gid))
            }
            (None, None) => policy::Policy::open(me, None),
        };
        quota::raise_descriptor_limit();
        if config.mlock {
            match tagwire_sched::lock_memory() {
                Ok(()) => tracing::info!("memory locked"),
                Err(e) => tracing::warn!("--mlock: the daemon runs with its memory unlocked: {e}"),
            }
        }
        let roles = roles::Granted::check(config.sched);
        let listener = bind(&config.socket)?;
        let conns = local::conns::Conns::new(&listener).map_err(|source| DaemonError::Bind {
            path: config.socket.clone(),
            source,
        })?;
        tracing::info!(socket = %config.socket.display(), node = %config.node, "tagwired listening");
        let incarnation = now_unix_ns();
        // The table's Lamport clock starts at the wall clock (µs), so that the
        // changes of a restarted daemon are newer than its previous life's.
        let table = TagTable::for_node(config.node, config.default_ring, incarnation / 1000);
        let members = match &config.net {
            Some(net) => net.membership(incarnation),
            // No peers: the core stays idle.
            None => membership::Config::new(
                config.node,
                incarnation,
                Duration::from_secs(3),
                Duration::from_secs(1),
            ),
        };
        let (shared_key, shared_encrypt) = match &config.net {
            Some(net) => (net.key.clone(), net.encrypt),
            None => (None, false),
        };
        let shared_node = config.node.0;
        if let Some(net) = &config.net {
            if net.key.is_none() && !net.addr.is_loopback() {
                tracing::warn!(
                    node = %net.addr,
                    "no domain key (--key): this daemon trusts every host that reaches ports {} and {}; \
                     anyone on the network can join, change the tag table and inject messages \
                     (create a key with `tagwire keygen` and give every node --key)",
                    net.control_port,
                    net.delivery_port
                );
            }
            if net.encrypt && net.key.is_none() {
                tracing::warn!("--encrypt has no effect without --key");
            }
        }
        let shared = Arc::new(Shared {
            roles,
            state: PriorityInheritingLock::new(State {
                table,
                rings: HashMap::new(),
                sinks: HashMap::new(),
                blobs: HashMap::new(),
                clients: HashMap::new(),
                seats: HashMap::new(),
                owners: HashMap::new(),
                answering: Vec::new(),
                peers: Membership::new(members),
            }),
            config,
            policy,
            connections: quota::Connections::default(),
            conns,
            stopping: AtomicBool::new(false),
            next_client: AtomicU64::new(1),
            incarnation,
            replications: update::Replications::default(),
            net: peers::Net::default(),
            pulls: peers::RemotePulls::default(),
            qos_asks: remote_qos::QosAsks::default(),
            stats: Stats::default(),
            guard: guard::Guard::new(
                shared_key.as_ref(),
                shared_encrypt,
                shared_node,
                incarnation,
            ),
            sinks_gen: AtomicU64::new(0),
            keepers: pull::Keepers::default(),
            delivery: std::sync::OnceLock::new(),
            tallies: stats::Tallies::default(),
            reports: stats::Reports::default(),
            placer,
            this: std::sync::OnceLock::new(),
            listener,
        });
        let _ = shared.this.set(Arc::downgrade(&shared));
        if let Some(net) = shared.config.net.clone() {
            let keys = match &net.key_file {
                Some(path) if net.key.is_some() => Some(keyroll::prepare(&shared, path.clone())),
                _ => None,
            };
            let started = delivery::Delivery::start(
                &shared,
                std::net::SocketAddr::new(net.addr, net.delivery_port),
                net.multicast_port,
            )
            .and_then(|d| {
                let _ = shared.delivery.set(d);
                peers::start(&shared, &net)
            })
            .and_then(|()| update::start(&shared))
            .and_then(|()| match keys {
                Some(w) => keyroll::start(&shared, w),
                None => Ok(()),
            });
            if let Err(e) = started {
                shared.stopping.store(true, Ordering::SeqCst);
                let _ = std::fs::remove_file(&shared.config.socket);
                return Err(DaemonError::Net(e));
            }
        }
        local::conns::start_workers(&shared);
        let s = shared.clone();
        let accept = shared
            .roles
            .spawn(roles::Role::Local, "tagwired-local", move || {
                local::conns::run(s)
            })
            .map_err(|e| DaemonError::Bind {
                path: shared.config.socket.clone(),
                source: e,
            })?;
        Ok(Self {
            shared,
            accept: Some(accept),
        })
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.shared.config.socket
    }

    /// Number of connected clients.
    pub fn client_count(&self) -> usize {
        self.shared.lock().clients.len()
    }

    /// Number of tags.
    pub fn tag_count(&self) -> usize {
        self.shared.lock().table.len()
    }

    /// Datagrams dropped as malformed by the delivery manager.
    pub fn bad_datagrams(&self) -> u64 {
        self.shared.stats.bad_datagrams.load(Ordering::Relaxed)
    }

    /// Messages the forwarders lost (ring lapped them) or dropped (window full
    /// for too long).
    pub fn forward_losses(&self) -> u64 {
        self.shared.stats.forward_lost.load(Ordering::Relaxed)
            + self.shared.stats.forward_dropped.load(Ordering::Relaxed)
    }

    /// Datagrams a publisher sent itself to a reliable node, holding the send
    /// ticket of its tag's forwarder (counted per node), rather than leaving
    /// them to the forwarder.
    pub fn direct_sends(&self) -> u64 {
        self.shared.stats.direct_sent.load(Ordering::Relaxed)
    }

    /// Datagrams received here that a publisher on another node sent itself
    /// (send ticket) and that were new to their stream: first copies that
    /// did not wait for a resend.
    pub fn direct_received(&self) -> u64 {
        self.shared.stats.direct_received.load(Ordering::Relaxed)
    }

    /// Messages from other nodes that waited in this daemon for a lossless
    /// subscriber to make room, since the start.
    pub fn held_messages(&self) -> u64 {
        self.shared.stats.held.load(Ordering::Relaxed)
    }

    /// Data datagrams from other nodes refused (left unacknowledged, so
    /// their sender resends them later) because a lossless subscriber here
    /// was a ring behind and a ring's worth more was already held back.
    pub fn held_back(&self) -> u64 {
        self.shared.stats.held_back.load(Ordering::Relaxed)
    }

    /// Times a local publisher of a large message was told to wait because
    /// every large message kept was still needed by a lossless subscriber
    /// or a reliable remote stream (see `blob`).
    pub fn blobs_held(&self) -> u64 {
        self.shared.stats.blobs_held.load(Ordering::Relaxed)
    }

    /// Best-effort datagrams that never arrived here (skipped over by a newer
    /// one), over all streams.
    pub fn best_effort_losses(&self) -> u64 {
        self.shared.stats.best_effort_lost.load(Ordering::Relaxed)
    }

    /// Data frames received over TCP connections (the TCP carrier).
    pub fn tcp_frames(&self) -> u64 {
        self.shared.stats.tcp_frames.load(Ordering::Relaxed)
    }

    /// Datagrams the multicast carrier sent (one per batch or fragment for
    /// all the nodes that receive a tag by multicast).
    pub fn multicast_sent(&self) -> u64 {
        self.shared.stats.multicast_sent.load(Ordering::Relaxed)
    }

    /// Copies of samples this node's delivery manager, as a proxy (at the
    /// publisher, or an intermediate node), did not send to a node because
    /// none of its receivers asked for them (temporal scaling).
    pub fn scaled_out(&self) -> u64 {
        self.shared.stats.scaled_out.load(Ordering::Relaxed)
    }

    /// Datagrams this daemon's delivery manager sent again (NACK or timeout).
    pub fn retransmissions(&self) -> u64 {
        self.shared
            .delivery
            .get()
            .map_or(0, |d| d.outbound.retransmitted.load(Ordering::Relaxed))
    }

    /// The peers this daemon knows and their state.
    pub fn nodes(&self) -> Vec<tagwire_wire::control::NodeSummary> {
        self.shared
            .lock()
            .peers
            .summaries(std::time::Instant::now())
    }

    /// Stops accepting, disconnects every client, removes the socket file.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.shared.listener.shutdown();
        self.shared.conns.stop();
        if self.shared.config.net.is_some() {
            peers::stop(&self.shared);
        }
        if let Some(d) = self.shared.delivery.get() {
            d.stop();
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let clients: Vec<_> = self
            .shared
            .lock()
            .clients
            .values()
            .map(|o| o.conn.clone())
            .collect();
        for c in clients {
            let _ = c.shutdown();
        }
        let _ = std::fs::remove_file(&self.shared.config.socket);
        tracing::info!("tagwired stopped");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs a daemon until SIGINT or SIGTERM (the `tagwired` binary).
pub fn run_until_signal(config: Config) -> Result<(), DaemonError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(DaemonError::Signals)?;
    let daemon = Daemon::start(config)?;
    // Sleeps until one of them arrives.
    let _ = signals.forever().next();
    tracing::info!("signal received, shutting down");
    daemon.shutdown();
    Ok(())
}

fn bind(path: &Path) -> Result<Listener, DaemonError> {
    let bind_err = |source| DaemonError::Bind {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::create_dir_all(dir).map_err(bind_err)?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    if let Some(dir) =
        tagwire_unix::implicit_socket_dir().filter(|d| Some(d.as_path()) == path.parent())
    {
        if dir.exists() {
            tagwire_unix::check_private_dir(&dir).map_err(bind_err)?;
        }
    }
    if path.exists() {
        // A socket file with a live daemon behind it: refuse. A stale one (the last
        // daemon crashed): remove it.
        if SeqPacket::connect(path).is_ok() {
            return Err(DaemonError::AlreadyRunning(path.to_owned()));
        }
        std::fs::remove_file(path).map_err(bind_err)?;
    }
    Listener::bind(path).map_err(bind_err)
}

pub(crate) fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
