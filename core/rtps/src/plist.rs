//! Parameter lists (specification §9.4.2.11): the discovery data of SPDP
//! and SEDP, and a DATA's inline QoS. Each parameter is a `pid` (u16), a
//! `length` (u16, a multiple of 4) and a value; the list ends with
//! `PID_SENTINEL`.

use crate::cursor::{Cur, Out};
use crate::types::{Guid, Locator};
use crate::RtpsError;

/// Parameter ids used by discovery and inline QoS.
pub mod pid {
    /// Padding (skipped).
    pub const PAD: u16 = 0x0000;
    /// End of the list.
    pub const SENTINEL: u16 = 0x0001;
    /// Participant lease duration.
    pub const PARTICIPANT_LEASE_DURATION: u16 = 0x0002;
    /// Topic name (string).
    pub const TOPIC_NAME: u16 = 0x0005;
    /// Type name (string).
    pub const TYPE_NAME: u16 = 0x0007;
    /// Domain id (u32).
    pub const DOMAIN_ID: u16 = 0x000f;
    /// Protocol version.
    pub const PROTOCOL_VERSION: u16 = 0x0015;
    /// Vendor id.
    pub const VENDORID: u16 = 0x0016;
    /// Reliability (kind, max blocking time).
    pub const RELIABILITY: u16 = 0x001a;
    /// Durability (kind).
    pub const DURABILITY: u16 = 0x001d;
    /// User data (sequence of octets).
    pub const USER_DATA: u16 = 0x002c;
    /// Partition (sequence of strings).
    pub const PARTITION: u16 = 0x0029;
    /// Default unicast locator.
    pub const DEFAULT_UNICAST_LOCATOR: u16 = 0x0031;
    /// Metatraffic unicast locator.
    pub const METATRAFFIC_UNICAST_LOCATOR: u16 = 0x0032;
    /// Metatraffic multicast locator.
    pub const METATRAFFIC_MULTICAST_LOCATOR: u16 = 0x0033;
    /// History (kind, depth).
    pub const HISTORY: u16 = 0x0040;
    /// Default multicast locator.
    pub const DEFAULT_MULTICAST_LOCATOR: u16 = 0x0048;
    /// Participant GUID.
    pub const PARTICIPANT_GUID: u16 = 0x0050;
    /// Built-in endpoint set (u32 bitmask).
    pub const BUILTIN_ENDPOINT_SET: u16 = 0x0058;
    /// Endpoint GUID.
    pub const ENDPOINT_GUID: u16 = 0x005a;
    /// Key hash (16 bytes).
    pub const KEY_HASH: u16 = 0x0070;
    /// Status info (4 bytes, always big-endian: disposed 1, unregistered 2).
    pub const STATUS_INFO: u16 = 0x0071;
    /// Time-based filter (minimum separation).
    pub const TIME_BASED_FILTER: u16 = 0x0004;
    /// Ownership strength (i32).
    pub const OWNERSHIP_STRENGTH: u16 = 0x0006;
    /// Liveliness (kind, lease).
    pub const LIVELINESS: u16 = 0x001b;
    /// Ownership (shared 0, exclusive 1).
    pub const OWNERSHIP: u16 = 0x001f;
    /// Presentation.
    pub const PRESENTATION: u16 = 0x0021;
    /// Deadline.
    pub const DEADLINE: u16 = 0x0023;
    /// Destination order.
    pub const DESTINATION_ORDER: u16 = 0x0025;
    /// Latency budget.
    pub const LATENCY_BUDGET: u16 = 0x0027;
    /// An endpoint's own unicast locator.
    pub const UNICAST_LOCATOR: u16 = 0x002f;
    /// An endpoint's own multicast locator.
    pub const MULTICAST_LOCATOR: u16 = 0x0030;
    /// Expects inline QoS (bool).
    pub const EXPECTS_INLINE_QOS: u16 = 0x0043;
    /// Data representation (sequence of i16).
    pub const DATA_REPRESENTATION: u16 = 0x0073;
}

/// Encapsulation identifiers of parameter-list payloads.
const PL_CDR_BE: [u8; 2] = [0x00, 0x02];
const PL_CDR_LE: [u8; 2] = [0x00, 0x03];

/// The most parameters one list may hold here.
const MAX_PARAMS: usize = 1024;

/// A parsed parameter list: its bytes (sentinel included) and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParameterList<'a> {
    bytes: &'a [u8],
    le: bool,
}

impl<'a> ParameterList<'a> {
    /// The list at the start of `bytes` (inline QoS), in the byte order
    /// `le`; returns it and how many bytes it took. Refused: a length that
    /// is not a multiple of 4, a parameter past the end, no sentinel.
    pub fn parse_prefix(bytes: &'a [u8], le: bool) -> Result<(Self, usize), RtpsError> {
        let mut c = Cur::new(bytes, le);
        for _ in 0..MAX_PARAMS {
            let id = c.u16()?;
            let len = usize::from(c.u16()?);
            if id == pid::SENTINEL {
                let used = c.position();
                return Ok((
                    Self {
                        bytes: &bytes[..used],
                        le,
                    },
                    used,
                ));
            }
            if len % 4 != 0 {
                return Err(RtpsError::Invalid("parameter length not a multiple of 4"));
            }
            c.bytes(len).map_err(|_| RtpsError::Truncated {
                what: "parameter",
                needed: len.saturating_sub(c.remaining()),
            })?;
        }
        Err(RtpsError::Invalid("parameter list without a sentinel"))
    }

