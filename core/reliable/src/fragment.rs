//! Cutting messages into datagram-sized fragments and putting them back.
//!
//! A message of `msg_len` bytes becomes `frags` data datagrams with consecutive
//! stream seqs; fragment `frag` carries `seq - frag` as its message's first seq,
//! so the [`Reassembler`] keys partial messages by that first seq. It trusts
//! nothing: every fragment of a message must agree on `frags`, `msg_len`, the
//! frame header and the tag, and the pieces must add up to exactly `msg_len`,
//! or the message is discarded.

use std::collections::{BTreeMap, VecDeque};

use foldhash::{HashSet, HashSetExt};
use std::ops::Range;

use tagwire_wire::datagram::{DataView, MAX_MESSAGE};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::TagName;

/// The byte ranges of the fragments of a `msg_len`-byte message with at most
/// `max_payload` bytes each: always at least one (an empty message is one empty
/// fragment). A `max_payload` of 0 is treated as 1.
pub fn fragments(msg_len: usize, max_payload: usize) -> impl Iterator<Item = Range<usize>> {
    let step = max_payload.max(1);
    let count = fragment_count(msg_len, step);
    (0..count).map(move |i| {
        let start = i * step;
        start..msg_len.min(start + step)
    })
}

/// How many fragments [`fragments`] yields (check it fits the wire's `u16`).
pub fn fragment_count(msg_len: usize, max_payload: usize) -> usize {
    msg_len.div_ceil(max_payload.max(1)).max(1)
}

/// Most bytes a message's buffer reserves at its first fragment (see
/// [`Reassembler::handle_fragment_with`]); a larger one grows as its
/// fragments come.
pub const RESERVE_CAP: usize = 64 << 10;

/// Bounds of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblerConfig {
    /// Most partial messages held at once (default 64).
    pub max_partials: usize,
    /// Most payload bytes held in partial messages (default 128 MiB: two of
    /// the largest messages).
    pub max_bytes: usize,
    /// How many recently completed message starts are remembered so replayed
    /// fragments are not delivered twice (default 1024).
    pub completed_memory: usize,
}

impl Default for ReassemblerConfig {
    fn default() -> Self {
        Self {
            max_partials: 64,
            max_bytes: 2 * MAX_MESSAGE as usize,
            completed_memory: 1024,
        }
    }
}

/// Counters of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReassemblerStats {
    /// Messages yielded.
    pub completed: u64,
    /// Fragments already held, or belonging to a message already yielded.
    pub duplicates: u64,
    /// Fragments that disagreed with the others of their message (dropped),
    /// plus messages whose pieces did not add up to their length (discarded).
    pub inconsistent: u64,
    /// Partial messages evicted to stay within the bounds.
    pub evicted: u64,
    /// Fragments of messages larger than the byte bound (dropped).
    pub too_large: u64,
}

/// A message put back together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassembled {
    /// Stream seq of its first fragment.
    pub first_seq: u64,
    /// The publisher's frame header.
    pub header: FrameHeader,
    /// The tag it was published on.
    pub tag: TagName,
    /// The whole message.
    pub payload: Vec<u8>,
}

/// Reassembles the messages of one stream from fragments arriving in any
/// order, lost or duplicated. Memory is bounded by [`ReassemblerConfig`].
#[derive(Debug)]
pub struct Reassembler {
    config: ReassemblerConfig,
    /// Partial messages by first seq; the smallest is the oldest.
    partials: BTreeMap<u64, Partial>,
    /// Payload bytes held in `partials`.
    bytes: usize,
    /// Recently completed first seqs, in completion order, and as a set.
    completed_order: VecDeque<u64>,
    completed: HashSet<u64>,
    stats: ReassemblerStats,
    /// Fragment-end lists of completed messages, for the next ones (at
    /// most `max_partials`).
    spare_cuts: Vec<Vec<usize>>,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new(config: ReassemblerConfig) -> Self {
        Self {
            config,
            partials: BTreeMap::new(),
            bytes: 0,
            completed_order: VecDeque::new(),
            completed: HashSet::new(),
            spare_cuts: Vec::new(),
            stats: ReassemblerStats::default(),
        }
    }

