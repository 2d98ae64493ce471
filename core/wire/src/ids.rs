//! Identifiers: newtypes so a pid is never confused with a tag id.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

use crate::codec::{DecodeError, Reader, Writer};

/// Longest tag name, in bytes (docs/design.md §4).
pub const MAX_TAG_NAME: usize = 255;

/// Why a string is not a valid tag name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// The name is empty.
    #[error("tag name is empty; use a path such as /robot/laser")]
    Empty,
    /// The name is longer than [`MAX_TAG_NAME`] bytes.
    #[error("tag name is {0} bytes long; the limit is 255 bytes")]
    TooLong(usize),
    /// The name does not start with `/`.
    #[error("tag name {0:?} must start with '/', e.g. /robot/laser")]
    NotAbsolute(String),
    /// The name has an empty segment (`//`), a trailing `/`, or a control character.
    #[error("tag name {0:?} has an empty segment, a trailing '/' or a control character")]
    BadSegment(String),
}

/// The name of a distribution tag: a UTF-8 path such as `/robot/laser`, at most
/// 255 bytes, starting with `/`, with no empty segment and no control character.
///
/// Shared, not copied: a clone (one per delivered message and per session
/// lookup on the data path) is a reference count's increment.
#[derive(Debug, Clone)]
pub struct TagName(std::sync::Arc<str>);

// Compared by pointer first: a stream's name is one allocation its clones
// share, and the session looks it up several times per record (its bytes
// compared each time were 1.4 % of a flat-out forwarder). Equal pointers
// are equal names, so this agrees with `Hash`, of the bytes.
impl PartialEq for TagName {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for TagName {}

impl std::hash::Hash for TagName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

// A set or map of names can be asked with a datagram's borrowed name:
// `Hash`, `Eq` and `Ord` agree with those of the `str`.
impl std::borrow::Borrow<str> for TagName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialOrd for TagName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TagName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if std::sync::Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.0.cmp(&other.0)
    }
}

impl TagName {
    /// Validates `s` as a tag name.
    pub fn new(s: &str) -> Result<Self, NameError> {
        Self::check(s)?;
        Ok(Self(s.into()))
    }

    /// Whether `s` is a valid tag name (what [`TagName::new`] checks),
    /// without building one.
    pub fn check(s: &str) -> Result<(), NameError> {
        if s.is_empty() {
            return Err(NameError::Empty);
        }
        if s.len() > MAX_TAG_NAME {
            return Err(NameError::TooLong(s.len()));
        }
        if !s.starts_with('/') {
            return Err(NameError::NotAbsolute(s.to_owned()));
        }
        let body = &s[1..];
        if body.is_empty() || body.split('/').any(str::is_empty) || s.chars().any(char::is_control)
        {
            return Err(NameError::BadSegment(s.to_owned()));
        }
        Ok(())
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Self::new(r.str()?).map_err(|_| DecodeError::Invalid("tag name"))
    }
}

impl fmt::Display for TagName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for TagName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        Self::new(s)
    }
}

/// Where a tag is visible: on every node (`Global`) or only on the node that
/// created it (`Local`), as in the original model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Domain {
    /// Visible on all nodes.
    #[default]
    Global,
    /// Visible only on the creating node.
    Local,
}

impl Domain {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Domain::Global => 0,
            Domain::Local => 1,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Result<Self, DecodeError> {
        match v {
            0 => Ok(Domain::Global),
            1 => Ok(Domain::Local),
            v => Err(DecodeError::Unknown {
                what: "domain",
                value: u32::from(v),
            }),
        }
    }
}

/// What a subscriber asks of delivery from other nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reliability {
    /// In order, exactly once, nothing lost while both ends live; a full
    /// window holds the publisher back (the default, as DDS users expect for
    /// state).
    #[default]
    Reliable,
    /// The newest data: never retransmitted, never holds the publisher back;
    /// drops are counted.
    BestEffort,
}

impl fmt::Display for Reliability {
    /// `reliable` or `best-effort`, as the CLI and `tagwire stats` say it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reliability::Reliable => "reliable",
            Reliability::BestEffort => "best-effort",
        })
    }
}

impl fmt::Display for Carrier {
    /// `udp`, `tcp` or `multicast`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Carrier::Udp => "udp",
            Carrier::Tcp => "tcp",
            Carrier::Multicast => "multicast",
        })
    }
}

