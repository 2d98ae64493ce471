//! Both roles of one node in one value: a [`SendSession`] and a
//! [`ReceiveSession`] sharing a configuration, with acknowledgements
//! routed from the one to the other. The simulator, the fuzz targets and a
//! process that both sends and receives on one socket drive this; the
//! daemon runs the roles apart (a sending session per forwarded tag, a
//! receiving session per socket).

use std::net::SocketAddr;
use std::time::Instant;

use tagwire_reliable::pacer::PacerConfig;
use tagwire_wire::datagram::AckNack;
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::TagName;

use crate::{
    Config, Delivery, Dest, Event, Handover, Held, Offer, ReceiveSession, SendSession, StreamStats,
    TicketOutcome, Transmit, TxBuf,
};

/// A node's delivery session: what its publishers send to other nodes and
/// what it receives from theirs (see the crate documentation). Each method
/// is its role's; see [`SendSession`] and [`ReceiveSession`].
#[derive(Debug)]
pub struct Session {
    send: SendSession,
    receive: ReceiveSession,
    /// Transmits the receiving role handed out and not yet given back:
    /// that many buffers go back to it (buffers are alike; what matters is
    /// that each role gets back as many as it gave, so neither allocates
    /// per message).
    receive_out: usize,
}

impl Session {
    /// A session with no routes and no streams.
    pub fn new(config: Config) -> Self {
        Self {
            send: SendSession::new(config.clone()),
            receive: ReceiveSession::new(config),
            receive_out: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        self.send.config()
    }

    /// The sending role.
    pub fn sending(&mut self) -> &mut SendSession {
        &mut self.send
    }

    /// The receiving role.
    pub fn receiving(&mut self) -> &mut ReceiveSession {
        &mut self.receive
    }

    /// The next thing to send: acknowledgements that received data made
    /// due, then datagrams, then resends, heartbeats and NACKs that fall
    /// due at `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        // (The receiving role first: an acknowledgement is small and frees
        // the other side's window.)
        if let Some(t) = self.receive.poll_transmit(now) {
            self.receive_out += 1;
            return Some(t);
        }
        self.send.poll_transmit(now)
    }

    /// The next event of either role.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.send
            .poll_event()
            .map(Event::Send)
            .or_else(|| self.receive.poll_event().map(Event::Receive))
    }

    /// When [`Session::handle_timeout`] (and [`Session::poll_transmit`])
    /// next have something to do without new input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.send.poll_timeout(), self.receive.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs both roles' timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.receive.handle_timeout(now);
        self.send.handle_timeout(now);
    }

    /// One datagram from `from`: data and heartbeats to the receiving
    /// role, acknowledgements to the sending one.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) {
        if let Some((stream, ack)) = self.receive.handle_datagram(now, from, bytes) {
            self.send.handle_ack(now, stream, &ack);
        }
    }

    /// See [`ReceiveSession::poll_deliver`].
    pub fn poll_deliver(&mut self) -> Option<Delivery> {
        self.receive.poll_deliver()
    }

    /// A delivered payload's buffer back to the receiving role (see
    /// [`ReceiveSession::recycle`]).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.receive.recycle(buf);
    }

    /// A sent transmit's bytes back, to the role that made as many.
    pub fn recycle_transmit(&mut self, bytes: TxBuf) {
        if self.receive_out > 0 {
            self.receive_out -= 1;
            self.receive.recycle_transmit(bytes);
        } else {
            self.send.recycle_transmit(bytes);
        }
    }

    /// See [`SendSession::buffer`].
    pub fn buffer(&mut self) -> Vec<u8> {
        self.send.buffer()
    }

    /// See [`SendSession::set_routes`].
    pub fn set_routes(&mut self, now: Instant, tag: &TagName, dests: Vec<Dest>) {
        self.send.set_routes(now, tag, dests);
    }

    /// See [`SendSession::can_accept`].
    pub fn can_accept(&self, tag: &TagName) -> bool {
        self.send.can_accept(tag)
    }

    /// See [`SendSession::holds_back`].
    pub fn holds_back(&self, tag: &TagName) -> bool {
        self.send.holds_back(tag)
    }

    /// See [`SendSession::handle_record`].
    pub fn handle_record(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: &[u8],
    ) -> Result<(), Held> {
        self.send.handle_record(now, tag, header, payload)
    }

    /// See [`SendSession::handle_record_buf`].
    pub fn handle_record_buf(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: Vec<u8>,
    ) -> Result<(), Held> {
        self.send.handle_record_buf(now, tag, header, payload)
    }

    /// See [`SendSession::flush`].
    pub fn flush(&mut self, now: Instant, tag: &TagName) {
        self.send.flush(now, tag);
    }

    /// See [`SendSession::retransmitted`].
    pub fn retransmitted(&self, tag: &TagName) -> u64 {
        self.send.retransmitted(tag)
    }

    /// See [`SendSession::stream_stats`].
    pub fn stream_stats(&self) -> Vec<StreamStats> {
        self.send.stream_stats()
    }

    /// See [`SendSession::handle_ack`].
    pub fn handle_ack(&mut self, now: Instant, stream: u64, ack: &AckNack) -> bool {
        self.send.handle_ack(now, stream, ack)
    }

    /// See [`SendSession::offer`].
    pub fn offer(&mut self, now: Instant, tag: &TagName, max_dests: usize) -> Option<Offer> {
        self.send.offer(now, tag, max_dests)
    }

    /// See [`SendSession::set_pacing`].
    pub fn set_pacing(&mut self, now: Instant, tag: &TagName, pacing: Option<PacerConfig>) {
        self.send.set_pacing(now, tag, pacing);
    }

    /// See [`SendSession::handle_direct_record`].
    pub fn handle_direct_record(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: &[u8],
        outcome: TicketOutcome,
    ) -> Result<(), Held> {
        self.send
            .handle_direct_record(now, tag, header, payload, outcome)
    }

    /// See [`SendSession::abandon_offer`].
    pub fn abandon_offer(&mut self, now: Instant, tag: &TagName) {
        self.send.abandon_offer(now, tag);
    }

    /// See [`ReceiveSession::set_credit`].
    pub fn set_credit(&mut self, now: Instant, tag: &TagName, room: Option<u32>) {
        self.receive.set_credit(now, tag, room);
    }

    /// See [`ReceiveSession::credit`].
    pub fn credit(&self, tag: &TagName) -> Option<u32> {
        self.receive.credit(tag)
    }

    /// See [`ReceiveSession::export_inbound`].
    pub fn export_inbound(&mut self, tag: &TagName) -> Vec<Handover> {
        self.receive.export_inbound(tag)
    }

    /// See [`ReceiveSession::import_inbound`].
    pub fn import_inbound(&mut self, now: Instant, tag: &TagName, streams: Vec<Handover>) {
        self.receive.import_inbound(now, tag, streams);
    }

    /// See [`ReceiveSession::accept_inbound`].
    pub fn accept_inbound(&mut self, tag: &TagName) {
        self.receive.accept_inbound(tag);
    }

    /// See [`ReceiveSession::is_away`].
    pub fn is_away(&self, tag: &TagName) -> bool {
        self.receive.is_away(tag)
    }
}
