//! A receiving session answers a burst of data datagrams (what one
//! receive of coalesced datagrams hands in) with one acknowledgement, not
//! one per `ack_every` of them: each would supersede the one before, and
//! every one costs both hosts a system call and the sender a wake-up.

#![allow(clippy::unwrap_used)]

mod net;

use std::time::Instant;

use net::*;
use tagwire_session::{Class, Config, Mode, Session};

#[test]
fn a_burst_of_data_is_acknowledged_once() {
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
    // 64 datagrams of one message each (1000 bytes: no two share a batch).
    let mut data = Vec::new();
    for seq in 1..=64 {
        a.handle_record(now, &tag(), &header(0, seq), &payload(seq, 1000))
            .unwrap();
        a.flush(now, &tag());
        while let Some(t) = a.poll_transmit(now) {
            if t.class == Class::Data {
                data.push(t.bytes);
            }
        }
    }
    assert_eq!(data.len(), 64);
    for d in &data {
        b.handle_datagram(now, addr(0), d);
    }
    let acks: Vec<_> = std::iter::from_fn(|| b.poll_transmit(now)).collect();
    assert_eq!(acks.len(), 1, "one acknowledgement for the burst");
    a.handle_datagram(now, addr(1), &acks[0].bytes);
    let s = &a.stream_stats()[0];
    assert_eq!((s.writer.acked, s.unacked), (64, 0), "all of it");
    // Nothing more is due without new data.
    assert!(b.poll_transmit(now).is_none());
    assert_eq!(std::iter::from_fn(|| b.poll_deliver()).count(), 64);
}
