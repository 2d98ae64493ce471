//! Plain C structs and the `TW_*` constants, with their conversions to and
//! from the Rust API's types.

use std::ffi::c_char;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tagwire::{
    Domain, HistoryQuery, InstanceState, Member, MessageInfo, NodeAddr, Proxy, SenderInfo,
    SubscribeOptions,
};

use crate::error::{guard, put, str_arg, Failure};
use crate::tw_status;

/// `tw_create_tag` domain: visible on all nodes.
pub const TW_DOMAIN_GLOBAL: u32 = 0;
/// `tw_create_tag` domain: visible only on this node.
pub const TW_DOMAIN_LOCAL: u32 = 1;

/// `tw_subscribe_options.reliability`: retransmitted across nodes (default).
pub const TW_RELIABLE: u32 = 0;
/// `tw_subscribe_options.reliability`: newest data, drops counted.
pub const TW_BEST_EFFORT: u32 = 1;

/// `tw_subscribe_options.carrier`: datagrams (default).
pub const TW_CARRIER_UDP: u32 = 0;
/// `tw_subscribe_options.carrier`: a TCP connection per tag and node.
pub const TW_CARRIER_TCP: u32 = 1;
/// `tw_subscribe_options.carrier`: UDP multicast (best effort).
pub const TW_CARRIER_MULTICAST: u32 = 2;

/// `tw_subscribe_options.priority`: the default class (DSCP 0).
pub const TW_PRIORITY_NORMAL: u32 = 0;
/// `tw_subscribe_options.priority`: behind everything else (AF11).
pub const TW_PRIORITY_LOW: u32 = 1;
/// `tw_subscribe_options.priority`: ahead of normal traffic (AF42).
pub const TW_PRIORITY_HIGH: u32 = 2;
/// `tw_subscribe_options.priority`: ahead of normal traffic (VOICE-ADMIT).
pub const TW_PRIORITY_CRITICAL: u32 = 3;
/// `tw_subscribe_options.priority`: `TW_PRIORITY_DSCP | n` is DSCP n.
pub const TW_PRIORITY_DSCP: u32 = 0x80;
/// `tw_subscribe_options.sched`: `TW_SCHED_OTHER | (nice & 0xff)`, the
/// time-sharing policy at nice -20..=19 (0, the default: nice 0).
pub const TW_SCHED_OTHER: u32 = 0;
/// `tw_subscribe_options.sched`: `TW_SCHED_FIFO | p`, `SCHED_FIFO` at
/// priority p (1..=99).
pub const TW_SCHED_FIFO: u32 = 0x100;
/// `tw_subscribe_options.sched`: `TW_SCHED_RR | p`, `SCHED_RR` at
/// priority p (1..=99).
pub const TW_SCHED_RR: u32 = 0x200;
/// `tw_change_channels`: leave the class (or the policy) as it is.
pub const TW_KEEP: u32 = 0xffff_ffff;
/// `tw_publish_options.pacing`: as the sending daemon is set (`tagwire
/// daemon --pacing`; the default).
pub const TW_PACING_DAEMON: u32 = 0;
/// `tw_publish_options.pacing`: not paced (the reliable window alone).
pub const TW_PACING_OFF: u32 = 1;
/// `tw_publish_options.pacing`: paced from each stream's send-window
/// occupancy (NAPA).
pub const TW_PACING_ADAPTIVE: u32 = 2;
/// `tw_publish_options.pacing`: released at `pacing_rate` bytes per
/// second (> 0) whatever the acknowledgements say.
pub const TW_PACING_FIXED: u32 = 3;
/// `tw_subscribe_options.proxy`: the every-n-th filter runs in this library.
pub const TW_PROXY_SUBSCRIBER: u32 = 0;
/// `tw_subscribe_options.proxy`: in the publishing node's daemon.
pub const TW_PROXY_PUBLISHER: u32 = 1;
/// `tw_subscribe_options.proxy`: in the daemon of `proxy_node`.
pub const TW_PROXY_NODE: u32 = 2;
/// `tw_subscribe_options.proxy`: placed by the daemons within `delay_bound_us`.
pub const TW_PROXY_AUTO: u32 = 3;

/// `tw_history_query.kind`: the last `a` messages.
pub const TW_HISTORY_LAST: u32 = 0;
/// `tw_history_query.kind`: messages whose sequence number is at least `a`.
pub const TW_HISTORY_SINCE: u32 = 1;
/// `tw_history_query.kind`: messages sent within `[a, b]` (ns since the epoch).
pub const TW_HISTORY_BETWEEN: u32 = 2;

