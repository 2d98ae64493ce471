//! Raw operating-system baselines: the floors a middleware is measured against.
//!
//! Each function runs a ping-pong between **two threads of the calling
//! process** (not two processes) and returns one [`Duration`] per measured
//! round trip, after `warmup` unmeasured round trips:
//!
//! * [`raw_shm_futex_rtt`] (`"raw-futex"`): two payload buffers in memory
//!   shared by the threads, each with a `u32` sequence word; the sender copies
//!   the payload in, bumps the word and `FUTEX_WAKE`s it, the receiver sleeps
//!   in `FUTEX_WAIT` on the word. Shared (non-private) futexes are used, the
//!   kind a cross-process shared-memory transport needs. The floor for a
//!   *blocking* receive.
//! * [`raw_shm_spin_rtt`] (`"raw-spin"`): the same with the receiver
//!   busy-polling the word instead of sleeping. After [`SPIN_BEFORE_YIELD`]
//!   polls without news it calls `sched_yield`, so that two spinners pinned
//!   to one core (e.g. under `taskset -c 0`) make progress instead of
//!   burning whole time slices. The floor for same-host latency.
//! * [`raw_udp_rtt`] (`"raw-udp"`): two connected `UdpSocket`s on
//!   `127.0.0.1` with blocking `recv`. Only loopback addresses are used.
//! * [`raw_udp_throughput`]: one datagram per message, sender thread as fast
//!   as it can, messages per second counted at the receiver.
//!
//! One clock read per round trip: the sample is the time between the end of
//! the previous round trip and the end of this one, so it includes the
//! sender's payload copy and the receiver's copy-back, as a middleware round
//! trip would.
//!
//! The threads inherit the caller's CPU affinity; the `_with` variants take a
//! [`RawOpts`] to pin the ping and pong threads to given CPUs (use the same
//! pinning for the system under test). A round trip that makes no progress
//! for [`STALL_TIMEOUT`] aborts with an error instead of hanging.

use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use rustix::thread::futex;

mod udp;

pub use udp::{
    raw_udp_rtt, raw_udp_rtt_with, raw_udp_throughput, udp_fanout_rtt, udp_gso_throughput,
    udp_pingpong, udp_relay_pingpong, udp_throughput,
};

/// Polls of the sequence word before a spinning waiter yields the CPU once.
pub const SPIN_BEFORE_YIELD: u32 = 64;

/// A wait that sees no progress for this long fails the measurement.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Thread placement (and, for the fan-out, policies) for the raw baselines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawOpts {
    /// `(ping_cpu, pong_cpu)`: pin the two threads to these CPUs. `None`
    /// leaves them to the scheduler (within the process's affinity).
    pub cpus: Option<(usize, usize)>,
    /// The fan-out's sender and receivers at `SCHED_FIFO`, so related
    /// (`tagwire perf fanout --sender-priority`); `None`: the default policy.
    pub priority: Option<crate::sender_priority::SenderPriority>,
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> anyhow::Result<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        bail!("cpu {cpu} out of range");
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).with_context(|| format!("pinning to cpu {cpu}"))
}

#[repr(align(128))]
struct Padded<T>(T);

/// A payload buffer handed back and forth; see the SAFETY notes at the uses.
struct Buf(UnsafeCell<Box<[u8]>>);

// SAFETY: access to the buffer is serialised by the sequence-word protocol:
// only the side that currently owns a buffer (the writer before its Release
// store of the sequence number, the reader after its Acquire load of it)
// touches it, and ownership returns only after the peer has finished.
unsafe impl Sync for Buf {}

struct Shared {
    /// Sequence number of the last ping written into `a`.
    a_seq: Padded<AtomicU32>,
    /// Sequence number of the last pong written into `b`.
    b_seq: Padded<AtomicU32>,
    stop: AtomicBool,
    a: Buf,
    b: Buf,
}

#[derive(Clone, Copy)]
enum Wait {
    Futex,
    Spin,
}

impl Shared {
    fn new(size: usize) -> Shared {
        Shared {
            a_seq: Padded(AtomicU32::new(0)),
            b_seq: Padded(AtomicU32::new(0)),
            stop: AtomicBool::new(false),
            a: Buf(UnsafeCell::new(vec![0u8; size].into_boxed_slice())),
            b: Buf(UnsafeCell::new(vec![0u8; size].into_boxed_slice())),
        }
    }

