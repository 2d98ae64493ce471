//! Large samples in fragments (DATA_FRAG): cutting a serialized sample
//! into numbered fragments, and putting one back together from fragments
//! that come in any order, any number of times, from anyone.

use crate::message::DataFrag;
use crate::types::{EntityId, SequenceNumber};

/// Bytes per fragment tagwire sends (Cyclone DDS's default).
pub const FRAGMENT_SIZE: usize = 1344;
/// The largest sample sent in one DATA; larger ones go in fragments
/// (Cyclone DDS's default: ten fragments).
pub const MAX_UNFRAGMENTED: usize = FRAGMENT_SIZE * 10;
/// Fragments per datagram.
pub const FRAGMENTS_PER_DATAGRAM: usize = 10;
/// The largest sample a reader puts back together (bounds what a hostile
/// writer makes it allocate).
pub const MAX_SAMPLE: usize = 64 << 20;

/// The DATA_FRAG of `writer`'s sample `sn` (`payload`, whole) for
/// `reader` that carries its fragments `first ..` (1-based), `count` of
/// them at most.
pub fn data_frag<'a>(
    reader: EntityId,
    writer: EntityId,
    sn: SequenceNumber,
    payload: &'a [u8],
    first: u32,
    count: usize,
) -> DataFrag<'a> {
    let (fragment_start, fragments, bytes) = fragments(payload, first, count);
    DataFrag {
        reader,
        writer,
        sn,
        fragment_start,
        fragments,
        fragment_size: FRAGMENT_SIZE as u16,
        sample_size: payload.len() as u32,
        inline_qos: None,
        key: false,
        non_standard: false,
        bytes,
    }
}

/// The fragments `first ..` (1-based) of `payload`, `count` of them at
/// most: the first one's number, how many, and their bytes.
fn fragments(payload: &[u8], first: u32, count: usize) -> (u32, u16, &[u8]) {
    let total = payload.len().div_ceil(FRAGMENT_SIZE);
    let first = (first.max(1) as usize).min(total.max(1));
    let n = count.min(total + 1 - first).min(usize::from(u16::MAX));
    let from = (first - 1) * FRAGMENT_SIZE;
    let to = (from + n * FRAGMENT_SIZE).min(payload.len());
    (first as u32, n as u16, &payload[from..to])
}

/// How many fragments a sample of `len` bytes has.
pub fn fragment_count(len: usize) -> u32 {
    len.div_ceil(FRAGMENT_SIZE) as u32
}

/// A sample being put back together.
#[derive(Debug)]
pub struct Reassembly {
    buf: Vec<u8>,
    fragment_size: usize,
    have: Vec<bool>,
    missing: usize,
}

impl Reassembly {
    /// For the sample a DATA_FRAG is part of; `None` when it is larger
    /// than [`MAX_SAMPLE`] or its fragment size is zero.
    pub fn new(f: &DataFrag<'_>) -> Option<Self> {
        let size = f.sample_size as usize;
        let fragment_size = usize::from(f.fragment_size);
        if size > MAX_SAMPLE || fragment_size == 0 {
            return None;
        }
        let n = size.div_ceil(fragment_size);
        Some(Self {
            buf: vec![0; size],
            fragment_size,
            have: vec![false; n],
            missing: n,
        })
    }

    /// Adds the fragments of `f` (ignored when they do not fit the sample
    /// this was made for); returns whether the sample is complete.
    pub fn add(&mut self, f: &DataFrag<'_>) -> bool {
        if usize::from(f.fragment_size) != self.fragment_size
            || f.sample_size as usize != self.buf.len()
        {
            return self.missing == 0;
        }
        let mut at = 0;
        for i in 0..usize::from(f.fragments) {
            let Some(idx) = (f.fragment_start as usize).checked_sub(1).map(|s| s + i) else {
                break;
            };
            if idx >= self.have.len() {
                break;
            }
            let from = idx * self.fragment_size;
            let len = self.fragment_size.min(self.buf.len() - from);
            let Some(bytes) = f.bytes.get(at..at + len) else {
                break;
            };
            at += len;
            if !self.have[idx] {
                self.buf[from..from + len].copy_from_slice(bytes);
                self.have[idx] = true;
                self.missing -= 1;
            }
        }
        self.missing == 0
    }

    /// The fragments still missing, as a NACK_FRAG says them (numbered from
    /// 1; the first 256 from the first missing one).
    pub fn missing_set(&self) -> crate::FragmentNumberSet {
        let first = self.have.iter().position(|h| !h).unwrap_or(self.have.len());
        let mut set = crate::FragmentNumberSet::empty(first as u32 + 1);
        for (off, have) in self.have[first..].iter().take(256).enumerate() {
            if !have {
                set.insert_offset(off as u32);
            }
        }
        set
    }

    /// The whole sample.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(payload: &[u8], first: u32, count: usize) -> DataFrag<'_> {
        let u = EntityId::UNKNOWN;
        data_frag(u, u, SequenceNumber(1), payload, first, count)
    }

    #[test]
    fn a_sample_comes_back_from_its_fragments_in_any_order_and_repeated() {
        let payload: Vec<u8> = (0..30_004u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(fragment_count(payload.len()), 23);
        let mut r = Reassembly::new(&frag(&payload, 1, 10)).unwrap();
        assert!(!r.add(&frag(&payload, 21, 10)));
        assert!(!r.add(&frag(&payload, 21, 10)));
        assert!(!r.add(&frag(&payload, 1, 10)));
        assert!(r.add(&frag(&payload, 11, 10)));
        assert_eq!(r.into_bytes(), payload);
    }

    #[test]
    fn fragments_that_do_not_fit_are_ignored_and_huge_samples_refused() {
        let payload = vec![7u8; 5000];
        let mut r = Reassembly::new(&frag(&payload, 1, 1)).unwrap();
        let mut bad = frag(&payload, 2, 3);
        bad.sample_size = 4000;
        assert!(!r.add(&bad));
        let mut short = frag(&payload, 2, 3);
        short.bytes = &short.bytes[..100];
        assert!(!r.add(&short));
        let mut past = frag(&payload, 1, 4);
        past.fragment_start = 9;
        assert!(!r.add(&past));
        assert!(r.add(&frag(&payload, 1, 4)));
        let mut huge = frag(&payload, 1, 1);
        huge.sample_size = u32::MAX;
        assert!(Reassembly::new(&huge).is_none());
    }
}
