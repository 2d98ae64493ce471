//! Messages missing between two a subscriber got, counted end to end.
//!
//! Each publisher numbers its messages 1, 2, 3, … (the frame header's
//! sender pid, node and publisher stream name it), so a subscriber that gets
//! message 7 right after message 4 of the same publisher knows that 5 and 6
//! are missing, wherever they went: a best-effort datagram the network
//! dropped, a message a full queue on another node could not take, a record
//! a forwarder was lapped on. Those losses are reported like a ring
//! overflow ([`crate::Error::Overflowed`]), so nothing is lost in silence.
//!
//! A scaled subscription (every n-th) expects only multiples of n. The first
//! message of a publisher sets where counting starts (a late joiner misses
//! nothing it did not ask for).
//!
//! A number at or below the last one's is a message that comes late or
//! again (a publisher numbers each of its messages once, and carries its
//! numbering across its daemon's restarts): two paths of one publisher
//! across a switch of its streams. Handing it out would break the order
//! the subscriber was promised, and one that came late was counted missing
//! when the later one came; so it is not handed out ([`Note::Late`]). Only
//! a later send time says the publisher began again (a process's
//! publisher numbers wrap after 65,536, a pid is reused): counting then
//! starts afresh. Messages reported dropped on the way are noted as if
//! taken ([`Gaps::note_dropped`]): what is missing beside them is counted,
//! they are not counted twice. Where their numbers are unknown (ring
//! records already overwritten, more dropped than were kept), the count
//! reported is taken off the next gap of each publisher known then, the
//! gaps those records were in: what else is missing there is still
//! counted.

use std::collections::{HashMap, HashSet};

use tagwire_shm::{Peek, Ring};
use tagwire_wire::frame::{FrameHeader, HEADER_LEN};
use tagwire_wire::SenderInfo;

/// A message dropped on its way to the subscriber and reported as such:
/// its publisher (sender, stream), number and send time (ns).
pub(crate) type Dropped = (SenderInfo, u16, u64, u64);

/// Dropped messages whose numbers are kept for one report (past it the
/// subscription's gaps start afresh after the report).
pub(crate) const MAX_DROPPED_KEPT: usize = 4096;

/// The publishers and numbers of ring records `from .. from + n`, which a
/// subscriber fell too far behind to read (reported lost) but which may
/// still be in their slots, oldest first, those `wanted` only; `None` if
/// any is gone (overwritten, never committed, unreadable) or there are
/// too many.
pub(crate) fn dropped_in_ring(
    ring: &Ring,
    from: u64,
    n: u64,
    wanted: impl Fn(&FrameHeader) -> bool,
) -> Option<Vec<Dropped>> {
    if n > MAX_DROPPED_KEPT as u64 {
        return None;
    }
    let mut raw = [0u8; HEADER_LEN];
    let mut out = Vec::with_capacity(n as usize);
    for i in from..from.checked_add(n)? {
        let Peek::Record(len) = ring.peek(i, &mut raw) else {
            return None;
        };
        if len < HEADER_LEN {
            return None;
        }
        let (h, _) = FrameHeader::parse(&raw).ok()?;
        if wanted(&h) {
            out.push((h.sender, h.stream, h.seq.0, h.timestamp_ns));
        }
    }
    Some(out)
}

/// Publishers remembered at most (a hostile flood of senders costs this
/// much memory, then counting starts afresh).
const MAX_PUBLISHERS: usize = 4096;

/// The last number seen from each publisher, and its send time.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    /// The publisher of the last message and its number (most tags have one
    /// publisher: no hashing per message for them).
    hot: Option<((SenderInfo, u16), Last)>,
    /// The others.
    last: HashMap<(SenderInfo, u16), Last>,
    /// Messages reported lost whose publishers are unknown: see
    /// [`Gaps::note_dropped`].
    unknown: Option<Unknown>,
}

/// Messages reported lost without their publishers' numbers: `count` of
/// them, each in the gap before the next message of one of `publishers`
/// (those known when they were reported; a publisher first seen later
/// numbers afresh, nothing of its own was reported).
#[derive(Debug, Default)]
struct Unknown {
    count: u64,
    publishers: HashSet<(SenderInfo, u16)>,
}

