//! The delivery session's work per message, sender and receiver together,
//! driven as the daemon's forwarder and a direct receiver drive them
//! (records taken while the session can accept them, up to 64 records or
//! 64 KiB of them at a time; every sent buffer and delivered payload given
//! back). Run it under
//! `valgrind --tool=callgrind` for two message counts: the difference in
//! instructions over the difference in messages is the cost per message
//! without the setup (`bench/results/stop34/instructions.txt`).
//!
//! Usage: `per_message SIZE COUNT [buf]` (`buf`: records handed in buffers
//! of the session's, as the daemon's forwarder reads its ring).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use tagwire_session::{Batching, Config, Dest, Mode, Session};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum, TagName};

fn addr(i: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)), 7402)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let size: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(8192);
    let count: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let own_buffers = args.get(3).is_some_and(|a| a == "buf");
    let Ok(tag) = TagName::new("/bench/per-message") else {
        return;
    };
    let now = Instant::now();
    // As the daemon's forwarder configures its sessions.
    let datagram = 1472 - 44;
    let mut a = Session::new(Config {
        me: NodeAddr(addr(1).ip()),
        datagram,
        batch: Batching::fixed(datagram),
        max_unacked_messages: 4096,
        ..Config::default()
    });
    a.set_routes(
        now,
        &tag,
        vec![Dest {
            priority: Default::default(),
            node: NodeAddr(addr(2).ip()),
            addr: addr(2),
            mode: Mode::Reliable,
            every: 1,
            relay: false,
        }],
    );
    let mut b = Session::new(Config {
        me: NodeAddr(addr(2).ip()),
        ..Config::default()
    });
    let payload = vec![0xa5u8; size];
    let (mut delivered, mut sum) = (0u64, 0u64);
    let mut seq = 1;
    while seq <= count {
        // As the forwarder: up to 64 records or 64 KiB of them at a time.
        let mut group_bytes = 0;
        for _ in 0..64 {
            if seq > count || group_bytes >= 64 << 10 || !a.can_accept(&tag) {
                break;
            }
            group_bytes += size;
            let header = FrameHeader {
                flags: 0,
                sender: SenderInfo {
                    pid: Pid(1),
                    node: NodeAddr(addr(1).ip()),
                },
                stream: 1,
                seq: SeqNum(seq),
                timestamp_ns: seq,
            };
            let taken = if own_buffers {
                let mut buf = a.buffer();
                buf.extend_from_slice(&payload);
                a.handle_record_buf(now, &tag, &header, buf)
            } else {
                a.handle_record(now, &tag, &header, &payload)
            };
            if taken.is_err() {
                break;
            }
            seq += 1;
        }
        a.flush(now, &tag);
        // Until both are quiet: data to the receiver, acknowledgements back.
        loop {
            let mut moved = false;
            while let Some(t) = a.poll_transmit(now) {
                moved = true;
                b.handle_datagram(now, addr(1), &t.bytes);
                a.recycle_transmit(t.bytes);
            }
            while let Some(d) = b.poll_deliver() {
                delivered += 1;
                sum = sum.wrapping_add(d.payload.len() as u64);
                b.recycle(d.payload);
            }
            while let Some(t) = b.poll_transmit(now) {
                moved = true;
                a.handle_datagram(now, addr(2), &t.bytes);
                b.recycle_transmit(t.bytes);
            }
            if !moved {
                break;
            }
        }
    }
    println!("{delivered} messages of {size} bytes delivered ({sum} bytes)");
}
