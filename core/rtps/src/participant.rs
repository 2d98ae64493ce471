//! A whole DDS domain participant, sans-IO: SPDP finds the other
//! participants, SEDP announces this one's writers and readers and learns
//! theirs, and every local endpoint is matched with every remote one of its
//! topic whose QoS is compatible (a mismatch is reported with its reason).
//! Samples go out through [`Participant::write`] and come in as
//! [`Event::Sample`]. Time comes in as an argument; datagrams in through
//! [`Participant::handle_datagram`] and out through
//! [`Participant::poll_transmit`].
//!
//! This is what the daemon's DDS gateway runs (and what tests drive against
//! Cyclone DDS): one participant, its endpoints named by topic.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::discovery::{EndpointData, ParticipantData, BUILTIN_ENDPOINTS};
use crate::message::{Header, Message, Submessage};
use crate::qos::{Durability, History, Mismatch, Qos, Reliability};
use crate::reliable::{Change, Reader, ReaderStart, Writer};
use crate::sedp::{Sedp, SedpEvent};
use crate::spdp::{Spdp, SpdpConfig, SpdpEvent};
use crate::types::{EntityId, Guid, GuidPrefix, Locator, SequenceNumber};
use crate::Transmit;

/// Local writers and readers a participant holds at most.
pub const MAX_ENDPOINTS: usize = 1024;

/// Samples a reliable local writer keeps for late or lossy readers.
pub const WRITER_DEPTH: usize = 256;

/// This vendor id (unregistered: "tagwire").
pub const VENDOR: [u8; 2] = crate::types::VENDOR_TAGWIRE;

/// What a participant is and where it listens.
#[derive(Debug, Clone)]
pub struct ParticipantConfig {
    /// Its GUID prefix (unique in the domain).
    pub prefix: GuidPrefix,
    /// The domain id it announces.
    pub domain: u32,
    /// Where it takes discovery and data (unicast).
    pub unicast: Vec<Locator>,
    /// Where it takes multicast discovery, if it joined the group.
    pub multicast: Vec<Locator>,
    /// Where it announces itself besides the participants it knows (the
    /// SPDP multicast locator, peers' well-known unicast ports).
    pub peers: Vec<Locator>,
    /// The lease it advertises.
    pub lease: Duration,
    /// How often it announces itself.
    pub announce_every: Duration,
    /// SPDP user data (what `ddsperf` and others show).
    pub user_data: Vec<u8>,
}

/// What happened in the domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A sample for a local reader.
    Sample {
        /// The reader.
        reader: EntityId,
        /// The remote writer.
        writer: Guid,
        /// Its sequence number.
        sn: SequenceNumber,
        /// The sample (serialized, encapsulation header first) with its
        /// source timestamp; or the instance disposed or unregistered.
        change: Change,
    },
    /// A local endpoint and a remote one of its topic were matched.
    Matched {
        /// The local endpoint.
        local: EntityId,
        /// The remote one.
        remote: Guid,
    },
    /// A local endpoint and a remote one of its topic were not matched.
    Mismatched {
        /// The local endpoint.
        local: EntityId,
        /// The remote one.
        remote: Guid,
        /// Why not.
        why: Mismatch,
    },
    /// A remote participant appeared.
    Joined(GuidPrefix),
    /// A remote participant left (its endpoints are unmatched).
    Left(GuidPrefix),
}

#[derive(Debug)]
struct Local<E> {
    data: EndpointData,
    end: E,
}

/// A datagram with samples of writers not announced yet when it came: a
/// writer that matched one of this participant's readers before the
/// reader's side heard of the writer sends it samples meant for it, which
/// the reader could not take yet. Kept for that reader (see
/// [`EARLY_AGE`]).
#[derive(Debug)]
struct Early {
    at: Instant,
    /// The writers whose samples it carries, not announced yet.
    writers: Vec<Guid>,
    bytes: Vec<u8>,
}

/// How long, how many and how many bytes of such datagrams are kept: the
/// window between a remote writer matching a local reader and SEDP
/// announcing the writer here is a few round trips of discovery.
const EARLY_AGE: Duration = Duration::from_secs(2);
const EARLY_DATAGRAMS: usize = 256;
const EARLY_BYTES: usize = 2 << 20;

