//! The inbound half of a [`Session`]: streams from other nodes, and the
//! acknowledgements of our own.
//!
//! ```text
//! handle_datagram ─▶ decode ─┬─ AckNack ─▶ our stream's Writer (outbound)
//!                            ├─ Heartbeat ─▶ Reader ─▶ AckNack (+ credit)
//!                            └─ Data / Batch
//!                                 │ tag without credit: refused
//!                                 ├─ reliable: Reader (order, once, NACK)
//!                                 └─ best effort: newer only, gaps counted
//!                                        ▼
//!                                 Reassembler ─▶ poll_deliver
//! ```
//!
//! Streams are told apart by the sender's address and the stream id: the
//! port is left out, because a publisher's own first copies
//! (`FLAG_DIRECT`) come from its socket, not from its node's delivery
//! port. Acknowledgements go where the stream's other datagrams come from;
//! until one came, they wait (the writer's heartbeat brings one).

use std::net::SocketAddr;
use std::time::Instant;

use tagwire_reliable::{Arrival, BestEffort, Reader, ReaderConfig, Reassembler, ReassemblerConfig};
use tagwire_wire::datagram::{AckNack, Body, Datagram, Heartbeat, FLAG_DIRECT, FLAG_RELIABLE};
use tagwire_wire::TagName;

use crate::{Carrier, Class, Delivery, ReceiveEvent as Event, ReceiveSession, Transmit};

/// Most streams of tags that moved away remembered (their heartbeats go
/// unanswered); more are treated as new.
const MAX_AWAY_STREAMS: usize = 1024;

/// One stream from another node.
#[derive(Debug)]
pub(crate) struct InStream {
    pub(crate) reader: Reader,
    pub(crate) best: BestEffort,
    pub(crate) reasm: Reassembler,
    /// Its tag, once a data datagram named it.
    pub(crate) tag: Option<TagName>,
    /// Reliable (or best effort), once a datagram said.
    pub(crate) reliable: Option<bool>,
    pub(crate) last: Instant,
    /// Where acknowledgements go (see the module documentation).
    pub(crate) reply: Option<SocketAddr>,
    /// The credit our last acknowledgement carried.
    advertised: Option<u32>,
}

impl InStream {
    pub(crate) fn new(reader: ReaderConfig, reasm: ReassemblerConfig, now: Instant) -> Self {
        Self {
            // A stream is created for a receiver that already exists, so it
            // is wanted from its first datagram: when that one was lost, the
            // reader asks for it rather than starting later.
            reader: Reader::with_start(reader, 1),
            // Best-effort streams are numbered from 1 too: datagrams lost
            // before the first one that arrives are counted (found by the
            // simulator, sim_best_effort seed 11).
            best: BestEffort::with_start(1),
            reasm: Reassembler::new(reasm),
            tag: None,
            reliable: None,
            last: now,
            reply: None,
            advertised: None,
        }
    }
}

impl InStream {
    /// Hands what the reader held back and a datagram made deliverable
    /// (the gap before it filled, or given up on) to `out`.
    fn take_buffered(
        &mut self,
        from: SocketAddr,
        out: &mut std::collections::VecDeque<Delivery>,
        spare: &mut Vec<Vec<u8>>,
    ) {
        while let Some(buffered) = self.reader.poll_event() {
            let Ok(g) = Datagram::decode(&buffered) else {
                continue;
            };
            let Some((_, _, name)) = g.data() else {
                continue;
            };
            let tag = match &self.tag {
                Some(t) if t.as_str() == name => t.clone(),
                _ => match TagName::new(name) {
                    Ok(t) => t,
                    Err(_) => continue,
                },
            };
            take(&mut self.reasm, &g.body, &tag, from, out, spare);
        }
    }
}

