//! Acknowledgements handed to a busy forwarder instead of waited for.
//!
//! A reliable stream's acknowledgements arrive in the inbound thread (sealed
//! ones), the replies watcher or another busy forwarder (`crate::replies`);
//! the stream's session is the forwarder's, under the tag's lock. (Below,
//! "the inbound thread" stands for whichever of them got one.) A forwarder sending flat out holds that lock nearly all the
//! time (it reads its ring and encodes under it), so an inbound thread
//! that took the lock for each acknowledgement would sleep on it for most
//! of them, and the forwarder would pay a wake-up system call each time it
//! let go (8 KiB flat out: 6.5 k sleeps and as many wake-ups a second, a
//! tenth of the forwarder's CPU).
//!
//! While the forwarder is in its read loop ([`AckInbox::enter`] ..
//! [`AckInbox::leave`]) the inbound thread only queues an acknowledgement
//! ([`AckInbox::offer`]); the forwarder takes the queue under the tag's
//! lock each time it takes that lock, before anything else. Once it has
//! left the loop (idle, or parked waiting for room) the inbound thread
//! takes the queue and its own acknowledgement itself, under the lock.
//! Either way acknowledgements reach the session in arrival order
//! (the queue is taken whole, under the tag's lock) and none is left
//! behind:
//!
//! - `offer` pushes, then reads the flag; `leave` clears the flag, after
//!   which the forwarder takes the lock and the queue once more. Both are
//!   sequentially consistent: an `offer` that still sees the forwarder
//!   inside was queued before that last take; one that does not is taken
//!   by the inbound thread itself. (Reading the flag before pushing would
//!   not do: the forwarder could leave and take its last look between.)
//! - The queue is bounded ([`MAX_QUEUED`]): past it the inbound thread
//!   takes the lock itself (a forwarder stalled in a TCP write does not
//!   hold it), so a flood of acknowledgements costs bounded memory.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tagwire_wire::datagram::AckNack;

use crate::lock;

/// Most acknowledgements queued for a forwarder.
pub(crate) const MAX_QUEUED: usize = 256;

/// One acknowledgement datagram, as it arrived.
#[derive(Debug)]
pub(crate) struct Ack {
    pub(crate) now: Instant,
    /// The stream it acknowledges.
    pub(crate) stream: u64,
    /// Decoded once, by the thread that read it.
    pub(crate) ack: AckNack,
}

/// What the inbound thread does with an acknowledgement it offered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Queued for the forwarder, which is in its loop.
    Left,
    /// Take the queue ([`AckInbox::take`]) under the tag's lock yourself;
    /// the acknowledgement is in it.
    TakeIt,
}

/// A forwarder's queue of acknowledgements (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct AckInbox {
    inside: AtomicBool,
    queue: Mutex<VecDeque<Ack>>,
}

impl AckInbox {
    /// The forwarder enters its read loop: acknowledgements wait for it.
    pub(crate) fn enter(&self) {
        self.inside.store(true, Ordering::SeqCst);
    }

    /// The forwarder leaves it; it takes the queue once more after this,
    /// under the tag's lock.
    pub(crate) fn leave(&self) {
        self.inside.store(false, Ordering::SeqCst);
    }

    /// The inbound thread's acknowledgement: queued, and left to the
    /// forwarder if it is in its loop.
    pub(crate) fn offer(&self, ack: Ack) -> Offered {
        // (Queued first, then the flag read: see the module documentation.)
        let full = {
            let mut q = lock(&self.queue);
            q.push_back(ack);
            q.len() >= MAX_QUEUED
        };
        if !full && self.inside.load(Ordering::SeqCst) {
            Offered::Left
        } else {
            Offered::TakeIt
        }
    }

    /// Everything queued, oldest first (call under the tag's lock).
    pub(crate) fn take(&self) -> VecDeque<Ack> {
        let mut q = lock(&self.queue);
        if q.is_empty() {
            return VecDeque::new();
        }
        std::mem::take(&mut *q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    fn ack(n: u64) -> Ack {
        Ack {
            now: Instant::now(),
            stream: n,
            ack: AckNack::default(),
        }
    }

    #[test]
    fn an_idle_forwarder_leaves_its_acknowledgements_to_the_inbound_thread() {
        let inbox = AckInbox::default();
        assert_eq!(inbox.offer(ack(1)), Offered::TakeIt);
        let taken: Vec<u64> = inbox.take().into_iter().map(|a| a.stream).collect();
        assert_eq!(taken, [1]);
        assert!(inbox.take().is_empty());
    }

    #[test]
    fn a_forwarder_in_its_loop_takes_them_in_arrival_order() {
        let inbox = AckInbox::default();
        inbox.enter();
        for n in 0..5 {
            assert_eq!(inbox.offer(ack(n)), Offered::Left);
        }
        let taken: Vec<u64> = inbox.take().into_iter().map(|a| a.stream).collect();
        assert_eq!(taken, [0, 1, 2, 3, 4]);
        inbox.leave();
        assert_eq!(inbox.offer(ack(5)), Offered::TakeIt);
    }

    #[test]
    fn a_full_queue_is_taken_by_the_inbound_thread() {
        let inbox = AckInbox::default();
        inbox.enter();
        for n in 0..MAX_QUEUED - 1 {
            assert_eq!(inbox.offer(ack(n as u64)), Offered::Left);
        }
        assert_eq!(inbox.offer(ack(0)), Offered::TakeIt);
        assert_eq!(inbox.take().len(), MAX_QUEUED);
    }

    /// The protocol of the module documentation, with a forwarder
    /// entering and leaving its loop while another thread offers: every
    /// acknowledgement is taken exactly once, in order. (A stress test:
    /// the window in which a wrong order of push and flag read loses one
    /// is a few instructions wide, and this run may not hit it.)
    #[test]
    fn none_is_left_behind_when_the_forwarder_leaves_as_one_arrives() {
        const N: u64 = 20_000;
        let inbox = Arc::new(AckInbox::default());
        // The tag's lock, and what the session took, in order.
        let session = Arc::new(Mutex::new(Vec::<u64>::new()));
        let offered = Arc::new(AtomicU64::new(0));
        let take = |inbox: &AckInbox, session: &Mutex<Vec<u64>>| {
            let mut s = lock(session);
            for a in inbox.take() {
                s.push(a.stream);
            }
        };
        let inbound = {
            let (inbox, session, offered) = (inbox.clone(), session.clone(), offered.clone());
            std::thread::spawn(move || {
                for n in 0..N {
                    let a = ack(n);
                    if inbox.offer(a) == Offered::TakeIt {
                        take(&inbox, &session);
                    }
                    offered.store(n + 1, Ordering::SeqCst);
                }
            })
        };
        // The forwarder: in and out of its loop, taking the queue under
        // the lock inside it and once more after leaving it.
        while offered.load(Ordering::SeqCst) < N {
            inbox.enter();
            for _ in 0..3 {
                take(&inbox, &session);
                std::hint::spin_loop();
            }
            inbox.leave();
            take(&inbox, &session);
        }
        inbound.join().unwrap();
        // Nothing is taken after the offering thread is done: it was
        // all taken already.
        assert!(inbox.take().is_empty(), "left behind in the queue");
        let got = lock(&session).clone();
        assert_eq!(got, (0..N).collect::<Vec<_>>());
    }
}
