//! Direct delivery at the subscriber (DESIGN.md §6): while this process is
//! its node's only receiver of a tag (default carrier, no publisher of the
//! tag on the node), other nodes send the tag's stream straight to this
//! subscriber's own UDP socket, and the subscriber's thread receives it
//! there, through the same session core the daemon's delivery port runs:
//! one wake-up per message, none through the daemon.
//!
//! ```text
//!  other nodes ──UDP──▶ socket ──▶ Session (order, acks, credit,
//!                                   reassembly) ──▶ queue ──▶ receive()
//!  daemon ──Streams (take)──▶ holder        GiveStreams ──▶ not holder,
//!                                           streams back ──▶ daemon
//! ```
//!
//! * **Who holds the streams.** The daemon decides (its table says when
//!   this process is the sole receiver) and moves the tag's inbound streams
//!   with `Request::Streams` / `GiveStreams`; while this process does not
//!   hold them its session drops the tag's data unacknowledged (the
//!   senders send it again to the holder). See `tagwire_session::Handover`.
//! * **Order across a switch.** While holding, the ring is read first
//!   (what the daemon wrote there before handing over), then the queue;
//!   while not holding, the queue first (what came here before giving up),
//!   then the ring.
//! * **Who reads the socket.** The subscriber's own thread, inside
//!   `receive`. While it stays away longer than [`KEEPER_AFTER`], a keeper
//!   thread answers for it (acknowledgements, timers), queueing what comes:
//!   a slow subscriber does not stall its publishers. A reliable (not
//!   lossless) subscriber's queue keeps its depth, dropping and counting
//!   the oldest; a lossless one announces its room as the session's credit,
//!   so its publishers wait.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tagwire_session::{Config, Delivery, Handover, Session};
use tagwire_wire::handover::StreamState;
use tagwire_wire::{NodeAddr, TagName};

/// How long the subscriber may stay out of `receive` before the keeper
/// thread reads its socket.
pub(crate) const KEEPER_AFTER: Duration = Duration::from_millis(20);

/// The socket's receive buffer.
const RECV_BUFFER: usize = 4 << 20;

/// Longest a handover from the daemon may be.
pub(crate) const MAX_HANDOVER_BYTES: u64 = 256 << 20;

/// One subscription's own socket and session.
#[derive(Debug)]
pub(crate) struct Direct {
    sock: UdpSocket,
    /// The socket's port (the subscription's `ChannelQos::direct`).
    pub(crate) port: u16,
    state: Mutex<State>,
    /// The subscriber is inside `receive` (the keeper keeps off).
    present: AtomicBool,
    /// When it last left, in µs since `epoch`.
    left_at: AtomicU64,
    epoch: Instant,
    keeper: AtomicBool,
    closed: AtomicBool,
}

#[derive(Debug)]
pub(crate) struct State {
    session: Session,
    tag: TagName,
    /// This process holds the tag's inbound streams.
    pub(crate) holder: bool,
    queue: VecDeque<Delivery>,
    depth: usize,
    lossless: bool,
    /// Dropped from a full queue (not lossless), not yet reported.
    pub(crate) overflowed: u64,
    buf: Vec<u8>,
}