impl ReceiveSession {
    /// One datagram from `from` (the delivery port's, or a TCP frame's
    /// body). Whole messages come out of [`ReceiveSession::poll_deliver`],
    /// the acknowledgements they make due out of
    /// [`ReceiveSession::poll_transmit`]. An acknowledgement is another
    /// role's: it comes back, with its stream id, for the node's sending
    /// session ([`crate::SendSession::handle_ack`]).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Option<(u64, AckNack)> {
        let Ok(dg) = Datagram::decode(bytes) else {
            self.events.push_back(Event::Malformed { from });
            return None;
        };
        self.handle_checked(now, from, dg)
    }

    /// [`ReceiveSession::handle_datagram`] for a datagram the caller has
    /// already checked (to route it by kind or tag): it is not checked
    /// twice.
    pub fn handle_checked(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dg: Datagram<'_>,
    ) -> Option<(u64, AckNack)> {
        let key = (from.ip(), dg.stream);
        match dg.body {
            Body::AckNack(a) => return Some((dg.stream, a.to_acknack())),
            Body::Heartbeat(h) => self.handle_heartbeat(now, from, key, h),
            Body::Data(_) | Body::Batch(_) => {
                let (seq, flags, name) = dg.data()?;
                // The name the last data datagram gave serves while the
                // next ones give the same: a stream's datagrams neither
                // allocate a name nor touch its reference count (its
                // atomic increments and decrements were a third of this
                // function's time on a flat-out 8 KiB stream).
                let tag = match self.last_tag.take() {
                    Some(t) if t.as_str() == name => t,
                    // (The view checked the name: `new` does not fail.)
                    _ => TagName::new(name).ok()?,
                };
                self.handle_data(now, from, key, (seq, flags, &tag), &dg.body);
                self.last_tag = Some(tag);
            }
        }
        None
    }

    /// A heartbeat of stream `key`, from `from`.
    fn handle_heartbeat(
        &mut self,
        now: Instant,
        from: SocketAddr,
        key: (std::net::IpAddr, u64),
        Heartbeat { first, last }: Heartbeat,
    ) {
        if self.away_streams.contains_key(&key) {
            return; // (see `Event::Away`)
        }
        // A heartbeat may be the first we hear of a stream whose first
        // datagrams were all lost: its answer asks for them.
        let (reader, reasm) = (self.config.reader, self.config.reassembler);
        let s = self
            .streams
            .entry(key)
            .or_insert_with(|| InStream::new(reader, reasm, now));
        s.last = now;
        s.reply = Some(from);
        s.reader.handle_heartbeat(now, first, last);
        // A heartbeat that gives up on a gap makes what was buffered after
        // it deliverable (found by the simulator, seed 684).
        s.take_buffered(from, &mut self.deliveries, &mut self.spare);
        self.ack(now, key);
    }

    /// A data or batch datagram (`body`) of stream
    /// `key`: its seq, flags and tag.
    fn handle_data(
        &mut self,
        now: Instant,
        from: SocketAddr,
        key: (std::net::IpAddr, u64),
        (seq, flags, tag): (u64, u8, &TagName),
        body: &Body<'_>,
    ) {
        if self.gone_away(key, tag, from) {
            return;
        }
        if let Some(what) = self.over_peer_bound(key, body) {
            self.events.push_back(Event::PeerBound { from, what });
            return;
        }
        let s = data_stream(&mut self.streams, &self.config, key, now);
        s.last = now;
        if flags & FLAG_DIRECT == 0 {
            s.reply = Some(from);
        }
        if s.tag.is_none() {
            s.tag = Some(tag.clone());
        }
        s.reliable.get_or_insert(flags & FLAG_RELIABLE != 0);
        if self.credit.get(tag) == Some(&0) {
            self.refuse(now, key, tag, from, flags);
            return;
        }
        if flags & FLAG_RELIABLE == 0 {
            let before = s.best.stats().lost;
            if !s.best.handle_seq(seq) {
                return; // older than what we delivered: stale
            }
            let count = s.best.stats().lost - before;
            if count > 0 {
                self.events.push_back(Event::BestEffortLost {
                    tag: tag.clone(),
                    from,
                    count,
                });
            }
            take(
                &mut s.reasm,
                body,
                tag,
                from,
                &mut self.deliveries,
                &mut self.spare,
            );
            return;
        }
        let bytes = match body {
            Body::Data(d) => d.as_bytes(),
            Body::Batch(b) => b.as_bytes(),
            Body::Heartbeat(_) | Body::AckNack(_) => return,
        };
        let arrival = s.reader.handle_data(now, seq, bytes);
        if flags & FLAG_DIRECT != 0 && matches!(arrival, Arrival::Deliver | Arrival::Buffered) {
            self.events
                .push_back(Event::DirectReceived { tag: tag.clone() });
        }
        if arrival == Arrival::Deliver {
            take(
                &mut s.reasm,
                body,
                tag,
                from,
                &mut self.deliveries,
                &mut self.spare,
            );
        }
        s.take_buffered(from, &mut self.deliveries, &mut self.spare);
        // Answered once the caller has handed in what it received at once
        // (`poll_transmit`): one acknowledgement per burst of datagrams (a
        // receive of coalesced ones), not one per `ack_every` of them, each
        // superseding the one before.
        if !self.ack_due.contains(&key) {
            self.ack_due.push(key);
        }
    }

    /// Data of `tag`, which has no room here: a best-effort datagram is
    /// just lost (the next one's gap counts it); a reliable one comes again
    /// once there is room. Its stream knows its tag now, so its heartbeats
    /// are answered with no credit and no NACK.
    fn refuse(
        &mut self,
        now: Instant,
        key: (std::net::IpAddr, u64),
        tag: &TagName,
        from: SocketAddr,
        flags: u8,
    ) {
        if flags & FLAG_RELIABLE != 0 {
            self.events.push_back(Event::Refused {
                tag: tag.clone(),
                from,
            });
            self.ack(now, key);
        }
    }

    /// Whether `tag`'s streams moved to another session of this node: its
    /// data, unacknowledged here, goes again, there ([`Event::Away`]).
    fn gone_away(&mut self, key: (std::net::IpAddr, u64), tag: &TagName, from: SocketAddr) -> bool {
        if !self.away.contains(tag) {
            return false;
        }
        if self.away_streams.len() < MAX_AWAY_STREAMS {
            self.away_streams.insert(key, tag.clone());
        }
        self.events.push_back(Event::Away {
            tag: tag.clone(),
            from,
        });
        true
    }

    /// Sets the room for `tag`'s messages here (a lossless subscriber's
    /// ring and held-back queue), carried to the senders in every
    /// acknowledgement; `None`: no limit. At 0, data for the tag is
    /// refused. Room growing from what was last advertised is announced
    /// at once, with the datagrams still missing.
    pub fn set_credit(&mut self, now: Instant, tag: &TagName, room: Option<u32>) {
        let before = self.credit.get(tag).copied();
        if before == room {
            return;
        }
        match (room, self.credit.get_mut(tag)) {
            (Some(r), Some(c)) => *c = r,
            (Some(r), None) => {
                self.credit.insert(tag.clone(), r);
            }
            (None, _) => {
                self.credit.remove(tag);
            }
        }
        let share = self.share(tag);
        let keys: Vec<_> = self
            .streams
            .iter()
            .filter(|(_, s)| s.tag.as_ref() == Some(tag))
            .filter(|(_, s)| match (s.advertised, share) {
                (Some(_), None) => true,
                (Some(a), Some(r)) => r > a && (a == 0 || r >= a.saturating_mul(2)),
                (None, _) => false,
            })
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            if let Some(s) = self.streams.get_mut(&k) {
                s.reader.request_ack();
            }
            self.ack(now, k);
        }
    }

    /// What one reliable stream of `tag` may send: the room shared among
    /// the tag's streams (senders on several nodes each get a part, or
    /// together they would overrun it; below one each, they wait for the
    /// subscriber to read).
    fn share(&self, tag: &TagName) -> Option<u32> {
        let room = *self.credit.get(tag)?;
        let n = self
            .streams
            .values()
            .filter(|s| s.tag.as_ref() == Some(tag) && s.reader.received_through() > 0)
            .count()
            .max(1);
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        Some(room / n)
    }

    /// The room last set for `tag` (`None`: no limit).
    pub fn credit(&self, tag: &TagName) -> Option<u32> {
        self.credit.get(tag).copied()
    }

    /// The acknowledgements data datagrams made due (see `handle_datagram`).
    pub(crate) fn ack_bursts(&mut self, now: Instant) {
        // (Handed back emptied: its memory serves the next bursts.)
        let mut due = std::mem::take(&mut self.ack_due);
        for key in due.drain(..) {
            self.ack(now, key);
        }
        self.ack_due = due;
    }

    /// Rate-limited NACKs that fell due.
    pub(crate) fn poll_inbound(&mut self, now: Instant) {
        let keys: Vec<_> = self
            .streams
            .iter()
            .filter(|(_, s)| s.reader.poll_timeout().is_some_and(|t| t <= now))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.ack(now, k);
        }
    }

    pub(crate) fn inbound_timeout(&self) -> Option<Instant> {
        let idle = self.config.idle_stream;
        self.streams
            .values()
            .flat_map(|s| [s.reader.poll_timeout(), Some(s.last + idle)])
            .flatten()
            .min()
    }

    /// Forgets streams silent for `idle_stream`.
    /// Which of its bounds here a data datagram from `key`'s sending node
    /// would pass: another stream, or another partial message beyond the
    /// bytes its partial messages have reserved.
    fn over_peer_bound(
        &self,
        key: (std::net::IpAddr, u64),
        body: &Body<'_>,
    ) -> Option<&'static str> {
        let stream = self.streams.get(&key);
        let peer = || self.streams.iter().filter(move |((ip, _), _)| *ip == key.0);
        if stream.is_none() && peer().count() >= self.config.max_peer_streams {
            return Some("streams per sending node");
        }
        let Body::Data(d) = body else { return None };
        if stream.is_some_and(|s| !s.reasm.would_begin(d)) || d.frags() <= 1 {
            return None;
        }
        let reserved: usize = peer().map(|(_, s)| s.reasm.reserved_bytes()).sum();
        (reserved + d.msg_len() as usize > self.config.max_peer_reassembly)
            .then_some("bytes of partial messages per sending node")
    }

    pub(crate) fn expire_inbound(&mut self, now: Instant) {
        let idle = self.config.idle_stream;
        self.streams.retain(|_, s| now < s.last + idle);
    }

    /// Queues what the stream's reader has to say, with the tag's credit,
    /// once it knows where to: until then it stays due.
    pub(crate) fn ack(&mut self, now: Instant, key: (std::net::IpAddr, u64)) {
        let Some(s) = self.streams.get_mut(&key) else {
            return;
        };
        let Some(to) = s.reply else {
            return;
        };
        let credit = s.tag.clone().and_then(|t| self.share(&t));
        let Some(s) = self.streams.get_mut(&key) else {
            return;
        };
        while let Some(mut a) = s.reader.poll_transmit(now) {
            a.credit = credit;
            if credit == Some(0) {
                // Asking for resends a full receiver would refuse brings
                // back whole windows: the window update asks for them.
                a.missing.clear();
                // (Nor does it say what it holds beyond.)
                a.known_through = a.ack_through;
            }
            s.advertised = credit;
            // (A buffer given back, as the runtime gives sent ones back.)
            let mut bytes = crate::spare_buffer(&mut self.spare);
            AckNack::encode(&a, key.1, &mut bytes);
            self.transmits.push_back(Transmit {
                dest: to,
                carrier: Carrier::Udp,
                class: Class::Control,
                priority: tagwire_wire::Priority::Normal,
                bytes: bytes.into(),
            });
        }
    }
}

