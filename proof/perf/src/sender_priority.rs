//! The sender's policy against its receivers' in a fan-out
//! (`tagwire perf fanout --sender-priority`), for the worker processes
//! (`workload`) and the raw floor (`raw`) alike.

use tagwire::Sched;

/// The sender's real-time priority relative to its receivers' (the 1995
/// paper's Figures 4-4 and 4-5): every process at `SCHED_FIFO`, the
/// receivers at [`SenderPriority::receivers`], the sender ten above, ten
/// below or level with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderPriority {
    /// The sender preempts its receivers.
    Above,
    /// Each receiver it wakes preempts the sender (on a shared CPU).
    Below,
    /// Level: neither preempts the other.
    Same,
}

impl SenderPriority {
    /// "above", "below" or "same".
    pub fn as_str(self) -> &'static str {
        match self {
            SenderPriority::Above => "above",
            SenderPriority::Below => "below",
            SenderPriority::Same => "same",
        }
    }

    /// The relation `as_str` names.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Above, Self::Below, Self::Same]
            .into_iter()
            .find(|p| p.as_str() == s)
    }

    /// The sender's policy.
    pub fn sender(self) -> Sched {
        Sched::Fifo(match self {
            SenderPriority::Above => 30,
            SenderPriority::Same => 20,
            SenderPriority::Below => 10,
        })
    }

    /// The receivers' policy, whatever the relation.
    pub fn receivers() -> Sched {
        Sched::Fifo(20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sender_sits_above_below_or_level_with_its_receivers() {
        let r = SenderPriority::receivers();
        let fifo = |s: Sched| match s {
            Sched::Fifo(p) => p,
            other => panic!("{other} is not SCHED_FIFO"),
        };
        let (above, below, same) = (
            SenderPriority::Above.sender(),
            SenderPriority::Below.sender(),
            SenderPriority::Same.sender(),
        );
        assert!(fifo(above) > fifo(r) && fifo(below) < fifo(r) && fifo(same) == fifo(r));
        for p in [
            SenderPriority::Above,
            SenderPriority::Below,
            SenderPriority::Same,
        ] {
            assert_eq!(SenderPriority::parse(p.as_str()), Some(p));
        }
        assert_eq!(SenderPriority::parse("higher"), None);
    }
}