impl Direct {
    /// Direct delivery of `tag` on `sock` (bound to the node's address,
    /// `node`). The session starts without the tag's streams.
    pub(crate) fn open(
        sock: UdpSocket,
        node: NodeAddr,
        tag: TagName,
        depth: u32,
        lossless: bool,
    ) -> std::io::Result<Arc<Self>> {
        sock.set_nonblocking(true)?;
        // Bursts from many senders wait here, not in the kernel's drops
        // (capped by net.core.rmem_max).
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&sock, RECV_BUFFER);
        let port = sock.local_addr()?.port();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32)
            ^ u64::from(port);
        let mut session = Session::new(Config {
            me: node,
            seed,
            ..Config::default()
        });
        // Away until the daemon hands the streams over.
        let _ = session.export_inbound(&tag);
        Ok(Arc::new(Self {
            sock,
            port,
            state: Mutex::new(State {
                session,
                tag,
                holder: false,
                queue: VecDeque::new(),
                depth: depth.max(1) as usize,
                lossless,
                overflowed: 0,
                buf: vec![0u8; 65536],
            }),
            present: AtomicBool::new(false),
            left_at: AtomicU64::new(0),
            epoch: Instant::now(),
            keeper: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }))
    }

    /// The queue's depth (a lossless subscriber's: its ring's slots).
    pub(crate) fn set_depth(&self, depth: u32) {
        self.lock().depth = depth.max(1) as usize;
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The daemon hands the tag's streams over: received here from now on.
    pub(crate) fn take(self: &Arc<Self>, streams: Vec<StreamState>) {
        let now = Instant::now();
        let mut st = self.lock();
        let tag = st.tag.clone();
        let streams: Vec<Handover> = streams.into_iter().map(Handover::from_wire).collect();
        st.session.import_inbound(now, &tag, streams);
        st.holder = true;
        self.pump(&mut st, now, false);
        drop(st);
        if !self.keeper.swap(true, Ordering::AcqRel) {
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("tagwire-direct".into())
                .spawn(move || me.keep());
            if spawned.is_err() {
                self.keeper.store(false, Ordering::Release);
            }
        }
    }

    /// The daemon wants the streams back: returns them; the tag's data is
    /// dropped here unacknowledged from now on. What the queue holds stays
    /// (it is handed out before the ring).
    pub(crate) fn give(&self) -> Vec<StreamState> {
        let mut st = self.lock();
        // First what already came.
        self.pump(&mut st, Instant::now(), true);
        let tag = st.tag.clone();
        let out = st
            .session
            .export_inbound(&tag)
            .iter()
            .map(Handover::to_wire)
            .collect();
        st.holder = false;
        drop(st);
        // A subscriber asleep on the socket wakes and waits on the ring.
        self.wake();
        out
    }

    /// Wakes a `poll` on the socket (an empty datagram to itself).
    fn wake(&self) {
        if let Ok(me) = self.sock.local_addr() {
            let to = match me.ip() {
                ip if ip.is_unspecified() => SocketAddr::new(
                    if me.is_ipv4() {
                        std::net::Ipv4Addr::LOCALHOST.into()
                    } else {
                        std::net::Ipv6Addr::LOCALHOST.into()
                    },
                    me.port(),
                ),
                _ => me,
            };
            let _ = self.sock.send_to(&[], to);
        }
    }

    /// The subscriber is gone: the keeper ends.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// The subscriber enters `receive` (until the guard drops).
    pub(crate) fn enter(&self) -> Presence<'_> {
        self.present.store(true, Ordering::Release);
        Presence(self)
    }

    /// Reads what the socket has, runs the timers, sends what the session
    /// says, and queues what it completed (holding only). The subscriber's
    /// own thread stops reading at a full queue (what waits in the socket
    /// then holds its senders back: a window, then their publishers); the
    /// keeper (`keeper`) reads on and, for a subscription that is not
    /// lossless, drops and counts the oldest, so that a subscriber that
    /// stays away holds nobody back.
    pub(crate) fn pump(&self, st: &mut State, now: Instant, keeper: bool) {
        if st.holder {
            while keeper || st.queue.len() < st.depth {
                match self.sock.recv_from(&mut st.buf) {
                    Ok((0, _)) => {}
                    Ok((n, from)) => {
                        let State { session, buf, .. } = &mut *st;
                        session.handle_datagram(now, from, &buf[..n]);
                        self.collect(st);
                    }
                    Err(_) => break,
                }
            }
        } else {
            // Not ours now: what came is dropped (its senders send it again
            // to the holder); only the wake-ups matter.
            while self.sock.recv_from(&mut st.buf).is_ok() {}
        }
        if st.session.poll_timeout().is_some_and(|t| t <= now) {
            st.session.handle_timeout(now);
        }
        self.collect(st);
        if keeper && !st.lossless {
            while st.queue.len() > st.depth {
                st.queue.pop_front();
                st.overflowed += 1;
            }
        }
        self.credit(st, now);
        while let Some(t) = st.session.poll_transmit(now) {
            let _ = self.sock.send_to(&t.bytes, t.dest);
        }
        while st.session.poll_event().is_some() {}
    }

    /// Queues what the session completed.
    fn collect(&self, st: &mut State) {
        while let Some(d) = st.session.poll_deliver() {
            st.queue.push_back(d);
        }
    }

    /// A lossless subscriber's room is its session's credit.
    fn credit(&self, st: &mut State, now: Instant) {
        if st.lossless {
            let room = st.depth.saturating_sub(st.queue.len()) as u32;
            let tag = st.tag.clone();
            st.session.set_credit(now, &tag, Some(room));
        }
    }

    /// The next message received here, if any.
    pub(crate) fn pop(&self, st: &mut State) -> Option<Delivery> {
        let d = st.queue.pop_front()?;
        if st.lossless && st.holder {
            let now = Instant::now();
            self.credit(st, now);
            while let Some(t) = st.session.poll_transmit(now) {
                let _ = self.sock.send_to(&t.bytes, t.dest);
            }
        }
        Some(d)
    }

    /// Drops what is queued; returns how many.
    pub(crate) fn purge(&self) -> u64 {
        let mut st = self.lock();
        let n = st.queue.len() as u64;
        st.queue.clear();
        if st.holder {
            let now = Instant::now();
            self.credit(&mut st, now);
        }
        n
    }

    /// Whether anything is queued.
    pub(crate) fn has_queued(&self) -> bool {
        !self.lock().queue.is_empty()
    }

    /// Sleeps until the socket has something, the session's next timer or
    /// `limit`, whichever comes first.
    pub(crate) fn wait(&self, st: MutexGuard<'_, State>, limit: Duration) {
        let now = Instant::now();
        let until = st
            .session
            .poll_timeout()
            .map_or(limit, |t| t.saturating_duration_since(now).min(limit));
        drop(st);
        self.poll(until);
    }

    fn poll(&self, timeout: Duration) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(&self.sock, PollFlags::IN)];
        let ts = Timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let _ = poll(&mut fds, Some(&ts));
    }

    /// The keeper thread: reads the socket while the subscriber stays away.
    fn keep(self: Arc<Self>) {
        while !self.closed.load(Ordering::Acquire) {
            let now_us = self.epoch.elapsed().as_micros() as u64;
            let away =
                Duration::from_micros(now_us.saturating_sub(self.left_at.load(Ordering::Acquire)));
            if self.present.load(Ordering::Acquire) || away < KEEPER_AFTER {
                std::thread::sleep(
                    KEEPER_AFTER
                        .saturating_sub(away)
                        .max(Duration::from_millis(1)),
                );
                continue;
            }
            let st = self.lock();
            if !st.holder {
                drop(st);
                std::thread::sleep(KEEPER_AFTER);
                continue;
            }
            self.wait(st, KEEPER_AFTER);
            let mut st = self.lock();
            if !self.present.load(Ordering::Acquire) {
                self.pump(&mut st, Instant::now(), true);
            }
        }
    }
}

/// The subscriber inside `receive`; on drop it is away again.
pub(crate) struct Presence<'a>(&'a Direct);

impl Drop for Presence<'_> {
    fn drop(&mut self) {
        let d = self.0;
        d.left_at
            .store(d.epoch.elapsed().as_micros() as u64, Ordering::Release);
        d.present.store(false, Ordering::Release);
    }
}