impl Reliability {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Reliability::Reliable => 0,
            Reliability::BestEffort => 1,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Result<Self, DecodeError> {
        match v {
            0 => Ok(Reliability::Reliable),
            1 => Ok(Reliability::BestEffort),
            v => Err(DecodeError::Unknown {
                what: "reliability",
                value: u32::from(v),
            }),
        }
    }
}

/// How a subscriber's node receives from publishers on other nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Carrier {
    /// Datagrams (reliable or best-effort, see [`Reliability`]).
    #[default]
    Udp,
    /// One TCP connection per (tag, publishing node): always reliable; for
    /// links that drop datagrams, or very large messages.
    Tcp,
    /// One UDP multicast datagram per message for all nodes that ask for it
    /// (a group per tag): best-effort, for tags with receivers on many nodes.
    Multicast,
}

impl Carrier {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Carrier::Udp => 0,
            Carrier::Tcp => 1,
            Carrier::Multicast => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Result<Self, DecodeError> {
        match v {
            0 => Ok(Carrier::Udp),
            1 => Ok(Carrier::Tcp),
            2 => Ok(Carrier::Multicast),
            v => Err(DecodeError::Unknown {
                what: "carrier",
                value: u32::from(v),
            }),
        }
    }
}

/// Where a scaled subscription's every-n-th filter runs (the push-pull
/// model's proxy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Proxy {
    /// In the subscriber's library: the whole stream reaches its node.
    #[default]
    Subscriber,
    /// In the publishing node's delivery manager: only the samples some
    /// receiver on a node wants are sent there (less network and CPU).
    Publisher,
    /// In the delivery manager of the named intermediate node: publishers'
    /// nodes send it the whole stream and it forwards every n-th sample to
    /// the subscriber's node. Falls back to [`Proxy::Publisher`] while that
    /// node is not up (not known, or declared dead after its lease).
    Node(NodeAddr),
    /// Placed by the daemons (`tagwire-place`, the push-pull paper's
    /// exhaustive algorithm, one proxy node per tag) over the topology file
    /// they were started with: the cheapest node that meets every such
    /// subscription's end-to-end delay bound. It resolves to one of the
    /// places above and moves when subscriptions come and go or a node
    /// dies.
    Auto {
        /// End-to-end delay bound, microseconds ([`Proxy::UNBOUNDED`]: none,
        /// only the cost counts).
        delay_bound_us: u32,
    },
}

impl Proxy {
    /// [`Proxy::Auto`]'s `delay_bound_us` meaning "no bound".
    pub const UNBOUNDED: u32 = u32::MAX;

    /// [`Proxy::Auto`] with a delay bound (rounded down to microseconds,
    /// saturating below [`Proxy::UNBOUNDED`]).
    pub fn auto(delay_bound: std::time::Duration) -> Self {
        let us = u32::try_from(delay_bound.as_micros()).unwrap_or(Self::UNBOUNDED - 1);
        Proxy::Auto {
            delay_bound_us: us.min(Self::UNBOUNDED - 1),
        }
    }

    /// The delay bound of [`Proxy::Auto`] (`None` for the other places, or
    /// when unbounded).
    pub fn delay_bound(&self) -> Option<std::time::Duration> {
        match self {
            Proxy::Auto { delay_bound_us } if *delay_bound_us != Self::UNBOUNDED => {
                Some(std::time::Duration::from_micros(u64::from(*delay_bound_us)))
            }
            _ => None,
        }
    }

    fn encode(self, w: &mut Writer) {
        match self {
            Proxy::Subscriber => {
                w.u8(0);
            }
            Proxy::Publisher => {
                w.u8(1);
            }
            Proxy::Node(n) => {
                w.u8(2).bytes(&n.to_bytes());
            }
            Proxy::Auto { delay_bound_us } => {
                w.u8(3).u32(delay_bound_us);
            }
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.u8()? {
            0 => Ok(Proxy::Subscriber),
            1 => Ok(Proxy::Publisher),
            2 => Ok(Proxy::Node(NodeAddr::from_bytes(r.array()?))),
            3 => Ok(Proxy::Auto {
                delay_bound_us: r.u32()?,
            }),
            v => Err(DecodeError::Unknown {
                what: "proxy",
                value: u32::from(v),
            }),
        }
    }
}

impl std::str::FromStr for Proxy {
    type Err = String;

