//! The local manager's connections, served from one event loop: a held
//! connection costs a descriptor and a few hundred bytes, not two threads
//! (docs/design.md §7; issue "Trust", item 4).
//!
//! ```text
//!  listener ──accept──▶ ┌─────────── loop thread (epoll) ────────────┐
//!  client sockets ─────▶│ readable, idle: one packet ─▶ worker pool  │──▶ serve_packet
//!                       │ outbox queued, or writable: send, no block │    (may wait for
//!  eventfd (notes) ────▶│ worker done: the client is read again      │     peers, reports)
//!                       └─────────────────────────────────────────────┘
//! ```
//!
//! * **Order.** A client's requests are served one at a time, in order:
//!   while one is with a worker, its socket is not read.
//! * **Outbox.** Everything the daemon sends a client (responses and
//!   updates, in order) goes through its bounded queue ([`OutTx`]): to the
//!   socket at once (non-blocking) while the queue is empty, else queued
//!   for the loop, which writes it when the socket is writable. Whoever finds the queue
//!   full disconnects the client (it stopped reading); a response waits
//!   up to `outbox::WRITE_PATIENCE` for room.
//! * **Workers.** Requests may wait (for peers to apply a table change,
//!   for clients' reports), so they run on a pool that grows with the
//!   requests in flight, up to [`MAX_WORKERS`], never with the connections;
//!   workers idle for [`IDLE_WORKER`] leave, down to [`MIN_WORKERS`].
//! * **Closing.** A client that hangs up, or whose socket fails, leaves
//!   the loop at once; what it held is released on a worker, after the
//!   request it may have in flight.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rustix::event::epoll::{self, EventData, EventFlags};
use tagwire_proto::ClientId;
use tagwire_unix::{Packet, SeqPacket};
use tagwire_wire::control::{ErrorCode, Message, Response, MAX_MESSAGE};

use crate::outbox::{Note, OutTx, Wake};
use crate::{lock, Shared};

/// The listener's and the eventfd's keys; a client's is its id + 2.
const LISTENER: u64 = 0;
const WAKER: u64 = 1;

/// Most worker threads (requests served at once).
pub(crate) const MAX_WORKERS: usize = 32;
/// Workers kept while idle.
const MIN_WORKERS: usize = 2;
/// How long an idle worker above [`MIN_WORKERS`] stays.
const IDLE_WORKER: Duration = Duration::from_secs(30);

/// The event loop's descriptors, its notes and its workers.
#[derive(Debug)]
pub(crate) struct Conns {
    epoll: OwnedFd,
    wake: Arc<Wake>,
    pool: Pool,
}

/// What a worker does.
enum Job {
    Packet(Arc<Served>, Packet),
    Close(Arc<Served>),
}

/// A client as its workers see it.
struct Served {
    client: super::Client,
    tx: OutTx,
    conn: Arc<SeqPacket>,
}

#[derive(Debug, Default)]
struct Pool {
    state: Mutex<PoolState>,
    ready: Condvar,
}

#[derive(Default)]
struct PoolState {
    jobs: VecDeque<Job>,
    idle: usize,
    threads: usize,
    stop: bool,
}

impl std::fmt::Debug for PoolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolState")
            .field("jobs", &self.jobs.len())
            .field("idle", &self.idle)
            .field("threads", &self.threads)
            .finish()
    }
}

impl Conns {
    /// The loop's descriptors, watching `listener` (made non-blocking).
    pub(crate) fn new(listener: &tagwire_unix::Listener) -> std::io::Result<Self> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let efd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        rustix::io::ioctl_fionbio(listener, true)?;
        epoll::add(
            &epoll,
            listener,
            EventData::new_u64(LISTENER),
            EventFlags::IN,
        )?;
        epoll::add(&epoll, &efd, EventData::new_u64(WAKER), EventFlags::IN)?;
        Ok(Self {
            epoll,
            wake: Arc::new(Wake::new(efd)),
            pool: Pool::default(),
        })
    }

    /// Ends the loop (once `Shared::stopping` is set) and the workers
    /// (once their jobs are done).
    pub(crate) fn stop(&self) {
        lock(&self.pool.state).stop = true;
        self.pool.ready.notify_all();
        self.wake.ring();
    }
}

/// A connection in the loop.
struct Open {
    served: Arc<Served>,
    uid: u32,
    state: St,
    /// Waiting for the socket to be writable.
    writing: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Read when readable.
    Idle,
    /// A request is with a worker.
    Busy,
    /// Gone while busy: released after the request.
    Closing,
    /// Being released.
    Closed,
}

fn key(id: ClientId) -> u64 {
    id.0.wrapping_add(2)
}

