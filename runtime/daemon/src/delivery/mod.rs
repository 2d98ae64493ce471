//! The delivery manager: data between nodes (docs/design.md §2).
//!
//! * **Outbound** (`forward`): for every global tag with receivers on other
//!   nodes, a forwarder thread reads the tag's ring like a subscriber and
//!   hands each message published on *this* node to the tag's
//!   `tagwire_session::SendSession`, which batches, fragments, numbers and
//!   keeps the reliable windows (see that crate); the forwarder sends what
//!   it says. Messages that arrived from other nodes are not forwarded
//!   (their publisher's node already sent one copy to every node), except
//!   by an intermediate proxy node to the nodes it proxies for
//!   (`tagwire_session::plan`). This module computes the routes
//!   (`reroute`, under the state lock) and hands them to `forward`, which
//!   does not import this module.
//! * **Inbound**: one thread receives on the delivery port (and one on the
//!   multicast carrier's), each the glue around its own inbound
//!   `tagwire_session::ReceiveSession`: reliable data in order, exactly once, ACK
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
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::roles::Role;
use tagwire_proto::Role as Right;
use tagwire_reliable::pacer::PacerConfig;
use tagwire_shm::{Ring, Segment};
use tagwire_wire::datagram::{tag_group, Body, Datagram, FLAG_RELIABLE};
use tagwire_wire::frame::{BlobRef, FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::{NodeAddr, Pacing, Priority, Sched, TagId, TagName};

use crate::auto::Placer;
use crate::blob::{self, Limits, Owner, RingState};
use crate::forward::Outbound;
use crate::{lock, Shared, State};
use tagwire_session::plan::{Mode, Plan};
use tagwire_session::{Config as SessionConfig, Dest, ReceiveEvent as Event, ReceiveSession};
use tagwire_wire::control::{StatsKind, StatsRow};

mod direct;
mod held;
mod inbound;

pub(crate) use held::{drain_held, ring_added, ring_removed, Sink};
use inbound::{inbound_loop, tcp_accept_loop};
use tagwire_wire::datagram::ACKNACK_PREFIX;

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
    /// This node's direct receivers (see `direct`).
    pub(crate) direct: direct::Direct,
    /// The inbound threads (UDP, multicast, TCP): at the delivery role's
    /// policy, raised to the highest this node's subscriptions ask.
    pub(crate) inbound: crate::roles::Pool,
    /// The acknowledgement watcher: raised to the highest any remote
    /// subscription of this node's tags asks (it frees their forwarders'
    /// windows).
    acks: crate::roles::Pool,
}

impl Delivery {
    /// Binds the delivery port and starts the inbound thread.
    pub(crate) fn start(
        shared: &Arc<Shared>,
        addr: SocketAddr,
        multicast_port: u16,
    ) -> std::io::Result<Arc<Self>> {
        // Forwarders send from a socket of their own on the same port, on
        // which nothing sleeps, and read the acknowledgements from a third
        // (`tagwire_net::delivery_sockets`, `crate::replies`).
        let tagwire_net::DeliverySockets {
            recv: sock,
            send: sender,
            replies,
        } = tagwire_net::delivery_sockets(addr, Some(ACKNACK_PREFIX))
            .map_err(|e| crate::naming(e, "the delivery port (UDP)", addr))?;
        sock.set_read_timeout(Some(MAX_SLEEP))?;
        let msock = multicast_socket(addr, multicast_port);
        let replies = watch_replies(replies, &sock, addr)?;
        let outbound = Arc::new(Outbound::new(sender, msock.as_ref(), replies)?);
        let d = Arc::new(Self {
            sock,
            outbound,
            msock,
            mtags: Mutex::new(HashSet::new()),
            mgroups: Mutex::new(HashMap::new()),
            room: (Mutex::new(0), std::sync::Condvar::new()),
            tcp_listener: std::sync::OnceLock::new(),
            direct: direct::Direct::default(),
            inbound: crate::roles::Pool::new(Role::Delivery),
            acks: crate::roles::Pool::new(Role::Delivery),
        });
        d.spawn_threads(shared, addr)?;
        Ok(d)
    }