    /// The list in a serialized payload (SPDP, SEDP): a PL_CDR_LE or
    /// PL_CDR_BE encapsulation header, then the list.
    pub fn from_payload(payload: &'a [u8]) -> Result<Self, RtpsError> {
        if payload.len() < 4 {
            return Err(RtpsError::Truncated {
                what: "encapsulation header",
                needed: 4 - payload.len(),
            });
        }
        let le = match [payload[0], payload[1]] {
            PL_CDR_LE => true,
            PL_CDR_BE => false,
            _ => return Err(RtpsError::Invalid("not a parameter-list encapsulation")),
        };
        Ok(Self::parse_prefix(&payload[4..], le)?.0)
    }

    /// Whether numbers in the values are little-endian.
    pub fn is_le(&self) -> bool {
        self.le
    }

    /// Every parameter but padding and the sentinel, in order: `(pid, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &'a [u8])> + '_ {
        let mut c = Cur::new(self.bytes, self.le);
        std::iter::from_fn(move || loop {
            // (Validated when parsed: these reads succeed.)
            let id = c.u16().ok()?;
            let len = usize::from(c.u16().ok()?);
            let v = c.bytes(len).ok()?;
            match id {
                pid::SENTINEL => return None,
                pid::PAD => continue,
                _ => return Some((id, v)),
            }
        })
    }

    /// The first value of `id`.
    pub fn get(&self, id: u16) -> Option<&'a [u8]> {
        self.iter().find(|(p, _)| *p == id).map(|(_, v)| v)
    }

    /// A u32 value.
    pub fn u32(&self, id: u16) -> Result<Option<u32>, RtpsError> {
        self.get(id).map(|v| Cur::new(v, self.le).u32()).transpose()
    }

    /// A GUID value.
    pub fn guid(&self, id: u16) -> Result<Option<Guid>, RtpsError> {
        self.get(id)
            .map(|v| Ok(Guid::from_bytes(Cur::new(v, self.le).array()?)))
            .transpose()
    }

    /// A string value (u32 length counting the NUL, characters, NUL).
    pub fn string(&self, id: u16) -> Result<Option<&'a str>, RtpsError> {
        let Some(v) = self.get(id) else {
            return Ok(None);
        };
        let mut c = Cur::new(v, self.le);
        let n = c.u32()? as usize;
        let b = c.bytes(n)?;
        match b.split_last() {
            Some((0, s)) => std::str::from_utf8(s)
                .map(Some)
                .map_err(|_| RtpsError::Invalid("string not UTF-8")),
            _ => Err(RtpsError::Invalid("string without its NUL")),
        }
    }

    /// Every locator value of `id` (locator parameters repeat).
    pub fn locators(&self, id: u16) -> Result<Vec<Locator>, RtpsError> {
        self.iter()
            .filter(|(p, _)| *p == id)
            .map(|(_, v)| {
                let mut c = Cur::new(v, self.le);
                Ok(Locator {
                    kind: c.i32()?,
                    port: c.u32()?,
                    address: c.array()?,
                })
            })
            .collect()
    }

    /// Writes the list little-endian. A big-endian list gets its parameter
    /// headers turned; values are copied as they are (their inner byte
    /// order is the value's business: STATUS_INFO is always big-endian,
    /// KEY_HASH and GUIDs are octets).
    pub(crate) fn write_le(&self, o: &mut Out) {
        if self.le {
            o.bytes(self.bytes);
            return;
        }
        for (id, v) in self.iter() {
            o.u16(id).u16(v.len() as u16).bytes(v);
        }
        o.u16(pid::SENTINEL).u16(0);
    }

    /// The list's bytes, sentinel included.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Builds a little-endian parameter list.
#[derive(Debug, Default)]
pub struct ListBuilder {
    out: Out,
}

impl ListBuilder {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parameter with `value`, padded to 4 bytes. Values over 64 KiB are
    /// cut (no parameter may be longer).
    pub fn param(&mut self, id: u16, value: &[u8]) -> &mut Self {
        let value = &value[..value.len().min(0xfff0)];
        let padded = value.len().div_ceil(4) * 4;
        self.out.u16(id).u16(padded as u16).bytes(value);
        self.out.pad4();
        self
    }

    /// A u32 parameter.
    pub fn u32(&mut self, id: u16, v: u32) -> &mut Self {
        self.param(id, &v.to_le_bytes())
    }

    /// A string parameter.
    pub fn string(&mut self, id: u16, s: &str) -> &mut Self {
        let mut v = Vec::with_capacity(s.len() + 5);
        v.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        self.param(id, &v)
    }

    /// A GUID parameter.
    pub fn guid(&mut self, id: u16, g: Guid) -> &mut Self {
        self.param(id, &g.to_bytes())
    }

    /// A locator parameter.
    pub fn locator(&mut self, id: u16, l: &Locator) -> &mut Self {
        let mut v = Vec::with_capacity(24);
        v.extend_from_slice(&l.kind.to_le_bytes());
        v.extend_from_slice(&l.port.to_le_bytes());
        v.extend_from_slice(&l.address);
        self.param(id, &v)
    }

    /// The list with its sentinel.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.u16(pid::SENTINEL).u16(0);
        self.out.buf
    }

    /// The list as a serialized payload (PL_CDR_LE header first).
    pub fn finish_payload(self) -> Vec<u8> {
        let mut p = vec![PL_CDR_LE[0], PL_CDR_LE[1], 0, 0];
        p.extend(self.finish());
        p
    }
}
