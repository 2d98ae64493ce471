//! The outbound side's tuning: every number a forwarder's timing or
//! batching depends on, in one place, each with the reason it has its
//! value. Nothing else in `forward` holds such a constant.

use std::time::Duration;

/// The values a forwarder runs with (see [`TUNING`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tuning {
    /// Datagrams a reliable stream may have unacknowledged. Its reader
    /// acknowledges after a quarter of it (`tagwire_session`'s
    /// `ack_every`), so a stream keeps flowing between two
    /// acknowledgements; 1024 datagrams of 1472 bytes (1.5 MB) cover a
    /// 10 Gbit/s link with a 1 ms round trip. Measured: a 256-datagram
    /// window acknowledged every 64 was 8.7 % faster at 8 KiB on this
    /// 2-vCPU machine, but caps a stream near 1.2 GB/s on a 300 µs link,
    /// so it was not made the default; keeping in flight what the link
    /// needs is pacing's job (issue 41).
    pub(crate) window: usize,
    /// Most records a forwarder takes under one lock of its session. One
    /// lock, one clock read and one drain per group: per record those cost
    /// as much as the rest of a small message's path. 64 records is one
    /// segmented send's worth of small messages (`crate::train`), so what
    /// a group released goes out before the forwarder reads on.
    pub(crate) group: usize,
    /// Most bytes of records in one group: the same segmented send's worth
    /// for large messages (64 KiB, the largest GSO send).
    pub(crate) group_bytes: usize,
    /// How long a forwarder that read a record less than
    /// [`Tuning::busy`] ago polls its ring before it sleeps: a publisher
    /// sending flat out then finds it awake, so neither side pays a
    /// wake-up system call per message and trains grow longer. Not at a
    /// real-time policy (`ring_loop`'s `sleep` says why).
    pub(crate) busy_spin: Duration,
    /// See [`Tuning::busy_spin`]: how recent a read makes a forwarder busy.
    pub(crate) busy: Duration,
    /// How long closing the send ticket waits for a publisher that holds
    /// it: the publisher is between two `sendto`s, which take microseconds;
    /// one that holds it longer is presumed stalled or dead, and the
    /// forwarder sends the record itself.
    pub(crate) ticket_patience: Duration,
    /// Longest sleep without a timer. Route changes and stops wake the
    /// forwarder; this only bounds a sleep that missed its wake-up.
    pub(crate) idle_wake: Duration,
    /// How much nicer than the daemon a forwarder thread runs. With the
    /// send ticket, a forwarder's wake-up after a message its publisher
    /// sent is bookkeeping, and on two vCPUs the scheduler ran it before
    /// the inbound thread woken at the same time on the same CPU: remote
    /// round trip 256 B measured 1.56-1.64x raw UDP at the daemon's
    /// priority, 1.42-1.45x at +10 (three alternated runs each). A busy
    /// forwarder still gets the CPU whenever its publisher waits for it.
    pub(crate) nice: i32,
    /// Longest sleep of the replies watcher, which then looks whether the
    /// daemon stops.
    pub(crate) replies_watch: Duration,
}

/// The tuning every forwarder runs with.
pub(crate) const TUNING: Tuning = Tuning {
    window: 1024,
    group: 64,
    group_bytes: 64 << 10,
    busy_spin: Duration::from_micros(50),
    busy: Duration::from_millis(2),
    ticket_patience: Duration::from_millis(20),
    idle_wake: Duration::from_millis(250),
    nice: 10,
    replies_watch: Duration::from_millis(200),
};
