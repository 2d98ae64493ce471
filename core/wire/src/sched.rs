//! A connection's thread scheduling (YARP's channel prioritisation, the
//! half that is not the packet class): the policy and priority of the
//! threads that move its data, at either end.
//!
//! | value            | Linux policy     | needs                                 |
//! |------------------|------------------|---------------------------------------|
//! | `Other { nice }` | `SCHED_OTHER`    | a nice below 0: `CAP_SYS_NICE` or `RLIMIT_NICE` |
//! | `Fifo(p)`        | `SCHED_FIFO`, p  | `CAP_SYS_NICE` or `RLIMIT_RTPRIO` ≥ p |
//! | `RoundRobin(p)`  | `SCHED_RR`, p    | the same                              |
//!
//! p is 1..=99 (higher runs first); nice is -20..=19 (lower runs more).
//! This type only describes a policy; applying one to a thread is the
//! runtime's (`tagwire-sched`).

use std::fmt;
use std::str::FromStr;

use crate::codec::DecodeError;

/// The scheduling of a connection's threads (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sched {
    /// The time-sharing policy at a nice value (-20..=19).
    Other {
        /// The nice value: 0 is the default, lower runs more.
        nice: i8,
    },
    /// `SCHED_FIFO` at a real-time priority (1..=99): runs until it
    /// blocks or a higher priority is ready.
    Fifo(u8),
    /// `SCHED_RR` at a real-time priority (1..=99): as `Fifo`, sharing
    /// the processor in time slices with threads of the same priority.
    RoundRobin(u8),
}

impl Default for Sched {
    fn default() -> Self {
        Sched::Other { nice: 0 }
    }
}

impl Sched {
    /// The lowest and highest real-time priority.
    pub const RT_PRIORITIES: std::ops::RangeInclusive<u8> = 1..=99;
    /// The lowest (most favoured) and highest nice value.
    pub const NICE: std::ops::RangeInclusive<i8> = -20..=19;

    /// Whether it is the default (`SCHED_OTHER` at nice 0).
    pub const fn is_default(self) -> bool {
        matches!(self, Sched::Other { nice: 0 })
    }

    /// Whether it is a real-time policy (`Fifo` or `RoundRobin`).
    pub const fn is_real_time(self) -> bool {
        matches!(self, Sched::Fifo(_) | Sched::RoundRobin(_))
    }

    /// Whether a thread needs a privilege (`CAP_SYS_NICE` or the matching
    /// resource limit) to run at it: a real-time policy, or a nice below 0.
    pub const fn needs_privilege(self) -> bool {
        match self {
            Sched::Other { nice } => nice < 0,
            Sched::Fifo(_) | Sched::RoundRobin(_) => true,
        }
    }

    /// Which of two goes first, for a thread that serves several
    /// connections (it takes the highest of theirs): any real-time policy
    /// before `Other`, then the higher real-time priority, `Fifo` before
    /// `RoundRobin` at one priority; among `Other`, the lower nice.
    pub const fn rank(self) -> (u8, i16) {
        match self {
            Sched::Other { nice } => (0, -(nice as i16)),
            Sched::RoundRobin(p) => (1, 2 * p as i16),
            Sched::Fifo(p) => (1, 2 * p as i16 + 1),
        }
    }

    /// The higher of two by [`Sched::rank`].
    pub fn max(self, other: Sched) -> Sched {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    /// Its two-byte code (in `ChannelQos`'s encoding): the policy, then
    /// the nice value (two's complement) or the priority.
    pub fn to_bytes(self) -> [u8; 2] {
        match self {
            Sched::Other { nice } => [0, nice as u8],
            Sched::Fifo(p) => [1, p],
            Sched::RoundRobin(p) => [2, p],
        }
    }

    /// A policy from its code ([`Sched::to_bytes`]); an unknown policy, a
    /// nice outside -20..=19 or a priority outside 1..=99 is an error.
    pub fn from_bytes(b: [u8; 2]) -> Result<Self, DecodeError> {
        let bad = |what, value: u8| DecodeError::Unknown {
            what,
            value: u32::from(value),
        };
        match b[0] {
            0 if Self::NICE.contains(&(b[1] as i8)) => Ok(Sched::Other { nice: b[1] as i8 }),
            0 => Err(bad("nice value (-20..=19)", b[1])),
            1 | 2 if !Self::RT_PRIORITIES.contains(&b[1]) => {
                Err(bad("real-time priority (1..=99)", b[1]))
            }
            1 => Ok(Sched::Fifo(b[1])),
            2 => Ok(Sched::RoundRobin(b[1])),
            p => Err(bad("scheduling policy", p)),
        }
    }
}

impl FromStr for Sched {
    type Err = String;