    /// Takes one fragment of a message on `tag` (the name the stream's
    /// datagrams give, which the caller holds: `d.tag()` as a [`TagName`]);
    /// returns its message if this fragment completed it.
    pub fn handle_fragment(&mut self, d: &DataView<'_>, tag: &TagName) -> Option<Reassembled> {
        self.handle_fragment_with(d, tag, &mut Vec::new())
    }

    /// [`Reassembler::handle_fragment`], building messages in buffers
    /// taken from `spare` (given back by the reader of earlier ones) and
    /// sized for the whole message at its first fragment, up to
    /// [`RESERVE_CAP`]: no allocation and no regrowth per message once
    /// warm.
    pub fn handle_fragment_with(
        &mut self,
        d: &DataView<'_>,
        tag: &TagName,
        spare: &mut Vec<Vec<u8>>,
    ) -> Option<Reassembled> {
        let first = d.first_seq();
        if self.completed.contains(&first) {
            self.stats.duplicates += 1;
            return None;
        }
        // (The view is checked: 0 ≤ frag < frags, payload ≤ msg_len.)
        let (frag, frags, msg_len, payload) = (d.frag(), d.frags(), d.msg_len(), d.payload());
        let msg_len = msg_len as usize;
        if msg_len > self.config.max_bytes {
            self.stats.too_large += 1;
            return None;
        }
        if frags == 1 {
            if payload.len() != msg_len {
                self.stats.inconsistent += 1;
                return None;
            }
            let mut whole = spare.pop().unwrap_or_default();
            whole.clear();
            whole.extend_from_slice(payload);
            return Some(self.complete(first, d.header(), tag.clone(), whole));
        }
        if let Some(p) = self.partials.get_mut(&first) {
            if !p.matches(d, tag) {
                self.stats.inconsistent += 1;
                return None;
            }
            if p.has(frag) {
                self.stats.duplicates += 1;
                return None;
            }
        } else {
            let mut p = Partial::new(frags, d.msg_len(), d.header(), tag.clone());
            if let Some(cuts) = self.spare_cuts.pop() {
                p.cuts = cuts;
            }
            if let Some(mut buf) = spare.pop() {
                buf.clear();
                p.prefix = buf;
            }
            // (A hostile length reserves at most RESERVE_CAP: memory still
            // grows with what arrives past it.)
            p.prefix.reserve(msg_len.min(RESERVE_CAP));
            self.partials.insert(first, p);
        }
        self.make_room(first, payload.len());
        let Some(p) = self.partials.get_mut(&first) else {
            // make_room evicted this message itself: it alone exceeds the bounds.
            return None;
        };
        p.put(frag, payload);
        self.bytes += payload.len();
        if p.count() < usize::from(p.frags) {
            return None;
        }
        let mut p = self.partials.remove(&first)?;
        self.bytes -= p.held;
        if self.spare_cuts.len() < self.config.max_partials {
            let mut cuts = std::mem::take(&mut p.cuts);
            cuts.clear();
            self.spare_cuts.push(cuts);
        }
        if p.held != msg_len {
            self.stats.inconsistent += 1;
            self.remember(first);
            return None;
        }
        // Every fragment is held: all of them followed on into `prefix`.
        Some(self.complete(first, p.header, p.tag, p.prefix))
    }

    /// Bytes the partial messages held will take once whole (their
    /// declared lengths): what a sender has reserved here.
    pub fn reserved_bytes(&self) -> usize {
        self.partials.values().map(|p| p.msg_len as usize).sum()
    }

    /// Whether fragment `d` would begin a message not held yet.
    pub fn would_begin(&self, d: &DataView<'_>) -> bool {
        d.frags() > 1
            && !self.partials.contains_key(&d.first_seq())
            && !self.completed.contains(&d.first_seq())
    }

    /// Takes every partial message out, oldest first: what a stream's new
    /// holder needs to finish them (see [`Reassembler::put_partial`]).
    pub fn take_partials(&mut self) -> Vec<PartialMessage> {
        self.bytes = 0;
        std::mem::take(&mut self.partials)
            .into_iter()
            .map(|(first_seq, p)| PartialMessage {
                first_seq,
                frags: p.frags,
                msg_len: p.msg_len,
                header: p.header,
                tag: p.tag.clone(),
                pieces: p.into_pieces(),
            })
            .collect()
    }

