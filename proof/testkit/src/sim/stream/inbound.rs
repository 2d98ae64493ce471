//! One inbound stream: a reader (or a best-effort tracker) and a
//! reassembler.

use std::collections::VecDeque;
use std::time::Instant;

use tagwire_reliable::{
    Arrival, BestEffort, BestEffortStats, Reader, ReaderStats, Reassembler, ReassemblerStats,
};
use tagwire_wire::datagram::{Body, DataView, Datagram, FLAG_RELIABLE};
use tagwire_wire::TagName;

use super::{Delivery, DeliveryLog, ReaderStart, StreamConfig};
use crate::sim::node::{Addr, Outgoing};
use crate::sim::rng::checksum;

/// Who is receiving what, for the delivery log.
pub(super) struct Here<'a> {
    pub(super) receiver: Addr,
    pub(super) incarnation: u32,
    pub(super) from: Addr,
    pub(super) stream: u64,
    pub(super) log: &'a DeliveryLog,
}

#[derive(Debug)]
pub(super) struct InStream {
    kind: Kind,
    reassembler: Reassembler,
}

#[derive(Debug)]
enum Kind {
    Reliable(Reader),
    BestEffort(BestEffort),
}

impl InStream {
    /// A stream of the reliability its first datagram announces.
    pub(super) fn new(config: &StreamConfig, flags: u8) -> Self {
        let kind = if flags & FLAG_RELIABLE != 0 {
            Kind::Reliable(match config.reader_start {
                ReaderStart::FirstSeq => Reader::with_start(config.reader, 1),
                ReaderStart::LateJoin => Reader::new(config.reader),
            })
        } else {
            Kind::BestEffort(match config.reader_start {
                ReaderStart::FirstSeq => BestEffort::with_start(1),
                ReaderStart::LateJoin => BestEffort::new(),
            })
        };
        Self {
            kind,
            reassembler: Reassembler::new(config.reassembler),
        }
    }

    /// Takes a data datagram (`bytes` is all of it); false if its
    /// reliability is not the stream's.
    pub(super) fn handle_data(
        &mut self,
        now: Instant,
        here: &Here<'_>,
        d: &DataView<'_>,
        bytes: &[u8],
    ) -> bool {
        let reliable = d.flags() & FLAG_RELIABLE != 0;
        match &mut self.kind {
            Kind::Reliable(r) if reliable => {
                if r.handle_data(now, d.seq(), bytes) == Arrival::Deliver {
                    reassemble(&mut self.reassembler, now, here, d);
                }
                drain(r, &mut self.reassembler, now, here);
                true
            }
            Kind::BestEffort(b) if !reliable => {
                if b.handle_seq(d.seq()) {
                    reassemble(&mut self.reassembler, now, here, d);
                }
                true
            }
            _ => false,
        }
    }

    /// False if the stream is best effort.
    pub(super) fn handle_heartbeat(
        &mut self,
        now: Instant,
        here: &Here<'_>,
        first: u64,
        last: u64,
    ) -> bool {
        match &mut self.kind {
            Kind::Reliable(r) => {
                r.handle_heartbeat(now, first, last);
                // Giving up a gap the writer no longer holds makes what was
                // buffered after it deliverable.
                drain(r, &mut self.reassembler, now, here);
                true
            }
            Kind::BestEffort(_) => false,
        }
    }

    /// Queues the AckNacks that are due, to `from`.
    pub(super) fn service(
        &mut self,
        now: Instant,
        from: Addr,
        stream: u64,
        out: &mut VecDeque<Outgoing>,
    ) {
        if let Kind::Reliable(r) = &mut self.kind {
            while let Some(a) = r.poll_transmit(now) {
                let mut buf = Vec::new();
                a.encode(stream, &mut buf);
                out.push_back(Outgoing::unicast(from, buf));
            }
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match &self.kind {
            Kind::Reliable(r) => r.poll_timeout(),
            Kind::BestEffort(_) => None,
        }
    }

    pub(super) fn reader_stats(&self) -> Option<ReaderStats> {
        match &self.kind {
            Kind::Reliable(r) => Some(r.stats()),
            Kind::BestEffort(_) => None,
        }
    }

    pub(super) fn best_effort_stats(&self) -> Option<BestEffortStats> {
        match &self.kind {
            Kind::BestEffort(b) => Some(b.stats()),
            Kind::Reliable(_) => None,
        }
    }

    pub(super) fn reassembler_stats(&self) -> ReassemblerStats {
        self.reassembler.stats()
    }
}

/// Delivers what the reader has buffered and is now in order.
fn drain(r: &mut Reader, reassembler: &mut Reassembler, now: Instant, here: &Here<'_>) {
    while let Some(buffered) = r.poll_event() {
        // The reader only buffers datagrams that decoded as data.
        if let Ok(Datagram {
            body: Body::Data(d),
            ..
        }) = Datagram::decode(&buffered)
        {
            reassemble(reassembler, now, here, &d);
        }
    }
}

fn reassemble(r: &mut Reassembler, now: Instant, here: &Here<'_>, d: &DataView<'_>) {
    let Some(m) = TagName::new(d.tag())
        .ok()
        .and_then(|tag| r.handle_fragment(d, &tag))
    else {
        return;
    };
    here.log.push(Delivery {
        at: now,
        receiver: here.receiver,
        incarnation: here.incarnation,
        from: here.from,
        stream: here.stream,
        msg: m.header.seq.0,
        first_seq: m.first_seq,
        len: m.payload.len(),
        checksum: checksum(&m.payload),
    });
}
