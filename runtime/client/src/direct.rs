//! Direct delivery at the subscriber (docs/design.md §6): while this process is
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
//! * **Under a domain key.** Before the streams, the daemon hands over the
//!   key of this holding (`tagwire_auth::direct`): the datagrams must be
//!   sealed for it, carry only this tag's data, and count as new; the
//!   acknowledgements go out sealed with it. Nothing else is taken.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tagwire_auth::{Holder, HoldingKey};

use crate::clock::coarse_us;
use crate::gaps::{Dropped, MAX_DROPPED_KEPT};
use tagwire_net::gso;
use tagwire_session::{Config, Delivery, ReceiveSession};
use tagwire_wire::datagram::peek_tag;
use tagwire_wire::handover::StreamState;
use tagwire_wire::{NodeAddr, Sched, TagName};

/// How long the subscriber may stay out of `receive` before the keeper
/// thread reads its socket.
pub(crate) const KEEPER_AFTER: Duration = Duration::from_millis(20);

/// See [`Direct::pump_if_due`].
const PUMP_EVERY: u32 = 16;

/// The socket's receive buffer.
const RECV_BUFFER: usize = 4 << 20;

/// One subscription's own socket and session.
#[derive(Debug)]
pub(crate) struct Direct {
    sock: UdpSocket,
    /// The socket's port (the subscription's `ChannelQos::direct`).
    pub(crate) port: u16,
    /// The subscription's thread policy, the keeper's (`Sched::to_bytes`
    /// as one word: a run-time change lands here, and the keeper follows).
    sched: AtomicU16,
    state: Mutex<State>,
    /// The subscriber is inside `receive` (the keeper keeps off).
    present: AtomicBool,
    /// When it last left, in µs of [`coarse_us`]'s clock.
    left_at: AtomicU64,
    keeper: AtomicBool,
    closed: AtomicBool,
}

#[derive(Debug)]
pub(crate) struct State {
    session: ReceiveSession,
    tag: TagName,
    /// This process holds the tag's inbound streams.
    pub(crate) holder: bool,
    queue: VecDeque<Delivery>,
    depth: usize,
    lossless: bool,
    /// Dropped from a full queue (not lossless), not yet reported.
    pub(crate) overflowed: u64,
    /// Who sent each of those and its number, oldest first (at most
    /// [`MAX_DROPPED_KEPT`]; `None` once more were dropped): the
    /// subscription's gaps go on from them, so that a message lost on the
    /// way beside the dropped ones is still counted.
    pub(crate) dropped: Option<Vec<Dropped>>,
    /// Messages handed out since the subscriber last read its socket.
    since_pump: u32,
    /// Streams given up when the daemon went away, taken again if the
    /// restarted daemon hands this subscriber the tag with none of its own.
    parked: Vec<StreamState>,
    buf: Vec<u8>,
    /// Under a domain key, this holding's opener and sealer.
    guard: Option<Holder>,
    sealed: Vec<u8>,
    /// Datagrams refused (not sealed for this holding, replayed, or
    /// naming another tag).
    pub(crate) refused: u64,
    /// Reliable datagrams the session refused for want of room (a lossless
    /// subscriber's full queue): their senders send them again.
    pub(crate) no_room: u64,
}