/// A publisher's last message: its number and send time (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Last {
    seq: u64,
    sent: u64,
}

/// What [`Gaps::note`] says of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Note {
    /// Hand it out; this many messages the subscription takes are missing
    /// before it.
    Take(u64),
    /// Its publisher's numbering already went past it: it comes late or
    /// again (not handed out).
    Late,
}

impl Gaps {
    /// Notes message `seq`, sent at `sent` (ns), of publisher (`sender`,
    /// `stream`), for a subscription that takes every `every`-th.
    pub(crate) fn note(
        &mut self,
        sender: SenderInfo,
        stream: u16,
        seq: u64,
        sent: u64,
        every: u32,
    ) -> Note {
        let key = (sender, stream);
        let now = Last { seq, sent };
        let before = match &mut self.hot {
            Some((k, last)) if *k == key => Some(*last),
            hot => {
                if let Some((k, last)) = hot.take() {
                    if self.last.len() >= MAX_PUBLISHERS && !self.last.contains_key(&k) {
                        self.last.clear();
                    }
                    self.last.insert(k, last);
                }
                let before = self.last.remove(&key);
                *hot = Some((key, before.unwrap_or(now)));
                before
            }
        };
        let note = match before {
            Some(last) if seq > last.seq => {
                let missing = wanted_between(last.seq, seq, every);
                Note::Take(missing - self.reported_unknown(&key, missing))
            }
            // Late or again; a later send time: the publisher began again.
            Some(last) if sent <= last.sent => return Note::Late,
            _ => Note::Take(0),
        };
        if let Some((_, last)) = &mut self.hot {
            *last = now;
        }
        note
    }

    /// How many of the `missing` before this message of publisher `key`
    /// were reported already without their numbers (see
    /// [`Gaps::note_dropped`]).
    fn reported_unknown(&mut self, key: &(SenderInfo, u16), missing: u64) -> u64 {
        let Some(u) = &mut self.unknown else {
            return 0;
        };
        if !u.publishers.remove(key) {
            return 0;
        }
        let reported = missing.min(u.count);
        u.count -= reported;
        if u.count == 0 || u.publishers.is_empty() {
            self.unknown = None;
        }
        reported
    }

    /// Notes `n` messages dropped on the way to the subscriber and
    /// reported as such (a direct subscription's full queue, ring records
    /// the subscriber fell past), oldest first, as if taken: returns how
    /// many it takes are missing before or between them. `None` (their
    /// numbers are unknown: too many to have kept them, or overwritten):
    /// each is in the gap before the next message of some publisher known
    /// now, so the next gap of each of them is counted less what is left
    /// of the `n`; returns 0.
    pub(crate) fn note_dropped(
        &mut self,
        dropped: Option<Vec<Dropped>>,
        n: u64,
        every: u32,
    ) -> u64 {
        match dropped {
            Some(dropped) => dropped
                .into_iter()
                .map(|(sender, stream, seq, sent)| {
                    match self.note(sender, stream, seq, sent, every) {
                        Note::Take(missing) => missing,
                        Note::Late => 0,
                    }
                })
                .sum(),
            None => {
                let u = self.unknown.get_or_insert_with(Unknown::default);
                u.count = u.count.saturating_add(n);
                let known = self
                    .hot
                    .iter()
                    .map(|(k, _)| *k)
                    .chain(self.last.keys().copied());
                for k in known {
                    if u.publishers.len() >= MAX_PUBLISHERS {
                        break;
                    }
                    u.publishers.insert(k);
                }
                if u.publishers.is_empty() {
                    self.unknown = None;
                }
                0
            }
        }
    }

    /// Forgets every publisher's last number (losses up to here were
    /// reported another way, or dropped on purpose).
    pub(crate) fn forget(&mut self) {
        self.hot = None;
        self.last.clear();
        self.unknown = None;
    }
}