/// See the module docs.
#[derive(Debug)]
pub struct Participant {
    header: Header,
    spdp: Spdp,
    sedp: Sedp,
    writers: BTreeMap<EntityId, Local<Writer>>,
    readers: BTreeMap<EntityId, Local<Reader>>,
    /// Remote endpoints SEDP announced.
    remote: BTreeMap<Guid, EndpointData>,
    /// Datagrams with data of writers SEDP has not announced yet.
    early: VecDeque<Early>,
    next_key: u32,
    events: VecDeque<Event>,
    out: VecDeque<Transmit>,
}

impl Participant {
    /// A participant announcing itself from `now`.
    pub fn new(cfg: ParticipantConfig, now: Instant) -> Self {
        let header = Header {
            version: (2, 1),
            vendor: VENDOR,
            prefix: cfg.prefix,
        };
        let lease = crate::qos::Duration::from_millis(cfg.lease.as_millis() as u64);
        let local = ParticipantData {
            prefix: cfg.prefix,
            version: (2, 1),
            vendor: VENDOR,
            builtin_endpoints: BUILTIN_ENDPOINTS,
            lease,
            domain: Some(cfg.domain),
            metatraffic_unicast: cfg.unicast.clone(),
            metatraffic_multicast: cfg.multicast.clone(),
            default_unicast: cfg.unicast,
            default_multicast: Vec::new(),
            user_data: cfg.user_data,
        };
        let spdp = Spdp::new(
            SpdpConfig {
                local,
                peers: cfg.peers,
                announce_every: cfg.announce_every,
            },
            now,
        );
        Self {
            header,
            spdp,
            sedp: Sedp::new(header),
            writers: BTreeMap::new(),
            readers: BTreeMap::new(),
            remote: BTreeMap::new(),
            early: VecDeque::new(),
            next_key: 1,
            events: VecDeque::new(),
            out: VecDeque::new(),
        }
    }

    /// This participant's GUID prefix.
    pub fn prefix(&self) -> GuidPrefix {
        self.header.prefix
    }

    /// The remote participants known now.
    pub fn participants(&self) -> impl Iterator<Item = &ParticipantData> {
        self.spdp.participants()
    }

    fn entity(&mut self, kind: u8) -> Option<EntityId> {
        if self.writers.len() + self.readers.len() >= MAX_ENDPOINTS {
            return None;
        }
        let k = self.next_key;
        self.next_key += 1;
        let b = k.to_be_bytes();
        Some(EntityId([b[1], b[2], b[3], kind]))
    }

    fn endpoint(&self, entity: EntityId, topic: &str, type_name: &str, qos: Qos) -> EndpointData {
        EndpointData {
            guid: Guid {
                prefix: self.header.prefix,
                entity,
            },
            topic: topic.into(),
            type_name: type_name.into(),
            qos,
            unicast: Vec::new(),
            multicast: Vec::new(),
            expects_inline_qos: false,
        }
    }

    /// A writer of `topic` (type `type_name`, `keyed` or not: a keyed
    /// topic's readers match only writers whose entity kind says so) with
    /// `qos`, announced and matched from now on; `None` past
    /// [`MAX_ENDPOINTS`].
    pub fn add_writer(
        &mut self,
        now: Instant,
        topic: &str,
        type_name: &str,
        keyed: bool,
        qos: Qos,
    ) -> Option<EntityId> {
        // (Entity kinds: writer with key 0x02, without 0x03.)
        let id = self.entity(if keyed { 0x02 } else { 0x03 })?;
        let data = self.endpoint(id, topic, type_name, qos);
        // A transient-local writer keeps what its history QoS says (what a
        // late joiner gets); a volatile one keeps WRITER_DEPTH for resends.
        let depth = match (data.qos.durability, data.qos.history) {
            (Durability::Volatile, _) | (_, History::KeepAll) => WRITER_DEPTH,
            (_, History::KeepLast(n)) => usize::try_from(n).unwrap_or(1).max(1),
        };
        let end = match data.qos.reliability.0 {
            Reliability::Reliable => {
                Writer::new(self.header, id, depth, Duration::from_millis(100))
            }
            Reliability::BestEffort => Writer::best_effort(self.header, id),
        };
        self.sedp.announce(now, &data);
        let remote: Vec<EndpointData> = self.remote.values().cloned().collect();
        self.writers.insert(id, Local { data, end });
        for r in remote.iter().filter(|r| r.guid.entity.is_reader()) {
            self.match_reader(now, id, r);
        }
        self.collect();
        Some(id)
    }

