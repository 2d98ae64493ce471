//! The delivery manager's inbound threads: the delivery port's and the
//! multicast carrier's, each around its own inbound session, and one per
//! TCP data connection. What they complete goes to `held::deliver`.

use super::held::{deliver, held_full, SinkCache};
use super::*;

/// Receives on `sock` (the delivery port, or with `multicast` the multicast
/// carrier's, where only data of tags joined for is taken): the glue around
/// this thread's own inbound [`Session`], which owns the streams from other
/// nodes (order, acknowledgements with credit, gaps, reassembly). It sleeps
/// in `recv` until the session's next timer (or, while messages are held
/// back for lossless subscribers, until it looks for room again).
pub(super) fn inbound_loop(shared: &Arc<Shared>, d: &Delivery, sock: &UdpSocket, multicast: bool) {
    let mut buf = vec![0u8; 65536];
    let mut session = Session::new(SessionConfig {
        me: shared.node(),
        seed: crate::forward::random_id(),
        start_at_first: true,
        ..SessionConfig::default()
    });
    let mut credits = Credits::default();
    let mut sinks = SinkCache::default();
    let mut timeout = Duration::ZERO;
    while !shared.is_stopping() {
        if !credits.limited.is_empty() {
            // The tags' drainers move what is held (and wake us with an
            // empty datagram): announce the room it left.
            let rooms: Vec<(TagId, Option<u32>)> = credits
                .limited
                .iter()
                .filter_map(|id| Some((*id, sinks.room(shared, credits.names.get(id)?))))
                .collect();
            credits.update(&mut session, Instant::now(), &rooms);
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
        deliver_all(shared, &mut session, &mut credits, &mut sinks, now);
        while let Some(t) = session.poll_transmit(now) {
            let _ = d.sock.send_to(&t.bytes, t.dest);
        }
        while let Some(e) = session.poll_event() {
            account(shared, e);
        }
    }
}

/// Writes what the session completed into the local rings, a run of one
/// tag at a time (one wake-up per run, no daemon-wide lock), and gives the session
/// each tag's room for its lossless subscribers.
fn deliver_all(
    shared: &Shared,
    session: &mut Session,
    credits: &mut Credits,
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
            if let Some((id, room)) = room {
                credits.names.entry(id).or_insert(tag);
                credits.update(session, now, &[(id, room)]);
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
    /// Tag names by id (the sinks are looked up by name).
    names: HashMap<TagId, TagName>,
    /// Tags whose credit is limited in the session.
    limited: HashSet<TagId>,
}

impl Credits {
    /// Takes the rooms of the tags in `rooms` (`None`: no limit).
    fn update(&mut self, session: &mut Session, now: Instant, rooms: &[(TagId, Option<u32>)]) {
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

pub(super) fn tcp_accept_loop(shared: &Arc<Shared>, listener: &std::net::TcpListener) {
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
    let mut sinks = SinkCache::default();
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
                while tag.is_some_and(|t| held_full(shared, &mut sinks, t)) && !shared.is_stopping()
                {
                    drain_held(shared);
                    if let Some(d) = shared.delivery.get() {
                        d.wait_for_room(MAX_SLEEP);
                    }
                }
                let now = Instant::now();
                session.handle_datagram(now, from, &buf[..n]);
                deliver_all(shared, &mut session, &mut credits, &mut sinks, now);
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