    /// Takes a partial message another reassembler of the same stream held
    /// ([`Reassembler::take_partials`]). It may come from another process:
    /// pieces that do not fit the message are dropped (counted
    /// inconsistent), and the bounds hold as for fragments.
    pub fn put_partial(&mut self, m: PartialMessage) {
        let PartialMessage {
            first_seq,
            frags,
            msg_len,
            header,
            tag,
            pieces,
        } = m;
        if frags < 2 || msg_len as usize > self.config.max_bytes {
            self.stats.inconsistent += 1;
            return;
        }
        if self.partials.contains_key(&first_seq) || self.completed.contains(&first_seq) {
            self.stats.duplicates += 1;
            return;
        }
        let mut held = 0usize;
        let mut kept = BTreeMap::new();
        for (frag, piece) in pieces {
            if frag >= frags || held + piece.len() > msg_len as usize {
                self.stats.inconsistent += 1;
                continue;
            }
            held += piece.len();
            kept.insert(frag, piece);
        }
        if kept.len() >= usize::from(frags) {
            // Whole messages are delivered, never handed over.
            self.stats.inconsistent += 1;
            return;
        }
        self.partials
            .insert(first_seq, Partial::new(frags, msg_len, header, tag));
        self.make_room(first_seq, held);
        if let Some(p) = self.partials.get_mut(&first_seq) {
            for (frag, piece) in kept {
                p.put(frag, &piece);
            }
            self.bytes += held;
        }
    }

    /// Partial messages held.
    pub fn partials(&self) -> usize {
        self.partials.len()
    }

    /// Payload bytes held in partial messages.
    pub fn bytes_held(&self) -> usize {
        self.bytes
    }

    /// The counters.
    pub fn stats(&self) -> ReassemblerStats {
        self.stats
    }

    fn complete(
        &mut self,
        first_seq: u64,
        header: FrameHeader,
        tag: TagName,
        payload: Vec<u8>,
    ) -> Reassembled {
        self.stats.completed += 1;
        self.remember(first_seq);
        Reassembled {
            first_seq,
            header,
            tag,
            payload,
        }
    }

    fn remember(&mut self, first: u64) {
        if self.config.completed_memory == 0 {
            return;
        }
        while self.completed_order.len() >= self.config.completed_memory {
            if let Some(old) = self.completed_order.pop_front() {
                self.completed.remove(&old);
            }
        }
        self.completed_order.push_back(first);
        self.completed.insert(first);
    }

    /// Evicts the oldest partials other than `keep` until one more piece of
    /// `extra` bytes fits; evicts `keep` itself if it alone does not fit.
    fn make_room(&mut self, keep: u64, extra: usize) {
        let over = |s: &Self| {
            s.partials.len() > s.config.max_partials || s.bytes + extra > s.config.max_bytes
        };
        while over(self) {
            let victim = self
                .partials
                .keys()
                .copied()
                .find(|&k| k != keep)
                .unwrap_or(keep);
            if let Some(p) = self.partials.remove(&victim) {
                self.bytes -= p.held;
                self.stats.evicted += 1;
            }
            if victim == keep {
                return;
            }
        }
    }
}

impl Default for Reassembler {
    fn default() -> Self {
        Self::new(ReassemblerConfig::default())
    }
}

/// A message some of whose fragments arrived, as it moves from one
/// reassembler to another ([`Reassembler::take_partials`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialMessage {
    /// Stream seq of its first fragment.
    pub first_seq: u64,
    /// Its fragment count.
    pub frags: u16,
    /// Its whole length.
    pub msg_len: u32,
    /// The publisher's frame header.
    pub header: FrameHeader,
    /// Its tag.
    pub tag: TagName,
    /// The pieces that arrived, by fragment index.
    pub pieces: BTreeMap<u16, Vec<u8>>,
}

