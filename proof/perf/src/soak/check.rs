//! What a soak's publishers write and its subscribers check, pure.
//!
//! A payload is `run ‖ counter ‖ len ‖ sum ‖ filler`: `run` names one life
//! of one publisher (random at its start), `counter` numbers its messages
//! from 0 (a message is counted once its send succeeded), `len` is the
//! whole payload's length and `sum` a checksum of the rest, and the
//! filler is a pattern of `run` and `counter`. A subscriber's [`Checker`]
//! follows each publisher life: a message that does not check is corrupt;
//! one at or below the last counter seen of its life is a duplicate or
//! out of order; a jump counts the messages between as missing. Missing
//! messages must be covered by the losses the subscription reported
//! (`Error::Overflowed`): the rest were lost in silence.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Bytes of a payload's header (and its least length).
pub const HEADER: usize = 24;

/// A publisher life's message `counter`, `len` bytes long (at least
/// [`HEADER`]).
pub fn payload(run: u64, counter: u64, len: usize) -> Vec<u8> {
    let len = len.max(HEADER);
    let mut p = Vec::with_capacity(len);
    p.extend_from_slice(&run.to_le_bytes());
    p.extend_from_slice(&counter.to_le_bytes());
    p.extend_from_slice(&(len as u32).to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    let seed = run ^ counter.rotate_left(17);
    p.extend((0..len - HEADER).map(|i| filler(seed, i)));
    let sum = checksum(&p[..16], &p[HEADER..]);
    p[20..24].copy_from_slice(&sum.to_le_bytes());
    p
}

fn filler(seed: u64, i: usize) -> u8 {
    (seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(i as u64 * 0x2545_f491)
        >> 29) as u8
}

/// FNV-1a over the header's first 16 bytes and the filler.
fn checksum(head: &[u8], rest: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in head.iter().chain(rest) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// A payload's `(run, counter)`, or `None` if it does not check.
pub fn parse(p: &[u8]) -> Option<(u64, u64)> {
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(p.get(at..at + 8)?.try_into().ok()?))
    };
    let half = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?))
    };
    let (run, counter, len, sum) = (word(0)?, word(8)?, half(16)?, half(20)?);
    if len as usize != p.len() || checksum(&p[..16], &p[HEADER..]) != sum {
        return None;
    }
    Some((run, counter))
}

/// A subscriber's counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Messages taken.
    pub got: u64,
    /// Messages that did not check.
    pub corrupt: u64,
    /// Messages whose counter was the last one's of their life again.
    pub duplicate: u64,
    /// Messages whose counter was below the last one's of their life.
    pub reordered: u64,
    /// Messages skipped between two of one life.
    pub missing: u64,
    /// Losses the subscription reported.
    pub reported: u64,
    /// Publisher lives heard.
    pub lives: u64,
}

impl Tally {
    /// Missing messages the reported losses do not cover.
    pub fn silent(&self) -> u64 {
        self.missing.saturating_sub(self.reported)
    }

    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &Tally) {
        self.got += o.got;
        self.corrupt += o.corrupt;
        self.duplicate += o.duplicate;
        self.reordered += o.reordered;
        self.missing += o.missing;
        self.reported += o.reported;
        self.lives += o.lives;
    }
}

/// Where a message came from, for the words of an anomaly: its
/// publisher's sequence number and whether the subscription held its
/// stream on its own socket (direct delivery) when it took it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// The publisher's sequence number (tagwire's, not the payload's).
    pub seq: u64,
    /// Taken while the subscription held the stream (direct delivery).
    pub direct: bool,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let via = if self.direct { "direct" } else { "ring" };
        write!(f, "seq {}, {via}", self.seq)
    }
}

/// Follows each publisher life a subscriber hears.
#[derive(Debug, Default)]
pub struct Checker {
    /// Each life's last counter and where that message came from.
    last: HashMap<u64, (u64, At)>,
    tally: Tally,
    /// The first few messages that broke an invariant, said in words.
    anomalies: Vec<String>,
    /// The first few jumps that more than the losses reported just before
    /// them: where a loss in silence is to be looked for (the report may
    /// also have come earlier, for another life).
    clues: Vec<String>,
    /// Losses reported since the last message.
    lost_since: u64,
}

/// Anomalies a checker keeps the words of.
const ANOMALIES: usize = 8;

