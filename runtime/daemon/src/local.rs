//! The local manager: serves clients' requests (their connections live in
//! `conns`, one event loop and a pool of workers).
//!
//! Every decoded request is checked against the table; malformed packets get a
//! `BadRequest` error answer (the connection survives) and are counted in the log
//! at DEBUG. The client's pid is taken from `SO_PEERCRED`, never from the request.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tagwire_proto::{Change, ClientId, Role, TableError, TableOp};
use tagwire_shm::Ring;
use tagwire_unix::{Packet, SeqPacket};
use tagwire_wire::control::{
    ErrorCode, HeldGate, Message, Request, Response, RingParams, TagOpened,
};
use tagwire_wire::{ChannelQos, Member, NodeAddr, Pid, Proxy, SenderInfo, TagName};

use crate::policy::{Cred, Right};

mod admission;
mod channels;
pub(crate) mod conns;
mod grant;
use crate::outbox::OutTx;
use crate::{blob, now_unix_ns, stats, update, Outbox, Shared, State};
use admission::{cred_of, history_within, large_bytes_within, permit, rights_within, room_for_tag};
pub(crate) use grant::Sitting;
use grant::{leave_seats, open, send_seats_to, Opening};

/// A connection the event loop accepted (`conns`): the client the daemon
/// knows from now on, or `None` if its credentials cannot be read.
fn open_client(
    shared: &Shared,
    id: ClientId,
    peer: tagwire_unix::PeerCred,
    conn: &Arc<SeqPacket>,
    tx: &OutTx,
) -> Option<Client> {
    let (pid, cred) = (Pid(peer.pid), cred_of(peer.pid, peer.uid, peer.gid));
    // Room for a large tag listing in one packet (capped by net.core.wmem_max
    // unless we are privileged).
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&**conn, 8 << 20);
    shared.lock().clients.insert(
        id,
        Outbox {
            conn: conn.clone(),
            tx: tx.clone(),
            uid: cred.uid,
        },
    );
    tracing::trace!(client = id.0, pid = pid.0, "client connected");
    Some(Client {
        id,
        who: SenderInfo {
            pid,
            node: shared.config.node,
        },
        cred,
    })
}

/// Serves one packet of `client`'s (on a worker of `conns`); its answer
/// goes to `tx`. False: the client is gone or stuck (to be closed).
fn serve_packet(shared: &Shared, client: &Client, tx: &OutTx, packet: Packet) -> bool {
    let id = client.id;
    let (req_id, request) = match Message::decode(&packet.data) {
        Ok(Message::Request { id, body }) if !packet.truncated => (id, body),
        Ok(_) => {
            reply_error(tx, 0, ErrorCode::BadRequest, "expected a request");
            return true;
        }
        Err(e) => {
            tracing::debug!(client = id.0, error = %e, "malformed control packet");
            reply_error(
                tx,
                0,
                ErrorCode::BadRequest,
                &format!("malformed request: {e}"),
            );
            return true;
        }
    };
    let grant = match &request {
        Request::Subscribe { .. } => Some(Role::Receiver),
        Request::GetSendAccess { .. } => Some(Role::Sender),
        _ => None,
    };
    let mut ops = Vec::new();
    // A ring's control segment and a subscriber's seat, sent with its
    // records' (`grant::open`).
    let mut extra = Vec::new();
    let (mut response, mut fd) = match request {
        Request::Stats => (stats::collect(shared, client.id), None),
        Request::Report { query, rows } => {
            shared.reports.deposit(query, client.id, rows);
            (Response::Ok, None)
        }
        Request::Streams { tag, query } => {
            (streams_back(shared, client.id, tag, query, packet.fd), None)
        }
        // Outside the state lock: a change of another node's
        // subscriptions waits for that node's answer.
        Request::SetChannelQos {
            name,
            nodes,
            change,
        } => channels::set(shared, client, (name, nodes, change), &mut ops),
        request => handle(shared, client, request, packet.fd, &mut ops, &mut extra),
    };
    if let Err(message) = update::replicate(shared, ops) {
        tracing::warn!(client = id.0, "{message}");
        if let (Response::TagOpened(o), Some(role)) = (&response, grant) {
            // The right is not known everywhere: give it back rather than
            // leave the client with a right other nodes ignore.
            let mut st = shared.lock();
            let c = match role {
                Role::Receiver => st.table.remove_receiver(o.tag, client.id),
                Role::Sender => st.table.remove_sender(o.tag, client.id),
            };
            if let Ok(c) = c {
                if role == Role::Receiver {
                    let seat = extra.get(1).and_then(seat_generation);
                    leave_seats(&mut st, client.id, Some(o.tag), seat);
                }
                update::effects(shared, &mut st, &c.updates);
                drop(st);
                let _ = update::replicate(shared, c.ops);
            }
        }
        response = Response::Error {
            code: ErrorCode::PeersUnresponsive,
            message,
        };
        fd = None;
        extra = Vec::new();
    }
    let granted = match (&response, grant) {
        (Response::TagOpened(o), Some(Role::Sender)) => Some(o.tag),
        _ => None,
    };
    let bytes = Message::Response {
        id: req_id,
        body: response,
    }
    .encode();
    if tx.send((bytes, fd, extra)).is_err() {
        tracing::debug!(client = id.0, "client gone or not reading; closing");
        return false;
    }
    // A new publisher wakes the tag's subscribers and reads their gates:
    // their seats follow its grant.
    if let Some(tag) = granted {
        send_seats_to(&shared.lock(), id, tag);
    }
    true
}