    /// A reader of `topic` (type `type_name`, `keyed` or not) with `qos`;
    /// `None` past [`MAX_ENDPOINTS`].
    pub fn add_reader(
        &mut self,
        now: Instant,
        topic: &str,
        type_name: &str,
        keyed: bool,
        qos: Qos,
    ) -> Option<EntityId> {
        // (Entity kinds: reader with key 0x07, without 0x04.)
        let id = self.entity(if keyed { 0x07 } else { 0x04 })?;
        let data = self.endpoint(id, topic, type_name, qos);
        let end = match data.qos.reliability.0 {
            Reliability::Reliable => Reader::new(self.header, id, Duration::from_millis(10)),
            Reliability::BestEffort => Reader::best_effort(self.header, id),
        };
        self.sedp.announce(now, &data);
        let remote: Vec<EndpointData> = self.remote.values().cloned().collect();
        self.readers.insert(id, Local { data, end });
        for w in remote.iter().filter(|w| w.guid.entity.is_writer()) {
            self.match_writer(now, id, w);
        }
        Some(id)
    }

    /// Writes a sample on local writer `writer`; `None` if there is no such
    /// writer.
    pub fn write(
        &mut self,
        now: Instant,
        writer: EntityId,
        payload: Vec<u8>,
    ) -> Option<SequenceNumber> {
        self.write_change(now, writer, Change::data(payload))
    }

    /// Writes a change with local writer `writer`: a sample with its source
    /// timestamp, or a dispose or unregister of an instance (`status` set,
    /// the payload its serialized key). `None`: no such writer.
    pub fn write_change(
        &mut self,
        now: Instant,
        writer: EntityId,
        change: Change,
    ) -> Option<SequenceNumber> {
        let w = self.writers.get_mut(&writer)?;
        let sn = w.end.write_change(now, change);
        self.collect();
        Some(sn)
    }

    /// A remote endpoint as SEDP announced it.
    pub fn remote_endpoint(&self, guid: Guid) -> Option<&EndpointData> {
        self.remote.get(&guid)
    }

    /// How many remote endpoints local endpoint `local` is matched with.
    pub fn matched(&self, local: EntityId) -> usize {
        let Some(l) = self
            .writers
            .get(&local)
            .map(|w| &w.data)
            .or_else(|| self.readers.get(&local).map(|r| &r.data))
        else {
            return 0;
        };
        self.remote
            .values()
            .filter(|r| r.guid.entity.is_writer() != local.is_writer())
            .filter(|r| {
                if local.is_writer() {
                    EndpointData::matches(r, l).is_ok()
                } else {
                    EndpointData::matches(l, r).is_ok()
                }
            })
            .count()
    }

    /// Where a remote endpoint takes data: its own locators, else its
    /// participant's default ones.
    fn locators(&self, e: &EndpointData) -> Vec<Locator> {
        if e.unicast.is_empty() {
            self.spdp
                .remote(e.guid.prefix)
                .map(|p| p.default_unicast.clone())
                .unwrap_or_default()
        } else {
            e.unicast.clone()
        }
    }

