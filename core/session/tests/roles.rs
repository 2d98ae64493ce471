//! The two roles apart, as the daemon runs them: a sending session on one
//! node, a receiving session on another, and the acknowledgements a
//! receiving session is handed going back, decoded once, to the sending
//! session that owns their stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tagwire_session::{Config, Dest, Mode, ReceiveSession, SendEvent, SendSession};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum, TagName};

fn tag() -> TagName {
    TagName::new("/roles").unwrap()
}

fn node(i: u8) -> NodeAddr {
    NodeAddr(std::net::Ipv4Addr::new(10, 0, 0, i).into())
}

fn addr(i: u8) -> SocketAddr {
    SocketAddr::new(node(i).0, 7000)
}

fn header(seq: u64) -> FrameHeader {
    FrameHeader {
        flags: 0,
        sender: SenderInfo {
            pid: Pid(1),
            node: node(1),
        },
        stream: 0,
        seq: SeqNum(seq),
        timestamp_ns: 0,
    }
}

#[test]
fn acknowledgements_come_back_from_the_receiving_role_for_the_sending_one() {
    let now = Instant::now();
    let config = |i: u8| Config {
        me: node(i),
        seed: u64::from(i),
        ..Config::default()
    };
    let mut tx = SendSession::new(config(1));
    // The sending node's own receiving session: where its acknowledgements
    // land (the daemon's delivery port).
    let mut tx_port = ReceiveSession::new(config(1));
    let mut rx = ReceiveSession::new(config(2));
    let dest = Dest {
        priority: Default::default(),
        node: node(2),
        addr: addr(2),
        mode: Mode::Reliable,
        every: 1,
        relay: false,
    };
    tx.set_routes(now, &tag(), vec![dest]);
    let mut t = now;
    for seq in 1..=600u64 {
        while !tx.can_accept(&tag()) {
            // Acknowledgements: rx → tx's port → tx.
            let mut acked = false;
            while let Some(a) = rx.poll_transmit(t) {
                assert_eq!(a.dest, addr(1));
                let (stream, ack) = tx_port
                    .handle_datagram(t, a.dest, &a.bytes)
                    .expect("an acknowledgement comes back");
                assert!(tx.handle_ack(t, stream, &ack));
                acked = true;
            }
            if !acked {
                t += Duration::from_millis(1);
                tx.handle_timeout(t);
            }
            while let Some(d) = tx.poll_transmit(t) {
                assert!(rx.handle_datagram(t, addr(1), &d.bytes).is_none());
            }
        }
        tx.handle_record(t, &tag(), &header(seq), &seq.to_le_bytes())
            .unwrap();
        tx.flush(t, &tag());
        while let Some(d) = tx.poll_transmit(t) {
            assert!(rx.handle_datagram(t, addr(1), &d.bytes).is_none());
        }
    }
    // The rest is acknowledged when a heartbeat asks (the reader answers
    // every `ACK_EVERY` datagrams, or when asked).
    for _ in 0..200 {
        if tx.stream_stats()[0].unacked == 0 {
            break;
        }
        t += Duration::from_millis(10);
        tx.handle_timeout(t);
        while let Some(d) = tx.poll_transmit(t) {
            assert!(rx.handle_datagram(t, addr(1), &d.bytes).is_none());
        }
        while let Some(a) = rx.poll_transmit(t) {
            let (stream, ack) = tx_port.handle_datagram(t, a.dest, &a.bytes).unwrap();
            assert!(tx.handle_ack(t, stream, &ack));
        }
    }
    let got: Vec<u64> = std::iter::from_fn(|| rx.poll_deliver())
        .map(|d| d.header.seq.0)
        .collect();
    assert_eq!(got, (1..=600).collect::<Vec<_>>());
    // The acknowledgements reached the window: nothing left unacknowledged.
    let stats = tx.stream_stats();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].unacked, 0, "{stats:?}");
    // The port's session took no delivery and no stream from them.
    assert!(tx_port.poll_deliver().is_none());
    assert!(tx_port.poll_event().is_none());
    assert!(matches!(
        tx.poll_event(),
        Some(SendEvent::StreamOpened { node: n, .. }) if n == node(2)
    ));
}

#[test]
fn a_sending_session_ignores_an_acknowledgement_of_a_stream_it_does_not_own() {
    let mut tx = SendSession::new(Config::default());
    let ack = tagwire_wire::datagram::AckNack {
        ack_through: 5,
        missing: vec![],
        credit: None,
        known_through: 5,
    };
    assert!(!tx.handle_ack(Instant::now(), 99, &ack));
}
