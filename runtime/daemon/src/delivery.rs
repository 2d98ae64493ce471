//! The delivery manager: data between nodes (DESIGN.md §2).
//!
//! * **Outbound** (`forward`): for every global tag with receivers on other
//!   nodes, a forwarder thread reads the tag's ring like a subscriber and
//!   hands each message published on *this* node to the tag's
//!   `tagwire_session::Session`, which batches, fragments, numbers and
//!   keeps the reliable windows (see that crate); the forwarder sends what
//!   it says. Messages that arrived from other nodes are not forwarded
//!   (their publisher's node already sent one copy to every node), except
//!   by an intermediate proxy node to the nodes it proxies for
//!   (`tagwire_session::plan`). This module computes the routes
//!   (`reroute`, under the state lock) and hands them to `forward`, which
//!   does not import this module.
//! * **Inbound**: one thread receives on the delivery port (and one on the
//!   multicast carrier's), each the glue around its own inbound
//!   `tagwire_session::Session`: reliable data in order, exactly once, ACK
//!   every K, NACK on gaps; best-effort data newer than the last only, gaps
//!   counted (`Daemon::best_effort_losses`); fragments reassembled. Each
//!   whole message is written into the tag's local ring with the
//!   publisher's original header (pid, node, sequence number, timestamp),
//!   so local subscribers cannot tell it from a local message. Messages
//!   larger than a slot become blobs, as on one node. ACK/NACKs for our
//!   own streams go to their forwarder's session (`Outbound::handle_ack`).
//!   The thread sleeps in `recv` until its session's next timer.
//!
//! Malformed datagrams are counted and dropped. **Back-pressure:** while a
//! node gets a reliable stream, the forwarder holds a gate on the ring
//! (`tagwire_shm::Gate`) at its read position and stops reading while a
//! window is full, so the ring fills and the publisher's `send` waits (for its
//! configured time, then fails with `Error::WindowFull`, having sent nothing)
//! instead of overwriting messages not yet handed to every window. Records
//! written without a gate (messages that arrived from other nodes) can still
//! lap it; such losses are counted (`Daemon::forward_losses`).
//!
//! **End to end**, a lossless subscriber (`SubscribeOptions::lossless`) holds
//! a lossless gate on its ring. The inbound path never waits: what such a
//! subscriber has no room for waits in the tag's `Held` queue, drained as it
//! reads: a `tagwired-held` thread per holding tag sleeps on the ring's gate
//! bell (`Ring::wait_lossless_room`), writes what now fits and wakes the
//! inbound thread with an empty datagram to its own socket (nothing polls). While anything waits there, the room left in it (a ring's worth,
//! or `HELD_BYTES`) is the tag's **credit**, which every acknowledgement
//! carries to the sending node's session: that node sends no more
//! unacknowledged messages than the credit, so its window, then its ring,
//! then its publisher wait, and nothing is sent only to be refused. At zero
//! room data that comes anyway (sent on an older credit) is refused unread
//! and unacknowledged (`Daemon::held_back`), without a NACK; room coming
//! back is announced at once. A TCP connection just stops being read.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::{MemfdFlags, SealFlags};

