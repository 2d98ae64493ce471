//! Two threads ping-pong 256-byte records through two rings, busy-polling:
//! the ring's own round-trip cost, without the client library around it.
//! `cargo run --release -p tagwire-shm --example ring_pingpong`
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};
use tagwire_shm::{ReadOutcome, Ring, RingShape};

fn main() {
    let shape = RingShape {
        slots: std::env::var("SLOTS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(256),
        payload: std::env::var("PAYLOAD")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(65_536),
    };
    let a = Ring::create("ping", shape).unwrap();
    let b = Ring::create("pong", shape).unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    let n = 20_000;
    let mut ca = a2.cursor(64);
    let t = std::thread::spawn(move || {
        let mut buf = Vec::new();
        for _ in 0..n {
            loop {
                if a2.read(&mut ca, &mut buf) == ReadOutcome::Record {
                    break;
                }
                a2.wait(&ca, None, Duration::from_millis(50));
            }
            b2.publish(&[&buf]).unwrap();
        }
    });
    let mut cb = b.cursor(64);
    let payload = vec![1u8; 296];
    let mut buf = Vec::new();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        a.publish(&[&payload]).unwrap();
        loop {
            if b.read(&mut cb, &mut buf) == ReadOutcome::Record {
                break;
            }
            b.wait(&cb, None, Duration::from_millis(50));
        }
        samples.push(t0.elapsed());
    }
    t.join().unwrap();
    samples.sort();
    println!(
        "ring spin ping-pong 296 B: p50 {:?} p99 {:?}",
        samples[n / 2],
        samples[n * 99 / 100]
    );
}
