//! One outbound stream: a writer (or a best-effort counter) and the message
//! waiting for window space.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

use tagwire_reliable::{fragment_count, fragments, Transmit, Writer};
use tagwire_wire::datagram::{max_fragment_payload, DataRepr, Heartbeat, FLAG_RELIABLE};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{SenderInfo, SeqNum};

use super::{PublishError, StreamConfig};
use crate::sim::node::{Addr, Outgoing};

#[derive(Debug)]
pub(super) struct OutStream {
    id: u64,
    kind: Kind,
    /// Number of the next message (from 1).
    next_msg: u64,
    /// A message some of whose fragments wait for window space.
    pending: Option<Pending>,
}

#[derive(Debug)]
enum Kind {
    // Boxed: a writer is 30 times the size of a best-effort counter.
    Reliable(Box<Writer>),
    BestEffort { next_seq: u64 },
}

#[derive(Debug)]
struct Pending {
    header: FrameHeader,
    payload: Vec<u8>,
    ranges: Vec<Range<usize>>,
    next: usize,
}

impl OutStream {
    pub(super) fn new(id: u64, config: &StreamConfig) -> Self {
        let kind = if config.reliable {
            Kind::Reliable(Box::new(Writer::new(config.writer)))
        } else {
            Kind::BestEffort { next_seq: 1 }
        };
        Self {
            id,
            kind,
            next_msg: 1,
            pending: None,
        }
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }

    pub(super) fn writer(&self) -> Option<&Writer> {
        match &self.kind {
            Kind::Reliable(w) => Some(w),
            Kind::BestEffort { .. } => None,
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_none() && self.writer().is_none_or(Writer::is_idle)
    }

    /// Accepts a message unless the previous one still waits; sends what
    /// fits. Returns its number and the datagrams sent.
    pub(super) fn publish(
        &mut self,
        now: Instant,
        to: Addr,
        payload: &[u8],
        config: &StreamConfig,
        out: &mut VecDeque<Outgoing>,
    ) -> Result<(u64, u64), PublishError> {
        if self.pending.is_some() {
            return Err(PublishError::HeldBack { to });
        }
        let max = max_fragment_payload(&config.tag, config.datagram_size);
        if max == 0 {
            return Err(PublishError::NoRoom);
        }
        if fragment_count(payload.len(), max) > usize::from(u16::MAX) {
            return Err(PublishError::TooLarge { len: payload.len() });
        }
        let msg = self.next_msg;
        self.next_msg += 1;
        self.pending = Some(Pending {
            header: FrameHeader {
                flags: 0,
                sender: SenderInfo::default(),
                stream: 0,
                seq: SeqNum(msg),
                timestamp_ns: msg,
            },
            payload: payload.to_vec(),
            ranges: fragments(payload.len(), max).collect(),
            next: 0,
        });
        Ok((msg, self.pump(now, to, config, out)))
    }

    /// Hands the writer the pending fragments its window takes; returns how
    /// many were sent.
    fn pump(
        &mut self,
        now: Instant,
        to: Addr,
        config: &StreamConfig,
        out: &mut VecDeque<Outgoing>,
    ) -> u64 {
        let mut sent = 0;
        while let Some(p) = &mut self.pending {
            let Some(range) = p.ranges.get(p.next).cloned() else {
                self.pending = None;
                break;
            };
            // Both fit a u16: publish checked the fragment count.
            let (frag, frags) = (p.next as u16, p.ranges.len() as u16);
            let d = DataRepr {
                seq: 0,
                flags: if config.reliable { FLAG_RELIABLE } else { 0 },
                frag,
                frags,
                msg_len: p.payload.len() as u32,
                header: p.header,
                tag: &config.tag,
                payload: &p.payload[range],
            };
            let id = self.id;
            let bytes = match &mut self.kind {
                Kind::Reliable(w) => {
                    let Ok((_, bytes)) =
                        w.send(now, |seq, buf| DataRepr { seq, ..d }.encode(id, buf))
                    else {
                        break;
                    };
                    bytes.to_vec()
                }
                Kind::BestEffort { next_seq } => {
                    let mut buf = Vec::new();
                    DataRepr {
                        seq: *next_seq,
                        ..d
                    }
                    .encode(id, &mut buf);
                    *next_seq += 1;
                    buf
                }
            };
            out.push_back(Outgoing::unicast(to, bytes));
            sent += 1;
            p.next += 1;
        }
        sent
    }

    /// Resends and heartbeats that are due, then pending fragments; returns
    /// the fragments sent for the first time.
    pub(super) fn service(
        &mut self,
        now: Instant,
        to: Addr,
        config: &StreamConfig,
        out: &mut VecDeque<Outgoing>,
    ) -> u64 {
        if let Kind::Reliable(w) = &mut self.kind {
            while let Some(t) = w.poll_transmit(now) {
                let bytes = match t {
                    Transmit::Data { bytes, .. } => bytes.to_vec(),
                    Transmit::Heartbeat { first, last } => {
                        let mut buf = Vec::new();
                        Heartbeat { first, last }.encode(self.id, &mut buf);
                        buf
                    }
                };
                out.push_back(Outgoing::unicast(to, bytes));
            }
        }
        self.pump(now, to, config, out)
    }

    pub(super) fn handle_acknack(
        &mut self,
        now: Instant,
        ack_through: u64,
        known_through: u64,
        missing: &[u64],
    ) {
        if let Kind::Reliable(w) = &mut self.kind {
            w.handle_acknack(now, ack_through, known_through, missing);
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.writer()?.poll_timeout()
    }
}
