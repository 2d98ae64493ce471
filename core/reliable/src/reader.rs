//! The receiving half of a stream: in-order, exactly-once delivery of
//! datagrams with ACK/NACK ([`Reader`]), or loss accounting for best-effort
//! streams ([`BestEffort`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tagwire_wire::datagram::{AckNack, MAX_MISSING_SPAN};

/// Settings of a [`Reader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderConfig {
    /// Acknowledge after this many new in-order datagrams (default 16).
    pub ack_every: u32,
    /// Least time between two NACKs (default 10 ms); a heartbeat is always
    /// answered.
    pub nack_interval: Duration,
    /// Most datagrams buffered out of order (default 1024); beyond that they
    /// are dropped and the writer resends them.
    pub max_buffered: usize,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            ack_every: 16,
            nack_interval: Duration::from_millis(10),
            max_buffered: 1024,
        }
    }
}

/// Counters of a [`Reader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReaderStats {
    /// New datagrams accepted (in order or buffered).
    pub received: u64,
    /// Datagrams already received (or older than the stream's start).
    pub duplicates: u64,
    /// Datagrams that arrived ahead of a gap and were buffered.
    pub out_of_order: u64,
    /// Datagrams dropped because the out-of-order buffer was full.
    pub dropped: u64,
    /// AckNacks sent that named missing seqs.
    pub nacks_sent: u64,
    /// AckNacks sent.
    pub acks_sent: u64,
    /// Seqs given up on because the writer no longer holds them.
    pub lost: u64,
}

/// What [`Reader::handle_data`] did with a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// It is the next in order: the caller delivers its own bytes now, without
    /// a copy, then drains [`Reader::poll_event`].
    Deliver,
    /// Buffered until the gap before it is filled.
    Buffered,
    /// Already received (or before the stream's start); ignored.
    Duplicate,
    /// Ahead of a gap with the buffer full; dropped (the writer will resend).
    Dropped,
}

/// The reliable receiver for one stream.
///
/// Invariants: every seq below `deliver_next` was delivered or given up;
/// every seq ≤ `received_through` was received or given up; the buffer holds
/// only seqs ≥ `deliver_next`, each at most once, and never more than
/// `max_buffered` of them. Delivery is in strictly increasing seq order.
#[derive(Debug)]
pub struct Reader {
    config: ReaderConfig,
    /// Set by the first datagram or heartbeat.
    started: bool,
    deliver_next: u64,
    received_through: u64,
    /// Highest seq known to exist (seen, or announced by a heartbeat).
    known_last: u64,
    buffer: BTreeMap<u64, Vec<u8>>,
    /// In-order datagrams since the last AckNack.
    since_ack: u32,
    /// An AckNack must be sent (a duplicate suggests a lost acknowledgement).
    ack_due: bool,
    /// A heartbeat awaits its answer, which always names missing seqs.
    heartbeat_due: bool,
    /// A gap appeared since the last NACK.
    nack_due: bool,
    last_nack: Option<Instant>,
    stats: ReaderStats,
}

impl Reader {
    /// A reader whose stream starts at the first datagram or heartbeat it
    /// sees (a late joiner asks for nothing older).
    pub fn new(config: ReaderConfig) -> Self {
        Self {
            config,
            started: false,
            deliver_next: 0,
            received_through: 0,
            known_last: 0,
            buffer: BTreeMap::new(),
            since_ack: 0,
            ack_due: false,
            heartbeat_due: false,
            nack_due: false,
            last_nack: None,
            stats: ReaderStats::default(),
        }
    }

    /// A reader that expects the stream from `first_seq` on (e.g. 1 when it
    /// knows it exists from the stream's creation).
    pub fn with_start(config: ReaderConfig, first_seq: u64) -> Self {
        let mut r = Self::new(config);
        r.start(first_seq);
        r
    }

    /// Takes datagram `seq` (its whole bytes). On [`Arrival::Deliver`] the
    /// caller hands `bytes` up at once, then drains [`Reader::poll_event`];
    /// only out-of-order datagrams are copied.
    pub fn handle_data(&mut self, _now: Instant, seq: u64, bytes: &[u8]) -> Arrival {
        if seq == u64::MAX {
            // No writer gets there; refusing it keeps every `seq + 1` below
            // from overflowing on a forged datagram.
            self.stats.dropped += 1;
            return Arrival::Dropped;
        }
        if !self.started {
            self.start(seq);
        }
        if seq < self.deliver_next || self.buffer.contains_key(&seq) {
            return self.duplicate();
        }
        self.known_last = self.known_last.max(seq);
        if seq == self.deliver_next {
            self.deliver_next += 1;
            self.received_through = self.received_through.max(seq);
            self.advance();
            self.stats.received += 1;
            self.since_ack += 1;
            return Arrival::Deliver;
        }
        if seq <= self.received_through {
            // Below the acknowledged prefix and not buffered: given up on.
            return self.duplicate();
        }
        if self.buffer.len() >= self.config.max_buffered {
            self.stats.dropped += 1;
            self.nack_due = true;
            return Arrival::Dropped;
        }
        self.buffer.insert(seq, bytes.to_vec());
        self.stats.received += 1;
        if seq == self.received_through + 1 {
            self.advance();
            self.since_ack += 1;
        } else {
            self.stats.out_of_order += 1;
            self.nack_due = true;
        }
        Arrival::Buffered
    }

