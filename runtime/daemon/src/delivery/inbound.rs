//! The delivery manager's inbound threads: the delivery port's and the
//! multicast carrier's, each around its own inbound session, and one per
//! TCP data connection. What they complete goes to `held::deliver`.

use super::held::{deliver, held_full, SinkCache};
use super::*;
use crate::guard::Opened;
use tagwire_net::gso;

/// Receives on `sock` (the delivery port, or with `multicast` the multicast
/// carrier's, where only data of tags joined for is taken): the glue around
/// this thread's own inbound [`ReceiveSession`], which owns the streams from other
/// nodes (order, acknowledgements with credit, gaps, reassembly). It sleeps
/// in `recv` until the session's next timer (or, while messages are held
/// back for lossless subscribers, until it looks for room again).
pub(super) fn inbound_loop(shared: &Arc<Shared>, d: &Delivery, sock: &UdpSocket, multicast: bool) {
    let mut buf = vec![0u8; gso::RECV_BUFFER];
    // Best effort: without it each datagram is a system call.
    let _ = gso::enable_gro(sock);
    // Datagram streams are wanted from their first number: a loss before
    // the first datagram that arrives is counted too.
    let mut session = inbound_session(shared, false);
    let mut credits = Credits::default();
    let mut sinks = SinkCache::default();
    let mut timeout = Duration::ZERO;
    let mut sealed = Vec::new();
    // Direct delivery: streams to take back or to give away.
    let mut waiting = direct::Waiting::default();
    while !shared.is_stopping() {
        announce_room(shared, &mut credits, &mut sinks, &mut session);
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
        // An empty datagram only wakes us (`Delivery::room_made`): the next
        // pass looks at the held-back queues. Anything else is opened
        // (authenticated, new, from an up peer: `guard`) before it is parsed.
        // Several datagrams of one sender may come coalesced (UDP GRO); a
        // cut one (larger than any we take) is dropped.
        let got = match gso::recv_coalesced(sock, &mut buf) {
            Ok(m) if m.len > 0 && !m.truncated => Some(m),
            _ => None,
        };
        if !multicast {
            // Before the datagram: a switch queued before it came.
            d.direct
                .apply(&mut session, Instant::now(), &mut waiting, |tag| {
                    held::held_empty(shared, &mut sinks, tag)
                });
        }
        if let Some(m) = got {
            let now = Instant::now();
            for one in gso::segments_mut(&mut buf[..m.len], m.segment) {
                match shared.guard.open(m.from, one) {
                    Ok((raw, opened)) => {
                        let got = Received {
                            from: m.from,
                            raw,
                            opened,
                        };
                        handle(shared, d, &mut session, multicast, now, got);
                    }
                    Err(why) => crate::stats::refused(shared, m.from.ip(), why),
                }
            }
        }
        let now = Instant::now();
        if session.poll_timeout().is_some_and(|t| t <= now) {
            session.handle_timeout(now);
        }
        deliver_all(shared, &mut session, Some(&mut credits), &mut sinks, now);
        while let Some(t) = session.poll_transmit(now) {
            let _ = d
                .sock
                .send_to(shared.guard.seal_to(&t.bytes, &mut sealed, t.dest), t.dest);
            session.recycle_transmit(t.bytes);
        }
        while let Some(e) = session.poll_event() {
            account(shared, e);
        }
    }
}

/// The tags' drainers move what is held (and wake the inbound thread with
/// an empty datagram): the session announces the room that left to the
/// senders of the tags whose room is limited.
fn announce_room(
    shared: &Shared,
    credits: &mut Credits,
    sinks: &mut SinkCache,
    session: &mut ReceiveSession,
) {
    if credits.limited.is_empty() {
        return;
    }
    let rooms: Vec<(TagId, Option<u32>)> = credits
        .limited
        .iter()
        .filter_map(|id| Some((*id, sinks.room(shared, credits.names.get(id)?))))
        .collect();
    credits.update(session, Instant::now(), &rooms);
}

