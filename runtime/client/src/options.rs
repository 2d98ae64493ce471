//! What a subscription asks for: depth, busy-polling, channel QoS,
//! lossless, direct delivery, and the per-instance QoS.

use std::time::Duration;

use tagwire_wire::{Carrier, ChannelQos, Pacing, Priority, Proxy, Reliability, Sched};

/// Options of one subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// How many unread messages are kept before the oldest is dropped:
    /// `None` (the default) keeps [`DEFAULT_DEPTH`], or the tag's ring slots
    /// when it has fewer; a depth asked for must fit the ring's slots
    /// (else [`crate::Error::DepthTooLarge`]).
    pub depth: Option<u32>,
    /// Spin this long before sleeping in `receive` (default: none, block at once).
    /// For latency-critical users with a core to spare.
    pub busy_poll: Option<Duration>,
    /// How long a blocking `receive` whose stream flows (two or more
    /// messages since it last slept) polls before it sleeps, when
    /// `busy_poll` is not set ([`FLOW_POLL`]; zero: sleep at once): the
    /// tag's ring, or the subscription's socket while it holds its stream
    /// (direct delivery).
    pub flow_poll: Duration,
    /// Reliability, carrier and temporal scaling of the connections that
    /// feed this subscription (default: reliable UDP, every sample).
    pub qos: ChannelQos,
    /// Lose nothing: hold the writers back instead (see
    /// [`SubscribeOptions::lossless`]).
    pub lossless: bool,
    /// Direct delivery (default on; see [`SubscribeOptions::through_daemon`]).
    pub direct: bool,
    /// Per-instance QoS: exclusive ownership, deadline, minimum separation
    /// (see [`SubscribeOptions::exclusive`]).
    pub instances: tagwire_instances::Policy,
}

/// The depth of [`SubscribeOptions::default`]: 64 unread messages, or the
/// tag's ring slots when it has fewer.
pub const DEFAULT_DEPTH: u32 = 64;

/// The `flow_poll` of [`SubscribeOptions::default`]: longer than a
/// flat-out writer's gap between two records, far shorter than a wake-up
/// (tens of µs here). A reader that keeps up with a flat-out writer would
/// otherwise sleep between two records and be woken for the next, each side
/// paying a system call per message.
pub const FLOW_POLL: Duration = Duration::from_micros(20);

impl Default for SubscribeOptions {
    fn default() -> Self {
        Self {
            depth: None,
            busy_poll: None,
            flow_poll: FLOW_POLL,
            qos: ChannelQos::default(),
            lossless: false,
            direct: true,
            instances: tagwire_instances::Policy::default(),
        }
    }
}

impl SubscribeOptions {
    /// Sets the queue depth: at most the tag's ring slots (256 by default),
    /// else subscribing fails with [`crate::Error::DepthTooLarge`]. Unset,
    /// the depth is [`DEFAULT_DEPTH`] or a smaller ring's slots.
    pub fn depth(mut self, depth: u32) -> Self {
        self.depth = Some(depth.max(1));
        self
    }

    /// The depth a subscription gets on a ring of `slots` slots: the one
    /// asked for, else [`DEFAULT_DEPTH`] or the slots if fewer.
    pub fn depth_on(&self, slots: u32) -> u32 {
        self.depth
            .unwrap_or_else(|| DEFAULT_DEPTH.min(slots.max(1)))
    }

    /// Best-effort delivery from other nodes: the newest data, never
    /// retransmitted, never holding publishers back; losses are counted by
    /// the receiving node's daemon. (Delivery on this node is the same either
    /// way.)
    pub fn best_effort(mut self) -> Self {
        self.qos.reliability = Reliability::BestEffort;
        self
    }

    /// Messages from other nodes come over TCP (one connection per tag and
    /// publishing node) instead of datagrams: always reliable, for links
    /// that drop datagrams or for very large messages. If any subscriber on
    /// a node asks for TCP, the node's copy comes over TCP.
    pub fn tcp(mut self) -> Self {
        self.qos.carrier = Carrier::Tcp;
        self
    }

