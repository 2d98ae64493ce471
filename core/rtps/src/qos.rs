//! The QoS DDS endpoints announce in SEDP, with the specification's
//! defaults for what is absent, and the request-offered matching of a
//! reader with a writer, which says why a pair does not match.

use crate::plist::{pid, ParameterList};
use crate::RtpsError;

/// A DDS `Duration_t`: seconds and a fraction in 2⁻³² s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Duration {
    /// Seconds.
    pub seconds: i32,
    /// Fraction of a second, in 2⁻³² s.
    pub fraction: u32,
}

impl Duration {
    /// Zero.
    pub const ZERO: Self = Self {
        seconds: 0,
        fraction: 0,
    };
    /// DURATION_INFINITE.
    pub const INFINITE: Self = Self {
        seconds: 0x7fff_ffff,
        fraction: 0xffff_ffff,
    };

    /// From milliseconds (the fraction rounded up, as Cyclone DDS rounds
    /// its durations).
    pub fn from_millis(ms: u64) -> Self {
        let seconds = (ms / 1000).min(0x7fff_fffe) as i32;
        let sub = ms % 1000;
        Self {
            seconds,
            fraction: (sub << 32).div_ceil(1000) as u32,
        }
    }

    /// Nanoseconds, to the nearest: what QoS matching compares, so that
    /// one period rounded up by one vendor and down by another is equal.
    pub fn nanos(self) -> i128 {
        i128::from(self.seconds) * 1_000_000_000
            + ((i128::from(self.fraction) * 1_000_000_000 + (1 << 31)) >> 32)
    }

    pub(crate) fn read(v: &[u8], le: bool) -> Result<Self, RtpsError> {
        let mut c = crate::cursor::Cur::new(v, le);
        Ok(Self {
            seconds: c.i32()?,
            fraction: c.u32()?,
        })
    }

    pub(crate) fn to_le(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.seconds.to_le_bytes());
        b[4..].copy_from_slice(&self.fraction.to_le_bytes());
        b
    }
}

/// Reliability kind (on the wire: best effort 1, reliable 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reliability {
    /// Best effort.
    BestEffort,
    /// Reliable.
    Reliable,
}

/// Durability kind (volatile 0 … persistent 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Durability {
    /// Only samples written after the reader matched.
    Volatile,
    /// The writer keeps history for late joiners.
    TransientLocal,
    /// A durability service keeps it.
    Transient,
    /// Kept on disk.
    Persistent,
}

/// Liveliness kind (automatic 0, manual by participant 1, by topic 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Liveliness {
    /// Asserted by the middleware.
    Automatic,
    /// Asserted by the participant.
    ManualByParticipant,
    /// Asserted by each writer.
    ManualByTopic,
}

/// History kind and depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum History {
    /// The last `n` samples per instance.
    KeepLast(i32),
    /// Every sample.
    KeepAll,
}

/// Presentation (access scope: instance 0, topic 1, group 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Presentation {
    /// Access scope.
    pub scope: u32,
    /// Coherent access.
    pub coherent: bool,
    /// Ordered access.
    pub ordered: bool,
}

/// The QoS of one endpoint as announced, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qos {
    /// Reliability and the writer's max blocking time.
    pub reliability: (Reliability, Duration),
    /// Durability.
    pub durability: Durability,
    /// Deadline period.
    pub deadline: Duration,
    /// Latency budget.
    pub latency_budget: Duration,
    /// Liveliness kind and lease.
    pub liveliness: (Liveliness, Duration),
    /// Exclusive ownership.
    pub exclusive: bool,
    /// Ownership strength (a writer's).
    pub strength: i32,
    /// Destination order by source timestamp.
    pub by_source: bool,
    /// Presentation.
    pub presentation: Presentation,
    /// History.
    pub history: History,
    /// Minimum separation (a reader's time-based filter).
    pub time_based_filter: Duration,
    /// Partitions (empty: the default partition "").
    pub partitions: Vec<String>,
    /// Data representations (XCDR 0, XCDR2 2), in preference order.
    pub representation: Vec<i16>,
}