/// A datagram as the guard opened it: its sender, its bytes (opened, if it
/// was sealed) and what opened it.
struct Received<'a> {
    from: SocketAddr,
    raw: &'a [u8],
    opened: Opened,
}

/// One datagram, opened: an acknowledgement of our own stream goes to its
/// forwarder, data to the inbound session.
fn handle(
    shared: &Shared,
    d: &Delivery,
    session: &mut ReceiveSession,
    multicast: bool,
    now: Instant,
    got: Received<'_>,
) {
    let Received { from, raw, opened } = got;
    match Datagram::decode(raw) {
        // Sealed by a peer's client with a tag's key: only that tag's
        // data. Sealed by another node's direct receiver: only
        // acknowledgements, of that tag's streams.
        Ok(dg) if !allowed(opened, &dg.body) => {
            crate::stats::refused(shared, from.ip(), crate::guard::Refusal::Unauthenticated);
        }
        Ok(dg) if multicast && !d.joined(&dg.body) => {}
        Ok(Datagram {
            stream,
            body: Body::AckNack(a),
        }) => {
            // Our own stream's acknowledgement: its forwarder's session.
            let only = match opened {
                Opened::Holder(tag) => Some(tag),
                _ => None,
            };
            d.outbound
                .handle_ack(shared, now, stream, a.to_acknack(), only);
        }
        Ok(dg) => {
            // (An acknowledgement was taken above: none comes back.)
            let _ = session.handle_checked(now, from, dg);
        }
        Err(e) => {
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            shared.tallies.peers.add(&from.ip(), |c| c.malformed += 1);
            tracing::debug!(%from, error = %e, "malformed datagram dropped");
        }
    }
}

/// Whether what opened a datagram allows its `body`.
fn allowed(opened: Opened, body: &Body<'_>) -> bool {
    match opened {
        Opened::Node => true,
        Opened::Tag(id) => names_tag(body, id),
        Opened::Holder(_) => matches!(body, Body::AckNack(_)),
    }
}

/// Whether `body` is data of the tag whose id is `id`.
fn names_tag(body: &Body<'_>, id: u64) -> bool {
    let tag = match body {
        Body::Data(d) => d.tag(),
        Body::Batch(b) => b.tag(),
        Body::Heartbeat(_) | Body::AckNack(_) => return false,
    };
    tagwire_auth::tag_id(tag) == id
}

/// An inbound thread's own session (see `SessionConfig::start_at_first`).
fn inbound_session(shared: &Shared, start_at_first: bool) -> ReceiveSession {
    ReceiveSession::new(SessionConfig {
        me: shared.node(),
        seed: crate::forward::random_id(),
        start_at_first,
        ..SessionConfig::default()
    })
}

/// Writes what the session completed into the local rings, a run of one
/// tag at a time (one wake-up per run, no daemon-wide lock), and gives the session
/// each tag's room for its lossless subscribers (with `credits`: a TCP data
/// connection's session has none, see `tcp_inbound`). The delivered
/// buffers go back to the session for the next messages.
fn deliver_all(
    shared: &Shared,
    session: &mut ReceiveSession,
    mut credits: Option<&mut Credits>,
    sinks: &mut SinkCache,
    now: Instant,
) {
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
            let room = deliver(
                shared,
                sinks,
                &tag,
                run.iter().map(|m| (m.header, &m.payload[..])),
            );
            if let (Some((id, room)), Some(credits)) = (room, credits.as_deref_mut()) {
                credits.names.entry(id).or_insert(tag);
                credits.update(session, now, &[(id, room)]);
            }
            for m in run.drain(..) {
                session.recycle(m.payload);
            }
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
    /// Tag names by id (the sinks are looked up by name).
    names: HashMap<TagId, TagName>,
    /// Tags whose credit is limited in the session.
    limited: HashSet<TagId>,
}

