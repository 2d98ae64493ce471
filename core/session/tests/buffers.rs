//! Buffers given back (`Session::recycle`) carry the next small messages
//! and transmits: a reader and a sender that give each buffer back
//! allocate nothing per message. Checked by the buffers' addresses and by
//! counting the sender's allocations.

#![allow(clippy::unwrap_used)]

mod net;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Instant;

/// The system allocator, counting allocations per thread (tests run on
/// threads of their own).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations (and reallocations) made on this thread so far.
fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Runs `f`, adding the allocations it made to `made`.
fn counting<T>(made: &mut u64, f: impl FnOnce() -> T) -> T {
    let before = allocations();
    let r = f();
    *made += allocations() - before;
    r
}

/// A sender with a reliable route to node 1 and node 1's session, both
/// cutting datagrams of 1400 bytes, through `rounds` rounds of
/// `per_round` messages of `len` bytes; `round` counts one round's
/// allocations (the side it measures). Returns them per round.
fn allocations_per_round(
    len: usize,
    per_round: u64,
    rounds: usize,
    round: fn(&mut Session, &mut Session, Instant, std::ops::RangeInclusive<u64>, usize) -> u64,
) -> Vec<u64> {
    let now = Instant::now();
    // Acknowledged every 64 datagrams: the pools fill within a few rounds
    // (with the default, far rarer, acknowledgements the congestion window
    // grows, and buffers are added, for tens of rounds more).
    let config = |i| Config {
        me: node(i),
        datagram: 1400,
        reader: tagwire_reliable::ReaderConfig {
            ack_every: 64,
            ..Config::default().reader
        },
        ..Config::default()
    };
    let (mut a, mut b) = (Session::new(config(0)), Session::new(config(1)));
    a.set_routes(now, &tag(), vec![dest(1, Mode::Reliable)]);
    (0..rounds as u64)
        .map(|r| {
            let first = 1 + r * per_round;
            round(&mut a, &mut b, now, first..=first + per_round - 1, len)
        })
        .collect()
}

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
        a.recycle_transmit(t.bytes);
    }
    // b's acknowledgements keep a's window open; their buffers go back
    // to b once sent, as a runtime gives them back.
    while let Some(t) = b.poll_transmit(now) {
        a.handle_datagram(now, addr(1), &t.bytes);
        b.recycle_transmit(t.bytes);
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

/// Moves what `a` sends to `b` and `b`'s answers back until both are
/// quiet, giving every sent buffer back to its sender (as a runtime
/// does); counts the allocations of `a`'s calls (`count_a`) or `b`'s into
/// `made`.
fn exchange(a: &mut Session, b: &mut Session, now: Instant, count_a: bool, made: &mut u64) {
    // (What the other side does is counted into a sink.)
    let mut other = 0;
    loop {
        let mut moved = false;
        let (on_a, on_b) = if count_a {
            (&mut *made, &mut other)
        } else {
            (&mut other, &mut *made)
        };
        while let Some(t) = counting(on_a, || a.poll_transmit(now)) {
            moved = true;
            counting(on_b, || b.handle_datagram(now, addr(0), &t.bytes));
            counting(on_a, || a.recycle_transmit(t.bytes));
        }
        while let Some(t) = counting(on_b, || b.poll_transmit(now)) {
            moved = true;
            counting(on_a, || a.handle_datagram(now, addr(1), &t.bytes));
            counting(on_b, || b.recycle_transmit(t.bytes));
        }
        if !moved {
            break;
        }
    }
}

/// Publishes `seqs` (`len` bytes each) on `a` and hands what `a` sends to
/// `b` and `b`'s answers back; returns the allocations `a` made meanwhile
/// (`b`'s are not counted).
fn sender_allocations(
    a: &mut Session,
    b: &mut Session,
    now: Instant,
    seqs: std::ops::RangeInclusive<u64>,
    len: usize,
) -> u64 {
    let mut made = 0;
    let payloads: Vec<(u64, Vec<u8>)> = seqs.map(|q| (q, payload(q, len))).collect();
    let (tag, headers) = (
        tag(),
        payloads
            .iter()
            .map(|(q, _)| header(0, *q))
            .collect::<Vec<_>>(),
    );
    for ((_, p), h) in payloads.iter().zip(&headers) {
        // (Held: what waits for the window goes first, as a runtime
        // takes no record until the session can accept it.)
        while !a.can_accept(&tag) {
            exchange(a, b, now, true, &mut made);
        }
        counting(&mut made, || a.handle_record(now, &tag, h, p)).unwrap();
    }
    counting(&mut made, || a.flush(now, &tag));
    exchange(a, b, now, true, &mut made);
    while b.poll_deliver().is_some() {}
    made
}

/// A sender that gives its transmits back allocates nothing per message
/// once warm: neither for small messages (batches) nor for large ones
/// (fragments): the batch buffers, the large messages' copies and the
/// datagrams its reliable window keeps come from buffers given back or
/// acknowledged.
#[test]
fn a_sender_that_gives_transmits_back_allocates_nothing_per_message() {
    for (len, per_round) in [(100usize, 50u64), (8192, 4), (30_000, 1)] {
        let made = allocations_per_round(len, per_round, 20, sender_allocations);
        // The first rounds fill the pools and grow the queues.
        assert_eq!(
            made[10..],
            [0; 10],
            "{len}-byte messages: allocations per round {made:?}"
        );
    }
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

/// Publishes `seqs` (`len` bytes each) on `a`, hands what `a` sends to
/// `b`, takes `b`'s deliveries and gives their payloads and `b`'s
/// acknowledgements' buffers back to `b`, as a receiving runtime does;
/// returns the allocations `b` made meanwhile (`a`'s are not counted).
fn receiver_allocations(
    a: &mut Session,
    b: &mut Session,
    now: Instant,
    seqs: std::ops::RangeInclusive<u64>,
    len: usize,
) -> u64 {
    let mut made = 0;
    let tag = tag();
    let take = |b: &mut Session, made: &mut u64| {
        while let Some(d) = counting(made, || b.poll_deliver()) {
            counting(made, || b.recycle(d.payload));
        }
    };
    for q in seqs {
        while !a.can_accept(&tag) {
            exchange(a, b, now, false, &mut made);
            take(b, &mut made);
        }
        a.handle_record(now, &tag, &header(0, q), &payload(q, len))
            .unwrap();
    }
    a.flush(now, &tag);
    exchange(a, b, now, false, &mut made);
    take(b, &mut made);
    made
}

/// A receiver whose reader gives each payload back allocates nothing per
/// message once warm: a batch's messages, and a large message built from
/// its fragments in one buffer sized at its first fragment (it grew by
/// doubling, a reallocation and a copy each time, and the tag name of
/// every datagram was decoded into an allocation of its own).
#[test]
fn a_receiver_that_gives_payloads_back_allocates_nothing_per_message() {
    for (len, per_round) in [(100usize, 50u64), (1000, 8), (8192, 4), (30_000, 1)] {
        // (Until the reassembler's memory of completed messages, which
        // grows to a bound, is full.)
        let rounds = 20 + 1100 / per_round as usize;
        let made = allocations_per_round(len, per_round, rounds, receiver_allocations);
        assert_eq!(
            made[rounds - 10..],
            [0; 10],
            "{len}-byte messages: allocations per round {made:?}"
        );
    }
}

/// A record handed in its own buffer (`handle_record_buf`, as a
/// forwarder reads its ring straight into one from `Session::buffer`):
/// a message sent alone is encoded from that buffer, which then goes back
/// to the spare ones; a batched one is copied into its batch and its
/// buffer goes back at once.
#[test]
fn a_record_in_its_own_buffer_is_not_copied_and_its_buffer_comes_back() {
    let now = Instant::now();
    let (mut a, mut b) = pair(now);
    for (len, alone) in [(8192usize, true), (100, false)] {
        let mut buf = a.buffer();
        buf.extend_from_slice(&payload(1, len));
        let at = buf.as_ptr() as usize;
        let seq = if alone { 1 } else { 2 };
        a.handle_record_buf(now, &tag(), &header(0, seq), buf)
            .unwrap();
        if !alone {
            // Copied into the batch: back at once.
            let back = a.buffer();
            assert_eq!(back.as_ptr() as usize, at, "a batched record's buffer");
            a.recycle(back);
        }
        a.flush(now, &tag());
        while let Some(t) = a.poll_transmit(now) {
            b.handle_datagram(now, addr(0), &t.bytes);
        }
        while let Some(t) = b.poll_transmit(now) {
            a.handle_datagram(now, addr(1), &t.bytes);
        }
        let d = b.poll_deliver().unwrap();
        assert_eq!(d.payload, payload(1, len), "{len} bytes");
        if alone {
            // Encoded from it until every datagram was acknowledged.
            let back = a.buffer();
            assert_eq!(back.as_ptr() as usize, at, "a message's own buffer");
        }
    }
}

/// The pieces of a large message go out in the buffers the window keeps
/// for resends (shared, no copy), and a sender that gives them back
/// finds them reused once they are acknowledged; a batch of small
/// messages goes in a buffer of its own (copied: measured faster there,
/// see `send_one`).
#[test]
fn a_large_messages_pieces_share_the_windows_buffers_and_a_batch_is_copied() {
    use tagwire_session::TxBuf;
    let now = Instant::now();
    let config = |i| Config {
        me: node(i),
        datagram: 1400,
        ..Config::default()
    };
    let (mut a, mut b) = (Session::new(config(0)), Session::new(config(1)));
    a.set_routes(now, &tag(), vec![dest(1, Mode::Reliable)]);
    a.handle_record(now, &tag(), &header(0, 1), &payload(1, 8192))
        .unwrap();
    a.flush(now, &tag());
    let mut first = Vec::new();
    while let Some(t) = a.poll_transmit(now) {
        assert!(matches!(t.bytes, TxBuf::Shared(_)), "a piece was copied");
        first.push(t.bytes.as_ptr() as usize);
        b.handle_datagram(now, addr(0), &t.bytes);
        a.recycle_transmit(t.bytes);
    }
    assert!(first.len() >= 6, "{} pieces", first.len());
    // Timers run until the acknowledgement has freed the window: its
    // next pieces are written in the same buffers.
    let mut t = now;
    for _ in 0..20 {
        if a.stream_stats().iter().all(|s| s.unacked == 0) {
            break;
        }
        t = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(t)
            .max(t);
        a.handle_timeout(t);
        b.handle_timeout(t);
        while let Some(x) = a.poll_transmit(t) {
            b.handle_datagram(t, addr(0), &x.bytes);
            a.recycle_transmit(x.bytes);
        }
        while let Some(x) = b.poll_transmit(t) {
            a.handle_datagram(t, addr(1), &x.bytes);
            b.recycle_transmit(x.bytes);
        }
    }
    assert!(
        a.stream_stats().iter().all(|s| s.unacked == 0),
        "never acknowledged"
    );
    let now = t;
    a.handle_record(now, &tag(), &header(0, 2), &payload(2, 8192))
        .unwrap();
    a.flush(now, &tag());
    let mut reused = 0;
    while let Some(t) = a.poll_transmit(now) {
        reused += usize::from(first.contains(&(t.bytes.as_ptr() as usize)));
        a.recycle_transmit(t.bytes);
    }
    assert!(
        reused >= first.len() - 1,
        "{reused} of {} reused",
        first.len()
    );
    // Small messages, batched: a buffer of the transmit's own.
    for seq in 3..=20 {
        a.handle_record(now, &tag(), &header(0, seq), &payload(seq, 100))
            .unwrap();
    }
    a.flush(now, &tag());
    let t = a.poll_transmit(now).unwrap();
    assert!(matches!(t.bytes, TxBuf::Own(_)), "a batch was shared");
}
