//! The RTPS vocabulary (specification §9.3): GUIDs, sequence numbers and
//! their sets, time, locators.

use crate::cursor::{Cur, Out};
use crate::RtpsError;

/// tagwire's vendor id in every RTPS header (unregistered: "tagwire").
/// A reader and a writer that both carry it tell each other where a
/// volatile reader starts ([`crate::reliable`]).
pub(crate) const VENDOR_TAGWIRE: [u8; 2] = [0x01, 0x99];

/// The 12-byte prefix every entity of one participant shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]

pub struct GuidPrefix(pub [u8; 12]);

/// An entity within a participant: a 3-byte key and a kind octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EntityId(pub [u8; 4]);

impl EntityId {
    /// ENTITYID_UNKNOWN: "every reader" on data.
    pub const UNKNOWN: Self = Self([0, 0, 0, 0]);
    /// The participant itself.
    pub const PARTICIPANT: Self = Self([0, 0, 1, 0xc1]);
    /// SPDP's writer (participant announcements).
    pub const SPDP_WRITER: Self = Self([0, 1, 0, 0xc2]);
    /// SPDP's reader.
    pub const SPDP_READER: Self = Self([0, 1, 0, 0xc7]);
    /// SEDP's publications writer.
    pub const SEDP_PUBLICATIONS_WRITER: Self = Self([0, 0, 3, 0xc2]);
    /// SEDP's publications reader.
    pub const SEDP_PUBLICATIONS_READER: Self = Self([0, 0, 3, 0xc7]);
    /// SEDP's subscriptions writer.
    pub const SEDP_SUBSCRIPTIONS_WRITER: Self = Self([0, 0, 4, 0xc2]);
    /// SEDP's subscriptions reader.
    pub const SEDP_SUBSCRIPTIONS_READER: Self = Self([0, 0, 4, 0xc7]);
    /// The participant-message (liveliness) writer.
    pub const PMD_WRITER: Self = Self([0, 2, 0, 0xc2]);
    /// The participant-message reader.
    pub const PMD_READER: Self = Self([0, 2, 0, 0xc7]);

    /// The kind octet.
    pub fn kind(self) -> u8 {
        self.0[3]
    }

    /// A built-in entity (kind source bits 11).
    pub fn is_builtin(self) -> bool {
        self.kind() & 0xc0 == 0xc0
    }

    /// A writer (with or without key, user or built-in).
    pub fn is_writer(self) -> bool {
        matches!(self.kind() & 0x3f, 0x02 | 0x03)
    }

    /// A reader (with or without key, user or built-in).
    pub fn is_reader(self) -> bool {
        matches!(self.kind() & 0x3f, 0x04 | 0x07)
    }
}

/// A globally unique entity id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid {
    /// The participant's prefix.
    pub prefix: GuidPrefix,
    /// The entity within it.
    pub entity: EntityId,
}

impl Guid {
    /// The 16 bytes on the wire (never byte-swapped).
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..12].copy_from_slice(&self.prefix.0);
        b[12..].copy_from_slice(&self.entity.0);
        b
    }

    /// From its 16 wire bytes.
    pub fn from_bytes(b: [u8; 16]) -> Self {
        let mut p = [0u8; 12];
        p.copy_from_slice(&b[..12]);
        Self {
            prefix: GuidPrefix(p),
            entity: EntityId([b[12], b[13], b[14], b[15]]),
        }
    }
}

/// A writer's sequence number (the first is 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SequenceNumber(pub i64);

impl SequenceNumber {
    /// SEQUENCENUMBER_UNKNOWN.
    pub const UNKNOWN: Self = Self(-(1 << 32));

    pub(crate) fn read(c: &mut Cur<'_>) -> Result<Self, RtpsError> {
        let high = c.i32()?;
        let low = c.u32()?;
        Ok(Self((i64::from(high) << 32) | i64::from(low)))
    }

    pub(crate) fn write(self, o: &mut Out) {
        o.i32((self.0 >> 32) as i32).u32(self.0 as u32);
    }
}

/// The most members a sequence-number or fragment-number set has.
pub const MAX_SET_BITS: u32 = 256;

/// A set of numbers `base .. base + num_bits` given by a bitmap (MSB first
/// in each 32-bit word): what an ACKNACK NACKs, what a GAP lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NumberSet<T> {
    /// The first number the bitmap covers.
    pub base: T,
    /// How many numbers it covers (≤ 256).
    pub num_bits: u32,
    /// The words; only the first `num_bits.div_ceil(32)` are on the wire.
    pub bits: [u32; 8],
}

/// A set of sequence numbers.
pub type SequenceNumberSet = NumberSet<SequenceNumber>;
/// A set of fragment numbers (1-based).
pub type FragmentNumberSet = NumberSet<u32>;

