//! The client: connection to the daemon, request service, update thread.
//!
//! Threads and locks: caller threads send requests on the socket (a mutex
//! serialises writers) and wait on a per-request channel; the **update thread** is
//! the only reader of the socket. It routes responses to their waiters and
//! applies table updates to the replica under a short write lock. The send and
//! receive paths take none of these locks: they only read two atomics of their
//! endpoint (generation, destroyed), so a table update cannot delay them
//! (no unbounded priority inversion, docs/design.md §1 row 3).
//!
//! When the daemon goes away the update thread fails every pending request with
//! [`Error::DaemonUnreachable`], then reconnects every 100 ms; once connected it
//! re-creates the tags its endpoints use, re-registers their rights, and hands each
//! endpoint its new ring (bumping its generation).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, Instant};

use tagwire_proto::Replica;
use tagwire_shm::{Ring, Seat};
use tagwire_unix::SeqPacket;
use tagwire_wire::control::NodeSummary;
use tagwire_wire::control::{
    ErrorCode, KeepHistory, Message as Ctl, Request, Response, RingParams, StatsKind, StatsRow,
    TableEvent, TagOpened, TagSummary, MAX_MESSAGE,
};
use tagwire_wire::{Domain, Member, NodeAddr, Pid, Reliability, SenderInfo, TagId, TagName};

use crate::{autostart, Error, Result};

mod channels;
pub use channels::{Channels, Processes};
mod endpoint;
pub(crate) use endpoint::{borrow, map_ring, Endpoint, EndpointKind, Fds, ReceiveCounters};
mod keys;
mod update;

/// How to reach the daemon.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Socket path (default: `$TAGWIRE_SOCKET` or the per-user runtime dir).
    pub socket: PathBuf,
    /// How long a request may wait for the daemon (default 1 s).
    pub timeout: Duration,
    /// Start a background daemon if none answers (default: `TAGWIRE_AUTOSTART=1`).
    pub autostart: bool,
    /// A label for the daemon's logs.
    pub name: String,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            socket: tagwire_unix::default_socket_path(),
            timeout: Duration::from_secs(1),
            autostart: std::env::var("TAGWIRE_AUTOSTART").is_ok_and(|v| v == "1" || v == "true"),
            name: std::env::args().next().unwrap_or_default(),
        }
    }
}

/// A connection to the node's tagwire daemon. Cheap to clone; publishers and
/// subscribers keep it alive.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) core: Arc<Core>,
    _guard: Arc<StopGuard>,
}

/// Stops the update thread when the last user handle goes.
#[derive(Debug)]
struct StopGuard(Arc<Core>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
        if let Some(c) = self.0.conn() {
            let _ = c.shutdown();
        }
    }
}

type Reply = (Response, Option<Fds>);

#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) opts: ClientOptions,
    conn: Mutex<Option<Arc<SeqPacket>>>,
    send_lock: Mutex<()>,
    next_id: AtomicU32,
    pending: Mutex<HashMap<u32, mpsc::SyncSender<Result<Reply>>>>,
    replica: RwLock<Replica>,
    /// The longest the update thread held `replica` for writing, ns
    /// ([`Client::table_hold_max`]).
    table_hold_max_ns: AtomicU64,
    pub(crate) me: Mutex<SenderInfo>,
    endpoints: Mutex<Vec<Weak<Endpoint>>>,
    stop: AtomicBool,
    /// Connection epoch: bumped (under the `endpoints` lock) each time a
    /// reconnection has re-registered every endpoint.
    epoch: AtomicU64,
    /// Requests whose caller stopped waiting (timeout, or fire-and-forget): if one
    /// was granted after all, the update thread gives the right back.
    abandoned: Mutex<HashMap<u32, Abandoned>>,
    /// The daemon's send socket (`Request::SendSocket`), asked for by the
    /// first publisher of a global tag; `Some(None)` when the daemon has
    /// none (a failed request is not remembered: the next publisher asks).
    send_socket: Mutex<Option<Option<Arc<std::net::UdpSocket>>>>,
    /// Streams the daemon handed over for a subscription not yet answered
    /// (direct delivery), by tag.
    pub(crate) stash: Mutex<HashMap<TagId, Vec<tagwire_wire::handover::StreamState>>>,
    /// Under a domain key, the holding keys of the tags whose streams the
    /// daemon hands over (`Request::Holding`, before the streams), by tag.
    /// (Two during a key roll, the one sealed with first.)
    pub(crate) holdings: Mutex<HashMap<TagId, (Vec<tagwire_auth::HoldingKey>, bool)>>,
    /// The seats of the tags' subscribers (`Request::Seat`), by tag: the
    /// rings of this client's publishers get them, also those granted later.
    pub(crate) seats: Mutex<HashMap<TagId, Vec<Arc<Seat>>>>,
}

