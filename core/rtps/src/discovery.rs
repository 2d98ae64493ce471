//! What SPDP and SEDP say: a participant's announcement and an endpoint's
//! (specification §8.5), read from their parameter lists as Cyclone DDS
//! checks them, and written as Cyclone DDS accepts them (the minimum it
//! needs, and reliability and durability always).

use crate::plist::{pid, ListBuilder, ParameterList};
use crate::qos::{Duration, Qos};
use crate::types::{EntityId, Guid, GuidPrefix, Locator};
use crate::RtpsError;

/// Built-in endpoints a participant has (BUILTIN_ENDPOINT_SET bits):
/// participant announcer and detector, publications and subscriptions
/// announcers and detectors.
pub const BUILTIN_ENDPOINTS: u32 = 0x3f;

/// A participant's SPDP announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantData {
    /// The participant's GUID prefix.
    pub prefix: GuidPrefix,
    /// Protocol version it speaks.
    pub version: (u8, u8),
    /// Its vendor.
    pub vendor: [u8; 2],
    /// Its built-in endpoints (bitmask).
    pub builtin_endpoints: u32,
    /// How long it lives without announcing again (absent: 100 s, as
    /// Cyclone DDS assumes).
    pub lease: Duration,
    /// Its domain, when said.
    pub domain: Option<u32>,
    /// Where its discovery traffic goes, unicast.
    pub metatraffic_unicast: Vec<Locator>,
    /// Where its discovery traffic goes, multicast.
    pub metatraffic_multicast: Vec<Locator>,
    /// Where user data goes by default, unicast.
    pub default_unicast: Vec<Locator>,
    /// Where user data goes by default, multicast.
    pub default_multicast: Vec<Locator>,
    /// USER_DATA (ddsperf identifies its peers with it).
    pub user_data: Vec<u8>,
}

impl ParticipantData {
    /// Reads an SPDP payload sent by `sender` (the RTPS header's prefix):
    /// refused without a participant GUID, when that GUID is not the
    /// sender's, or without the built-in endpoint set.
    pub fn from_payload(payload: &[u8], sender: GuidPrefix) -> Result<Self, RtpsError> {
        let l = ParameterList::from_payload(payload)?;
        let guid = l
            .guid(pid::PARTICIPANT_GUID)?
            .ok_or(RtpsError::Invalid("SPDP without PARTICIPANT_GUID"))?;
        if guid.prefix != sender || guid.entity != EntityId::PARTICIPANT {
            return Err(RtpsError::Invalid("SPDP GUID is not its sender's"));
        }
        let builtin_endpoints = l
            .u32(pid::BUILTIN_ENDPOINT_SET)?
            .ok_or(RtpsError::Invalid("SPDP without BUILTIN_ENDPOINT_SET"))?;
        let two =
            |id| -> Option<[u8; 2]> { l.get(id).filter(|v| v.len() >= 2).map(|v| [v[0], v[1]]) };
        Ok(Self {
            prefix: guid.prefix,
            version: two(pid::PROTOCOL_VERSION).map_or((2, 1), |v| (v[0], v[1])),
            vendor: two(pid::VENDORID).unwrap_or([0, 0]),
            builtin_endpoints,
            lease: match l.get(pid::PARTICIPANT_LEASE_DURATION) {
                Some(v) => Duration::read(v, l.is_le())?,
                None => Duration {
                    seconds: 100,
                    fraction: 0,
                },
            },
            domain: l.u32(pid::DOMAIN_ID)?,
            metatraffic_unicast: l.locators(pid::METATRAFFIC_UNICAST_LOCATOR)?,
            metatraffic_multicast: l.locators(pid::METATRAFFIC_MULTICAST_LOCATOR)?,
            default_unicast: l.locators(pid::DEFAULT_UNICAST_LOCATOR)?,
            default_multicast: l.locators(pid::DEFAULT_MULTICAST_LOCATOR)?,
            user_data: octets(&l, pid::USER_DATA)?,
        })
    }

    /// The SPDP payload (PL_CDR_LE).
    pub fn to_payload(&self) -> Vec<u8> {
        let mut b = ListBuilder::new();
        b.param(pid::PROTOCOL_VERSION, &[self.version.0, self.version.1])
            .param(pid::VENDORID, &self.vendor)
            .guid(
                pid::PARTICIPANT_GUID,
                Guid {
                    prefix: self.prefix,
                    entity: EntityId::PARTICIPANT,
                },
            )
            .u32(pid::BUILTIN_ENDPOINT_SET, self.builtin_endpoints)
            .param(pid::PARTICIPANT_LEASE_DURATION, &self.lease.to_le());
        if let Some(d) = self.domain {
            b.u32(pid::DOMAIN_ID, d);
        }
        for (id, locs) in [
            (pid::METATRAFFIC_UNICAST_LOCATOR, &self.metatraffic_unicast),
            (
                pid::METATRAFFIC_MULTICAST_LOCATOR,
                &self.metatraffic_multicast,
            ),
            (pid::DEFAULT_UNICAST_LOCATOR, &self.default_unicast),
            (pid::DEFAULT_MULTICAST_LOCATOR, &self.default_multicast),
        ] {
            for l in locs {
                b.locator(id, l);
            }
        }
        if !self.user_data.is_empty() {
            let mut v = (self.user_data.len() as u32).to_le_bytes().to_vec();
            v.extend_from_slice(&self.user_data);
            b.param(pid::USER_DATA, &v);
        }
        b.finish_payload()
    }
}