impl Qos {
    /// The specification's defaults: a reader is best effort, a writer
    /// reliable (100 ms max blocking time).
    pub fn default_for(writer: bool) -> Self {
        Self {
            reliability: if writer {
                (Reliability::Reliable, Duration::from_millis(100))
            } else {
                (Reliability::BestEffort, Duration::from_millis(100))
            },
            durability: Durability::Volatile,
            deadline: Duration::INFINITE,
            latency_budget: Duration::ZERO,
            liveliness: (Liveliness::Automatic, Duration::INFINITE),
            exclusive: false,
            strength: 0,
            by_source: false,
            presentation: Presentation {
                scope: 0,
                coherent: false,
                ordered: false,
            },
            history: History::KeepLast(1),
            time_based_filter: Duration::ZERO,
            partitions: Vec::new(),
            representation: vec![0],
        }
    }

    /// The QoS in an SEDP parameter list, defaults for what is absent.
    pub fn from_list(l: &ParameterList<'_>, writer: bool) -> Result<Self, RtpsError> {
        let mut q = Self::default_for(writer);
        let le = l.is_le();
        fn cur(v: &[u8], le: bool) -> crate::cursor::Cur<'_> {
            crate::cursor::Cur::new(v, le)
        }
        for (id, v) in l.iter() {
            match id {
                pid::RELIABILITY => {
                    let mut c = cur(v, le);
                    let kind = match c.u32()? {
                        1 => Reliability::BestEffort,
                        2 => Reliability::Reliable,
                        _ => return Err(RtpsError::Invalid("reliability kind")),
                    };
                    let max = match v.len() {
                        n if n >= 12 => Duration::read(&v[4..], le)?,
                        _ => q.reliability.1,
                    };
                    q.reliability = (kind, max);
                }
                pid::DURABILITY => {
                    q.durability = match cur(v, le).u32()? {
                        0 => Durability::Volatile,
                        1 => Durability::TransientLocal,
                        2 => Durability::Transient,
                        3 => Durability::Persistent,
                        _ => return Err(RtpsError::Invalid("durability kind")),
                    }
                }
                pid::DEADLINE => q.deadline = Duration::read(v, le)?,
                pid::LATENCY_BUDGET => q.latency_budget = Duration::read(v, le)?,
                pid::LIVELINESS => {
                    let kind = match cur(v, le).u32()? {
                        0 => Liveliness::Automatic,
                        1 => Liveliness::ManualByParticipant,
                        2 => Liveliness::ManualByTopic,
                        _ => return Err(RtpsError::Invalid("liveliness kind")),
                    };
                    let lease = Duration::read(v.get(4..).unwrap_or(&[]), le)?;
                    q.liveliness = (kind, lease);
                }
                pid::OWNERSHIP => q.exclusive = cur(v, le).u32()? == 1,
                pid::OWNERSHIP_STRENGTH => q.strength = cur(v, le).i32()?,
                pid::DESTINATION_ORDER => q.by_source = cur(v, le).u32()? == 1,
                pid::PRESENTATION => {
                    let mut c = cur(v, le);
                    let scope = c.u32()?;
                    let flags = c.bytes(2)?;
                    q.presentation = Presentation {
                        scope,
                        coherent: flags[0] != 0,
                        ordered: flags[1] != 0,
                    };
                }
                pid::HISTORY => {
                    let mut c = cur(v, le);
                    q.history = match c.u32()? {
                        0 => History::KeepLast(c.i32()?),
                        1 => History::KeepAll,
                        _ => return Err(RtpsError::Invalid("history kind")),
                    };
                }
                pid::TIME_BASED_FILTER => q.time_based_filter = Duration::read(v, le)?,
                pid::PARTITION => q.partitions = strings(v, le)?,
                pid::DATA_REPRESENTATION => {
                    let mut c = cur(v, le);
                    let n = c.u32()? as usize;
                    if n > v.len() / 2 {
                        return Err(RtpsError::Invalid("data representation count"));
                    }
                    q.representation = (0..n)
                        .map(|_| c.u16().map(|x| x as i16))
                        .collect::<Result<_, _>>()?;
                }
                _ => {}
            }
        }
        Ok(q)
    }

    /// Writes the QoS into an SEDP list: reliability and durability
    /// always (Cyclone's advice), the rest where it differs from the
    /// default.
    pub fn write(&self, b: &mut crate::plist::ListBuilder, writer: bool) {
        let d = Self::default_for(writer);
        let mut rel = Vec::with_capacity(12);
        rel.extend_from_slice(
            &match self.reliability.0 {
                Reliability::BestEffort => 1u32,
                Reliability::Reliable => 2,
            }
            .to_le_bytes(),
        );
        rel.extend_from_slice(&self.reliability.1.to_le());
        b.param(pid::RELIABILITY, &rel);
        b.u32(pid::DURABILITY, self.durability as u32);
        if self.deadline != d.deadline {
            b.param(pid::DEADLINE, &self.deadline.to_le());
        }
        if self.latency_budget != d.latency_budget {
            b.param(pid::LATENCY_BUDGET, &self.latency_budget.to_le());
        }
        if self.liveliness != d.liveliness {
            let mut v = (self.liveliness.0 as u32).to_le_bytes().to_vec();
            v.extend_from_slice(&self.liveliness.1.to_le());
            b.param(pid::LIVELINESS, &v);
        }
        if self.exclusive {
            b.u32(pid::OWNERSHIP, 1);
        }
        if self.strength != 0 {
            b.u32(pid::OWNERSHIP_STRENGTH, self.strength as u32);
        }
        if self.by_source {
            b.u32(pid::DESTINATION_ORDER, 1);
        }
        if self.presentation != d.presentation {
            let p = self.presentation;
            let mut v = p.scope.to_le_bytes().to_vec();
            v.extend_from_slice(&[u8::from(p.coherent), u8::from(p.ordered), 0, 0]);
            b.param(pid::PRESENTATION, &v);
        }
        if self.history != d.history {
            let v = match self.history {
                History::KeepLast(n) => [0u32.to_le_bytes(), n.to_le_bytes()].concat(),
                History::KeepAll => [1u32.to_le_bytes(), 1i32.to_le_bytes()].concat(),
            };
            b.param(pid::HISTORY, &v);
        }
        if self.time_based_filter != d.time_based_filter {
            b.param(pid::TIME_BASED_FILTER, &self.time_based_filter.to_le());
        }
        if !self.partitions.is_empty() {
            let mut v = (self.partitions.len() as u32).to_le_bytes().to_vec();
            for p in &self.partitions {
                v.extend_from_slice(&(p.len() as u32 + 1).to_le_bytes());
                v.extend_from_slice(p.as_bytes());
                v.push(0);
                while v.len() % 4 != 0 {
                    v.push(0);
                }
            }
            b.param(pid::PARTITION, &v);
        }
        if self.representation != d.representation {
            let mut v = (self.representation.len() as u32).to_le_bytes().to_vec();
            for r in &self.representation {
                v.extend_from_slice(&r.to_le_bytes());
            }
            b.param(pid::DATA_REPRESENTATION, &v);
        }
    }
}

