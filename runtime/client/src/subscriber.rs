//! Subscriptions: the delivery service's receive path.
//!
//! Each subscriber has its own cursor into the tag's ring and a bounded queue
//! depth: when it falls more than `depth` messages behind, the oldest are dropped
//! and the next `receive` reports how many ([`Error::Overflowed`]), never silently.
//! A lossless subscriber instead holds a gate on the ring at its position
//! (`SubscribeOptions::lossless`): writers wait for it rather than overwrite.
//! Waiting blocks on the ring's futex doorbell; with `busy_poll` it spins first.
//! A subscription that direct delivery feeds (`crate::direct`) also takes
//! messages from its own socket, and waits there while it holds the stream.

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tagwire_shm::{Cursor, Gate, ReadOutcome, Ring, RingError, GATES};

/// Lossless subscribers a tag may have on one node: a ring's gates but the
/// one always left for the daemon's forwarder.
pub const MAX_LOSSLESS: usize = GATES - 1;
use tagwire_wire::control::{ErrorCode, HeldGate, Request, Response};
use tagwire_wire::frame::{BlobRef, FrameHeader, FLAG_BLOB, HEADER_LEN};
use tagwire_wire::{Carrier, Proxy};

use crate::client::{daemon_error, is_code, Client, Endpoint, EndpointKind};
use crate::direct::Direct;
use crate::gaps::{Gaps, Note};
pub use crate::options::{PublishOptions, SubscribeOptions, DEFAULT_DEPTH, FLOW_POLL};
use crate::{Error, Message, Result};

mod socket;

/// What [`Subscriber::receive_into`] returns beside the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInfo {
    /// The publisher's sequence number.
    pub seq: tagwire_wire::SeqNum,
    /// Who sent it.
    pub sender: tagwire_wire::SenderInfo,
    /// Which of the sender's publishers of the tag.
    pub stream: u16,
    /// When it was sent (the publisher's clock).
    pub timestamp: std::time::SystemTime,
    /// The instance, for a keyed message.
    pub key: Option<tagwire_wire::instance::Key>,
    /// The instance's state.
    pub state: tagwire_wire::instance::InstanceState,
    /// The publisher's ownership strength, if it set one.
    pub strength: Option<i32>,
    /// The DDS writer, for a sample a DDS gateway published.
    pub origin: Option<tagwire_wire::instance::Origin>,
}

/// A subscription to one tag. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscriber {
    client: Client,
    ep: Arc<Endpoint>,
    ring: Ring,
    cursor: Cursor,
    /// A lossless subscriber's hold on `ring`, at `cursor`.
    gate: Option<Gate>,
    /// After a daemon restart, a lossless subscriber's hold on the new ring
    /// (of that generation) while it finishes the old one.
    next_gate: Option<(u64, Gate)>,
    generation: u64,
    opts: SubscribeOptions,
    lost: u64,
    /// Of `lost`, those missing between two messages of a publisher.
    missing: u64,
    received: u64,
    /// Pulled history still to hand out, oldest first.
    backlog: std::collections::VecDeque<Message>,
    /// The last history sequence number per sender: live messages up to it
    /// were in the history already.
    caught_up: std::collections::HashMap<tagwire_wire::SenderInfo, u64>,
    /// Each publisher's last number: a jump is a loss to report.
    gaps: Gaps,
    /// Its own socket for direct delivery (see `crate::direct`).
    direct: Option<Arc<Direct>>,
    /// Buffers the caller gave `receive_into` and got a direct message's
    /// buffer for: back to the direct session at the next pop.
    spare: Vec<Vec<u8>>,
    /// Messages (and loss reports) handed out since `receive` last slept:
    /// two or more say the stream is flowing (see
    /// [`crate::SubscribeOptions::flow_poll`]).
    since_wait: u32,
    /// Times `receive` went to sleep.
    sleeps: u64,
    /// How long a flowing stream's socket is polled (direct delivery).
    socket_spin: crate::socket_spin::SocketSpin,
    /// The per-instance filter, when the options ask for one.
    pub(crate) instances: Option<crate::instances::Filter>,
}