    /// `subscriber`, `publisher`, a node's IP address, `auto` (no delay
    /// bound) or `auto:BOUND` with BOUND a number and a unit `us`, `ms` or
    /// `s` (`auto:15ms`).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "subscriber" => Ok(Proxy::Subscriber),
            "publisher" => Ok(Proxy::Publisher),
            "auto" => Ok(Proxy::Auto {
                delay_bound_us: Proxy::UNBOUNDED,
            }),
            _ if s.starts_with("auto:") => parse_bound(&s["auto:".len()..]).map(Proxy::auto),
            addr => addr
                .parse()
                .map(|ip| Proxy::Node(NodeAddr(ip)))
                .map_err(|_| {
                    format!(
                        "`{addr}` is neither `subscriber`, `publisher`, `auto[:BOUND]` \
                         nor a node's IP address"
                    )
                }),
        }
    }
}

/// A delay bound such as `15ms`, `250us`, `1.5s`.
fn parse_bound(text: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("delay bound `{text}`: write a number and a unit us, ms or s (`15ms`)");
    let (num, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    std::time::Duration::try_from_secs_f64(v * scale).map_err(|_| bad())
}

impl fmt::Display for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Proxy::Subscriber => f.write_str("subscriber"),
            Proxy::Publisher => f.write_str("publisher"),
            Proxy::Node(n) => n.fmt(f),
            Proxy::Auto { delay_bound_us } if *delay_bound_us == Proxy::UNBOUNDED => {
                f.write_str("auto")
            }
            Proxy::Auto { delay_bound_us } if delay_bound_us % 1000 == 0 => {
                write!(f, "auto:{}ms", delay_bound_us / 1000)
            }
            Proxy::Auto { delay_bound_us } => write!(f, "auto:{delay_bound_us}us"),
        }
    }
}

/// What a subscription asks of the connection that feeds it (docs/design.md §2:
/// carrier and QoS per connection). Senders carry the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChannelQos {
    /// Delivery from other nodes.
    pub reliability: Reliability,
    /// How it crosses the network.
    pub carrier: Carrier,
    /// Temporal scaling: only samples whose publisher sequence number is a
    /// multiple of this (≥ 1; 1 = every sample).
    pub every: u32,
    /// Where that filter runs.
    pub proxy: Proxy,
    /// The UDP port of the subscribing process's own socket, on its node's
    /// address (0: none). While it is its node's only receiving process of
    /// the tag (and the tag has no publisher there), other nodes send the
    /// tag's stream straight to it (direct delivery, docs/design.md §6; see
    /// `tagwire_session::plan::direct_port`).
    pub direct: u16,
    /// The packet class of the connection's datagrams ([`crate::Priority`]).
    pub priority: crate::Priority,
    /// The scheduling of the threads that move the connection's data
    /// ([`crate::Sched`]): a subscription's, at the receiving end and at
    /// the sending node's forwarder.
    pub sched: crate::Sched,
    /// A publisher's: how its node paces the tag's reliable streams to
    /// other nodes ([`crate::Pacing`]; a subscription's is not read).
    pub pacing: crate::Pacing,
}

impl Default for ChannelQos {
    fn default() -> Self {
        Self {
            reliability: Reliability::Reliable,
            carrier: Carrier::Udp,
            every: 1,
            proxy: Proxy::Subscriber,
            direct: 0,
            priority: crate::Priority::Normal,
            sched: crate::Sched::Other { nice: 0 },
            pacing: crate::Pacing::Daemon,
        }
    }
}

impl ChannelQos {
    /// Whether a subscription with this QoS takes the sample numbered `seq`.
    pub fn wants(&self, seq: u64) -> bool {
        self.every <= 1 || seq % u64::from(self.every) == 0
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u8(self.reliability.to_u8())
            .u8(self.carrier.to_u8())
            .u32(self.every);
        self.proxy.encode(w);
        w.u16(self.direct).u8(self.priority.to_u8());
        let [policy, value] = self.sched.to_bytes();
        w.u8(policy).u8(value);
        self.pacing.encode(w);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let reliability = Reliability::from_u8(r.u8()?)?;
        let carrier = Carrier::from_u8(r.u8()?)?;
        let every = r.u32()?;
        if every == 0 {
            return Err(DecodeError::Unknown {
                what: "scale (every n-th sample, n >= 1)",
                value: 0,
            });
        }
        Ok(Self {
            reliability,
            carrier,
            every,
            proxy: Proxy::decode(r)?,
            direct: r.u16()?,
            priority: crate::Priority::from_u8(r.u8()?)?,
            sched: crate::Sched::from_bytes([r.u8()?, r.u8()?])?,
            pacing: crate::Pacing::decode(r)?,
        })
    }
}