impl Direct {
    /// Direct delivery of `tag` on `sock` (bound to the node's address,
    /// `node`) for a subscription with `opts`. The session starts without
    /// the tag's streams.
    pub(crate) fn open(
        sock: UdpSocket,
        node: NodeAddr,
        tag: TagName,
        opts: &crate::SubscribeOptions,
    ) -> std::io::Result<Arc<Self>> {
        let depth = opts.depth.unwrap_or(crate::DEFAULT_DEPTH);
        let (lossless, sched) = (opts.lossless, opts.qos.sched);
        sock.set_nonblocking(true)?;
        // Bursts from many senders wait here, not in the kernel's drops
        // (capped by net.core.rmem_max).
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&sock, RECV_BUFFER);
        // Best effort: without it each datagram is a system call.
        let _ = gso::enable_gro(&sock);
        let port = sock.local_addr()?.port();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32)
            ^ u64::from(port);
        let mut session = ReceiveSession::new(Config {
            me: node,
            seed,
            ..Config::default()
        });
        // Away until the daemon hands the streams over.
        let _ = session.export_inbound(&tag);
        Ok(Arc::new(Self {
            sock,
            port,
            sched: AtomicU16::new(u16::from_be_bytes(sched.to_bytes())),
            state: Mutex::new(State {
                session,
                tag,
                holder: false,
                queue: VecDeque::new(),
                depth: depth.max(1) as usize,
                lossless,
                overflowed: 0,
                dropped: Some(Vec::new()),
                since_pump: 0,
                parked: Vec::new(),
                buf: vec![0u8; gso::RECV_BUFFER],
                guard: None,
                sealed: Vec::new(),
                refused: 0,
                no_room: 0,
            }),
            present: AtomicBool::new(false),
            left_at: AtomicU64::new(coarse_us()),
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

    /// Under a domain key, the daemon's keys for this holding (they come
    /// before the streams; two during a key roll, the one sealed with
    /// first): from now on only datagrams sealed for it are taken. The same
    /// holding again keeps the windows and the counter.
    pub(crate) fn set_holding(&self, keys: &[HoldingKey], encrypt: bool) {
        let Some((first, rest)) = keys.split_first() else {
            return;
        };
        let mut st = self.lock();
        match &mut st.guard {
            Some(g) if g.is(first) => g.give(first.clone(), false),
            _ => {
                let tag = st.tag.as_str().to_owned();
                st.guard = Some(Holder::new(first.clone(), &tag, encrypt));
            }
        }
        if let Some(g) = &mut st.guard {
            for k in rest {
                g.give(k.clone(), true);
            }
        }
    }

    /// A key roll moved on while this receiver may hold the streams: `key`
    /// beside the other generation's (`also`), or alone. A key of another
    /// holding waits for its hand-over ([`Direct::set_holding`]).
    pub(crate) fn give_holding(&self, key: HoldingKey, also: bool) {
        let mut st = self.lock();
        if let Some(g) = &mut st.guard {
            if also || g.is(&key) {
                g.give(key, also);
            }
        }
    }

    /// The daemon hands the tag's streams over: received here from now on.
    pub(crate) fn take(self: &Arc<Self>, streams: Vec<StreamState>) {
        let now = Instant::now();
        let mut st = self.lock();
        let tag = st.tag.clone();
        let parked = std::mem::take(&mut st.parked);
        let streams = if streams.is_empty() { parked } else { streams };
        tracing::debug!(tag = %st.tag, streams = streams.len(), "direct: took the streams");
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
        // First what already came, up to the queue's depth: what stays in
        // the socket is dropped unacknowledged below and comes again to the
        // new holder (nothing is dropped to make room).
        self.pump(&mut st, Instant::now(), false);
        let tag = st.tag.clone();
        let out = st.session.export_inbound(&tag);
        st.holder = false;
        tracing::debug!(%tag, streams = out.len(), queued = st.queue.len(), "direct: gave the streams");
        drop(st);
        // A subscriber asleep on the socket wakes and waits on the ring.
        self.wake();
        out
    }

    /// The daemon went away: the streams are given up until the restarted
    /// daemon says who holds the tag (kept, in case it is this subscriber
    /// again). Without a daemon no other subscriber on the node gets the
    /// tag either way; until then the senders send again.
    pub(crate) fn park(&self) {
        let streams = self.give();
        self.lock().parked = streams;
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
            // The room as it is now, before anything is read: the
            // subscriber may have read on since the last pump, and data
            // sent within the room announced then must not be refused as
            // if its queue were still full (each refusal is resent, and
            // the sender takes it for a loss: it shortens its trains and
            // halves its congestion window).
            self.credit(st, now);
            while keeper || st.queue.len() < st.depth {
                match gso::recv_coalesced(&self.sock, &mut st.buf) {
                    // (Cut: larger than any datagram a sender may send.)
                    Ok(m) if m.len == 0 || m.truncated => {}
                    Ok(m) => {
                        let State {
                            session,
                            buf,
                            guard,
                            tag,
                            refused,
                            ..
                        } = &mut *st;
                        // One datagram, or several coalesced (UDP GRO).
                        for one in gso::segments_mut(&mut buf[..m.len], m.segment) {
                            let body = match guard {
                                None => &*one,
                                Some(g) => match g.open(m.from.ip(), one) {
                                    Ok(body) if only_tag(body, tag) => body,
                                    _ => {
                                        *refused += 1;
                                        continue;
                                    }
                                },
                            };
                            // (No stream of ours to acknowledge: an
                            // acknowledgement that comes back is dropped.)
                            let _ = session.handle_datagram(now, m.from, body);
                        }
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
                let Some(m) = st.queue.pop_front() else { break };
                st.overflowed += 1;
                let h = m.header;
                st.dropped = st
                    .dropped
                    .take()
                    .filter(|d| d.len() < MAX_DROPPED_KEPT)
                    .map(|mut d| {
                        d.push((h.sender, h.stream, h.seq.0, h.timestamp_ns));
                        d
                    });
            }
        }
        self.credit(st, now);
        self.transmit(st, now);
        while let Some(e) = st.session.poll_event() {
            if matches!(e, tagwire_session::ReceiveEvent::Refused { .. }) {
                st.no_room += 1;
            }
        }
    }

    /// The subscriber's pump while it has messages queued: reading the
    /// socket (one system call) before each would cost as much as the rest
    /// of a small message's path, so it reads when the queue is empty and
    /// every [`PUMP_EVERY`] messages (acknowledgements and timers keep
    /// going while it works through a long queue).
    pub(crate) fn pump_if_due(&self, st: &mut State) {
        st.since_pump += 1;
        if st.queue.is_empty() || st.since_pump >= PUMP_EVERY {
            st.since_pump = 0;
            self.pump(st, Instant::now(), false);
        }
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
            st.session.set_credit(now, &st.tag, Some(room));
        }
    }

    /// Gives `bufs` to the session for the payloads of the next messages.
    pub(crate) fn recycle(&self, st: &mut State, bufs: &mut Vec<Vec<u8>>) {
        for b in bufs.drain(..) {
            st.session.recycle(b);
        }
    }

    /// The next message received here, if any.
    pub(crate) fn pop(&self, st: &mut State) -> Option<Delivery> {
        let d = st.queue.pop_front()?;
        // A lossless subscriber's reading makes room: said to the senders
        // every eighth of the queue (the session announces it when it has
        // doubled), not at every message.
        let step = (st.depth / 8).max(1);
        if st.lossless && st.holder && st.queue.len() % step == 0 {
            let now = Instant::now();
            self.credit(st, now);
            self.transmit(st, now);
        }
        Some(d)
    }

    /// Sends what the session says (sealed for the holding, under a key).
    fn transmit(&self, st: &mut State, now: Instant) {
        while let Some(t) = st.session.poll_transmit(now) {
            let wire = match &mut st.guard {
                Some(g) => {
                    g.seal_ack(&t.bytes, &mut st.sealed);
                    &st.sealed[..]
                }
                None => &t.bytes[..],
            };
            let _ = self.sock.send_to(wire, t.dest);
            // (Its buffer carries the next acknowledgement or message.)
            st.session.recycle_transmit(t.bytes);
        }
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

    /// Whether anything is queued (or waits in the socket, while holding).
    pub(crate) fn has_queued(&self) -> bool {
        let mut st = self.lock();
        if st.queue.is_empty() && st.holder {
            // What waits in the socket counts too.
            self.pump(&mut st, Instant::now(), false);
        }
        !st.queue.is_empty()
    }

    /// Sleeps until the socket has something, the session's next timer or
    /// `limit`, whichever comes first, having first looked at the socket
    /// for `spin` without sleeping (a flowing stream's next datagrams then
    /// find the reader awake: neither side pays a sleep and a wake-up per
    /// burst). Between two looks it yields its CPU (`yielding`: a flow
    /// poll, not a busy poll the user asked for). True: it slept.
    pub(crate) fn wait(
        &self,
        st: MutexGuard<'_, State>,
        limit: Duration,
        spin: Duration,
        yielding: bool,
    ) -> bool {
        let now = Instant::now();
        let until = st
            .session
            .poll_timeout()
            .map_or(limit, |t| t.saturating_duration_since(now).min(limit));
        drop(st);
        if !spin.is_zero() {
            let end = now + spin.min(until);
            loop {
                if self.poll(Duration::ZERO) {
                    return false;
                }
                if Instant::now() >= end {
                    break;
                }
                if yielding {
                    // A look is a system call, and the thread it waits for
                    // (its sender, on a host of two CPUs) may be waiting
                    // for this one's CPU: it gets it first (8 KiB flat out
                    // across hosts: 577 k looks a second).
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        // A session timer due before the spin ended: it is not a sleep.
        let rest = until.saturating_sub(now.elapsed());
        if rest.is_zero() {
            return false;
        }
        self.poll(rest);
        true
    }

    /// Waits up to `timeout` for the socket to be readable; true if it is.
    fn poll(&self, timeout: Duration) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(&self.sock, PollFlags::IN)];
        let ts = Timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        poll(&mut fds, Some(&ts)).is_ok_and(|n| n > 0)
    }

    /// The subscription's policy changed at run time: the keeper runs at
    /// it from its next round.
    pub(crate) fn set_sched(&self, sched: Sched) {
        self.sched
            .store(u16::from_be_bytes(sched.to_bytes()), Ordering::Release);
    }

    /// Runs the keeper at the subscription's policy when that is not the
    /// one it runs at (`at`).
    fn follow_sched(&self, at: &mut Sched) {
        let word = self.sched.load(Ordering::Acquire);
        let Ok(want) = Sched::from_bytes(word.to_be_bytes()) else {
            return;
        };
        if want == *at {
            return;
        }
        *at = want;
        // (The daemon checked that this process may.)
        if let Err(e) = tagwire_sched::apply(want) {
            tracing::warn!(tag = %self.lock().tag, "the direct-delivery keeper runs below {want}: {e}");
        }
    }

    /// The keeper thread: reads the socket while the subscriber stays away.
    fn keep(self: Arc<Self>) {
        // (It keeps the policy it inherited from the thread that started
        // it until the subscription asks one.)
        let mut at = Sched::default();
        while !self.closed.load(Ordering::Acquire) {
            self.follow_sched(&mut at);
            let now_us = coarse_us();
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
            self.wait(st, KEEPER_AFTER, Duration::ZERO, false);
            let mut st = self.lock();
            if !self.present.load(Ordering::Acquire) {
                self.pump(&mut st, Instant::now(), true);
            }
        }
    }
}

/// Whether a datagram opened with the holding's key carries no other tag's
/// data (the key's publishers could put any in it).
fn only_tag(body: &[u8], tag: &TagName) -> bool {
    match peek_tag(body) {
        Ok(Some(t)) => t == tag.as_str(),
        Ok(None) => true,
        // (The session refuses it, and counts it.)
        Err(_) => true,
    }
}

/// The subscriber inside `receive`; on drop it is away again.
pub(crate) struct Presence<'a>(&'a Direct);

impl Drop for Presence<'_> {
    fn drop(&mut self) {
        let d = self.0;
        d.left_at.store(coarse_us(), Ordering::Release);
        d.present.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwire_session::{Dest, Mode, Session};
    use tagwire_wire::frame::FrameHeader;
    use tagwire_wire::{Pid, SenderInfo, SeqNum};

    /// A sending session on its own loopback socket with a reliable route
    /// to `to`.
    fn sender(tag: &TagName, to: SocketAddr) -> (Session, UdpSocket) {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_nonblocking(true).unwrap();
        let me = NodeAddr("127.0.0.2".parse().unwrap());
        let mut s = Session::new(Config {
            me,
            seed: 7,
            ..Config::default()
        });
        let dest = Dest {
            priority: Default::default(),
            node: NodeAddr::LOCALHOST,
            addr: to,
            mode: Mode::Reliable,
            every: 1,
            relay: false,
        };
        s.set_routes(Instant::now(), tag, vec![dest]);
        (s, sock)
    }

    /// Hands messages `seqs` to the sender and runs its side (sends, and
    /// takes the acknowledgements that came).
    fn send(s: &mut Session, sock: &UdpSocket, tag: &TagName, seqs: std::ops::RangeInclusive<u64>) {
        let now = Instant::now();
        for seq in seqs {
            let h = FrameHeader {
                flags: 0,
                sender: SenderInfo {
                    pid: Pid(1),
                    node: NodeAddr("127.0.0.2".parse().unwrap()),
                },
                stream: 0,
                seq: SeqNum(seq),
                timestamp_ns: 0,
            };
            s.handle_record(now, tag, &h, &seq.to_le_bytes()).unwrap();
        }
        s.flush(now, tag);
        service(s, sock);
    }

    fn service(s: &mut Session, sock: &UdpSocket) {
        let now = Instant::now();
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            s.handle_datagram(now, from, &buf[..n]);
        }
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        while let Some(t) = s.poll_transmit(now) {
            let _ = sock.send_to(&t.bytes, t.dest);
        }
    }

    fn open(depth: u32, lossless: bool) -> (Arc<Direct>, TagName, SocketAddr) {
        let tag = TagName::new("/direct/test").unwrap();
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let mut opts = crate::SubscribeOptions::default().depth(depth);
        opts.lossless = lossless;
        let d = Direct::open(sock, NodeAddr::LOCALHOST, tag.clone(), &opts).unwrap();
        (d, tag, addr)
    }

    /// Pumps (as the subscriber, or as the keeper) until `n` messages are
    /// queued or a second passes; the sender keeps running.
    fn pump_until(d: &Direct, s: &mut Session, sock: &UdpSocket, keeper: bool, n: usize) {
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            let mut st = d.lock();
            d.pump(&mut st, Instant::now(), keeper);
            if st.queue.len() >= n {
                return;
            }
            drop(st);
            service(s, sock);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn seq_of(m: &Delivery) -> u64 {
        m.header.seq.0
    }

    #[test]
    fn before_the_daemon_hands_the_streams_over_nothing_is_taken_or_acknowledged() {
        let (d, tag, addr) = open(8, false);
        let (mut s, sock) = sender(&tag, addr);
        send(&mut s, &sock, &tag, 1..=3);
        pump_until(&d, &mut s, &sock, false, 1);
        assert!(d.lock().queue.is_empty(), "taken while not holding");
        // Handed over (with no streams): the sender's repairs bring it all.
        d.take(Vec::new());
        pump_until(&d, &mut s, &sock, false, 3);
        let mut st = d.lock();
        let got: Vec<u64> = std::iter::from_fn(|| d.pop(&mut st))
            .map(|m| seq_of(&m))
            .collect();
        assert_eq!(got, [1, 2, 3]);
        drop(st);
        // What waits in the socket is available (as `Subscriber::available`
        // says) before any pump.
        assert!(!d.has_queued());
        send(&mut s, &sock, &tag, 4..=4);
        std::thread::sleep(Duration::from_millis(20));
        assert!(d.has_queued());
    }

    /// One datagram per message (each flushed alone).
    fn send_apart(
        s: &mut Session,
        sock: &UdpSocket,
        tag: &TagName,
        seqs: std::ops::RangeInclusive<u64>,
    ) {
        for seq in seqs {
            send(s, sock, tag, seq..=seq);
        }
    }

    #[test]
    fn the_subscriber_stops_reading_at_its_depth_and_only_the_keeper_drops_the_oldest() {
        let (d, tag, addr) = open(8, false);
        d.take(Vec::new());
        let (mut s, sock) = sender(&tag, addr);
        send_apart(&mut s, &sock, &tag, 1..=20);
        let mut got = Vec::new();
        let until = Instant::now() + Duration::from_secs(5);
        while got.len() < 20 && Instant::now() < until {
            // The subscriber's own reads: a full queue stops them.
            pump_until(&d, &mut s, &sock, false, 8);
            let mut st = d.lock();
            assert!(
                st.queue.len() <= 8,
                "read past its depth: {}",
                st.queue.len()
            );
            assert_eq!(st.overflowed, 0);
            got.extend(std::iter::from_fn(|| d.pop(&mut st)).map(|m| seq_of(&m)));
        }
        assert_eq!(got, (1..=20).collect::<Vec<_>>());
        // The keeper, for a subscriber away: it reads on and keeps the newest.
        send_apart(&mut s, &sock, &tag, 21..=60);
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            pump_until(&d, &mut s, &sock, true, 9);
            let st = d.lock();
            if st.queue.back().is_some_and(|m| seq_of(m) == 60) {
                break;
            }
        }
        let st = d.lock();
        assert_eq!(st.queue.len(), 8);
        assert_eq!(st.overflowed, 32);
        assert_eq!(seq_of(&st.queue[0]), 53);
        // Each dropped one's number is kept for the subscription's gaps.
        let dropped: Vec<u64> = st.dropped.iter().flatten().map(|d| d.2).collect();
        assert_eq!(dropped, (21..=52).collect::<Vec<_>>());
    }

    /// A lossless subscriber's pump takes what fits the room it has now:
    /// it refused data that fit, when the room it had at its last pump was
    /// none (its subscriber has read on since), and the sender took each
    /// refusal for a loss.
    #[test]
    fn a_lossless_subscriber_takes_what_fits_the_room_it_has_now() {
        let (d, tag, addr) = open(32, true);
        // (In `receive` all along: the keeper stays out.)
        let _present = d.enter();
        d.take(Vec::new());
        let (mut s, sock) = sender(&tag, addr);
        // More than its queue holds, a datagram each, before any credit.
        send_apart(&mut s, &sock, &tag, 1..=40);
        pump_until(&d, &mut s, &sock, false, 32);
        std::thread::sleep(Duration::from_millis(20));
        let mut st = d.lock();
        assert_eq!(st.queue.len(), 32, "read past its depth");
        // The subscriber reads three (not at an eighth of its queue: no
        // announcement of room), then reads its socket again.
        for want in 1..=3 {
            assert_eq!(d.pop(&mut st).map(|m| seq_of(&m)), Some(want));
        }
        d.pump(&mut st, Instant::now(), false);
        assert_eq!(st.no_room, 0, "refused what fit its room");
        assert_eq!(st.queue.len(), 32);
        assert_eq!(st.queue.back().map(seq_of), Some(35));
    }

    /// The sender's side under a key: sends sealed for the holding with
    /// `to` (`counter` its next counter), opens the acknowledgements with
    /// it; returns how many acknowledgements opened.
    fn service_sealed(
        s: &mut Session,
        sock: &UdpSocket,
        to: &mut tagwire_auth::ToHolder,
        counter: &mut u64,
    ) -> usize {
        let now = Instant::now();
        let mut buf = [0u8; 65536];
        let mut acks = 0;
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            if let Ok(body) = to.open_ack(&mut buf[..n]) {
                acks += 1;
                s.handle_datagram(now, from, body);
            }
        }
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        let mut sealed = Vec::new();
        while let Some(t) = s.poll_transmit(now) {
            to.seal_into(*counter, true, &t.bytes, &mut sealed);
            *counter += 1;
            let _ = sock.send_to(&sealed, t.dest);
        }
        acks
    }

    #[test]
    fn under_a_key_only_the_holdings_datagrams_of_its_tag_are_taken_and_acknowledgements_go_out_sealed(
    ) {
        let (d, tag, addr) = open(64, false);
        let domain = tagwire_auth::DomainKey::from_bytes([9; 32]);
        let (node, me): (std::net::IpAddr, std::net::IpAddr) =
            ("127.0.0.1".parse().unwrap(), "127.0.0.1".parse().unwrap());
        d.set_holding(&[domain.holding_key(node, 5, 3, tag.as_str())], false);
        d.take(Vec::new());
        // Plain datagrams (a host without the key): refused, unacknowledged.
        let (mut s, sock) = sender(&tag, addr);
        send(&mut s, &sock, &tag, 1..=3);
        pump_until(&d, &mut s, &sock, false, 1);
        assert!(d.lock().queue.is_empty(), "took plain datagrams");
        assert!(d.lock().refused >= 1);
        // Another tag's data sealed with this holding's key (what one of its
        // publishers could send): refused.
        let mut to = tagwire_auth::ToHolder::new(&domain, node, 5, 3, tag.as_str(), me, 77);
        let other = TagName::new("/direct/other").unwrap();
        let (mut o, osock) = sender(&other, addr);
        let mut counter = 1;
        send(&mut o, &osock, &other, 1..=1);
        // (`send` sent it plain; repairs go out sealed from now on.)
        let before = d.lock().refused;
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until {
            service_sealed(&mut o, &osock, &mut to, &mut counter);
            d.pump(&mut d.lock(), Instant::now(), false);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(d.lock().queue.is_empty(), "took another tag's data");
        assert!(d.lock().refused > before, "the sealed repair never came");
        // Sealed for the holding: taken, and acknowledged sealed.
        let mut acks = 0;
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until && d.lock().queue.len() < 3 {
            acks += service_sealed(&mut s, &sock, &mut to, &mut counter);
            d.pump(&mut d.lock(), Instant::now(), false);
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut st = d.lock();
        let got: Vec<u64> = std::iter::from_fn(|| d.pop(&mut st))
            .map(|m| seq_of(&m))
            .collect();
        assert_eq!(got, [1, 2, 3]);
        drop(st);
        std::thread::sleep(Duration::from_millis(50));
        acks += service_sealed(&mut s, &sock, &mut to, &mut counter);
        assert!(acks > 0, "no acknowledgement sealed for the holding");
    }

    #[test]
    fn given_back_the_streams_carry_on_where_the_subscriber_stopped() {
        let (d, tag, addr) = open(64, true);
        d.take(Vec::new());
        let (mut s, sock) = sender(&tag, addr);
        send(&mut s, &sock, &tag, 1..=5);
        pump_until(&d, &mut s, &sock, false, 5);
        let streams = d.give();
        assert!(!d.lock().holder);
        assert_eq!(streams.len(), 1);
        assert_eq!(streams[0].next, 2, "one batch datagram delivered");
        // What came before stays queued for the subscriber.
        assert_eq!(d.lock().queue.len(), 5);
    }
}
