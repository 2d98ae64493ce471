//! The send ticket: lets a publisher transmit its own record's first copy.
//!
//! The daemon's forwarder reads a tag's ring and sends each record to the
//! other nodes. Its wake-up sits on the round trip of every message. The ticket
//! takes it off: while the forwarder is idle (it has read everything and has
//! room in every window), it **opens** the ticket for the next record index `p`
//! and writes in it where that record should go (up to [`TICKET_DESTS`]
//! destinations of [`TICKET_DEST_WORDS`] words each, whose meaning is the
//! caller's: the delivery session core's offer, `tagwire_session::OfferDest`;
//! this crate knows nothing of addresses or streams). The writer of record `p`, and only that
//! writer, may **claim** the ticket before it rings the doorbell, send the
//! datagrams itself and **finish**. When the forwarder wakes it **closes** the
//! ticket. Then it knows whether record `p` has already gone out, and with which
//! sequence numbers, so it keeps the record for resends without sending it
//! again.
//!
//! ```text
//! ticket area (ring header, offsets in bytes)
//! 256  state (AtomicU64): kind << 62 | record index
//!        kind 0 closed, 1 open, 2 claimed, 3 sent
//! 264  max_len << 8 | destination count (AtomicU64)
//! 272  destinations, TICKET_DESTS × TICKET_DEST_WORDS words (opaque; the
//!        daemon writes the session core's five, then the sealing counter
//!        it reserved for the publisher when it has a domain key)
//! ```
//!
//! **Trust.** A client can write anything here. The forwarder never reads the
//! destinations back: it remembers what it offered. The only thing it learns
//! from the area is the state word, so the worst a hostile client can do is
//! claim to have sent a record it did not send. The receiver then sees a gap,
//! and the sender's window repairs it as it repairs a lost datagram.

use std::time::{Duration, Instant};

use super::Ring;
use crate::backoff::Backoff;
use crate::sync::{fence, AtomicU64, Ordering};

/// Destinations a ticket holds.
pub const TICKET_DESTS: usize = 6;

pub(crate) const TICKET_OFF: usize = 256;
const COUNT_OFF: usize = TICKET_OFF + 8;
const DESTS_OFF: usize = TICKET_OFF + 16;
/// Words per destination.
pub const TICKET_DEST_WORDS: usize = 6;
const DEST_WORDS: usize = TICKET_DEST_WORDS;
/// End of the ticket area.
pub(crate) const TICKET_END: usize = DESTS_OFF + TICKET_DESTS * DEST_WORDS * 8;

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const CLAIMED: u64 = 2;
const SENT: u64 = 3;
const INDEX_MASK: u64 = (1 << 62) - 1;

fn word(kind: u64, index: u64) -> u64 {
    kind << 62 | (index & INDEX_MASK)
}

/// Where one record goes, in words only the caller interprets.
pub type TicketDest = [u64; TICKET_DEST_WORDS];

/// How a closed ticket ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Nobody claimed it: the forwarder sends the record as usual.
    Unclaimed,
    /// The record's writer sent it to every destination offered.
    Sent,
    /// The record's writer claimed it but did not finish in time (it stalled
    /// or died mid-send). Some datagrams may have gone out: the forwarder
    /// sends the record exactly as offered, so a copy the writer did send is
    /// a harmless duplicate.
    Abandoned,
}

/// The ticket of a ring (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct Ticket<'a> {
    ring: &'a Ring,
}

impl Ring {
    /// The ring's send ticket.
    pub fn ticket(&self) -> Ticket<'_> {
        Ticket { ring: self }
    }
}

