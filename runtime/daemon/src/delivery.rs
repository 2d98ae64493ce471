//! The delivery manager: data between nodes (DESIGN.md §2).
//!
//! * **Outbound.** For every global tag with receivers on other nodes, a
//!   forwarder thread reads the tag's ring like a subscriber and sends each
//!   message published on *this* node once to each node with receivers, as
//!   fragments of at most [`DATAGRAM`] bytes, through one reliable stream per
//!   (tag, node) (`tagwire_reliable::Writer`: window, heartbeats, resends on
//!   NACK). Messages that arrived from other nodes are not forwarded: their
//!   publisher's node already sent one copy to every node.
//!   A node whose receivers all asked for best-effort delivery gets a
//!   best-effort stream instead: sequence numbers only, no window, no
//!   resends, no gate (it never holds the publisher back); its daemon keeps
//!   only datagrams newer than the last and counts the gaps
//!   (`Daemon::best_effort_losses`).
//! * **Inbound.** One thread receives on the delivery port: data fragments go
//!   through the stream's `Reader` (in order, exactly once, ACK every K, NACK
//!   on gaps) and `Reassembler`, and each whole message is written into the
//!   tag's local ring with the publisher's original header (pid, node,
//!   sequence number, timestamp), so local subscribers cannot tell it from a
//!   local message. Messages larger than a slot become blobs, as on one node.
//!   ACK/NACKs for our own streams are handed to their writers here too.
//!
//! Malformed datagrams are counted and dropped. **Back-pressure:** the
//! forwarder holds a gate on the ring (`tagwire_shm::Gate`) at its read
//! position and stops reading while a window is full, so the ring fills and
//! the publisher's `send` waits (for its configured time, then fails with
//! `Error::WindowFull`, having sent nothing) instead of overwriting messages
//! not yet handed to every window. Records written without a gate (messages
//! that arrived from other nodes) can still lap it; such losses are counted
//! (`Daemon::forward_losses`).

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::{MemfdFlags, SealFlags};