    /// Takes the writer's heartbeat: answered by the next
    /// [`Reader::poll_transmit`], naming any seq up to `last` still missing.
    ///
    /// When `first` says the writer no longer holds seqs the reader still
    /// lacks, the reader gives up on them, and datagrams it buffered after
    /// that gap become deliverable: the caller drains
    /// [`Reader::poll_event`] after this call too, as after
    /// [`Reader::handle_data`]. (They are acknowledged by the answer, so the
    /// writer frees them and no later datagram may come to flush them.)
    pub fn handle_heartbeat(&mut self, _now: Instant, first: u64, last: u64) {
        if !self.started {
            self.start(last.saturating_add(1));
        }
        self.heartbeat_due = true;
        if first <= last {
            self.known_last = self.known_last.max(last);
        }
        // The writer no longer holds seqs before `first`: stop waiting for them.
        if first > self.received_through.saturating_add(1) {
            // O(buffered), not O(first): `first` may come from an attacker.
            let held = self.buffer.range(self.received_through + 1..first).count();
            self.stats.lost += first - self.received_through - 1 - held as u64;
            self.received_through = first - 1;
            self.advance();
        }
    }

    /// The next datagram in seq order that was buffered and is now
    /// deliverable.
    pub fn poll_event(&mut self) -> Option<Vec<u8>> {
        let (&k, _) = self.buffer.first_key_value()?;
        if k > self.received_through {
            // A gap before it is still awaited.
            self.skip_given_up();
            return None;
        }
        self.deliver_next = k + 1;
        let bytes = self.buffer.remove(&k);
        self.skip_given_up();
        bytes
    }

    /// The AckNack to send, if one is due: every `ack_every` datagrams, on a
    /// new gap (at most once per `nack_interval`), and after every heartbeat
    /// or duplicate.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<AckNack> {
        if !self.started {
            return None;
        }
        let has_gap = self.known_last > self.received_through;
        let nack_allowed = self
            .last_nack
            .is_none_or(|t| now >= t + self.config.nack_interval);
        let due = self.ack_due
            || self.heartbeat_due
            || self.since_ack >= self.config.ack_every.max(1)
            || (self.nack_due && has_gap && nack_allowed);
        if !due {
            return None;
        }
        // Naming missing seqs makes the writer resend them: rate-limited,
        // except in a heartbeat's answer (heartbeats are rate-limited already).
        let (missing, known_through) = if nack_allowed || self.heartbeat_due {
            (self.missing(), self.missing_span_end())
        } else {
            (Vec::new(), self.received_through)
        };
        self.ack_due = false;
        self.heartbeat_due = false;
        self.since_ack = 0;
        self.stats.acks_sent += 1;
        if !missing.is_empty() {
            self.nack_due = false;
            self.last_nack = Some(now);
            self.stats.nacks_sent += 1;
        }
        Some(AckNack {
            ack_through: self.received_through,
            missing,
            credit: None,
            known_through,
        })
    }

    /// Makes the next [`Reader::poll_transmit`] answer as it answers a
    /// heartbeat: at once, naming every seq still missing (e.g. the
    /// receiver has room again after refusing data).
    pub fn request_ack(&mut self) {
        self.heartbeat_due = true;
    }

    /// When a rate-limited NACK becomes allowed, if one is waiting.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.nack_due || self.known_last <= self.received_through {
            return None;
        }
        // Without a previous NACK it is due at once: the poll_transmit that
        // follows every input sends it.
        self.last_nack.map(|t| t + self.config.nack_interval)
    }

    /// Every seq ≤ this was received (or given up on).
    pub fn received_through(&self) -> u64 {
        self.received_through
    }

    /// The seq delivered next: every one before it was delivered or given
    /// up on. A reader made [`Reader::with_start`] this seq takes the
    /// stream over from this one (its out-of-order datagrams are not
    /// handed over: they were not acknowledged cumulatively, so the
    /// writer still holds them and resends what the new reader names).
    pub fn next_to_deliver(&self) -> u64 {
        self.deliver_next
    }

    /// Datagrams held out of order.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// The counters.
    pub fn stats(&self) -> ReaderStats {
        self.stats
    }

    fn start(&mut self, first: u64) {
        self.started = true;
        self.deliver_next = first;
        self.received_through = first.saturating_sub(1);
        self.known_last = self.received_through;
    }

    fn duplicate(&mut self) -> Arrival {
        self.stats.duplicates += 1;
        // The writer resent it: our acknowledgement was probably lost.
        self.ack_due = true;
        Arrival::Duplicate
    }

    /// Extends `received_through` over buffered seqs that follow it.
    fn advance(&mut self) {
        while self.buffer.contains_key(&(self.received_through + 1)) {
            self.received_through += 1;
        }
        self.skip_given_up();
    }

    /// With nothing buffered at or below `received_through`, delivery resumes
    /// after it (seqs given up on are skipped).
    fn skip_given_up(&mut self) {
        let below = self
            .buffer
            .first_key_value()
            .is_some_and(|(&k, _)| k <= self.received_through);
        if !below {
            self.deliver_next = self.deliver_next.max(self.received_through + 1);
        }
    }

    /// Seqs after `received_through`, up to what is known to exist and within
    /// one AckNack's span, that are not buffered.
    fn missing(&self) -> Vec<u64> {
        let from = self.received_through + 1;
        (from..=self.missing_span_end())
            .filter(|s| !self.buffer.contains_key(s))
            .collect()
    }

    /// The last seq [`Reader::missing`] looks at: every seq up to it is
    /// named missing or held (the writer learns which it holds).
    fn missing_span_end(&self) -> u64 {
        self.known_last
            .max(self.received_through)
            .min(self.received_through.saturating_add(MAX_MISSING_SPAN))
    }
}

