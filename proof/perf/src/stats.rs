//! Summary statistics for latency and throughput samples.
//!
//! Latencies are summarised per run with [`Summary`] (nearest-rank
//! percentiles over the sorted samples, in microseconds). Because the
//! benchmark machine's speed drifts by 2-3x over minutes, every system is
//! measured several times, interleaved with the others, and the runs are
//! folded with [`Repeated`] (latency) or [`RepeatedRate`] (throughput):
//! the median over the repetitions is the reported figure and the minimum
//! and maximum give the spread.
//!
//! Non-finite samples (NaN, ±∞) are ignored; an input with no finite
//! sample yields `None` rather than a summary full of NaN.

use std::time::Duration;

/// One repetition's result: p50 and p99 in µs.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// Median round trip, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
}

/// Distribution summary of one run's samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median (nearest-rank 50th percentile).
    pub p50_us: f64,
    /// Nearest-rank 99th percentile.
    pub p99_us: f64,
    /// Smallest sample.
    pub min_us: f64,
    /// Largest sample.
    pub max_us: f64,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Number of (finite) samples summarised.
    pub n: usize,
}

impl Summary {
    /// Summarises durations (converted to microseconds).
    ///
    /// Returns `None` for an empty slice.
    pub fn from_durations(samples: &[Duration]) -> Option<Summary> {
        let us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        Self::from_sorted_owned(us)
    }

    /// Summarises samples already expressed in microseconds.
    ///
    /// Non-finite values are dropped; returns `None` if nothing remains.
    pub fn from_us(samples: &[f64]) -> Option<Summary> {
        Self::from_sorted_owned(samples.to_vec())
    }

    fn from_sorted_owned(mut v: Vec<f64>) -> Option<Summary> {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean_us = v.iter().sum::<f64>() / n as f64;
        Some(Summary {
            p50_us: percentile_sorted(&v, 50.0)?,
            p99_us: percentile_sorted(&v, 99.0)?,
            min_us: v[0],
            max_us: v[n - 1],
            mean_us,
            n,
        })
    }
}

/// Nearest-rank percentile of an ascending-sorted slice.
///
/// The rank is `ceil(p / 100 * n)`, clamped to `1..=n`; `p` is clamped to
/// `0..=100`. Returns `None` for an empty slice or a NaN `p`.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || p.is_nan() {
        return None;
    }
    let n = sorted.len();
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    let idx = rank.clamp(1, n) - 1;
    Some(sorted[idx])
}

/// Median, minimum and maximum of `values` (zeros where none is finite
/// for the median; ±infinity bounds for an empty slice).
pub fn spread(values: &[f64]) -> [f64; 3] {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    [median(values).unwrap_or(0.0), lo, hi]
}

/// Median of the finite values (mean of the two middle values for an even
/// count). Returns `None` if there is no finite value.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|x| x.is_finite())
        .fold(None, |acc, x| match acc {
            None => Some((x, x)),
            Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
        })
}

/// How far a replay kept the relative timing of a recording: for each
/// stream (by index) the times things happened (`actual`, ns) against
/// the times recorded for them (`expected`, ns, the same count), the
/// differences less their median (a replay starts at another moment),
/// as absolute errors: p50, p99 (the same nearest rank as
/// [`percentile_sorted`]) and the largest. `None` when the streams'
/// lengths differ or there is nothing to compare.
pub fn relative_timing_errors(expected: &[Vec<u64>], actual: &[Vec<u64>]) -> Option<[Duration; 3]> {
    if expected.len() != actual.len() {
        return None;
    }
    let mut offsets = Vec::new();
    for (e, a) in expected.iter().zip(actual) {
        if e.len() != a.len() {
            return None;
        }
        offsets.extend(
            e.iter()
                .zip(a)
                .map(|(e, a)| i128::from(*a) - i128::from(*e)),
        );
    }
    let mut sorted = offsets.clone();
    sorted.sort_unstable();
    let median = *sorted.get(sorted.len() / 2)?;
    let mut errors: Vec<u64> = offsets
        .iter()
        .map(|o| u64::try_from((o - median).unsigned_abs()).unwrap_or(u64::MAX))
        .collect();
    errors.sort_unstable();
    let rank = |p: f64| {
        let r = ((p / 100.0) * errors.len() as f64).ceil() as usize;
        Duration::from_nanos(errors[r.clamp(1, errors.len()) - 1])
    };
    Some([rank(50.0), rank(99.0), rank(100.0)])
}

