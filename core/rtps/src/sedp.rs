//! SEDP, the endpoint discovery protocol (specification §8.5.4), sans-IO:
//! the local participant's publications and subscriptions go out on its
//! built-in reliable, transient-local writers; remote participants' come in
//! on its built-in readers and are reported as events. Participants come
//! from SPDP ([`Sedp::add_participant`], [`Sedp::remove_participant`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::discovery::{EndpointData, ParticipantData};
use crate::message::{Header, Message};
use crate::plist::{pid, ParameterList};
use crate::reliable::{Reader, Writer};
use crate::types::{EntityId, Guid, GuidPrefix};
use crate::Transmit;

/// BUILTIN_ENDPOINT_SET bits SEDP uses.
const PUBLICATIONS_ANNOUNCER: u32 = 1 << 2;
const PUBLICATIONS_DETECTOR: u32 = 1 << 3;
const SUBSCRIPTIONS_ANNOUNCER: u32 = 1 << 4;
const SUBSCRIPTIONS_DETECTOR: u32 = 1 << 5;

/// How many local endpoints are announced at most.
const MAX_LOCAL: usize = 1024;

/// What endpoint discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SedpEvent {
    /// A remote writer (a publication) appeared or changed.
    Writer(EndpointData),
    /// A remote reader (a subscription) appeared or changed.
    Reader(EndpointData),
    /// A remote endpoint went away (it was deleted, or its participant
    /// left).
    Gone(Guid),
}

/// The SEDP built-in endpoints of one local participant.
#[derive(Debug)]
pub struct Sedp {
    prefix: GuidPrefix,
    pub_writer: Writer,
    sub_writer: Writer,
    pub_reader: Reader,
    sub_reader: Reader,
    remote: BTreeMap<Guid, EndpointData>,
    events: VecDeque<SedpEvent>,
}

impl Sedp {
    /// The built-in endpoints of the participant in `header`.
    pub fn new(header: Header) -> Self {
        let hb = Duration::from_millis(100);
        let ack = Duration::from_millis(10);
        Self {
            prefix: header.prefix,
            pub_writer: Writer::new(header, EntityId::SEDP_PUBLICATIONS_WRITER, MAX_LOCAL, hb),
            sub_writer: Writer::new(header, EntityId::SEDP_SUBSCRIPTIONS_WRITER, MAX_LOCAL, hb),
            pub_reader: Reader::new(header, EntityId::SEDP_PUBLICATIONS_READER, ack),
            sub_reader: Reader::new(header, EntityId::SEDP_SUBSCRIPTIONS_READER, ack),
            remote: BTreeMap::new(),
            events: VecDeque::new(),
        }
    }

    /// Announces a local writer or reader (by its GUID's kind).
    pub fn announce(&mut self, now: Instant, e: &EndpointData) {
        let w = if e.guid.entity.is_writer() {
            &mut self.pub_writer
        } else {
            &mut self.sub_writer
        };
        w.write(now, e.to_payload());
    }

    /// Matches the built-in endpoints of a participant SPDP discovered.
    pub fn add_participant(&mut self, now: Instant, p: &ParticipantData) {
        let at = p.metatraffic_unicast.clone();
        let guid = |entity| Guid {
            prefix: p.prefix,
            entity,
        };
        let bes = p.builtin_endpoints;
        if bes & PUBLICATIONS_DETECTOR != 0 {
            self.pub_writer
                .add_reader(now, guid(EntityId::SEDP_PUBLICATIONS_READER), at.clone());
        }
        if bes & SUBSCRIPTIONS_DETECTOR != 0 {
            self.sub_writer
                .add_reader(now, guid(EntityId::SEDP_SUBSCRIPTIONS_READER), at.clone());
        }
        if bes & PUBLICATIONS_ANNOUNCER != 0 {
            self.pub_reader.add_writer(
                now,
                guid(EntityId::SEDP_PUBLICATIONS_WRITER),
                at.clone(),
                true,
            );
        }
        if bes & SUBSCRIPTIONS_ANNOUNCER != 0 {
            self.sub_reader
                .add_writer(now, guid(EntityId::SEDP_SUBSCRIPTIONS_WRITER), at, true);
        }
    }