impl Credits {
    /// Takes the rooms of the tags in `rooms` (`None`: no limit).
    fn update(
        &mut self,
        session: &mut ReceiveSession,
        now: Instant,
        rooms: &[(TagId, Option<u32>)],
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
        Event::PeerBound { from, what } => {
            shared.tallies.peers.add(&from.ip(), |c| c.refused += 1);
            tracing::debug!(%from, what, "datagram beyond a per-peer bound dropped");
        }
        Event::Malformed { from } => {
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            shared.tallies.peers.add(&from.ip(), |c| c.malformed += 1);
        }
        Event::DirectReceived { .. } => {
            shared.stats.direct_received.fetch_add(1, Ordering::Relaxed);
        }
        // Data of a tag a direct receiver holds, from a sender that had
        // not heard yet: it sends again there.
        Event::Away { .. } => {}
    }
}

/// TCP data connections one peer may hold open here (a thread each).
const TCP_PER_PEER: usize = 8;

pub(super) fn tcp_accept_loop(shared: &Arc<Shared>, listener: &std::net::TcpListener) {
    let open: Arc<Mutex<HashMap<std::net::IpAddr, usize>>> = Arc::default();
    while !shared.is_stopping() {
        match listener.accept() {
            Ok((conn, from)) => {
                // Only up peers, and a bounded number each.
                let ip = from.ip();
                let admitted = shared.guard.is_up(ip) && {
                    let mut o = lock(&open);
                    let n = o.entry(ip).or_insert(0);
                    (*n < TCP_PER_PEER).then(|| *n += 1).is_some()
                };
                if !admitted {
                    crate::stats::refused(shared, ip, crate::guard::Refusal::Unauthenticated);
                    tracing::debug!(%from, "TCP data connection refused (not a peer, or too many)");
                    continue;
                }
                let (s, o) = (shared.clone(), open.clone());
                let spawned = std::thread::Builder::new()
                    .name("tagwired-tcp-in".into())
                    .spawn(move || {
                        let _in = s.delivery.get().map(|d| d.inbound.join(&s.roles));
                        tcp_inbound(&s, conn, from);
                        if let Some(n) = lock(&o).get_mut(&ip) {
                            *n -= 1;
                        }
                    });
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
    let _ = conn.set_nonblocking(false);
    // With a key, the connection authenticates first (as a control link
    // does); its frames are then Noise transport messages.
    let running = || !shared.is_stopping();
    let secured = match crate::secure::handshake_while(&conn, &shared.guard, false, &running) {
        Ok(s) => s,
        Err(e) => {
            crate::stats::refused(shared, from.ip(), crate::guard::Refusal::Unauthenticated);
            tracing::debug!(%from, error = %e, "TCP data connection not authenticated");
            return;
        }
    };
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let conn = crate::secure::SecureRead::new(conn, secured.map(|s| s.receiver));
    let mut conn = std::io::BufReader::with_capacity(256 * 1024, conn);
    // The connection's own inbound session: numbering, reassembly and
    // delivery as for datagrams (TCP makes it ordered and whole). A new
    // connection carries on its sender's numbering: it starts at the first
    // frame.
    let mut session = inbound_session(shared, true);
    let mut sinks = SinkCache::default();
    let mut buf = vec![0u8; MAX_TCP_FRAME];
    loop {
        let mut len = [0u8; 4];
        if read_exact(shared, from, &mut conn, &mut len).is_none() {
            break;
        }
        let n = u32::from_le_bytes(len) as usize;
        if n > MAX_TCP_FRAME {
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%from, len = n, "oversized TCP data frame; closing");
            break;
        }
        if read_exact(shared, from, &mut conn, &mut buf[..n]).is_none() {
            break;
        }
        if !tcp_frame(shared, &mut session, &mut sinks, from, &buf[..n]) {
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%from, "malformed TCP data frame; closing");
            break;
        }
    }
}

/// A TCP data connection's reader (authenticated and opened under a key).
type TcpConn = std::io::BufReader<crate::secure::SecureRead<std::net::TcpStream>>;

/// Reads exactly `out.len()` bytes of `conn`; `None` on end of stream, an
/// error, the daemon stopping or the peer going down (a TCP backing off
/// through a lossy link may stay silent for long: no idle limit).
fn read_exact(shared: &Shared, from: SocketAddr, conn: &mut TcpConn, out: &mut [u8]) -> Option<()> {
    use std::io::Read;
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
                if shared.is_stopping() || !shared.guard.is_up(from.ip()) {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
    Some(())
}

/// One frame of a TCP data connection into its session and on to the
/// rings; false if it is no data or batch datagram (the connection ends).
fn tcp_frame(
    shared: &Arc<Shared>,
    session: &mut ReceiveSession,
    sinks: &mut SinkCache,
    from: SocketAddr,
    frame: &[u8],
) -> bool {
    let tag = match Datagram::decode(frame).map(|dg| dg.data()) {
        Ok(Some((_, _, name))) => match TagName::new(name) {
            Ok(t) => t,
            Err(_) => return false,
        },
        _ => return false,
    };
    shared.stats.tcp_frames.fetch_add(1, Ordering::Relaxed);
    // A lossless subscriber a ring behind: stop reading, and TCP holds the
    // sender back.
    while held_full(shared, sinks, &tag) && !shared.is_stopping() {
        drain_held(shared);
        if let Some(d) = shared.delivery.get() {
            d.wait_for_room(MAX_SLEEP);
        }
    }
    let now = Instant::now();
    session.handle_datagram(now, from, frame);
    // No credit here: a session that heard "no room" would drop the next
    // frames as data to be sent again, which TCP never does (a lossless
    // subscriber lost the rest of its stream without a word, found with
    // 8 KiB through 3 % drops); waiting to read is this carrier's
    // back-pressure.
    deliver_all(shared, session, None, sinks, now);
    // (Best-effort numbering: nothing to acknowledge.)
    while let Some(t) = session.poll_transmit(now) {
        session.recycle_transmit(t.bytes);
    }
    while let Some(e) = session.poll_event() {
        account(shared, e);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwire_wire::datagram::{AckNack, BatchRepr};

    #[test]
    fn a_direct_receivers_key_carries_acknowledgements_only_and_a_tag_key_its_tags_data_only() {
        let mut ack = Vec::new();
        AckNack::default().encode(1, &mut ack);
        let header = FrameHeader {
            flags: 0,
            sender: tagwire_wire::SenderInfo {
                pid: tagwire_wire::Pid(1),
                node: NodeAddr::LOCALHOST,
            },
            stream: 0,
            seq: tagwire_wire::SeqNum(1),
            timestamp_ns: 0,
        };
        let mut entries = Vec::new();
        tagwire_wire::datagram::push_batch_entry(&mut entries, &header, b"x");
        let mut batch = Vec::new();
        BatchRepr {
            seq: 1,
            flags: FLAG_RELIABLE,
            count: 1,
            tag: &TagName::new("/d").unwrap(),
            entries: &entries,
        }
        .encode(1, &mut batch);
        let (ack, batch) = (
            Datagram::decode(&ack).unwrap().body,
            Datagram::decode(&batch).unwrap().body,
        );
        let (d, e) = (tagwire_auth::tag_id("/d"), tagwire_auth::tag_id("/e"));
        assert!(allowed(Opened::Node, &ack) && allowed(Opened::Node, &batch));
        assert!(allowed(Opened::Holder(d), &ack));
        assert!(!allowed(Opened::Holder(d), &batch), "a holder's data");
        assert!(allowed(Opened::Tag(d), &batch));
        assert!(!allowed(Opened::Tag(e), &batch), "another tag's data");
        assert!(
            !allowed(Opened::Tag(d), &ack),
            "a publisher's acknowledgement"
        );
    }
}