impl Subscriber {
    pub(crate) fn new(client: Client, ep: Arc<Endpoint>, opts: SubscribeOptions) -> Result<Self> {
        let ring = ep.current_ring();
        let slots = ring.shape().slots;
        // A depth asked for must fit the ring; an unset one is chosen to.
        if let Some(depth) = opts.depth.filter(|d| !opts.lossless && *d > slots) {
            ep.close(&client.core);
            return Err(Error::DepthTooLarge {
                tag: ep.name.to_string(),
                depth,
                slots,
            });
        }
        // Start where the daemon granted the subscription, not where the ring is
        // now: messages sent in between are ours.
        let cursor = ring.cursor_from(ep.registered_at.load(Ordering::Acquire), opts.ring_depth());
        let held = ep.take_held_gate();
        let gate = match opts.gate(&ring, ep.name.as_str(), held) {
            Ok(g) => g,
            Err(e) => {
                ep.close(&client.core);
                return Err(e);
            }
        };
        let generation = ep.generation.load(Ordering::Acquire);
        let direct = ep.direct.clone();
        if let Some(d) = &direct {
            d.set_depth(opts.ring_depth().min(slots));
        }
        Ok(Self {
            client,
            ep,
            ring,
            cursor,
            gate,
            next_gate: None,
            generation,
            opts,
            lost: 0,
            missing: 0,
            received: 0,
            backlog: Default::default(),
            caught_up: Default::default(),
            gaps: Gaps::default(),
            direct,
            spare: Vec::new(),
            since_wait: 0,
            sleeps: 0,
            socket_spin: Default::default(),
            instances: (!opts.instances.is_none())
                .then(|| crate::instances::Filter::new(opts.instances)),
        })
    }

    /// Publishes the counters for `tagwire stats` (plain stores: this
    /// subscriber is their only writer).
    fn count(&self) {
        let c = &self.ep.counters;
        c.received.store(self.received, Ordering::Relaxed);
        c.overflowed
            .store(self.lost - self.missing, Ordering::Relaxed);
        c.missing.store(self.missing, Ordering::Relaxed);
    }

    /// Moves a lossless subscriber's gate to its cursor.
    fn advance(&self) {
        if let Some(g) = &self.gate {
            g.advance(self.cursor.position());
        }
    }

    /// Hands out `past` (a pull) before live messages, dropping those live
    /// ones it already holds.
    pub(crate) fn prepend(&mut self, past: Vec<Message>) {
        for m in &past {
            let last = self.caught_up.entry(m.sender).or_insert(0);
            *last = (*last).max(m.seq.0);
        }
        self.backlog = past
            .into_iter()
            .filter(|m| self.opts.qos.wants(m.seq.0))
            .collect();
    }

    /// The tag's name.
    pub fn tag(&self) -> &str {
        self.ep.name.as_str()
    }