use tagwire_proto::Role;
use tagwire_shm::{Ring, Segment};
use tagwire_wire::datagram::{tag_group, Body, Datagram, FLAG_RELIABLE};
use tagwire_wire::frame::{BlobRef, FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::{NodeAddr, TagId, TagName};

use crate::auto::Placer;
use crate::blob::{self, Limits, Owner, RingState};
use crate::forward::Outbound;
use crate::{lock, Shared, State};
use tagwire_session::plan::{Mode, Plan};
use tagwire_session::{Config as SessionConfig, Dest, Event, Session};
use tagwire_wire::control::{StatsKind, StatsRow};

/// The delivery manager's shared state.
#[derive(Debug)]
pub(crate) struct Delivery {
    pub(crate) sock: UdpSocket,
    /// The outbound side: forwarders, their sessions and sockets.
    pub(crate) outbound: Arc<Outbound>,
    /// The multicast data carrier's socket and port (IPv4 nodes only).
    pub(crate) msock: Option<(UdpSocket, u16)>,
    /// Tags this node receives by multicast, and how many of them use each
    /// group (joined while one does).
    mtags: Mutex<HashSet<TagName>>,
    mgroups: Mutex<HashMap<Ipv4Addr, usize>>,
    /// Bumped when held-back messages went into a ring (TCP connections
    /// that stopped reading wait on it).
    room: (Mutex<u64>, std::sync::Condvar),
    /// The TCP carrier's listener (shut down to stop its accept loop).
    tcp_listener: std::sync::OnceLock<std::net::TcpListener>,
}

impl Delivery {
    /// Binds the delivery port and starts the inbound thread.
    pub(crate) fn start(
        shared: &Arc<Shared>,
        addr: SocketAddr,
        multicast_port: u16,
    ) -> std::io::Result<Arc<Self>> {
        let sock = tagwire_net::udp_socket(addr)?;
        sock.set_read_timeout(Some(MAX_SLEEP))?;
        // Without a usable multicast socket the carrier is off (a warning);
        // everything else still works.
        let msock = match addr.ip() {
            std::net::IpAddr::V4(ip) => tagwire_net::multicast_data_socket(multicast_port, ip)
                .and_then(|m| {
                    m.set_read_timeout(Some(MAX_SLEEP))?;
                    Ok((m, multicast_port))
                })
                .map_err(|e| {
                    tracing::warn!(port = multicast_port, error = %e, "multicast carrier unavailable");
                })
                .ok(),
            std::net::IpAddr::V6(_) => None,
        };
        let outbound = Arc::new(Outbound::new(&sock, msock.as_ref())?);
        let d = Arc::new(Self {
            sock,
            outbound,
            msock,
            mtags: Mutex::new(HashSet::new()),
            mgroups: Mutex::new(HashMap::new()),
            room: (Mutex::new(0), std::sync::Condvar::new()),
            tcp_listener: std::sync::OnceLock::new(),
        });
        let (s, d2) = (shared.clone(), d.clone());
        std::thread::Builder::new()
            .name("tagwired-delivery".into())
            .spawn(move || inbound_loop(&s, &d2, &d2.sock, false))?;
        if d.msock.is_some() {
            let (s, d2) = (shared.clone(), d.clone());
            std::thread::Builder::new()
                .name("tagwired-mcast".into())
                .spawn(move || {
                    if let Some((m, _)) = &d2.msock {
                        inbound_loop(&s, &d2, m, true);
                    }
                })?;
        }
        // The TCP carrier: same port number, TCP. Blocking: `stop` shuts
        // the listener down, which ends the `accept`.
        let listener = tagwire_net::tcp_listener(addr)?;
        listener.set_nonblocking(false)?;
        let _ = d.tcp_listener.set(listener.try_clone()?);
        let s = shared.clone();
        std::thread::Builder::new()
            .name("tagwired-delivery-tcp".into())
            .spawn(move || tcp_accept_loop(&s, &listener))?;
        Ok(d)
    }

    /// Starts, updates or stops forwarders after a table change (called under
    /// the state lock).
    pub(crate) fn reroute(self: &Arc<Self>, shared: &Arc<Shared>, st: &State) {
        let me = shared.node();
        let mut wanted: HashMap<TagName, Vec<Dest>> = HashMap::new();
        // A node gets one copy, by the plan every node computes alike: the
        // group is joined only where that copy is multicast, or a message
        // would come twice.
        let mut groups: HashSet<TagName> = HashSet::new();
        for e in st.table.entries() {
            let plan = plan_of(st, me, shared.placer.as_ref(), e);
            if plan.mode_of(me) == Some(Mode::Multicast) {
                groups.insert(e.name.clone());
            }
            let mut nodes: Vec<Dest> = plan
                .legs(me)
                .into_iter()
                .filter_map(|l| {
                    Some(Dest {
                        node: l.node,
                        addr: st.peers.delivery_addr(l.node)?,
                        mode: l.mode,
                        every: l.every,
                        relay: l.relay,
                    })
                })
                .collect();
            if !nodes.is_empty() {
                nodes.sort();
                wanted.insert(e.name.clone(), nodes);
            }
        }
        self.join_groups(me, groups);
        self.outbound.reroute(shared, wanted, |name| {
            let shared_ring = st.table.entry(name).and_then(|e| st.rings.get(&e.id))?;
            // Forward from the grant on: a publisher that saw this receiver
            // counted publishes at or after this index.
            let start = shared_ring.head_index();
            let ring = private_ring(shared_ring).ok()?;
            Some((ring, start))
        });
    }

    /// Joins the multicast group of every tag in `wanted` (those whose copy
    /// for this node comes by multicast), and leaves those no longer wanted.
    fn join_groups(&self, me: NodeAddr, wanted: HashSet<TagName>) {
        let Some((m, _)) = &self.msock else {
            return;
        };
        let std::net::IpAddr::V4(iface) = me.0 else {
            return;
        };
        let mut tags = lock(&self.mtags);
        let mut groups = lock(&self.mgroups);
        for t in wanted.difference(&tags) {
            let g = tag_group(t);
            let n = groups.entry(g).or_insert(0);
            if *n == 0 {
                if let Err(e) = m.join_multicast_v4(&g, &iface) {
                    tracing::warn!(tag = %t, group = %g, error = %e, "cannot join a multicast group");
                }
            }
            *n += 1;
        }
        for t in tags.difference(&wanted) {
            let g = tag_group(t);
            if let Some(n) = groups.get_mut(&g) {
                *n -= 1;
                if *n == 0 {
                    groups.remove(&g);
                    let _ = m.leave_multicast_v4(&g, &iface);
                }
            }
        }
        *tags = wanted;
    }

    /// A `tagwire stats` row per reliable stream to another node.
    pub(crate) fn stream_rows(&self) -> Vec<StatsRow> {
        let mut rows: Vec<StatsRow> = self
            .outbound
            .stream_stats()
            .into_iter()
            .map(|s| {
                let w = s.writer;
                StatsRow::new(StatsKind::Outbound, s.tag.as_str(), s.addr.ip().to_string())
                    .with("sent", w.sent)
                    .with("resent", w.retransmitted)
                    .with("acked", w.acked)
                    .with("heartbeats", w.heartbeats)
                    .with("unacked", s.unacked)
                    .with("unacked_bytes", s.unacked_bytes)
                    .with("cwnd", s.cwnd)
                    .with("congestion", w.congestion_events)
            })
            .collect();
        rows.sort_by(|a, b| (&a.tag, &a.who).cmp(&(&b.tag, &b.who)));
        rows
    }
}

/// A tag's routing plan, from this node's table (proxy nodes must be up),
/// with `Auto` proxies placed by `placer`.
fn plan_of(st: &State, me: NodeAddr, placer: Option<&Placer>, e: &tagwire_proto::Entry) -> Plan {
    let mut receivers = e
        .rights(Role::Receiver)
        .iter()
        .map(|r| (r.key.node, r.qos))
        .collect::<Vec<_>>();
    let up = |n| n == me || st.peers.delivery_addr(n).is_some();
    // Without a topology `Auto` stays unresolved, and the plan filters it
    // at the publisher.
    if let Some(p) = placer {
        let publishers: Vec<NodeAddr> = e.rights(Role::Sender).iter().map(|r| r.key.node).collect();
        p.resolve(&e.name, &publishers, &mut receivers, up);
    }
    Plan::new(receivers, up)
}

/// Our own mapping of a tag's ring (the forwarder reads it without the lock).
pub(crate) fn private_ring(r: &Ring) -> std::io::Result<Ring> {
    let fd: OwnedFd = r.segment().as_fd().try_clone_to_owned()?;
    let seg = Segment::open(fd).map_err(std::io::Error::other)?;
    Ring::open(seg).map_err(std::io::Error::other)
}

/// Receives on `sock` (the delivery port, or with `multicast` the multicast
/// carrier's, where only data of tags joined for is taken): the glue around
/// this thread's own inbound [`Session`], which owns the streams from other
/// nodes (order, acknowledgements with credit, gaps, reassembly). It sleeps
/// in `recv` until the session's next timer (or, while messages are held
/// back for lossless subscribers, until it looks for room again).
fn inbound_loop(shared: &Arc<Shared>, d: &Delivery, sock: &UdpSocket, multicast: bool) {
    let mut buf = vec![0u8; 65536];
    let mut session = Session::new(SessionConfig {
        me: shared.node(),
        seed: crate::forward::random_id(),
        start_at_first: true,
        ..SessionConfig::default()
    });
    let mut credits = Credits::default();
    let mut timeout = Duration::ZERO;
    while !shared.is_stopping() {
        let holding = shared.stats.held_now.load(Ordering::Relaxed) > 0;
        if holding || !credits.limited.is_empty() {
            // (Another inbound thread may have drained a tag of ours.)
            let rooms = drain_held(shared);
            credits.update(&mut session, Instant::now(), &rooms, true);
        }
        let now = Instant::now();
        let want = session
            .poll_timeout()
            .map_or(MAX_SLEEP, |t| t.saturating_duration_since(now))
            .min(MAX_SLEEP);
        // (A zero timeout is refused: it would mean "block forever".)
        let want = want.max(MIN_SLEEP);
        if want < timeout || want > timeout * 2 {
            let _ = sock.set_read_timeout(Some(want));
            timeout = want;
        }
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            let now = Instant::now();
            let raw = &buf[..n];
            match Datagram::decode(raw) {
                // An empty datagram only wakes us (`Delivery::room_made`):
                // the next pass looks at the held-back queues.
                _ if n == 0 => {}
                Ok(dg) if multicast && !d.joined(&dg.body) => {}
                Ok(Datagram {
                    stream,
                    body: Body::AckNack(_),
                }) => {
                    // Our own stream's acknowledgement: its forwarder's session.
                    d.outbound.handle_ack(shared, now, stream, from, raw);
                }
                Ok(_) => session.handle_datagram(now, from, raw),
                Err(e) => {
                    shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
                    shared.tallies.peers.add(&from.ip(), |c| c.malformed += 1);
                    tracing::debug!(%from, error = %e, "malformed datagram dropped");
                }
            }
        }
        let now = Instant::now();
        if session.poll_timeout().is_some_and(|t| t <= now) {
            session.handle_timeout(now);
        }
        deliver_all(shared, &mut session, &mut credits, now);
        while let Some(t) = session.poll_transmit(now) {
            let _ = d.sock.send_to(&t.bytes, t.dest);
        }
        while let Some(e) = session.poll_event() {
            account(shared, e);
        }
    }
}