    fn match_reader(&mut self, now: Instant, writer: EntityId, r: &EndpointData) {
        let locators = self.locators(r);
        let Some(w) = self.writers.get_mut(&writer) else {
            return;
        };
        if w.data.topic != r.topic {
            return;
        }
        // A volatile reader starts at the next sample; a tagwire one is
        // told so in the heartbeats addressed to it (see `ReaderStart`).
        let start = if w.data.qos.durability != Durability::Volatile
            && r.qos.durability != Durability::Volatile
        {
            ReaderStart::Kept
        } else {
            let told = self
                .spdp
                .remote(r.guid.prefix)
                .is_some_and(|p| p.vendor == VENDOR);
            ReaderStart::Next { told }
        };
        match EndpointData::matches(r, &w.data) {
            Ok(()) => {
                if w.end.add_reader_from(now, r.guid, locators, start) {
                    self.events.push_back(Event::Matched {
                        local: writer,
                        remote: r.guid,
                    });
                }
            }
            Err(why) => self.events.push_back(Event::Mismatched {
                local: writer,
                remote: r.guid,
                why,
            }),
        }
    }

    fn match_writer(&mut self, now: Instant, reader: EntityId, w: &EndpointData) {
        let locators = self.locators(w);
        let Some(r) = self.readers.get_mut(&reader) else {
            return;
        };
        if r.data.topic != w.topic {
            return;
        }
        match EndpointData::matches(&r.data, w) {
            Ok(()) => {
                let tl = w.qos.durability != Durability::Volatile
                    && r.data.qos.durability != Durability::Volatile;
                if r.end.add_writer(now, w.guid, locators, tl) {
                    self.events.push_back(Event::Matched {
                        local: reader,
                        remote: w.guid,
                    });
                }
            }
            Err(why) => self.events.push_back(Event::Mismatched {
                local: reader,
                remote: w.guid,
                why,
            }),
        }
    }

    fn unmatch(&mut self, remote: Guid) {
        self.remote.remove(&remote);
        for w in self.writers.values_mut() {
            w.end.remove_reader(remote);
        }
        for r in self.readers.values_mut() {
            r.end.remove_writer(remote);
        }
    }

    /// Takes a datagram from the network (anything: what is not RTPS, or
    /// not for this participant, is dropped).
    pub fn handle_datagram(&mut self, now: Instant, dgram: &[u8]) {
        let Ok(m) = Message::parse(dgram) else {
            return;
        };
        let _ = self.spdp.handle_message(now, &m);
        self.discovery(now);
        if m.header.prefix == self.header.prefix {
            return;
        }
        self.sedp.handle_message(now, &m);
        self.endpoints(now);
        self.keep_early(now, &m, dgram);
        for w in self.writers.values_mut() {
            w.end.handle_message(now, &m);
        }
        self.hand_to_readers(now, &m);
        self.collect();
    }

    /// Hands a message to every local reader, and what they deliver to
    /// the events.
    fn hand_to_readers(&mut self, now: Instant, m: &Message<'_>) {
        for (id, r) in &mut self.readers {
            r.end.handle_message(now, m);
            while let Some(d) = r.end.poll_delivery() {
                self.events.push_back(Event::Sample {
                    reader: *id,
                    writer: d.writer,
                    sn: d.sn,
                    change: d.change,
                });
            }
        }
    }

    /// Keeps `dgram` if it carries samples of user writers SEDP has not
    /// announced (bounded: the oldest go first).
    fn keep_early(&mut self, now: Instant, m: &Message<'_>, dgram: &[u8]) {
        while self
            .early
            .front()
            .is_some_and(|e| now.saturating_duration_since(e.at) > EARLY_AGE)
        {
            self.early.pop_front();
        }
        let mut src = m.header.prefix;
        let mut writers: Vec<Guid> = Vec::new();
        for s in &m.submessages {
            let entity = match s {
                Submessage::InfoSrc { prefix, .. } => {
                    src = *prefix;
                    continue;
                }
                Submessage::Data(d) => d.writer,
                Submessage::DataFrag(f) => f.writer,
                _ => continue,
            };
            let g = Guid {
                prefix: src,
                entity,
            };
            if !entity.is_builtin() && !self.remote.contains_key(&g) && !writers.contains(&g) {
                writers.push(g);
            }
        }
        if writers.is_empty() || dgram.len() > EARLY_BYTES {
            return;
        }
        let mut held: usize = self.early.iter().map(|e| e.bytes.len()).sum();
        while self.early.len() >= EARLY_DATAGRAMS || held + dgram.len() > EARLY_BYTES {
            let Some(e) = self.early.pop_front() else {
                break;
            };
            held -= e.bytes.len();
        }
        self.early.push_back(Early {
            at: now,
            writers,
            bytes: dgram.to_vec(),
        });
    }