    /// How many times `receive` went to sleep waiting for this tag's
    /// shared-memory ring, or for its own socket while it holds the tag's
    /// stream (direct delivery) (a diagnostic: a blocking subscriber that keeps
    /// up with a flowing stream polls briefly instead of sleeping between
    /// two messages, which would cost it and its publisher a system call
    /// per message).
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }

    /// Messages lost so far: overflowed (this subscriber was a ring or its
    /// depth behind) or missing between two messages of one publisher (lost
    /// on the way, e.g. by a best-effort carrier). Each loss is also
    /// reported once by `receive` ([`Error::Overflowed`]).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Whether messages from other nodes come straight to this subscriber's
    /// own socket now (direct delivery; see
    /// [`SubscribeOptions::through_daemon`]), rather than through the daemon.
    pub fn is_direct(&self) -> bool {
        self.direct.as_ref().is_some_and(|d| d.lock().holder)
    }

    /// Messages received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// What the per-instance QoS held back so far (not lost: filtered as
    /// asked): samples of non-owners, samples replaced within the minimum
    /// separation, deadlines missed.
    pub fn filtered(&self) -> tagwire_instances::Counts {
        self.instances
            .as_ref()
            .map(|f| f.counts())
            .unwrap_or_default()
    }

    /// Receives the next message. `timeout`: `None` waits for ever, `Some(ZERO)`
    /// polls. Errors: [`Error::Timeout`], [`Error::Overflowed`] (then call again),
    /// [`Error::TagDestroyed`].
    pub fn receive(&mut self, timeout: Option<Duration>) -> Result<Message> {
        let mut payload = Vec::new();
        let info = self.receive_into(timeout, &mut payload)?;
        Ok(Message::from_parts(payload, info))
    }

    /// Like [`receive`](Self::receive), but writes the payload into `payload`
    /// (replacing its contents, reusing its allocation): no allocation per message
    /// once the buffer is large enough, for latency-critical loops.
    pub fn receive_into(
        &mut self,
        timeout: Option<Duration>,
        payload: &mut Vec<u8>,
    ) -> Result<MessageInfo> {
        if let Some(mut f) = self.instances.take() {
            let tag = self.ep.name.to_string();
            let r = crate::instances::receive(&mut f, &tag, timeout, |wait| {
                let mut b = Vec::new();
                let info = self.receive_unfiltered(wait, &mut b)?;
                Ok(Message::from_parts(b, info))
            });
            self.instances = Some(f);
            let m = r?;
            let info = m.info();
            *payload = m.payload;
            return Ok(info);
        }
        self.receive_unfiltered(timeout, payload)
    }

    /// The next message of the tag, before the per-instance filter.
    fn receive_unfiltered(
        &mut self,
        timeout: Option<Duration>,
        payload: &mut Vec<u8>,
    ) -> Result<MessageInfo> {
        let r = self.receive_next(timeout, payload);
        if matches!(r, Ok(_) | Err(Error::Overflowed { .. })) {
            self.since_wait = self.since_wait.saturating_add(1);
        }
        r
    }

    /// [`Subscriber::receive_unfiltered`]'s work.
    fn receive_next(
        &mut self,
        timeout: Option<Duration>,
        payload: &mut Vec<u8>,
    ) -> Result<MessageInfo> {
        // Taken out for the call and put back (not cloned: an atomic
        // increment and decrement per message).
        let direct = self.direct.take();
        let r = self.receive_from(direct.as_deref(), timeout, payload);
        self.direct = direct;
        r
    }

    /// [`Subscriber::receive_next`] with the subscription's direct
    /// delivery, if any.
    fn receive_from(
        &mut self,
        direct: Option<&Direct>,
        timeout: Option<Duration>,
        payload: &mut Vec<u8>,
    ) -> Result<MessageInfo> {
        if let Some(m) = self.backlog.pop_front() {
            self.received += 1;
            self.count();
            let info = m.info();
            *payload = m.payload;
            return Ok(info);
        }
        // A timeout too large to represent is "for ever". Read from the
        // clock only once there is nothing to hand out (a message ready at
        // once costs no clock read).
        let mut deadline: Option<Option<Instant>> = None;
        let mut raw = [0u8; HEADER_LEN];
        let _present = direct.map(|d| d.enter());
        loop {
            self.follow_ring()?;
            // Direct delivery, not holding: what came on the socket before
            // the daemon took the stream back comes before the ring.
            if let Some(d) = direct {
                match self.look_at_socket(d, false, payload) {
                    Step::Done(r) => return r,
                    Step::Again => continue,
                    Step::Nothing => {}
                }
            }
            match self.look_at_ring(&mut raw, payload) {
                Step::Done(r) => return r,
                Step::Again => continue,
                Step::Nothing => {}
            }
            // Holding: the ring (what the daemon wrote before handing the
            // stream over) came first; now the socket.
            if let Some(d) = direct {
                match self.look_at_socket(d, true, payload) {
                    Step::Done(r) => return r,
                    Step::Again => continue,
                    Step::Nothing => {}
                }
            }
            if self.ep.destroyed.load(Ordering::Acquire) {
                return Err(Error::TagDestroyed(self.ep.name.to_string()));
            }
            let deadline = *deadline
                .get_or_insert_with(|| timeout.and_then(|t| Instant::now().checked_add(t)));
            let slice = wait_slice(deadline)?;
            if let Some(d) = direct {
                if self.wait_socket(d, slice) {
                    continue;
                }
            }
            // A stream that flows (several messages since the last sleep)
            // is polled a little before sleeping: a reader that keeps up
            // with a flat-out writer would otherwise sleep between two
            // records and be woken for the next, each side paying a system
            // call per message (256 B on one host: 8.5 M msg/s fell to
            // 3 M once the reader got faster than its writer). It flows on
            // while the polls find records: a reader faster than its writer
            // finds one per poll (counting from the last wait instead, such
            // a reader slept every other message).
            let spin = ring_spin(&self.opts, self.since_wait);
            if self.ring.wait(&self.cursor, Some(slice), spin) {
                self.sleeps += 1;
                self.since_wait = 0;
            }
        }
    }

    /// The next record of the ring: its message, a loss, or nothing yet.
    fn look_at_ring(&mut self, raw: &mut [u8; HEADER_LEN], payload: &mut Vec<u8>) -> Step {
        // The frame header goes aside, the payload to the caller's buffer.
        let from = self.cursor.position();
        let (outcome, len) = self.ring.read_split(&mut self.cursor, raw, payload);
        match outcome {
            ReadOutcome::Record => {}
            ReadOutcome::Lost(n) => {
                self.advance();
                // Counted here: the records skipped are noted as if taken
                // where they are still in the ring (a subscriber past its
                // depth), so that what is missing beside them is counted
                // too; else their count is taken off the next gaps.
                let dropped =
                    crate::gaps::dropped_in_ring(&self.ring, from, n, |h| self.wanted(Some(h)));
                let missing = self.gaps.note_dropped(dropped, n, self.opts.qos.every);
                self.lost += n + missing;
                self.missing += missing;
                self.count();
                return Step::Done(Err(Error::Overflowed { lost: n + missing }));
            }
            ReadOutcome::Empty | ReadOutcome::Pending => return Step::Nothing,
        }
        let header = parse_header(raw, len);
        // Temporal scaling at the subscriber: skip the samples not asked
        // for before anything else (no blob fetched for them).
        if !self.wanted(header.as_ref().ok()) {
            self.advance();
            return Step::Again;
        }
        let h = match header {
            Ok(h) => h,
            Err(e) => {
                self.advance();
                return Step::Done(Err(e));
            }
        };
        let every = self.opts.qos.every;
        let Note::Take(missing) =
            self.gaps
                .note(h.sender, h.stream, h.seq.0, h.timestamp_ns, every)
        else {
            // Its publisher's numbering went past it (see `crate::gaps`).
            self.advance();
            return Step::Again;
        };
        let decoded = self.decode(h, payload);
        // Past the record only now: the daemon keeps a large message until
        // every gate has passed its record.
        self.advance();
        Step::Done(self.with_gap(decoded, missing, payload))
    }

    /// A decoded record's result, after `missing` messages its sender's
    /// numbering says never reached this subscription.
    fn with_gap(
        &mut self,
        decoded: Result<MessageInfo>,
        missing: u64,
        payload: &mut Vec<u8>,
    ) -> Result<MessageInfo> {
        match decoded {
            Ok(m) if missing == 0 => {
                self.received += 1;
                self.count();
                Ok(m)
            }
            Ok(m) => {
                // Report the gap first; the message comes next.
                self.backlog
                    .push_front(Message::from_parts(std::mem::take(payload), m));
                self.lost += missing;
                self.missing += missing;
                self.count();
                Err(Error::Overflowed { lost: missing })
            }
            Err(Error::Overflowed { lost }) => {
                self.lost += lost + missing;
                self.missing += missing;
                self.count();
                Err(Error::Overflowed {
                    lost: lost + missing,
                })
            }
            Err(e) => Err(self.unreadable(&e, missing)),
        }
    }

    /// A message this subscription is past but could not read (its large
    /// message's daemon went away, a malformed record): lost, counted and
    /// reported as a loss with the `missing` before it (its publisher's
    /// numbering counts it taken); why is logged.
    fn unreadable(&mut self, why: &Error, missing: u64) -> Error {
        tracing::warn!(tag = %self.ep.name, error = %why, "a message could not be read: counted lost");
        self.lost += 1 + missing;
        self.missing += missing;
        self.count();
        Error::Overflowed { lost: 1 + missing }
    }

    /// True when `receive` would return at once with a message (or a loss report).
    pub fn available(&self) -> bool {
        if !self.backlog.is_empty() || self.direct.as_ref().is_some_and(|d| d.has_queued()) {
            return true;
        }
        if self.opts.qos.every <= 1 && self.caught_up.is_empty() {
            return self.ring.available(&self.cursor);
        }
        // Scaled: look past the samples `receive` would skip.
        let mut cur = self.cursor.clone();
        let (mut raw, mut rest) = ([0u8; HEADER_LEN], Vec::new());
        loop {
            match self.ring.read_split(&mut cur, &mut raw, &mut rest) {
                (ReadOutcome::Record, len)
                    if !self.wanted(parse_header(&raw, len).ok().as_ref()) => {}
                (ReadOutcome::Record | ReadOutcome::Lost(_), _) => return true,
                (ReadOutcome::Empty | ReadOutcome::Pending, _) => return false,
            }
        }
    }

    /// Drops every queued message; returns how many.
    pub fn purge(&mut self) -> u64 {
        let pulled = std::mem::take(&mut self.backlog).len() as u64;
        let queued = self.direct.as_ref().map_or(0, |d| d.purge());
        let n = self.ring.purge(&mut self.cursor) + queued;
        self.advance();
        self.gaps.forget();
        pulled + n
    }

    fn follow_ring(&mut self) -> Result<()> {
        let g = self.ep.generation.load(Ordering::Acquire);
        if g == self.generation {
            return Ok(());
        }
        // Re-registered on a restarted daemon. A lossless subscriber holds
        // the new ring at once (until then a publisher there could lap it),
        // and tries again on the next call if that fails.
        let from = self.ep.registered_at.load(Ordering::Acquire);
        tracing::debug!(tag = %self.ep.name, generation = g, from, "subscriber follows a new ring");
        if self.opts.lossless && self.next_gate.as_ref().is_none_or(|(n, _)| *n != g) {
            let ring = self.ep.current_ring();
            let held = self.ep.take_held_gate();
            let gate = self.opts.gate(&ring, self.ep.name.as_str(), held)?;
            self.next_gate = gate.map(|gate| (g, gate));
        }
        // Finish the old ring first: records sent before our publishers moved
        // are still there.
        if !self.ring.available(&self.cursor) {
            self.ring = self.ep.current_ring();
            self.cursor = self.ring.cursor_from(from, self.opts.ring_depth());
            self.generation = g;
            self.gate = self.next_gate.take().map(|(_, gate)| gate);
        }
        Ok(())
    }

    /// Whether the frame with `header` is a sample this subscription takes:
    /// one its scaling asks for and not already handed out from a pulled
    /// history (a corrupt frame, `None`, is taken, for `decode` to report).
    fn wanted(&self, header: Option<&FrameHeader>) -> bool {
        if self.opts.qos.every <= 1 && self.caught_up.is_empty() {
            return true;
        }
        header.is_none_or(|h| {
            self.opts.qos.wants(h.seq.0)
                && self
                    .caught_up
                    .get(&h.sender)
                    .is_none_or(|&last| h.seq.0 > last)
        })
    }

    /// The message described by frame header `h` whose body the ring copy
    /// put in `buf`: the payload itself (it stays where it is: one copy in
    /// all), or a reference to a large message, fetched into `buf`.
    fn decode(&mut self, h: FrameHeader, buf: &mut Vec<u8>) -> Result<MessageInfo> {
        if h.flags & FLAG_BLOB != 0 {
            let r = BlobRef::parse(buf)
                .map_err(|e| Error::Protocol(format!("corrupt blob reference: {e}")))?;
            *buf = self.fetch_blob(r)?;
        }
        crate::describe(&h, buf)
    }

    fn fetch_blob(&self, r: BlobRef) -> Result<Vec<u8>> {
        let req = Request::GetBlob {
            tag: self.ep.tag(),
            blob_id: r.blob_id,
        };
        let reply = self.client.core.call(req, None)?;
        if is_code(&reply, ErrorCode::BlobGone) {
            return Err(Error::Overflowed { lost: 1 });
        }
        let (Response::BlobFound { len }, Some(crate::client::Fds { first: fd, .. })) = reply
        else {
            return Err(daemon_error(reply, &self.ep.name));
        };
        if len != r.len || len > crate::MAX_MESSAGE as u64 {
            return Err(Error::Protocol("blob length mismatch".into()));
        }
        let f = std::fs::File::from(fd);
        let mut out = vec![0u8; len as usize];
        // pread, not mmap: a file that shrank under us is an error, not a SIGBUS.
        f.read_exact_at(&mut out, 0)
            .map_err(|e| Error::Io(format!("reading large message: {e}")))?;
        Ok(out)
    }
}