use tagwire_proto::{Holder, Role};
use tagwire_reliable::{
    fragment_count, fragments, Arrival, BestEffort, Reader, ReaderConfig, Reassembler,
    ReassemblerConfig, Transmit, Writer, WriterConfig,
};
use tagwire_shm::{Gate, ReadOutcome, Ring, Segment};
use tagwire_wire::datagram::{
    max_fragment_payload, AckNack, Body, DataRef, Datagram, Heartbeat, FLAG_RELIABLE,
};
use tagwire_wire::frame::{BlobRef, FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::{NodeAddr, Reliability, TagName};

use crate::{lock, Shared, State};

/// Largest datagram sent (the kernel fragments it at the IP layer; fewer,
/// larger datagrams cost far fewer system calls than MTU-sized ones).
pub const DATAGRAM: usize = 60 * 1024;

/// Datagrams a stream may have unacknowledged.
const WINDOW: usize = 1024;

/// How long a forwarder waits for window space before dropping a message
/// larger than the whole window.
const WINDOW_WAIT: Duration = Duration::from_secs(2);

/// The delivery manager's shared state.
#[derive(Debug)]
pub(crate) struct Delivery {
    sock: UdpSocket,
    /// Our outbound streams by stream id (ACK/NACK dispatch).
    out: Mutex<HashMap<u64, Arc<Mutex<OutStream>>>>,
    /// Running forwarders by tag name.
    routes: Mutex<HashMap<TagName, Arc<Route>>>,
    /// Datagrams sent again after a NACK or a resend timeout.
    pub(crate) retransmitted: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct OutStream {
    id: u64,
    dest: SocketAddr,
    writer: Writer,
}

/// A node with receivers of a tag: its delivery address, and whether any of
/// them asked for reliable delivery (then the node gets a reliable stream,
/// else a best-effort one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Dest {
    node: NodeAddr,
    addr: SocketAddr,
    reliable: bool,
}

type Dests = Arc<Vec<Dest>>;

/// A forwarder's instructions: where this tag's messages go.
#[derive(Debug)]
struct Route {
    /// Nodes with receivers and their delivery addresses, resolved under the
    /// state lock by `reroute` so the forwarder never takes that lock.
    dests: Mutex<Dests>,
    stop: AtomicBool,
}

impl Delivery {
    /// Binds the delivery port and starts the inbound thread.
    pub(crate) fn start(shared: &Arc<Shared>, addr: SocketAddr) -> std::io::Result<Arc<Self>> {
        let sock = tagwire_net::udp_socket(addr)?;
        sock.set_read_timeout(Some(Duration::from_millis(10)))?;
        let d = Arc::new(Self {
            sock,
            out: Mutex::new(HashMap::new()),
            routes: Mutex::new(HashMap::new()),
            retransmitted: std::sync::atomic::AtomicU64::new(0),
        });
        let (s, d2) = (shared.clone(), d.clone());
        std::thread::Builder::new()
            .name("tagwired-delivery".into())
            .spawn(move || inbound_loop(&s, &d2))?;
        Ok(d)
    }

    /// Starts, updates or stops forwarders after a table change (called under
    /// the state lock).
    pub(crate) fn reroute(self: &Arc<Self>, shared: &Arc<Shared>, st: &State) {
        let me = shared.node();
        let mut wanted: HashMap<TagName, Dests> = HashMap::new();
        for e in st.table.entries() {
            let mut reliable: HashMap<NodeAddr, bool> = HashMap::new();
            for r in e.rights(Role::Receiver) {
                if r.holder == Holder::Remote && r.key.node != me {
                    *reliable.entry(r.key.node).or_default() |=
                        r.reliability == Reliability::Reliable;
                }
            }
            let mut nodes: Vec<Dest> = reliable
                .into_iter()
                .filter_map(|(node, reliable)| {
                    let addr = st.peers.delivery_addr(node)?;
                    Some(Dest {
                        node,
                        addr,
                        reliable,
                    })
                })
                .collect();
            if !nodes.is_empty() {
                nodes.sort();
                wanted.insert(e.name.clone(), Arc::new(nodes));
            }
        }
        let mut routes = lock(&self.routes);
        routes.retain(|name, r| {
            let keep = wanted.contains_key(name);
            if !keep {
                r.stop.store(true, Ordering::Release);
            }
            keep
        });
        for (name, nodes) in wanted {
            if let Some(r) = routes.get(&name) {
                *lock(&r.dests) = nodes;
                continue;
            }
            let Some(shared_ring) = st.table.entry(&name).and_then(|e| st.rings.get(&e.id)) else {
                continue;
            };
            // Forward from the grant on: a publisher that saw this receiver
            // counted publishes at or after this index.
            let start = shared_ring.head_index();
            let Ok(ring) = private_ring(shared_ring) else {
                continue;
            };
            let route = Arc::new(Route {
                dests: Mutex::new(nodes),
                stop: AtomicBool::new(false),
            });
            let (s, d, r, n) = (shared.clone(), self.clone(), route.clone(), name.clone());
            let spawned = std::thread::Builder::new()
                .name("tagwired-forward".into())
                .spawn(move || forward_loop(&s, &d, &r, &n, &ring, start));
            match spawned {
                Ok(_) => {
                    routes.insert(name, route);
                }
                Err(e) => tracing::warn!(error = %e, "cannot start a forwarder"),
            }
        }
    }

    fn stream_to(&self, dest: SocketAddr) -> Arc<Mutex<OutStream>> {
        let id = random_id();
        let s = Arc::new(Mutex::new(OutStream {
            id,
            dest,
            writer: Writer::new(WriterConfig {
                window: WINDOW,
                ..WriterConfig::default()
            }),
        }));
        lock(&self.out).insert(id, s.clone());
        s
    }

    fn drop_stream(&self, id: u64) {
        lock(&self.out).remove(&id);
    }
}

/// Our own mapping of a tag's ring (the forwarder reads it without the lock).
fn private_ring(r: &Ring) -> std::io::Result<Ring> {
    let fd: OwnedFd = r.segment().as_fd().try_clone_to_owned()?;
    let seg = Segment::open(fd).map_err(std::io::Error::other)?;
    Ring::open(seg).map_err(std::io::Error::other)
}

fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::now_unix_ns());
    h.finish() | 1
}

