//! Send access: the delivery service's send path.
//!
//! `send` reads the clock (see `clock.rs`), writes the 40-byte frame header and the payload into
//! the tag's ring in one copy, and bumps the doorbell. No lock, no daemon, no
//! system call unless a subscriber sleeps. When a reliable receiver on another
//! node is a whole ring behind, `send` waits for it (bounded, see
//! `Publisher::set_send_timeout`): that is the network window pushing back.
//! Messages larger than a slot go into a sealed memfd handed to the daemon (the
//! blob path), and the slot carries a reference to it.
//!
//! **First copies to other nodes.** When the daemon's forwarder for the tag is
//! idle it offers the next record's first network transmission to whoever
//! writes that record (`tagwire_shm::Ticket`). `send` takes the offer between
//! writing the record and ringing the doorbell, and sends the datagrams
//! itself (the datagram built by the session core, `tagwire_session::DirectCopy`),
//! from the daemon's send socket (`Request::SendSocket`): the
//! message's trip to another node then waits for no daemon thread to wake.
//! The forwarder keeps the message for resends as if it had sent it.
//! With a domain key (`tagwire daemon --key`) the publisher seals those
//! datagrams itself, with its tag's key (`Request::TagKey`, given only to a
//! client with send access: it can forge nothing it could not publish) and
//! the counters the forwarder reserved for it in the ticket.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tagwire_session::{DirectCopy, TicketEntry};
use tagwire_shm::{Ring, RingError};
use tagwire_wire::control::{ErrorCode, Request, Response};
use tagwire_wire::frame::{BlobRef, FrameHeader, FLAG_BLOB, FLAG_EXT, HEADER_LEN};
use tagwire_wire::instance::{Ext, InstanceState, Key};
use tagwire_wire::Domain;
use tagwire_wire::{SenderInfo, SeqNum};

use crate::client::{borrow, daemon_error, is_code, Client, Endpoint, EndpointKind};
use crate::clock::SendClock;
use crate::{Error, Result, MAX_MESSAGE};

/// The next publisher's stream number in this process: with the pid and
/// node it names the publisher's sequence of numbers, which lets subscribers
/// tell a missing message from another publisher's (see `gaps`).
static NEXT_STREAM: AtomicU16 = AtomicU16::new(1);

/// Send access to one tag. Dropping it releases the access.
#[derive(Debug)]
pub struct Publisher {
    client: Client,
    ep: Arc<Endpoint>,
    ring: Ring,
    generation: u64,
    seq: u64,
    sender: SenderInfo,
    header: [u8; HEADER_LEN],
    send_timeout: Duration,
    clock: SendClock,
    /// Ownership strength sent with each message (`set_strength`).
    strength: Option<i32>,
    /// Inside `batch`: records go in without waking readers.
    quiet: bool,
    /// How this publisher sends first copies itself (global tags, on a
    /// daemon with a network).
    direct: Option<Direct>,
    /// This publisher's number among the process's (frame header).
    stream: u16,
    /// The large message this publisher stored last (0: none), which the
    /// next store tells the daemon it is done with.
    last_blob: u64,
    /// The deadline it offers (`offer_deadline`).
    offered: Option<Box<crate::offered::Offered>>,
}

/// A publisher's means to take the send ticket.
#[derive(Debug)]
struct Direct {
    sock: Arc<UdpSocket>,
    copy: DirectCopy,
    buf: Vec<u8>,
    /// With a domain key: the tag's key, its id and whether to encrypt.
    seal: Option<TagSeal>,
    sealed: Vec<u8>,
    /// With a domain key, the data keys of other nodes' direct receivers
    /// (by socket and grant, as the ticket names them; `None`: the daemon
    /// gave none, the forwarder sends those first copies).
    holders: HashMap<(SocketAddr, u64), Option<tagwire_auth::DatagramKey>>,
    /// Direct receivers named by a ticket whose key is to be asked for.
    wanted: Vec<(SocketAddr, u64)>,
    /// A ticket named another domain key generation than the tag key's (a
    /// key roll switched): the tag key is to be asked for again.
    stale: bool,
}

/// Direct receivers' keys a publisher remembers (past it, it asks again).
const MAX_HOLDER_KEYS: usize = 64;

/// What seals a publisher's own datagrams on a daemon with a domain key.
#[derive(Debug)]
struct TagSeal {
    key: tagwire_auth::DatagramKey,
    id: u64,
    encrypt: bool,
}

