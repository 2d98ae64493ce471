//! How a publisher asks its node to pace the tag's reliable streams to
//! other nodes (NAPA, `tagwire_reliable::pacer`): as its daemon is set,
//! not at all, adaptively, or at a fixed rate.

use std::fmt;
use std::str::FromStr;

use crate::codec::{DecodeError, Reader, Writer};

/// A publisher's pacing of its tag's reliable streams to other nodes.
/// Several publishers of one tag on one node: the tag is paced at the
/// lowest fixed rate any asks, else adaptively if any asks that, else not
/// if any asks `Off`, else as the daemon is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pacing {
    /// As the sending daemon is set (`tagwire daemon --pacing`).
    #[default]
    Daemon,
    /// Not paced: the reliable window and the network's queues alone.
    Off,
    /// Paced from the stream's send-window occupancy (NAPA).
    Adaptive,
    /// Released at this many bytes per second (datagrams on the wire,
    /// headers included), whatever the acknowledgements say (> 0).
    Fixed(u64),
}

impl Pacing {
    /// The pacing of a node's tag that publishers asking `asked` share
    /// (see the type's docs); `Daemon` when none asks.
    pub fn strongest(asked: impl IntoIterator<Item = Pacing>) -> Pacing {
        asked.into_iter().fold(Pacing::Daemon, |a, b| match (a, b) {
            (Pacing::Fixed(x), Pacing::Fixed(y)) => Pacing::Fixed(x.min(y)),
            (Pacing::Fixed(x), _) | (_, Pacing::Fixed(x)) => Pacing::Fixed(x),
            (Pacing::Adaptive, _) | (_, Pacing::Adaptive) => Pacing::Adaptive,
            (Pacing::Off, _) | (_, Pacing::Off) => Pacing::Off,
            _ => Pacing::Daemon,
        })
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        match self {
            Pacing::Daemon => {
                w.u8(0);
            }
            Pacing::Off => {
                w.u8(1);
            }
            Pacing::Adaptive => {
                w.u8(2);
            }
            Pacing::Fixed(rate) => {
                w.u8(3).u64(*rate);
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match r.u8()? {
            0 => Pacing::Daemon,
            1 => Pacing::Off,
            2 => Pacing::Adaptive,
            3 => match r.u64()? {
                0 => {
                    return Err(DecodeError::Unknown {
                        what: "fixed pacing rate (bytes per second, > 0)",
                        value: 0,
                    })
                }
                rate => Pacing::Fixed(rate),
            },
            v => {
                return Err(DecodeError::Unknown {
                    what: "pacing",
                    value: u32::from(v),
                })
            }
        })
    }
}

impl FromStr for Pacing {
    type Err = String;

    /// `daemon`, `off`, `adaptive`, or `fixed:RATE`: RATE a number of
    /// bytes per second, with `k`, `m` or `g` for thousands, millions or
    /// billions and `bit` for bits (`fixed:50mbit`, `fixed:2.5MB`,
    /// `fixed:400000`).
    fn from_str(s: &str) -> Result<Self, String> {
        let wrong = || {
            format!(
                "`{s}`: write daemon, off, adaptive or fixed:RATE (bytes per second, \
                 e.g. fixed:2.5MB or fixed:50mbit)"
            )
        };
        match s {
            "daemon" => return Ok(Pacing::Daemon),
            "off" => return Ok(Pacing::Off),
            "adaptive" => return Ok(Pacing::Adaptive),
            _ => {}
        }
        let rate = s.strip_prefix("fixed:").ok_or_else(wrong)?.to_lowercase();
        let (rate, per_byte) = match rate.strip_suffix("bit") {
            Some(r) => (r, 1.0 / 8.0),
            None => (rate.strip_suffix('b').unwrap_or(&rate), 1.0),
        };
        let (number, scale) = match rate.chars().last() {
            Some('k') => (&rate[..rate.len() - 1], 1e3),
            Some('m') => (&rate[..rate.len() - 1], 1e6),
            Some('g') => (&rate[..rate.len() - 1], 1e9),
            _ => (rate, 1.0),
        };
        let bytes = number.parse::<f64>().map_err(|_| wrong())? * scale * per_byte;
        if !(1.0..=1e12).contains(&bytes) {
            return Err(wrong());
        }
        Ok(Pacing::Fixed(bytes.round() as u64))
    }
}

impl fmt::Display for Pacing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pacing::Daemon => f.write_str("daemon"),
            Pacing::Off => f.write_str("off"),
            Pacing::Adaptive => f.write_str("adaptive"),
            Pacing::Fixed(rate) => write!(f, "fixed:{rate}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pacing_survives_its_code_and_its_name() {
        for p in [
            Pacing::Daemon,
            Pacing::Off,
            Pacing::Adaptive,
            Pacing::Fixed(1),
            Pacing::Fixed(12_500_000),
        ] {
            let mut w = Writer::new();
            p.encode(&mut w);
            let bytes = w.into_inner();
            assert_eq!(Pacing::decode(&mut Reader::new(&bytes)), Ok(p));
            assert_eq!(p.to_string().parse::<Pacing>(), Ok(p));
        }
        assert!(Pacing::decode(&mut Reader::new(&[3, 0, 0, 0, 0, 0, 0, 0, 0])).is_err());
        assert!(Pacing::decode(&mut Reader::new(&[4])).is_err());
        assert!(Pacing::decode(&mut Reader::new(&[3, 1])).is_err());
    }

    #[test]
    fn rates_parse_in_bytes_or_bits() {
        assert_eq!("fixed:50mbit".parse(), Ok(Pacing::Fixed(6_250_000)));
        assert_eq!("fixed:2.5MB".parse(), Ok(Pacing::Fixed(2_500_000)));
        assert_eq!("fixed:400k".parse(), Ok(Pacing::Fixed(400_000)));
        assert_eq!("fixed:400000".parse(), Ok(Pacing::Fixed(400_000)));
        for bad in [
            "fixed:",
            "fixed:0",
            "fixed:-3",
            "fixed:fast",
            "slow",
            "fixed:1e13",
        ] {
            assert!(bad.parse::<Pacing>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_node_paces_at_what_its_publishers_ask_most() {
        use Pacing::*;
        assert_eq!(Pacing::strongest([]), Daemon);
        assert_eq!(Pacing::strongest([Daemon, Off]), Off);
        assert_eq!(Pacing::strongest([Off, Adaptive, Daemon]), Adaptive);
        assert_eq!(Pacing::strongest([Fixed(9), Adaptive, Fixed(4)]), Fixed(4));
        assert_eq!(Pacing::strongest([Off, Fixed(9)]), Fixed(9));
    }
}