/// Hands the messages a data datagram completes (a batch's, or a
/// fragmented message's once whole) to `out`.
fn take(
    reasm: &mut Reassembler,
    body: &Body<'_>,
    tag: &TagName,
    from: SocketAddr,
    out: &mut std::collections::VecDeque<Delivery>,
    spare: &mut Vec<Vec<u8>>,
) {
    match body {
        Body::Data(data) => {
            if let Some(m) = reasm.handle_fragment_with(data, tag, spare) {
                out.push_back(Delivery {
                    tag: m.tag,
                    from,
                    header: m.header,
                    payload: m.payload,
                });
            }
        }
        Body::Batch(b) => {
            for (header, payload) in b.messages() {
                // Into a buffer a reader gave back (`ReceiveSession::recycle`),
                // if there is one: no allocation per small message.
                out.push_back(Delivery {
                    tag: tag.clone(),
                    from,
                    header,
                    payload: crate::copied(spare, payload),
                });
            }
        }
        Body::Heartbeat(_) | Body::AckNack(_) => {}
    }
}

/// The inbound stream `key` that data arrived on, new if it is the first
/// (a best-effort one starting at its first datagram where the config
/// says so).
fn data_stream<'a>(
    streams: &'a mut foldhash::HashMap<(std::net::IpAddr, u64), InStream>,
    config: &crate::Config,
    key: (std::net::IpAddr, u64),
    now: Instant,
) -> &'a mut InStream {
    streams.entry(key).or_insert_with(|| {
        let mut s = InStream::new(config.reader, config.reassembler, now);
        if config.start_at_first {
            s.best = BestEffort::new();
        }
        s
    })
}