impl<'a> Ticket<'a> {
    fn state(&self) -> &'a AtomicU64 {
        self.ring.atomic_u64(TICKET_OFF)
    }

    fn count(&self) -> &'a AtomicU64 {
        self.ring.atomic_u64(COUNT_OFF)
    }

    fn dest_word(&self, i: usize, w: usize) -> &'a AtomicU64 {
        self.ring.atomic_u64(DESTS_OFF + 8 * (DEST_WORDS * i + w))
    }

    /// Offers record `index` to its writer with these destinations, for a
    /// datagram of at most `max_len` bytes (the forwarder, while the ticket
    /// is closed). Returns false, offering nothing, when there are more than
    /// [`TICKET_DESTS`] or none.
    pub fn open(&self, index: u64, max_len: usize, dests: &[TicketDest]) -> bool {
        if self.ring.is_read_only() {
            return false;
        }
        if dests.is_empty() || dests.len() > TICKET_DESTS || index > INDEX_MASK {
            return false;
        }
        // Our previous offer is closed; a writer that claimed it and stalled
        // may still copy these words, and checks the state after its copy.
        fence(Ordering::Release);
        for (i, d) in dests.iter().enumerate() {
            for (w, v) in d.iter().enumerate() {
                self.dest_word(i, w).store(*v, Ordering::Relaxed);
            }
        }
        let max_len = (max_len as u64).min(u64::MAX >> 8);
        self.count()
            .store(max_len << 8 | dests.len() as u64, Ordering::Relaxed);
        self.state().store(word(OPEN, index), Ordering::Release);
        true
    }

    /// Withdraws the offer of record `index` (the forwarder, on waking).
    /// When the record's writer holds the claim, waits up to `patience` for
    /// it to finish, yielding and then sleeping (a forwarder of higher
    /// priority than the writer must not keep it off a shared CPU:
    /// `crate::backoff`). A state that names another record (a hostile
    /// client wrote it) counts as unclaimed.
    pub fn close(&self, index: u64, patience: Duration) -> Closed {
        let start = Instant::now();
        let mut backoff = Backoff::default();
        loop {
            let s = self.state().load(Ordering::Acquire);
            let kind = if s & INDEX_MASK == index & INDEX_MASK {
                s >> 62
            } else {
                CLOSED
            };
            if kind == CLAIMED && start.elapsed() < patience {
                backoff.wait();
                continue;
            }
            // A swap, not a compare-exchange: a client rewriting the word
            // cannot keep us here. What it replaced is what we go by (a claim
            // taken since our load counts as abandoned).
            let old = self.state().swap(word(CLOSED, 0), Ordering::AcqRel);
            if old & INDEX_MASK != index & INDEX_MASK {
                return Closed::Unclaimed;
            }
            return match old >> 62 {
                SENT => Closed::Sent,
                CLAIMED => Closed::Abandoned,
                _ => Closed::Unclaimed,
            };
        }
    }

    /// Takes the offer if it is for record `index` (the record's writer,
    /// after committing it and before ringing the doorbell).
    pub fn claim(&self, index: u64) -> Option<Claim<'a>> {
        if self.ring.is_read_only() {
            return None;
        }
        let open = word(OPEN, index);
        // A plain load first: the common case (closed, or another record's)
        // costs no write to the line.
        if self.state().load(Ordering::Relaxed) != open {
            return None;
        }
        self.state()
            .compare_exchange(
                open,
                word(CLAIMED, index),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .ok()?;
        // Copy the offer, then check it is still ours: a forwarder that gave
        // up on us (we stalled past its patience) may already be writing the
        // next offer into these words. Sending from a copy checked this way,
        // even late, repeats exactly what the forwarder sent for us.
        let count = self.count().load(Ordering::Relaxed);
        let n = ((count & 0xff) as usize).min(TICKET_DESTS);
        let mut dests = [None; TICKET_DESTS];
        for (i, d) in dests.iter_mut().enumerate().take(n) {
            *d = Some(self.dest(i));
        }
        fence(Ordering::Acquire);
        if self.state().load(Ordering::Relaxed) != word(CLAIMED, index) {
            return None;
        }
        Some(Claim {
            ticket: *self,
            index,
            max_len: usize::try_from(count >> 8).unwrap_or(usize::MAX),
            dests,
            n,
        })
    }

    fn dest(&self, i: usize) -> TicketDest {
        std::array::from_fn(|k| self.dest_word(i, k).load(Ordering::Relaxed))
    }
}

/// A claimed ticket: the holder sends to [`Claim::dests`] and then drops it
/// (which marks the record sent).
#[derive(Debug)]
pub struct Claim<'a> {
    ticket: Ticket<'a>,
    index: u64,
    max_len: usize,
    dests: [Option<TicketDest>; TICKET_DESTS],
    n: usize,
}

