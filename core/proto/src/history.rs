//! The pull buffer of the push-pull model: a tag's last messages, bounded
//! by a count and a byte budget, queried by count, sequence number or time.
//!
//! Pure: the daemon feeds it the messages it reads from a tag's ring and
//! answers pulls from it.

use std::collections::VecDeque;

use tagwire_wire::control::HistoryQuery;
use tagwire_wire::frame::FrameHeader;

/// A bounded history of one tag.
#[derive(Debug, Clone)]
pub struct History {
    depth: usize,
    max_bytes: usize,
    items: VecDeque<(FrameHeader, Vec<u8>)>,
    bytes: usize,
    /// Messages dropped because one alone exceeded the byte budget.
    too_large: u64,
}

impl History {
    /// Keeps at most `depth` messages and `max_bytes` bytes of payload.
    pub fn new(depth: usize, max_bytes: usize) -> Self {
        Self {
            depth,
            max_bytes,
            items: VecDeque::new(),
            bytes: 0,
            too_large: 0,
        }
    }

    /// Changes the bounds, dropping the oldest messages beyond them.
    pub fn set_limits(&mut self, depth: usize, max_bytes: usize) {
        self.depth = depth;
        self.max_bytes = max_bytes;
        self.trim(None);
    }

    /// Messages kept.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Payload bytes kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Messages not kept because each alone exceeded the byte budget.
    pub fn too_large(&self) -> u64 {
        self.too_large
    }

    /// Appends a message, dropping the oldest as needed.
    pub fn push(&mut self, header: FrameHeader, payload: &[u8]) {
        if payload.len() > self.max_bytes || self.depth == 0 {
            self.too_large += u64::from(self.depth > 0);
            return;
        }
        self.trim(Some(payload.len()));
        self.bytes += payload.len();
        self.items.push_back((header, payload.to_vec()));
    }

    /// Drops the oldest until the bounds hold with one more message of
    /// `incoming` bytes, if any.
    fn trim(&mut self, incoming: Option<usize>) {
        let room = usize::from(incoming.is_some());
        let extra = incoming.unwrap_or(0);
        while !self.items.is_empty()
            && (self.items.len() + room > self.depth || self.bytes + extra > self.max_bytes)
        {
            if let Some((_, p)) = self.items.pop_front() {
                self.bytes -= p.len();
            }
        }
    }

    /// The messages `query` selects, oldest first.
    pub fn query(&self, query: HistoryQuery) -> impl Iterator<Item = (&FrameHeader, &[u8])> + '_ {
        let skip = match query {
            HistoryQuery::Last(n) => self.items.len().saturating_sub(n as usize),
            _ => 0,
        };
        self.items
            .iter()
            .skip(skip)
            .filter(move |(h, _)| match query {
                HistoryQuery::Last(_) => true,
                HistoryQuery::Since(s) => h.seq.0 >= s,
                HistoryQuery::Between { from_ns, to_ns } => {
                    (from_ns..=to_ns).contains(&h.timestamp_ns)
                }
            })
            .map(|(h, p)| (h, p.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum};

    fn header(seq: u64) -> FrameHeader {
        FrameHeader {
            flags: 0,
            sender: SenderInfo {
                pid: Pid(7),
                node: NodeAddr::LOCALHOST,
            },
            stream: 0,
            seq: SeqNum(seq),
            timestamp_ns: 1_000 * seq,
        }
    }

    fn seqs<'a>(it: impl Iterator<Item = (&'a FrameHeader, &'a [u8])>) -> Vec<u64> {
        it.map(|(h, _)| h.seq.0).collect()
    }

    #[test]
    fn keeps_the_last_depth_messages_and_answers_each_query() {
        let mut h = History::new(100, 1 << 20);
        for s in 1..=500 {
            h.push(header(s), &[s as u8; 10]);
        }
        assert_eq!(h.len(), 100);
        assert_eq!(seqs(h.query(HistoryQuery::Last(3))), vec![498, 499, 500]);
        assert_eq!(seqs(h.query(HistoryQuery::Last(1000))).len(), 100);
        assert_eq!(
            seqs(h.query(HistoryQuery::Since(497))),
            vec![497, 498, 499, 500]
        );
        let between = HistoryQuery::Between {
            from_ns: 450_000,
            to_ns: 452_000,
        };
        assert_eq!(seqs(h.query(between)), vec![450, 451, 452]);
        assert_eq!(
            h.query(HistoryQuery::Last(1)).next().unwrap().1,
            &[244u8; 10]
        );
    }

    #[test]
    fn the_byte_budget_drops_the_oldest_and_refuses_a_message_above_it() {
        let mut h = History::new(100, 25);
        for s in 1..=4 {
            h.push(header(s), &[0; 10]);
        }
        assert_eq!(seqs(h.query(HistoryQuery::Last(10))), vec![3, 4]);
        h.push(header(5), &[0; 26]);
        assert_eq!(h.too_large(), 1);
        assert_eq!(h.len(), 2);
        h.set_limits(1, 25);
        assert_eq!(seqs(h.query(HistoryQuery::Last(10))), vec![4]);
        assert_eq!(h.bytes(), 10);
    }

    proptest! {
        #[test]
        fn bounds_always_hold_and_last_is_a_suffix(
            depth in 0usize..20,
            max_bytes in 0usize..200,
            sizes in proptest::collection::vec(0usize..50, 0..100),
            n in 0u32..30,
        ) {
            let mut h = History::new(depth, max_bytes);
            for (i, &len) in sizes.iter().enumerate() {
                h.push(header(i as u64 + 1), &vec![1; len]);
                prop_assert!(h.len() <= depth);
                prop_assert!(h.bytes() <= max_bytes);
            }
            let all = seqs(h.query(HistoryQuery::Last(u32::MAX)));
            prop_assert!(all.windows(2).all(|w| w[0] < w[1]));
            let last = seqs(h.query(HistoryQuery::Last(n)));
            prop_assert_eq!(&all[all.len() - last.len()..], &last[..]);
            prop_assert_eq!(last.len(), all.len().min(n as usize));
            // The newest message is kept whenever it fits alone.
            if let Some(&len) = sizes.last() {
                if depth > 0 && len <= max_bytes {
                    prop_assert_eq!(all.last().copied(), Some(sizes.len() as u64));
                }
            }
        }
    }
}