/// Numbers strictly between `last` and `seq` that an every-`every`-th
/// subscription takes.
fn wanted_between(last: u64, seq: u64, every: u32) -> u64 {
    let n = u64::from(every.max(1));
    ((seq - 1) / n).saturating_sub(last / n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwire_wire::{NodeAddr, Pid};

    fn who(pid: u32) -> SenderInfo {
        SenderInfo {
            pid: Pid(pid),
            node: NodeAddr::LOCALHOST,
        }
    }

    /// Message `seq` of (`pid`, `stream`), sent at 10 ns a number (in
    /// order), for a subscription taking every `every`-th.
    fn note(g: &mut Gaps, pid: u32, stream: u16, seq: u64, every: u32) -> Note {
        g.note(who(pid), stream, seq, seq * 10, every)
    }

    fn dropped(pid: u32, seq: u64) -> Dropped {
        (who(pid), 0, seq, seq * 10)
    }

    #[test]
    fn a_jump_counts_the_numbers_skipped_per_publisher() {
        let mut g = Gaps::default();
        assert_eq!(
            note(&mut g, 1, 0, 3, 1),
            Note::Take(0),
            "the first sets the start"
        );
        assert_eq!(note(&mut g, 1, 0, 4, 1), Note::Take(0));
        assert_eq!(note(&mut g, 1, 0, 7, 1), Note::Take(2));
        // Another publisher of the same process, and another process.
        assert_eq!(note(&mut g, 1, 1, 1, 1), Note::Take(0));
        assert_eq!(note(&mut g, 2, 0, 10, 1), Note::Take(0));
        assert_eq!(note(&mut g, 1, 1, 2, 1), Note::Take(0));
        assert_eq!(note(&mut g, 2, 0, 12, 1), Note::Take(1));
    }

    #[test]
    fn a_scaled_subscription_counts_only_the_samples_it_takes() {
        let mut g = Gaps::default();
        assert_eq!(note(&mut g, 1, 0, 3, 3), Note::Take(0));
        assert_eq!(note(&mut g, 1, 0, 6, 3), Note::Take(0));
        assert_eq!(note(&mut g, 1, 0, 15, 3), Note::Take(2), "9 and 12");
        assert_eq!(wanted_between(0, 1, 4), 0);
        assert_eq!(wanted_between(4, 12, 4), 1);
    }

    #[test]
    fn a_message_late_or_again_is_not_taken_and_a_later_send_time_begins_again() {
        // The soak's reorder: 92644 came, then 92627 by another path (it
        // was counted missing with 92644); and a message twice.
        let mut g = Gaps::default();
        assert_eq!(note(&mut g, 1, 0, 92626, 1), Note::Take(0));
        assert_eq!(note(&mut g, 1, 0, 92644, 1), Note::Take(17));
        assert_eq!(note(&mut g, 1, 0, 92627, 1), Note::Late);
        assert_eq!(note(&mut g, 1, 0, 92644, 1), Note::Late, "again");
        assert_eq!(
            note(&mut g, 1, 0, 92645, 1),
            Note::Take(0),
            "the last stays"
        );
        // Another publisher in between changes nothing.
        assert_eq!(note(&mut g, 2, 0, 5, 1), Note::Take(0));
        assert_eq!(note(&mut g, 1, 0, 92630, 1), Note::Late);
        // A number going back with a later send time: begun again.
        assert_eq!(g.note(who(1), 0, 1, 2_000_000, 1), Note::Take(0));
        assert_eq!(g.note(who(1), 0, 3, 2_000_010, 1), Note::Take(1));
        g.forget();
        assert_eq!(note(&mut g, 1, 0, 9, 1), Note::Take(0));
    }

    #[test]
    fn messages_dropped_and_reported_leave_a_loss_beside_them_counted() {
        // 190 taken; 191 and 192 dropped from a full queue (reported as
        // two); 193 lost when the streams moved; 194 taken.
        let mut g = Gaps::default();
        note(&mut g, 1, 0, 190, 1);
        assert_eq!(
            g.note_dropped(Some(vec![dropped(1, 191), dropped(1, 192)]), 2, 1),
            0
        );
        assert_eq!(note(&mut g, 1, 0, 194, 1), Note::Take(1), "193 is counted");
        // Missing between dropped ones counts, of each publisher.
        assert_eq!(
            g.note_dropped(
                Some(vec![dropped(1, 196), dropped(2, 5), dropped(1, 199)]),
                3,
                1
            ),
            3
        );
    }

    #[test]
    fn messages_reported_lost_without_their_numbers_leave_the_rest_of_each_gap_counted() {
        // The soak's TCP loss: ring records overwritten before they could
        // be named, and one more lost on the way.
        let mut g = Gaps::default();
        note(&mut g, 1, 0, 10, 1);
        note(&mut g, 2, 0, 5, 1);
        // Four records past: 1's 11 and 12, 2's 6 and 7.
        assert_eq!(g.note_dropped(None, 4, 1), 0);
        // 1's 13 was lost on the way: counted, at the last of the gaps
        // the four were in (which publishers they were of is unknown).
        assert_eq!(note(&mut g, 1, 0, 14, 1), Note::Take(0));
        assert_eq!(note(&mut g, 2, 0, 8, 1), Note::Take(1), "13");
        // Spent: a later gap counts whole.
        assert_eq!(note(&mut g, 1, 0, 16, 1), Note::Take(1));
        // Only the first gap of a publisher known then takes from the
        // count: 3 left of 5 stay unused when 2 never sends again, and a
        // publisher first seen later is not touched.
        assert_eq!(g.note_dropped(None, 5, 1), 0);
        assert_eq!(note(&mut g, 3, 0, 40, 1), Note::Take(0));
        assert_eq!(note(&mut g, 3, 0, 42, 1), Note::Take(1));
        assert_eq!(note(&mut g, 1, 0, 19, 1), Note::Take(0), "17, 18 reported");
        assert_eq!(note(&mut g, 1, 0, 21, 1), Note::Take(1));
        // Afresh; then unknown numbers before known ones.
        g.forget();
        assert_eq!(note(&mut g, 1, 0, 30, 1), Note::Take(0));
        assert_eq!(g.note_dropped(None, 2, 1), 0);
        assert_eq!(g.note_dropped(Some(vec![dropped(1, 33)]), 1, 1), 0);
        assert_eq!(note(&mut g, 1, 0, 35, 1), Note::Take(1), "34");
    }

    #[test]
    fn records_skipped_in_the_ring_are_named_while_they_are_still_there() {
        let ring = Ring::create(
            "gaps-test",
            tagwire_shm::RingShape {
                slots: 8,
                payload: 256,
            },
        )
        .unwrap();
        let publish = |pid: u32, seq: u64| {
            let h = FrameHeader {
                flags: 0,
                sender: who(pid),
                stream: 0,
                seq: tagwire_wire::SeqNum(seq),
                timestamp_ns: 0,
            };
            let mut raw = [0u8; HEADER_LEN];
            let _ = h.emit(&mut raw);
            ring.publish(&[&raw, b"payload"]).unwrap();
        };
        for seq in 1..=6 {
            publish(1 + (seq % 2) as u32, seq);
        }
        let all = |_: &FrameHeader| true;
        assert_eq!(
            dropped_in_ring(&ring, 1, 3, all),
            Some(vec![
                (who(1), 0, 2, 0),
                (who(2), 0, 3, 0),
                (who(1), 0, 4, 0)
            ])
        );
        // Only the wanted ones.
        assert_eq!(
            dropped_in_ring(&ring, 0, 6, |h| h.seq.0 % 3 == 0),
            Some(vec![(who(2), 0, 3, 0), (who(1), 0, 6, 0)])
        );
        // Not written yet, or overwritten by a later lap: unknown.
        assert_eq!(dropped_in_ring(&ring, 4, 3, all), None);
        for seq in 7..=12 {
            publish(1, seq);
        }
        assert_eq!(dropped_in_ring(&ring, 2, 3, all), None, "index 3 is lapped");
        assert_eq!(dropped_in_ring(&ring, 4, 8, all).map(|v| v.len()), Some(8));
    }

    #[test]
    fn memory_is_bounded_by_the_number_of_publishers() {
        let mut g = Gaps::default();
        for p in 0..(MAX_PUBLISHERS as u32 + 10) {
            note(&mut g, p, 0, 1, 1);
        }
        assert!(g.last.len() <= MAX_PUBLISHERS);
    }
}
