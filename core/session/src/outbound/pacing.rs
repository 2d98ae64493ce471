//! Pacing a tag's reliable streams (NAPA, `tagwire_reliable::pacer`): the
//! per-tag switch, and how far its publishers may run ahead of a paced
//! session. The pace itself holds `send_one` (`window.rs`) and the ticket
//! (`ticket.rs`).

use std::time::Instant;

use tagwire_reliable::pacer::{Pacer, PacerConfig};
use tagwire_wire::TagName;

use super::StreamTimer;
use crate::SendSession;

/// How long a paced tag's records may wait ahead of its session
/// ([`SendSession::paced_lead`]): enough for a forwarder that wakes late to
/// find the next records there, short beside a round trip through a
/// bottleneck's queue.
pub const PACED_LEAD: std::time::Duration = std::time::Duration::from_millis(2);

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
    /// what the session took: [`PACED_LEAD`] at the slowest stream's
    /// pace, at least 1 (a message longer than the lead on the wire waits
    /// behind one other, not two: at 100 Mbit/s and 200 kB that is 16 ms
    /// of each message's latency). A runtime holds them back there (the
    /// daemon's forwarder: `tagwire_shm::Gate::advance_within`), so that
    /// the queue pacing keeps off the network does not build in the ring
    /// instead. `None`: not paced, or no estimate yet.
    pub fn paced_lead(&self, tag: &TagName) -> Option<usize> {
        let o = self.out.get(tag)?;
        let rate = o
            .reliable
            .values()
            .filter_map(|s| s.pacer.as_ref()?.pace_rate())
            .reduce(f64::min)?;
        let n = rate * PACED_LEAD.as_secs_f64() / o.record_bytes.max(1.0);
        Some((n.ceil() as usize).max(1))
    }
}
