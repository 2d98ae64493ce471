//! Two threads, pinned to CPUs 0 and 1, ping-pong 296-byte records (a
//! 40-byte frame header and 256 bytes) through two rings, busy-polling: the
//! ring's own round-trip cost, without the client library around it. In the
//! same run, the same ping-pong over a bare sequence word and buffer (the
//! floor any shared-memory transport stands on), alternating, 5 times.
//! `cargo run --release -p tagwire-shm --example ring_pingpong`
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tagwire_shm::{ReadOutcome, Ring, RingShape};

const N: usize = 20_000;
const LEN: usize = 296;

fn main() {
    let shape = RingShape {
        slots: env_or("SLOTS", 256),
        payload: env_or("PAYLOAD", 65_536),
    };
    for _ in 0..5 {
        let ring = ring_rtt(shape);
        let raw = raw_rtt();
        println!(
            "296 B p50: ring {ring:?}, bare word {raw:?}, ratio {:.2}",
            ring.as_secs_f64() / raw.as_secs_f64()
        );
    }
}

fn ring_rtt(shape: RingShape) -> Duration {
    let a = Ring::create("ping", shape).unwrap();
    let b = Ring::create("pong", shape).unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    let mut ca = a2.cursor(64);
    let t = std::thread::spawn(move || {
        pin(1);
        let mut buf = Vec::new();
        for _ in 0..N {
            loop {
                if a2.read(&mut ca, &mut buf) == ReadOutcome::Record {
                    break;
                }
                a2.wait(&ca, None, Duration::from_millis(50));
            }
            b2.publish(&[&buf]).unwrap();
        }
    });
    pin(0);
    let mut cb = b.cursor(64);
    let payload = vec![1u8; LEN];
    let mut buf = Vec::new();
    let mut samples = Vec::with_capacity(N);
    for _ in 0..N {
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
    median(samples)
}

/// One direction of the bare ping-pong: a sequence word on its own line and
/// a buffer, written by one side and read by the other.
#[repr(align(128))]
struct Lane {
    seq: AtomicU64,
}

struct Bare {
    lanes: [Lane; 2],
    bufs: [Box<[AtomicU64]>; 2],
}

fn raw_rtt() -> Duration {
    let words = LEN.div_ceil(8);
    let bare = Arc::new(Bare {
        lanes: [Lane { seq: 0.into() }, Lane { seq: 0.into() }],
        bufs: [0, 1].map(|_| (0..words).map(|_| AtomicU64::new(0)).collect()),
    });
    let other = Arc::clone(&bare);
    let t = std::thread::spawn(move || {
        pin(1);
        let mut tmp = vec![0u64; words];
        for i in 1..=N as u64 {
            while other.lanes[0].seq.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            copy_in(&other.bufs[0], &mut tmp);
            copy_out(&tmp, &other.bufs[1]);
            other.lanes[1].seq.store(i, Ordering::Release);
        }
    });
    pin(0);
    let payload = vec![1u64; words];
    let mut back = vec![0u64; words];
    let mut samples = Vec::with_capacity(N);
    for i in 1..=N as u64 {
        let t0 = Instant::now();
        copy_out(&payload, &bare.bufs[0]);
        bare.lanes[0].seq.store(i, Ordering::Release);
        while bare.lanes[1].seq.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        copy_in(&bare.bufs[1], &mut back);
        samples.push(t0.elapsed());
    }
    t.join().unwrap();
    median(samples)
}

fn copy_out(src: &[u64], dst: &[AtomicU64]) {
    for (d, s) in dst.iter().zip(src) {
        d.store(*s, Ordering::Relaxed);
    }
}

fn copy_in(src: &[AtomicU64], dst: &mut [u64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.load(Ordering::Relaxed);
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn env_or(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Pins the calling thread to `cpu`: the two sides on two cores, as `tagwire
/// perf rtt` places them (unpinned, both may share one core and take turns).
fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).unwrap();
}
