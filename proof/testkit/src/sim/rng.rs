//! The simulator's only source of randomness, and the seed plumbing of
//! property tests over seeds.

use std::time::Duration;

use rand::rngs::ChaCha8Rng;
use rand::{Rng, RngExt, SeedableRng};

/// Environment variable: run only this seed (a failing test prints it).
pub const SEED_VAR: &str = "TAGWIRE_SIM_SEED";
/// Environment variable: how many seeds a property test runs.
pub const SEEDS_VAR: &str = "TAGWIRE_SIM_SEEDS";

/// A seeded generator. ChaCha8 is a named, portable algorithm (the same
/// stream on every platform and `rand` version that ships it), unlike
/// `rand`'s `StdRng`/`SmallRng`, whose algorithm may change: a seed printed
/// today must replay the same run tomorrow.
#[derive(Debug)]
pub struct SimRng(ChaCha8Rng);

impl SimRng {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    /// An independent generator derived from `seed` and a label, so that
    /// drawing more numbers in one part of a scenario (say, the workload)
    /// does not shift the numbers another part (the links) sees.
    pub fn derived(seed: u64, label: &str) -> Self {
        Self::new(derive_seed(seed, label))
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// True with probability `p` (clamped to 0..=1; NaN counts as 0).
    pub fn chance(&mut self, p: f64) -> bool {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        self.0.random_bool(p)
    }

    /// A uniform integer in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        self.0.random_range(lo..=hi)
    }

    /// A uniform `usize` in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range_usize(&mut self, lo: usize, hi: usize) -> usize {
        if hi <= lo {
            return lo;
        }
        self.0.random_range(lo..=hi)
    }

    /// A uniform float in `lo..hi` (`lo` when the range is empty).
    pub fn float(&mut self, lo: f64, hi: f64) -> f64 {
        if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
            return lo;
        }
        self.0.random_range(lo..hi)
    }

    /// A uniform duration in `lo..=hi`, to the nanosecond.
    pub fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (a, b) = (nanos(lo), nanos(hi));
        Duration::from_nanos(self.range(a, b))
    }

    /// Fills `out` with random bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        self.0.fill_bytes(out);
    }
}

/// A seed derived from `seed` and `label` (FNV-1a of the label mixed with
/// splitmix64): stable across runs and platforms.
pub fn derive_seed(seed: u64, label: &str) -> u64 {
    let mut h = fnv1a(FNV_OFFSET, label.as_bytes());
    h ^= seed;
    splitmix64(h)
}

/// FNV-1a 64 over `bytes`, continuing from `h` (start with [`FNV_OFFSET`]).
/// Cheap and deterministic: the trace hash and payload checksums use it.
pub fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A fast 64-bit checksum of `bytes` (FNV-style over 8-byte words, then
/// the tail and the length): for comparing payloads, not for security.
pub fn checksum(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b))
            .wrapping_mul(PRIME)
            .rotate_left(29);
    }
    h = fnv1a(h, words.remainder());
    fnv1a(h, &(bytes.len() as u64).to_le_bytes())
}

/// The FNV-1a 64 offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Nanoseconds of `d`, saturating at `u64::MAX` (584 years).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The seeds a property test runs: only `$TAGWIRE_SIM_SEED` when set,
/// otherwise `0 .. $TAGWIRE_SIM_SEEDS` (default `default_count`). An unset
/// or unparsable variable falls back to the default.
pub fn seeds(default_count: u64) -> Vec<u64> {
    if let Some(seed) = env_u64(SEED_VAR) {
        return vec![seed];
    }
    let count = env_u64(SEEDS_VAR).unwrap_or(default_count);
    (0..count).collect()
}

fn env_u64(var: &str) -> Option<u64> {
    std::env::var(var).ok()?.trim().parse().ok()
}

/// Runs `scenario` once per seed of [`seeds`]. A seed whose run panics or
/// returns an error is reported on stderr as `seed = N` with the command
/// that replays it; after all seeds ran, the call panics listing every
/// failing seed (so one run shows them all). `test` is the test's name, as
/// `cargo test` filters it.
///
/// Returns the number of seeds run.
pub fn for_each_seed(
    test: &str,
    default_count: u64,
    mut scenario: impl FnMut(u64) -> Result<(), String>,
) -> usize {
    let seeds = seeds(default_count);
    let mut failed = Vec::new();
    for &seed in &seeds {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(seed)));
        let why = match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(why)) => why,
            Err(panic) => panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panicked".to_owned()),
        };
        eprintln!(
            "{test}: seed = {seed} failed: {why}\n  replay: {SEED_VAR}={seed} cargo test -p tagwire-testkit {test} -- --nocapture"
        );
        failed.push(seed);
    }
    // A test support function: failing the calling test is its job.
    if !failed.is_empty() {
        panic!(
            "{test}: {} of {} seeds failed: {failed:?} (see `seed = N` lines above)",
            failed.len(),
            seeds.len()
        );
    }
    seeds.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut c = SimRng::new(8);
        assert_ne!(xs, (0..8).map(|_| c.next_u64()).collect::<Vec<_>>());
        assert_ne!(derive_seed(1, "links"), derive_seed(1, "workload"));
        assert_eq!(a.range(5, 5), 5);
        assert_eq!(a.range(9, 3), 9);
        assert!(!a.chance(0.0) && a.chance(1.0) && !a.chance(f64::NAN));
    }
}