impl Claim<'_> {
    /// The largest datagram the forwarder would send the record in; a
    /// larger one is the forwarder's to send (see [`Claim::decline`]).
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Gives the offer back unused: the forwarder sends the record itself.
    pub fn decline(self) {
        let _ = self.ticket.state().compare_exchange(
            word(CLAIMED, self.index),
            word(CLOSED, 0),
            Ordering::Release,
            Ordering::Relaxed,
        );
        // Dropping would mark it sent.
        std::mem::forget(self);
    }

    /// The destinations offered, at most [`TICKET_DESTS`] (copied when
    /// the claim was taken).
    pub fn dests(&self) -> impl Iterator<Item = TicketDest> + '_ {
        self.dests[..self.n].iter().flatten().copied()
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        // Only our own claim becomes "sent": a forwarder that gave up on us
        // has closed (and maybe reopened) the ticket since.
        let _ = self.ticket.state().compare_exchange(
            word(CLAIMED, self.index),
            word(SENT, self.index),
            Ordering::Release,
            Ordering::Relaxed,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::RingShape;

    fn ring() -> Ring {
        Ring::create(
            "ticket-test",
            RingShape {
                slots: 8,
                payload: 64,
            },
        )
        .unwrap()
    }

    fn dests() -> Vec<TicketDest> {
        vec![
            [1, 2, 7400, 0xdead_beef_0123, 41, 7],
            [u64::MAX, 0, 7401, u64::MAX, 1, u64::MAX],
        ]
    }

    #[test]
    fn the_writer_of_the_offered_record_gets_the_destinations_and_the_forwarder_learns_it_sent() {
        let r = ring();
        let t = r.ticket();
        assert!(t.open(5, 1472, &dests()));
        assert!(t.claim(4).is_none(), "another record's writer");
        assert!(t.claim(6).is_none(), "another record's writer");
        let c = t.claim(5).expect("the offered record");
        assert_eq!(c.dests().collect::<Vec<_>>(), dests());
        assert!(t.claim(5).is_none(), "claimed once");
        drop(c);
        assert_eq!(t.close(5, Duration::ZERO), Closed::Sent);
        assert!(t.claim(5).is_none(), "closed");
    }

    #[test]
    fn an_unclaimed_ticket_closes_as_unclaimed_and_offers_nothing_after() {
        let r = ring();
        let t = r.ticket();
        assert_eq!(t.close(0, Duration::ZERO), Closed::Unclaimed);
        assert!(t.open(0, 1472, &dests()));
        assert_eq!(t.close(0, Duration::ZERO), Closed::Unclaimed);
        assert!(t.claim(0).is_none());
    }

    #[test]
    fn a_claim_held_past_the_patience_is_abandoned_and_its_late_finish_changes_nothing() {
        let r = ring();
        let t = r.ticket();
        assert!(t.open(9, 1472, &dests()));
        let c = t.claim(9).unwrap();
        let start = Instant::now();
        assert_eq!(t.close(9, Duration::from_millis(20)), Closed::Abandoned);
        assert!(start.elapsed() >= Duration::from_millis(20));
        // The forwarder offers the next record before the stalled writer ends.
        let mut next = dests();
        next[0][4] += 1;
        assert!(t.open(10, 1472, &next));
        assert_eq!(
            c.dests().collect::<Vec<_>>(),
            dests(),
            "the stalled writer still sends what it was offered"
        );
        drop(c);
        assert!(
            t.claim(10).is_some(),
            "the late finish left the new offer alone"
        );
    }

    #[test]
    fn a_claim_finished_while_the_forwarder_waits_closes_as_sent() {
        let r = ring();
        let t = r.ticket();
        assert!(t.open(3, 1472, &dests()));
        let c = t.claim(3).unwrap();
        std::thread::scope(|s| {
            let h = s.spawn(|| t.close(3, Duration::from_secs(10)));
            std::thread::sleep(Duration::from_millis(10));
            drop(c);
            assert_eq!(h.join().unwrap(), Closed::Sent);
        });
    }

    #[test]
    fn offers_of_no_or_too_many_destinations_are_refused() {
        let r = ring();
        let t = r.ticket();
        assert!(!t.open(0, 1472, &[]));
        let many = vec![dests()[0]; TICKET_DESTS + 1];
        assert!(!t.open(0, 1472, &many));
        assert!(t.claim(0).is_none());
        assert!(t.open(0, 1472, &many[..TICKET_DESTS]));
        assert_eq!(t.claim(0).unwrap().dests().count(), TICKET_DESTS);
    }

    #[test]
    fn a_sent_mark_for_another_record_is_not_believed() {
        let r = ring();
        let t = r.ticket();
        assert!(t.open(7, 1472, &dests()));
        t.state().store(word(SENT, 8), Ordering::Relaxed);
        assert_eq!(t.close(7, Duration::ZERO), Closed::Unclaimed);
    }

    #[test]
    fn a_declined_claim_leaves_the_record_to_the_forwarder() {
        let r = ring();
        let t = r.ticket();
        assert!(t.open(2, 9000, &dests()));
        let c = t.claim(2).unwrap();
        assert_eq!(c.max_len(), 9000);
        c.decline();
        assert_eq!(t.close(2, Duration::ZERO), Closed::Unclaimed);
    }

    #[test]
    fn a_hostile_count_is_clamped() {
        let r = ring();
        let t = r.ticket();
        assert!(t.open(0, 1472, &dests()));
        t.count().store(0x1ff, Ordering::Relaxed);
        assert_eq!(t.claim(0).unwrap().dests().count(), TICKET_DESTS);
    }
}
