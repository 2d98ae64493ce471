//! A gate that lets its writers run only a few records ahead
//! ([`Gate::advance_within`]).

use std::time::{Duration, Instant};

use super::super::tests::{reopen, shape};
use super::*;

#[test]
fn a_gate_within_a_lead_keeps_the_writer_that_close_and_wakes_it_for_half_of_it() {
    // 64 slots (a refill step of 16), a lead of 4.
    let w = Ring::create("t", shape(64, 8)).unwrap();
    let r = reopen(&w);
    let gate = r.attach_gate(0).unwrap();
    // The first lap fills the ring: the gate never moves back.
    fill(&w, 64);
    assert!(w.publish_gated(&[b"x"], Duration::ZERO).is_err());
    // Read out the first lap: the writer may go 4 past what was read (the
    // gate sits `slots - lead` behind it).
    gate.advance_within(64, 4);
    assert_eq!(gate.position(), 4);
    for _ in 0..4 {
        w.publish_gated(&[b"y"], Duration::ZERO).unwrap();
    }
    assert!(
        w.publish_gated(&[b"z"], Duration::ZERO).is_err(),
        "more than the lead ahead"
    );
    // A writer that waits, waits for half the lead, not for a refill step
    // of 16 (more than the lead would ever free).
    let writer = std::thread::spawn(move || {
        let start = Instant::now();
        w.publish_gated(&[b"w"], Duration::from_secs(10)).unwrap();
        (w, start.elapsed())
    });
    until_a_writer_sleeps(&r);
    gate.advance_within(65, 4);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !writer.is_finished(),
        "woken for one slot of the two it waits for"
    );
    gate.advance_within(66, 4);
    let (w, waited) = writer.join().unwrap();
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(w.head_index(), 69);
    assert_eq!(gate.position(), 6);
    // A lead of the whole ring is a plain gate again, and writers wait for
    // a quarter of the ring.
    gate.advance_within(69, 64);
    assert_eq!(gate.position(), 69);
    assert_eq!(r.refill_step(), 16);
}

#[test]
fn a_shorter_lead_wakes_the_writer_waiting_for_a_step_of_the_longer_one() {
    // 64 slots, a lead of 16: a waiting writer waits for 8 slots of room.
    let w = Ring::create("shorter", shape(64, 8)).unwrap();
    let r = reopen(&w);
    let gate = r.attach_gate(0).unwrap();
    fill(&w, 64);
    gate.advance_within(64, 16);
    for _ in 0..16 {
        w.publish_gated(&[b"y"], Duration::ZERO).unwrap();
    }
    let writer = std::thread::spawn(move || {
        w.publish_gated(&[b"w"], Duration::from_secs(10)).unwrap();
        w
    });
    until_a_writer_sleeps(&r);
    // Everything written is read, but the lead is now 2: the gate stops 2
    // short of the 8 the writer waits for. The step's change rings the
    // bell, and the writer settles for the room the new step gives.
    let rung = r.gate_bell().load(Ordering::SeqCst);
    gate.advance_within(80, 2);
    assert!(r.gate_bell().load(Ordering::SeqCst) > rung, "no bell");
    let w = writer.join().unwrap();
    assert_eq!(w.head_index(), 81);
    assert_eq!(r.refill_step(), 1);
}

#[test]
fn a_gate_held_for_a_process_holds_writers_until_taken_over_or_released() {
    let r = Ring::create("held", shape(4, 64)).unwrap();
    let me = std::process::id();
    let idx = r.hold_lossless_gate_for(0, me).unwrap();
    for _ in 0..4 {
        r.publish_gated(&[b"x"], Duration::ZERO).unwrap();
    }
    assert!(
        matches!(
            r.publish_gated(&[b"x"], Duration::from_millis(10)),
            Err(RingError::Full { .. })
        ),
        "the held gate holds writers back before anyone took it over"
    );
    assert!(!r.release_held_gate(idx, me + 1), "held for another pid");
    let g = r.adopt_gate(idx, me).unwrap();
    assert!(r.adopt_gate(idx, me).is_err(), "taken over once");
    assert!(
        !r.release_held_gate(idx, me),
        "no longer the holder's to free"
    );
    g.advance(4);
    r.publish_gated(&[b"x"], Duration::ZERO).unwrap();
    drop(g);
    // Released before being taken over: writers go on, the gate is free.
    let idx = r.hold_lossless_gate_for(r.head_index(), me).unwrap();
    assert!(r.release_held_gate(idx, me));
    assert!(r.adopt_gate(idx, me).is_err());
    for _ in 0..8 {
        r.publish_gated(&[b"x"], Duration::ZERO).unwrap();
    }
}