#[derive(Debug)]
struct Partial {
    frags: u16,
    msg_len: u32,
    header: FrameHeader,
    tag: TagName,
    /// Fragments `0..cuts.len()`, end to end: a reliable stream hands
    /// them in order, so a message is built in one buffer, without a
    /// buffer per fragment or a copy at the end. Memory grows with what
    /// arrived, not with what a (possibly hostile) `msg_len` announces.
    prefix: Vec<u8>,
    /// Where each fragment of `prefix` ends.
    cuts: Vec<usize>,
    /// Fragments that came before an earlier one, by index.
    pieces: BTreeMap<u16, Vec<u8>>,
    held: usize,
}

impl Partial {
    fn new(frags: u16, msg_len: u32, header: FrameHeader, tag: TagName) -> Self {
        Self {
            frags,
            msg_len,
            header,
            tag,
            prefix: Vec::new(),
            cuts: Vec::new(),
            pieces: BTreeMap::new(),
            held: 0,
        }
    }

    /// Fragments held.
    fn count(&self) -> usize {
        self.cuts.len() + self.pieces.len()
    }

    fn has(&self, frag: u16) -> bool {
        usize::from(frag) < self.cuts.len() || self.pieces.contains_key(&frag)
    }

    /// Takes fragment `frag` (not held yet).
    fn put(&mut self, frag: u16, piece: &[u8]) {
        self.held += piece.len();
        if usize::from(frag) == self.cuts.len() {
            self.prefix.extend_from_slice(piece);
            self.cuts.push(self.prefix.len());
            // What came early follows on now.
            while let Some(p) = u16::try_from(self.cuts.len())
                .ok()
                .and_then(|next| self.pieces.remove(&next))
            {
                self.prefix.extend_from_slice(&p);
                self.cuts.push(self.prefix.len());
            }
        } else {
            self.pieces.insert(frag, piece.to_vec());
        }
    }

    /// Every fragment held, by index.
    fn into_pieces(self) -> BTreeMap<u16, Vec<u8>> {
        let mut all = self.pieces;
        let mut start = 0;
        for (i, &end) in self.cuts.iter().enumerate() {
            if let Ok(i) = u16::try_from(i) {
                all.insert(i, self.prefix[start..end].to_vec());
            }
            start = end;
        }
        all
    }

    fn matches(&self, d: &DataView<'_>, tag: &TagName) -> bool {
        self.frags == d.frags()
            && self.msg_len == d.msg_len()
            && self.header == d.header()
            && self.tag == *tag
            && self.held + d.payload().len() <= self.msg_len as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tagwire_wire::datagram::DataRepr;
    use tagwire_wire::{SenderInfo, SeqNum};

    fn header(n: u64) -> FrameHeader {
        FrameHeader {
            flags: 0,
            sender: SenderInfo::default(),
            stream: 0,
            seq: SeqNum(n),
            timestamp_ns: n * 7,
        }
    }

    type Part = (u64, u16, u16, Range<usize>);

    /// The fragments of a message whose first seq is `first`.
    fn cut(first: u64, msg: &[u8], max: usize) -> Vec<Part> {
        let frags = fragment_count(msg.len(), max) as u16;
        fragments(msg.len(), max)
            .enumerate()
            .map(|(i, r)| (first + i as u64, i as u16, frags, r))
            .collect()
    }

    /// Feeds fragment `part` of message `n`, claiming a length of
    /// `msg.len() + lie` bytes.
    fn feed_lying(
        r: &mut Reassembler,
        tag: &TagName,
        n: u64,
        msg: &[u8],
        part: &Part,
        lie: u32,
    ) -> Option<Reassembled> {
        let (seq, frag, frags, range) = part;
        offer(
            r,
            DataRepr {
                seq: *seq,
                flags: 0,
                frag: *frag,
                frags: *frags,
                msg_len: msg.len() as u32 + lie,
                header: header(n),
                tag,
                payload: &msg[range.clone()],
            },
        )
    }

    /// Hands `d`, as the wire carries it, to `r`.
    fn offer(r: &mut Reassembler, d: DataRepr<'_>) -> Option<Reassembled> {
        let mut bytes = Vec::new();
        d.encode(1, &mut bytes);
        r.handle_fragment(&DataView::new_checked(&bytes).unwrap(), d.tag)
    }

    fn feed(
        r: &mut Reassembler,
        tag: &TagName,
        n: u64,
        msg: &[u8],
        part: &Part,
    ) -> Option<Reassembled> {
        feed_lying(r, tag, n, msg, part, 0)
    }

    #[test]
    fn fragments_cover_the_message() {
        assert_eq!(fragments(0, 10).collect::<Vec<_>>(), vec![0..0]);
        assert_eq!(fragments(10, 10).collect::<Vec<_>>(), vec![0..10]);
        assert_eq!(
            fragments(25, 10).collect::<Vec<_>>(),
            vec![0..10, 10..20, 20..25]
        );
        assert_eq!(fragments(3, 0).count(), 3);
        assert_eq!(fragment_count(25, 10), 3);
    }

    #[test]
    fn a_completed_message_is_not_yielded_again() {
        let tag = TagName::new("/a").unwrap();
        let msg = vec![5u8; 30];
        let mut r = Reassembler::default();
        let parts = cut(1, &msg, 10);
        assert!(feed(&mut r, &tag, 1, &msg, &parts[2]).is_none());
        assert!(feed(&mut r, &tag, 1, &msg, &parts[0]).is_none());
        let m = feed(&mut r, &tag, 1, &msg, &parts[1]).unwrap();
        assert_eq!(m.payload, msg);
        assert_eq!(m.first_seq, 1);
        for p in &parts {
            assert!(feed(&mut r, &tag, 1, &msg, p).is_none());
        }
        assert_eq!(r.stats().duplicates, 3);
        assert_eq!(r.partials(), 0);
        assert_eq!(r.bytes_held(), 0);
    }

    #[test]
    fn pieces_that_do_not_add_up_are_discarded() {
        let tag = TagName::new("/a").unwrap();
        let mut r = Reassembler::default();
        let d = |frag, payload: &'static [u8]| DataRepr {
            seq: 5 + u64::from(frag),
            flags: 0,
            frag,
            frags: 2,
            msg_len: 10,
            header: header(1),
            tag: &tag,
            payload,
        };
        assert!(offer(&mut r, d(0, b"abc")).is_none());
        assert!(offer(&mut r, d(1, b"def")).is_none());
        assert_eq!(r.stats().inconsistent, 1);
        assert_eq!(r.partials(), 0);
    }