impl SubscribeOptions {
    /// The cursor's depth: a lossless subscriber keeps a whole ring (the
    /// ring clamps a depth to its slots).
    fn ring_depth(&self) -> u32 {
        if self.lossless {
            u32::MAX
        } else {
            self.depth.unwrap_or(DEFAULT_DEPTH)
        }
    }

    /// A lossless subscriber's gate on `ring`: the one the daemon held for
    /// it at its start position since before the subscription was visible
    /// (`held`), which it moves through its seat. None held: the ring's
    /// gates were all taken.
    fn gate(&self, ring: &Ring, tag: &str, held: Option<HeldGate>) -> Result<Option<Gate>> {
        if !self.lossless {
            return Ok(None);
        }
        let no_room = || Error::NoLosslessRoom {
            tag: tag.to_owned(),
            max: MAX_LOSSLESS,
        };
        let h = held.ok_or_else(no_room)?;
        match ring.seat_gate(usize::from(h.index)) {
            Ok(g) => Ok(Some(g)),
            Err(RingError::NoGate) => Err(no_room()),
            Err(e) => Err(Error::Io(e.to_string())),
        }
    }
}

/// The frame header of a ring record of `len` bytes whose first bytes are
/// in `raw`.
fn parse_header(raw: &[u8; HEADER_LEN], len: usize) -> Result<FrameHeader> {
    if len < HEADER_LEN {
        return Err(Error::Protocol(format!(
            "corrupt frame in ring: {len} bytes, shorter than its {HEADER_LEN}-byte header"
        )));
    }
    FrameHeader::parse(raw)
        .map(|(h, _)| h)
        .map_err(|e| Error::Protocol(format!("corrupt frame in ring: {e}")))
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Some(d) = &self.direct {
            d.close();
        }
        self.ep.close(&self.client.core);
    }
}

