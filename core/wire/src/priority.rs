//! A connection's packet class (YARP's channel prioritisation): the DSCP its
//! datagrams carry, and through it the band a `pfifo_fast` queue puts them
//! in, so that a critical tag's datagrams pass a bulk tag's in the queues
//! the host and the network keep.
//!
//! | class      | DSCP             | Linux priority | `pfifo_fast` band |
//! |------------|------------------|----------------|-------------------|
//! | `Low`      | AF11 (10)        | 2 (bulk)       | 2 (last)          |
//! | `Normal`   | default (0)      | 0              | 1                 |
//! | `High`     | AF42 (36)        | 6 (interactive)| 0 (first)         |
//! | `Critical` | VOICE-ADMIT (44) | 6 (interactive)| 0 (first)         |
//! | `Dscp(n)`  | n (0..=63)       | the kernel's mapping of the TOS byte |
//!
//! The Linux priority is what the kernel derives from the TOS byte
//! (`rt_tos2priority`); EF (46) maps to 4, band 1, which is why `Critical`
//! is VOICE-ADMIT, as in the paper, and not EF.

use std::fmt;
use std::str::FromStr;

use crate::codec::DecodeError;

/// The packet class of a connection's datagrams (see the module docs).
/// (`Ord` is declaration order, for sorting; which class goes first is
/// [`Priority::rank`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Behind everything else: AF11.
    Low,
    /// The default class.
    #[default]
    Normal,
    /// Ahead of normal traffic: AF42.
    High,
    /// Ahead of normal traffic, for the few channels that must not wait:
    /// VOICE-ADMIT.
    Critical,
    /// A DSCP value of the caller's (0..=63).
    Dscp(u8),
}

impl Priority {
    /// The DSCP code point (6 bits).
    pub const fn dscp(self) -> u8 {
        match self {
            Priority::Low => 10,
            Priority::Normal => 0,
            Priority::High => 36,
            Priority::Critical => 44,
            Priority::Dscp(v) => v & 0x3f,
        }
    }

    /// The TOS byte (IPv4) or traffic class (IPv6): the DSCP, ECN bits
    /// clear.
    pub const fn tos(self) -> u8 {
        self.dscp() << 2
    }

    /// Which of two classes goes first: a leg that carries a tag to several
    /// receivers of one node takes the highest of theirs. Ordered by the
    /// band the class lands in, then by DSCP.
    pub const fn rank(self) -> (u8, u8) {
        let band = match self.tos() & 0x1e {
            // `rt_tos2priority`: interactive (band 0) for TOS bits 0x10
            // and 0x12, bulk (band 2) for 0x08 and 0x0a, else band 1.
            0x10 | 0x12 => 2,
            0x08 | 0x0a => 0,
            _ => 1,
        };
        (band, self.dscp())
    }

    /// Its one-byte code (in `ChannelQos`'s encoding and a send ticket's
    /// destination words).
    pub fn to_u8(self) -> u8 {
        match self {
            Priority::Normal => 0,
            Priority::Low => 1,
            Priority::High => 2,
            Priority::Critical => 3,
            Priority::Dscp(v) => 0x80 | (v & 0x3f),
        }
    }

    /// A class from its code ([`Priority::to_u8`]); unknown codes are an
    /// error.
    pub fn from_u8(v: u8) -> Result<Self, DecodeError> {
        match v {
            0 => Ok(Priority::Normal),
            1 => Ok(Priority::Low),
            2 => Ok(Priority::High),
            3 => Ok(Priority::Critical),
            v if v & 0xc0 == 0x80 => Ok(Priority::Dscp(v & 0x3f)),
            v => Err(DecodeError::Unknown {
                what: "priority class",
                value: u32::from(v),
            }),
        }
    }
}

impl FromStr for Priority {
    type Err = String;

    /// `low`, `normal`, `high`, `critical`, or `dscp:N` with N in 0..=63.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "low" => Ok(Priority::Low),
            "normal" => Ok(Priority::Normal),
            "high" => Ok(Priority::High),
            "critical" => Ok(Priority::Critical),
            _ => s
                .strip_prefix("dscp:")
                .and_then(|n| n.parse::<u8>().ok())
                .filter(|n| *n <= 63)
                .map(Priority::Dscp)
                .ok_or_else(|| {
                    format!("`{s}`: write low, normal, high, critical or dscp:N (N in 0..=63)")
                }),
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Priority::Low => f.write_str("low"),
            Priority::Normal => f.write_str("normal"),
            Priority::High => f.write_str("high"),
            Priority::Critical => f.write_str("critical"),
            Priority::Dscp(v) => write!(f, "dscp:{v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_survives_its_byte_and_its_name() {
        let mut all = vec![
            Priority::Low,
            Priority::Normal,
            Priority::High,
            Priority::Critical,
        ];
        all.extend((0..=63).map(Priority::Dscp));
        for p in all {
            assert_eq!(Priority::from_u8(p.to_u8()), Ok(p));
            assert_eq!(p.to_string().parse::<Priority>(), Ok(p));
        }
        for v in 4..=0x7f_u8 {
            assert!(Priority::from_u8(v).is_err(), "{v}");
        }
        assert!("dscp:64".parse::<Priority>().is_err());
        assert!("urgent".parse::<Priority>().is_err());
    }

    #[test]
    fn the_classes_land_in_the_papers_bands_and_rank_so() {
        assert_eq!(Priority::High.tos(), 0x90);
        assert_eq!(Priority::Critical.tos(), 0xb0);
        assert_eq!(Priority::Low.rank().0, 0);
        assert_eq!(Priority::Normal.rank().0, 1);
        assert_eq!(Priority::High.rank().0, 2);
        assert_eq!(Priority::Critical.rank().0, 2);
        // EF (46) lands in band 1 on Linux: it ranks with normal traffic.
        assert_eq!(Priority::Dscp(46).rank().0, 1);
        assert!(Priority::Critical.rank() > Priority::High.rank());
        assert!(Priority::High.rank() > Priority::Dscp(46).rank());
    }
}