    #[test]
    fn the_oldest_partial_is_evicted_at_the_bound() {
        let tag = TagName::new("/a").unwrap();
        let mut r = Reassembler::new(ReassemblerConfig {
            max_partials: 2,
            max_bytes: 1000,
            completed_memory: 8,
        });
        let msg = vec![1u8; 20];
        for n in 0..3u64 {
            let parts = cut(1 + 10 * n, &msg, 10);
            assert!(feed(&mut r, &tag, n, &msg, &parts[0]).is_none());
        }
        assert_eq!(r.partials(), 2);
        assert_eq!(r.stats().evicted, 1);
        // Message 0 was evicted, message 2 still completes.
        let parts = cut(21, &msg, 10);
        assert_eq!(feed(&mut r, &tag, 2, &msg, &parts[1]).unwrap().payload, msg);
        let parts = cut(1, &msg, 10);
        assert!(feed(&mut r, &tag, 0, &msg, &parts[1]).is_none());
        // A message larger than the byte bound never starts.
        let big = vec![0u8; 2000];
        let parts = cut(100, &big, 500);
        assert!(feed(&mut r, &tag, 9, &big, &parts[0]).is_none());
        assert_eq!(r.stats().too_large, 1);
    }

    proptest! {
        /// Random subsets, duplicates and orders of the fragments of several
        /// messages, plus one forged fragment that lies about its message's
        /// length, never yield a wrong or repeated message, and yield every
        /// message whose fragments all came (unless the forgery came first).
        #[test]
        fn reassembly_never_yields_a_wrong_message(
            sizes in proptest::collection::vec(0usize..200, 1..6),
            max in 1usize..64,
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..200),
            forge in any::<(prop::sample::Index, prop::sample::Index)>(),
        ) {
            let tag = TagName::new("/t").unwrap();
            let mut all = Vec::new();
            let mut msgs = Vec::new();
            let mut first = 1u64;
            for (n, &size) in sizes.iter().enumerate() {
                let msg: Vec<u8> = (0..size).map(|i| (i * 31 + n) as u8).collect();
                for p in cut(first, &msg, max) {
                    all.push((n, first, p));
                }
                first += fragment_count(size, max) as u64;
                msgs.push(msg);
            }
            let forged_at = forge.0.index(picks.len() + 1);
            let forged = forge.1.index(all.len());
            let mut r = Reassembler::default();
            let mut seen = vec![false; msgs.len()];
            let mut fed = vec![false; all.len()];
            let mut ruined = None;
            for (step, i) in picks.iter().map(Some).chain([None]).enumerate() {
                if step == forged_at {
                    let (n, _, p) = &all[forged];
                    if !seen[*n] && !fed.iter().zip(&all).any(|(f, (x, _, _))| *f && x == n) {
                        ruined = Some(*n);
                    }
                    let m = feed_lying(&mut r, &tag, *n as u64, &msgs[*n], p, 1);
                    prop_assert!(m.is_none(), "a lying fragment completed a message");
                }
                let Some(i) = i else { break };
                let k = i.index(all.len());
                fed[k] = true;
                let (n, first, p) = &all[k];
                if let Some(m) = feed(&mut r, &tag, *n as u64, &msgs[*n], p) {
                    prop_assert!(!seen[*n], "message {} yielded twice", n);
                    seen[*n] = true;
                    prop_assert_eq!(m.first_seq, *first);
                    prop_assert_eq!(m.header, header(*n as u64));
                    prop_assert_eq!(&m.payload, &msgs[*n]);
                }
            }
            for (n, msg_seen) in seen.iter().enumerate() {
                let complete = all.iter().zip(&fed).filter(|((x, _, _), _)| *x == n).all(|(_, f)| *f);
                if complete && ruined != Some(n) {
                    prop_assert!(*msg_seen, "message {} never completed", n);
                }
            }
        }
    }

    #[test]
    fn a_partial_message_moves_to_another_reassembler_and_completes_there() {
        let tag = TagName::new("/t").unwrap();
        let msg: Vec<u8> = (0..100u8).collect();
        let parts = cut(10, &msg, 30);
        assert_eq!(parts.len(), 4);
        let mut a = Reassembler::default();
        assert_eq!(feed(&mut a, &tag, 7, &msg, &parts[0]), None);
        assert_eq!(feed(&mut a, &tag, 7, &msg, &parts[1]), None);
        let moved = a.take_partials();
        assert_eq!((a.partials(), a.bytes_held()), (0, 0));
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].first_seq, 10);
        let mut b = Reassembler::default();
        b.put_partial(moved[0].clone());
        assert_eq!(b.bytes_held(), 60);
        assert_eq!(feed(&mut b, &tag, 7, &msg, &parts[2]), None);
        let done = feed(&mut b, &tag, 7, &msg, &parts[3]).unwrap();
        assert_eq!(done.payload, msg);
        assert_eq!(done.header, header(7));
        // A second copy of the handed-over message is not taken again.
        b.put_partial(moved[0].clone());
        assert_eq!(b.partials(), 0);
    }

    #[test]
    fn a_handed_over_partial_that_does_not_fit_its_message_is_refused() {
        let tag = TagName::new("/t").unwrap();
        let mut r = Reassembler::default();
        let bad = |frags: u16, msg_len: u32, pieces: Vec<(u16, usize)>| PartialMessage {
            first_seq: 1,
            frags,
            msg_len,
            header: header(1),
            tag: tag.clone(),
            pieces: pieces.into_iter().map(|(f, n)| (f, vec![0; n])).collect(),
        };
        // One fragment: never partial. Too large for the bound.
        r.put_partial(bad(1, 10, vec![(0, 5)]));
        r.put_partial(bad(4, u32::MAX, vec![(0, 5)]));
        // Pieces beyond the count or the length are dropped; a complete set
        // is refused whole.
        r.put_partial(bad(2, 10, vec![(0, 5), (1, 5)]));
        assert_eq!(r.partials(), 0);
        r.put_partial(bad(3, 10, vec![(0, 5), (7, 1), (1, 9)]));
        assert_eq!((r.partials(), r.bytes_held()), (1, 5));
        assert_eq!(r.stats().inconsistent, 5);
    }
}