/// Writes what the session completed into the local rings, a run of one
/// tag at a time (one lock and one wake-up per run), and gives the session
/// each tag's room for its lossless subscribers.
fn deliver_all(shared: &Shared, session: &mut Session, credits: &mut Credits, now: Instant) {
    let mut run: Vec<tagwire_session::Delivery> = Vec::new();
    loop {
        let next = session.poll_deliver();
        let ends = match (&next, run.first()) {
            (Some(n), Some(f)) => n.tag != f.tag,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if ends {
            let tag = run[0].tag.clone();
            let room = deliver(shared, &tag, run.iter().map(|m| (m.header, &m.payload[..])));
            if let Some((id, room)) = room {
                credits.names.entry(id).or_insert(tag);
                credits.update(session, now, &[(id, room)], false);
            }
            run.clear();
        }
        match next {
            Some(m) => run.push(m),
            None => return,
        }
    }
}

/// The credit an inbound session announces per tag: the room of the tag's
/// held-back queue while anything is held (see `Held::room`), none
/// otherwise.
#[derive(Debug, Default)]
struct Credits {
    /// Tag names by id, for what `drain_held` reports.
    names: HashMap<TagId, TagName>,
    /// Tags whose credit is limited in the session.
    limited: HashSet<TagId>,
}

impl Credits {
    /// Takes the rooms of the tags in `rooms`; with `all` (a report of every
    /// tag holding anything), a limited tag absent from it gets no limit.
    fn update(
        &mut self,
        session: &mut Session,
        now: Instant,
        rooms: &[(TagId, Option<u32>)],
        all: bool,
    ) {
        for (id, room) in rooms {
            let Some(t) = self.names.get(id) else {
                continue;
            };
            session.set_credit(now, t, *room);
            if room.is_some() {
                self.limited.insert(*id);
            } else {
                self.limited.remove(id);
            }
        }
        if !all {
            return;
        }
        let names = &self.names;
        self.limited.retain(|id| {
            let held = rooms.iter().any(|(i, r)| i == id && r.is_some());
            if !held && !rooms.iter().any(|(i, _)| i == id) {
                // Not reported: drained (by another thread) or gone.
                if let Some(t) = names.get(id) {
                    session.set_credit(now, t, None);
                }
                return false;
            }
            held
        });
    }
}

/// Counts what an inbound session reports.
fn account(shared: &Shared, e: Event) {
    match e {
        Event::BestEffortLost { tag, count, .. } => {
            shared
                .stats
                .best_effort_lost
                .fetch_add(count, Ordering::Relaxed);
            shared.tallies.tags.add(&tag, |c| c.lost += count);
        }
        Event::Refused { tag, from } => {
            shared.stats.held_back.fetch_add(1, Ordering::Relaxed);
            shared.tallies.peers.add(&from.ip(), |c| c.refused += 1);
            shared.tallies.tags.add(&tag, |c| c.refused += 1);
        }
        Event::Malformed { from } => {
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            shared.tallies.peers.add(&from.ip(), |c| c.malformed += 1);
        }
        Event::DirectReceived { .. } => {
            shared.stats.direct_received.fetch_add(1, Ordering::Relaxed);
        }
        // The daemon does not hand streams over yet.
        Event::Away { .. } => {}
        // Outbound events: this session sends acknowledgements only.
        Event::StreamOpened { .. }
        | Event::StreamClosed { .. }
        | Event::ScaledOut { .. }
        | Event::Dropped { .. }
        | Event::DirectKept { .. } => {}
    }
}

fn tcp_accept_loop(shared: &Arc<Shared>, listener: &std::net::TcpListener) {
    while !shared.is_stopping() {
        match listener.accept() {
            Ok((conn, from)) => {
                let s = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("tagwired-tcp-in".into())
                    .spawn(move || tcp_inbound(&s, conn, from));
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "cannot serve a TCP data connection");
                }
            }
            Err(e) if shared.is_stopping() => {
                tracing::debug!(error = %e, "TCP carrier stopped");
            }
            Err(e) => {
                // (Out of descriptors, say: the peer retries its connect.)
                tracing::debug!(error = %e, "accept failed");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Largest frame on a TCP data connection: one datagram.
const MAX_TCP_FRAME: usize = tagwire_wire::datagram::MAX_DATAGRAM;

/// One TCP data connection: frames of a u32 LE length and a data or batch
/// datagram, delivered in order. A malformed frame is counted and ends the
/// connection (the sender reconnects).
fn tcp_inbound(shared: &Arc<Shared>, conn: std::net::TcpStream, from: SocketAddr) {
    use std::io::Read;
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let mut conn = std::io::BufReader::with_capacity(256 * 1024, conn);
    // The connection's own inbound session: numbering, reassembly and
    // delivery as for datagrams (TCP makes it ordered and whole).
    let mut session = Session::new(SessionConfig {
        me: shared.node(),
        seed: crate::forward::random_id(),
        start_at_first: true,
        ..SessionConfig::default()
    });
    let mut credits = Credits::default();
    let mut buf = vec![0u8; MAX_TCP_FRAME];
    // Reads exactly `out.len()` bytes; None on EOF, error or shutdown.
    let read_exact = |conn: &mut std::io::BufReader<std::net::TcpStream>, out: &mut [u8]| {
        let mut done = 0;
        while done < out.len() {
            match conn.read(&mut out[done..]) {
                Ok(0) => return None,
                Ok(n) => done += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    if shared.is_stopping() {
                        return None;
                    }
                }
                Err(_) => return None,
            }
        }
        Some(())
    };
    loop {
        let mut len = [0u8; 4];
        if read_exact(&mut conn, &mut len).is_none() {
            break;
        }
        let n = u32::from_le_bytes(len) as usize;
        if n > MAX_TCP_FRAME {
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%from, len = n, "oversized TCP data frame; closing");
            break;
        }
        if read_exact(&mut conn, &mut buf[..n]).is_none() {
            break;
        }
        match Datagram::decode(&buf[..n]) {
            Ok(g) if matches!(g.body, Body::Data(_) | Body::Batch(_)) => {
                shared.stats.tcp_frames.fetch_add(1, Ordering::Relaxed);
                // A lossless subscriber a ring behind: stop reading, and TCP
                // holds the sender back.
                let tag = match &g.body {
                    Body::Data(d) => Some(&d.tag),
                    Body::Batch(b) => Some(&b.tag),
                    _ => None,
                };
                while tag.is_some_and(|t| held_full(shared, t)) && !shared.is_stopping() {
                    drain_held(shared);
                    if let Some(d) = shared.delivery.get() {
                        d.wait_for_room(MAX_SLEEP);
                    }
                }
                let now = Instant::now();
                session.handle_datagram(now, from, &buf[..n]);
                deliver_all(shared, &mut session, &mut credits, now);
                // (Best-effort numbering: nothing to acknowledge.)
                while session.poll_transmit(now).is_some() {}
                while let Some(e) = session.poll_event() {
                    account(shared, e);
                }
            }
            _ => {
                shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%from, "malformed TCP data frame; closing");
                break;
            }
        }
    }
}