/// The generation of the seat whose descriptor is `fd` (one we just made).
fn seat_generation(fd: &OwnedFd) -> Option<u32> {
    tagwire_shm::Seat::from_fd(fd.try_clone().ok()?)
        .ok()
        .map(|s| s.generation())
}

/// The client is gone (exit, crash, SIGKILL, or a failed socket; on a
/// worker of `conns`, after its last request): everything it held is
/// released.
fn close_client(shared: &Shared, client: &Client, conn: &SeqPacket) {
    let id = client.id;
    let mut st = shared.lock();
    st.clients.remove(&id);
    let _ = conn.shutdown();
    leave_seats(&mut st, id, None, None);
    for store in st.blobs.values_mut() {
        store.owner_gone(blob::Owner::Client(id));
    }
    let change = st.table.remove_client(id);
    let ups = change.updates;
    update::effects(shared, &mut st, &ups);
    // A subscriber killed while asleep never lowers its ring's sleeper count.
    // When no receiver is left on a tag, nobody can be asleep on its ring (new
    // subscribers get the ring only through us, under this lock): reset it.
    for u in &ups {
        if let tagwire_proto::TableEvent::ReceiverLeft { tag, .. } = u.event {
            let idle = st
                .table
                .entry_by_id(tag)
                .is_some_and(|e| e.receivers().next().is_none());
            if idle {
                if let Some(r) = st.rings.get(&tag) {
                    r.reset_waiters();
                }
            }
        }
    }
    drop(st);
    if let Err(message) = update::replicate(shared, change.ops) {
        tracing::warn!(client = id.0, "releasing a dead client's rights: {message}");
    }
    tracing::trace!(
        client = id.0,
        pid = client.who.pid.0,
        released = ups.len(),
        "client disconnected"
    );
}

struct Client {
    id: ClientId,
    who: SenderInfo,
    /// Its uid and groups, for the policy.
    cred: Cred,
}

fn reply_error(tx: &OutTx, id: u32, code: ErrorCode, message: &str) {
    let bytes = Message::Response {
        id,
        body: Response::Error {
            code,
            message: message.to_owned(),
        },
    }
    .encode();
    let _ = tx.send((bytes, None, Vec::new()));
}

fn error(code: ErrorCode, message: impl Into<String>) -> (Response, Option<OwnedFd>) {
    (
        Response::Error {
            code,
            message: message.into(),
        },
        None,
    )
}

fn table_error(e: TableError) -> (Response, Option<OwnedFd>) {
    let (code, message) = crate::restate::refusal(e);
    error(code, message)
}

/// Whether a subscription with `qos` can be placed: only `Proxy::Auto`
/// needs a topology in which its tag and this node appear and some node
/// meets its delay bound.
fn admit(shared: &Shared, st: &State, name: &TagName, qos: &ChannelQos) -> Result<(), String> {
    // An unknown tag is refused as such by `open`.
    let Some(entry) = st.table.entry(name) else {
        return Ok(());
    };
    if !matches!(qos.proxy, Proxy::Auto { .. }) {
        return Ok(());
    }
    let Some(placer) = &shared.placer else {
        return Err(format!(
            "{name} asks for proxy {}, but this node's daemon has no topology to place it in: \
             start it with `tagwire daemon --topology FILE` (the `tagwire place` format, an \
             `address` per node), or name the place (subscriber, publisher or a node's address)",
            qos.proxy
        ));
    };
    let publishers: Vec<NodeAddr> = entry
        .rights(Role::Sender)
        .iter()
        .map(|r| r.key.node)
        .collect();
    placer.admit(name, &publishers, shared.node(), qos)
}

