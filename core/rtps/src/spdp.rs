//! SPDP, the participant discovery protocol (specification §8.5.3), as a
//! sans-IO state machine: datagrams and time go in
//! ([`Spdp::handle_datagram`], [`Spdp::handle_timeout`]), datagrams to send
//! and discovery events come out ([`Spdp::poll_transmit`],
//! [`Spdp::poll_event`], [`Spdp::poll_timeout`]).
//!
//! It announces the local participant to its peer locators and to every
//! participant it knows, periodically (best effort, as SPDP is), answers a
//! new participant's announcement at once with one addressed to it (as
//! Cyclone DDS does, so either side finds the other on its first
//! announcement), keeps each remote participant's lease (renewed by any
//! message from it), and reports participants discovered, changed and lost
//! (lease expired, or announced leaving).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::discovery::ParticipantData;
use crate::message::{Data, Header, Message, MessageBuilder, Submessage};
use crate::plist::{pid, ListBuilder, ParameterList};
use crate::types::{EntityId, Guid, GuidPrefix, Locator, SequenceNumber};
use crate::{RtpsError, Transmit};

/// The most remote participants tracked: a flood of forged announcements
/// costs at most this much memory.
pub const MAX_PARTICIPANTS: usize = 1024;

/// What the local participant announces, and where.
#[derive(Debug, Clone)]
pub struct SpdpConfig {
    /// The local participant (its `prefix` and locators; its lease is
    /// what it advertises).
    pub local: ParticipantData,
    /// Where to announce besides the participants already known (peers'
    /// metatraffic ports, the SPDP multicast locator).
    pub peers: Vec<Locator>,
    /// How often to announce (well below the advertised lease).
    pub announce_every: Duration,
}

/// What discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpdpEvent {
    /// A participant announced itself for the first time.
    Discovered(ParticipantData),
    /// A known participant announced changed data.
    Changed(ParticipantData),
    /// A participant left, or its lease expired.
    Lost(GuidPrefix),
}

#[derive(Debug)]
struct Remote {
    data: ParticipantData,
    /// The sequence number of the announcement `data` came from: only a
    /// higher one changes it (a resend renews the lease only).
    sn: SequenceNumber,
    expires: Instant,
}

/// The SPDP state machine of one local participant.
#[derive(Debug)]
pub struct Spdp {
    cfg: SpdpConfig,
    header: Header,
    sn: SequenceNumber,
    next_announce: Instant,
    remotes: BTreeMap<GuidPrefix, Remote>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<SpdpEvent>,
}

