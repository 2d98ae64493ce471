//! The writer's public types: its settings, what an acknowledgement told
//! it, its counters, and what it gives the I/O layer to send.

use std::time::Duration;

use thiserror::Error;

/// What one acknowledgement told a [`super::Writer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckReport {
    /// Datagrams it freed (acknowledged cumulatively).
    pub acked: usize,
    /// Datagrams it named missing that were in flight until then: losses
    /// seen for the first time. A hole named again by every answer until
    /// its resend arrives counts once (and once more if the resend is lost
    /// too).
    pub lost: usize,
}

/// Settings of a [`super::Writer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// Most unacknowledged datagrams held (default 256).
    pub window: usize,
    /// Heartbeat period while data is unacknowledged (default 50 ms).
    pub heartbeat_period: Duration,
    /// Resend a datagram neither acknowledged nor re-sent for this long
    /// (default 100 ms): recovers when heartbeats or NACKs are lost.
    pub resend_after: Duration,
    /// Ignore a NACK for a datagram (re)sent less than this long ago (default
    /// 10 ms): its copy may still be in flight, and resending it again feeds
    /// a storm of duplicates.
    pub nack_holdoff: Duration,
    /// Congestion window at the start, in datagrams (default 64, at most
    /// `window`).
    pub initial_cwnd: usize,
    /// Smallest congestion window (default 2).
    pub min_cwnd: usize,
    /// Longest the resend timer backs off to (default 1 s).
    pub max_resend_after: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            window: 256,
            heartbeat_period: Duration::from_millis(50),
            resend_after: Duration::from_millis(100),
            nack_holdoff: Duration::from_millis(10),
            initial_cwnd: 64,
            min_cwnd: 2,
            max_resend_after: Duration::from_secs(1),
        }
    }
}

/// Counters of a [`super::Writer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriterStats {
    /// Datagrams sent for the first time.
    pub sent: u64,
    /// Datagrams sent again (after a NACK or the resend timer).
    pub retransmitted: u64,
    /// Heartbeats sent.
    pub heartbeats: u64,
    /// Datagrams freed by a cumulative acknowledgement.
    pub acked: u64,
    /// Losses that shrank the congestion window (at most one per window of
    /// data) and resend timer expiries.
    pub congestion_events: u64,
    /// Times the resend timer fired (no acknowledgement progress).
    pub timeouts: u64,
}

/// [`super::Writer::send`] failed: `window` datagrams are unacknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("send window full ({window} unacknowledged datagrams)")]
pub struct WindowFull {
    /// The window size.
    pub window: usize,
}

/// Something the I/O layer must send to the stream's reader. The destination,
/// priority and DSCP are the stream's, which the I/O layer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transmit<'a> {
    /// A retransmission of datagram `seq`.
    Data {
        /// Its seq.
        seq: u64,
        /// The datagram as first encoded.
        bytes: &'a [u8],
    },
    /// A heartbeat to encode as a `Heartbeat` datagram.
    Heartbeat {
        /// Oldest seq held.
        first: u64,
        /// Last seq sent.
        last: u64,
    },
}