    /// Waits until `word == seq` (the peer moves it one step a round and
    /// waits for us before the next, so reaching `seq` is equality). Errors
    /// if `stop` is raised or nothing happens for [`STALL_TIMEOUT`].
    fn wait_for(&self, word: &AtomicU32, seq: u32, how: Wait) -> anyhow::Result<()> {
        wait_reach(word, seq, &self.stop, how).map(|_| ())
    }
}

/// Stores `seq` in `word` (Release) and wakes its sleepers (see [`wake`]).
fn publish(word: &AtomicU32, seq: u32, how: Wait, sleepers: u32) {
    word.store(seq, Ordering::Release);
    wake(word, how, sleepers);
}

/// With futex waits, wakes up to `sleepers` threads sleeping on `word`.
fn wake(word: &AtomicU32, how: Wait, sleepers: u32) {
    if let Wait::Futex = how {
        // Non-private: the flavour a cross-process transport must use.
        // A failed wake is harmless: the waiter re-checks on timeout.
        let _ = futex::wake(word, futex::Flags::empty(), sleepers);
    }
}

fn shm_pong(sh: &Shared, total: usize, how: Wait) -> anyhow::Result<()> {
    for i in 0..total {
        let seq = (i as u32).wrapping_add(1);
        sh.wait_for(&sh.a_seq.0, seq, how)?;
        // SAFETY: after observing a_seq == seq (Acquire) the ping side has
        // finished writing `a` and will not touch it before it sees
        // b_seq == seq; it is waiting for that and is not reading `b`, so
        // this thread has exclusive access to both buffers until the
        // Release store below.
        unsafe {
            let a = &*sh.a.0.get();
            let b = &mut *sh.b.0.get();
            b.copy_from_slice(a);
        }
        publish(&sh.b_seq.0, seq, how, 1);
    }
    Ok(())
}

fn shm_ping(
    sh: &Shared,
    size: usize,
    iters: usize,
    warmup: usize,
    how: Wait,
) -> anyhow::Result<Vec<Duration>> {
    let mut laps = Laps::new(iters, warmup);
    let mut local = vec![0u8; size];
    let mut back = vec![0u8; size];
    for i in 0..warmup + iters {
        let seq = (i as u32).wrapping_add(1);
        let marker = i as u8;
        if let Some(first) = local.first_mut() {
            *first = marker;
        }
        // SAFETY: the pong side reads `a` only between observing a_seq == seq
        // and storing b_seq == seq; the previous round (seq - 1) completed
        // before we got here, so nobody else touches `a` now.
        unsafe { (*sh.a.0.get()).copy_from_slice(&local) };
        publish(&sh.a_seq.0, seq, how, 1);
        sh.wait_for(&sh.b_seq.0, seq, how)?;
        // SAFETY: after observing b_seq == seq (Acquire) the pong side has
        // finished writing `b` and waits for seq + 1 before touching it.
        unsafe { back.copy_from_slice(&*sh.b.0.get()) };
        laps.lap();
        if back.first().is_some_and(|&b| b != marker) {
            bail!("payload corrupted in round trip {i}");
        }
    }
    Ok(laps.samples)
}

/// A ping thread's round-trip samples: one clock read per round trip, each
/// sample the time since the previous one, the first `warmup` not kept.
struct Laps {
    samples: Vec<Duration>,
    prev: Instant,
    warmup: usize,
    seen: usize,
}

impl Laps {
    fn new(iters: usize, warmup: usize) -> Laps {
        Laps {
            samples: Vec::with_capacity(iters),
            prev: Instant::now(),
            warmup,
            seen: 0,
        }
    }

    /// Ends a round trip.
    fn lap(&mut self) {
        let now = Instant::now();
        if self.seen >= self.warmup {
            self.samples.push(now - self.prev);
        }
        self.seen += 1;
        self.prev = now;
    }
}

fn spawn_pinned<T: Send + 'static>(
    name: &str,
    cpu: Option<usize>,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<thread::JoinHandle<anyhow::Result<T>>> {
    thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if let Some(cpu) = cpu {
                pin_current_thread(cpu)?;
            }
            f()
        })
        .with_context(|| format!("spawning thread {name}"))
}

fn join<T>(h: thread::JoinHandle<anyhow::Result<T>>) -> anyhow::Result<T> {
    h.join().map_err(|_| anyhow!("benchmark thread panicked"))?
}

