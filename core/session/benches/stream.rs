//! What one reliable stream costs the two session cores per message, both
//! ends in one thread, no sockets: the sender takes records until its
//! window holds it back, its datagrams go to the receiver, the receiver's
//! messages are read (their buffers given back, as a subscriber does) and
//! its acknowledgements go back to the sender. Configured as the daemon's
//! forwarder configures its sessions (MTU-sized datagrams and batches).
//!
//! The kernel's share (sendmsg, recvmsg, the link) is left out on purpose:
//! this is the part `tagwire perf throughput --remote` cannot show apart
//! from the machine's noise, and the part tagwire's own code decides.
#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use tagwire_session::{Batching, Config, Dest, Mode, Session};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum, TagName};

/// The forwarder's datagram without a domain key: an MTU of 1500 less the
/// IP and UDP headers (`tagwire_daemon::forward::datagram`).
const DATAGRAM: usize = 1472;

fn addr(i: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)), 7402)
}

fn node(i: u8) -> NodeAddr {
    NodeAddr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)))
}

struct Pair {
    tx: Session,
    rx: Session,
    tag: TagName,
    now: Instant,
    seq: u64,
    payload: Vec<u8>,
    delivered: u64,
}

impl Pair {
    fn new(size: usize) -> Self {
        let config = |i: u8| Config {
            me: node(i),
            seed: u64::from(i),
            datagram: DATAGRAM,
            batch: Batching::fixed(DATAGRAM),
            ..Config::default()
        };
        let tag = TagName::new("/bench/stream").unwrap();
        let now = Instant::now();
        let mut tx = Session::new(config(1));
        tx.set_routes(
            now,
            &tag,
            vec![Dest {
                priority: Default::default(),
                node: node(2),
                addr: addr(2),
                mode: Mode::Reliable,
                every: 1,
                relay: false,
            }],
        );
        Self {
            tx,
            rx: Session::new(config(2)),
            tag,
            now,
            seq: 0,
            payload: vec![0xa5; size],
            delivered: 0,
        }
    }

    /// Moves `n` messages from the sender's records to the receiver's
    /// reader.
    fn run(&mut self, n: u64) {
        let goal = self.delivered + n;
        while self.delivered < goal {
            self.now += Duration::from_micros(1);
            let now = self.now;
            loop {
                let h = FrameHeader {
                    flags: 0,
                    sender: SenderInfo {
                        pid: Pid(7),
                        node: node(1),
                    },
                    stream: 1,
                    seq: SeqNum(self.seq + 1),
                    timestamp_ns: self.seq,
                };
                // As the forwarder reads its ring: into a buffer of the
                // session's.
                let mut body = self.tx.buffer();
                body.extend_from_slice(&self.payload);
                if self.tx.handle_record_buf(now, &self.tag, &h, body).is_err() {
                    break;
                }
                self.seq += 1;
                if self.seq % 64 == 0 {
                    break;
                }
            }
            self.tx.flush(now, &self.tag);
            while let Some(t) = self.tx.poll_transmit(now) {
                self.rx.handle_datagram(now, addr(1), &t.bytes);
                self.tx.recycle_transmit(t.bytes);
            }
            while let Some(d) = self.rx.poll_deliver() {
                assert_eq!(d.payload.len(), self.payload.len());
                self.delivered += 1;
                self.rx.recycle(d.payload);
            }
            while let Some(t) = self.rx.poll_transmit(now) {
                self.tx.handle_datagram(now, addr(2), &t.bytes);
                self.rx.recycle_transmit(t.bytes);
            }
            while self.tx.poll_event().is_some() {}
            while self.rx.poll_event().is_some() {}
            if self.tx.poll_timeout().is_some_and(|t| t <= now) {
                self.tx.handle_timeout(now);
            }
        }
    }
}

fn stream(c: &mut Criterion) {
    let mut g = c.benchmark_group("reliable_stream");
    for size in [256usize, 8192] {
        let mut pair = Pair::new(size);
        pair.run(10_000);
        g.throughput(Throughput::Elements(1000));
        g.bench_function(format!("{size}B_x1000"), |b| b.iter(|| pair.run(1000)));
    }
    g.finish();
}

criterion_group!(benches, stream);

/// `STREAM_MESSAGES=n SIZE=s`: moves n messages of s bytes once and exits,
/// for an instruction count (`valgrind --tool=callgrind`), where the
/// timings above are as noisy as the machine.
fn main() {
    if let (Ok(n), Ok(size)) = (std::env::var("STREAM_MESSAGES"), std::env::var("SIZE")) {
        let mut pair = Pair::new(size.parse().expect("SIZE: bytes"));
        pair.run(n.parse().expect("STREAM_MESSAGES: a count"));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
