//! A writer and a reader on a virtual clock, joined by a channel that loses,
//! reorders and duplicates datagrams in both directions: every message must
//! arrive exactly once, in order, byte-identical.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tagwire_reliable::{
    fragment_count, fragments, Arrival, Reader, ReaderConfig, Reassembled, Reassembler, Transmit,
    Writer, WriterConfig,
};
use tagwire_wire::datagram::{
    max_fragment_payload, Body, DataRepr, DataView, Datagram, Heartbeat, FLAG_RELIABLE,
};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{SenderInfo, SeqNum, TagName};

const STREAM: u64 = 0x5eed;

/// splitmix64: a tiny deterministic generator for the channel's decisions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

#[derive(Debug, Clone)]
struct Net {
    seed: u64,
    loss: f64,
    dup: f64,
    jitter_ms: u64,
}

/// A datagram in flight: (arrival, send order, to the reader?, bytes); the
/// heap pops the earliest arrival, then the earliest sent.
type InFlight = Reverse<(Instant, u64, bool, Vec<u8>)>;

/// In-flight datagrams, ordered by arrival time then send order.
struct Channel {
    net: Net,
    rng: Rng,
    order: u64,
    flight: BinaryHeap<InFlight>,
}

impl Channel {
    fn new(net: Net) -> Self {
        Self {
            rng: Rng(net.seed),
            net,
            order: 0,
            flight: BinaryHeap::new(),
        }
    }

    fn send(&mut self, now: Instant, to_reader: bool, bytes: &[u8]) {
        let copies = if self.rng.chance(self.net.dup) { 2 } else { 1 };
        for _ in 0..copies {
            if self.rng.chance(self.net.loss) {
                continue;
            }
            let delay = 1 + self.rng.next() % (self.net.jitter_ms + 1);
            self.order += 1;
            self.flight.push(Reverse((
                now + Duration::from_millis(delay),
                self.order,
                to_reader,
                bytes.to_vec(),
            )));
        }
    }

    fn next_arrival(&self) -> Option<Instant> {
        self.flight.peek().map(|Reverse((t, ..))| *t)
    }

    fn pop_due(&mut self, now: Instant) -> Option<(bool, Vec<u8>)> {
        if self.next_arrival()? > now {
            return None;
        }
        self.flight.pop().map(|Reverse((_, _, to, b))| (to, b))
    }
}

struct Sim {
    tag: TagName,
    max_payload: usize,
    writer: Writer,
    reader: Reader,
    reassembler: Reassembler,
    channel: Channel,
    /// Messages to send and the next (message, fragment) to hand the writer.
    messages: Vec<Vec<u8>>,
    cursor: (usize, usize),
    delivered: Vec<Reassembled>,
}

fn header(n: usize) -> FrameHeader {
    FrameHeader {
        flags: 0,
        sender: SenderInfo::default(),
        stream: 0,
        seq: SeqNum(n as u64 + 1),
        timestamp_ns: n as u64 * 1000,
    }
}

impl Sim {
    fn new(messages: Vec<Vec<u8>>, net: Net, wc: WriterConfig, rc: ReaderConfig) -> Self {
        let tag = TagName::new("/sim/stream").unwrap();
        let max_payload = max_fragment_payload(&tag, 400);
        Self {
            tag,
            max_payload,
            writer: Writer::new(wc),
            reader: Reader::with_start(rc, 1),
            reassembler: Reassembler::default(),
            channel: Channel::new(net),
            messages,
            cursor: (0, 0),
            delivered: Vec::new(),
        }
    }

    /// Hands the writer as many fragments as its window takes.
    fn publish(&mut self, now: Instant) {
        while let Some(msg) = self.messages.get(self.cursor.0) {
            let (n, f) = self.cursor;
            let frags = fragment_count(msg.len(), self.max_payload);
            let range = fragments(msg.len(), self.max_payload).nth(f).unwrap();
            let d = DataRepr {
                seq: 0,
                flags: FLAG_RELIABLE,
                frag: f as u16,
                frags: frags as u16,
                msg_len: msg.len() as u32,
                header: header(n),
                tag: &self.tag,
                payload: &msg[range],
            };
            let Ok((_, bytes)) = self.writer.send(now, |seq, out| {
                DataRepr { seq, ..d }.encode(STREAM, out);
            }) else {
                break;
            };
            self.channel.send(now, true, bytes);
            self.cursor = if f + 1 == frags {
                (n + 1, 0)
            } else {
                (n, f + 1)
            };
        }
        assert!(self.writer.occupancy() <= self.writer.window());
    }

    fn arrive(&mut self, now: Instant, to_reader: bool, bytes: &[u8]) {
        let g = Datagram::decode(bytes).unwrap();
        assert_eq!(g.stream, STREAM);
        match (to_reader, g.body) {
            (true, Body::Data(d)) => {
                if self.reader.handle_data(now, d.seq(), bytes) == Arrival::Deliver {
                    self.reassemble(&d);
                }
                while let Some(buffered) = self.reader.poll_event() {
                    let Body::Data(d) = Datagram::decode(&buffered).unwrap().body else {
                        panic!("reader buffered a non-data datagram");
                    };
                    self.reassemble(&d);
                }
            }
            (true, Body::Heartbeat(h)) => self.reader.handle_heartbeat(now, h.first, h.last),
            (false, Body::AckNack(a)) => {
                let missing: Vec<u64> = a.missing().collect();
                self.writer
                    .handle_acknack(now, a.ack_through(), a.known_through(), &missing);
            }
            (to, body) => panic!("unexpected datagram (to reader: {to}): {body:?}"),
        }
    }

