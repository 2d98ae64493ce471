//! Pacing a tag's reliable streams (NAPA, `tagwire_reliable::pacer`): the
//! per-tag switch, and how far its publishers may run ahead of a paced
//! session. The pace itself holds `send_one` (`window.rs`) and the ticket
//! (`ticket.rs`).

use std::time::{Duration, Instant};

use tagwire_reliable::pacer::{Pacer, PacerConfig};
use tagwire_wire::TagName;

use super::StreamTimer;
use crate::SendSession;

/// The longest a paced tag's records may wait ahead of its session
/// ([`SendSession::paced_lead`]), and the lead before anything is known
/// of how late its streams go: enough for a forwarder that wakes late to
/// find the next records there, short beside a round trip through a
/// bottleneck's queue.
pub const PACED_LEAD: Duration = Duration::from_millis(2);
/// The shortest lead, however punctual the streams.
pub const PACED_LEAD_MIN: Duration = Duration::from_micros(250);

/// How late a paced stream's datagrams go after the pace released them:
/// the runtime woken after the release, or the next record handed in
/// after it (the publisher was behind). A moving mean and mean deviation
/// (as a round-trip timer keeps them); the lead that covers them is the
/// mean plus four deviations, within [`PACED_LEAD_MIN`]..=[`PACED_LEAD`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Lateness {
    mean: f64,
    dev: f64,
    samples: u32,
}

/// Samples before the estimate replaces [`PACED_LEAD`].
const LATE_SAMPLES: u32 = 16;

impl Lateness {
    /// One release that went `late` after it was due (counted up to
    /// [`PACED_LEAD`]: an idle publisher is not a late one).
    pub(crate) fn sample(&mut self, late: Duration) {
        let x = late.min(PACED_LEAD).as_secs_f64();
        if self.samples == 0 {
            self.mean = x;
            self.dev = x / 2.0;
        } else {
            self.dev = 0.75 * self.dev + 0.25 * (x - self.mean).abs();
            self.mean = 0.875 * self.mean + 0.125 * x;
        }
        self.samples = self.samples.saturating_add(1);
    }

    /// How far ahead the stream's publishers should be.
    pub(crate) fn lead(&self) -> Duration {
        if self.samples < LATE_SAMPLES {
            return PACED_LEAD;
        }
        Duration::from_secs_f64(self.mean + 4.0 * self.dev).clamp(PACED_LEAD_MIN, PACED_LEAD)
    }
}

impl super::Outbound {
    /// A record of `len` bytes comes while nothing waits: its size goes
    /// into the mean record size, and a paced stream whose release has
    /// passed went idle for want of it (its publisher's lead too short,
    /// or its publisher slower than the pace).
    pub(super) fn note_record(&mut self, now: Instant, len: usize) {
        let len = len.max(1) as f64;
        self.record_bytes = if self.record_bytes == 0.0 {
            len
        } else {
            self.record_bytes * 0.875 + len * 0.125
        };
        for s in self.reliable.values_mut() {
            if let Some(t) = s.pacer.as_ref().and_then(|p| p.next_release()) {
                if t < now {
                    s.late.sample(now - t);
                }
            }
        }
    }
}

impl SendSession {
    /// Paces `tag`'s reliable streams with `pacing` from now on (`None`:
    /// unpaced); a change starts each stream's controller afresh. A tag
    /// without routes yet keeps it for its first (other tags take the
    /// session's [`crate::Config::pacing`]).
    pub fn set_pacing(&mut self, now: Instant, tag: &TagName, pacing: Option<PacerConfig>) {
        let batch_min = self.config.batch.min;
        let o = self
            .out
            .entry(tag.clone())
            .or_insert_with(|| super::Outbound::new(batch_min, pacing));
        if o.pacing == pacing {
            return;
        }
        o.pacing = pacing;
        for s in o.reliable.values_mut() {
            s.pacer = pacing.map(Pacer::new);
            s.timers.stop(StreamTimer::Pace);
            s.writer.set_paced(pacing.is_some());
        }
        self.pump(now, tag);
    }

    /// For a paced tag, how many records its publishers may be ahead of
    /// what the session took: as many as fill the lead its streams'
    /// lateness asks for (the longest of them; [`PACED_LEAD`] until it is
    /// known) at the slowest stream's pace, after what the session itself
    /// still has to release. While that alone takes longer than the lead
    /// (a message longer on the wire than the lead), none: the next is
    /// written only within the lead of the session's running dry, so that
    /// a large message waits behind the one on the wire, not behind a
    /// second one in the ring as well (at 100 Mbit/s and 200 kB, 16 ms of
    /// each message's latency); otherwise at least 1. A runtime holds them
    /// back there (the daemon's forwarder: `tagwire_shm::Gate::advance_within`),
    /// so that the queue pacing keeps off the network does not build in
    /// the ring instead. `None`: not paced, or no estimate yet.
    pub fn paced_lead(&self, tag: &TagName) -> Option<usize> {
        let o = self.out.get(tag)?;
        let rate = o
            .reliable
            .values()
            .filter_map(|s| s.pacer.as_ref()?.pace_rate())
            .reduce(f64::min)?;
        let lead = o
            .reliable
            .values()
            .filter(|s| s.pacer.is_some())
            .map(|s| s.late.lead())
            .max()?;
        let left = o.paced_backlog();
        if left >= lead {
            return Some(0);
        }
        let n = rate * (lead - left).as_secs_f64() / o.record_bytes.max(1.0);
        Some((n.ceil() as usize).max(1))
    }
}

impl super::Outbound {
    /// How long the slowest paced stream takes, at its pace, to release
    /// the datagrams the session holds and has not sent it yet.
    fn paced_backlog(&self) -> Duration {
        self.reliable
            .iter()
            .filter_map(|(node, s)| {
                let t = s.pacer.as_ref()?.interval();
                let unsent: usize = self
                    .pending
                    .iter()
                    .filter(|p| !p.skip.contains(node))
                    .map(|p| {
                        let sent = p
                            .sent
                            .iter()
                            .find(|(n, id, _)| n == node && *id == s.id)
                            .map_or(0, |e| e.2);
                        p.datagrams.saturating_sub(sent)
                    })
                    .sum();
                Some(t.saturating_mul(u32::try_from(unsent).unwrap_or(u32::MAX)))
            })
            .max()
            .unwrap_or(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn the_lead_is_the_full_one_until_lateness_is_known() {
        let mut l = Lateness::default();
        assert_eq!(l.lead(), PACED_LEAD);
        for _ in 0..LATE_SAMPLES - 1 {
            l.sample(us(10));
        }
        assert_eq!(l.lead(), PACED_LEAD);
        l.sample(us(10));
        assert_eq!(l.lead(), PACED_LEAD_MIN, "punctual: the shortest");
    }

    #[test]
    fn the_lead_covers_lateness_and_its_spread_and_comes_back_down() {
        let mut l = Lateness::default();
        for i in 0..200 {
            // 300 µs, every fourth 700 µs.
            l.sample(if i % 4 == 0 { us(700) } else { us(300) });
        }
        let lead = l.lead();
        assert!(lead > us(700) && lead < us(1700), "{lead:?}");
        // A late burst (a preempted forwarder) raises it, capped ...
        for _ in 0..10 {
            l.sample(Duration::from_millis(50));
        }
        assert_eq!(l.lead(), PACED_LEAD);
        // ... and punctual releases bring it down again.
        for _ in 0..100 {
            l.sample(us(100));
        }
        assert!(l.lead() < us(400), "{:?}", l.lead());
    }
}