/// A `sequence<string>` value.
fn strings(v: &[u8], le: bool) -> Result<Vec<String>, RtpsError> {
    let mut c = crate::cursor::Cur::new(v, le);
    let n = c.u32()? as usize;
    if n > v.len() / 4 {
        return Err(RtpsError::Invalid("string count"));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = c.u32()? as usize;
        let b = c.bytes(len)?;
        let s = match b.split_last() {
            Some((0, s)) => s,
            _ => return Err(RtpsError::Invalid("string without its NUL")),
        };
        out.push(
            std::str::from_utf8(s)
                .map_err(|_| RtpsError::Invalid("string not UTF-8"))?
                .to_owned(),
        );
        let pad = (4 - len % 4) % 4;
        c.bytes(pad.min(c.remaining()))?;
    }
    Ok(out)
}

/// Why a reader and a writer do not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// Different topics.
    #[error("different topic names")]
    Topic,
    /// Different type names (type information is not compared).
    #[error("different type names")]
    Type,
    /// No partition in common.
    #[error("no partition in common")]
    Partition,
    /// The reader asks for reliability the writer does not offer.
    #[error("the reader is reliable and the writer best effort")]
    Reliability,
    /// The reader asks for more durability than the writer offers.
    #[error("the reader asks for more durability than the writer offers")]
    Durability,
    /// The reader's deadline is shorter than the writer's.
    #[error("the reader's deadline is shorter than the writer's")]
    Deadline,
    /// The reader's latency budget is smaller than the writer's.
    #[error("the reader's latency budget is smaller than the writer's")]
    LatencyBudget,
    /// Weaker liveliness offered than asked for.
    #[error("the writer's liveliness is weaker than the reader asks")]
    Liveliness,
    /// One is exclusive, the other shared.
    #[error("ownership kinds differ")]
    Ownership,
    /// The reader orders by source, the writer does not.
    #[error("the reader orders by source timestamp and the writer does not")]
    DestinationOrder,
    /// The reader's presentation asks more than the writer's offers.
    #[error("the reader's presentation asks more than the writer's offers")]
    Presentation,
    /// The writer's representation is not one the reader reads.
    #[error("the writer's data representation is not one the reader accepts")]
    Representation,
}

