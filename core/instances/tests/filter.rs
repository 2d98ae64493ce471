//! The per-instance filter in virtual time: ownership and its fail-over,
//! deadlines per instance, minimum separation keeping the newest, and that
//! every sample is handed out, or counted as held back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use proptest::prelude::*;
use tagwire_instances::{Event, InstanceFilter, Policy, Sample, MAX_INSTANCES};
use tagwire_wire::instance::{InstanceState, Key};

const MS: Duration = Duration::from_millis(1);

fn sample(writer: u8, key: u8, strength: i32) -> Sample<u8> {
    Sample {
        writer,
        key: Some(Key::of(&[key])),
        state: InstanceState::Alive,
        strength,
    }
}

/// What came out, as (item, or `None` for a missed deadline's writer).
fn drain(f: &mut InstanceFilter<u8, u32>) -> Vec<Result<u32, Option<u8>>> {
    std::iter::from_fn(|| f.poll())
        .map(|e| match e {
            Event::Deliver(i) => Ok(i),
            Event::DeadlineMissed { writer, .. } => Err(writer),
        })
        .collect()
}

#[test]
fn the_strongest_publisher_owns_an_instance_until_it_unregisters() {
    let t0 = Instant::now();
    let mut f = InstanceFilter::new(Policy {
        exclusive: true,
        ..Policy::default()
    });
    f.offer(t0, sample(1, 0, 1), 10); // weak first: it owns
    f.offer(t0, sample(2, 0, 5), 20); // stronger: takes over
    f.offer(t0, sample(1, 0, 1), 11); // weak: dropped
    f.offer(t0, sample(2, 0, 5), 21);
    f.offer(t0, sample(3, 0, 5), 30); // as strong: the owner keeps it
    f.offer(t0, sample(1, 1, 1), 100); // another instance: its own owner
    assert_eq!(drain(&mut f), [Ok(10), Ok(20), Ok(21), Ok(100)]);
    assert_eq!(f.counts().not_owner, 2);
    let mut gone = sample(2, 0, 5);
    gone.state = InstanceState::Unregistered;
    f.offer(t0, gone, 29);
    f.offer(t0, sample(1, 0, 1), 12); // the weak one again
    f.offer(t0, sample(2, 0, 5), 22); // and back to the strong
    f.offer(t0, sample(1, 0, 1), 13);
    assert_eq!(drain(&mut f), [Ok(29), Ok(12), Ok(22)]);
}

#[test]
fn an_owner_that_misses_its_deadline_fails_over_to_the_next() {
    let t0 = Instant::now();
    let mut f = InstanceFilter::new(Policy {
        exclusive: true,
        deadline: Some(100 * MS),
        ..Policy::default()
    });
    let mut now = t0;
    for i in 0..5 {
        f.offer(now, sample(2, 0, 9), 20 + i);
        f.offer(now, sample(1, 0, 1), 10 + i);
        now += 50 * MS;
    }
    assert_eq!(drain(&mut f), [Ok(20), Ok(21), Ok(22), Ok(23), Ok(24)]);
    // The strong publisher dies (its last sample at t0 + 200 ms).
    let mut got = Vec::new();
    for i in 5..10 {
        f.offer(now, sample(1, 0, 1), 10 + i);
        got.extend(drain(&mut f));
        now += 50 * MS;
    }
    // t0+250: still the owner's (50 ms since its last); t0+300: past its
    // deadline, reported with it as the owner, and the weak one takes over.
    assert_eq!(got, [Err(Some(2)), Ok(16), Ok(17), Ok(18), Ok(19)]);
    assert_eq!(f.counts().not_owner, 5 + 1);
}

#[test]
fn a_deadline_is_missed_per_instance_once_per_period() {
    let t0 = Instant::now();
    let mut f = InstanceFilter::new(Policy {
        deadline: Some(100 * MS),
        ..Policy::default()
    });
    f.offer(t0, sample(1, 0, 0), 1);
    f.offer(t0, sample(1, 1, 0), 2);
    assert_eq!(f.poll_timeout(), Some(t0 + 100 * MS));
    let mut now = t0;
    let mut missed = 0;
    while now < t0 + 350 * MS {
        now += 10 * MS;
        // Instance 1 keeps its deadline; instance 0 is silent.
        f.offer(now, sample(1, 1, 0), 3);
        missed += drain(&mut f).iter().filter(|e| e.is_err()).count();
    }
    assert_eq!(missed, 3, "at 100, 200 and 300 ms");
    assert_eq!(f.counts().deadlines_missed, 3);
    // A disposed instance has no deadline any more.
    let mut d = sample(1, 1, 0);
    d.state = InstanceState::Disposed;
    f.offer(now, d, 4);
    f.handle_timeout(now + Duration::from_secs(10));
    assert_eq!(
        drain(&mut f).iter().filter(|e| e.is_err()).count(),
        1,
        "instance 0's once, for 400 ms to 10 s (not once per period: once per call)"
    );
}