fn shm_rtt(
    size: usize,
    iters: usize,
    warmup: usize,
    opts: &RawOpts,
    how: Wait,
) -> anyhow::Result<Vec<Duration>> {
    let sh = Arc::new(Shared::new(size));
    let total = warmup + iters;
    let (ping_cpu, pong_cpu) = opts.cpus.unzip();
    let pong = {
        let sh = Arc::clone(&sh);
        spawn_pinned("raw-pong", pong_cpu, move || {
            let r = shm_pong(&sh, total, how);
            if r.is_err() {
                sh.stop.store(true, Ordering::Relaxed);
            }
            r
        })?
    };
    let ping = {
        let sh2 = Arc::clone(&sh);
        spawn_pinned("raw-ping", ping_cpu, move || {
            let r = shm_ping(&sh2, size, iters, warmup, how);
            if r.is_err() {
                sh2.stop.store(true, Ordering::Relaxed);
            }
            r
        })
    };
    let ping = match ping {
        Ok(h) => join(h),
        Err(e) => {
            sh.stop.store(true, Ordering::Relaxed);
            Err(e)
        }
    };
    let pong = join(pong);
    let samples = ping?;
    pong?;
    Ok(samples)
}

/// `"raw-futex"`: shared-memory ping-pong with `FUTEX_WAIT`/`FUTEX_WAKE`,
/// two threads, no pinning. Returns `iters` round-trip times.
pub fn raw_shm_futex_rtt(
    size: usize,
    iters: usize,
    warmup: usize,
) -> anyhow::Result<Vec<Duration>> {
    raw_shm_futex_rtt_with(size, iters, warmup, &RawOpts::default())
}

/// [`raw_shm_futex_rtt`] with thread placement.
pub fn raw_shm_futex_rtt_with(
    size: usize,
    iters: usize,
    warmup: usize,
    opts: &RawOpts,
) -> anyhow::Result<Vec<Duration>> {
    shm_rtt(size, iters, warmup, opts, Wait::Futex)
}

/// `"raw-spin"`: shared-memory ping-pong with busy-polling receivers
/// (yielding every [`SPIN_BEFORE_YIELD`] polls), two threads, no pinning.
pub fn raw_shm_spin_rtt(size: usize, iters: usize, warmup: usize) -> anyhow::Result<Vec<Duration>> {
    raw_shm_spin_rtt_with(size, iters, warmup, &RawOpts::default())
}

/// [`raw_shm_spin_rtt`] with thread placement.
pub fn raw_shm_spin_rtt_with(
    size: usize,
    iters: usize,
    warmup: usize,
    opts: &RawOpts,
) -> anyhow::Result<Vec<Duration>> {
    shm_rtt(size, iters, warmup, opts, Wait::Spin)
}

/// The fan-out baseline's shared state: one ping, any number of readers.
struct Fan {
    /// Sequence number of the last ping written into `ping`.
    seq: Padded<AtomicU32>,
    /// Acknowledgements: a running count (every receiver acks) or the last
    /// sequence number acknowledged (only the last receiver acks).
    acks: Padded<AtomicU32>,
    stop: AtomicBool,
    /// The ping, in atomic words: receivers that do not ack may still be
    /// copying one ping when the next is written (they then skip ahead), so
    /// the words are atomics rather than a buffer with a hand-over protocol.
    ping: Box<[AtomicU64]>,
}