/// How the daemon wants this tag's first copies sent: `Some(None)` plain
/// (no key), `Some(Some(seal))` sealed, `None` not at all (leave them to
/// the forwarder: the daemon has a key but gave us none).
fn tag_seal(client: &Client, tag: &tagwire_wire::TagName) -> Option<Option<TagSeal>> {
    match client.tag_key(tag) {
        Ok(None) => Some(None),
        Ok(Some(k)) => Some(Some(TagSeal {
            key: k.datagram_key(),
            id: tagwire_auth::tag_id(tag.as_str()),
            encrypt: k.encrypt,
        })),
        Err(e) => {
            tracing::debug!(tag = %tag, error = %e, "no tag key: the forwarder sends every first copy");
            None
        }
    }
}

impl Direct {
    /// Sends record `index` (`header`, `payload`) if the forwarder offers it
    /// to us: the datagram the session core builds for it, to each offered
    /// node, numbered as offered.
    fn send(
        &mut self,
        ring: &Ring,
        index: u64,
        tag: &tagwire_wire::TagName,
        header: &FrameHeader,
        payload: &[u8],
    ) {
        let Some(claim) = ring.ticket().claim(index) else {
            return;
        };
        if self.copy.prepare(tag, header, payload) > claim.max_len() {
            claim.decline();
            return;
        }
        // Under a key, a direct receiver on another node (its grant above
        // the port) takes only datagrams sealed for its holding: without
        // that key (not asked for yet, or refused), the forwarder sends
        // every copy of this record; a missing key is asked for after it
        // (`fetch_keys`).
        // During a key roll the ticket says which generation seals: a key
        // of the other one is asked for again after the record is out.
        if let Some(seal) = &self.seal {
            let mut decline = false;
            for e in claim.dests().filter_map(TicketEntry::from_words) {
                if e.member == 0 {
                    if e.odd != seal.key.odd() {
                        self.stale = true;
                        decline = true;
                    }
                    continue;
                }
                let at = (e.dest.addr, e.member);
                match self.holders.get(&at) {
                    Some(Some(k)) if k.odd() == e.odd => {}
                    Some(None) if !self.stale => decline = true,
                    _ => {
                        self.holders.remove(&at);
                        self.wanted.push(at);
                        decline = true;
                    }
                }
            }
            if decline {
                claim.decline();
                return;
            }
        }
        // (Words another process wrote: an entry that names no address is
        // skipped, and the forwarder's window repairs the gap.)
        for e in claim.dests().filter_map(TicketEntry::from_words) {
            self.copy.encode(tag, &e.dest, &mut self.buf);
            let wire = match &self.seal {
                Some(s) if e.member != 0 => {
                    let Some(Some(k)) = self.holders.get(&(e.dest.addr, e.member)) else {
                        // (Declined above: not reached.)
                        continue;
                    };
                    k.seal_direct_into(e.counter, s.encrypt, s.id, &self.buf, &mut self.sealed);
                    &self.sealed
                }
                Some(s) => {
                    s.key
                        .seal_tagged_into(e.counter, s.encrypt, s.id, &self.buf, &mut self.sealed);
                    &self.sealed
                }
                None => &self.buf,
            };
            let tos = e.dest.priority.tos();
            let _ = tagwire_net::gso::send_parts_classed(
                &self.sock,
                e.dest.addr,
                &[wire],
                wire.len(),
                tos,
            );
        }
    }

    /// Asks the daemon for the keys of the direct receivers a declined
    /// ticket named (after the record is out).
    fn fetch_keys(&mut self, client: &Client, tag: &tagwire_wire::TagName) {
        if std::mem::take(&mut self.stale) {
            if let Some(Some(seal)) = tag_seal(client, tag) {
                self.seal = Some(seal);
            }
            // (A receiver the daemon gave no key for may have one now.)
            self.holders.retain(|_, k| k.is_some());
        }
        if self.wanted.is_empty() {
            return;
        }
        if self.holders.len() + self.wanted.len() > MAX_HOLDER_KEYS {
            self.holders.clear();
        }
        for (to, member) in std::mem::take(&mut self.wanted) {
            let key = match client.direct_key(tag, to, member) {
                Ok(Some(k)) => Some(k.datagram_key()),
                Ok(None) => None,
                Err(e) => {
                    tracing::debug!(%to, error = %e, "no key for a direct receiver: the forwarder sends its copies");
                    None
                }
            };
            self.holders.insert((to, member), key);
        }
    }
}