impl Client {
    /// Subscribes to a tag; only messages sent after this call are received.
    pub fn subscribe(&self, name: &str, opts: SubscribeOptions) -> Result<Subscriber> {
        let mut qos = opts.qos;
        let direct = self.direct_socket(name, &opts);
        if let Some(d) = &direct {
            qos.direct = d.port;
        }
        let ep = self.open(
            name,
            EndpointKind::Subscriber {
                depth: opts.depth.unwrap_or(DEFAULT_DEPTH),
                qos,
                lossless: opts.lossless,
            },
            direct,
        )?;
        Subscriber::new(self.clone(), ep, opts)
    }

    /// A socket for direct delivery, if the subscription may have one: the
    /// default carrier (unicast UDP, every sample, no proxy node), on a
    /// daemon with a network. The daemon makes it (`Request::SendSocket`: a
    /// UDP socket bound to its node address, in its network namespace).
    /// Failing to get one only means the messages come through the daemon.
    fn direct_socket(&self, name: &str, opts: &SubscribeOptions) -> Option<Arc<Direct>> {
        let q = &opts.qos;
        let plain = q.carrier == Carrier::Udp && q.every <= 1 && !matches!(q.proxy, Proxy::Node(_));
        if !opts.direct || !plain {
            return None;
        }
        let tag = tagwire_wire::TagName::new(name).ok()?;
        let (Response::Ok, Some(crate::client::Fds { first: fd, .. })) =
            self.core.call(Request::SendSocket, None).ok()?
        else {
            return None;
        };
        Direct::open(std::net::UdpSocket::from(fd), self.me().node, tag, opts)
            .map_err(|e| tracing::debug!(error = %e, "no socket for direct delivery"))
            .ok()
    }