impl Fan {
    /// A fan-out of a `size`-byte ping (in whole words).
    fn new(size: usize) -> Arc<Fan> {
        Arc::new(Fan {
            seq: Padded(AtomicU32::new(0)),
            acks: Padded(AtomicU32::new(0)),
            stop: AtomicBool::new(false),
            ping: (0..size.div_ceil(8)).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn fail<T>(&self, r: anyhow::Result<T>) -> anyhow::Result<T> {
        if r.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        r
    }

    /// The sender's samples, once the sender and every other thread of the
    /// fan-out ended (on a failure the others see `stop` or run into their
    /// read timeout).
    fn collect(
        &self,
        sender: anyhow::Result<thread::JoinHandle<anyhow::Result<Vec<Duration>>>>,
        others: Vec<thread::JoinHandle<anyhow::Result<()>>>,
    ) -> anyhow::Result<Vec<Duration>> {
        let samples = self.fail(sender).and_then(join);
        for h in others {
            join(h)?;
        }
        samples
    }
}

/// Waits until `word` reaches `target` (in wrapping order), then returns its
/// value. Errors if `stop` is raised or nothing happens for
/// [`STALL_TIMEOUT`].
fn wait_reach(word: &AtomicU32, target: u32, stop: &AtomicBool, how: Wait) -> anyhow::Result<u32> {
    let mut polls = 0u32;
    let mut since: Option<Instant> = None;
    loop {
        let v = word.load(Ordering::Acquire);
        if v.wrapping_sub(target) < 1 << 31 {
            return Ok(v);
        }
        match how {
            Wait::Spin => {
                polls += 1;
                if polls < SPIN_BEFORE_YIELD {
                    spin_loop();
                    continue;
                }
                polls = 0;
                thread::yield_now();
            }
            Wait::Futex => {
                let timeout = futex::Timespec {
                    tv_sec: 0,
                    tv_nsec: 50_000_000,
                };
                // EAGAIN (word already changed), EINTR and ETIMEDOUT all
                // just mean "look again".
                let _ = futex::wait(word, futex::Flags::empty(), v, Some(&timeout));
            }
        }
        if stop.load(Ordering::Relaxed) {
            bail!("peer stopped");
        }
        let start = *since.get_or_insert_with(Instant::now);
        if start.elapsed() > STALL_TIMEOUT {
            stop.store(true, Ordering::Relaxed);
            bail!("no progress for {STALL_TIMEOUT:?} waiting for sequence {target}");
        }
    }
}

/// One fan-out receiver: copies every ping it sees (skipping ahead if it
/// fell behind) and, if it has an `ack`, acknowledges it with that.
fn fan_receiver(
    fan: &Fan,
    total: u32,
    mut ack: Option<&mut dyn FnMut(u32) -> anyhow::Result<()>>,
    how: Wait,
) -> anyhow::Result<()> {
    let mut local = vec![0u64; fan.ping.len()];
    let mut next = 1u32;
    while next <= total {
        let seq = wait_reach(&fan.seq.0, next, &fan.stop, how)?;
        for (d, w) in local.iter_mut().zip(fan.ping.iter()) {
            *d = w.load(Ordering::Relaxed);
        }
        // The sender waits for our ack before it writes again: an acking
        // receiver must see exactly the ping it acknowledges.
        if ack.is_some() && local.iter().any(|&w| w != u64::from(seq)) {
            bail!("ping {seq} corrupted");
        }
        std::hint::black_box(&local);
        if let Some(ack) = ack.as_mut() {
            ack(seq)?;
        }
        next = seq.wrapping_add(1);
    }
    Ok(())
}

fn fanout_rtt(
    size: usize,
    receivers: usize,
    all_ack: bool,
    iters: usize,
    warmup: usize,
    opts: &RawOpts,
    how: Wait,
) -> anyhow::Result<Vec<Duration>> {
    if receivers == 0 {
        bail!("at least one receiver");
    }
    let total = u32::try_from(warmup + iters).context("too many round trips")?;
    let fan = Fan::new(size);
    let (ping_cpu, pong_cpu) = opts.cpus.unzip();
    let policy = |sched: tagwire::Sched| -> anyhow::Result<()> {
        tagwire::set_thread_sched(sched).context("--sender-priority runs the floor at SCHED_FIFO")
    };
    let (sender_sched, receiver_sched) = opts
        .priority
        .map(|p| {
            (
                p.sender(),
                crate::sender_priority::SenderPriority::receivers(),
            )
        })
        .unzip();
    let mut handles = Vec::with_capacity(receivers);
    for i in 0..receivers {
        let acking = all_ack || i + 1 == receivers;
        let f = Arc::clone(&fan);
        let h = spawn_pinned(&format!("raw-fan-{i}"), pong_cpu, move || {
            receiver_sched.map(policy).transpose()?;
            let acks = &f.acks.0;
            // Every receiver acking counts; the last one alone names the ping.
            let mut answer = |seq: u32| {
                if all_ack {
                    acks.fetch_add(1, Ordering::Release);
                    wake(acks, how, 1);
                } else {
                    publish(acks, seq, how, 1);
                }
                Ok(())
            };
            let answer = acking.then_some(&mut answer as &mut dyn FnMut(u32) -> _);
            f.fail(fan_receiver(&f, total, answer, how))
        });
        handles.push(fan.fail(h)?);
    }
    let f = Arc::clone(&fan);
    let sender = spawn_pinned("raw-fan-ping", ping_cpu, move || {
        sender_sched.map(policy).transpose()?;
        let mut laps = Laps::new(iters, warmup);
        let per_round = if all_ack { receivers as u32 } else { 1 };
        for seq in 1..=total {
            for w in f.ping.iter() {
                w.store(u64::from(seq), Ordering::Relaxed);
            }
            publish(&f.seq.0, seq, how, i32::MAX as u32);
            let target = if all_ack {
                seq.wrapping_mul(per_round)
            } else {
                seq
            };
            f.fail(wait_reach(&f.acks.0, target, &f.stop, how))?;
            laps.lap();
        }
        Ok(laps.samples)
    });
    let samples = fan.collect(sender, handles)?;
    let want = if all_ack {
        total.wrapping_mul(receivers as u32)
    } else {
        total
    };
    let got = fan.acks.0.load(Ordering::Acquire);
    if got != want {
        bail!("expected {want} acknowledgements in all, counted {got}");
    }
    Ok(samples)
}

/// The fan-out floor (`"raw-futex"` / `"raw-spin"` in `tagwire perf
/// fanout`): one sender thread writes a `size`-byte ping into shared
/// memory, bumps a sequence word and wakes every sleeper with one
/// `FUTEX_WAKE` (or, `spin`, lets them poll it); `receivers` threads copy
/// it out, and every one of them (`all_ack`) or only the last started
/// acknowledges on a second word the sender waits on. Receivers that do not
/// acknowledge skip pings they fell behind on. Placement: the sender on the
/// first CPU of `opts`, every receiver on the second, as the benchmark
/// places tagwire's receiver processes.
pub fn raw_fanout_rtt(
    size: usize,
    receivers: usize,
    all_ack: bool,
    spin: bool,
    (iters, warmup): (usize, usize),
    opts: &RawOpts,
) -> anyhow::Result<Vec<Duration>> {
    let how = if spin { Wait::Spin } else { Wait::Futex };
    fanout_rtt(size, receivers, all_ack, iters, warmup, opts, how)
}

#[cfg(test)]
mod tests {
    use super::udp::loopback_pair;
    use super::*;
    use crate::stats::Summary;

    fn check(name: &str, v: &[Duration], iters: usize) {
        assert_eq!(v.len(), iters);
        let s = Summary::from_durations(v).expect("samples");
        println!("{name}: p50 {:.2} µs p99 {:.2} µs", s.p50_us, s.p99_us);
        assert!(s.p50_us > 0.0 && s.p50_us.is_finite());
    }

    #[test]
    fn futex_rtt() {
        check(
            "raw-futex 256",
            &raw_shm_futex_rtt(256, 2000, 200).expect("futex"),
            2000,
        );
        check(
            "raw-futex 0",
            &raw_shm_futex_rtt(0, 100, 0).expect("futex"),
            100,
        );
    }

    #[test]
    fn spin_rtt() {
        check(
            "raw-spin 256",
            &raw_shm_spin_rtt(256, 20_000, 1000).expect("spin"),
            20_000,
        );
    }

    #[test]
    fn fanout_rtt_both_acks_and_waits() {
        let opts = RawOpts::default();
        for spin in [false, true] {
            for all in [false, true] {
                let v = raw_fanout_rtt(256, 3, all, spin, (300, 20), &opts).expect("fan-out");
                check(&format!("raw fan-out spin={spin} all={all}"), &v, 300);
            }
        }
        assert!(raw_fanout_rtt(256, 0, true, false, (1, 0), &opts).is_err());
    }

    #[test]
    fn udp_fanout_rtt_both_acks_over_loopback() {
        let opts = RawOpts::default();
        for all in [false, true] {
            let (a, b) = loopback_pair().expect("sockets");
            let v = udp_fanout_rtt(a, b, 256, 3, all, (300, 20), &opts).expect("fan-out");
            check(&format!("udp fan-out all={all}"), &v, 300);
        }
        // A 1-byte ping still carries the round number (4 bytes).
        let (a, b) = loopback_pair().expect("sockets");
        let v = udp_fanout_rtt(a, b, 1, 2, true, (50, 5), &opts).expect("tiny fan-out");
        check("udp fan-out 1 B", &v, 50);
        let (a, b) = loopback_pair().expect("sockets");
        assert!(udp_fanout_rtt(a, b, 256, 0, true, (1, 0), &opts).is_err());
    }

    #[test]
    fn spin_rtt_same_core_makes_progress() {
        let opts = RawOpts {
            cpus: Some((0, 0)),
            ..RawOpts::default()
        };
        let v = raw_shm_spin_rtt_with(64, 200, 10, &opts).expect("spin same core");
        check("raw-spin same core", &v, 200);
    }

    #[test]
    fn udp_rtt() {
        check(
            "raw-udp 256",
            &raw_udp_rtt(256, 2000, 200).expect("udp"),
            2000,
        );
        assert!(raw_udp_rtt(MAX_UDP_PAYLOAD + 1, 1, 0).is_err());
    }

    #[test]
    fn udp_throughput() {
        let r = raw_udp_throughput(256, Duration::from_millis(300)).expect("udp tput");
        println!("raw-udp throughput 256 B: {r:.0} msg/s");
        assert!(r > 0.0 && r.is_finite());
    }
}