#[test]
fn a_gate_held_for_a_process_that_died_is_reaped() {
    let r = Ring::create("held-dead", shape(4, 64)).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    r.hold_lossless_gate_for(0, dead).unwrap();
    for _ in 0..12 {
        r.publish_gated(&[b"x"], Duration::from_millis(200))
            .unwrap();
    }
}

#[test]
fn the_holder_of_held_back_records_sleeps_until_a_lossless_reader_makes_room() {
    let r = Ring::create("held-room", shape(8, 64)).unwrap();
    let gate = r.attach_lossless_gate(0).unwrap();
    for _ in 0..8 {
        assert!(r.publish_lossless_quietly(&[b"x"]).unwrap().is_some());
    }
    assert_eq!(r.publish_lossless_quietly(&[b"x"]).unwrap(), None);
    assert!(!r.wait_lossless_room(Duration::from_millis(5)));
    // (Started before the reader: it moves 30 ms after this at the
    // earliest, whenever this thread runs again.)
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            gate.advance(4);
        });
        assert!(r.wait_lossless_room(Duration::from_secs(10)));
        let took = start.elapsed();
        // Woken by the reader's bell, not before it read.
        assert!(took >= Duration::from_millis(25), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    });
    assert!(r.publish_lossless_quietly(&[b"x"]).unwrap().is_some());
}

#[test]
fn a_writer_waiting_for_the_slowest_reader_wakes_when_it_moves() {
    let r = Ring::create("lowest-moves", shape(8, 64)).unwrap();
    assert!(
        r.wait_lowest_gate_moves(Duration::ZERO),
        "no gate: nothing to wait for"
    );
    let slow = r.attach_lossless_gate(3).unwrap();
    let _fast = r.attach_gate(6).unwrap();
    assert!(!r.wait_lowest_gate_moves(Duration::from_millis(5)));
    // (Started before the reader: it moves 30 ms after this at the
    // earliest, whenever this thread runs again.)
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            slow.advance(4);
        });
        assert!(r.wait_lowest_gate_moves(Duration::from_secs(10)));
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(25), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    });
}

#[test]
fn a_lead_of_nothing_holds_the_writer_until_the_lead_opens_at_the_same_position() {
    let w = Ring::create("t", shape(64, 8)).unwrap();
    let r = reopen(&w);
    let gate = r.attach_gate(0).unwrap();
    fill(&w, 64);
    // Everything read, and a lead of 0: nothing more may be written.
    gate.advance_within(64, 0);
    assert_eq!(gate.position(), 0);
    assert!(w.publish_gated(&[b"x"], Duration::ZERO).is_err());
    // A writer waiting is woken when the lead opens to one, though the
    // holder read nothing more (its own backlog shrank).
    let writer = std::thread::spawn(move || {
        w.publish_gated(&[b"w"], Duration::from_secs(10)).unwrap();
        w
    });
    until_a_writer_sleeps(&r);
    gate.advance_within(64, 1);
    let w = writer.join().unwrap();
    assert_eq!(w.head_index(), 65);
    assert!(
        w.publish_gated(&[b"z"], Duration::ZERO).is_err(),
        "one ahead, not two"
    );
}

/// Publishes `n` records through the gate, none refused.
fn fill(w: &Ring, n: u64) {
    for i in 0..n {
        w.publish_gated(&[&i.to_le_bytes()], Duration::ZERO)
            .unwrap();
    }
}

/// Returns once a gated writer sleeps at `r`'s gate (10 s at most).
fn until_a_writer_sleeps(r: &Ring) {
    let start = Instant::now();
    while r.gate_waiters().load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1));
    }
}
