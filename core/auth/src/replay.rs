//! Replay windows: each counter of a sender accepted once.
//!
//! A [`ReplayWindow`] is a sliding bitmap of the last [`WINDOW`] counters
//! below the highest one accepted (as in IPsec, RFC 4303 §3.4.3, and
//! WireGuard): newer counters move it, older ones inside it are accepted
//! once, older ones below it are refused. Only a datagram whose tag
//! verified may be [`ReplayWindow::accept`]ed, so a forger cannot move it.
//!
//! [`ReplayWindows`] keeps one window per sender and epoch for senders not
//! known beforehand (discovery beacons), at most a fixed number of them.

use std::collections::HashMap;
use std::hash::Hash;

/// Counters tracked below the highest accepted. Datagrams of one daemon
/// come from several threads sharing one counter, and over several carriers
/// (unicast, multicast), so some arrive out of order; a window this wide
/// costs 1 KiB per sender.
pub const WINDOW: u64 = 8192;

const WORDS: usize = (WINDOW / 64) as usize;

/// Why a counter was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Replay {
    /// Accepted before.
    #[error("counter {0} seen before")]
    Replayed(u64),
    /// Below the window or the floor: too old to tell, refused.
    #[error("counter {0} too old")]
    TooOld(u64),
    /// From an earlier epoch of the sender than one already seen.
    #[error("epoch {0} is older than the sender's current one")]
    StaleEpoch(u64),
}

/// One sender's accepted counters (see the module docs).
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// Counters below this are refused (announced by the sender).
    floor: u64,
    /// The highest counter accepted, if any.
    top: Option<u64>,
    /// Bit `c % WINDOW` set: counter `c` (within the window) accepted.
    bits: Box<[u64; WORDS]>,
}

impl ReplayWindow {
    /// A window accepting counters from `floor` on.
    pub fn new(floor: u64) -> Self {
        Self {
            floor,
            top: None,
            bits: Box::new([0; WORDS]),
        }
    }

    /// Whether `counter` would be accepted (without recording it).
    pub fn check(&self, counter: u64) -> Result<(), Replay> {
        if counter < self.floor {
            return Err(Replay::TooOld(counter));
        }
        let Some(top) = self.top else {
            return Ok(());
        };
        if counter > top {
            return Ok(());
        }
        if top - counter >= WINDOW {
            return Err(Replay::TooOld(counter));
        }
        if self.bit(counter) {
            return Err(Replay::Replayed(counter));
        }
        Ok(())
    }

    /// Accepts `counter` once: call only for an authenticated datagram.
    pub fn accept(&mut self, counter: u64) -> Result<(), Replay> {
        self.check(counter)?;
        match self.top {
            Some(top) if counter <= top => {}
            Some(top) => {
                // Slide: forget the counters the window leaves behind.
                if counter - top >= WINDOW {
                    self.bits.fill(0);
                } else {
                    for c in top + 1..=counter {
                        self.set(c, false);
                    }
                }
                self.top = Some(counter);
            }
            None => self.top = Some(counter),
        }
        self.set(counter, true);
        Ok(())
    }

    fn bit(&self, c: u64) -> bool {
        let i = c % WINDOW;
        self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, c: u64, on: bool) {
        let i = c % WINDOW;
        let w = &mut self.bits[(i / 64) as usize];
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }
}

/// Windows for senders identified by `K`, each in its latest epoch, at most
/// `capacity` senders (the one heard from least recently is forgotten).
#[derive(Debug, Clone)]
pub struct ReplayWindows<K> {
    capacity: usize,
    tick: u64,
    senders: HashMap<K, (u64, ReplayWindow, u64)>,
}

impl<K: Eq + Hash + Clone> ReplayWindows<K> {
    /// Room for `capacity` senders (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            tick: 0,
            senders: HashMap::new(),
        }
    }

    /// Senders tracked.
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }

    /// Accepts `counter` of `sender` in `epoch` once: a newer epoch starts
    /// a new window, an older one than the sender's latest is refused.
    /// Call only for an authenticated datagram.
    pub fn accept(&mut self, sender: &K, epoch: u64, counter: u64) -> Result<(), Replay> {
        self.tick += 1;
        let tick = self.tick;
        if let Some((e, w, used)) = self.senders.get_mut(sender) {
            if epoch < *e {
                return Err(Replay::StaleEpoch(epoch));
            }
            if epoch > *e {
                *e = epoch;
                *w = ReplayWindow::new(0);
            }
            w.accept(counter)?;
            *used = tick;
            return Ok(());
        }
        if self.senders.len() >= self.capacity {
            let oldest = self
                .senders
                .iter()
                .min_by_key(|(_, (_, _, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.senders.remove(&k);
            }
        }
        let mut w = ReplayWindow::new(0);
        w.accept(counter)?;
        self.senders.insert(sender.clone(), (epoch, w, tick));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_counter_is_accepted_once_in_any_order() {
        let mut w = ReplayWindow::new(10);
        assert_eq!(w.accept(9), Err(Replay::TooOld(9)));
        for c in [12, 10, 11, 15, 13] {
            assert_eq!(w.accept(c), Ok(()));
        }
        for c in [10, 11, 12, 13, 15] {
            assert_eq!(w.accept(c), Err(Replay::Replayed(c)));
        }
        assert_eq!(w.accept(14), Ok(()));
        assert_eq!(w.accept(15 + WINDOW), Ok(()));
        assert_eq!(w.accept(15), Err(Replay::TooOld(15)));
        assert_eq!(w.accept(16), Ok(()), "still inside the window, never seen");
        assert_eq!(w.accept(16), Err(Replay::Replayed(16)));
    }

    #[test]
    fn a_sender_restart_starts_a_new_window_and_its_old_life_is_refused() {
        let mut ws = ReplayWindows::new(2);
        assert_eq!(ws.accept(&"a", 1, 5), Ok(()));
        assert_eq!(ws.accept(&"a", 1, 5), Err(Replay::Replayed(5)));
        assert_eq!(ws.accept(&"a", 2, 1), Ok(()));
        assert_eq!(ws.accept(&"a", 1, 6), Err(Replay::StaleEpoch(1)));
        ws.accept(&"b", 1, 1).unwrap();
        ws.accept(&"c", 1, 1).unwrap();
        assert_eq!(ws.len(), 2, "bounded");
    }

    proptest! {
        /// Against a set of everything accepted: a counter is accepted iff
        /// new, at or above the floor, and within the window of the top.
        #[test]
        fn the_window_matches_a_model(
            floor in 0u64..50,
            counters in proptest::collection::vec(0u64..(3 * WINDOW), 1..400),
        ) {
            let mut w = ReplayWindow::new(floor);
            let mut seen = std::collections::HashSet::new();
            let mut top: Option<u64> = None;
            for c in counters {
                let fresh = !seen.contains(&c)
                    && c >= floor
                    && top.is_none_or(|t| c > t || t - c < WINDOW);
                prop_assert_eq!(w.accept(c).is_ok(), fresh, "counter {}", c);
                if fresh {
                    seen.insert(c);
                    top = Some(top.map_or(c, |t| t.max(c)));
                }
            }
        }
    }
}