impl Spdp {
    /// Starts discovery at `now`: the first announcement is due at once.
    pub fn new(cfg: SpdpConfig, now: Instant) -> Self {
        let header = Header {
            version: cfg.local.version,
            vendor: cfg.local.vendor,
            prefix: cfg.local.prefix,
        };
        Self {
            cfg,
            header,
            sn: SequenceNumber(1),
            next_announce: now,
            remotes: BTreeMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The remote participant `prefix`, if known.
    pub fn remote(&self, prefix: GuidPrefix) -> Option<&ParticipantData> {
        self.remotes.get(&prefix).map(|r| &r.data)
    }

    /// The remote participants known.
    pub fn participants(&self) -> impl Iterator<Item = &ParticipantData> {
        self.remotes.values().map(|r| &r.data)
    }

    /// How many remote participants are known.
    pub fn remotes(&self) -> usize {
        self.remotes.len()
    }

    /// Handles a datagram that arrived on a metatraffic port.
    pub fn handle_datagram(&mut self, now: Instant, dgram: &[u8]) -> Result<(), RtpsError> {
        self.handle_message(now, &Message::parse(dgram)?)
    }

    /// [`Spdp::handle_datagram`] for a datagram already parsed.
    pub fn handle_message(&mut self, now: Instant, m: &Message<'_>) -> Result<(), RtpsError> {
        let sender = m.header.prefix;
        if sender == self.cfg.local.prefix {
            return Ok(()); // our own, looped back
        }
        // Anything from a known participant renews its lease.
        if let Some(r) = self.remotes.get_mut(&sender) {
            r.expires = now + lease_of(&r.data);
        }
        let mut for_us = true;
        for s in &m.submessages {
            match s {
                Submessage::InfoDst(p) => {
                    for_us = *p == GuidPrefix([0; 12]) || *p == self.cfg.local.prefix;
                }
                Submessage::Data(d) if for_us && d.writer == EntityId::SPDP_WRITER => {
                    self.handle_announcement(now, sender, d)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn handle_announcement(
        &mut self,
        now: Instant,
        sender: GuidPrefix,
        d: &Data<'_>,
    ) -> Result<(), RtpsError> {
        if d.key || leaving(d) {
            if self.remotes.remove(&sender).is_some() {
                self.events.push_back(SpdpEvent::Lost(sender));
            }
            return Ok(());
        }
        let Some(payload) = d.payload else {
            return Ok(());
        };
        let data = ParticipantData::from_payload(payload, sender)?;
        if data
            .domain
            .is_some_and(|dom| Some(dom) != self.cfg.local.domain)
        {
            return Ok(()); // another domain's
        }
        let expires = now + lease_of(&data);
        match self.remotes.get_mut(&sender) {
            Some(r) => {
                r.expires = expires;
                if d.sn > r.sn {
                    r.sn = d.sn;
                    if r.data != data {
                        r.data = data.clone();
                        self.events.push_back(SpdpEvent::Changed(data));
                    }
                }
            }
            None => {
                if self.remotes.len() >= MAX_PARTICIPANTS {
                    return Ok(());
                }
                // Answer at once, addressed to it: it need not wait for
                // our next round to know us.
                let to: Vec<Locator> = data.metatraffic_unicast.clone();
                let bytes = self.announcement(Some(sender));
                self.transmits.extend(to.into_iter().map(|to| Transmit {
                    to,
                    bytes: bytes.clone(),
                }));
                self.remotes.insert(
                    sender,
                    Remote {
                        data: data.clone(),
                        sn: d.sn,
                        expires,
                    },
                );
                self.events.push_back(SpdpEvent::Discovered(data));
            }
        }
        Ok(())
    }

    /// Announces when due and expires leases.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now >= self.next_announce {
            self.next_announce = now + self.cfg.announce_every;
            let bytes = self.announcement(None);
            let mut to: Vec<Locator> = self.cfg.peers.clone();
            for r in self.remotes.values() {
                for l in &r.data.metatraffic_unicast {
                    if !to.contains(l) {
                        to.push(*l);
                    }
                }
            }
            self.transmits.extend(to.into_iter().map(|to| Transmit {
                to,
                bytes: bytes.clone(),
            }));
        }
        let gone: Vec<GuidPrefix> = self
            .remotes
            .iter()
            .filter(|(_, r)| now >= r.expires)
            .map(|(p, _)| *p)
            .collect();
        for p in gone {
            self.remotes.remove(&p);
            self.events.push_back(SpdpEvent::Lost(p));
        }
    }

    /// When [`Spdp::handle_timeout`] has something to do next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.remotes
            .values()
            .map(|r| r.expires)
            .chain(Some(self.next_announce))
            .min()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next discovery event.
    pub fn poll_event(&mut self) -> Option<SpdpEvent> {
        self.events.pop_front()
    }

    /// Says the local participant leaves, to everyone it announces to.
    pub fn leave(&mut self) {
        let guid = Guid {
            prefix: self.cfg.local.prefix,
            entity: EntityId::PARTICIPANT,
        };
        let mut key = ListBuilder::new();
        key.guid(pid::PARTICIPANT_GUID, guid);
        let key = key.finish_payload();
        let mut status = ListBuilder::new();
        status.param(pid::STATUS_INFO, &[0, 0, 0, 3]);
        let status = status.finish();
        let Ok((qos, _)) = ParameterList::parse_prefix(&status, true) else {
            return;
        };
        self.sn = SequenceNumber(self.sn.0 + 1);
        let mut b = MessageBuilder::new(self.header);
        let ok = b.push(&Submessage::Data(Data {
            reader: EntityId::SPDP_READER,
            writer: EntityId::SPDP_WRITER,
            sn: self.sn,
            inline_qos: Some(qos),
            payload: Some(&key),
            key: true,
            non_standard: false,
        }));
        if ok.is_err() {
            return;
        }
        let bytes = b.finish();
        let mut to = self.cfg.peers.clone();
        to.extend(
            self.remotes
                .values()
                .flat_map(|r| r.data.metatraffic_unicast.clone()),
        );
        self.transmits.extend(to.into_iter().map(|to| Transmit {
            to,
            bytes: bytes.clone(),
        }));
    }

    /// The local announcement, addressed to `dst` when given (INFO_DST).
    fn announcement(&mut self, dst: Option<GuidPrefix>) -> Vec<u8> {
        let payload = self.cfg.local.to_payload();
        let mut b = MessageBuilder::new(self.header);
        let mut subs = Vec::with_capacity(2);
        if let Some(p) = dst {
            subs.push(Submessage::InfoDst(p));
        }
        subs.push(Submessage::Data(Data {
            reader: EntityId::SPDP_READER,
            writer: EntityId::SPDP_WRITER,
            sn: self.sn,
            inline_qos: None,
            payload: Some(&payload),
            key: false,
            non_standard: false,
        }));
        for s in &subs {
            // (An SPDP announcement is far below a submessage's 64 KiB.)
            let _ = b.push(s);
        }
        b.finish()
    }
}

/// Whether a DATA says its participant leaves (STATUS_INFO disposed or
/// unregistered).
fn leaving(d: &Data<'_>) -> bool {
    d.inline_qos
        .as_ref()
        .and_then(|q| q.get(pid::STATUS_INFO))
        .is_some_and(|v| v.len() >= 4 && v[3] & 0x03 != 0)
}

/// A participant's lease as a duration (capped at a day: a hostile
/// infinite lease must not overflow the clock).
fn lease_of(d: &ParticipantData) -> Duration {
    let secs = u64::try_from(d.lease.seconds).unwrap_or(0).min(86_400);
    Duration::from_secs(secs)
        + Duration::from_nanos((u64::from(d.lease.fraction) * 1_000_000_000) >> 32)
}