    /// The packet class of the datagrams that bring this subscription its
    /// messages from other nodes ([`Priority`]): `High` and `Critical` go
    /// first in the sending host's `pfifo_fast` queue and carry a DSCP
    /// (AF42, VOICE-ADMIT) for the network's; `Low` goes last (AF11). A
    /// node whose receivers of a tag ask for different classes gets the
    /// tag in the highest of them. Default: `Normal`.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.qos.priority = priority;
        self
    }

    /// The scheduling of the threads that bring this subscription its
    /// messages from other nodes ([`Sched`]): the publishing nodes'
    /// forwarders of the tag, this node's inbound delivery threads (which
    /// serve every tag of the node, so they run at the highest policy any
    /// of its subscriptions asks), and this process's direct-delivery
    /// keeper. A real-time policy or a nice below 0 needs the privilege to
    /// run at it (`CAP_SYS_NICE` or the matching limit); without it
    /// `subscribe` fails with [`Error::NotPermitted`](crate::Error). The
    /// thread that calls `receive` is the caller's: run it at a policy
    /// with [`crate::set_thread_sched`]. Default: `Other { nice: 0 }`.
    pub fn sched(mut self, sched: Sched) -> Self {
        self.qos.sched = sched;
        self
    }

    /// Messages from other nodes come by UDP multicast: the publishing node
    /// sends each datagram once to the tag's group (239.255.75.x, on the
    /// daemons' multicast port, default 7403), and every node with such a
    /// receiver takes it from there. Best-effort (nothing is resent); for
    /// tags with receivers on many nodes on one link. A node gets one copy of
    /// each message: if another receiver there asks for reliable UDP or TCP,
    /// that carrier brings it (for every receiver on the node) instead.
    pub fn multicast(mut self) -> Self {
        self.qos.carrier = Carrier::Multicast;
        self.qos.reliability = Reliability::BestEffort;
        self
    }

    /// Temporal scaling: receive only every `n`-th sample of each publisher,
    /// those whose sequence number is a multiple of `n` (`n` = 0 or 1: every
    /// sample). Sequence numbers stay the publisher's, so the gaps show
    /// which samples were skipped (they are not counted as lost). The filter
    /// runs in this library unless [`SubscribeOptions::proxy`] moves it.
    pub fn every(mut self, n: u32) -> Self {
        self.qos.every = n.max(1);
        self
    }

    /// Where the every-n-th filter runs: [`Proxy::Subscriber`] (default; the
    /// whole stream reaches this node), [`Proxy::Publisher`] (the
    /// publishing node sends this node only the samples some receiver here
    /// wants), [`Proxy::Node`] (that node's daemon receives the whole
    /// stream and forwards every n-th sample here; if it is down, the filter
    /// moves to the publisher) or [`Proxy::Auto`] (the daemons choose among
    /// those the cheapest place meeting the delay bound, from the topology
    /// file they were started with; [`crate::Error::NoPlacement`] when they
    /// cannot). Either way the subscriber sees the same samples.
    pub fn proxy(mut self, proxy: Proxy) -> Self {
        self.qos.proxy = proxy;
        self
    }

    /// Never lose a message while this subscriber lives (DDS's reliable
    /// KEEP_ALL): instead of dropping the oldest when it falls a whole ring
    /// behind, it holds the writers back. A publisher on this node then
    /// waits in `send` (its send timeout, then [`crate::Error::WindowFull`],
    /// having sent nothing); messages from other nodes wait in this node's
    /// daemon, which stops acknowledging them, so their publishers' windows
    /// fill and hold them back in turn. A reliable carrier is needed for
    /// that (with best-effort ones the daemon drops what does not fit, and
    /// counts it). The depth is then the ring's slot count. A slow lossless
    /// subscriber slows every publisher of the tag: for state that must not
    /// be missed, not for monitoring. At most [`MAX_LOSSLESS`](crate::MAX_LOSSLESS) per tag and
    /// node ([`crate::Error::NoLosslessRoom`]). Large messages (those that
    /// take the blob path) are held back the same way: the daemon keeps each
    /// until every lossless subscriber has read it, and a publisher whose
    /// message would not fit the store waits as for a full ring.
    pub fn lossless(mut self) -> Self {
        self.lossless = true;
        self.qos.reliability = Reliability::Reliable;
        self
    }

    /// Messages from other nodes always come through this node's daemon.
    /// By default, while this subscriber is its node's only one of the tag
    /// (with the default carrier, and no publisher of the tag on the node),
    /// other nodes send the tag straight to its own socket, and its
    /// `receive` takes them from there (one wake-up less per message); the
    /// daemon moves the stream to itself and back as subscribers come and
    /// go, losing, repeating and reordering nothing. Not on a daemon with a
    /// domain key.
    pub fn through_daemon(mut self) -> Self {
        self.direct = false;
        self
    }

    /// Exclusive ownership (DDS's EXCLUSIVE): of each instance, take only
    /// the samples of the strongest live publisher
    /// ([`Publisher::set_strength`](crate::Publisher::set_strength)). The
    /// owner loses an instance when it unregisters it, or misses the
    /// [`deadline`](Self::deadline); the next sample of another publisher
    /// takes it over. Samples dropped: [`Subscriber::filtered`](crate::Subscriber::filtered).
    pub fn exclusive(mut self) -> Self {
        self.instances.exclusive = true;
        self
    }

    /// Each live instance must get a sample at least every `period`: when
    /// one does not, `receive` returns [`Error::DeadlineMissed`](crate::Error::DeadlineMissed) once per
    /// period missed (then call again).
    pub fn deadline(mut self, period: Duration) -> Self {
        self.instances.deadline = Some(period);
        self
    }

    /// At most one sample per instance per `interval` (DDS's time-based
    /// filter): the first at once, then the newest of each interval when it
    /// ends. Disposes and unregisters are not held back.
    pub fn min_separation(mut self, interval: Duration) -> Self {
        self.instances.min_separation = Some(interval);
        self
    }

    /// Enables busy-polling for `spin` before blocking.
    pub fn busy_poll(mut self, spin: Duration) -> Self {
        self.busy_poll = Some(spin);
        self
    }

    /// Sets how long a blocking `receive` whose stream flows polls before
    /// it sleeps ([`FLOW_POLL`] by default; zero sleeps at once, sparing the
    /// CPU the poll costs). `busy_poll`, when set, replaces it. On the
    /// subscription's own socket (direct delivery) the poll stretches to
    /// five times this after a sleep that ended within that long, and
    /// comes back after a longer one.
    pub fn flow_poll(mut self, spin: Duration) -> Self {
        self.flow_poll = spin;
        self
    }
}