    /// The inbound thread, the replies watcher (if acknowledgements are
    /// steered), the multicast receiver (if the carrier is on) and the TCP
    /// carrier's accept loop on the delivery port's number.
    fn spawn_threads(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        addr: SocketAddr,
    ) -> std::io::Result<()> {
        let (s, d2) = (shared.clone(), self.clone());
        std::thread::Builder::new()
            .name("tagwired-delivery".into())
            .spawn(move || {
                let _in = d2.inbound.join(&s.roles);
                inbound_loop(&s, &d2, &d2.sock, false)
            })?;
        if self.outbound.replies.is_some() {
            let (s, d2) = (shared.clone(), self.clone());
            std::thread::Builder::new()
                .name("tagwired-acks".into())
                .spawn(move || {
                    let _in = d2.acks.join(&s.roles);
                    d2.outbound.watch_replies(&s)
                })?;
        }
        if self.msock.is_some() {
            let (s, d2) = (shared.clone(), self.clone());
            std::thread::Builder::new()
                .name("tagwired-mcast".into())
                .spawn(move || {
                    let _in = d2.inbound.join(&s.roles);
                    if let Some((m, _)) = &d2.msock {
                        inbound_loop(&s, &d2, m, true);
                    }
                })?;
        }
        // The TCP carrier: same port number, TCP. Blocking: `stop` shuts
        // the listener down, which ends the `accept`.
        let listener = tagwire_net::tcp_listener(addr)
            .map_err(|e| crate::naming(e, "the delivery port (TCP carrier)", addr))?;
        listener.set_nonblocking(false)?;
        let _ = self.tcp_listener.set(listener.try_clone()?);
        let s = shared.clone();
        shared
            .roles
            .spawn(Role::Delivery, "tagwired-delivery-tcp", move || {
                tcp_accept_loop(&s, &listener)
            })?;
        Ok(())
    }

