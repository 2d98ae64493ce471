//! Buffers given back (`Session::recycle`) carry the next small messages
//! and transmits: a reader and a sender that give each buffer back
//! allocate nothing per message. Checked by the buffers' addresses.

#![allow(clippy::unwrap_used)]

mod net;

use std::time::Instant;

use net::*;
use tagwire_session::{Config, Mode, Session, SPARE_BUFFERS, SPARE_CAPACITY};

/// A sender with a reliable route to node 1, and node 1's session.
fn pair(now: Instant) -> (Session, Session) {
    let mut a = Session::new(Config {
        me: node(0),
        ..Config::default()
    });
    a.set_routes(now, &tag(), vec![dest(1, Mode::Reliable)]);
    let b = Session::new(Config {
        me: node(1),
        ..Config::default()
    });
    (a, b)
}

/// Publishes `seqs` on `a` as one batch and hands what `a` sends to `b`;
/// returns the data transmits' buffer addresses.
fn cross(
    a: &mut Session,
    b: &mut Session,
    now: Instant,
    seqs: std::ops::RangeInclusive<u64>,
) -> Vec<usize> {
    for seq in seqs {
        a.handle_record(now, &tag(), &header(0, seq), &payload(seq, 100))
            .unwrap();
    }
    a.flush(now, &tag());
    let mut sent = Vec::new();
    while let Some(t) = a.poll_transmit(now) {
        sent.push(t.bytes.as_ptr() as usize);
        b.handle_datagram(now, addr(0), &t.bytes);
        a.recycle(t.bytes);
    }
    // b's acknowledgements keep a's window open.
    while let Some(t) = b.poll_transmit(now) {
        a.handle_datagram(now, addr(1), &t.bytes);
    }
    sent
}

#[test]
fn a_recycled_buffer_carries_the_next_delivered_message() {
    let now = Instant::now();
    let (mut a, mut b) = pair(now);
    cross(&mut a, &mut b, now, 1..=1);
    let first = b.poll_deliver().unwrap();
    assert_eq!(first.payload, payload(1, 100));
    let mut given = Vec::with_capacity(4096);
    given.extend_from_slice(b"old contents");
    let at = given.as_ptr() as usize;
    b.recycle(given);
    cross(&mut a, &mut b, now, 2..=2);
    let second = b.poll_deliver().unwrap();
    assert_eq!(second.payload, payload(2, 100), "the old contents are gone");
    assert_eq!(
        second.payload.as_ptr() as usize,
        at,
        "the buffer given back"
    );
}

#[test]
fn a_recycled_buffer_carries_the_next_transmit() {
    let now = Instant::now();
    let (mut a, mut b) = pair(now);
    let first = cross(&mut a, &mut b, now, 1..=3);
    assert_eq!(first.len(), 1, "three small messages, one batch");
    // `cross` gave the first transmit's buffer back: the next one is it.
    let second = cross(&mut a, &mut b, now, 4..=6);
    assert_eq!(second, first);
    let got: Vec<u64> = std::iter::from_fn(|| b.poll_deliver())
        .map(|d| d.header.seq.0)
        .collect();
    assert_eq!(got, (1..=6).collect::<Vec<_>>());
}

#[test]
fn recycling_keeps_a_bounded_number_of_bounded_buffers() {
    let now = Instant::now();
    let (mut a, mut b) = pair(now);
    // Too large to keep: its memory goes back to the allocator (a new
    // buffer, sized for the message, carries the next one).
    b.recycle(Vec::with_capacity(SPARE_CAPACITY + 1));
    cross(&mut a, &mut b, now, 1..=1);
    assert!(b.poll_deliver().unwrap().payload.capacity() <= SPARE_CAPACITY);
    // More than SPARE_BUFFERS given back: the surplus is dropped, and the
    // next SPARE_BUFFERS deliveries all come in kept buffers.
    let given: Vec<Vec<u8>> = (0..SPARE_BUFFERS + 10)
        .map(|_| Vec::with_capacity(256))
        .collect();
    let kept: std::collections::HashSet<usize> =
        given.iter().map(|v| v.as_ptr() as usize).collect();
    for g in given {
        b.recycle(g);
    }
    let n = SPARE_BUFFERS as u64;
    // In batches of 10 (one datagram each).
    let mut seq = 2;
    while seq < 2 + n {
        let last = (seq + 9).min(1 + n);
        cross(&mut a, &mut b, now, seq..=last);
        seq = last + 1;
    }
    let mut reused = 0;
    let mut delivered = 0;
    while let Some(d) = b.poll_deliver() {
        delivered += 1;
        reused += usize::from(kept.contains(&(d.payload.as_ptr() as usize)));
    }
    assert_eq!(delivered, SPARE_BUFFERS);
    assert_eq!(reused, SPARE_BUFFERS);
}
