//! The RTPS participant core ([`tagwire_rtps::participant::Participant`])
//! as a [`SimNode`]: SPDP announcements over a multicast group, SEDP over
//! the reliable built-in endpoints, matching, and the reliable and
//! best-effort writers and readers, over simulated links.
//!
//! ```text
//!  test: participant_mut().add_writer / add_reader / write (through Sim::with_node)
//!                    │
//!  datagrams ─▶ Participant::handle_datagram ─┐
//!  timer ─────▶ Participant::handle_timeout ──┤─▶ poll_transmit ─▶ Unicast(locator) / Group(SPDP group)
//!                                             └─▶ poll_event ──▶ log: (virtual time, Event)
//! ```
//!
//! A node's address is its one unicast locator (metatraffic and user
//! data); every node announces itself to [`spdp_group`] and must be made a
//! member of it ([`Sim::join`](super::Sim::join)) to hear the others. A
//! restarted node is a new participant: its GUID prefix comes from the
//! instance's seed.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tagwire_rtps::participant::{Event, Participant, ParticipantConfig};
use tagwire_rtps::{EntityId, Guid, GuidPrefix, Locator};

use super::node::{Addr, NodeInit, Outgoing, SimNode};

/// The SPDP multicast group of domain 0 (239.255.0.1, port 7400).
pub fn spdp_group() -> Addr {
    SocketAddr::from((Ipv4Addr::new(239, 255, 0, 1), 7400))
}

/// Settings of an [`RtpsNode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpsConfig {
    /// The lease the participant advertises: others drop it this long after
    /// they last heard from it.
    pub lease: Duration,
    /// How often it announces itself.
    pub announce_every: Duration,
}

impl Default for RtpsConfig {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(3),
            announce_every: Duration::from_millis(500),
        }
    }
}

/// A sample a reader of the node delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtpsSample {
    /// The local reader.
    pub reader: EntityId,
    /// The remote writer.
    pub writer: Guid,
    /// Its sequence number.
    pub sn: i64,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// One participant in the simulator.
#[derive(Debug)]
pub struct RtpsNode {
    part: Participant,
    addr: Addr,
    events: Vec<(Instant, Event)>,
}

impl RtpsNode {
    /// A participant at `init.addr` (an IPv4 address), its prefix drawn
    /// from `init.seed`.
    pub fn new(init: &NodeInit, config: RtpsConfig) -> Self {
        let seed = init.seed.to_le_bytes();
        let mut prefix = [0u8; 12];
        prefix[..2].copy_from_slice(&[0x01, 0x99]);
        prefix[2..10].copy_from_slice(&seed);
        prefix[10..].copy_from_slice(&init.addr.port().to_le_bytes());
        let locator = |a: SocketAddr| match a.ip() {
            IpAddr::V4(ip) => Locator::udp_v4(ip, a.port()),
            IpAddr::V6(_) => Locator::udp_v4(Ipv4Addr::UNSPECIFIED, a.port()),
        };
        let group = locator(spdp_group());
        let cfg = ParticipantConfig {
            prefix: GuidPrefix(prefix),
            domain: 0,
            unicast: vec![locator(init.addr)],
            multicast: vec![group],
            peers: vec![group],
            lease: config.lease,
            announce_every: config.announce_every,
            user_data: Vec::new(),
        };
        Self {
            part: Participant::new(cfg, init.now),
            addr: init.addr,
            events: Vec::new(),
        }
    }

    /// The participant (to add endpoints and write; the simulator sends
    /// what that queued once the caller returns).
    pub fn participant_mut(&mut self) -> &mut Participant {
        &mut self.part
    }

    /// The participant.
    pub fn participant(&self) -> &Participant {
        &self.part
    }

    /// The node's address.
    pub fn addr(&self) -> Addr {
        self.addr
    }

    /// Everything the participant reported, with when.
    pub fn events(&self) -> &[(Instant, Event)] {
        &self.events
    }

    /// The samples its readers delivered, in order.
    pub fn samples(&self) -> Vec<RtpsSample> {
        self.events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::Sample {
                    reader,
                    writer,
                    sn,
                    change,
                } => Some(RtpsSample {
                    reader: *reader,
                    writer: *writer,
                    sn: sn.0,
                    payload: change.payload.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The participants it knows now (joined and not left since).
    pub fn known(&self) -> BTreeSet<GuidPrefix> {
        let mut known = BTreeSet::new();
        for (_, e) in &self.events {
            match e {
                Event::Joined(p) => {
                    known.insert(*p);
                }
                Event::Left(p) => {
                    known.remove(p);
                }
                _ => {}
            }
        }
        known
    }

    fn take_events(&mut self, now: Instant) {
        while let Some(e) = self.part.poll_event() {
            self.events.push((now, e));
        }
    }
}

impl SimNode for RtpsNode {
    fn handle_datagram(&mut self, now: Instant, _from: Addr, bytes: &[u8]) {
        self.part.handle_datagram(now, bytes);
        self.take_events(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.part.handle_timeout(now);
        self.take_events(now);
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Outgoing> {
        // Locators this simulator cannot reach (not IPv4 UDP) are skipped.
        loop {
            let t = self.part.poll_transmit()?;
            let Some(to) = t.to.to_udp_v4() else {
                continue;
            };
            let to = SocketAddr::V4(to);
            return Some(if to.ip().is_multicast() {
                Outgoing::group(to, t.bytes)
            } else {
                Outgoing::unicast(to, t.bytes)
            });
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.part.poll_timeout()
    }
}
