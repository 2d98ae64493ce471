//! A receiving session answers a burst of data datagrams (what one
//! receive of coalesced datagrams hands in) with one acknowledgement, not
//! one per `ack_every` of them: each would supersede the one before, and
//! every one costs both hosts a system call and the sender a wake-up.

#![allow(clippy::unwrap_used)]

mod net;

use std::time::Instant;

use net::*;
use tagwire_session::{Class, Config, Mode, Session, ACK_EVERY};

#[test]
fn a_burst_of_data_is_acknowledged_once() {
    let now = Instant::now();
    // Bounds and a congestion window that let `ack_every` datagrams go
    // unasked (a writer asks at half of either bound, or when its window
    // is full).
    let d = Config::default();
    let mut a = Session::new(Config {
        me: node(0),
        max_unacked_messages: 4 * ACK_EVERY as usize,
        max_unacked_bytes: 4 * ACK_EVERY as usize * 1500,
        writer: tagwire_reliable::WriterConfig {
            initial_cwnd: 4 * ACK_EVERY as usize,
            ..d.writer
        },
        ..d
    });
    a.set_routes(now, &tag(), vec![dest(1, Mode::Reliable)]);
    let mut b = Session::new(Config {
        me: node(1),
        ..Config::default()
    });
    // `ack_every` datagrams of one message each (1000 bytes: no two share
    // a batch).
    let n = u64::from(ACK_EVERY);
    let mut data = Vec::new();
    for seq in 1..=n {
        a.handle_record(now, &tag(), &header(0, seq), &payload(seq, 1000))
            .unwrap();
        a.flush(now, &tag());
        while let Some(t) = a.poll_transmit(now) {
            if t.class == Class::Data {
                data.push(t.bytes);
            }
        }
    }
    assert_eq!(data.len() as u64, n);
    for d in &data {
        b.handle_datagram(now, addr(0), d);
    }
    let acks: Vec<_> = std::iter::from_fn(|| b.poll_transmit(now)).collect();
    assert_eq!(acks.len(), 1, "one acknowledgement for the burst");
    a.handle_datagram(now, addr(1), &acks[0].bytes);
    let s = &a.stream_stats()[0];
    assert_eq!((s.writer.acked, s.unacked), (n, 0), "all of it");
    // Nothing more is due without new data.
    assert!(b.poll_transmit(now).is_none());
    assert_eq!(std::iter::from_fn(|| b.poll_deliver()).count() as u64, n);
}

#[test]
fn an_acknowledgement_decoded_by_the_caller_frees_the_window_as_its_datagram_does() {
    use tagwire_wire::datagram::{Body, Datagram};
    let now = Instant::now();
    let mut a = Session::new(Config {
        me: node(0),
        ..Config::default()
    });
    a.set_routes(now, &tag(), vec![dest(1, Mode::Reliable)]);
    let mut b = Session::new(Config {
        me: node(1),
        ..Config::default()
    });
    for seq in 1..=3 {
        a.handle_record(now, &tag(), &header(0, seq), &payload(seq, 1000))
            .unwrap();
        a.flush(now, &tag());
    }
    // Fewer than `ack_every` datagrams: the writer's heartbeat asks.
    let later = now + std::time::Duration::from_millis(60);
    for at in [now, later] {
        while let Some(t) = a.poll_transmit(at) {
            b.handle_datagram(at, addr(0), &t.bytes);
        }
    }
    let ack = b.poll_transmit(later).expect("an acknowledgement");
    let Datagram {
        stream,
        body: Body::AckNack(decoded),
    } = Datagram::decode(&ack.bytes).unwrap()
    else {
        panic!("not an acknowledgement")
    };
    let decoded = decoded.to_acknack();
    assert!(!a.handle_ack(later, stream ^ 1, &decoded), "not its stream");
    assert_eq!(a.stream_stats()[0].unacked, 3);
    assert!(a.handle_ack(later, stream, &decoded));
    let s = &a.stream_stats()[0];
    assert_eq!((s.writer.acked, s.unacked), (3, 0));
}
