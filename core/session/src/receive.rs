//! The receiving session: streams from other nodes' publishers
//! (reassembly, order, loss counting, credit, acknowledgements). Its
//! per-datagram work is in `inbound` and `handover`.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use tagwire_wire::TagName;

use crate::{inbound, keep_spare, spare_buffer, Config, Delivery, Transmit, TxBuf};

/// Streams of data datagrams from other nodes, per sender and stream id:
/// datagrams in ([`ReceiveSession::handle_datagram`]), whole messages out
/// ([`ReceiveSession::poll_deliver`]), acknowledgements out
/// ([`ReceiveSession::poll_transmit`]).
#[derive(Debug)]
pub struct ReceiveSession {
    pub(crate) config: Config,
    /// Inbound streams by (sender address, id).
    pub(crate) streams: HashMap<(IpAddr, u64), inbound::InStream>,
    /// Room per tag for a lossless subscriber (absent: unlimited).
    pub(crate) credit: HashMap<TagName, u32>,
    /// Tags whose inbound streams moved to another session of this node,
    /// and those streams (their heartbeats are not answered here).
    pub(crate) away: HashSet<TagName>,
    pub(crate) away_streams: HashMap<(IpAddr, u64), TagName>,
    pub(crate) transmits: VecDeque<Transmit>,
    pub(crate) deliveries: VecDeque<Delivery>,
    /// Inbound streams that received data since the last `poll_transmit`
    /// (their acknowledgements, if due, go then).
    pub(crate) ack_due: Vec<(IpAddr, u64)>,
    /// Buffers given back by the reader (`recycle`), for the next
    /// deliveries' payloads and acknowledgements.
    pub(crate) spare: Vec<Vec<u8>>,
    /// The tag the last data datagram named, for the next ones that name
    /// it (see `handle_datagram`).
    pub(crate) last_tag: Option<TagName>,
    pub(crate) events: VecDeque<ReceiveEvent>,
}

/// Something a [`ReceiveSession`] tells the runtime (to count or show in
/// `tagwire stats`, or to report a loss to the subscriber).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiveEvent {
    /// Best-effort datagrams that never came (counted from the gap).
    BestEffortLost {
        /// Their tag.
        tag: TagName,
        /// The sender.
        from: SocketAddr,
        /// How many.
        count: u64,
    },
    /// A reliable data datagram refused: the tag has no credit here.
    Refused {
        /// Its tag.
        tag: TagName,
        /// The sender.
        from: SocketAddr,
    },
    /// A data datagram of a tag whose streams moved to another session
    /// of this node ([`ReceiveSession::export_inbound`]): dropped unacknowledged.
    Away {
        /// Its tag.
        tag: TagName,
        /// The sender.
        from: SocketAddr,
    },
    /// A datagram that does not decode (or a TCP frame that is no data).
    Malformed {
        /// The sender.
        from: SocketAddr,
    },
    /// A data datagram dropped because its sending node is at one of its
    /// bounds here ([`Config::max_peer_streams`],
    /// [`Config::max_peer_reassembly`]); reliable data comes again.
    PeerBound {
        /// The sender.
        from: SocketAddr,
        /// Which bound.
        what: &'static str,
    },
    /// A publisher's own first copy arrived and was new to its stream.
    DirectReceived {
        /// Its tag.
        tag: TagName,
    },
}

impl ReceiveSession {
    /// A session with no streams.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            streams: HashMap::new(),
            credit: HashMap::new(),
            away: HashSet::new(),
            away_streams: HashMap::new(),
            transmits: VecDeque::new(),
            deliveries: VecDeque::new(),
            ack_due: Vec::new(),
            spare: Vec::new(),
            last_tag: None,
            events: VecDeque::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The next acknowledgement to send, if any: those the data handed in
    /// since the last call made due, then NACKs whose rate limit let them
    /// go at `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if !self.ack_due.is_empty() {
            self.ack_bursts(now);
        }
        if let Some(t) = self.transmits.pop_front() {
            return Some(t);
        }
        self.poll_inbound(now);
        self.transmits.pop_front()
    }

    /// The next whole message received, in its stream's order.
    pub fn poll_deliver(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ReceiveEvent> {
        self.events.pop_front()
    }

    /// When [`ReceiveSession::handle_timeout`] (and
    /// [`ReceiveSession::poll_transmit`]) next have something to do
    /// without new input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Acknowledgements made due by data (when it came) go at once.
        let acks = self
            .ack_due
            .iter()
            .filter_map(|k| self.streams.get(k).map(|s| s.last))
            .min();
        [acks, self.inbound_timeout()].into_iter().flatten().min()
    }

    /// Forgets streams silent for `idle_stream` at `now` (NACKs that fall
    /// due come out of the next [`ReceiveSession::poll_transmit`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire_inbound(now);
    }

    /// Gives a delivered message's buffer (or any other) back for the next
    /// deliveries and acknowledgements: a reader that hands each payload on
    /// by swapping buffers allocates nothing per message. At most
    /// [`crate::SPARE_BUFFERS`] are kept, none larger than
    /// [`crate::SPARE_CAPACITY`].
    pub fn recycle(&mut self, buf: Vec<u8>) {
        keep_spare(&mut self.spare, buf);
    }

    /// Gives a sent acknowledgement's bytes back.
    pub fn recycle_transmit(&mut self, bytes: TxBuf) {
        if let Some(v) = bytes.into_vec() {
            keep_spare(&mut self.spare, v);
        }
    }

    /// An empty buffer: one given back earlier, or a new one.
    pub fn buffer(&mut self) -> Vec<u8> {
        spare_buffer(&mut self.spare)
    }
}
