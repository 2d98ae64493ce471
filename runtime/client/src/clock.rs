//! The send timestamp: wall-clock nanoseconds since the Unix epoch, cheaply.
//!
//! Every message carries the time it was sent, so `SystemTime::now` sat on
//! the send path: 35 ns a call on this project's VMs, a tenth of a local
//! send. Where the kernel itself keeps time with the CPU's time-stamp
//! counter (clock source `tsc`: invariant and synchronised across CPUs),
//! [`SendClock`] reads the counter instead (about 10 ns) and turns ticks
//! into wall time from an anchor, a (counter, wall clock) pair taken every
//! 32nd of the process's age, at most every [`ANCHOR_SPAN`]. The tick
//! length comes from the monotonic clock since the process's first reading,
//! so a wall-clock step moves the next anchor but never the rate, and the
//! error between anchors stays far below a microsecond. Elsewhere, and in
//! the process's first [`MIN_BASELINE`], it is `SystemTime::now`.
//!
//! [`SendClock`] is written here rather than taken from a crate: `minstant`
//! calibrates with a 20 ms busy loop in a constructor of every process that
//! links it (the daemon and each CLI call included) and keeps one anchor for
//! ever; `quanta` gives monotonic time only.
//!
//! Also [`coarse_us`], the monotonic clock to the kernel's tick, for
//! timings that need no better.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest an anchor serves before the next is taken.
pub(crate) const ANCHOR_SPAN: Duration = Duration::from_millis(50);
/// The tick length is measured from the process's first reading; until it
/// is this old, the wall clock is read directly.
const MIN_BASELINE: Duration = Duration::from_millis(2);
/// A (counter, monotonic clock) pair whose two counter readings lie further
/// apart than this (a preemption between them) is not used.
const MAX_PAIR_TICKS: u64 = 20_000;

/// The monotonic clock in µs, read coarsely (to the kernel's tick, 1-4
/// ms: enough to tell `direct::KEEPER_AFTER`, 20 ms, apart): a direct
/// subscriber reads it each time it leaves `receive`, where the precise
/// clock cost a small message's path a few percent of its time.
pub(crate) fn coarse_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000)
        .saturating_add(t.tv_nsec as u64 / 1000)
}

/// Wall-clock time now, in nanoseconds since the Unix epoch (0 before it).
pub(crate) fn system_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The process's first (counter, monotonic clock) pair: the baseline every
/// tick length is measured over, so it grows more exact as the process ages.
static BASELINE: OnceLock<Option<(u64, Instant)>> = OnceLock::new();

fn baseline() -> Option<(u64, Instant)> {
    *BASELINE.get_or_init(|| {
        // A preemption between the readings spoils a pair: try a few, so
        // that one unlucky moment does not cost the process its fast clock.
        (0..8).find_map(|_| {
            let ticks = read_counter()?;
            let mono = Instant::now();
            let after = read_counter()?;
            (after.wrapping_sub(ticks) < MAX_PAIR_TICKS).then_some((ticks, mono))
        })
    })
}

/// Where one anchor's extrapolation starts and how far it may go.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    ticks: u64,
    wall_ns: u64,
    ns_per_tick: f64,
    span_ticks: u64,
}

/// A send-path clock; one per publisher (no sharing, no locks).
#[derive(Debug)]
pub(crate) struct SendClock {
    anchor: Option<Anchor>,
    /// False where the counter cannot serve (no `tsc` clock source, or no
    /// baseline): then every reading is `SystemTime::now`, and only that.
    counter: bool,
}

impl SendClock {
    /// A clock; starts the process's baseline if this is the first.
    pub(crate) fn new() -> Self {
        Self {
            anchor: None,
            counter: baseline().is_some(),
        }
    }

    /// Wall-clock nanoseconds since the Unix epoch.
    pub(crate) fn now_ns(&mut self) -> u64 {
        let Some(ticks) = read_counter().filter(|_| self.counter) else {
            return system_now_ns();
        };
        if let Some(a) = self.anchor {
            let since = ticks.wrapping_sub(a.ticks);
            if since < a.span_ticks {
                return a.wall_ns + (since as f64 * a.ns_per_tick) as u64;
            }
        }
        self.reanchor(ticks)
    }

    /// Takes a new anchor at `ticks` (once the baseline is old enough to
    /// give the tick length); returns the wall-clock time.
    fn reanchor(&mut self, ticks: u64) -> u64 {
        let wall_ns = system_now_ns();
        let Some((base_ticks, base_mono)) = baseline() else {
            self.counter = false;
            return wall_ns;
        };
        let age = base_mono.elapsed();
        let after = read_counter().unwrap_or(u64::MAX);
        if age < MIN_BASELINE || after.wrapping_sub(ticks) >= MAX_PAIR_TICKS || ticks <= base_ticks
        {
            return wall_ns;
        }
        let ns_per_tick = age.as_nanos() as f64 / (ticks - base_ticks) as f64;
        // The tick length's error grows with the distance from the anchor:
        // a span of a 32nd of the baseline keeps it far below a microsecond.
        let span = (age / 32).min(ANCHOR_SPAN);
        self.anchor = Some(Anchor {
            ticks,
            wall_ns,
            ns_per_tick,
            span_ticks: (span.as_nanos() as f64 / ns_per_tick) as u64,
        });
        wall_ns
    }
}

/// The CPU's time-stamp counter, where the kernel keeps time with it.
fn read_counter() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        static USABLE: OnceLock<bool> = OnceLock::new();
        let usable = *USABLE.get_or_init(|| {
            std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .is_ok_and(|s| s.trim() == "tsc")
        });
        if usable {
            // SAFETY: RDTSC exists on every x86_64 CPU and has no preconditions.
            #[allow(unused_unsafe)]
            return Some(unsafe { core::arch::x86_64::_rdtsc() });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_timestamps_follow_the_wall_clock_across_anchors() {
        let mut c = SendClock::new();
        let start = Instant::now();
        let mut checked = 0u32;
        // The uncalibrated start, then anchors of growing spans.
        while start.elapsed() < ANCHOR_SPAN * 4 {
            let before = system_now_ns();
            let t = c.now_ns();
            let after = system_now_ns();
            // A preemption between the reads widens the window, never breaks
            // it; the slack is the rate's error over one span, generously.
            let slack = 20_000;
            assert!(
                t + slack >= before && t <= after + slack,
                "send clock {t} outside [{before}, {after}] by more than {slack} ns"
            );
            checked += 1;
        }
        assert!(checked > 1000, "only {checked} samples");
        if read_counter().is_some() {
            assert!(c.anchor.is_some(), "never calibrated");
        }
    }
}