/// Any valid [`ChannelQos`] (property tests of the codecs that carry one).
#[cfg(test)]
pub(crate) fn arb_qos() -> impl proptest::strategy::Strategy<Value = ChannelQos> {
    use proptest::prelude::*;
    (
        any::<bool>(),
        0u8..3,
        1u32..=u32::MAX,
        0u8..4,
        any::<[u8; 16]>(),
        any::<u16>(),
        any::<u8>(),
        any::<[u8; 2]>(),
        (0u8..4, 1u64..=u64::MAX),
    )
        .prop_map(
            |(be, c, every, at, node, direct, class, sched, (pace, rate))| ChannelQos {
                reliability: if be {
                    Reliability::BestEffort
                } else {
                    Reliability::Reliable
                },
                carrier: Carrier::from_u8(c).unwrap_or(Carrier::Udp),
                every,
                proxy: match at {
                    0 => Proxy::Subscriber,
                    1 => Proxy::Publisher,
                    2 => Proxy::Node(NodeAddr::from_bytes(node)),
                    _ => Proxy::Auto {
                        delay_bound_us: u32::from_le_bytes([node[0], node[1], node[2], node[3]]),
                    },
                },
                direct,
                priority: crate::Priority::from_u8(class)
                    .unwrap_or(crate::Priority::Dscp(class & 0x3f)),
                sched: crate::Sched::from_bytes(sched)
                    .unwrap_or(crate::Sched::Fifo(sched[1] % 99 + 1)),
                pacing: match pace {
                    0 => crate::Pacing::Daemon,
                    1 => crate::Pacing::Off,
                    2 => crate::Pacing::Adaptive,
                    _ => crate::Pacing::Fixed(rate),
                },
            },
        )
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Domain::Global => "global",
            Domain::Local => "local",
        })
    }
}

/// A process id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pid(pub u32);

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A daemon-assigned tag id, unique within one daemon's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TagId(pub u32);

impl fmt::Display for TagId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A per-publisher message sequence number, starting at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SeqNum(pub u64);

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The network address of a node (the address its daemon is known by).
/// Encoded as 16 bytes (IPv4 as an IPv4-mapped IPv6 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeAddr(pub IpAddr);

impl NodeAddr {
    /// The loopback node, used when a daemon has no network identity.
    pub const LOCALHOST: NodeAddr = NodeAddr(IpAddr::V4(Ipv4Addr::LOCALHOST));

    /// The 16-byte wire form.
    pub fn to_bytes(self) -> [u8; 16] {
        match self.0 {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        }
    }

    /// Parses the 16-byte wire form.
    pub fn from_bytes(b: [u8; 16]) -> Self {
        // IPv4-mapped (::ffff:a.b.c.d), read off the bytes: on every
        // message's header, where building the IPv6 address first cost a
        // flat-out subscriber 1.5 % of its time.
        if b[..10] == [0; 10] && b[10..12] == [0xff, 0xff] {
            return NodeAddr(IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15])));
        }
        NodeAddr(IpAddr::V6(Ipv6Addr::from(b)))
    }
}

impl Default for NodeAddr {
    fn default() -> Self {
        Self::LOCALHOST
    }
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Who sent a message: process id and node address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SenderInfo {
    /// The sending process.
    pub pid: Pid,
    /// The node the sending process runs on.
    pub node: NodeAddr,
}

impl fmt::Display for SenderInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.pid, self.node)
    }
}

/// A sender or receiver of a tag, as listed by the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Member {
    /// The member's process and node.
    pub who: SenderInfo,
    /// When it joined, in nanoseconds since the Unix epoch.
    pub since_unix_ns: u64,
}