/// `tw_node_info.state`: known but not connected yet.
pub const TW_NODE_CONNECTING: u32 = 0;
/// `tw_node_info.state`: connected and heard from within the lease.
pub const TW_NODE_UP: u32 = 1;
/// `tw_node_info.state`: silent for longer than the lease.
pub const TW_NODE_DEAD: u32 = 2;

/// `tw_message_info.state`: a sample of data (the instance lives).
pub const TW_STATE_ALIVE: u8 = 0;
/// `tw_message_info.state`: the instance was disposed (empty payload).
pub const TW_STATE_DISPOSED: u8 = 1;
/// `tw_message_info.state`: the publisher writes the instance no more.
pub const TW_STATE_UNREGISTERED: u8 = 2;
/// `tw_message_info.state`: both.
pub const TW_STATE_DISPOSED_UNREGISTERED: u8 = 3;

/// A node's address: 16 bytes, IPv6 or an IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`). [`tw_node_addr_format`] prints it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct tw_node_addr {
    /// The address in network byte order.
    pub bytes: [u8; 16],
}

/// Who sent a message: process id and node.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct tw_sender {
    /// The sending process.
    pub pid: u32,
    /// Its node.
    pub node: tw_node_addr,
}

/// A sender or receiver of a tag.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct tw_member {
    /// The process and node.
    pub who: tw_sender,
    /// When it joined, ns since the Unix epoch.
    pub since_unix_ns: u64,
}

/// How to reach the daemon; start from [`tw_client_options_default`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tw_client_options {
    /// The daemon's socket; `NULL`: `$TAGWIRE_SOCKET`, else the per-user default.
    pub socket: *const c_char,
    /// How long a request may wait for the daemon, ms (default 1000).
    pub timeout_ms: u64,
    /// Start a background daemon when none answers.
    pub autostart: bool,
    /// A label for the daemon's logs; `NULL`: the program's name.
    pub name: *const c_char,
}

/// The shape and history of a new tag; zero fields take the daemon's defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tw_tag_params {
    /// Ring slots: the deepest queue a subscriber may ask for.
    pub slots: u32,
    /// Bytes one slot holds: the largest message on the fast path.
    pub slot_payload: u32,
    /// Messages of history this node's daemon keeps from the start (0: none).
    pub history_depth: u32,
    /// Bytes of history kept at most (0: the daemon's default).
    pub history_max_bytes: u64,
}

/// Options of one subscription; start from [`tw_subscribe_options_default`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tw_subscribe_options {
    /// Unread messages kept before the oldest is dropped: 0 (the default)
    /// keeps 64, or the tag's ring slots when it has fewer; another value
    /// must fit the ring's slots (else `TW_ERR_DEPTH_TOO_LARGE`).
    pub depth: u32,
    /// `TW_RELIABLE` or `TW_BEST_EFFORT`.
    pub reliability: u32,
    /// `TW_CARRIER_UDP`, `TW_CARRIER_TCP` or `TW_CARRIER_MULTICAST`.
    pub carrier: u32,
    /// Receive only every n-th sample (0 or 1: all).
    pub every: u32,
    /// Where the every-n-th filter runs: `TW_PROXY_*`.
    pub proxy: u32,
    /// The node for `TW_PROXY_NODE`.
    pub proxy_node: tw_node_addr,
    /// The delay bound for `TW_PROXY_AUTO`, µs (`UINT32_MAX`: none).
    pub delay_bound_us: u32,
    /// Lose nothing: hold the publishers back instead (DDS reliable KEEP_ALL).
    pub lossless: bool,
    /// Spin this long (ns) before sleeping in receive (0: block at once).
    pub busy_poll_ns: u64,
    /// Of each instance, only the strongest live publisher's messages.
    pub exclusive: bool,
    /// Report `TW_ERR_DEADLINE_MISSED` once per period (ns) an instance goes
    /// without a message (0: no deadline).
    pub deadline_ns: u64,
    /// At most one message per instance per interval (ns), the newest (0:
    /// all).
    pub min_separation_ns: u64,
    /// The packet class of the datagrams that bring the messages from
    /// other nodes: `TW_PRIORITY_NORMAL` (0, the default), `_LOW`, `_HIGH`,
    /// `_CRITICAL`, or `TW_PRIORITY_DSCP | n` for DSCP n (0..=63).
    pub priority: u32,
    /// The scheduling of the threads that bring the messages from other
    /// nodes: `TW_SCHED_OTHER | (nice & 0xff)` (0, the default),
    /// `TW_SCHED_FIFO | p` or `TW_SCHED_RR | p` (p in 1..=99). A real-time
    /// policy without `CAP_SYS_NICE` or the limit for it:
    /// `TW_ERR_NOT_PERMITTED`.
    pub sched: u32,
}