impl Delivery {
    /// Held-back messages went into a ring: the delivery port's inbound
    /// thread wakes (an empty datagram to its socket) and announces the
    /// room; TCP connections that stopped reading look again.
    fn room_made(&self) {
        if let Ok(me) = self.sock.local_addr() {
            let me = match me.ip() {
                ip if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), me.port()),
                _ => me,
            };
            let _ = self.sock.send_to(&[], me);
        }
        *lock(&self.room.0) += 1;
        self.room.1.notify_all();
    }

    /// Ends the TCP carrier's accept loop (the daemon stops).
    pub(crate) fn stop(&self) {
        if let Some(l) = self.tcp_listener.get() {
            let _ = rustix::net::shutdown(l, rustix::net::Shutdown::Read);
        }
    }

    /// Waits up to `wait` for [`Delivery::room_made`].
    fn wait_for_room(&self, wait: Duration) {
        let g = lock(&self.room.0);
        let seen = *g;
        let _ = self.room.1.wait_timeout_while(g, wait, |n| *n == seen);
    }

    /// Whether a multicast datagram is best-effort data of a tag joined for
    /// (groups are shared by tags; anything else is not for us).
    fn joined(&self, body: &Body<'_>) -> bool {
        let (tag, flags) = match body {
            Body::Data(d) => (d.tag.as_ref(), d.flags),
            Body::Batch(b) => (b.tag.as_ref(), b.flags),
            Body::Heartbeat(_) | Body::AckNack(_) => return false,
        };
        flags & FLAG_RELIABLE == 0 && lock(&self.mtags).contains(tag)
    }
}