impl Member {
    pub(crate) const ENCODED_LEN: usize = 4 + 16 + 8;

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u32(self.who.pid.0)
            .bytes(&self.who.node.to_bytes())
            .u64(self.since_unix_ns);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let pid = Pid(r.u32()?);
        let node = NodeAddr::from_bytes(r.array()?);
        let since_unix_ns = r.u64()?;
        Ok(Member {
            who: SenderInfo { pid, node },
            since_unix_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_names_follow_the_path_rules() {
        assert!(TagName::new("/robot/laser").is_ok());
        assert!(TagName::new("/a").is_ok());
        assert_eq!(TagName::new(""), Err(NameError::Empty));
        assert!(matches!(
            TagName::new("robot"),
            Err(NameError::NotAbsolute(_))
        ));
        assert!(matches!(TagName::new("/"), Err(NameError::BadSegment(_))));
        assert!(matches!(
            TagName::new("/a//b"),
            Err(NameError::BadSegment(_))
        ));
        assert!(matches!(TagName::new("/a/"), Err(NameError::BadSegment(_))));
        assert!(matches!(
            TagName::new("/a\nb"),
            Err(NameError::BadSegment(_))
        ));
        let long = format!("/{}", "x".repeat(255));
        assert_eq!(TagName::new(&long), Err(NameError::TooLong(256)));
        let max = format!("/{}", "x".repeat(254));
        assert!(TagName::new(&max).is_ok());
    }

    #[test]
    fn node_addresses_round_trip_both_families() {
        for a in [
            NodeAddr::LOCALHOST,
            NodeAddr("10.1.2.3".parse().unwrap()),
            NodeAddr("fe80::1".parse().unwrap()),
        ] {
            assert_eq!(NodeAddr::from_bytes(a.to_bytes()), a);
        }
        // Only ::ffff:0:0/96 is IPv4: its neighbours stay IPv6.
        let mut near = NodeAddr("10.1.2.3".parse().unwrap()).to_bytes();
        near[9] = 1;
        assert!(NodeAddr::from_bytes(near).0.is_ipv6());
    }

    proptest::proptest! {
        #[test]
        fn any_sixteen_bytes_read_as_std_maps_them(b in proptest::array::uniform16(0u8..)) {
            let v6 = Ipv6Addr::from(b);
            let want = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
            proptest::prop_assert_eq!(NodeAddr::from_bytes(b).0, want);
        }

        #[test]
        fn mapped_prefixes_and_their_neighbours_read_as_std_maps_them(
            v4 in proptest::array::uniform4(0u8..),
            at in 0usize..13,
            with in 0u8..,
        ) {
            // ::ffff:a.b.c.d, one byte of its prefix changed (or none, at 12).
            let mut b = [0u8; 16];
            b[10] = 0xff;
            b[11] = 0xff;
            b[12..].copy_from_slice(&v4);
            if at < 12 {
                b[at] = with;
            }
            let v6 = Ipv6Addr::from(b);
            let want = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
            proptest::prop_assert_eq!(NodeAddr::from_bytes(b).0, want);
        }

        #[test]
        fn names_compare_as_their_text_whether_shared_or_not(a in "/[a-c]{1,3}", b in "/[a-c]{1,3}") {
            let (x, y) = (TagName::new(&a).unwrap(), TagName::new(&b).unwrap());
            proptest::prop_assert_eq!(x == y, a == b);
            proptest::prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            proptest::prop_assert_eq!(x.cmp(&x.clone()), std::cmp::Ordering::Equal);
            proptest::prop_assert!(x == x.clone());
        }
    }

    #[test]
    fn reliability_and_carrier_print_as_the_cli_spells_them() {
        assert_eq!(Reliability::Reliable.to_string(), "reliable");
        assert_eq!(Reliability::BestEffort.to_string(), "best-effort");
        let carriers = [Carrier::Udp, Carrier::Tcp, Carrier::Multicast].map(|c| c.to_string());
        assert_eq!(carriers, ["udp", "tcp", "multicast"]);
    }

    #[test]
    fn proxies_parse_from_what_they_print() {
        for text in [
            "subscriber",
            "publisher",
            "10.0.0.7",
            "fe80::2",
            "auto",
            "auto:15ms",
            "auto:250us",
        ] {
            let p: Proxy = text.parse().unwrap();
            assert_eq!(p.to_string(), text);
        }
        assert_eq!(
            "10.0.0.7".parse::<Proxy>(),
            Ok(Proxy::Node(NodeAddr("10.0.0.7".parse().unwrap())))
        );
        let err = "host-7".parse::<Proxy>().unwrap_err();
        assert!(err.contains("host-7"), "{err}");
        assert_eq!(
            "auto:1.5s".parse::<Proxy>(),
            Ok(Proxy::Auto {
                delay_bound_us: 1_500_000
            })
        );
        assert_eq!(
            "auto:15ms".parse::<Proxy>().unwrap().delay_bound(),
            Some(std::time::Duration::from_millis(15))
        );
        assert_eq!("auto".parse::<Proxy>().unwrap().delay_bound(), None);
        for bad in ["auto:", "auto:15", "auto:-1ms", "auto:xms", "auto:1e30s"] {
            let err = bad.parse::<Proxy>().unwrap_err();
            assert!(err.contains("unit"), "{bad}: {err}");
        }
    }
}