/// Starts, resizes or (with `depth` 0) stops the history of a tag, whose
/// ring the caller mapped under the state lock (`None`: the tag has none
/// here). Called without the lock: the keeper takes it to read blobs.
fn keep_history(
    shared: &Shared,
    name: &TagName,
    ring: Option<std::io::Result<Ring>>,
    depth: u32,
    max_bytes: u64,
) -> Result<(), (Response, Option<OwnedFd>)> {
    let ring = ring
        .transpose()
        .map_err(|e| error(ErrorCode::Internal, format!("cannot map the ring: {e}")))?;
    let Some(shared) = shared.this.get().and_then(std::sync::Weak::upgrade) else {
        return Err(error(ErrorCode::Internal, "daemon stopping"));
    };
    let max = match usize::try_from(max_bytes) {
        Ok(0) => crate::pull::DEFAULT_HISTORY_BYTES,
        Ok(m) => m,
        Err(_) => usize::MAX,
    };
    shared
        .keepers
        .set(&shared, name, ring, depth as usize, max)
        .map_err(|e| error(ErrorCode::Internal, e))?;
    tracing::info!(tag = %name, depth, max_bytes = max, "history set");
    Ok(())
}

/// A client's inbound streams of `tag` (in the memfd `fd`), answering the
/// daemon's `GiveStreams`: they go to the delivery port's session.
fn streams_back(
    shared: &Shared,
    client: ClientId,
    tag: tagwire_wire::TagId,
    query: u32,
    fd: Option<OwnedFd>,
) -> Response {
    let bad = |message: String| Response::Error {
        code: ErrorCode::BadRequest,
        message,
    };
    let (Some(d), Some(fd)) = (shared.delivery.get(), fd) else {
        return bad("Streams without a network or without its memfd".to_owned());
    };
    if query == 0 {
        return bad("Streams from a client answer a GiveStreams".to_owned());
    }
    let streams = match tagwire_unix::read_memfd(fd, tagwire_wire::handover::MAX_BYTES)
        .map_err(|e| e.to_string())
        .and_then(|b| tagwire_wire::handover::decode(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        // Not waited for any more: the port's session starts new streams
        // after its timeout.
        Err(e) => return bad(format!("malformed handover: {e}")),
    };
    let Some(name) = shared.lock().table.entry_by_id(tag).map(|e| e.name.clone()) else {
        return bad(format!("unknown tag {}", tag.0));
    };
    let streams = streams.into_iter().collect();
    if d.direct.answered(client, tag, name, streams) {
        d.wake_inbound();
        Response::Ok
    } else {
        bad("streams handed back unasked".to_owned())
    }
}

/// Serves one request under the state lock; the operations to replicate to
/// peer daemons are left in `ops` (sent once the lock is released).
fn handle(
    shared: &Shared,
    client: &Client,
    req: Request,
    fd: Option<OwnedFd>,
    ops: &mut Vec<TableOp>,
    extra: &mut Vec<OwnedFd>,
) -> (Response, Option<OwnedFd>) {
    let member = Member {
        who: client.who,
        since_unix_ns: now_unix_ns(),
    };
    let mut st = shared.lock();
    match req {
        Request::Hello { name, .. } => {
            tracing::debug!(client = client.id.0, pid = client.who.pid.0, name, "hello");
            (
                Response::Welcome {
                    node: shared.config.node,
                    daemon_pid: Pid(std::process::id()),
                    client_pid: client.who.pid,
                    table_version: st.table.version(),
                },
                None,
            )
        }
        Request::Ping => (Response::Pong, None),
        // Answered before the lock (they wait for other clients).
        Request::Stats
        | Request::Report { .. }
        | Request::Streams { .. }
        | Request::SetChannelQos { .. } => error(
            ErrorCode::Internal,
            "stats, handovers and channel changes are answered outside the state lock",
        ),
        Request::Seat { .. } | Request::Holding { .. } => error(
            ErrorCode::BadRequest,
            "Seat and Holding go from the daemon to its clients, not the other way",
        ),
        Request::DirectKey { name, to, member } => {
            let id = st.table.entry(&name).map(|e| e.id);
            if !id.is_some_and(|t| st.table.is_sender(t, client.id)) {
                return error(ErrorCode::NoSendAccess, "a direct key needs send access");
            }
            match shared.guard.direct_key(&name, to, member) {
                Some(r) => (r, None),
                None => error(
                    ErrorCode::BadRequest,
                    format!("{to} is not the direct receiver {member} of {name} (any more)"),
                ),
            }
        }
        Request::GiveStreams { .. } => error(
            ErrorCode::BadRequest,
            "GiveStreams goes from the daemon to a client, not back",
        ),
        Request::SendSocket => {
            let Some(d) = shared.delivery.get() else {
                return error(
                    ErrorCode::BadRequest,
                    "this daemon has no network (start it with --node ADDRESS): \
                     there is no other node to send to",
                );
            };
            match d
                .sock
                .local_addr()
                .and_then(|a| tagwire_net::send_socket(a.ip()))
            {
                Ok(sock) => (Response::Ok, Some(OwnedFd::from(sock))),
                Err(e) => error(
                    ErrorCode::Internal,
                    format!("cannot open a send socket: {e}"),
                ),
            }
        }
        Request::TagKey { name } => {
            let id = st.table.entry(&name).map(|e| e.id);
            match id.filter(|&t| st.table.is_sender(t, client.id)) {
                Some(_) => (shared.guard.tag_key(&name), None),
                None => error(ErrorCode::NoSendAccess, "a tag key needs send access"),
            }
        }
        Request::SetHistory {
            name,
            depth,
            max_bytes,
        } => {
            if let Err(e) = permit(shared, &st, client, &name, Right::Create) {
                return e;
            }
            if let Err(q) = history_within(shared, depth, max_bytes) {
                return error(ErrorCode::Quota, q.message());
            }
            let ring = match st.table.entry(&name) {
                Some(e) => st.rings.get(&e.id).map(crate::delivery::private_ring),
                None => return error(ErrorCode::UnknownTag, format!("unknown tag {name}")),
            };
            // The keeper reads blobs under the state lock: start it without.
            drop(st);
            match keep_history(shared, &name, ring, depth, max_bytes) {
                Ok(()) => (Response::Ok, None),
                Err(e) => e,
            }
        }
        Request::Pull { name, query } => {
            if st.table.entry(&name).is_none() {
                return error(ErrorCode::UnknownTag, format!("unknown tag {name}"));
            }
            if let Err(e) = permit(shared, &st, client, &name, Right::Subscribe) {
                return e;
            }
            drop(st);
            match shared.keepers.pull(shared, &name, query) {
                Some(Ok((count, len, fd))) => (Response::Pulled { count, len }, Some(fd)),
                Some(Err(e)) => error(ErrorCode::Internal, format!("cannot answer a pull: {e}")),
                // Not kept here: ask the other nodes (the publisher's node
                // keeps it by default).
                None => match crate::peers::pull_remote(shared, &name, query) {
                    Some((count, records)) => match crate::pull::sealed(&records) {
                        Ok(fd) => (
                            Response::Pulled {
                                count,
                                len: records.len() as u64,
                            },
                            Some(fd),
                        ),
                        Err(e) => error(ErrorCode::Internal, format!("cannot answer a pull: {e}")),
                    },
                    None => error(
                        ErrorCode::BadRequest,
                        format!(
                            "tag {name} keeps no history on this node or any live peer; \
                             start one with `tagwire history {name} --depth N`"
                        ),
                    ),
                },
            }
        }
        Request::CreateTag {
            name,
            domain,
            ring,
            history,
        } => {
            if let Some(e) = st.table.entry(&name) {
                return (
                    Response::TagCreated {
                        tag: e.id,
                        created: false,
                    },
                    None,
                );
            }
            if let Err(e) = permit(shared, &st, client, &name, Right::Create) {
                return e;
            }
            let ring = resolve_ring(ring, shared.config.default_ring);
            if let Err(why) = crate::ring::check(ring) {
                return error(ErrorCode::BadRequest, why);
            }
            if let Err(q) = room_for_tag(shared, &st, client, ring)
                .and_then(|()| history_within(shared, history.depth, history.max_bytes))
            {
                return error(ErrorCode::Quota, q.message());
            }
            let segment = match create_ring(&name, ring) {
                Ok(r) => r,
                Err(e) => return e,
            };
            let (tag, change) = st.table.create(name.clone(), domain, ring);
            st.rings.insert(tag, segment);
            crate::delivery::ring_added(shared, &mut st, tag);
            st.owners.insert(tag, client.cred.uid);
            tracing::info!(tag = %name, %domain, "tag created");
            update::effects(shared, &mut st, &change.updates);
            ops.extend(change.ops);
            if history.depth > 0 {
                let ring = st.rings.get(&tag).map(crate::delivery::private_ring);
                drop(st);
                if let Err(e) = keep_history(shared, &name, ring, history.depth, history.max_bytes)
                {
                    return e;
                }
            }
            (Response::TagCreated { tag, created: true }, None)
        }
        Request::DestroyTag { name } => match permit(shared, &st, client, &name, Right::Destroy)
            .map(|()| st.table.destroy(&name))
        {
            Err(e) => e,
            Ok(r) => match r {
                Ok((_, change)) => {
                    tracing::info!(tag = %name, "tag destroyed");
                    shared.keepers.drop_tag(&name);
                    update::effects(shared, &mut st, &change.updates);
                    ops.extend(change.ops);
                    (Response::Ok, None)
                }
                Err(e) => table_error(e),
            },
        },
        Request::GetSendAccess { name, qos } => {
            if let Err(e) = permit(shared, &st, client, &name, Right::Publish) {
                return e;
            }
            if let Err(q) = rights_within(shared, &st, client) {
                return error(ErrorCode::Quota, q.message());
            }
            // This node's forwarder of the tag will run at it.
            if let Err(why) = tagwire_sched::may_use(client.who.pid.0, qos.sched) {
                return error(ErrorCode::NotPermitted, format!("{name}: {why}"));
            }
            // A publisher asks only a class, a policy and a pacing.
            let qos = ChannelQos {
                priority: qos.priority,
                sched: qos.sched,
                pacing: qos.pacing,
                ..ChannelQos::default()
            };
            open(
                shared,
                &mut st,
                &name,
                ops,
                Opening::Publisher,
                extra,
                |st, tag| st.table.add_sender_with(tag, client.id, member, qos),
            )
        }
        Request::Subscribe {
            name,
            mut qos,
            lossless,
            ..
        } => {
            // Direct delivery needs the network. (Under a domain key the
            // receiver gets a key for its holding only: `guard`.)
            if shared.delivery.get().is_none() {
                qos.direct = 0;
            }
            if let Err(e) = permit(shared, &st, client, &name, Right::Subscribe) {
                return e;
            }
            if let Err(q) = rights_within(shared, &st, client) {
                return error(ErrorCode::Quota, q.message());
            }
            if let Err(why) = admit(shared, &st, &name, &qos) {
                return error(ErrorCode::NoPlacement, why);
            }
            // The node's inbound threads and other nodes' forwarders will
            // run at the policy asked: only for a process that may run at
            // it itself.
            if let Err(why) = tagwire_sched::may_use(client.who.pid.0, qos.sched) {
                return error(ErrorCode::NotPermitted, format!("{name}: {why}"));
            }
            let who = Opening::Subscriber {
                client: client.id,
                pid: client.who.pid.0,
                lossless,
            };
            open(shared, &mut st, &name, ops, who, extra, |st, tag| {
                st.table.add_receiver_with(tag, client.id, member, qos)
            })
        }
        Request::ReleaseSendAccess { tag } => match st.table.remove_sender(tag, client.id) {
            Ok(c) => {
                update::effects(shared, &mut st, &c.updates);
                ops.extend(c.ops);
                (Response::Ok, None)
            }
            Err(e) => table_error(e),
        },
        Request::Unsubscribe { tag, seat } => match st.table.remove_receiver(tag, client.id) {
            Ok(c) => {
                // (A client that names no seat gives all its seats on the tag up.)
                leave_seats(&mut st, client.id, Some(tag), (seat != 0).then_some(seat));
                update::effects(shared, &mut st, &c.updates);
                ops.extend(c.ops);
                (Response::Ok, None)
            }
            Err(e) => table_error(e),
        },
        Request::ListNodes => {
            let mut nodes = vec![tagwire_wire::control::NodeSummary {
                node: shared.node(),
                name: shared
                    .config
                    .net
                    .as_ref()
                    .map_or_else(|| "(this node)".to_owned(), |n| n.name.clone()),
                state: tagwire_wire::control::NodeState::Up,
                last_heard_ms: 0,
                source: "self".to_owned(),
            }];
            nodes.extend(st.peers.summaries(std::time::Instant::now()));
            (Response::Nodes { nodes }, None)
        }
        Request::Channels { name } => channels::list(&st, &name),
        Request::ListMembers { name } => match st.table.entry(&name) {
            Some(e) => (
                Response::Members {
                    senders: e.senders().copied().collect(),
                    receivers: e.receivers().copied().collect(),
                },
                None,
            ),
            None => error(ErrorCode::UnknownTag, format!("unknown tag {name}")),
        },
        Request::ListTags => (
            Response::Tags {
                version: st.table.version(),
                tags: st.table.summaries(),
            },
            None,
        ),
        Request::PutBlob { tag, len, done } => {
            let Some(fd) = fd else {
                return error(
                    ErrorCode::BadRequest,
                    "PutBlob needs the message's memfd attached",
                );
            };
            if !st.table.is_sender(tag, client.id) {
                return error(
                    ErrorCode::NoSendAccess,
                    "large message on a tag without send access",
                );
            }
            // Subscribers get this file read-only; unsealed, its publisher
            // (or anyone it leaked to) could still change a message others
            // read, or shrink it under a reader's mapping.
            if !tagwire_unix::is_sealed(fd.as_fd()) {
                return error(
                    ErrorCode::BadRequest,
                    "a large message's memfd must be sealed against write, shrink and grow",
                );
            }
            match rustix::fs::fstat(&fd) {
                Ok(s) if u64::try_from(s.st_size).unwrap_or(0) >= len => {}
                _ => {
                    return error(
                        ErrorCode::BadRequest,
                        "blob descriptor is shorter than the stated length",
                    )
                }
            }
            let Some(ring) = st.rings.get(&tag).cloned() else {
                return error(ErrorCode::UnknownTag, "large message on a tag with no ring");
            };
            let owner = blob::Owner::Client(client.id);
            let limits = blob::Limits::of(&shared.config, ring.shape().slots);
            let store = st.blobs.entry(tag).or_default();
            if done != 0 {
                store.done(owner, done);
            }
            let at = blob::RingState::of(&ring);
            store.scan(at, |i| blob::look(&ring, i));
            if let Err(q) = large_bytes_within(shared, &mut st, len).and_then(|()| {
                let State { blobs, rings, .. } = &mut *st;
                blob::descriptors_within(blobs, rings)
            }) {
                return error(ErrorCode::Quota, q.message());
            }
            let store = st.blobs.entry(tag).or_default();
            match store.put(fd, len, owner, limits, at) {
                Ok(blob_id) => (Response::BlobStored { blob_id }, None),
                Err(blob::Full) => {
                    shared.stats.blobs_held.fetch_add(1, Ordering::Relaxed);
                    error(
                        ErrorCode::BlobsHeld,
                        "every large message kept is still needed by a lossless reader; wait and retry",
                    )
                }
            }
        }
        Request::GetBlob { tag, blob_id } => {
            if !st.table.is_receiver(tag, client.id) {
                return error(
                    ErrorCode::NotSubscribed,
                    "large message requested without a subscription",
                );
            }
            let found = st.blobs.get(&tag).and_then(|b| b.get(blob_id));
            // Read-only: a subscriber cannot change the message for others.
            let opened = found.map(|(f, len)| (tagwire_unix::reopen_read_only(f.as_fd()), len));
            match opened {
                Some((Ok(f), len)) => (Response::BlobFound { len }, Some(f)),
                Some((Err(e), _)) => error(
                    ErrorCode::Internal,
                    format!("cannot reopen the blob read-only: {e}"),
                ),
                None => error(
                    ErrorCode::BlobGone,
                    "large message evicted before it was read",
                ),
            }
        }
    }
}

fn resolve_ring(req: RingParams, default: RingParams) -> RingParams {
    RingParams {
        slots: if req.slots == 0 {
            default.slots
        } else {
            req.slots
        },
        slot_payload: if req.slot_payload == 0 {
            default.slot_payload
        } else {
            req.slot_payload
        },
    }
}

/// Creates the shared-memory ring for a new tag.
pub(crate) fn create_ring(
    name: &TagName,
    ring: RingParams,
) -> Result<Ring, (Response, Option<OwnedFd>)> {
    crate::ring::create(name, ring).map_err(|m| error(ErrorCode::BadRequest, m))
}