    /// Subscribes, then pulls `query` from the tag's history: the
    /// subscriber receives those messages first and then live ones, with no
    /// gap and no duplicate between the two (a late joiner catching up, like
    /// DDS's TRANSIENT_LOCAL durability).
    pub fn subscribe_with_history(
        &self,
        name: &str,
        opts: SubscribeOptions,
        query: crate::HistoryQuery,
    ) -> Result<Subscriber> {
        // Subscribe first: the pull then covers everything up to (and past)
        // where the subscription starts, and the overlap is dropped.
        let mut sub = self.subscribe(name, opts)?;
        let past = self.pull(name, query)?;
        sub.prepend(past);
        Ok(sub)
    }
}

/// How long a blocking `receive` polls the tag's ring before it sleeps,
/// `since_wait` messages after it last slept: `busy_poll` when set, else
/// `flow_poll` once the stream flows (two or more messages), else not at
/// all (a lone message's reader sleeps at once).
fn ring_spin(opts: &SubscribeOptions, since_wait: u32) -> Duration {
    opts.busy_poll.unwrap_or(if since_wait >= 2 {
        opts.flow_poll
    } else {
        Duration::ZERO
    })
}

/// What one look at a source of messages gave [`Subscriber::receive`].
enum Step {
    /// A message or an error: the call returns it.
    Done(Result<MessageInfo>),
    /// A record skipped (scaling, pulled already): look again at once.
    Again,
    /// Nothing there: look at the next source, or sleep.
    Nothing,
}