/// Latency over several repetitions of the same measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Repeated {
    /// Median over repetitions of each repetition's p50.
    pub median_p50_us: f64,
    /// Smallest per-repetition p50.
    pub min_p50_us: f64,
    /// Largest per-repetition p50.
    pub max_p50_us: f64,
    /// Median over repetitions of each repetition's p99.
    pub median_p99_us: f64,
    /// Number of repetitions folded in.
    pub reps: usize,
}

impl Repeated {
    /// Folds per-repetition summaries. Returns `None` for an empty slice.
    pub fn from_summaries(runs: &[Summary]) -> Option<Repeated> {
        let pairs: Vec<(f64, f64)> = runs.iter().map(|s| (s.p50_us, s.p99_us)).collect();
        Self::from_p50_p99(&pairs)
    }

    /// Folds `(p50, p99)` pairs in microseconds, e.g. from an external peer
    /// that reports only percentiles. Returns `None` for an empty slice.
    pub fn from_p50_p99(runs: &[(f64, f64)]) -> Option<Repeated> {
        let p50: Vec<f64> = runs.iter().map(|r| r.0).collect();
        let p99: Vec<f64> = runs.iter().map(|r| r.1).collect();
        let (min_p50_us, max_p50_us) = min_max(p50.iter().copied())?;
        Some(Repeated {
            median_p50_us: median(&p50)?,
            min_p50_us,
            max_p50_us,
            median_p99_us: median(&p99)?,
            reps: runs.len(),
        })
    }
}

/// Throughput (messages per second) over several repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepeatedRate {
    /// Median msgs/s over the repetitions.
    pub median_msgs_per_s: f64,
    /// Smallest msgs/s of a repetition.
    pub min_msgs_per_s: f64,
    /// Largest msgs/s of a repetition.
    pub max_msgs_per_s: f64,
    /// Number of repetitions folded in.
    pub reps: usize,
}

impl RepeatedRate {
    /// Folds per-repetition rates (msgs/s). Non-finite values are ignored;
    /// returns `None` if no finite value remains.
    pub fn from_rates(rates: &[f64]) -> Option<RepeatedRate> {
        let (min_msgs_per_s, max_msgs_per_s) = min_max(rates.iter().copied())?;
        Some(RepeatedRate {
            median_msgs_per_s: median(rates)?,
            min_msgs_per_s,
            max_msgs_per_s,
            reps: rates.iter().filter(|x| x.is_finite()).count(),
        })
    }