    /// `other`, `other:N` (nice N in -20..=19), `fifo:P` or `rr:P` (P in
    /// 1..=99).
    fn from_str(s: &str) -> Result<Self, String> {
        let wrong =
            || format!("`{s}`: write other, other:NICE (-20..=19), fifo:P or rr:P (P in 1..=99)");
        let (policy, value) = s.split_once(':').unwrap_or((s, ""));
        match policy {
            "other" if value.is_empty() => Ok(Sched::default()),
            "other" => value
                .parse::<i8>()
                .ok()
                .filter(|n| Self::NICE.contains(n))
                .map(|nice| Sched::Other { nice })
                .ok_or_else(wrong),
            "fifo" | "rr" => {
                let p = value
                    .parse::<u8>()
                    .ok()
                    .filter(|p| Self::RT_PRIORITIES.contains(p))
                    .ok_or_else(wrong)?;
                Ok(if policy == "fifo" {
                    Sched::Fifo(p)
                } else {
                    Sched::RoundRobin(p)
                })
            }
            _ => Err(wrong()),
        }
    }
}

impl fmt::Display for Sched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sched::Other { nice: 0 } => f.write_str("other"),
            Sched::Other { nice } => write!(f, "other:{nice}"),
            Sched::Fifo(p) => write!(f, "fifo:{p}"),
            Sched::RoundRobin(p) => write!(f, "rr:{p}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Sched> {
        let mut all: Vec<Sched> = Sched::NICE.map(|nice| Sched::Other { nice }).collect();
        all.extend(Sched::RT_PRIORITIES.map(Sched::Fifo));
        all.extend(Sched::RT_PRIORITIES.map(Sched::RoundRobin));
        all
    }

    #[test]
    fn every_policy_survives_its_bytes_and_its_name() {
        for s in all() {
            assert_eq!(Sched::from_bytes(s.to_bytes()), Ok(s));
            assert_eq!(s.to_string().parse::<Sched>(), Ok(s));
        }
        assert_eq!("other:0".parse::<Sched>(), Ok(Sched::default()));
    }

    #[test]
    fn out_of_range_values_are_refused() {
        for b in [
            [0, 20],
            [0, (-21i8) as u8],
            [1, 0],
            [1, 100],
            [2, 0],
            [3, 1],
        ] {
            assert!(Sched::from_bytes(b).is_err(), "{b:?}");
        }
        for s in [
            "fifo",
            "fifo:0",
            "fifo:100",
            "rr:x",
            "other:20",
            "other:-21",
            "idle",
        ] {
            assert!(s.parse::<Sched>().is_err(), "{s}");
        }
    }

    #[test]
    fn real_time_ranks_above_any_nice_and_fifo_above_rr() {
        assert!(Sched::Fifo(1).rank() > Sched::Other { nice: -20 }.rank());
        assert!(Sched::Other { nice: -1 }.rank() > Sched::default().rank());
        assert!(Sched::default().rank() > Sched::Other { nice: 10 }.rank());
        assert!(Sched::Fifo(30).rank() > Sched::RoundRobin(30).rank());
        assert!(Sched::RoundRobin(31).rank() > Sched::Fifo(30).rank());
        assert_eq!(
            Sched::Fifo(2).max(Sched::RoundRobin(40)),
            Sched::RoundRobin(40)
        );
        assert!(!Sched::Other { nice: 5 }.needs_privilege());
        assert!(Sched::Other { nice: -5 }.needs_privilege());
        assert!(Sched::RoundRobin(1).needs_privilege());
    }
}