    fn reassemble(&mut self, d: &DataView<'_>) {
        if let Some(m) = self.reassembler.handle_fragment(d, &self.tag) {
            self.delivered.push(m);
        }
    }

    fn flush(&mut self, now: Instant) {
        let mut out = Vec::new();
        while let Some(t) = self.writer.poll_transmit(now) {
            out.clear();
            match t {
                Transmit::Data { bytes, .. } => out.extend_from_slice(bytes),
                Transmit::Heartbeat { first, last } => {
                    Heartbeat { first, last }.encode(STREAM, &mut out)
                }
            }
            self.channel.send(now, true, &out);
        }
        while let Some(a) = self.reader.poll_transmit(now) {
            out.clear();
            a.encode(STREAM, &mut out);
            self.channel.send(now, false, &out);
        }
    }

    fn done(&self) -> bool {
        self.cursor.0 == self.messages.len() && self.writer.is_idle()
    }

    /// Runs until every message is acknowledged; returns the virtual time taken.
    fn run(&mut self, t0: Instant, limit: Duration) -> Duration {
        let mut now = t0;
        loop {
            self.publish(now);
            self.flush(now);
            while let Some((to_reader, bytes)) = self.channel.pop_due(now) {
                self.arrive(now, to_reader, &bytes);
                self.publish(now);
                self.flush(now);
            }
            if self.done() {
                return now - t0;
            }
            let next = [
                self.channel.next_arrival(),
                self.writer.poll_timeout(),
                self.reader.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min()
            .expect("the simulation stalled: nothing in flight and no timer");
            now = now.max(next);
            assert!(
                now - t0 < limit,
                "no progress within {limit:?} of virtual time"
            );
        }
    }
}

fn check_delivery(sim: &Sim, messages: &[Vec<u8>]) {
    assert_eq!(
        sim.delivered.len(),
        messages.len(),
        "messages lost or repeated"
    );
    for (n, (m, want)) in sim.delivered.iter().zip(messages).enumerate() {
        assert_eq!(m.header, header(n), "message {n} out of order");
        assert_eq!(&m.payload, want, "message {n} corrupted");
        assert_eq!(m.tag, sim.tag);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_message_arrives_once_in_order_over_a_lossy_channel(
        sizes in proptest::collection::vec(0usize..3000, 1..40),
        seed: u64,
        loss in 0.0f64..0.3,
        dup in 0.0f64..0.2,
        jitter_ms in 0u64..20,
        window in 1usize..64,
        ack_every in 1u32..32,
    ) {
        let messages: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(n, &s)| (0..s).map(|i| (i * 7 + n * 13) as u8).collect())
            .collect();
        let mut sim = Sim::new(
            messages.clone(),
            Net { seed, loss, dup, jitter_ms },
            WriterConfig { window, ..WriterConfig::default() },
            ReaderConfig { ack_every, ..ReaderConfig::default() },
        );
        sim.run(Instant::now(), Duration::from_secs(3600));
        check_delivery(&sim, &messages);
        let ws = sim.writer.stats();
        prop_assert_eq!(ws.acked, ws.sent);
        // Loose, but catches a retransmission storm (each NACK resending
        // copies still in flight, each duplicate triggering another NACK).
        prop_assert!(ws.retransmitted <= 5 * ws.sent + 50, "{:?}", ws);
        prop_assert_eq!(sim.reader.buffered(), 0);
        prop_assert_eq!(sim.reassembler.partials(), 0);
    }
}

#[test]
fn a_lost_last_datagram_is_recovered_through_the_heartbeat() {
    // A perfect channel that drops exactly the writer's third datagram once.
    let messages = vec![vec![1u8; 10], vec![2u8; 10], vec![3u8; 10]];
    let net = Net {
        seed: 1,
        loss: 0.0,
        dup: 0.0,
        jitter_ms: 0,
    };
    let mut sim = Sim::new(
        messages.clone(),
        net,
        WriterConfig {
            // Longer than the heartbeat: only the heartbeat can recover it.
            resend_after: Duration::from_secs(10),
            ..WriterConfig::default()
        },
        ReaderConfig::default(),
    );
    let t0 = Instant::now();
    sim.publish(t0);
    // Pull the third datagram out of flight.
    let mut kept: Vec<_> = std::mem::take(&mut sim.channel.flight).into_vec();
    kept.retain(|Reverse((_, order, ..))| *order != 3);
    sim.channel.flight = kept.into_iter().collect();
    let took = sim.run(t0, Duration::from_secs(5));
    check_delivery(&sim, &messages);
    assert!(took >= WriterConfig::default().heartbeat_period);
    assert_eq!(sim.writer.stats().retransmitted, 1);
    assert!(sim.writer.stats().heartbeats >= 1);
    assert_eq!(sim.reader.stats().nacks_sent, 1);
}