#[test]
fn minimum_separation_hands_out_the_newest_of_each_interval() {
    let t0 = Instant::now();
    let mut f = InstanceFilter::new(Policy {
        min_separation: Some(50 * MS),
        ..Policy::default()
    });
    let mut got = Vec::new();
    let mut now = t0;
    for i in 0..10u32 {
        f.offer(now, sample(1, 0, 0), i);
        got.extend(drain(&mut f));
        now += 10 * MS;
        f.handle_timeout(now);
        got.extend(drain(&mut f));
    }
    f.handle_timeout(now + Duration::from_secs(1));
    got.extend(drain(&mut f));
    // 0 at once; 4 (newest of 1-4) at 50 ms; 9 (newest of 5-9) at 100 ms.
    assert_eq!(got, [Ok(0), Ok(4), Ok(9)]);
    assert_eq!(f.counts().replaced, 7);
    // A dispose is not held back.
    f.offer(now, sample(1, 0, 0), 20);
    let mut d = sample(1, 0, 0);
    d.state = InstanceState::Disposed;
    f.offer(now + MS, d, 21);
    assert_eq!(drain(&mut f), [Ok(21)]);
}

#[test]
fn instances_past_the_bound_pass_unfiltered_and_are_counted() {
    let t0 = Instant::now();
    let mut f = InstanceFilter::<u8, u32>::new(Policy {
        exclusive: true,
        ..Policy::default()
    });
    for k in 0..MAX_INSTANCES as u32 + 10 {
        let s = Sample {
            writer: 1,
            key: Some(Key::of(&k.to_be_bytes())),
            state: InstanceState::Alive,
            strength: 0,
        };
        f.offer(t0, s, k);
    }
    assert_eq!(drain(&mut f).len(), MAX_INSTANCES + 10);
    assert_eq!(f.counts().untracked, 10);
}

proptest! {
    /// Whatever the samples: each is handed out, or counted as held back,
    /// once everything held is released; and no instance gets two within
    /// one separation (an unregistered one starts over).
    #[test]
    fn every_sample_is_handed_out_or_counted(
        ops in proptest::collection::vec((0u8..3, 0u8..4, -2i32..3, 0u64..30, 0u8..10), 1..200),
        exclusive in any::<bool>(),
    ) {
        let t0 = Instant::now();
        let sep = 20 * MS;
        let mut f = InstanceFilter::new(Policy {
            exclusive,
            deadline: None,
            min_separation: Some(sep),
        });
        let mut now = t0;
        let mut out = Vec::new();
        for (i, (w, k, strength, dt, st)) in ops.iter().enumerate() {
            now += Duration::from_millis(*dt);
            f.handle_timeout(now);
            while let Some(e) = f.poll() { out.push((now, e)); }
            let state = match st { 0 => InstanceState::Disposed, 1 => InstanceState::Unregistered, _ => InstanceState::Alive };
            f.offer(now, Sample { writer: *w, key: Some(Key::of(&[*k])), state, strength: *strength }, (i, *k, state));
            while let Some(e) = f.poll() { out.push((now, e)); }
        }
        f.handle_timeout(now + Duration::from_secs(60));
        while let Some(e) = f.poll() { out.push((now + Duration::from_secs(60), e)); }
        let c = f.counts();
        prop_assert_eq!(out.len() as u64 + c.not_owner + c.replaced, ops.len() as u64);
        let mut last: std::collections::HashMap<u8, Instant> = Default::default();
        for (t, e) in &out {
            match e {
                Event::Deliver((_, k, InstanceState::Alive)) => {
                    if let Some(prev) = last.get(k) {
                        prop_assert!(*t >= *prev + sep, "two within the separation");
                    }
                    last.insert(*k, *t);
                }
                // An unregistered instance starts over.
                Event::Deliver((_, k, InstanceState::Unregistered)) => {
                    last.remove(k);
                }
                _ => {}
            }
        }
    }
}