/// What a publisher asks of its node (`tw_publisher_new_with`); start
/// from [`tw_publish_options_default`], so fields added later keep their
/// defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tw_publish_options {
    /// The packet class of the datagrams this node sends the tag in, to
    /// every node: at least this, whatever the receivers ask
    /// (`TW_PRIORITY_*`, or `TW_PRIORITY_DSCP | n`; default normal: the
    /// receivers' class alone).
    pub priority: u32,
    /// The policy of this node's forwarder of the tag: at least this
    /// (`TW_SCHED_*` as `tw_subscribe_options.sched`). A real-time policy
    /// without the privilege for it: `TW_ERR_NOT_PERMITTED`.
    pub sched: u32,
    /// How this node paces the tag's reliable streams to other nodes:
    /// `TW_PACING_DAEMON` (the default), `_OFF`, `_ADAPTIVE` or `_FIXED`
    /// (at `pacing_rate`). Publishers of one tag on one node that ask
    /// differently share the lowest fixed rate, else adaptive, else off.
    pub pacing: u32,
    /// With `TW_PACING_FIXED`: bytes per second on the wire (> 0).
    pub pacing_rate: u64,
}

impl tw_publish_options {
    pub(crate) fn to_rust(self) -> Result<tagwire::PublishOptions, Failure> {
        Ok(tagwire::PublishOptions::default()
            .priority(priority(self.priority)?)
            .sched(sched(self.sched)?)
            .pacing(pacing(self.pacing, self.pacing_rate)?))
    }
}

/// The defaults: the normal class, the default policy, paced as the
/// daemon is set.
#[no_mangle]
pub extern "C" fn tw_publish_options_default() -> tw_publish_options {
    tw_publish_options {
        priority: TW_PRIORITY_NORMAL,
        sched: TW_SCHED_OTHER,
        pacing: TW_PACING_DAEMON,
        pacing_rate: 0,
    }
}

/// A history query for `tw_pull` and `tw_subscribe_with_history`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tw_history_query {
    /// `TW_HISTORY_LAST`, `TW_HISTORY_SINCE` or `TW_HISTORY_BETWEEN`.
    pub kind: u32,
    /// The count, the sequence number, or the start (ns since the epoch).
    pub a: u64,
    /// The end for `TW_HISTORY_BETWEEN` (ns since the epoch).
    pub b: u64,
}

/// What a receive returns beside the payload.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tw_message_info {
    /// The payload's length (also when the buffer was too small: the size needed).
    pub len: usize,
    /// The publisher's sequence number.
    pub seq: u64,
    /// Who sent it.
    pub sender: tw_sender,
    /// When it was sent, ns since the Unix epoch (the publisher's clock).
    pub timestamp_ns: u64,
    /// With `TW_ERR_OVERFLOWED`: how many messages were dropped.
    pub lost: u64,
    /// The instance's 16-byte key (a key of at most 16 bytes, zero padded;
    /// a longer one's MD5) when `has_key`.
    pub key: [u8; 16],
    /// Whether the message was sent with a key (`tw_publisher_send_keyed`).
    pub has_key: bool,
    /// The instance's state: `TW_STATE_*`.
    pub state: u8,
    /// Whether the publisher set an ownership strength.
    pub has_strength: bool,
    /// The publisher's ownership strength when `has_strength`.
    pub strength: i32,
}

/// The defaults: the per-user socket, 1 s timeout, no autostart (unless
/// `TAGWIRE_AUTOSTART=1`).
#[no_mangle]
pub extern "C" fn tw_client_options_default() -> tw_client_options {
    let d = tagwire::ClientOptions::default();
    tw_client_options {
        socket: std::ptr::null(),
        timeout_ms: u64::try_from(d.timeout.as_millis()).unwrap_or(u64::MAX),
        autostart: d.autostart,
        name: std::ptr::null(),
    }
}

/// The defaults: depth unset (0: 64, or the ring's slots if fewer),
/// reliable UDP, every sample, filter in this library.
#[no_mangle]
pub extern "C" fn tw_subscribe_options_default() -> tw_subscribe_options {
    tw_subscribe_options {
        depth: 0,
        reliability: TW_RELIABLE,
        carrier: TW_CARRIER_UDP,
        every: 1,
        proxy: TW_PROXY_SUBSCRIBER,
        proxy_node: tw_node_addr::default(),
        delay_bound_us: Proxy::UNBOUNDED,
        lossless: false,
        busy_poll_ns: 0,
        exclusive: false,
        deadline_ns: 0,
        min_separation_ns: 0,
        priority: TW_PRIORITY_NORMAL,
        sched: TW_SCHED_OTHER,
    }
}