fn forward_loop(
    shared: &Arc<Shared>,
    d: &Arc<Delivery>,
    route: &Route,
    tag: &TagName,
    ring: &Ring,
    start: u64,
) {
    let me = shared.node();
    let mut cur = ring.cursor_from(start, ring.shape().slots);
    // While some node gets a reliable stream, a gate on the ring at our read
    // position holds the publisher back (for its configured time) instead of
    // letting it overwrite what we have not handed to every window yet.
    let mut gate: Option<Gate> = None;
    let mut rec = Vec::new();
    let mut blob = Vec::new();
    let mut streams: HashMap<NodeAddr, Arc<Mutex<OutStream>>> = HashMap::new();
    let mut best: HashMap<NodeAddr, BestEffortOut> = HashMap::new();
    // The one message read from the ring but not yet in every window (a window
    // is full): nothing more is read until it is, so the ring fills and the
    // gate holds the publisher back.
    let mut pending: Option<Pending> = None;
    tracing::debug!(tag = %tag, "forwarder started");
    while !route.stop.load(Ordering::Acquire) && !shared.is_stopping() {
        let dests = lock(&route.dests).clone();
        streams.retain(|n, s| {
            let keep = dests
                .iter()
                .any(|t| t.reliable && t.node == *n && lock(s).dest == t.addr);
            if !keep {
                d.drop_stream(lock(s).id);
            }
            keep
        });
        best.retain(|n, s| {
            dests
                .iter()
                .any(|t| !t.reliable && t.node == *n && s.dest == t.addr)
        });
        if !dests.iter().any(|t| t.reliable) {
            gate = None;
        } else if gate.is_none() {
            gate = match ring.attach_gate(cur.position()) {
                Ok(g) => Some(g),
                Err(e) => {
                    tracing::warn!(tag = %tag, error = %e, "forwarder runs without back-pressure");
                    None
                }
            };
        }
        if let Some(p) = pending.as_mut() {
            let sent = send_to_all(
                shared,
                d,
                &dests,
                &mut streams,
                tag,
                &p.header,
                &p.message,
                &mut p.done,
            );
            if !sent {
                // Waiting for acknowledgements (the inbound thread applies them).
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            pending = None;
        }
        let mut progressed = false;
        loop {
            match ring.read(&mut cur, &mut rec) {
                ReadOutcome::Record => {}
                ReadOutcome::Empty | ReadOutcome::Pending => break,
                ReadOutcome::Lost(n) => {
                    shared.stats.forward_lost.fetch_add(n, Ordering::Relaxed);
                    continue;
                }
            }
            progressed = true;
            // The record is copied out: its slot may be reused.
            if let Some(g) = &gate {
                g.advance(cur.position());
            }
            let Ok((header, body)) = FrameHeader::parse(&rec) else {
                continue;
            };
            if header.sender.node != me {
                continue; // came from another node, which sent it everywhere itself
            }
            let message: &[u8] = if header.flags & FLAG_BLOB != 0 {
                match read_blob(shared, tag, body, &mut blob) {
                    Some(()) => &blob,
                    None => continue,
                }
            } else {
                body
            };
            for t in dests.iter().filter(|t| !t.reliable) {
                let s = best.entry(t.node).or_insert_with(|| BestEffortOut {
                    id: random_id(),
                    dest: t.addr,
                    next_seq: 1,
                });
                send_best_effort(d, s, tag, &header, message);
            }
            let mut done = Vec::new();
            if !send_to_all(
                shared,
                d,
                &dests,
                &mut streams,
                tag,
                &header,
                message,
                &mut done,
            ) {
                pending = Some(Pending {
                    header,
                    message: message.to_vec(),
                    done,
                });
                break;
            }
        }
        if !progressed {
            ring.wait(&cur, Some(Duration::from_millis(50)), Duration::ZERO);
        }
    }
    drop(gate);
    for s in streams.values() {
        d.drop_stream(lock(s).id);
    }
    tracing::debug!(tag = %tag, "forwarder stopped");
}

/// A best-effort stream to one node: sequence numbers only (the receiver
/// keeps the newest and counts the gaps), no window, no resends.
struct BestEffortOut {
    id: u64,
    dest: SocketAddr,
    next_seq: u64,
}

/// Sends one message on a best-effort stream, fragmented like a reliable one.
fn send_best_effort(
    d: &Delivery,
    s: &mut BestEffortOut,
    tag: &TagName,
    header: &FrameHeader,
    message: &[u8],
) {
    let max = max_fragment_payload(tag, DATAGRAM);
    let Ok(count) = u16::try_from(fragment_count(message.len(), max)) else {
        return;
    };
    let mut h = *header;
    h.flags &= !FLAG_BLOB;
    let mut out = Vec::with_capacity(DATAGRAM.min(message.len() + 512));
    for (i, range) in fragments(message.len(), max).enumerate() {
        out.clear();
        DataRef {
            seq: s.next_seq,
            flags: 0,
            frag: i as u16,
            frags: count,
            msg_len: message.len() as u32,
            header: h,
            tag: std::borrow::Cow::Borrowed(tag),
            payload: &message[range],
        }
        .encode(s.id, &mut out);
        s.next_seq += 1;
        let _ = d.sock.send_to(&out, s.dest);
    }
}

/// Sends a message to every reliable destination not yet in `done`; true
/// when all have it.
#[allow(clippy::too_many_arguments)]
fn send_to_all(
    shared: &Shared,
    d: &Delivery,
    dests: &[Dest],
    streams: &mut HashMap<NodeAddr, Arc<Mutex<OutStream>>>,
    tag: &TagName,
    header: &FrameHeader,
    message: &[u8],
    done: &mut Vec<NodeAddr>,
) -> bool {
    let mut all = true;
    for t in dests.iter().filter(|t| t.reliable) {
        if done.contains(&t.node) {
            continue;
        }
        let s = streams.entry(t.node).or_insert_with(|| d.stream_to(t.addr));
        if send_message(shared, d, s, tag, header, message) {
            done.push(t.node);
        } else {
            all = false;
        }
    }
    all
}

/// A message waiting for window space, with the nodes it already went to.
struct Pending {
    header: FrameHeader,
    message: Vec<u8>,
    done: Vec<NodeAddr>,
}

fn read_blob(shared: &Shared, tag: &TagName, body: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let r = BlobRef::parse(body).ok()?;
    let fd = {
        let st = shared.lock();
        let e = st.table.entry(tag)?;
        let (fd, _) = st.blobs.get(&e.id)?.get(r.blob_id)?;
        fd.try_clone().ok()?
    };
    let len = usize::try_from(r.len).ok()?;
    out.clear();
    out.resize(len, 0);
    let mut done = 0;
    while done < len {
        let n = rustix::io::pread(&fd, &mut out[done..], done as u64).ok()?;
        if n == 0 {
            return None;
        }
        done += n;
    }
    Some(())
}

/// Sends one message to one stream. Returns false, having sent nothing, when
/// the window lacks room for all its fragments (the caller retries later); a
/// message with more fragments than the whole window is sent fragment by
/// fragment, waiting for room (up to `WINDOW_WAIT` per fragment).
fn send_message(
    shared: &Shared,
    d: &Delivery,
    stream: &Mutex<OutStream>,
    tag: &TagName,
    header: &FrameHeader,
    message: &[u8],
) -> bool {
    let max = max_fragment_payload(tag, DATAGRAM);
    let n = fragment_count(message.len(), max);
    let Ok(count) = u16::try_from(n) else {
        shared.stats.forward_dropped.fetch_add(1, Ordering::Relaxed);
        return true;
    };
    {
        let s = lock(stream);
        let free = s.writer.window() - s.writer.occupancy().min(s.writer.window());
        if free < n && n <= s.writer.window() {
            return false;
        }
    }
    let mut h = *header;
    h.flags &= !FLAG_BLOB;
    for (i, range) in fragments(message.len(), max).enumerate() {
        let deadline = Instant::now() + WINDOW_WAIT;
        loop {
            let mut s = lock(stream);
            let (id, dest) = (s.id, s.dest);
            let data = DataRef {
                seq: 0,
                flags: FLAG_RELIABLE,
                frag: i as u16,
                frags: count,
                msg_len: message.len() as u32,
                header: h,
                tag: std::borrow::Cow::Borrowed(tag),
                payload: &message[range.clone()],
            };
            let sent = s.writer.send(Instant::now(), |seq, out| {
                DataRef {
                    seq,
                    ..data.clone()
                }
                .encode(id, out)
            });
            match sent {
                Ok((_, bytes)) => {
                    let _ = d.sock.send_to(bytes, dest);
                    break;
                }
                Err(_) if Instant::now() < deadline => {
                    drop(s);
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(_) => {
                    shared.stats.forward_dropped.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
            }
        }
    }
    true
}

/// Per remote stream: its reader (reliable) or newest-only tracker
/// (best-effort), and reassembler.
struct InStream {
    reader: Reader,
    best: BestEffort,
    reasm: Reassembler,
    last: Instant,
}

impl InStream {
    fn new(now: Instant) -> Self {
        Self {
            // A stream is created for a receiver that already exists, so it is
            // wanted from its first datagram: when that one was lost, the
            // reader asks for it rather than starting later.
            reader: Reader::with_start(ReaderConfig::default(), 1),
            best: BestEffort::new(),
            reasm: Reassembler::new(ReassemblerConfig::default()),
            last: now,
        }
    }
}

fn inbound_loop(shared: &Arc<Shared>, d: &Delivery) {
    let mut buf = vec![0u8; 65536];
    let mut streams: HashMap<(SocketAddr, u64), InStream> = HashMap::new();
    let mut out = Vec::new();
    let mut next_service = Instant::now();
    while !shared.is_stopping() {
        if let Ok((n, from)) = d.sock.recv_from(&mut buf) {
            let now = Instant::now();
            match Datagram::decode(&buf[..n]) {
                Ok(dg) => {
                    let raw = &buf[..n];
                    handle(shared, d, &mut streams, from, raw, dg, now, &mut out);
                }
                Err(e) => {
                    shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%from, error = %e, "malformed datagram dropped");
                }
            }
        }
        let now = Instant::now();
        if now >= next_service {
            next_service = now + Duration::from_millis(10);
            service(d, &mut streams, now, &mut out);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn handle(
    shared: &Shared,
    d: &Delivery,
    streams: &mut HashMap<(SocketAddr, u64), InStream>,
    from: SocketAddr,
    raw: &[u8],
    dg: Datagram<'_>,
    now: Instant,
    out: &mut Vec<u8>,
) {
    let key = (from, dg.stream);
    match dg.body {
        Body::Data(data) => {
            let s = streams.entry(key).or_insert_with(|| InStream::new(now));
            s.last = now;
            if data.flags & FLAG_RELIABLE == 0 {
                let before = s.best.stats().lost;
                if !s.best.handle_seq(data.seq) {
                    return; // older than what we delivered: stale
                }
                let skipped = s.best.stats().lost - before;
                shared
                    .stats
                    .best_effort_lost
                    .fetch_add(skipped, Ordering::Relaxed);
                if let Some(m) = s.reasm.handle_fragment(&data) {
                    deliver(shared, &m.tag, m.header, &m.payload);
                }
                return;
            }
            if s.reader.handle_data(now, data.seq, raw) == Arrival::Deliver {
                if let Some(m) = s.reasm.handle_fragment(&data) {
                    deliver(shared, &m.tag, m.header, &m.payload);
                }
            }
            while let Some(bytes) = s.reader.poll_event() {
                if let Ok(Datagram {
                    body: Body::Data(data),
                    ..
                }) = Datagram::decode(&bytes)
                {
                    if let Some(m) = s.reasm.handle_fragment(&data) {
                        deliver(shared, &m.tag, m.header, &m.payload);
                    }
                }
            }
            ack(d, &mut s.reader, dg.stream, from, now, out);
        }
        Body::Heartbeat(Heartbeat { first, last }) => {
            // A heartbeat may be the first we hear of a stream whose first
            // datagrams were all lost: its answer asks for them.
            let s = streams.entry(key).or_insert_with(|| InStream::new(now));
            s.last = now;
            s.reader.handle_heartbeat(now, first, last);
            ack(d, &mut s.reader, dg.stream, from, now, out);
        }
        Body::AckNack(AckNack {
            ack_through,
            missing,
        }) => {
            let s = lock(&d.out).get(&dg.stream).cloned();
            if let Some(s) = s {
                let mut s = lock(&s);
                s.writer.handle_acknack(now, ack_through, &missing);
                flush_writer(d, &mut s, now, out);
            }
        }
    }
}

fn ack(d: &Delivery, r: &mut Reader, stream: u64, to: SocketAddr, now: Instant, out: &mut Vec<u8>) {
    while let Some(a) = r.poll_transmit(now) {
        out.clear();
        a.encode(stream, out);
        let _ = d.sock.send_to(out, to);
    }
}

fn flush_writer(d: &Delivery, s: &mut OutStream, now: Instant, out: &mut Vec<u8>) {
    let (id, dest) = (s.id, s.dest);
    while let Some(t) = s.writer.poll_transmit(now) {
        match t {
            Transmit::Data { bytes, .. } => {
                d.retransmitted.fetch_add(1, Ordering::Relaxed);
                let _ = d.sock.send_to(bytes, dest);
            }
            Transmit::Heartbeat { first, last } => {
                out.clear();
                Heartbeat { first, last }.encode(id, out);
                let _ = d.sock.send_to(out, dest);
            }
        }
    }
}

/// Timers: writers' heartbeats and resends, readers' delayed NACKs, and
/// forgetting streams silent for a minute.
fn service(
    d: &Delivery,
    streams: &mut HashMap<(SocketAddr, u64), InStream>,
    now: Instant,
    out: &mut Vec<u8>,
) {
    let outs: Vec<_> = lock(&d.out).values().cloned().collect();
    for s in outs {
        flush_writer(d, &mut lock(&s), now, out);
    }
    streams.retain(|_, s| now.duration_since(s.last) < Duration::from_secs(60));
    for ((from, id), s) in streams.iter_mut() {
        ack(d, &mut s.reader, *id, *from, now, out);
    }
}

/// Writes a message from another node into the tag's local ring.
fn deliver(shared: &Shared, tag: &TagName, mut header: FrameHeader, payload: &[u8]) {
    let mut st = shared.lock();
    let Some(id) = st.table.entry(tag).map(|e| e.id) else {
        shared.stats.unknown_tag.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let Some(ring) = st.rings.get(&id) else {
        return;
    };
    let mut h = [0u8; HEADER_LEN];
    if payload.len() + HEADER_LEN <= ring.max_record() {
        header.flags = 0;
        let _ = header.emit(&mut h);
        let _ = ring.publish(&[&h, payload]);
        return;
    }
    let Some(fd) = blob_fd(payload) else {
        return;
    };
    let (n, bytes) = (
        shared.config.blobs_per_tag,
        shared.config.blob_bytes_per_tag,
    );
    let blob_id = st
        .blobs
        .entry(id)
        .or_default()
        .put(fd, payload.len() as u64, n, bytes);
    let r = BlobRef {
        blob_id,
        len: payload.len() as u64,
    };
    header.flags = FLAG_BLOB;
    let _ = header.emit(&mut h);
    if let Some(ring) = st.rings.get(&id) {
        let _ = ring.publish(&[&h, &r.to_bytes()]);
    }
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
