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
//! nothing it did not ask for); a number that goes back starts afresh (a
//! publisher that began again). What a ring overflow already reported is not
//! counted twice: the subscriber calls [`Gaps::forget`] then.

use std::collections::HashMap;

use tagwire_shm::{Peek, Ring};
use tagwire_wire::frame::{FrameHeader, HEADER_LEN};
use tagwire_wire::SenderInfo;

/// A message dropped on its way to the subscriber and reported as such:
/// its publisher (sender, stream) and number.
pub(crate) type Dropped = (SenderInfo, u16, u64);

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
            out.push((h.sender, h.stream, h.seq.0));
        }
    }
    Some(out)
}

/// Publishers remembered at most (a hostile flood of senders costs this
/// much memory, then counting starts afresh).
const MAX_PUBLISHERS: usize = 4096;

/// The last number seen from each publisher.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    /// The publisher of the last message and its number (most tags have one
    /// publisher: no hashing per message for them).
    hot: Option<((SenderInfo, u16), u64)>,
    /// The others.
    last: HashMap<(SenderInfo, u16), u64>,
}

impl Gaps {
    /// Notes message `seq` of publisher (`sender`, `stream`), for a
    /// subscription that takes every `every`-th; returns how many messages it
    /// takes are missing before this one.
    pub(crate) fn note(&mut self, sender: SenderInfo, stream: u16, seq: u64, every: u32) -> u64 {
        let key = (sender, stream);
        let before = match &mut self.hot {
            Some((k, last)) if *k == key => Some(std::mem::replace(last, seq)),
            hot => {
                if let Some((k, last)) = hot.take() {
                    if self.last.len() >= MAX_PUBLISHERS && !self.last.contains_key(&k) {
                        self.last.clear();
                    }
                    self.last.insert(k, last);
                }
                *hot = Some((key, seq));
                self.last.remove(&key)
            }
        };
        match before {
            Some(last) if seq > last => wanted_between(last, seq, every),
            _ => 0,
        }
    }

    /// Notes messages dropped on the way to the subscriber and reported
    /// as such (a direct subscription's full queue), oldest first, as if
    /// taken: returns how many it takes are missing before or between
    /// them. `None` (too many to have kept their numbers): forgets every
    /// publisher's last number instead, and returns 0.
    pub(crate) fn note_dropped(&mut self, dropped: Option<Vec<Dropped>>, every: u32) -> u64 {
        match dropped {
            Some(dropped) => dropped
                .into_iter()
                .map(|(sender, stream, seq)| self.note(sender, stream, seq, every))
                .sum(),
            None => {
                self.forget();
                0
            }
        }
    }

    /// Forgets every publisher's last number (losses up to here were
    /// reported another way, or dropped on purpose).
    pub(crate) fn forget(&mut self) {
        self.hot = None;
        self.last.clear();
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

    #[test]
    fn a_jump_counts_the_numbers_skipped_per_publisher() {
        let mut g = Gaps::default();
        assert_eq!(g.note(who(1), 0, 3, 1), 0, "the first sets the start");
        assert_eq!(g.note(who(1), 0, 4, 1), 0);
        assert_eq!(g.note(who(1), 0, 7, 1), 2);
        // Another publisher of the same process, and another process.
        assert_eq!(g.note(who(1), 1, 1, 1), 0);
        assert_eq!(g.note(who(2), 0, 10, 1), 0);
        assert_eq!(g.note(who(1), 1, 2, 1), 0);
        assert_eq!(g.note(who(2), 0, 12, 1), 1);
    }

    #[test]
    fn a_scaled_subscription_counts_only_the_samples_it_takes() {
        let mut g = Gaps::default();
        assert_eq!(g.note(who(1), 0, 3, 3), 0);
        assert_eq!(g.note(who(1), 0, 6, 3), 0);
        assert_eq!(g.note(who(1), 0, 15, 3), 2, "9 and 12");
        assert_eq!(wanted_between(0, 1, 4), 0);
        assert_eq!(wanted_between(4, 12, 4), 1);
    }

    #[test]
    fn a_number_going_back_or_repeating_starts_afresh_and_forget_forgets() {
        let mut g = Gaps::default();
        g.note(who(1), 0, 50, 1);
        assert_eq!(g.note(who(1), 0, 50, 1), 0);
        assert_eq!(g.note(who(1), 0, 1, 1), 0, "begun again");
        assert_eq!(g.note(who(1), 0, 2, 1), 0);
        g.forget();
        assert_eq!(g.note(who(1), 0, 9, 1), 0);
    }

    #[test]
    fn messages_dropped_and_reported_leave_a_loss_beside_them_counted() {
        // 190 taken; 191 and 192 dropped from a full queue (reported as
        // two); 193 lost when the streams moved; 194 taken.
        let mut g = Gaps::default();
        g.note(who(1), 0, 190, 1);
        assert_eq!(
            g.note_dropped(Some(vec![(who(1), 0, 191), (who(1), 0, 192)]), 1),
            0
        );
        assert_eq!(g.note(who(1), 0, 194, 1), 1, "193 is counted");
        // Missing between dropped ones counts, of each publisher.
        assert_eq!(
            g.note_dropped(
                Some(vec![(who(1), 0, 196), (who(2), 0, 5), (who(1), 0, 199)]),
                1
            ),
            3
        );
        // Too many dropped to keep their numbers: afresh.
        assert_eq!(g.note_dropped(None, 1), 0);
        assert_eq!(g.note(who(1), 0, 400, 1), 0);
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
            Some(vec![(who(1), 0, 2), (who(2), 0, 3), (who(1), 0, 4)])
        );
        // Only the wanted ones.
        assert_eq!(
            dropped_in_ring(&ring, 0, 6, |h| h.seq.0 % 3 == 0),
            Some(vec![(who(2), 0, 3), (who(1), 0, 6)])
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
            g.note(who(p), 0, 1, 1);
        }
        assert!(g.last.len() <= MAX_PUBLISHERS);
    }
}
