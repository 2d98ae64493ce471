//! The sending session: what this node's publishers send to other nodes
//! (routes, scaling, batching, fragments, reliable windows, the send
//! ticket). Its per-tag work is in `outbound` and `ticket`.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use foldhash::{HashMap, HashMapExt};
use tagwire_wire::{NodeAddr, TagName};

use crate::{keep_spare, outbound, spare_buffer, Config, StreamIds, Transmit, TxBuf};

/// Streams of data datagrams from this node's publishers to other nodes,
/// per tag and destination: records in ([`SendSession::handle_record`]),
/// acknowledgements in ([`SendSession::handle_ack`]), datagrams out
/// ([`SendSession::poll_transmit`]).
#[derive(Debug)]
pub struct SendSession {
    pub(crate) config: Config,
    /// Stream ids handed out.
    pub(crate) ids: StreamIds,
    /// Outbound state per tag with routes.
    pub(crate) out: BTreeMap<TagName, outbound::Outbound>,
    /// Our reliable streams by id: their tag (acknowledgement dispatch).
    pub(crate) owned: HashMap<u64, TagName>,
    pub(crate) transmits: VecDeque<Transmit>,
    /// Buffers given back (`recycle`), for the next datagrams.
    pub(crate) spare: Vec<Vec<u8>>,
    pub(crate) events: VecDeque<SendEvent>,
}

/// Something a [`SendSession`] tells the runtime (to count or show in
/// `tagwire stats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendEvent {
    /// A reliable stream to `node` started (new id).
    StreamOpened {
        /// Its tag.
        tag: TagName,
        /// Its destination node.
        node: NodeAddr,
        /// Its id.
        stream: u64,
    },
    /// A reliable stream ended (route gone, changed, or its numbers spoiled).
    StreamClosed {
        /// Its tag.
        tag: TagName,
        /// Its destination node.
        node: NodeAddr,
        /// Its id.
        stream: u64,
    },
    /// Copies of a sample not sent because of temporal scaling.
    ScaledOut {
        /// Its tag.
        tag: TagName,
        /// Nodes that skipped it.
        count: u64,
    },
    /// A message that no stream can carry (more fragments than a datagram
    /// numbers): dropped.
    Dropped {
        /// Its tag.
        tag: TagName,
    },
    /// A record its publisher sent itself was kept for resends on a
    /// stream to `node` (send ticket).
    DirectKept {
        /// Its tag.
        tag: TagName,
        /// The node.
        node: NodeAddr,
    },
}

impl SendSession {
    /// A session with no routes and no streams.
    pub fn new(config: Config) -> Self {
        Self {
            ids: StreamIds {
                seed: config.seed,
                issued: 0,
            },
            config,
            out: BTreeMap::new(),
            owned: HashMap::new(),
            transmits: VecDeque::new(),
            spare: Vec::new(),
            events: VecDeque::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The next datagram to send, if any (first transmissions, then the
    /// resends, heartbeats and credit probes that fall due at `now`).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if let Some(t) = self.transmits.pop_front() {
            return Some(t);
        }
        self.poll_outbound(now)
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<SendEvent> {
        self.events.pop_front()
    }

    /// When [`SendSession::handle_timeout`] (and
    /// [`SendSession::poll_transmit`]) next have something to do without
    /// new input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.outbound_timeout()
    }

    /// Moves what waits on as far as the windows allow at `now` (resends,
    /// heartbeats and credit probes come out of the next
    /// [`SendSession::poll_transmit`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.pump_all(now);
    }

    /// Gives a buffer back for the next datagrams: a sender that gives each
    /// transmit's bytes back once sent allocates nothing per message. At
    /// most [`crate::SPARE_BUFFERS`] are kept, none larger than
    /// [`crate::SPARE_CAPACITY`].
    pub fn recycle(&mut self, buf: Vec<u8>) {
        keep_spare(&mut self.spare, buf);
    }

    /// Gives a sent transmit's bytes back: its own buffer (or a shared one
    /// its window let go of) for the next transmits; a shared one the window
    /// still holds stays there (for resends, and then its next datagram).
    pub fn recycle_transmit(&mut self, bytes: TxBuf) {
        if let Some(v) = bytes.into_vec() {
            keep_spare(&mut self.spare, v);
        }
    }

    /// An empty buffer for [`SendSession::handle_record_buf`]: one given
    /// back earlier, or a new one.
    pub fn buffer(&mut self) -> Vec<u8> {
        spare_buffer(&mut self.spare)
    }
}