    /// Writer `w` is announced: the local readers get what it sent before
    /// (a reader matched to it takes it; the others ignore it).
    fn replay_early(&mut self, now: Instant, w: Guid) {
        let kept: Vec<Vec<u8>> = self
            .early
            .iter()
            .filter(|e| e.writers.contains(&w))
            .map(|e| e.bytes.clone())
            .collect();
        for e in &mut self.early {
            e.writers.retain(|g| *g != w);
        }
        self.early.retain(|e| !e.writers.is_empty());
        for bytes in kept {
            if let Ok(m) = Message::parse(&bytes) {
                self.hand_to_readers(now, &m);
            }
        }
    }

    /// What SPDP found: participants for SEDP.
    fn discovery(&mut self, now: Instant) {
        while let Some(e) = self.spdp.poll_event() {
            match e {
                SpdpEvent::Discovered(p) => {
                    self.sedp.add_participant(now, &p);
                    self.events.push_back(Event::Joined(p.prefix));
                }
                SpdpEvent::Changed(_) => {}
                SpdpEvent::Lost(prefix) => {
                    self.sedp.remove_participant(prefix);
                    let gone: Vec<Guid> = self
                        .remote
                        .keys()
                        .filter(|g| g.prefix == prefix)
                        .copied()
                        .collect();
                    for g in gone {
                        self.unmatch(g);
                    }
                    self.events.push_back(Event::Left(prefix));
                }
            }
        }
    }

    /// What SEDP found: remote endpoints to match.
    fn endpoints(&mut self, now: Instant) {
        while let Some(e) = self.sedp.poll_event() {
            match e {
                SedpEvent::Writer(w) => {
                    self.remote.insert(w.guid, w.clone());
                    let ids: Vec<EntityId> = self.readers.keys().copied().collect();
                    for id in ids {
                        self.match_writer(now, id, &w);
                    }
                    self.replay_early(now, w.guid);
                }
                SedpEvent::Reader(r) => {
                    self.remote.insert(r.guid, r.clone());
                    let ids: Vec<EntityId> = self.writers.keys().copied().collect();
                    for id in ids {
                        self.match_reader(now, id, &r);
                    }
                }
                SedpEvent::Gone(g) => self.unmatch(g),
            }
        }
    }

    /// Runs the timers due at `now` (announcements, leases, heartbeats,
    /// acknowledgements).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.spdp.handle_timeout(now);
        self.discovery(now);
        self.sedp.handle_timeout(now);
        self.endpoints(now);
        for w in self.writers.values_mut() {
            w.end.handle_timeout(now);
        }
        for r in self.readers.values_mut() {
            r.end.handle_timeout(now);
        }
        self.collect();
    }

    /// When [`Participant::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ends = self
            .writers
            .values()
            .filter_map(|w| w.end.poll_timeout())
            .chain(self.readers.values().filter_map(|r| r.end.poll_timeout()));
        [self.spdp.poll_timeout(), self.sedp.poll_timeout()]
            .into_iter()
            .flatten()
            .chain(ends)
            .min()
    }

    fn collect(&mut self) {
        self.out
            .extend(std::iter::from_fn(|| self.spdp.poll_transmit()));
        self.out
            .extend(std::iter::from_fn(|| self.sedp.poll_transmit()));
        for w in self.writers.values_mut() {
            self.out
                .extend(std::iter::from_fn(|| w.end.poll_transmit()));
        }
        for r in self.readers.values_mut() {
            self.out
                .extend(std::iter::from_fn(|| r.end.poll_transmit()));
        }
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        if self.out.is_empty() {
            self.collect();
        }
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Says goodbye (SPDP: the participant leaves; peers drop it at once).
    pub fn leave(&mut self) {
        self.spdp.leave();
        self.collect();
    }
}