    /// Starts, updates or stops forwarders after a table change (called under
    /// the state lock).
    pub(crate) fn reroute(self: &Arc<Self>, shared: &Arc<Shared>, st: &State) {
        let me = shared.node();
        let mut wanted: HashMap<TagName, (Vec<Dest>, Option<PacerConfig>)> = HashMap::new();
        // A node gets one copy, by the plan every node computes alike: the
        // group is joined only where that copy is multicast, or a message
        // would come twice.
        let mut groups: HashSet<TagName> = HashSet::new();
        let mut holders = HashMap::new();
        let mut remote_holders = HashMap::new();
        // The threads each connection's ends ask for: the forwarder of
        // each tag takes the highest its receivers on other nodes and its
        // publishers on this one ask, the inbound threads the highest of
        // this node's receivers.
        let mut forwarders: HashMap<TagName, Sched> = HashMap::new();
        let mut inbound: Option<Sched> = None;
        for e in st.table.entries() {
            let receivers = e.rights(Right::Receiver).iter().map(|r| (r, true));
            let senders = e.rights(Right::Sender).iter().map(|r| (r, false));
            for (r, receiver) in receivers.chain(senders) {
                let asked = r.qos.sched;
                if asked.is_default() {
                    continue;
                }
                match (receiver, r.key.node == me) {
                    (true, true) => inbound = Some(inbound.map_or(asked, |s| s.max(asked))),
                    (true, false) | (false, true) => {
                        forwarders
                            .entry(e.name.clone())
                            .and_modify(|s| *s = s.max(asked))
                            .or_insert(asked);
                    }
                    (false, false) => {}
                }
            }
            // The highest class this node's publishers of the tag ask
            // (those that ask one): every leg from here carries at least it.
            let published = e
                .rights(Right::Sender)
                .iter()
                .filter(|r| r.key.node == me && r.qos.priority != Priority::Normal)
                .map(|r| r.qos.priority)
                .reduce(tagwire_session::plan::highest);
            // How this node paces the tag's reliable streams: as its
            // publishers ask, or as the daemon is set.
            let paced = e
                .rights(Right::Sender)
                .iter()
                .filter(|r| r.key.node == me)
                .map(|r| r.qos.pacing);
            let daemon = shared.config.net.as_ref().and_then(|n| n.pacing);
            let pacing = match Pacing::strongest(paced) {
                Pacing::Daemon => daemon,
                Pacing::Off => None,
                Pacing::Adaptive => Some(daemon.unwrap_or_default()),
                Pacing::Fixed(rate) => Some(PacerConfig {
                    fixed_rate: Some(rate as f64),
                    ..daemon.unwrap_or_default()
                }),
            };
            let plan = plan_of(st, me, shared.placer.as_ref(), e);
            if plan.mode_of(me) == Some(Mode::Multicast) {
                groups.insert(e.name.clone());
            }
            if let Some(c) = direct::holder(me, e, &plan) {
                holders.insert(e.id, (c, e.name.clone()));
            }
            let mut nodes: Vec<Dest> = plan
                .legs(me)
                .into_iter()
                .filter_map(|l| {
                    let delivery = st.peers.delivery_addr(l.node)?;
                    let direct = direct_addr(e, &plan, l.node, l.mode);
                    if let Some((addr, member)) = direct {
                        let at = crate::guard::HolderAt {
                            node: l.node.0,
                            member,
                            tag: e.name.clone(),
                        };
                        remote_holders.insert(addr, at);
                    }
                    Some(Dest {
                        node: l.node,
                        addr: direct.map_or(delivery, |(a, _)| a),
                        mode: l.mode,
                        every: l.every,
                        relay: l.relay,
                        priority: published.map_or(l.priority, |p| {
                            tagwire_session::plan::highest(l.priority, p)
                        }),
                    })
                })
                .collect();
            if !nodes.is_empty() {
                nodes.sort();
                wanted.insert(e.name.clone(), (nodes, pacing));
            }
        }
        self.join_groups(me, groups);
        shared.guard.set_holders(remote_holders);
        if self.direct.switch(st, &shared.guard, holders) {
            self.wake_inbound();
        }
        self.inbound.raise(&shared.roles, inbound);
        let remote = forwarders.values().copied().reduce(Sched::max);
        self.acks.raise(&shared.roles, remote);
        self.outbound.reroute(shared, wanted, &forwarders, |name| {
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
                let row =
                    StatsRow::new(StatsKind::Outbound, s.tag.as_str(), s.addr.ip().to_string())
                        .with("sent", w.sent)
                        .with("resent", w.retransmitted)
                        .with("acked", w.acked)
                        .with("heartbeats", w.heartbeats)
                        .with("unacked", s.unacked)
                        .with("unacked_bytes", s.unacked_bytes)
                        .with("cwnd", s.cwnd)
                        .with("congestion", w.congestion_events)
                        // `Priority::to_u8`: `tagwire qos` names it.
                        .with("class", u64::from(s.priority.to_u8()));
                let row = s.by_class.iter().fold(row, |row, (p, n)| {
                    row.with(&format!("class_{}_datagrams", p.to_u8()), *n)
                });
                match s.pacing {
                    Some(p) => row
                        .with("pace_interval_ns", p.interval.as_nanos() as u64)
                        .with("pace_window", p.window.unwrap_or(0) as u64)
                        .with("min_rtt_us", p.min_rtt.map_or(0, |r| r.as_micros() as u64))
                        .with("rate_bytes_per_s", p.rate.map_or(0, |r| r as u64))
                        .with("random_losses", p.random_losses)
                        .with("congestion_losses", p.congestion_losses),
                    None => row,
                }
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
        .rights(Right::Receiver)
        .iter()
        .map(|r| (r.key.node, r.qos))
        .collect::<Vec<_>>();
    let up = |n| n == me || st.peers.delivery_addr(n).is_some();
    // Without a topology `Auto` stays unresolved, and the plan filters it
    // at the publisher.
    if let Some(p) = placer {
        let publishers: Vec<NodeAddr> =
            e.rights(Right::Sender).iter().map(|r| r.key.node).collect();
        p.resolve(&e.name, &publishers, &mut receivers, up);
    }
    Plan::new(receivers, up)
}

/// Where `node`'s copy of `e` goes when it goes straight to its sole
/// receiving process's socket (see `direct`), and that receiver's grant.
fn direct_addr(
    e: &tagwire_proto::Entry,
    plan: &Plan,
    node: NodeAddr,
    mode: Mode,
) -> Option<(SocketAddr, u64)> {
    if !matches!(mode, Mode::Reliable | Mode::BestEffort) {
        return None;
    }
    let receivers = e
        .rights(Right::Receiver)
        .iter()
        .map(|r| (r.key.node, r.qos, r.key.id));
    let senders = e.rights(Right::Sender).iter().map(|r| r.key.node);
    let (member, port) =
        tagwire_session::plan::direct_port(node, receivers, senders, plan.feeds_others(node))?;
    Some((SocketAddr::new(node.0, port), member))
}

/// Our own mapping of a tag's ring (the forwarder reads it without the lock).
pub(crate) fn private_ring(r: &Ring) -> std::io::Result<Ring> {
    let fd: OwnedFd = r.segment().as_fd().try_clone_to_owned()?;
    let seg = Segment::open(fd).map_err(std::io::Error::other)?;
    let ctl =
        Segment::open(r.control().as_fd().try_clone_to_owned()?).map_err(std::io::Error::other)?;
    Ring::open(seg, ctl).map_err(std::io::Error::other)
}

impl Delivery {
    /// Held-back messages went into a ring: the delivery port's inbound
    /// thread wakes (an empty datagram to its socket) and announces the
    /// room; TCP connections that stopped reading look again.
    fn room_made(&self) {
        self.wake_inbound();
        *lock(&self.room.0) += 1;
        self.room.1.notify_all();
    }

    /// Wakes the delivery port's inbound thread (an empty datagram to its
    /// socket): it looks at held-back queues and direct-delivery commands.
    pub(crate) fn wake_inbound(&self) {
        if let Ok(me) = self.sock.local_addr() {
            let me = match me.ip() {
                ip if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), me.port()),
                _ => me,
            };
            let _ = self.sock.send_to(&[], me);
        }
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
            Body::Data(d) => (d.tag(), d.flags()),
            Body::Batch(b) => (b.tag(), b.flags()),
            Body::Heartbeat(_) | Body::AckNack(_) => return false,
        };
        flags & FLAG_RELIABLE == 0 && lock(&self.mtags).contains(tag)
    }
}