    /// Median bandwidth in MB/s (10^6 bytes) for messages of `size` bytes.
    pub fn median_mb_per_s(&self, size: u64) -> f64 {
        self.median_msgs_per_s * size as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_errors_take_the_common_offset_off() {
        // A replay 5 s later, one event of 100 late by 2 ms, one by 7 ms.
        let expected: Vec<Vec<u64>> = vec![
            (0..60).map(|i| i * 1_000_000).collect(),
            (0..40).map(|i| i * 1_500_000).collect(),
        ];
        let mut actual: Vec<Vec<u64>> = expected
            .iter()
            .map(|s| s.iter().map(|t| t + 5_000_000_000).collect())
            .collect();
        actual[0][10] += 2_000_000;
        actual[1][3] += 7_000_000;
        let [p50, p99, max] = relative_timing_errors(&expected, &actual).unwrap();
        assert_eq!(p50, Duration::ZERO);
        assert_eq!(p99, Duration::from_millis(2));
        assert_eq!(max, Duration::from_millis(7));
        // Early counts as much as late.
        actual[1][3] -= 14_000_000;
        let [_, _, max] = relative_timing_errors(&expected, &actual).unwrap();
        assert_eq!(max, Duration::from_millis(7));
        // A replay that ignores the timing (all at once) is far off.
        let flat: Vec<Vec<u64>> = expected.iter().map(|s| vec![0; s.len()]).collect();
        let [_, p99, _] = relative_timing_errors(&expected, &flat).unwrap();
        assert!(p99 >= Duration::from_millis(20), "{p99:?}");
        assert!(relative_timing_errors(&expected, &flat[..1]).is_none());
        assert!(relative_timing_errors(&[vec![1]], &[vec![]]).is_none());
        assert!(relative_timing_errors(&[], &[]).is_none());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_sorted(&v, 50.0), Some(50.0));
        assert_eq!(percentile_sorted(&v, 99.0), Some(99.0));
        assert_eq!(percentile_sorted(&v, 100.0), Some(100.0));
        assert_eq!(percentile_sorted(&v, 0.0), Some(1.0));
        assert_eq!(percentile_sorted(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile_sorted(&[], 50.0), None);
        // n = 10: rank(50) = 5, rank(99) = ceil(9.9) = 10.
        let w: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile_sorted(&w, 50.0), Some(5.0));
        assert_eq!(percentile_sorted(&w, 99.0), Some(10.0));
    }

    #[test]
    fn summary_from_unsorted_durations() {
        let d: Vec<Duration> = [5u64, 1, 4, 2, 3]
            .iter()
            .map(|&x| Duration::from_micros(x))
            .collect();
        let s = Summary::from_durations(&d).expect("non-empty");
        assert_eq!(s.n, 5);
        assert_eq!(s.min_us, 1.0);
        assert_eq!(s.max_us, 5.0);
        assert_eq!(s.p50_us, 3.0);
        assert_eq!(s.p99_us, 5.0);
        assert!((s.mean_us - 3.0).abs() < 1e-9);
        assert!(Summary::from_durations(&[]).is_none());
    }

    #[test]
    fn summary_ignores_non_finite() {
        let s = Summary::from_us(&[f64::NAN, 2.0, f64::INFINITY, 4.0]).expect("finite left");
        assert_eq!(s.n, 2);
        assert_eq!(s.p50_us, 2.0);
        assert_eq!(s.max_us, 4.0);
        assert!(Summary::from_us(&[f64::NAN]).is_none());
    }

    #[test]
    fn median_even_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn repeated_latency() {
        let mk = |p50, p99| Summary {
            p50_us: p50,
            p99_us: p99,
            min_us: 0.0,
            max_us: 0.0,
            mean_us: 0.0,
            n: 1,
        };
        let r = Repeated::from_summaries(&[mk(5.0, 9.0), mk(4.0, 20.0), mk(10.0, 11.0)])
            .expect("non-empty");
        assert_eq!(r.median_p50_us, 5.0);
        assert_eq!(r.min_p50_us, 4.0);
        assert_eq!(r.max_p50_us, 10.0);
        assert_eq!(r.median_p99_us, 11.0);
        assert_eq!(r.reps, 3);
        assert!(Repeated::from_summaries(&[]).is_none());
        let q = Repeated::from_p50_p99(&[(1.0, 2.0), (3.0, 4.0)]).expect("non-empty");
        assert_eq!(q.median_p50_us, 2.0);
        assert_eq!(q.median_p99_us, 3.0);
    }

    #[test]
    fn repeated_rate() {
        let r = RepeatedRate::from_rates(&[1e6, 3e6, 2e6]).expect("non-empty");
        assert_eq!(r.median_msgs_per_s, 2e6);
        assert_eq!(r.min_msgs_per_s, 1e6);
        assert_eq!(r.max_msgs_per_s, 3e6);
        assert_eq!(r.reps, 3);
        assert!((r.median_mb_per_s(256) - 512.0).abs() < 1e-9);
        assert!(RepeatedRate::from_rates(&[]).is_none());
    }
}