/// Prints a node address ("10.0.0.1" for IPv4-mapped ones) into `buf` (NUL
/// terminated, truncated to `cap`). Returns the length of the whole text
/// without its NUL, so a return ≥ `cap` means it was truncated.
#[no_mangle]
pub unsafe extern "C" fn tw_node_addr_format(
    addr: *const tw_node_addr,
    buf: *mut c_char,
    cap: usize,
) -> usize {
    // SAFETY: a non-null `addr` points to a tw_node_addr (the contract).
    let Some(addr) = (unsafe { addr.as_ref() }) else {
        return 0;
    };
    let text = addr.to_rust().to_string();
    if !buf.is_null() && cap > 0 {
        let n = text.len().min(cap - 1);
        // SAFETY: `buf` holds `cap` bytes (the contract); we write n + 1 ≤ cap.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    text.len()
}

/// Parses "10.0.0.1" or an IPv6 address into `out`.
#[no_mangle]
pub unsafe extern "C" fn tw_node_addr_parse(
    text: *const c_char,
    out: *mut tw_node_addr,
) -> tw_status {
    guard(|| {
        // SAFETY: forwarded contract of the arguments.
        let s = unsafe { str_arg(text, "text") }?;
        let ip: IpAddr = s
            .trim()
            .parse()
            .map_err(|_| Failure::invalid(format!("{s:?} is not an IP address")))?;
        // SAFETY: forwarded contract.
        unsafe { put(out, tw_node_addr::from_rust(NodeAddr(ip)), "out") }
    })
}

impl tw_node_addr {
    pub(crate) fn from_rust(a: NodeAddr) -> Self {
        Self {
            bytes: a.to_bytes(),
        }
    }

    pub(crate) fn to_rust(self) -> NodeAddr {
        let v6 = Ipv6Addr::from(self.bytes);
        NodeAddr(match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        })
    }
}

impl tw_sender {
    pub(crate) fn from_rust(s: SenderInfo) -> Self {
        Self {
            pid: s.pid.0,
            node: tw_node_addr::from_rust(s.node),
        }
    }
}

impl tw_member {
    pub(crate) fn from_rust(m: &Member) -> Self {
        Self {
            who: tw_sender::from_rust(m.who),
            since_unix_ns: m.since_unix_ns,
        }
    }
}

impl tw_message_info {
    pub(crate) fn from_rust(i: &MessageInfo, len: usize) -> Self {
        Self {
            len,
            seq: i.seq.0,
            sender: tw_sender::from_rust(i.sender),
            timestamp_ns: unix_ns(i.timestamp),
            lost: 0,
            key: i.key.map_or([0; 16], |k| k.0),
            has_key: i.key.is_some(),
            state: match i.state {
                InstanceState::Alive => TW_STATE_ALIVE,
                InstanceState::Disposed => TW_STATE_DISPOSED,
                InstanceState::Unregistered => TW_STATE_UNREGISTERED,
                InstanceState::DisposedUnregistered => TW_STATE_DISPOSED_UNREGISTERED,
            },
            has_strength: i.strength.is_some(),
            strength: i.strength.unwrap_or(0),
        }
    }
}

/// Nanoseconds since the epoch (0 before it, saturating far after it).
pub(crate) fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A C timeout: negative waits for ever.
pub(crate) fn timeout(ns: i64) -> Option<Duration> {
    u64::try_from(ns).ok().map(Duration::from_nanos)
}

pub(crate) fn domain(d: u32) -> Result<Domain, Failure> {
    match d {
        TW_DOMAIN_GLOBAL => Ok(Domain::Global),
        TW_DOMAIN_LOCAL => Ok(Domain::Local),
        other => Err(Failure::invalid(format!(
            "domain {other} is neither TW_DOMAIN_GLOBAL nor TW_DOMAIN_LOCAL"
        ))),
    }
}

impl tw_history_query {
    pub(crate) fn to_rust(self) -> Result<HistoryQuery, Failure> {
        match self.kind {
            TW_HISTORY_LAST => Ok(HistoryQuery::Last(
                u32::try_from(self.a).unwrap_or(u32::MAX),
            )),
            TW_HISTORY_SINCE => Ok(HistoryQuery::Since(self.a)),
            TW_HISTORY_BETWEEN => Ok(HistoryQuery::Between {
                from_ns: self.a,
                to_ns: self.b,
            }),
            other => Err(Failure::invalid(format!(
                "history query kind {other} is not a TW_HISTORY_* value"
            ))),
        }
    }
}

