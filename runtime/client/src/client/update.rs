//! The client's update thread: the handshake with the daemon, the one
//! reader of its socket (routing responses to their waiters, applying table
//! updates to the replica), and reconnection with re-registration of every
//! endpoint after the daemon restarts (see the parent module).

use super::*;
use tagwire_auth::HoldingKey;

impl Core {
    /// Hello + table snapshot, done synchronously on a socket nobody else reads yet.
    pub(super) fn handshake(&self, sock: &SeqPacket) -> Result<()> {
        sock.set_read_timeout(Some(self.opts.timeout))
            .map_err(|e| Error::Io(e.to_string()))?;
        let hello = Request::Hello {
            pid: Pid(std::process::id()),
            name: self.opts.name.clone(),
        };
        let (node, client_pid) = match self.direct_call(sock, hello)? {
            Response::Welcome {
                node, client_pid, ..
            } => (node, client_pid),
            other => return Err(Error::Protocol(format!("expected Welcome, got {other:?}"))),
        };
        *lock(&self.me) = SenderInfo {
            pid: client_pid,
            node,
        };
        // The snapshot carries its version. Updates that arrive while we wait for
        // it may be older or newer (the daemon answers after releasing its lock):
        // hold them, install the snapshot, then apply those newer than it.
        let mut held = Vec::new();
        match self
            .direct_call_fd(sock, Request::ListTags, Some(&mut held))?
            .0
        {
            Response::Tags { version, tags } => {
                self.write_replica(|r| r.reset(version, tags));
                for u in held.iter().filter(|u| u.version > version) {
                    self.apply(u);
                }
            }
            other => return Err(Error::Protocol(format!("expected Tags, got {other:?}"))),
        }
        Ok(())
    }

    pub(super) fn direct_call(&self, sock: &SeqPacket, req: Request) -> Result<Response> {
        Ok(self.direct_call_fd(sock, req, None)?.0)
    }