/// The loop thread: until the daemon stops.
/// Starts the workers kept while idle (before the daemon answers anyone):
/// a client's next request, sent as soon as its answer came, finds one
/// idle while the one that answered is still on its way back, so no thread
/// comes and goes per request.
pub(crate) fn start_workers(shared: &Arc<Shared>) {
    let mut p = lock(&shared.conns.pool.state);
    while p.threads < MIN_WORKERS {
        let before = p.threads;
        spawn_worker(shared, &mut p);
        if p.threads == before {
            break;
        }
    }
}

pub(crate) fn run(shared: Arc<Shared>) {
    let mut open: HashMap<ClientId, Open> = HashMap::new();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
    while !shared.is_stopping() {
        events.clear();
        match epoll::wait(
            &shared.conns.epoll,
            rustix::buffer::spare_capacity(&mut events),
            None,
        ) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "epoll_wait failed");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        }
        if shared.is_stopping() {
            break;
        }
        for ev in &events {
            let (flags, k) = (ev.flags, ev.data.u64());
            match k {
                LISTENER => accept_all(&shared, &mut open),
                WAKER => {
                    let mut b = [0u8; 8];
                    let _ = rustix::io::read(&shared.conns.wake.efd, &mut b);
                    let notes = shared.conns.wake.take();
                    for n in notes {
                        match n {
                            Note::Queued(id) => flush(&shared, &mut open, id),
                            Note::Done(id) => done(&shared, &mut open, id),
                        }
                    }
                }
                k => {
                    let id = ClientId(k.wrapping_sub(2));
                    if flags.contains(EventFlags::IN) {
                        read_one(&shared, &mut open, id);
                    }
                    if flags.contains(EventFlags::OUT) {
                        flush(&shared, &mut open, id);
                    }
                    if flags.intersects(EventFlags::HUP | EventFlags::ERR) {
                        begin_close(&shared, &mut open, id);
                    }
                }
            }
        }
    }
}

fn accept_all(shared: &Arc<Shared>, open: &mut HashMap<ClientId, Open>) {
    loop {
        let conn = match shared.listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) => {
                if !shared.is_stopping() {
                    // (Out of descriptors: the next round tries again.)
                    tracing::warn!(error = %e, "accept failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
                return;
            }
        };
        if let Some((id, o)) = admit(shared, conn) {
            open.insert(id, o);
        }
    }
}

/// A new connection, bounded before it costs anything more.
fn admit(shared: &Arc<Shared>, conn: SeqPacket) -> Option<(ClientId, Open)> {
    let cred = conn.peer_cred().ok()?;
    if let Err(q) = shared.connections.admit(&shared.config.quotas, cred.uid) {
        tracing::warn!(uid = cred.uid, "connection refused: {}", q.message());
        let bytes = Message::Response {
            id: 0,
            body: Response::Error {
                code: ErrorCode::Quota,
                message: q.message(),
            },
        }
        .encode();
        let _ = conn.refuse(&bytes);
        return None;
    }
    let id = ClientId(shared.next_client.fetch_add(1, Ordering::Relaxed));
    let registered = rustix::io::ioctl_fionbio(&conn, true)
        .map_err(std::io::Error::from)
        .and_then(|()| {
            epoll::add(
                &shared.conns.epoll,
                &conn,
                EventData::new_u64(key(id)),
                EventFlags::IN,
            )
            .map_err(std::io::Error::from)
        });
    if let Err(e) = registered {
        tracing::warn!(error = %e, "cannot serve a connection");
        shared.connections.release(cred.uid);
        return None;
    }
    let conn = Arc::new(conn);
    let tx = OutTx::new(id, Some(conn.clone()), shared.conns.wake.clone());
    let Some(client) = super::open_client(shared, id, cred, &conn, &tx) else {
        let _ = epoll::delete(&shared.conns.epoll, &*conn);
        shared.connections.release(cred.uid);
        return None;
    };
    let served = Arc::new(Served { client, tx, conn });
    Some((
        id,
        Open {
            served,
            uid: cred.uid,
            state: St::Idle,
            writing: false,
        },
    ))
}

/// What the loop watches on `o`'s socket.
fn watch(shared: &Shared, o: &Open) {
    // (Hang-ups and errors are always reported. A peer that only shut its
    // writing down is read to its end, its requests answered, then closed.)
    let mut flags = EventFlags::empty();
    if o.state == St::Idle {
        flags |= EventFlags::IN;
    }
    if o.writing {
        flags |= EventFlags::OUT;
    }
    let _ = epoll::modify(
        &shared.conns.epoll,
        &*o.served.conn,
        EventData::new_u64(key(o.served.client.id)),
        flags,
    );
}