/// Longest an inbound thread sleeps in `recv` without a timer (to notice
/// the daemon stopping).
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(250);

/// Shortest (a due timer).
pub(crate) const MIN_SLEEP: Duration = Duration::from_micros(50);
/// The multicast carrier's socket on `port`, or none (a warning): without
/// it the carrier is off and everything else still works.
fn multicast_socket(addr: SocketAddr, port: u16) -> Option<(UdpSocket, u16)> {
    match addr.ip() {
        std::net::IpAddr::V4(ip) => tagwire_net::multicast_data_socket(port, ip)
            .and_then(|m| {
                m.set_read_timeout(Some(MAX_SLEEP))?;
                Ok((m, port))
            })
            .map_err(|e| {
                tracing::warn!(port, error = %e, "multicast carrier unavailable");
            })
            .ok(),
        std::net::IpAddr::V6(_) => None,
    }
}

/// The replies socket's watch. Acknowledgements steered to a socket nobody
/// could read would be lost: without its watch, the delivery port stops
/// steering them and they reach the delivery socket (`sock`) again.
fn watch_replies(
    replies: Option<UdpSocket>,
    sock: &UdpSocket,
    addr: SocketAddr,
) -> std::io::Result<Option<crate::replies::Replies>> {
    match replies.map(crate::replies::Replies::new) {
        Some(Ok(r)) => Ok(Some(r)),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "acknowledgements go to the inbound thread");
            tagwire_net::unsteer(sock)
                .map_err(|e| crate::naming(e, "the delivery port (UDP)", addr))?;
            Ok(None)
        }
        None => Ok(None),
    }
}