impl Default for Reader {
    fn default() -> Self {
        Self::new(ReaderConfig::default())
    }
}

/// Counters of a [`BestEffort`] tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BestEffortStats {
    /// Seqs accepted.
    pub accepted: u64,
    /// Seqs skipped over (never seen before a newer one).
    pub lost: u64,
    /// Seqs rejected as older than or equal to the newest accepted (a late
    /// one was already counted in `lost`; it stays counted there).
    pub late: u64,
}

/// Accepts only newer seqs on an unreliable stream and counts the rest.
#[derive(Debug, Default)]
pub struct BestEffort {
    last: Option<u64>,
    stats: BestEffortStats,
}

impl BestEffort {
    /// A tracker that accepts whatever seq comes first (a late joiner:
    /// nothing before it counts as lost).
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker for a stream wanted from `first_seq` on (e.g. 1 when it is
    /// known from the stream's creation): seqs from `first_seq` up to the
    /// first one seen count as lost, so a first datagram lost or overtaken
    /// is not a silent loss. `first_seq` 0 is [`BestEffort::new`].
    pub fn with_start(first_seq: u64) -> Self {
        Self {
            last: first_seq.checked_sub(1),
            stats: BestEffortStats::default(),
        }
    }

    /// Whether to accept datagram `seq` (newer than every accepted one).
    pub fn handle_seq(&mut self, seq: u64) -> bool {
        match self.last {
            Some(last) if seq <= last => {
                self.stats.late += 1;
                false
            }
            last => {
                if let Some(last) = last {
                    self.stats.lost += seq - last - 1;
                }
                self.last = Some(seq);
                self.stats.accepted += 1;
                true
            }
        }
    }

    /// The first seq still accepted (0: any): a tracker made
    /// [`BestEffort::with_start`] this seq continues this one.
    pub fn next(&self) -> u64 {
        self.last.map_or(0, |l| l.saturating_add(1))
    }

    /// The counters.
    pub fn stats(&self) -> BestEffortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn in_order_datagrams_are_delivered_without_buffering() {
        let t = Instant::now();
        let mut r = Reader::with_start(ReaderConfig::default(), 1);
        for s in 1..=16 {
            assert_eq!(r.handle_data(t, s, &[s as u8]), Arrival::Deliver);
            assert_eq!(r.poll_event(), None);
        }
        assert_eq!(r.buffered(), 0);
        assert_eq!(
            r.poll_transmit(t),
            Some(AckNack {
                ack_through: 16,
                missing: vec![],
                credit: None,
                known_through: 16,
            })
        );
        assert_eq!(r.poll_transmit(t), None);
    }

    #[test]
    fn a_gap_is_nacked_promptly_but_rate_limited_and_filled_in_order() {
        let t = Instant::now();
        let mut r = Reader::with_start(ReaderConfig::default(), 1);
        assert_eq!(r.handle_data(t, 1, b"1"), Arrival::Deliver);
        assert_eq!(r.handle_data(t, 3, b"3"), Arrival::Buffered);
        assert_eq!(
            r.poll_transmit(t),
            Some(AckNack {
                ack_through: 1,
                missing: vec![2],
                credit: None,
                known_through: 3,
            })
        );
        assert_eq!(r.handle_data(t, 5, b"5"), Arrival::Buffered);
        assert_eq!(r.poll_transmit(t + ms(5)), None);
        assert_eq!(r.poll_timeout(), Some(t + ms(10)));
        assert_eq!(
            r.poll_transmit(t + ms(10)),
            Some(AckNack {
                ack_through: 1,
                missing: vec![2, 4],
                credit: None,
                known_through: 5,
            })
        );
        assert_eq!(r.handle_data(t, 2, b"2"), Arrival::Deliver);
        assert_eq!(r.poll_event().as_deref(), Some(&b"3"[..]));
        assert_eq!(r.poll_event(), None);
        assert_eq!(r.handle_data(t, 3, b"3"), Arrival::Duplicate);
        assert_eq!(r.stats().duplicates, 1);
        assert_eq!(r.stats().nacks_sent, 2);
    }

    #[test]
    fn a_nack_says_how_far_the_reader_holds() {
        let t = Instant::now();
        let mut r = Reader::with_start(ReaderConfig::default(), 1);
        for s in [1, 3, 4, 5] {
            r.handle_data(t, s, b"x");
        }
        let a = r.poll_transmit(t).unwrap();
        assert_eq!((a.ack_through, a.missing, a.known_through), (1, vec![2], 5));
        // Datagrams behind the hole bring no ack of their own (within the
        // NACK interval it would name nothing, and then say nothing past
        // its cumulative point either); a heartbeat's answer names the
        // hole again and says up to the last.
        for s in 6..=21 {
            r.handle_data(t, s, b"x");
        }
        assert_eq!(r.poll_transmit(t + ms(1)), None);
        r.handle_heartbeat(t, 1, 23);
        let a = r.poll_transmit(t + ms(2)).unwrap();
        assert_eq!((a.missing, a.known_through), (vec![2, 22, 23], 23));
    }

    #[test]
    fn a_heartbeat_that_gives_up_a_gap_makes_the_datagrams_after_it_deliverable() {
        // A reader that wants the stream from seq 1 (e.g. restarted) gets
        // seqs 3 and 4; the writer freed 1 and 2 long ago.
        let t = Instant::now();
        let mut r = Reader::with_start(ReaderConfig::default(), 1);
        assert_eq!(r.handle_data(t, 3, b"3"), Arrival::Buffered);
        assert_eq!(r.handle_data(t, 4, b"4"), Arrival::Buffered);
        assert_eq!(r.poll_event(), None);
        r.handle_heartbeat(t, 3, 4);
        assert_eq!(r.poll_event().as_deref(), Some(&b"3"[..]));
        assert_eq!(r.poll_event().as_deref(), Some(&b"4"[..]));
        assert_eq!(r.poll_event(), None);
        assert_eq!(r.stats().lost, 2);
        assert_eq!(
            r.poll_transmit(t),
            Some(AckNack {
                ack_through: 4,
                missing: vec![],
                credit: None,
                known_through: 4,
            })
        );
        assert_eq!(r.handle_data(t, 5, b"5"), Arrival::Deliver);
    }

    #[test]
    fn a_heartbeat_after_tail_loss_recovers_the_last_datagram() {
        let t = Instant::now();
        let mut r = Reader::with_start(ReaderConfig::default(), 1);
        for s in 1..=3 {
            r.handle_data(t, s, b"x");
        }
        // Seq 4 was lost and nothing follows it: only the heartbeat tells.
        assert_eq!(r.poll_transmit(t), None);
        r.handle_heartbeat(t, 1, 4);
        assert_eq!(
            r.poll_transmit(t),
            Some(AckNack {
                ack_through: 3,
                missing: vec![4],
                credit: None,
                known_through: 4,
            })
        );
        assert_eq!(r.handle_data(t, 4, b"4"), Arrival::Deliver);
        r.handle_heartbeat(t, 1, 4);
        assert_eq!(
            r.poll_transmit(t),
            Some(AckNack {
                ack_through: 4,
                missing: vec![],
                credit: None,
                known_through: 4,
            })
        );
    }

    #[test]
    fn a_late_joiner_starts_where_it_joined() {
        let t = Instant::now();
        let mut r = Reader::default();
        r.handle_heartbeat(t, 3, 40);
        assert_eq!(r.poll_transmit(t).unwrap().ack_through, 40);
        assert_eq!(r.handle_data(t, 41, b"a"), Arrival::Deliver);
        assert_eq!(r.handle_data(t, 12, b"old"), Arrival::Duplicate);

        let mut r = Reader::default();
        assert_eq!(r.handle_data(t, 7, b"a"), Arrival::Deliver);
        assert_eq!(r.handle_data(t, 6, b"a"), Arrival::Duplicate);
    }

    #[test]
    fn seqs_the_writer_gave_up_are_skipped() {
        let t = Instant::now();
        let mut r = Reader::with_start(ReaderConfig::default(), 1);
        r.handle_data(t, 1, b"1");
        r.handle_data(t, 3, b"3");
        r.handle_data(t, 6, b"6");
        r.handle_heartbeat(t, 5, 6);
        assert_eq!(r.stats().lost, 2);
        assert_eq!(r.poll_event().as_deref(), Some(&b"3"[..]));
        assert_eq!(r.handle_data(t, 5, b"5"), Arrival::Deliver);
        assert_eq!(r.poll_event().as_deref(), Some(&b"6"[..]));
        assert_eq!(r.poll_event(), None);
        assert_eq!(r.handle_data(t, 7, b"7"), Arrival::Deliver);
    }

    #[test]
    fn forged_extreme_seqs_neither_panic_nor_stall() {
        // Found by the `reassembly` fuzz target: a loop as long as `first`,
        // and `seq + 1` overflowing.
        let t = Instant::now();
        let mut r = Reader::with_start(ReaderConfig::default(), 1);
        r.handle_heartbeat(t, u64::MAX, 3);
        assert_eq!(r.stats().lost, u64::MAX - 1);
        assert_eq!(r.handle_data(t, u64::MAX, b""), Arrival::Dropped);
        assert!(r.poll_transmit(t).is_some());
    }

    #[test]
    fn the_out_of_order_buffer_is_bounded() {
        let t = Instant::now();
        let mut r = Reader::with_start(
            ReaderConfig {
                max_buffered: 2,
                ..ReaderConfig::default()
            },
            1,
        );
        assert_eq!(r.handle_data(t, 2, b""), Arrival::Buffered);
        assert_eq!(r.handle_data(t, 3, b""), Arrival::Buffered);
        assert_eq!(r.handle_data(t, 4, b""), Arrival::Dropped);
        assert_eq!(r.handle_data(t, 1, b""), Arrival::Deliver);
        assert_eq!(r.poll_event().map(|_| ()), Some(()));
        assert_eq!(r.poll_event().map(|_| ()), Some(()));
        assert_eq!(r.poll_event(), None);
        assert_eq!(r.handle_data(t, 4, b""), Arrival::Deliver);
    }

    #[test]
    fn best_effort_from_a_known_start_counts_what_came_before_the_first_seq_seen() {
        // Seq 4 overtook 1 ..= 3: they count as lost (and 2, arriving late,
        // as late), not as never sent.
        let mut b = BestEffort::with_start(1);
        assert!(b.handle_seq(4));
        assert!(!b.handle_seq(2));
        assert!(b.handle_seq(5));
        assert_eq!(
            b.stats(),
            BestEffortStats {
                accepted: 2,
                lost: 3,
                late: 1
            }
        );
        // Seq 1 first: nothing lost.
        let mut b = BestEffort::with_start(1);
        assert!(b.handle_seq(1));
        assert_eq!(b.stats().lost, 0);
        // Start 0 is a late joiner.
        let mut b = BestEffort::with_start(0);
        assert!(b.handle_seq(7));
        assert_eq!(b.stats().lost, 0);
        // A start beyond the first seq seen: older seqs are late.
        let mut b = BestEffort::with_start(10);
        assert!(!b.handle_seq(3));
        assert!(b.handle_seq(10));
        assert_eq!(
            b.stats(),
            BestEffortStats {
                accepted: 1,
                lost: 0,
                late: 1
            }
        );
    }

    #[test]
    fn best_effort_accepts_newer_seqs_and_counts_the_rest() {
        let mut b = BestEffort::new();
        assert!(b.handle_seq(5));
        assert!(b.handle_seq(6));
        assert!(b.handle_seq(9));
        assert!(!b.handle_seq(8));
        assert!(!b.handle_seq(9));
        assert_eq!(
            b.stats(),
            BestEffortStats {
                accepted: 3,
                lost: 2,
                late: 2
            }
        );
    }
}