/// Messages of one tag held back for a lossless subscriber, oldest first:
/// each a whole ring record (frame header and payload or blob reference).
#[derive(Debug, Default)]
pub(crate) struct Held {
    records: std::collections::VecDeque<Vec<u8>>,
    bytes: usize,
    /// A `held_drainer` thread is on it.
    drainer: bool,
}

impl Held {
    /// Messages held.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether a ring's worth (`slots` records, or [`HELD_BYTES`]) is held:
    /// then data for the tag is refused until it drains.
    fn full(&self, slots: u32) -> bool {
        self.room(slots) == 0
    }

    /// Messages that may still come before data is refused: the credit
    /// the tag's inbound streams announce to their senders.
    fn room(&self, slots: u32) -> u32 {
        if self.bytes >= HELD_BYTES {
            return 0;
        }
        slots.saturating_sub(u32::try_from(self.records.len()).unwrap_or(u32::MAX))
    }
}

/// Bytes held back for one tag before its data is refused.
const HELD_BYTES: usize = 16 << 20;

/// Longest an inbound thread sleeps in `recv` without a timer (to notice
/// the daemon stopping).
const MAX_SLEEP: Duration = Duration::from_millis(250);

/// Shortest (a due timer).
const MIN_SLEEP: Duration = Duration::from_micros(50);

