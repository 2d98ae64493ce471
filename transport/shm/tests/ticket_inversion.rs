//! A real-time forwarder that closes the send ticket while a publisher of
//! lower priority holds it must not keep that publisher off their shared
//! CPU (`Ticket::close` waits by yielding, then sleeping). With a yield
//! loop alone the `SCHED_OTHER` holder never ran again until the closer's
//! patience ran out: the record was taken for abandoned and sent twice,
//! and the publisher's next message waited the whole patience (a 100 Hz
//! stream across hosts delivered messages two periods late).
//!
//! Both threads are pinned to CPU 0 and the closer runs at `SCHED_FIFO`,
//! which needs root or `CAP_SYS_NICE`: without it the test prints
//! `skipped: <reason>` and passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tagwire_shm::{Closed, Ring, RingShape};

fn pin_to_cpu0() {
    let mut set = rustix::thread::CpuSet::new();
    set.set(0);
    rustix::thread::sched_setaffinity(None, &set).unwrap();
}

/// Sets the calling thread's policy to `SCHED_FIFO` at `priority`.
fn set_fifo(priority: i32) -> Result<(), std::io::Error> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: a plain system call on the calling thread with a valid
    // parameter block.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn a_real_time_closer_lets_a_plain_holder_on_its_cpu_finish() {
    // Probe the privilege on a thread of its own (it keeps the policy).
    if let Err(e) = std::thread::spawn(|| set_fifo(1)).join().unwrap() {
        println!("skipped: SCHED_FIFO refused ({e}): run as root or with CAP_SYS_NICE");
        return;
    }
    let ring = Ring::create(
        "ticket-inversion",
        RingShape {
            slots: 8,
            payload: 64,
        },
    )
    .unwrap();
    let t = ring.ticket();
    assert!(t.open(3, 1472, &[[1, 2, 3, 4, 5, 6]]));
    let patience = Duration::from_millis(300);
    let (claimed, on_claimed) = mpsc::channel();
    let (closed, took) = std::thread::scope(|s| {
        // The publisher, at the default policy: it claims, is put off the
        // CPU for 5 ms (its send, preempted), then finishes.
        s.spawn(move || {
            pin_to_cpu0();
            let c = t.claim(3).expect("the offered record");
            claimed.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            drop(c);
        });
        // The forwarder, real-time on the same CPU, closes meanwhile.
        s.spawn(move || {
            pin_to_cpu0();
            on_claimed.recv().unwrap();
            set_fifo(30).unwrap();
            let start = Instant::now();
            let closed = t.close(3, patience);
            (closed, start.elapsed())
        })
        .join()
        .unwrap()
    });
    println!("closed {closed:?} after {took:?}");
    assert_eq!(closed, Closed::Sent, "after {took:?}");
    assert!(took < patience / 4, "the holder waited {took:?}");
}