impl Checker {
    /// A message taken, which came `at`.
    pub fn on_message(&mut self, p: &[u8], at: At) {
        self.tally.got += 1;
        let lost = std::mem::take(&mut self.lost_since);
        let Some((run, counter)) = parse(p) else {
            self.tally.corrupt += 1;
            self.note(format!("a corrupt message of {} bytes ({at})", p.len()));
            return;
        };
        let Some(last) = self.last.get_mut(&run) else {
            // A life's first message here: what it sent before this
            // subscriber heard it is not this subscriber's.
            self.last.insert(run, (counter, at));
            self.tally.lives += 1;
            return;
        };
        let (before, was) = *last;
        if counter > before {
            let skipped = counter - before - 1;
            self.tally.missing += skipped;
            *last = (counter, at);
            if skipped > lost && self.clues.len() < ANOMALIES {
                self.clues.push(format!(
                    "life {run:x}: {skipped} missing between {before} ({was}) and {counter} ({at}), {lost} reported just before"
                ));
            }
            return;
        }
        let what = if counter == before {
            self.tally.duplicate += 1;
            "again"
        } else {
            self.tally.reordered += 1;
            "out of order"
        };
        self.note(format!(
            "life {run:x}: message {counter} ({at}) {what} after {before} ({was}; {lost} reported lost just before)"
        ));
    }

    fn note(&mut self, what: String) {
        if self.anomalies.len() < ANOMALIES {
            self.anomalies.push(what);
        }
    }

    /// The first few messages that broke an invariant, in words.
    pub fn anomalies(&self) -> &[String] {
        &self.anomalies
    }

    /// The first few jumps larger than the losses reported just before
    /// them, in words.
    pub fn clues(&self) -> &[String] {
        &self.clues
    }

    /// The subscription reported `n` messages lost.
    pub fn on_lost(&mut self, n: u64) {
        self.tally.reported += n;
        self.lost_since += n;
    }

    /// The counts so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_check_and_any_changed_byte_does_not() {
        for len in [0, 1, HEADER, 25, 1000] {
            let p = payload(7, 42, len);
            assert_eq!(p.len(), len.max(HEADER));
            assert_eq!(parse(&p), Some((7, 42)));
            for i in 0..p.len() {
                let mut q = p.clone();
                q[i] ^= 0x10;
                assert_eq!(parse(&q), None, "len {len}, byte {i}");
            }
            assert_eq!(parse(&p[..p.len() - 1]), None);
        }
        assert_eq!(parse(b"short"), None);
    }

    #[test]
    fn a_checker_counts_gaps_repeats_and_reorders_per_life() {
        let mut c = Checker::default();
        let at = |seq| At { seq, direct: false };
        for n in [5, 6, 9, 9, 8, 10] {
            c.on_message(&payload(1, n, 40), at(n + 1));
        }
        // Another life starts anywhere; a corrupt message is counted.
        c.on_message(&payload(2, 100, 30), at(101));
        c.on_message(&payload(2, 101, 30), at(102));
        let mut bad = payload(2, 102, 30);
        bad[29] ^= 1;
        c.on_message(&bad, at(103));
        let t = c.tally();
        assert_eq!(
            (
                t.got,
                t.lives,
                t.missing,
                t.duplicate,
                t.reordered,
                t.corrupt
            ),
            (9, 2, 2, 1, 1, 1)
        );
        assert_eq!(t.silent(), 2);
        assert_eq!(
            c.anomalies()[1],
            "life 1: message 8 (seq 9, ring) out of order after 9 (seq 10, ring; 0 reported lost just before)"
        );
        assert_eq!(c.clues().len(), 1, "7 and 8 skipped, nothing reported");
        c.on_lost(2);
        assert_eq!(c.tally().silent(), 0);
        // A jump the report just before covers is no clue.
        c.on_lost(3);
        c.on_message(
            &payload(2, 105, 30),
            At {
                seq: 106,
                direct: true,
            },
        );
        assert_eq!(c.clues().len(), 1);
        c.on_message(
            &payload(2, 107, 30),
            At {
                seq: 108,
                direct: true,
            },
        );
        assert_eq!(
            c.clues()[1],
            "life 2: 1 missing between 105 (seq 106, direct) and 107 (seq 108, direct), 0 reported just before"
        );
    }
}