    /// A request on a socket the update thread does not read yet. Updates met on
    /// the way are applied, or collected into `hold` if given.
    pub(super) fn direct_call_fd(
        &self,
        sock: &SeqPacket,
        req: Request,
        mut hold: Option<&mut Vec<tagwire_proto::Update>>,
    ) -> Result<Reply> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).max(1);
        if let Err(e) = sock.send(&Ctl::Request { id, body: req }.encode(), None) {
            // A daemon that refused the connection (a quota) said why first.
            if let Ok(Some(p)) = sock.recv(MAX_MESSAGE) {
                if let Ok(Ctl::Response {
                    id: 0,
                    body: Response::Error { code, message },
                }) = Ctl::decode(&p.data)
                {
                    return Err(Error::from_daemon(code, message, ""));
                }
            }
            return Err(self.unreachable(e.to_string()));
        }
        let deadline = Instant::now() + self.opts.timeout;
        loop {
            if Instant::now() > deadline {
                return Err(Error::DaemonTimeout {
                    socket: self.opts.socket.clone(),
                    after: self.opts.timeout,
                });
            }
            let mut p = match sock.recv(MAX_MESSAGE) {
                Ok(Some(p)) => p,
                Ok(None) => return Err(self.unreachable("daemon closed the connection")),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err(Error::DaemonTimeout {
                        socket: self.opts.socket.clone(),
                        after: self.opts.timeout,
                    })
                }
                Err(e) => return Err(self.unreachable(e.to_string())),
            };
            match Ctl::decode(&p.data) {
                Ok(Ctl::Response { id: rid, body }) if rid == id => {
                    return Ok((body, Fds::of(&mut p)))
                }
                // Refused before any request was read (a connection quota).
                Ok(Ctl::Response {
                    id: 0,
                    body: Response::Error { code, message },
                }) => return Err(Error::from_daemon(code, message, "")),
                Ok(Ctl::Update(u)) => match hold.as_deref_mut() {
                    Some(h) => h.push(u),
                    None => self.apply(&u),
                },
                // Direct delivery's handovers and seats, while re-registering.
                Ok(Ctl::Request { id, body }) => {
                    let _ = self.take_push(sock, id, body, p.fd);
                }
                Ok(_) => {}
                Err(e) => return Err(Error::Protocol(e.to_string())),
            }
        }
    }

    pub(super) fn update_loop(self: Arc<Self>) {
        while !self.stop.load(Ordering::SeqCst) {
            let Some(conn) = self.conn() else { break };
            self.read_until_closed(&conn);
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            tracing::warn!(socket = %self.opts.socket.display(), "lost the tagwire daemon; reconnecting");
            *lock(&self.conn) = None;
            // The restarted daemon decides again who holds each tag's
            // streams (direct delivery); old hand-overs are void.
            lock(&self.stash).clear();
            lock(&self.holdings).clear();
            lock(&self.seats).clear();
            let directs: Vec<_> = lock(&self.endpoints)
                .iter()
                .filter_map(Weak::upgrade)
                .filter_map(|ep| ep.direct.clone())
                .collect();
            for d in directs {
                d.park();
            }
            for (_, tx) in lock(&self.pending).drain() {
                let _ = tx.send(Err(self.unreachable("daemon connection lost")));
            }
            self.reconnect();
        }
    }

    pub(super) fn read_until_closed(&self, conn: &SeqPacket) {
        loop {
            let mut p = match conn.recv(MAX_MESSAGE) {
                Ok(Some(p)) => p,
                Ok(None) => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            match Ctl::decode(&p.data) {
                Ok(Ctl::Response { id, body }) => {
                    if let Some(tx) = lock(&self.pending).remove(&id) {
                        let _ = tx.send(Ok((body, Fds::of(&mut p))));
                        continue;
                    }
                    let undo = lock(&self.abandoned).remove(&id);
                    if let (Some(undo), Response::TagOpened(o)) = (undo, &body) {
                        // Granted after its caller gave up: give it back.
                        match undo {
                            Abandoned::SendAccess => {
                                self.send_only(Request::ReleaseSendAccess { tag: o.tag })
                            }
                            Abandoned::Subscription => {
                                let seat = p
                                    .extra
                                    .pop()
                                    .and_then(|fd| Seat::from_fd(fd).ok())
                                    .map_or(0, |s| s.generation());
                                self.send_only(Request::Unsubscribe { tag: o.tag, seat })
                            }
                            Abandoned::Nothing => {}
                        }
                    }
                }
                Ok(Ctl::Update(u)) => self.apply(&u),
                Ok(Ctl::Request { id, body }) => match self.take_push(conn, id, body, p.fd) {
                    None => {}
                    Some(Request::Stats) => self.send_only(Request::Report {
                        query: id,
                        rows: self.subscriber_rows(),
                    }),
                    Some(_) => tracing::debug!("daemon sent a request; ignored"),
                },
                Err(e) => tracing::debug!(error = %e, "malformed packet from the daemon; ignored"),
            }
        }
    }

    /// The daemon's pushes that both readers of its socket take alike
    /// (direct delivery's hand-overs, subscribers' seats); any other
    /// request comes back.
    fn take_push(
        &self,
        conn: &SeqPacket,
        id: u32,
        req: Request,
        fd: Option<OwnedFd>,
    ) -> Option<Request> {
        match req {
            Request::GiveStreams { tag } => self.give_streams(conn, id, tag),
            Request::Streams { tag, query: 0 } => self.take_streams(tag, fd),
            Request::Seat { tag, seat } => self.take_seat(tag, seat, fd),
            Request::Holding {
                tag,
                key,
                encrypt,
                odd,
                also,
            } => self.take_holding(
                tag,
                HoldingKey::from_bytes(key).with_odd(odd),
                encrypt,
                also,
            ),
            other => return Some(other),
        }
        None
    }

    /// A holding key from the daemon: kept for the tag's next hand-over
    /// and given at once to its direct receiver if it holds the streams
    /// (a key roll): beside the other generation's with `also`, alone
    /// without.
    fn take_holding(&self, tag: TagId, key: HoldingKey, encrypt: bool, also: bool) {
        {
            let mut holdings = lock(&self.holdings);
            let (keys, enc) = holdings.entry(tag).or_insert_with(|| (Vec::new(), encrypt));
            *enc = encrypt;
            if also {
                keys.retain(|k| k.odd() != key.odd());
            } else {
                keys.clear();
            }
            keys.push(key.clone());
        }
        let directs: Vec<_> = lock(&self.endpoints)
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|ep| ep.tag() == tag)
            .filter_map(|ep| ep.direct.clone())
            .collect();
        for d in directs {
            d.give_holding(key.clone(), also);
        }
    }

    /// The daemon wants a tag's streams back (direct delivery): the
    /// subscriber's session gives them up, and they go back in a memfd.
    fn give_streams(&self, conn: &SeqPacket, query: u32, tag: TagId) {
        // (Under the endpoints' lock, as a subscription being opened takes
        // its stash.)
        let eps = lock(&self.endpoints);
        let direct = eps
            .iter()
            .filter_map(Weak::upgrade)
            .find(|ep| ep.tag() == tag && ep.direct.is_some())
            .and_then(|ep| ep.direct.clone());
        let given = direct.map(|d| d.give());
        // Streams that came before their subscription took them (see
        // `Core::stash`) go back instead: taken later, they would make it
        // hold what the daemon took back.
        let stashed = lock(&self.stash).remove(&tag);
        drop(eps);
        let streams = stashed.or(given).unwrap_or_default();
        let bytes = tagwire_wire::handover::encode(&streams);
        match tagwire_unix::sealed_memfd("tagwire-streams", &bytes) {
            Ok(fd) => self.send_on(conn, Request::Streams { tag, query }, Some(fd.as_fd())),
            Err(e) => tracing::warn!(error = %e, "cannot hand streams back to the daemon"),
        }
    }

    /// The daemon hands a tag's streams over (direct delivery): the
    /// subscriber receives them on its own socket from now on.
    fn take_streams(&self, tag: TagId, fd: Option<OwnedFd>) {
        let Some(fd) = fd else { return };
        let streams = match tagwire_unix::read_memfd(fd, tagwire_wire::handover::MAX_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|b| tagwire_wire::handover::decode(&b).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "malformed streams from the daemon; ignored");
                return;
            }
        };
        let eps = lock(&self.endpoints);
        let ep = eps.iter().filter_map(Weak::upgrade).find(|ep| {
            ep.tag() == tag && ep.direct.is_some() && !ep.closed.load(Ordering::Acquire)
        });
        match ep {
            Some(ep) => {
                if let Some(d) = &ep.direct {
                    self.take_direct(d, tag, streams);
                }
                // A subscriber asleep on the ring wakes to wait on its socket.
                ep.current_ring().wake_readers();
            }
            // Not answered yet: `Client::open` takes them.
            None => {
                lock(&self.stash).insert(tag, streams);
            }
        }
    }

    /// A subscriber's seat on a tag we may write (`Request::Seat`): our
    /// publishers' rings wake it and read its gate from now on, and those
    /// granted later get it too.
    fn take_seat(&self, tag: TagId, generation: u32, fd: Option<OwnedFd>) {
        let seat = match fd.map(Seat::from_fd) {
            Some(Ok(s)) if s.generation() == generation => Arc::new(s),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "malformed seat from the daemon; ignored");
                return;
            }
            _ => {
                tracing::debug!("seat without its descriptor from the daemon; ignored");
                return;
            }
        };
        let eps = lock(&self.endpoints);
        let mut ring = None;
        for ep in eps.iter().filter_map(Weak::upgrade) {
            if ep.tag() != tag {
                continue;
            }
            let r = ep.current_ring();
            // (An endpoint still on an earlier daemon's ring, while being
            // registered again, does not take this daemon's seats.)
            if !r.seat_is_live(&seat) {
                continue;
            }
            if matches!(ep.kind, EndpointKind::Publisher { .. }) {
                r.add_seat(seat.clone());
            }
            ring = Some(r);
        }
        let mut seats = lock(&self.seats);
        let list = seats.entry(tag).or_default();
        // Seats of ended subscriptions go (the seat's own ring, mapped by
        // any endpoint, tells); without one, at most a directory's worth
        // is kept.
        if let Some(r) = ring {
            list.retain(|s| r.seat_is_live(s));
        }
        if list.len() >= tagwire_shm::MAX_SEATS {
            list.remove(0);
        }
        list.push(seat);
    }

    /// A row of counters per live subscriber of this client.
    pub(super) fn subscriber_rows(&self) -> Vec<StatsRow> {
        let me = lock(&self.me).pid;
        let program = std::path::Path::new(&self.opts.name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        lock(&self.endpoints)
            .iter()
            .filter_map(Weak::upgrade)
            .filter_map(|ep| match ep.kind {
                EndpointKind::Subscriber { qos, lossless, .. }
                    if !ep.closed.load(Ordering::Acquire) =>
                {
                    let c = &ep.counters;
                    let mode = if lossless {
                        "lossless"
                    } else if qos.reliability == Reliability::BestEffort {
                        "best-effort"
                    } else {
                        "reliable"
                    };
                    Some(
                        StatsRow::new(
                            StatsKind::Subscriber,
                            ep.name.as_str(),
                            format!("pid {me} {program} ({mode})"),
                        )
                        .with("received", c.received.load(Ordering::Relaxed))
                        .with("overflowed", c.overflowed.load(Ordering::Relaxed))
                        .with("missing", c.missing.load(Ordering::Relaxed))
                        .with(
                            "direct",
                            u64::from(ep.direct.as_ref().is_some_and(|d| d.lock().holder)),
                        )
                        // Data its own session refused for want of room
                        // (a lossless subscriber holding its stream; its
                        // senders send it again).
                        .with(
                            "no_room",
                            ep.direct.as_ref().map_or(0, |d| d.lock().no_room),
                        ),
                    )
                }
                _ => None,
            })
            .collect()
    }

    /// Changes the replica under its write lock, timing the hold.
    fn write_replica(&self, f: impl FnOnce(&mut Replica)) {
        let mut r = self.replica.write().unwrap_or_else(|e| e.into_inner());
        let since = Instant::now();
        f(&mut r);
        drop(r);
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.table_hold_max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    pub(super) fn apply(&self, u: &tagwire_proto::Update) {
        self.write_replica(|r| {
            r.apply(u);
        });
        if let TableEvent::TagDestroyed { tag, name } = &u.event {
            for ep in lock(&self.endpoints).iter().filter_map(Weak::upgrade) {
                // Ids restart with a new daemon: match the name too.
                if ep.tag() == *tag && ep.name == *name {
                    ep.destroyed.store(true, Ordering::Release);
                }
            }
        }
        // A class or policy change is per process and tag
        // (`Request::SetChannelQos`): every subscription of this process to
        // the tag has the new one, and asks for it again after a daemon
        // restart.
        if let TableEvent::ReceiverQos { tag, member, qos } = &u.event {
            if member.who == *lock(&self.me) {
                for ep in lock(&self.endpoints).iter().filter_map(Weak::upgrade) {
                    if ep.tag() == *tag && matches!(ep.kind, EndpointKind::Subscriber { .. }) {
                        *lock(&ep.changed) = Some((qos.priority, qos.sched));
                        if let Some(d) = &ep.direct {
                            d.set_sched(qos.sched);
                        }
                    }
                }
            }
        }
    }

    pub(super) fn reconnect(&self) {
        // Each attempt gets a fresh epoch number, so an endpoint re-registered on
        // a connection that then failed is re-registered again on the next one.
        let mut attempt = self.epoch.load(Ordering::Acquire);
        while !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
            let Ok(sock) = SeqPacket::connect(&self.opts.socket) else {
                continue;
            };
            if let Err(e) = check_daemon(&sock, &self.opts.socket) {
                tracing::warn!("{e}");
                continue;
            }
            if let Err(e) = self.handshake(&sock) {
                tracing::debug!(error = %e, "handshake with restarted daemon failed");
                continue;
            }
            attempt += 1;
            match self.adopt(sock, attempt) {
                Ok(n) => {
                    tracing::info!(endpoints = n, "reconnected to the tagwire daemon");
                    return;
                }
                Err(e) => tracing::debug!(error = %e, "re-registration failed; retrying"),
            }
        }
    }

    /// Re-registers every endpoint on `sock`, including ones opened against the
    /// dead daemon meanwhile, then publishes the connection and the epoch
    /// together under the endpoints lock, so that `Client::open` sees either
    /// the old epoch (and its endpoint is in our list) or the new one.
    pub(super) fn adopt(&self, sock: SeqPacket, epoch: u64) -> Result<usize> {
        let mut total = 0;
        loop {
            total += self.reregister(&sock, epoch)?;
            let eps = lock(&self.endpoints);
            if eps
                .iter()
                .filter_map(Weak::upgrade)
                .any(|e| self.needs_reregister(&e, epoch))
            {
                continue;
            }
            // Only now may the update thread block on this socket for ever.
            sock.set_read_timeout(None)
                .map_err(|e| Error::Io(e.to_string()))?;
            *lock(&self.conn) = Some(Arc::new(sock));
            self.epoch.store(epoch, Ordering::Release);
            drop(eps);
            return Ok(total);
        }
    }

    pub(super) fn needs_reregister(&self, ep: &Endpoint, epoch: u64) -> bool {
        !ep.destroyed.load(Ordering::Acquire)
            && !ep.closed.load(Ordering::Acquire)
            && ep.epoch.load(Ordering::Acquire) < epoch
    }

    /// Re-creates the tags our endpoints use and re-acquires their rights on a
    /// fresh daemon, swapping each endpoint onto the new ring.
    pub(super) fn reregister(&self, sock: &SeqPacket, epoch: u64) -> Result<usize> {
        let eps: Vec<_> = lock(&self.endpoints)
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|e| self.needs_reregister(e, epoch))
            .collect();
        for ep in &eps {
            let create = Request::CreateTag {
                name: ep.name.clone(),
                domain: ep.domain,
                ring: ep.ring_params,
                history: KeepHistory::default(),
            };
            match self.direct_call(sock, create)? {
                Response::TagCreated { .. } => {}
                other => return Err(Error::Protocol(format!("re-create failed: {other:?}"))),
            }
            // A lossless subscriber's gate is held on the new ring too, from
            // where it starts there (it reads the old one to its end first).
            let req = ep.register_again();
            match self.direct_call_fd(sock, req, None)? {
                (Response::TagOpened(o), Some(fd)) => {
                    let ring = map_ring(fd)?;
                    ep.install(&o, ring, epoch);
                    self.unstash(ep);
                    if ep.closed.load(Ordering::Acquire) {
                        // Dropped while we re-registered it: give the right back.
                        self.direct_call(sock, ep.release_request(o.tag))?;
                    }
                }
                (Response::Error { code, message }, _) => {
                    return Err(Error::from_daemon(code, message, ep.name.as_str()))
                }
                other => return Err(Error::Protocol(format!("re-register failed: {other:?}"))),
            }
        }
        Ok(eps.len())
    }
}

impl Endpoint {
    /// The request that registers this endpoint again (its daemon
    /// restarted): its kind's, in the class a run-time change last gave it.
    fn register_again(&self) -> Request {
        let mut req = self.kind.request(&self.name, true);
        if let Request::Subscribe { qos, .. } = &mut req {
            if let Some((priority, sched)) = *lock(&self.changed) {
                qos.priority = priority;
                qos.sched = sched;
            }
        }
        req
    }
}