/// What to undo if an abandoned request turns out to have succeeded.
#[derive(Debug, Clone, Copy)]
enum Abandoned {
    Nothing,
    SendAccess,
    Subscription,
}

impl Abandoned {
    fn of(req: &Request) -> Self {
        match req {
            Request::GetSendAccess { .. } => Abandoned::SendAccess,
            Request::Subscribe { .. } => Abandoned::Subscription,
            _ => Abandoned::Nothing,
        }
    }
}

/// Refuses a daemon that runs as neither root nor this process's user: it
/// would see (and could forge) everything sent through it.
pub(crate) fn check_daemon(sock: &SeqPacket, socket: &std::path::Path) -> Result<()> {
    let me = rustix::process::geteuid().as_raw();
    match sock.peer_cred() {
        Ok(c) if c.uid == 0 || c.uid == me => Ok(()),
        Ok(c) => Err(Error::ForeignDaemon {
            socket: socket.to_owned(),
            uid: c.uid,
            me,
        }),
        Err(e) => Err(Error::DaemonUnreachable {
            socket: socket.to_owned(),
            reason: format!("cannot read the daemon's credentials: {e}"),
        }),
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning only means another thread panicked mid-update of plain data.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Client {
    /// Connects with default options (see [`ClientOptions`]).
    pub fn connect() -> Result<Self> {
        Self::with_options(ClientOptions::default())
    }

    /// Connects with the given options.
    pub fn with_options(opts: ClientOptions) -> Result<Self> {
        let implicit = tagwire_unix::implicit_socket_dir();
        if let Some(dir) =
            implicit.filter(|d| Some(d.as_path()) == opts.socket.parent() && d.exists())
        {
            tagwire_unix::check_private_dir(&dir).map_err(|e| Error::DaemonUnreachable {
                socket: opts.socket.clone(),
                reason: e.to_string(),
            })?;
        }
        let sock = match SeqPacket::connect(&opts.socket) {
            Ok(s) => s,
            Err(e) if opts.autostart => autostart::start_and_connect(&opts, &e)?,
            Err(e) => {
                return Err(Error::DaemonUnreachable {
                    socket: opts.socket.clone(),
                    reason: e.to_string(),
                })
            }
        };
        check_daemon(&sock, &opts.socket)?;
        let core = Arc::new(Core {
            opts,
            conn: Mutex::new(None),
            send_lock: Mutex::new(()),
            next_id: AtomicU32::new(1),
            pending: Mutex::new(HashMap::new()),
            replica: RwLock::new(Replica::new()),
            table_hold_max_ns: AtomicU64::new(0),
            me: Mutex::new(SenderInfo {
                pid: Pid(std::process::id()),
                node: NodeAddr::LOCALHOST,
            }),
            endpoints: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            abandoned: Mutex::new(HashMap::new()),
            send_socket: Mutex::new(None),
            stash: Mutex::new(HashMap::new()),
            holdings: Mutex::new(HashMap::new()),
            seats: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
        });
        core.handshake(&sock)?;
        sock.set_read_timeout(None)
            .map_err(|e| Error::Io(e.to_string()))?;
        *lock(&core.conn) = Some(Arc::new(sock));
        let c = core.clone();
        std::thread::Builder::new()
            .name("tagwire-update".into())
            .spawn(move || c.update_loop())
            .map_err(|e| Error::Io(format!("cannot start the update thread: {e}")))?;
        Ok(Self {
            _guard: Arc::new(StopGuard(core.clone())),
            core,
        })
    }

    /// This process as senders see it (pid and node address).
    pub fn me(&self) -> SenderInfo {
        *lock(&self.core.me)
    }

    /// Creates a tag (with the daemon's default ring). Creating an existing tag is
    /// not an error; returns true when this call created it.
    pub fn create_tag(&self, name: &str, domain: Domain) -> Result<bool> {
        self.create_tag_with(name, domain, RingParams::default())
    }

    /// Creates a tag with a given ring shape (slot count = the deepest queue a
    /// subscriber may ask for; slot payload = the largest message on the fast path).
    pub fn create_tag_with(&self, name: &str, domain: Domain, ring: RingParams) -> Result<bool> {
        self.create_tag_keeping(name, domain, ring, KeepHistory::default())
    }

    /// Creates a tag whose history this node's daemon keeps from the start
    /// (the last `history.depth` messages, for [`Client::pull`] and
    /// [`Client::subscribe_with_history`]), so nothing published before an
    /// admin could run `tagwire history` is missed. When the tag exists
    /// already nothing changes (use [`Client::set_history`] for that).
    pub fn create_tag_keeping(
        &self,
        name: &str,
        domain: Domain,
        ring: RingParams,
        history: KeepHistory,
    ) -> Result<bool> {
        let name = TagName::new(name)?;
        match self.core.call(
            Request::CreateTag {
                name: name.clone(),
                domain,
                ring,
                history,
            },
            None,
        )? {
            (Response::TagCreated { created, .. }, _) => Ok(created),
            other => Err(unexpected(other, &name)),
        }
    }

    /// Destroys a tag: every publisher and subscriber on it, in every process,
    /// gets [`Error::TagDestroyed`] from then on.
    pub fn destroy_tag(&self, name: &str) -> Result<()> {
        let name = TagName::new(name)?;
        match self
            .core
            .call(Request::DestroyTag { name: name.clone() }, None)?
        {
            (Response::Ok, _) => Ok(()),
            other => Err(unexpected(other, &name)),
        }
    }

    /// The socket publishers send their own first copies from (see
    /// `Publisher::send`), asked of the daemon once; `None` from a daemon
    /// without a network (nothing to send to) or that cannot give one.
    pub(crate) fn send_socket(&self) -> Option<Arc<std::net::UdpSocket>> {
        let mut cached = lock(&self.core.send_socket);
        if let Some(s) = &*cached {
            return s.clone();
        }
        let sock = match self.core.call(Request::SendSocket, None) {
            Ok((Response::Ok, Some(Fds { first: fd, .. }))) => {
                let sock = std::net::UdpSocket::from(fd);
                // A full send buffer loses the copy (the window repairs it)
                // rather than stall the publisher holding the ticket.
                sock.set_nonblocking(true).ok().map(|()| Arc::new(sock))
            }
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(error = %e, "no send socket yet: the daemon's forwarder sends everything");
                return None;
            }
        };
        *cached = Some(sock.clone());
        sock
    }

    /// The processes holding send access to a tag (asks the daemon).
    pub fn senders(&self, name: &str) -> Result<Vec<Member>> {
        Ok(self.members(name)?.0)
    }

    /// The processes subscribed to a tag (asks the daemon).
    pub fn receivers(&self, name: &str) -> Result<Vec<Member>> {
        Ok(self.members(name)?.1)
    }

    /// Every tag with its senders and receivers (asks the daemon).
    pub fn tags(&self) -> Result<Vec<TagSummary>> {
        match self.core.call(Request::ListTags, None)? {
            (Response::Tags { tags, .. }, _) => Ok(tags),
            other => Err(unexpected(other, &"*")),
        }
    }

    /// Makes this node's daemon keep the last `depth` messages of a tag
    /// (at most `max_bytes` of payload; 0: the daemon's default of 16 MiB),
    /// from now on, for [`Client::pull`]; `depth` 0 stops keeping them. The
    /// history outlives the publishers (the admin command of the pull
    /// buffers; `tagwire history`).
    pub fn set_history(&self, name: &str, depth: u32, max_bytes: u64) -> Result<()> {
        let name = TagName::new(name)?;
        let req = Request::SetHistory {
            name: name.clone(),
            depth,
            max_bytes,
        };
        match self.core.call(req, None)? {
            (Response::Ok, _) => Ok(()),
            other => Err(unexpected(other, &name)),
        }
    }

    /// Pulls messages from a tag's history (see [`Client::set_history`]),
    /// oldest first, with their sender info: from this node's daemon if it
    /// keeps one, else from the fullest history a live peer's daemon keeps
    /// (the publisher's node, typically).
    pub fn pull(&self, name: &str, query: crate::HistoryQuery) -> Result<Vec<crate::Message>> {
        let name = TagName::new(name)?;
        let req = Request::Pull {
            name: name.clone(),
            query,
        };
        match self.core.call(req, None)? {
            (Response::Pulled { count, len }, Some(fds)) => {
                crate::pull::decode(fds.first, count, len)
            }
            other => Err(unexpected(other, &name)),
        }
    }

    /// The nodes the daemon knows: this one first, then its peers with their
    /// state and when they were last heard from (asks the daemon).
    pub fn nodes(&self) -> Result<Vec<NodeSummary>> {
        match self.core.call(Request::ListNodes, None)? {
            (Response::Nodes { nodes }, _) => Ok(nodes),
            other => Err(unexpected(other, &"*")),
        }
    }

    /// This node's counters (`tagwire stats`): the daemon's per node, tag,
    /// stream to another node and peer, and every local subscriber's
    /// (received, lost to overflow, missing on the way), which the daemon
    /// asks its clients for (a client that does not answer within 300 ms is
    /// left out).
    pub fn stats(&self) -> Result<Vec<StatsRow>> {
        match self.core.call(Request::Stats, None)? {
            // The daemon asks every other client; ours are added here.
            (Response::Stats { mut rows }, _) => {
                rows.extend(self.core.subscriber_rows());
                Ok(rows)
            }
            other => Err(unexpected(other, &"stats")),
        }
    }

    /// The longest this process's update thread has held the local tag
    /// table for writing while it applied a table change: what a call
    /// that reads the table (a send's view of its receivers only tries
    /// it) can wait at worst, the blocking term of a timing analysis
    /// (`tagwire perf costs` reports it as `table_hold`).
    pub fn table_hold_max(&self) -> Duration {
        Duration::from_nanos(self.core.table_hold_max_ns.load(Ordering::Relaxed))
    }

    /// The local replica's view of a tag, without asking the daemon. Updated
    /// asynchronously by the update thread.
    pub fn local_view(&self, name: &str) -> Result<Option<crate::ReplicaEntry>> {
        let name = TagName::new(name)?;
        let r = self.core.replica.read().unwrap_or_else(|e| e.into_inner());
        Ok(r.find(&name).map(|(_, e)| e.clone()))
    }

    /// Checks the daemon answers.
    pub fn ping(&self) -> Result<()> {
        match self.core.call(Request::Ping, None)? {
            (Response::Pong, _) => Ok(()),
            other => Err(unexpected(other, &"ping")),
        }
    }

    fn members(&self, name: &str) -> Result<(Vec<Member>, Vec<Member>)> {
        let name = TagName::new(name)?;
        match self
            .core
            .call(Request::ListMembers { name: name.clone() }, None)?
        {
            (Response::Members { senders, receivers }, _) => Ok((senders, receivers)),
            other => Err(unexpected(other, &name)),
        }
    }

    pub(crate) fn open(
        &self,
        name: &str,
        kind: EndpointKind,
        direct: Option<Arc<crate::direct::Direct>>,
    ) -> Result<Arc<Endpoint>> {
        let name = TagName::new(name)?;
        let epoch = self.core.epoch.load(Ordering::Acquire);
        let (opened, ring) = self.core.open_ring(&name, kind, true)?;
        let ep = Arc::new(Endpoint {
            name,
            kind,
            tag: AtomicU32::new(opened.tag.0),
            generation: AtomicU64::new(0),
            registered_at: AtomicU64::new(opened.start),
            destroyed: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            epoch: AtomicU64::new(epoch),
            ring: Mutex::new(ring),
            domain: opened.domain,
            ring_params: opened.ring,
            held_gate: Mutex::new(opened.gate),
            counters: ReceiveCounters::default(),
            direct,
            changed: Mutex::new(None),
        });
        let stale = {
            let mut eps = lock(&self.core.endpoints);
            eps.retain(|w| w.strong_count() > 0);
            eps.push(Arc::downgrade(&ep));
            if let Some(d) = &ep.direct {
                // The daemon may have handed the streams over before it
                // answered (the update thread stashes them under this lock).
                if let Some(streams) = lock(&self.core.stash).remove(&opened.tag) {
                    self.core.take_direct(d, opened.tag, streams);
                }
            }
            // Likewise the seats of the tag's subscribers.
            self.core.seat_up(&ep);
            // The daemon that granted this died and a reconnection finished while
            // we were being answered: register again with the new one.
            self.core.epoch.load(Ordering::Acquire) != epoch
        };
        if stale {
            self.core.reopen(&ep)?;
        }
        Ok(ep)
    }
}

pub(crate) fn unexpected(reply: Reply, tag: &dyn std::fmt::Display) -> Error {
    match reply.0 {
        Response::Error { code, message } => Error::from_daemon(code, message, &tag.to_string()),
        other => Error::Protocol(format!("unexpected answer {other:?}")),
    }
}

impl Core {
    fn conn(&self) -> Option<Arc<SeqPacket>> {
        lock(&self.conn).clone()
    }

    fn unreachable(&self, reason: impl Into<String>) -> Error {
        Error::DaemonUnreachable {
            socket: self.opts.socket.clone(),
            reason: reason.into(),
        }
    }

    /// One request, answered through the update thread.
    pub(crate) fn call(&self, req: Request, fd: Option<BorrowedFd<'_>>) -> Result<Reply> {
        let conn = self
            .conn()
            .ok_or_else(|| self.unreachable("connection lost; reconnecting"))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).max(1);
        let (tx, rx) = mpsc::sync_channel(1);
        lock(&self.pending).insert(id, tx);
        let undo = Abandoned::of(&req);
        let bytes = Ctl::Request { id, body: req }.encode();
        let sent = {
            let _g = lock(&self.send_lock);
            conn.send(&bytes, fd)
        };
        if let Err(e) = sent {
            lock(&self.pending).remove(&id);
            return Err(self.unreachable(e.to_string()));
        }
        match rx.recv_timeout(self.opts.timeout) {
            Ok(r) => r,
            Err(_) => {
                if lock(&self.pending).remove(&id).is_some() {
                    lock(&self.abandoned).insert(id, undo);
                }
                Err(Error::DaemonTimeout {
                    socket: self.opts.socket.clone(),
                    after: self.opts.timeout,
                })
            }
        }
    }

    /// Sends a request without waiting for its answer (used by `Drop`, which must
    /// not block). Errors are ignored: a dead connection releases everything anyway.
    pub(crate) fn send_only(&self, req: Request) {
        let Some(conn) = self.conn() else { return };
        self.send_on(&conn, req, None);
    }

    /// A request not answered (or its answer ignored) on `conn` (the live
    /// connection, or one being re-registered on), with a descriptor.
    pub(crate) fn send_on(&self, conn: &SeqPacket, req: Request, fd: Option<BorrowedFd<'_>>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).max(1);
        lock(&self.abandoned).insert(id, Abandoned::Nothing);
        let bytes = Ctl::Request { id, body: req }.encode();
        let _g = lock(&self.send_lock);
        let _ = conn.send(&bytes, fd);
    }

    /// Streams the daemon handed over for `ep` before it was answered
    /// (see `Core::stash`): taken now. Call after `ep` got its tag id.
    pub(crate) fn unstash(&self, ep: &Endpoint) {
        let _eps = lock(&self.endpoints);
        if let Some(d) = &ep.direct {
            if let Some(streams) = lock(&self.stash).remove(&ep.tag()) {
                self.take_direct(d, ep.tag(), streams);
            }
        }
        self.seat_up(ep);
    }

    /// Hands `tag`'s streams to its direct receiver `d`, with the holding
    /// key that came before them (under a domain key).
    pub(crate) fn take_direct(
        &self,
        d: &Arc<crate::direct::Direct>,
        tag: TagId,
        streams: Vec<tagwire_wire::handover::StreamState>,
    ) {
        if let Some((keys, encrypt)) = lock(&self.holdings).get(&tag) {
            d.set_holding(keys, *encrypt);
        }
        d.take(streams);
    }

    /// Gives a publisher's ring the seats of its tag's subscribers that came
    /// before it (call with `endpoints` locked, as the update thread adds
    /// new seats under it).
    pub(crate) fn seat_up(&self, ep: &Endpoint) {
        if !matches!(ep.kind, EndpointKind::Publisher { .. }) {
            return;
        }
        let ring = ep.current_ring();
        if let Some(seats) = lock(&self.seats).get_mut(&ep.tag()) {
            seats.retain(|s| ring.add_seat(s.clone()));
        }
    }

    /// Gets a right on a tag and maps its ring.
    pub(crate) fn open_ring(
        &self,
        name: &TagName,
        kind: EndpointKind,
        hold_gate: bool,
    ) -> Result<(TagOpened, Ring)> {
        let req = kind.request(name, hold_gate);
        match self.call(req, None)? {
            (Response::TagOpened(o), Some(fd)) => {
                let ring = map_ring(fd)?;
                Ok((o, ring))
            }
            (Response::TagOpened(_), None) => {
                Err(Error::Protocol("tag opened without its segment".into()))
            }
            other => Err(unexpected(other, name)),
        }
    }

    /// Registers `ep` again through the live connection (see `Client::open`).
    fn reopen(&self, ep: &Endpoint) -> Result<()> {
        let create = Request::CreateTag {
            name: ep.name.clone(),
            domain: ep.domain,
            ring: ep.ring_params,
            history: KeepHistory::default(),
        };
        match self.call(create, None)? {
            (Response::TagCreated { .. }, _) => {}
            other => return Err(unexpected(other, &ep.name)),
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let (o, ring) = self.open_ring(&ep.name, ep.kind, false)?;
        ep.install(&o, ring, epoch);
        self.unstash(ep);
        Ok(())
    }
}

pub(crate) fn daemon_error(reply: Reply, tag: &TagName) -> Error {
    unexpected(reply, tag)
}

pub(crate) fn is_code(reply: &Reply, code: ErrorCode) -> bool {
    matches!(&reply.0, Response::Error { code: c, .. } if *c == code)
}