/// One request from an idle client, to a worker.
fn read_one(shared: &Arc<Shared>, open: &mut HashMap<ClientId, Open>, id: ClientId) {
    let Some(o) = open.get_mut(&id) else { return };
    if o.state != St::Idle {
        return;
    }
    match o.served.conn.recv(MAX_MESSAGE) {
        Ok(Some(p)) => {
            o.state = St::Busy;
            watch(shared, o);
            dispatch(shared, Job::Packet(o.served.clone(), p));
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) => {}
        Ok(None) => begin_close(shared, open, id),
        Err(e) => {
            tracing::debug!(client = id.0, error = %e, "client socket error");
            begin_close(shared, open, id);
        }
    }
}

/// Writes what `id`'s outbox holds until its socket is full.
fn flush(shared: &Arc<Shared>, open: &mut HashMap<ClientId, Open>, id: ClientId) {
    let Some(o) = open.get_mut(&id) else { return };
    if matches!(o.state, St::Closing | St::Closed) {
        return;
    }
    let (blocked, failed) = match o.served.tx.write_out(&o.served.conn) {
        Ok(blocked) => (blocked, None),
        Err(e) => (false, Some(e)),
    };
    if let Some(e) = failed {
        tracing::debug!(client = id.0, error = %e, "cannot write to client; closing");
        begin_close(shared, open, id);
        return;
    }
    if o.writing != blocked {
        o.writing = blocked;
        watch(shared, o);
    }
}

/// The client hung up or failed: out of the loop now, released after the
/// request it may have in flight.
fn begin_close(shared: &Arc<Shared>, open: &mut HashMap<ClientId, Open>, id: ClientId) {
    let Some(o) = open.get_mut(&id) else { return };
    match o.state {
        St::Idle => {
            o.state = St::Closed;
            dispatch(shared, Job::Close(o.served.clone()));
        }
        St::Busy => o.state = St::Closing,
        St::Closing | St::Closed => return,
    }
    let _ = epoll::delete(&shared.conns.epoll, &*o.served.conn);
    o.served.tx.close();
}

/// A worker finished with `id`.
fn done(shared: &Arc<Shared>, open: &mut HashMap<ClientId, Open>, id: ClientId) {
    let Some(o) = open.get_mut(&id) else { return };
    match o.state {
        St::Busy => {
            o.state = St::Idle;
            // Level-triggered: a request already waiting is reported again.
            watch(shared, o);
        }
        St::Closing => {
            o.state = St::Closed;
            dispatch(shared, Job::Close(o.served.clone()));
        }
        St::Closed => {
            if let Some(o) = open.remove(&id) {
                shared.connections.release(o.uid);
            }
        }
        St::Idle => {}
    }
}

fn dispatch(shared: &Arc<Shared>, job: Job) {
    let pool = &shared.conns.pool;
    let mut p = lock(&pool.state);
    p.jobs.push_back(job);
    if p.idle < p.jobs.len() && p.threads < MAX_WORKERS {
        spawn_worker(shared, &mut p);
    }
    drop(p);
    pool.ready.notify_one();
}

fn spawn_worker(shared: &Arc<Shared>, p: &mut PoolState) {
    let s = shared.clone();
    let spawned = shared
        .roles
        .spawn(crate::roles::Role::Local, "tagwired-worker", move || {
            worker(&s)
        });
    match spawned {
        Ok(_) => {
            p.threads += 1;
            p.idle += 1;
        }
        // The running workers take its jobs.
        Err(e) => tracing::warn!(error = %e, "cannot start a worker"),
    }
}

/// A worker (counted idle from its start while it waits for a job).
fn worker(shared: &Arc<Shared>) {
    let pool = &shared.conns.pool;
    let mut p = lock(&pool.state);
    loop {
        if let Some(job) = p.jobs.pop_front() {
            p.idle -= 1;
            drop(p);
            let id = match job {
                Job::Packet(s, packet) => {
                    if !super::serve_packet(shared, &s.client, &s.tx, packet) {
                        // The loop sees the hang-up and releases the client.
                        let _ = s.conn.shutdown();
                    }
                    s.client.id
                }
                Job::Close(s) => {
                    super::close_client(shared, &s.client, &s.conn);
                    s.client.id
                }
            };
            shared.conns.wake.post(Note::Done(id));
            p = lock(&pool.state);
            p.idle += 1;
            continue;
        }
        if p.stop {
            p.idle -= 1;
            p.threads -= 1;
            return;
        }
        let (g, timeout) = match pool.ready.wait_timeout(p, IDLE_WORKER) {
            Ok(r) => r,
            Err(e) => e.into_inner(),
        };
        p = g;
        if timeout.timed_out() && p.jobs.is_empty() && p.threads > MIN_WORKERS {
            p.idle -= 1;
            p.threads -= 1;
            return;
        }
    }
}