impl tw_subscribe_options {
    pub(crate) fn to_rust(self) -> Result<SubscribeOptions, Failure> {
        let mut o = SubscribeOptions::default().every(self.every);
        // 0: unset (the default depth, or a smaller ring's slots).
        if self.depth > 0 {
            o = o.depth(self.depth);
        }
        match self.carrier {
            TW_CARRIER_UDP => {}
            TW_CARRIER_TCP => o = o.tcp(),
            TW_CARRIER_MULTICAST => o = o.multicast(),
            other => {
                return Err(Failure::invalid(format!(
                    "carrier {other} is not a TW_CARRIER_* value"
                )))
            }
        }
        match self.reliability {
            TW_RELIABLE => {}
            TW_BEST_EFFORT => o = o.best_effort(),
            other => {
                return Err(Failure::invalid(format!(
                    "reliability {other} is neither TW_RELIABLE nor TW_BEST_EFFORT"
                )))
            }
        }
        o = o.proxy(match self.proxy {
            TW_PROXY_SUBSCRIBER => Proxy::Subscriber,
            TW_PROXY_PUBLISHER => Proxy::Publisher,
            TW_PROXY_NODE => Proxy::Node(self.proxy_node.to_rust()),
            TW_PROXY_AUTO => Proxy::Auto {
                delay_bound_us: self.delay_bound_us,
            },
            other => {
                return Err(Failure::invalid(format!(
                    "proxy {other} is not a TW_PROXY_* value"
                )))
            }
        });
        if self.lossless {
            o = o.lossless();
        }
        if self.busy_poll_ns > 0 {
            o = o.busy_poll(Duration::from_nanos(self.busy_poll_ns));
        }
        if self.exclusive {
            o = o.exclusive();
        }
        if self.deadline_ns > 0 {
            o = o.deadline(Duration::from_nanos(self.deadline_ns));
        }
        if self.min_separation_ns > 0 {
            o = o.min_separation(Duration::from_nanos(self.min_separation_ns));
        }
        Ok(o.priority(priority(self.priority)?)
            .sched(sched(self.sched)?))
    }
}

/// A `TW_SCHED_*` code as a thread policy.
pub(crate) fn sched(code: u32) -> Result<tagwire::Sched, Failure> {
    u16::try_from(code)
        .ok()
        .and_then(|v| tagwire::Sched::from_bytes(v.to_be_bytes()).ok())
        .ok_or_else(|| {
            Failure::invalid(format!(
                "sched {code:#x} is neither TW_SCHED_OTHER | nice (-20..=19, as a byte) nor \
                 TW_SCHED_FIFO or TW_SCHED_RR | p (1..=99)"
            ))
        })
}

/// A `TW_PACING_*` value (with its rate for `TW_PACING_FIXED`) as a
/// pacing.
pub(crate) fn pacing(code: u32, rate: u64) -> Result<tagwire::Pacing, Failure> {
    match (code, rate) {
        (TW_PACING_DAEMON, _) => Ok(tagwire::Pacing::Daemon),
        (TW_PACING_OFF, _) => Ok(tagwire::Pacing::Off),
        (TW_PACING_ADAPTIVE, _) => Ok(tagwire::Pacing::Adaptive),
        (TW_PACING_FIXED, 0) => Err(Failure::invalid(
            "TW_PACING_FIXED needs a pacing rate above 0 bytes per second",
        )),
        (TW_PACING_FIXED, r) => Ok(tagwire::Pacing::Fixed(r)),
        (c, _) => Err(Failure::invalid(format!(
            "pacing {c} is not a TW_PACING_* value"
        ))),
    }
}

/// A `TW_PRIORITY_*` value (or `TW_PRIORITY_DSCP | n`) as a class.
pub(crate) fn priority(code: u32) -> Result<tagwire::Priority, Failure> {
    u8::try_from(code)
        .ok()
        .and_then(|c| tagwire::Priority::from_u8(c).ok())
        .ok_or_else(|| {
            Failure::invalid(format!(
                "priority {code} is neither a TW_PRIORITY_* value nor TW_PRIORITY_DSCP | n (n <= 63)"
            ))
        })
}

/// Reads an optional C string.
pub(crate) unsafe fn opt_str(p: *const c_char, what: &str) -> Result<Option<String>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { str_arg(p, what) }.map(|s| Some(s.to_owned()))
}
