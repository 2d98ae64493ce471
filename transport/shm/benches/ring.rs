//! Micro-benchmarks of the ring: publish cost with 0 and 8 readers attached (it
//! must not grow with readers: one copy), and read cost.
#![allow(missing_docs, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tagwire_shm::{ReadOutcome, Ring, RingShape};

fn publish(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_publish");
    for size in [64usize, 256, 4096] {
        for readers in [0usize, 8] {
            let ring = Ring::create(
                "bench",
                RingShape {
                    slots: 256,
                    payload: 8192,
                },
            )
            .expect("ring");
            let _cursors: Vec<_> = (0..readers).map(|_| ring.cursor(64)).collect();
            let payload = vec![7u8; size];
            g.throughput(Throughput::Bytes(size as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("{readers}_readers"), size),
                &size,
                |b, _| b.iter(|| ring.publish(&[&payload]).expect("publish")),
            );
        }
    }
    g.finish();
}

fn read(c: &mut Criterion) {
    let ring = Ring::create(
        "bench",
        RingShape {
            slots: 256,
            payload: 8192,
        },
    )
    .expect("ring");
    let payload = vec![7u8; 256];
    let mut cur = ring.cursor(256);
    let mut buf = Vec::new();
    c.bench_function("ring_publish_then_read_256", |b| {
        b.iter(|| {
            ring.publish(&[&payload]).expect("publish");
            assert_eq!(ring.read(&mut cur, &mut buf), ReadOutcome::Record);
        })
    });
}

criterion_group!(benches, publish, read);
criterion_main!(benches);