/// Whether a reader (topic, type, QoS) matches a writer: the topic and type
/// names are equal, the partitions meet, and every requested QoS is at most
/// what is offered (DDS request-offered rules).
pub fn matches(reader: (&str, &str, &Qos), writer: (&str, &str, &Qos)) -> Result<(), Mismatch> {
    let ((rt, rty, r), (wt, wty, w)) = (reader, writer);
    if rt != wt {
        return Err(Mismatch::Topic);
    }
    if rty != wty {
        return Err(Mismatch::Type);
    }
    if !partitions_meet(&r.partitions, &w.partitions) {
        return Err(Mismatch::Partition);
    }
    if r.reliability.0 > w.reliability.0 {
        return Err(Mismatch::Reliability);
    }
    if r.durability > w.durability {
        return Err(Mismatch::Durability);
    }
    if r.deadline.nanos() < w.deadline.nanos() {
        return Err(Mismatch::Deadline);
    }
    if r.latency_budget.nanos() < w.latency_budget.nanos() {
        return Err(Mismatch::LatencyBudget);
    }
    if r.liveliness.0 > w.liveliness.0 || r.liveliness.1.nanos() < w.liveliness.1.nanos() {
        return Err(Mismatch::Liveliness);
    }
    if r.exclusive != w.exclusive {
        return Err(Mismatch::Ownership);
    }
    if r.by_source && !w.by_source {
        return Err(Mismatch::DestinationOrder);
    }
    let (rp, wp) = (r.presentation, w.presentation);
    if rp.scope > wp.scope || (rp.coherent && !wp.coherent) || (rp.ordered && !wp.ordered) {
        return Err(Mismatch::Presentation);
    }
    match w.representation.first() {
        Some(first) if r.representation.contains(first) => Ok(()),
        None if r.representation.contains(&0) => Ok(()),
        _ => Err(Mismatch::Representation),
    }
}

