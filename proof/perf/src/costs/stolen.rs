//! `stolen`: the CPU time the platform takes from the most urgent thread
//! of a CPU, which no task set models: interrupts, the kernel's deferred
//! work, the hypervisor's steal, kernel threads above every application.
//!
//! A thread at the highest `SCHED_FIFO` priority, pinned to the CPU, reads
//! the clock in a loop for [`BURSTS`] bursts of [`BURST`] (short enough
//! that the kernel's real-time throttling, 950 ms a second, never stops
//! it); every gap between two readings longer than [`GAP`] is time taken
//! from it. Per window length `w` (100 µs, 1 ms, 10 ms, 100 ms), the time
//! taken in each disjoint window of that length within a burst is one
//! sample: the record `stolen` of size `w` in µs. `tagwire analyze` takes
//! the mean over the window as the platform's share of the CPU; the
//! maxima show the platform's stalls (on this VM, once 6.3 ms of a 10 ms
//! window, under load).

use std::time::{Duration, Instant};

use super::{record, CostRecord, Where};

/// One burst of reading the clock.
pub const BURST: Duration = Duration::from_millis(100);
/// Bursts per CPU.
pub const BURSTS: usize = 10;
/// The pause after each burst (the CPU is given back).
const PAUSE: Duration = Duration::from_millis(20);
/// A gap between two clock readings longer than this was taken away (a
/// reading costs tens of nanoseconds).
pub const GAP: Duration = Duration::from_micros(1);
/// The window lengths, µs.
pub const WINDOWS_US: [u64; 4] = [100, 1_000, 10_000, 100_000];

/// The `stolen` records of `cpu`, read by a thread pinned there at
/// `SCHED_FIFO` 99. `Ok(None)` when that policy is not permitted (the
/// records would count the application's own threads as the platform's).
pub fn measure(cpu: usize) -> anyhow::Result<Option<Vec<CostRecord>>> {
    std::thread::scope(|s| {
        s.spawn(|| -> anyhow::Result<Option<Vec<CostRecord>>> {
            crate::raw::pin_current_thread(cpu)?;
            if tagwire::set_thread_sched(tagwire::Sched::Fifo(99)).is_err() {
                return Ok(None);
            }
            let bursts: Vec<Vec<(u64, u64)>> = (0..BURSTS)
                .map(|_| {
                    let gaps = burst(BURST);
                    std::thread::sleep(PAUSE);
                    gaps
                })
                .collect();
            let mut out = Vec::new();
            for w in WINDOWS_US {
                let samples = windows(&bursts, BURST, w * 1_000);
                let mut r = record("stolen", w as usize, Where::Local, samples)?;
                r.cpu = Some(cpu);
                out.push(r);
            }
            Ok(Some(out))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the stolen-time reader on cpu {cpu} panicked"))?
    })
}

/// Reads the clock for `length`: the gaps longer than [`GAP`], as (ns
/// from the start to the gap's start, its length in ns).
fn burst(length: Duration) -> Vec<(u64, u64)> {
    let mut gaps = Vec::with_capacity(4096);
    let start = Instant::now();
    let mut last = start;
    loop {
        let now = Instant::now();
        let gap = now.duration_since(last);
        if gap > GAP {
            gaps.push((ns(last.duration_since(start)), ns(gap)));
        }
        last = now;
        if now.duration_since(start) >= length {
            return gaps;
        }
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The time taken in each disjoint window of `window` ns of each burst
/// (`length` long; a gap that straddles two windows counts in both, its
/// share in each), µs.
fn windows(bursts: &[Vec<(u64, u64)>], length: Duration, window: u64) -> Vec<f64> {
    let per_burst = (ns(length) / window.max(1)).max(1) as usize;
    let mut out = Vec::with_capacity(bursts.len() * per_burst);
    for gaps in bursts {
        let mut taken = vec![0u64; per_burst];
        for &(at, len) in gaps {
            // Split the gap over the windows it covers.
            let (mut from, end) = (at, at.saturating_add(len));
            while from < end {
                let i = (from / window) as usize;
                let Some(slot) = taken.get_mut(i) else {
                    break;
                };
                let edge = (i as u64 + 1) * window;
                let part = end.min(edge) - from;
                *slot += part;
                from += part;
            }
        }
        out.extend(taken.iter().map(|t| *t as f64 / 1e3));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_split_over_the_windows_they_cover() {
        let ms = 1_000_000;
        // Two bursts of 3 ms, windows of 1 ms: a 0.5 ms gap at 0.2 ms; a
        // 1 ms gap from 1.8 ms (0.2 in the second window, 0.8 in the
        // third); nothing in the second burst.
        let bursts = vec![vec![(ms / 5, ms / 2), (18 * ms / 10, ms)], vec![]];
        let w = windows(&bursts, Duration::from_millis(3), ms);
        assert_eq!(w, vec![500.0, 200.0, 800.0, 0.0, 0.0, 0.0]);
        // One window per burst, and a gap past the burst's end is cut.
        let w = windows(&[vec![(2 * ms, 5 * ms)]], Duration::from_millis(3), 3 * ms);
        assert_eq!(w, vec![1000.0]);
    }

    #[test]
    fn a_burst_reads_the_clock_for_its_length() {
        let t0 = Instant::now();
        let gaps = burst(Duration::from_millis(5));
        assert!(t0.elapsed() >= Duration::from_millis(5));
        assert!(gaps.iter().all(|(at, len)| *at < 6_000_000 && *len > 1_000));
    }
}