/// Options of one publisher: what it asks of the connections it feeds, on
/// top of what their subscribers ask (the higher of the two wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PublishOptions {
    pub(crate) priority: Priority,
    pub(crate) sched: Sched,
    pub(crate) pacing: Pacing,
}

impl PublishOptions {
    /// The packet class of the datagrams this node sends the tag in, to
    /// every node: at least this, whatever its receivers ask
    /// ([`SubscribeOptions::priority`]). Default: `Normal` (the
    /// receivers' class alone).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The policy of this node's forwarder of the tag: at least this,
    /// whatever its receivers ask ([`SubscribeOptions::sched`]). A
    /// real-time policy or a nice below 0 needs the privilege to run at it
    /// ([`Error::NotPermitted`](crate::Error)). The thread that calls
    /// `send` is the caller's: [`crate::set_thread_sched`].
    pub fn sched(mut self, sched: Sched) -> Self {
        self.sched = sched;
        self
    }

    /// How this node paces the tag's reliable streams to other nodes:
    /// `Adaptive` from each stream's send-window occupancy (NAPA: the
    /// stream goes at the path's rate without filling a bottleneck's
    /// queue), `Fixed(bytes_per_sec)`, `Off`, or `Daemon` (the default:
    /// as the daemon is set, `tagwire daemon --pacing`). Publishers of one
    /// tag on one node that ask differently: the lowest fixed rate, else
    /// adaptive, else off ([`Pacing`]). A paced stream holds its
    /// publishers back as its window does. Changed at run time by
    /// [`Client::change_pacing`](crate::Client::change_pacing).
    pub fn pacing(mut self, pacing: Pacing) -> Self {
        self.pacing = pacing;
        self
    }

    pub(crate) fn qos(self) -> ChannelQos {
        ChannelQos {
            priority: self.priority,
            sched: self.sched,
            pacing: self.pacing,
            ..ChannelQos::default()
        }
    }
}
