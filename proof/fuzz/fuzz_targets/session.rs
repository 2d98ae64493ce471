//! The session core on hostile input: records of `[delay ms: u8][what: u8]
//! [len: u16 le][bytes]` fed to a session that both sends (a reliable, a
//! best-effort and a scaled route) and receives (with a lossless credit that
//! the input changes), whose inbound streams move to a second session of
//! the node and back (direct delivery's handover, with partial messages
//! and sequence numbers the input forges, as another process could), and
//! whose routes change address. Nothing panics, and every delivery is a
//! whole message of the tag it names.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tagwire_wire::handover::PartialState;
use tagwire_session::{Config, Dest, Handover, Mode, Session};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, SenderInfo, SeqNum, TagName};

fuzz_target!(|data: &[u8]| {
    let me = NodeAddr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    let peer = |i: u8| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)), 7000);
    let Ok(tag) = TagName::new("/fuzz") else { return };
    let mut s = Session::new(Config {
        me,
        max_unacked_messages: 16,
        ..Config::default()
    });
    let dest = |i: u8, mode, every| Dest {
        node: NodeAddr(peer(i).ip()),
        addr: peer(i),
        mode,
        every,
        relay: false,
        priority: Default::default(),
    };
    s.set_routes(
        Instant::now(),
        &tag,
        vec![
            dest(2, Mode::Reliable, 1),
            dest(3, Mode::BestEffort, 1),
            dest(4, Mode::Reliable, 3),
        ],
    );
    let mut other = Session::new(Config {
        me,
        ..Config::default()
    });
    let mut now = Instant::now();
    let mut seq = 0u64;
    let mut rest = data;
    while rest.len() >= 4 {
        now += Duration::from_millis(u64::from(rest[0]));
        let what = rest[1];
        let len = usize::from(u16::from_le_bytes([rest[2], rest[3]])).min(rest.len() - 4);
        let bytes = &rest[4..4 + len];
        rest = &rest[4 + len..];
        match what % 8 {
            0 => s.handle_datagram(now, peer(2 + what / 8 % 3), bytes),
            4 => {
                // The streams move to the other session and back, with
                // whatever the input says on the way.
                let mut h = s.export_inbound(&tag);
                if let (Some(first), Some(&b)) = (h.first_mut(), bytes.first()) {
                    first.next = u64::from_le_bytes(pad(bytes));
                    first.partials.push(PartialState {
                        first_seq: u64::from(b),
                        frags: u16::from(b),
                        msg_len: u32::from(b) * 1000,
                        header: FrameHeader {
                            flags: 0,
                            sender: SenderInfo { pid: tagwire_wire::Pid(2), node: me },
                            stream: 1,
                            seq: SeqNum(1),
                            timestamp_ns: 0,
                        },
                        tag: tag.clone(),
                        pieces: bytes
                            .chunks(7)
                            .enumerate()
                            .map(|(i, c)| (i as u16, c.to_vec()))
                            .collect(),
                    });
                }
                h.push(Handover {
                    sender: peer(2).ip(),
                    id: u64::from(what),
                    reply: Some(peer(3)),
                    reliable: what & 16 != 0,
                    next: u64::MAX - u64::from(what),
                    partials: Vec::new(),
                });
                other.import_inbound(now, &tag, h);
                let back = other.export_inbound(&tag);
                s.import_inbound(now, &tag, back);
                while other.poll_transmit(now).is_some() {}
            }
            5 => {
                // The reliable node's address changes (it took its stream
                // over on another socket).
                let port = u16::from_le_bytes([what, bytes.first().copied().unwrap_or(0)]);
                let mut d = dest(2, Mode::Reliable, 1);
                d.addr.set_port(port);
                s.set_routes(now, &tag, vec![d, dest(3, Mode::BestEffort, 1)]);
            }
            1 | 7 => {
                seq += 1;
                let header = FrameHeader {
                    flags: 0,
                    sender: SenderInfo { pid: tagwire_wire::Pid(1), node: me },
                    stream: 1,
                    seq: SeqNum(seq),
                    timestamp_ns: 0,
                };
                let _ = s.handle_record(now, &tag, &header, bytes);
                s.flush(now, &tag);
            }
            2 | 6 => s.set_credit(now, &tag, (what & 4 != 0).then_some(u32::from(what / 8))),
            _ => s.handle_timeout(now),
        }
        while s.poll_transmit(now).is_some() {}
        while let Some(d) = s.poll_deliver() {
            assert!(d.payload.len() <= tagwire_wire::datagram::MAX_MESSAGE as usize);
        }
        while s.poll_event().is_some() {}
    }
});

fn pad(b: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    let n = b.len().min(8);
    out[..n].copy_from_slice(&b[..n]);
    out
}