/// Whether data for `tag` must wait (a datagram is refused: left unread and
/// unacknowledged, for its sender to resend later): a lossless subscriber
/// here is a ring behind and a ring's worth more is held back already.
fn held_full(shared: &Shared, tag: &TagName) -> bool {
    if shared.stats.held_now.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let st = shared.lock();
    st.table.entry(tag).is_some_and(|e| {
        let (Some(ring), Some(h)) = (st.rings.get(&e.id), st.held.get(&e.id)) else {
            return false;
        };
        h.full(ring.shape().slots)
    })
}

/// Writes messages from another node into the tag's local ring (one lock
/// for all of them). What a lossless subscriber has no room for yet waits
/// in the tag's `Held` queue (`drain_held` writes it later), behind which
/// everything newer waits too, so the order stays the publishers'.
fn deliver<'m>(
    shared: &Shared,
    tag: &TagName,
    msgs: impl Iterator<Item = (FrameHeader, &'m [u8])>,
) -> Option<(TagId, Option<u32>)> {
    let mut st = shared.lock();
    let Some(id) = st.table.entry(tag).map(|e| e.id) else {
        shared.stats.unknown_tag.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    // Behind messages already held, everything waits: the order stays.
    let mut holding = st.held.get(&id).is_some_and(|h| !h.records.is_empty());
    let mut n = 0;
    for (header, payload) in msgs {
        deliver_one(shared, &mut st, id, header, payload, &mut holding);
        n += 1;
    }
    shared.tallies.tags.add(tag, |c| c.delivered += n);
    // One wake-up for the lot.
    let ring = st.rings.get(&id)?;
    ring.wake_readers();
    let room = st
        .held
        .get(&id)
        .filter(|h| !h.records.is_empty())
        .map(|h| h.room(ring.shape().slots));
    Some((id, room))
}

fn deliver_one(
    shared: &Shared,
    st: &mut State,
    id: TagId,
    mut header: FrameHeader,
    payload: &[u8],
    holding: &mut bool,
) {
    let Some(ring) = st.rings.get(&id) else {
        return;
    };
    let mut h = [0u8; HEADER_LEN];
    let blob;
    let mut blob_written = None;
    let body: &[u8] = if payload.len() + HEADER_LEN <= ring.max_record() {
        header.flags = 0;
        payload
    } else {
        let Some(fd) = blob_fd(payload) else {
            shared.stats.inbound_failed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let limits = Limits::of(&shared.config, ring.shape().slots);
        let at = RingState::of(ring);
        let store = st.blobs.entry(id).or_default();
        store.scan(at, |i| blob::look(ring, i));
        let blob_id = store.put_anyway(fd, payload.len() as u64, Owner::Inbound, limits, at);
        blob_written = Some(blob_id);
        blob = BlobRef {
            blob_id,
            len: payload.len() as u64,
        }
        .to_bytes();
        header.flags = FLAG_BLOB;
        &blob
    };
    let _ = header.emit(&mut h);
    if !*holding {
        match ring.publish_lossless_quietly(&[&h, body]) {
            Ok(None) => *holding = true,
            written => {
                // In the ring (or refused as malformed): the store keeps
                // it for as long as its record is there.
                if written.is_err() {
                    shared.stats.inbound_failed.fetch_add(1, Ordering::Relaxed);
                }
                if let (Some(b), Some(store)) = (blob_written, st.blobs.get_mut(&id)) {
                    store.done(Owner::Inbound, b);
                }
                return;
            }
        }
    }
    let held = st.held.entry(id).or_default();
    held.records.push_back([&h[..], body].concat());
    held.bytes += HEADER_LEN + body.len();
    if !held.drainer {
        if let Some(me) = shared.this.get().and_then(std::sync::Weak::upgrade) {
            held.drainer = std::thread::Builder::new()
                .name("tagwired-held".into())
                .spawn(move || held_drainer(&me, id))
                .is_ok();
        }
    }
    shared.stats.held_now.fetch_add(1, Ordering::Relaxed);
    shared.stats.held.fetch_add(1, Ordering::Relaxed);
}

/// Moves a tag's held-back messages into its ring as its lossless
/// subscribers make room: sleeps on the ring's gate bell (a subscriber rings
/// it once it has read a refill step past what is held back), then wakes the
/// inbound threads, which announce the room to the senders at once. Ends
/// when nothing is held for the tag.
fn held_drainer(shared: &Arc<Shared>, id: TagId) {
    loop {
        let ring = {
            let mut st = shared.lock();
            let holding = st.held.get(&id).is_some_and(|h| !h.records.is_empty());
            match st.rings.get(&id) {
                Some(r) if holding && !shared.is_stopping() => r.clone(),
                _ => {
                    if let Some(h) = st.held.get_mut(&id) {
                        h.drainer = false;
                    }
                    return;
                }
            }
        };
        // (The bound only lets the loop see a stopping daemon or a tag
        // that went away.)
        if !ring.wait_lossless_room(MAX_SLEEP) {
            continue;
        }
        drain_held(shared);
        if let Some(d) = shared.delivery.get() {
            d.room_made();
        }
    }
}

/// Writes what lossless subscribers now have room for of the messages held
/// back for them (and forgets those of tags that are gone). Free while
/// nothing is held.
/// Returns each tag it looked at with its room now (`None`: nothing held).
pub(crate) fn drain_held(shared: &Shared) -> Vec<(TagId, Option<u32>)> {
    let mut rooms = Vec::new();
    if shared.stats.held_now.load(Ordering::Relaxed) == 0 {
        return rooms;
    }
    let mut st = shared.lock();
    let State {
        rings, held, blobs, ..
    } = &mut *st;
    let mut written = 0u64;
    let mut dropped = 0u64;
    held.retain(|id, h| {
        let Some(ring) = rings.get(id) else {
            dropped += h.records.len() as u64;
            return false;
        };
        let mut n = 0u64;
        while let Some(r) = h.records.front() {
            if let Ok(None) = ring.publish_lossless_quietly(&[r]) {
                break;
            }
            if let (Some(b), Some(store)) = (blob::blob_of(r), blobs.get_mut(id)) {
                store.done(Owner::Inbound, b);
            }
            h.bytes -= r.len();
            h.records.pop_front();
            n += 1;
        }
        if n > 0 {
            ring.wake_readers();
        }
        written += n;
        let empty = h.records.is_empty();
        rooms.push((*id, (!empty).then(|| h.room(ring.shape().slots))));
        !empty
    });
    shared
        .stats
        .held_now
        .fetch_sub(written + dropped, Ordering::Relaxed);
    rooms
}

fn blob_fd(payload: &[u8]) -> Option<OwnedFd> {
    let fd = rustix::fs::memfd_create(
        "tagwire-blob",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    let mut f = std::fs::File::from(fd);
    f.write_all(payload).ok()?;
    rustix::fs::fcntl_add_seals(
        &f,
        SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE | SealFlags::SEAL,
    )
    .ok()?;
    Some(OwnedFd::from(f))
}