impl Client {
    /// Gets send access to a tag.
    pub fn publisher(&self, name: &str) -> Result<Publisher> {
        self.publisher_with(name, crate::PublishOptions::default())
    }

    /// Gets send access to a tag, asking `opts` of the connections this
    /// node sends it on (a packet class, a thread policy).
    pub fn publisher_with(&self, name: &str, opts: crate::PublishOptions) -> Result<Publisher> {
        let kind = EndpointKind::Publisher { qos: opts.qos() };
        let ep = self.open(name, kind, None)?;
        Ok(Publisher::new(self.clone(), ep))
    }
}

/// Longest wait between two offers of a large message to a full store
/// (the wake-up is the slowest reader moving on; this bounds it when what
/// holds the store is not a reader, e.g. a stalled publisher's message).
const BLOB_RETRY: Duration = Duration::from_millis(5);

/// How long `send` waits, by default, for a full network window to open.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(1);

impl Publisher {
    pub(crate) fn new(client: Client, ep: Arc<Endpoint>) -> Self {
        let ring = ep.current_ring();
        let generation = ep.generation.load(Ordering::Acquire);
        let sender = client.me();
        let direct = (ep.domain == Domain::Global)
            .then(|| client.send_socket())
            .flatten()
            .and_then(|sock| {
                Some(Direct {
                    sock,
                    copy: DirectCopy::default(),
                    buf: Vec::new(),
                    seal: tag_seal(&client, &ep.name)?,
                    sealed: Vec::new(),
                    holders: HashMap::new(),
                    wanted: Vec::new(),
                    stale: false,
                })
            });
        Self {
            client,
            ep,
            ring,
            generation,
            seq: 0,
            sender,
            header: [0; HEADER_LEN],
            send_timeout: DEFAULT_SEND_TIMEOUT,
            clock: SendClock::new(),
            strength: None,
            offered: None,
            quiet: false,
            direct,
            stream: NEXT_STREAM.fetch_add(1, Ordering::Relaxed),
            last_blob: 0,
        }
    }

    /// How long `send` may wait when a reliable receiver on another node is a
    /// whole ring behind (its network window is full) before failing with
    /// [`Error::WindowFull`]. `Duration::ZERO` fails at once. Default 1 s.
    /// A lossless subscriber a ring behind holds `send` back the same way;
    /// other receivers on this node never do.
    pub fn set_send_timeout(&mut self, timeout: Duration) {
        self.send_timeout = timeout;
    }

    /// The tag's name.
    pub fn tag(&self) -> &str {
        self.ep.name.as_str()
    }

    /// Sequence number of the last message sent (0 before the first).
    pub fn last_seq(&self) -> SeqNum {
        SeqNum(self.seq)
    }

    /// Largest message that takes the shared-memory fast path.
    pub fn max_fast_message(&self) -> usize {
        self.ring.max_record().saturating_sub(HEADER_LEN)
    }

    /// Sends one message to every subscriber of the tag, on this node and (with
    /// the many-nodes daemon) elsewhere. Returns its sequence number.
    pub fn send(&mut self, payload: &[u8]) -> Result<SeqNum> {
        let ext = Ext {
            strength: self.strength,
            ..Ext::default()
        };
        self.send_frame(payload, &ext, None)
    }

    /// Sends a sample of instance `key` (see [`Key`]: a key of at most 16
    /// bytes names itself, a longer one its MD5; for a tag mapped to a DDS
    /// topic, the key fields serialized big-endian). Subscribers read the
    /// key in [`Message::key`](crate::Message::key); exclusive ownership,
    /// deadlines and minimum separation apply per instance.
    pub fn send_keyed(&mut self, key: &[u8], payload: &[u8]) -> Result<SeqNum> {
        self.send_instance(Key::of(key), InstanceState::Alive, payload)
    }

    /// Says that instance `key` is deleted (a DDS dispose): subscribers get
    /// an empty message in state [`InstanceState::Disposed`].
    pub fn dispose(&mut self, key: &[u8]) -> Result<SeqNum> {
        self.send_instance(Key::of(key), InstanceState::Disposed, &[])
    }