    /// Forgets a participant SPDP lost, and its endpoints.
    pub fn remove_participant(&mut self, prefix: GuidPrefix) {
        let guid = |entity| Guid { prefix, entity };
        self.pub_writer
            .remove_reader(guid(EntityId::SEDP_PUBLICATIONS_READER));
        self.sub_writer
            .remove_reader(guid(EntityId::SEDP_SUBSCRIPTIONS_READER));
        self.pub_reader
            .remove_writer(guid(EntityId::SEDP_PUBLICATIONS_WRITER));
        self.sub_reader
            .remove_writer(guid(EntityId::SEDP_SUBSCRIPTIONS_WRITER));
        let gone: Vec<Guid> = self
            .remote
            .keys()
            .filter(|g| g.prefix == prefix)
            .copied()
            .collect();
        for g in gone {
            self.remote.remove(&g);
            self.events.push_back(SedpEvent::Gone(g));
        }
    }

    /// Handles a datagram that arrived on a metatraffic port.
    pub fn handle_message(&mut self, now: Instant, m: &Message<'_>) {
        if m.header.prefix == self.prefix {
            return;
        }
        self.pub_writer.handle_message(now, m);
        self.sub_writer.handle_message(now, m);
        self.pub_reader.handle_message(now, m);
        self.sub_reader.handle_message(now, m);
        self.take();
    }

    /// Announcements the built-in readers delivered, as events.
    fn take(&mut self) {
        for writer in [true, false] {
            let r = if writer {
                &mut self.pub_reader
            } else {
                &mut self.sub_reader
            };
            while let Some(d) = r.poll_delivery() {
                if d.change.status != 0 {
                    // The endpoint is deleted: its GUID is the key (in the
                    // key hash, or ENDPOINT_GUID in the payload).
                    let guid = d.change.key_hash.map(Guid::from_bytes).or_else(|| {
                        ParameterList::from_payload(&d.change.payload)
                            .ok()
                            .and_then(|l| l.guid(pid::ENDPOINT_GUID).ok().flatten())
                    });
                    // Only that participant's own endpoints.
                    if let Some(g) = guid.filter(|g| g.prefix == d.writer.prefix) {
                        if self.remote.remove(&g).is_some() {
                            self.events.push_back(SedpEvent::Gone(g));
                        }
                    }
                    continue;
                }
                let Ok(e) = EndpointData::from_payload(&d.change.payload, d.writer.prefix, writer)
                else {
                    continue; // not an endpoint of that participant's
                };
                if self.remote.get(&e.guid) == Some(&e) {
                    continue;
                }
                self.remote.insert(e.guid, e.clone());
                self.events.push_back(if writer {
                    SedpEvent::Writer(e)
                } else {
                    SedpEvent::Reader(e)
                });
            }
        }
    }

    /// Heartbeats and ACKNACKs that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.pub_writer.handle_timeout(now);
        self.sub_writer.handle_timeout(now);
        self.pub_reader.handle_timeout(now);
        self.sub_reader.handle_timeout(now);
    }

    /// When [`Sedp::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.pub_writer.poll_timeout(),
            self.sub_writer.poll_timeout(),
            self.pub_reader.poll_timeout(),
            self.sub_reader.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.pub_writer
            .poll_transmit()
            .or_else(|| self.sub_writer.poll_transmit())
            .or_else(|| self.pub_reader.poll_transmit())
            .or_else(|| self.sub_reader.poll_transmit())
    }

    /// The next endpoint discovered or gone.
    pub fn poll_event(&mut self) -> Option<SedpEvent> {
        self.events.pop_front()
    }
}