/// How long to sleep before looking again: until `deadline`, but at most
/// 200 ms, to notice a destroyed tag or a daemon restart; `Timeout` once
/// the deadline passed.
fn wait_slice(deadline: Option<Instant>) -> Result<Duration> {
    const WAKE: Duration = Duration::from_millis(200);
    let Some(d) = deadline else {
        return Ok(WAKE);
    };
    let now = Instant::now();
    if now >= d {
        return Err(Error::Timeout);
    }
    Ok((d - now).min(WAKE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flowing_stream_polls_for_flow_poll_and_busy_poll_overrides_it() {
        let d = SubscribeOptions::default();
        assert_eq!(ring_spin(&d, 0), Duration::ZERO);
        assert_eq!(ring_spin(&d, 1), Duration::ZERO);
        assert_eq!(ring_spin(&d, 2), FLOW_POLL);
        assert_eq!(ring_spin(&d, 1000), FLOW_POLL);
        let off = d.flow_poll(Duration::ZERO);
        assert_eq!(ring_spin(&off, 5), Duration::ZERO);
        let busy = d.busy_poll(Duration::from_millis(3));
        assert_eq!(ring_spin(&busy, 0), Duration::from_millis(3));
        assert_eq!(ring_spin(&busy, 5), Duration::from_millis(3));
    }
    use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum};

    #[test]
    fn a_ring_record_shorter_than_a_frame_header_or_malformed_is_a_protocol_error() {
        let h = FrameHeader {
            flags: 0,
            sender: SenderInfo {
                pid: Pid(7),
                node: NodeAddr::from_bytes([1; 16]),
            },
            stream: 0,
            seq: SeqNum(3),
            timestamp_ns: 11,
        };
        let mut raw = [0u8; HEADER_LEN];
        h.emit(&mut raw).unwrap();
        assert_eq!(parse_header(&raw, HEADER_LEN + 5).unwrap(), h);
        // The same bytes, but the record ended inside them.
        let short = parse_header(&raw, HEADER_LEN - 1).unwrap_err();
        assert!(
            matches!(&short, Error::Protocol(m) if m.contains("shorter than its 40-byte header")),
            "{short}"
        );
        raw[0] ^= 0xff;
        let bad = parse_header(&raw, HEADER_LEN).unwrap_err();
        assert!(
            matches!(&bad, Error::Protocol(m) if m.contains("corrupt frame")),
            "{bad}"
        );
    }
}