    /// Says that this publisher writes instance `key` no more (a DDS
    /// unregister): an exclusive owner gives the instance up at once.
    pub fn unregister(&mut self, key: &[u8]) -> Result<SeqNum> {
        self.send_instance(Key::of(key), InstanceState::Unregistered, &[])
    }

    fn send_instance(&mut self, key: Key, state: InstanceState, payload: &[u8]) -> Result<SeqNum> {
        let ext = Ext {
            key: Some(key),
            state,
            strength: self.strength,
            origin: None,
        };
        self.send_frame(payload, &ext, None)
    }

    /// Runs `f` with this publisher, waking sleeping subscribers once at the
    /// end rather than once per message: for a writer with many messages at
    /// once (a gateway handing on a datagram's samples). Subscribers see
    /// each message as soon as it is written if they are awake, and are
    /// woken at the latest when `f` returns, or when a send has to wait for
    /// a lossless one.
    pub fn batch<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.quiet = true;
        let r = f(self);
        self.quiet = false;
        self.ring.wake_readers();
        r
    }

    /// This publisher's ownership strength, sent with each message from now
    /// on: a subscriber with [`SubscribeOptions::exclusive`](crate::SubscribeOptions::exclusive)
    /// takes each instance from its strongest live publisher only. `None`
    /// (the default) is strength 0, not sent.
    pub fn set_strength(&mut self, strength: Option<i32>) {
        self.strength = strength;
    }

    /// Sends a message with everything a gateway carries across: the
    /// instance, its state, the DDS writer it came from, and the time the
    /// writer stamped it with (`None`: now). `ext.strength` unset takes this
    /// publisher's.
    pub fn send_with(
        &mut self,
        payload: &[u8],
        ext: &Ext,
        timestamp: Option<std::time::SystemTime>,
    ) -> Result<SeqNum> {
        let ts = timestamp.map(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        });
        let ext = Ext {
            strength: ext.strength.or(self.strength),
            ..*ext
        };
        self.send_frame(payload, &ext, ts)
    }

    /// Offers a deadline: each instance this publisher writes (messages
    /// without a key are one instance) should get a sample at least every
    /// `period`. [`Publisher::missed_deadlines`] says which did not. `None`
    /// offers none (the default). A dispose or unregister ends an
    /// instance's deadline. Subscribers ask for their own
    /// ([`SubscribeOptions::deadline`](crate::SubscribeOptions::deadline)).
    pub fn offer_deadline(&mut self, period: Option<Duration>) {
        self.offered = period
            .filter(|p| !p.is_zero())
            .map(|p| Box::new(crate::offered::Offered::new(p)));
    }

    /// The instances this publisher left without a sample for a whole
    /// offered deadline period since the last call, one entry per period
    /// missed as seen when it sends or asks (periods that end while it does
    /// neither are one entry; `None`: messages without a key), oldest first, and how many
    /// older ones were dropped uncounted in the list (at most 4096 are kept
    /// between calls).
    pub fn missed_deadlines(&mut self) -> (Vec<Option<Key>>, u64) {
        match self.offered.as_mut() {
            Some(o) => o.missed(Instant::now()),
            None => (Vec::new(), 0),
        }
    }

    /// Sends `payload` behind the extension block `ext` (none if it is
    /// empty), stamped `timestamp_ns` (else now), and notes it for the
    /// offered deadline.
    fn send_frame(
        &mut self,
        payload: &[u8],
        ext: &Ext,
        timestamp_ns: Option<u64>,
    ) -> Result<SeqNum> {
        let sent = self.send_frame_inner(payload, ext, timestamp_ns)?;
        if let Some(o) = self.offered.as_mut() {
            o.sent(Instant::now(), ext.key, ext.state);
        }
        Ok(sent)
    }

    fn send_frame_inner(
        &mut self,
        payload: &[u8],
        ext: &Ext,
        timestamp_ns: Option<u64>,
    ) -> Result<SeqNum> {
        let framed;
        let (payload, flags) = if ext.is_empty() {
            (payload, 0)
        } else {
            let mut b = Vec::with_capacity(ext.len() + payload.len());
            ext.encode(&mut b);
            b.extend_from_slice(payload);
            framed = b;
            (framed.as_slice(), FLAG_EXT)
        };
        if self.ep.destroyed.load(Ordering::Acquire) {
            return Err(Error::TagDestroyed(self.ep.name.to_string()));
        }
        self.follow_restart();
        if payload.len() > MAX_MESSAGE {
            return Err(Error::TooLarge {
                len: payload.len(),
                max: MAX_MESSAGE,
            });
        }
        self.seq += 1;
        let fast = payload.len() <= self.max_fast_message();
        let mut h = FrameHeader {
            flags,
            sender: self.sender,
            stream: self.stream,
            seq: SeqNum(self.seq),
            timestamp_ns: timestamp_ns.unwrap_or_else(|| self.clock.now_ns()),
        };
        let res = if fast {
            let _ = h.emit(&mut self.header);
            let (ring, direct, tag) = (&self.ring, &mut self.direct, &self.ep.name);
            let then = |i| {
                if let Some(d) = direct.as_mut() {
                    d.send(ring, i, tag, &h, payload);
                }
            };
            let parts = [&self.header[..], payload];
            let res = if self.quiet {
                ring.publish_gated_quietly_then(&parts, self.send_timeout, then)
            } else {
                ring.publish_gated_then(&parts, self.send_timeout, then)
            };
            if let Some(d) = direct {
                d.fetch_keys(&self.client, tag);
            }
            res
        } else {
            let start = Instant::now();
            let blob = match self.store_blob(payload, start) {
                Ok(b) => b,
                Err(e) => {
                    self.seq -= 1;
                    return Err(e);
                }
            };
            h.flags |= FLAG_BLOB;
            let _ = h.emit(&mut self.header);
            let left = self.send_timeout.saturating_sub(start.elapsed());
            self.ring
                .publish_gated(&[&self.header, &blob.to_bytes()], left)
        };
        match res {
            Ok(_) => Ok(SeqNum(self.seq)),
            Err(e) => {
                // Nothing was published: the number is not used.
                self.seq -= 1;
                Err(match e {
                    RingError::TooLarge { len, max } => Error::TooLarge { len, max },
                    RingError::Full { waited } => Error::WindowFull {
                        tag: self.ep.name.to_string(),
                        waited,
                    },
                    e => Error::Io(e.to_string()),
                })
            }
        }
    }

    /// After a daemon restart the client re-registered this publisher onto
    /// a new ring, with a new identity and new keys: take them.
    fn follow_restart(&mut self) {
        let g = self.ep.generation.load(Ordering::Acquire);
        if g == self.generation {
            return;
        }
        self.ring = self.ep.current_ring();
        self.generation = g;
        self.sender = self.client.me();
        self.last_blob = 0;
        if let Some(d) = self.direct.as_mut() {
            match tag_seal(&self.client, &self.ep.name) {
                Some(seal) => d.seal = seal,
                None => self.direct = None,
            }
        }
    }

    /// Hands `payload` to the daemon in a sealed memfd. While the daemon's
    /// store for the tag is full of large messages a lossless reader still
    /// needs, tries again each time the slowest reader of the ring moves on
    /// (at least every 5 ms) until the send timeout, counted from `start`,
    /// then fails with `WindowFull`.
    fn store_blob(&mut self, payload: &[u8], start: Instant) -> Result<BlobRef> {
        let io = |e: std::io::Error| Error::Io(format!("large message memfd: {e}"));
        // Sealed: readers can trust the length and contents will not change.
        let fd: OwnedFd = tagwire_unix::sealed_memfd("tagwire-blob", payload).map_err(io)?;
        loop {
            let req = Request::PutBlob {
                tag: self.ep.tag(),
                len: payload.len() as u64,
                done: self.last_blob,
            };
            match self.client.core.call(req, Some(borrow(&fd)))? {
                (Response::BlobStored { blob_id }, _) => {
                    self.last_blob = blob_id;
                    return Ok(BlobRef {
                        blob_id,
                        len: payload.len() as u64,
                    });
                }
                reply if is_code(&reply, ErrorCode::BlobsHeld) => {
                    self.last_blob = 0;
                    let waited = start.elapsed();
                    if waited >= self.send_timeout {
                        return Err(Error::WindowFull {
                            tag: self.ep.name.to_string(),
                            waited,
                        });
                    }
                    self.ring
                        .wait_lowest_gate_moves(BLOB_RETRY.min(self.send_timeout - waited));
                }
                other => return Err(daemon_error(other, &self.ep.name)),
            }
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.ep.close(&self.client.core);
    }
}