/// An endpoint's SEDP announcement (a publication or a subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointData {
    /// The endpoint.
    pub guid: Guid,
    /// Topic name.
    pub topic: String,
    /// Type name (fully scoped, e.g. `std_msgs::msg::dds_::String_`).
    pub type_name: String,
    /// Its QoS, defaults applied.
    pub qos: Qos,
    /// Its own unicast locators (empty: its participant's default ones).
    pub unicast: Vec<Locator>,
    /// Its own multicast locators.
    pub multicast: Vec<Locator>,
    /// A reader that expects inline QoS (Cyclone DDS refuses those).
    pub expects_inline_qos: bool,
}

impl EndpointData {
    /// Reads an SEDP payload sent by `sender`: refused without an endpoint
    /// GUID of the sender, of the kind the announcement is for (`writer`:
    /// publications), or without topic and type names.
    pub fn from_payload(
        payload: &[u8],
        sender: GuidPrefix,
        writer: bool,
    ) -> Result<Self, RtpsError> {
        let l = ParameterList::from_payload(payload)?;
        let guid = l
            .guid(pid::ENDPOINT_GUID)?
            .ok_or(RtpsError::Invalid("SEDP without ENDPOINT_GUID"))?;
        if guid.prefix != sender {
            return Err(RtpsError::Invalid("SEDP endpoint is not its sender's"));
        }
        let kind_ok = if writer {
            guid.entity.is_writer()
        } else {
            guid.entity.is_reader()
        };
        if !kind_ok || guid.entity.is_builtin() {
            return Err(RtpsError::Invalid("SEDP endpoint of the wrong kind"));
        }
        let name = |id, what| -> Result<String, RtpsError> {
            Ok(l.string(id)?.ok_or(RtpsError::Invalid(what))?.to_owned())
        };
        Ok(Self {
            guid,
            topic: name(pid::TOPIC_NAME, "SEDP without TOPIC_NAME")?,
            type_name: name(pid::TYPE_NAME, "SEDP without TYPE_NAME")?,
            qos: Qos::from_list(&l, writer)?,
            unicast: l.locators(pid::UNICAST_LOCATOR)?,
            multicast: l.locators(pid::MULTICAST_LOCATOR)?,
            expects_inline_qos: l
                .get(pid::EXPECTS_INLINE_QOS)
                .is_some_and(|v| v.first().is_some_and(|b| *b != 0)),
        })
    }

    /// The SEDP payload (PL_CDR_LE); a writer's when `guid` is a writer's.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut b = ListBuilder::new();
        b.guid(pid::ENDPOINT_GUID, self.guid)
            .string(pid::TOPIC_NAME, &self.topic)
            .string(pid::TYPE_NAME, &self.type_name);
        self.qos.write(&mut b, self.guid.entity.is_writer());
        for l in &self.unicast {
            b.locator(pid::UNICAST_LOCATOR, l);
        }
        for l in &self.multicast {
            b.locator(pid::MULTICAST_LOCATOR, l);
        }
        if self.expects_inline_qos {
            // A boolean: one octet, padded to four.
            b.param(pid::EXPECTS_INLINE_QOS, &[1, 0, 0, 0]);
        }
        b.finish_payload()
    }

    /// Whether `reader` matches `writer` (see [`crate::qos::matches`]).
    pub fn matches(reader: &Self, writer: &Self) -> Result<(), crate::qos::Mismatch> {
        crate::qos::matches(
            (&reader.topic, &reader.type_name, &reader.qos),
            (&writer.topic, &writer.type_name, &writer.qos),
        )
    }
}

/// A `sequence<octet>` value (empty when absent).
fn octets(l: &ParameterList<'_>, id: u16) -> Result<Vec<u8>, RtpsError> {
    let Some(v) = l.get(id) else {
        return Ok(Vec::new());
    };
    let mut c = crate::cursor::Cur::new(v, l.is_le());
    let n = c.u32()? as usize;
    Ok(c.bytes(n)?.to_vec())
}