/// Two partition lists meet (empty means the default partition ""; `*`
/// and `?` are wildcards on either side, not both).
fn partitions_meet(a: &[String], b: &[String]) -> bool {
    let dflt = [String::new()];
    let a = if a.is_empty() { &dflt[..] } else { a };
    let b = if b.is_empty() { &dflt[..] } else { b };
    a.iter().any(|x| {
        b.iter().any(|y| {
            let (xw, yw) = (wild(x), wild(y));
            match (xw, yw) {
                (false, false) => x == y,
                (true, false) => glob(x.as_bytes(), y.as_bytes()),
                (false, true) => glob(y.as_bytes(), x.as_bytes()),
                (true, true) => false,
            }
        })
    })
}

fn wild(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// `*` any run, `?` one character (iterative, no recursion).
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_meet_by_name_or_one_sided_wildcard() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert!(partitions_meet(&[], &[]));
        assert!(partitions_meet(&s(&[""]), &[]));
        assert!(!partitions_meet(&s(&["a"]), &[]));
        assert!(partitions_meet(&s(&["a", "b"]), &s(&["b"])));
        assert!(partitions_meet(&s(&["rob*"]), &s(&["robot"])));
        assert!(partitions_meet(&s(&["robot"]), &s(&["r?bot"])));
        assert!(!partitions_meet(&s(&["r*"]), &s(&["r?"])));
        assert!(!partitions_meet(&s(&["robot"]), &s(&["car*"])));
    }

    #[test]
    fn a_request_above_the_offer_says_which() {
        let w = Qos::default_for(true);
        let mut r = Qos::default_for(false);
        let m = |r: &Qos, w: &Qos| matches(("t", "T", r), ("t", "T", w));
        assert_eq!(m(&r, &w), Ok(()));
        assert_eq!(
            matches(("t", "T", &r), ("u", "T", &w)),
            Err(Mismatch::Topic)
        );
        assert_eq!(matches(("t", "T", &r), ("t", "U", &w)), Err(Mismatch::Type));
        r.reliability.0 = Reliability::Reliable;
        assert_eq!(m(&r, &w), Ok(()));
        let mut be = w.clone();
        be.reliability.0 = Reliability::BestEffort;
        assert_eq!(m(&r, &be), Err(Mismatch::Reliability));
        r.durability = Durability::TransientLocal;
        assert_eq!(m(&r, &w), Err(Mismatch::Durability));
        r.durability = Durability::Volatile;
        r.deadline = Duration::from_millis(10);
        assert_eq!(m(&r, &w), Err(Mismatch::Deadline));
        r.deadline = Duration::INFINITE;
        r.exclusive = true;
        assert_eq!(m(&r, &w), Err(Mismatch::Ownership));
        r.exclusive = false;
        r.representation = vec![2];
        assert_eq!(m(&r, &w), Err(Mismatch::Representation));
        r.representation = vec![0, 2];
        r.partitions = vec!["p".into()];
        assert_eq!(m(&r, &w), Err(Mismatch::Partition));
    }
}

#[cfg(test)]
mod rounding {
    use super::*;

    #[test]
    fn one_period_rounded_up_or_down_still_matches() {
        let mut w = Qos::default_for(true);
        let mut r = Qos::default_for(false);
        w.reliability.0 = Reliability::BestEffort;
        // 200 ms: 0.2 * 2^32 = 858993459.2, written rounded up (ours,
        // Cyclone's) or down.
        w.deadline = Duration::from_millis(200);
        assert_eq!(w.deadline.fraction, 858_993_460);
        r.deadline = Duration {
            seconds: 0,
            fraction: 858_993_459,
        };
        assert_eq!(check(&r, &w), Ok(()));
        // A reader asking for a shorter period is still refused.
        r.deadline = Duration::from_millis(199);
        assert_eq!(check(&r, &w), Err(Mismatch::Deadline));
    }

    fn check(r: &Qos, w: &Qos) -> Result<(), Mismatch> {
        matches(("t", "T", r), ("t", "T", w))
    }
}