impl<T: Copy> NumberSet<T> {
    /// An empty set at `base`.
    pub fn empty(base: T) -> Self {
        Self {
            base,
            num_bits: 0,
            bits: [0; 8],
        }
    }

    /// Whether offset `i` from the base is in the set.
    pub fn contains_offset(&self, i: u32) -> bool {
        i < self.num_bits && self.bits[(i / 32) as usize] & (1 << (31 - i % 32)) != 0
    }

    /// Adds offset `i` from the base (widening `num_bits` to cover it);
    /// false when `i` is out of the 256 a set can hold.
    pub fn insert_offset(&mut self, i: u32) -> bool {
        if i >= MAX_SET_BITS {
            return false;
        }
        self.num_bits = self.num_bits.max(i + 1);
        self.bits[(i / 32) as usize] |= 1 << (31 - i % 32);
        true
    }

    /// The offsets from the base that are in the set.
    pub fn offsets(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.num_bits).filter(|&i| self.contains_offset(i))
    }

    fn read_bits(c: &mut Cur<'_>, base: T) -> Result<Self, RtpsError> {
        let num_bits = c.u32()?;
        if num_bits > MAX_SET_BITS {
            return Err(RtpsError::Invalid("set of more than 256 numbers"));
        }
        let mut bits = [0u32; 8];
        for w in bits.iter_mut().take(num_bits.div_ceil(32) as usize) {
            *w = c.u32()?;
        }
        // Bits past num_bits mean nothing; keep the value canonical.
        if num_bits % 32 != 0 {
            let last = (num_bits / 32) as usize;
            bits[last] &= !(u32::MAX >> (num_bits % 32));
        }
        Ok(Self {
            base,
            num_bits,
            bits,
        })
    }

    fn write_bits(&self, o: &mut Out) {
        let n = self.num_bits.min(MAX_SET_BITS);
        o.u32(n);
        for w in &self.bits[..n.div_ceil(32) as usize] {
            o.u32(*w);
        }
    }
}

impl SequenceNumberSet {
    pub(crate) fn read(c: &mut Cur<'_>) -> Result<Self, RtpsError> {
        let base = SequenceNumber::read(c)?;
        Self::read_bits(c, base)
    }

    pub(crate) fn write(&self, o: &mut Out) {
        self.base.write(o);
        self.write_bits(o);
    }
}

impl FragmentNumberSet {
    pub(crate) fn read(c: &mut Cur<'_>) -> Result<Self, RtpsError> {
        let base = c.u32()?;
        Self::read_bits(c, base)
    }

    pub(crate) fn write(&self, o: &mut Out) {
        o.u32(self.base);
        self.write_bits(o);
    }
}

/// A point in time: seconds since 1970 and a fraction in units of 2⁻³² s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Time {
    /// Seconds.
    pub seconds: u32,
    /// Fraction of a second, in 2⁻³² s.
    pub fraction: u32,
}

impl Time {
    /// From nanoseconds since 1970 (the fraction rounded up, as Cyclone
    /// does, so that a round trip through `to_nanos` is exact).
    pub fn from_nanos(ns: u64) -> Self {
        let seconds = (ns / 1_000_000_000) as u32;
        let sub = ns % 1_000_000_000;
        let fraction = ((sub << 32).div_ceil(1_000_000_000)) as u32;
        Self { seconds, fraction }
    }

    /// Nanoseconds since 1970 (the fraction rounded down).
    pub fn to_nanos(self) -> u64 {
        u64::from(self.seconds) * 1_000_000_000 + ((u64::from(self.fraction) * 1_000_000_000) >> 32)
    }
}

/// A transport address: kind, port and a 16-byte address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Locator {
    /// 1 UDPv4, 2 UDPv6, 4 TCPv4, 8 TCPv6; others are ignored.
    pub kind: i32,
    /// The port.
    pub port: u32,
    /// For UDPv4: 12 zeros, then the address in network order.
    pub address: [u8; 16],
}

impl Locator {
    /// LOCATOR_KIND_UDPv4.
    pub const UDP_V4: i32 = 1;

    /// A UDPv4 locator.
    pub fn udp_v4(ip: std::net::Ipv4Addr, port: u16) -> Self {
        let mut address = [0u8; 16];
        address[12..].copy_from_slice(&ip.octets());
        Self {
            kind: Self::UDP_V4,
            port: u32::from(port),
            address,
        }
    }

    /// The socket address of a UDPv4 locator.
    pub fn to_udp_v4(&self) -> Option<std::net::SocketAddrV4> {
        if self.kind != Self::UDP_V4 || self.port == 0 || self.port > 65535 {
            return None;
        }
        let a = &self.address[12..];
        Some(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]),
            self.port as u16,
        ))
    }
}
