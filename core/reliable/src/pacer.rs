//! The pacing controller of a reliable stream (NAPA: Martin-Carrascosa et
//! al., "NAPA: an algorithm to auto-tune unicast reliable communications
//! over DDS"), sans-IO: fed the stream's sends and acknowledgements with
//! their times, it says when the next datagram may go.
//!
//! ```text
//!  on_send(now, seq, bytes) ──▶ ┌──────────────────────────────┐ ──▶ next_release()
//!  on_sack(now, through,        │ min RTT (windowed)           │     interval() = T
//!    known_through, missing) ─▶ │ delivery rate (windowed max) │     window()   = W
//!  on_ack(now, through, N,      │ K (datagrams per ack)        │
//!         loss)            ──▶  │ T, gain                      │
//!                               └──────────────────────────────┘
//! ```
//!
//! **The law** (the paper's): once per control period the writer's
//! occupancy N (datagrams sent, not yet acknowledged) is compared with a
//! band: below `low` the interval T between datagrams shrinks by the gain,
//! above W it grows by it, in between it stays, but for a small probe
//! towards a shorter T (without it a stream paced below the path's
//! capacity would measure only its own rate and stay there). W is
//! `RTT₁·C/size + α`: the datagrams the path holds at its capacity C over
//! the one-datagram round trip RTT₁, and α the stream may keep queued.
//!
//! **α grows slower than the stream's rate: √((RTT₁ + quantum)·C/size),
//! at least 2**,
//! where the paper has K − 1 (the datagrams its reader lets arrive before
//! it acknowledges, K about half the path's datagrams here, so ∝ C). At
//! the top of its band a stream keeps α datagrams in the bottleneck's
//! queue; several streams through one queue see the same queueing delay q,
//! so each runs at `x = α·size/q`. With α ∝ C that holds at any split (the
//! first stream kept 65 of 300 Mbit/s, the second 217, in
//! proof/testkit/tests/sim_pacing.rs); with α ∝ √C the only split where it
//! holds is the equal one (the same reason TCP Vegas' fixed α is fair).
//! A lone stream keeps that many datagrams queued: more than a fixed α at
//! a large W, so timer jitter and the gain's steps do not starve the link
//! (simulated 1 Gbit/s, 100 kB messages: 0.93 of it; 0.91 with a fixed α
//! of 4). The release quantum is in it because on a host the least round
//! trip (15 µs across a veth) is far below what one release bunches and a
//! busy host's wake-ups add: with RTT₁ alone W was 5-7 datagrams through
//! a 1 Gbit/s `tbf` and the paced stream kept 0.89-0.93 of the unpaced
//! one's throughput, with the quantum W is 9-13 and 0.96-0.98.
//!
//! **Measured, not configured** (the paper's future work): RTT₁ is the
//! least round trip seen over `rtt_window`; C the highest delivery rate
//! over `rate_window`, each sample the bytes acknowledged between a
//! datagram's send and its acknowledgement over the time between (robust
//! to acknowledgements that come in bursts); K the mean number of
//! datagrams one acknowledgement frees. The gain starts at `gain_start`
//! and decays to `gain_end` over `gain_decay`, and starts again when RTT₁
//! or C move by more than a quarter (a bottleneck that changed).
//!
//! **Loss is not always congestion**: a NACK that names a datagram lost
//! for the first time while the least round trip of the last RTT₁ has not
//! grown beyond RTT₁ (with `rtt_slack`) and the queue the band itself
//! allows (α datagrams) is taken for random loss and leaves T; one with a
//! grown round trip lengthens T by the gain at once. A hole named again by
//! every answer until its resend arrives is one loss, not one per answer;
//! and one late round trip is not a grown queue (what the reader holds
//! behind a hole it reports only when asked, up to K datagrams later).
//!
//! **A hole does not blind the estimates.** Acknowledgements are
//! cumulative, so behind a hole every later datagram waits for the
//! repair; at 1 Gbit/s with 1 % loss a hole is open about every round
//! trip. The reader says how far it holds what it has not named missing
//! (`AckNack::known_through`); those datagrams are delivered then
//! ([`Pacer::on_sack`]: a round trip and a rate sample each, counted once)
//! and are not in the occupancy N, which counts datagrams in flight (sent,
//! no news), not those held for a resend. Without this the simulator's
//! paced stream kept 0.15 of its loss-free rate at 1 Gbit/s with 1 %
//! loss; with it, about 0.9.
//!
//! Invariants: T stays within `[min_interval, max_interval]`; before the
//! first estimates T is zero (unpaced) and the window alone bounds the
//! stream; every table this keeps is bounded (`max_unacked` datagrams in
//! flight, one sample per control period in each window).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Settings of a [`Pacer`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerConfig {
    /// Below this occupancy T shrinks (the paper's `low`, 1).
    pub low: usize,
    /// The gain at the start and after the estimates move (the paper: 1;
    /// here 0.25 by default).
    pub gain_start: f64,
    /// The gain it decays to (the paper: 0.2; here 0.05).
    pub gain_end: f64,
    /// How long the decay takes (the paper: 30 s; here 10 s).
    pub gain_decay: Duration,
    /// The probe towards a shorter T while N is in the band, as a share of
    /// the gain.
    pub probe: f64,
    /// How long the least round trip is remembered.
    pub rtt_window: Duration,
    /// How long the highest delivery rate is remembered.
    pub rate_window: Duration,
    /// A round trip this much above RTT₁ (as a share) still counts as an
    /// empty queue: a loss then is not congestion.
    pub rtt_slack: f64,
    /// The shortest control period (the period is otherwise RTT₁).
    pub min_period: Duration,
    /// T never falls below this (timer resolution; zero: no floor).
    pub min_interval: Duration,
    /// T never grows above this.
    pub max_interval: Duration,
    /// How far behind its schedule a stream may catch up at once: a
    /// runtime whose timer woke late sends the datagrams whose slots passed
    /// meanwhile, up to this much of them, in one go (releases in quanta,
    /// so that timer slack does not cap the rate; zero: one slot).
    pub quantum: Duration,
    /// Most datagrams in flight whose send this remembers (the stream's
    /// window).
    pub max_unacked: usize,
    /// Most datagrams after which the stream asks its reader for an
    /// acknowledgement ([`Pacer::take_ask`]): the K of the law, fewer where
    /// the path holds few datagrams. A reader left alone acknowledges only
    /// every few hundred datagrams, and those K − 1 datagrams are queue
    /// the band allows.
    pub ask_every: usize,
    /// A fixed pace instead of the law, bytes per second (`None`: the
    /// law): each datagram's bytes at this rate before the next, whatever
    /// the acknowledgements say (losses do not slow it; the estimates are
    /// still kept for `tagwire stats`).
    pub fixed_rate: Option<f64>,
}

impl PacerConfig {
    /// The default settings, paced at `bytes_per_sec` instead of the law.
    pub fn fixed(bytes_per_sec: f64) -> Self {
        Self {
            fixed_rate: Some(bytes_per_sec),
            ..Self::default()
        }
    }
}

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            low: 1,
            // Gentler than the paper's 1 → 0.2 over 30 s: in the simulator
            // (proof/testkit/tests/sim_pacing.rs, 100 Mbit/s and 1 Gbit/s,
            // 8 KiB and 100 kB) the paper's gains kept T swinging by up to
            // ×1.9 per round trip for the first seconds, 84 % of the
            // bottleneck against 91 % with these, p50 latency alike.
            gain_start: 0.25,
            gain_end: 0.05,
            gain_decay: Duration::from_secs(10),
            probe: 0.125,
            rtt_window: Duration::from_secs(10),
            rate_window: Duration::from_secs(1),
            rtt_slack: 0.25,
            min_period: Duration::from_millis(1),
            min_interval: Duration::ZERO,
            max_interval: Duration::from_millis(100),
            // Linux's default timer slack is 50 µs; a thread that is not
            // real-time wakes later still on a busy host.
            quantum: Duration::from_micros(250),
            max_unacked: 1024,
            // Asking every 16 but only once per answer let the round trip
            // set K (58 at 100 Mbit/s: the band let 6 ms queue); asking
            // again every K, K at most 32 and about half the datagrams the
            // path holds, keeps that queue under half a round trip.
            ask_every: 32,
            fixed_rate: None,
        }
    }
}

/// What a [`Pacer`] estimates now (`tagwire stats`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PacerStats {
    /// T, the interval between two datagrams (zero: unpaced).
    pub interval: Duration,
    /// W, the occupancy band's top (`None` before the estimates).
    pub window: Option<usize>,
    /// RTT₁, the least round trip seen recently.
    pub min_rtt: Option<Duration>,
    /// C, the highest delivery rate seen recently, bytes per second.
    pub rate: Option<f64>,
    /// K, datagrams one acknowledgement frees on average.
    pub per_ack: f64,
    /// The gain now.
    pub gain: f64,
    /// Losses taken for random loss (T left alone).
    pub random_losses: u64,
    /// Losses taken for congestion (T lengthened).
    pub congestion_losses: u64,
}

/// One datagram in flight: when it went, and what had been delivered then.
#[derive(Debug, Clone, Copy)]
struct Sent {
    seq: u64,
    at: Instant,
    bytes: usize,
    delivered: u64,
    delivered_at: Instant,
    /// When the newest datagram acknowledged by then had been sent.
    first_sent: Instant,
    /// The reader said it holds it (out of order, behind a hole): counted
    /// delivered then, not again when the hole is repaired.
    sacked: bool,
}

/// The pacing controller of one reliable stream (see the module docs).
#[derive(Debug)]
pub struct Pacer {
    config: PacerConfig,
    flight: VecDeque<Sent>,
    /// Bytes acknowledged so far, and when the last acknowledgement came.
    delivered: u64,
    delivered_at: Option<Instant>,
    /// (when, sample): round trips and delivery rates, each window's
    /// extreme at the front end of its deque after pruning.
    rtts: VecDeque<(Instant, Duration)>,
    rates: VecDeque<(Instant, f64)>,
    /// The least round trip over the last RTT₁ (at least `min_period`):
    /// what the queue is now. One sample alone is not: the reader reports
    /// what it holds behind a hole only when asked, up to K datagram
    /// times after it got them.
    recent_rtts: VecDeque<(Instant, Duration)>,
    /// Mean datagram size and datagrams per acknowledgement (moving
    /// averages).
    size: f64,
    per_ack: f64,
    interval: Duration,
    next_release: Option<Instant>,
    next_control: Option<Instant>,
    /// When the gain last started again, and the estimates (RTT₁, C) it
    /// started from.
    gain_from: Option<(Instant, (Duration, f64))>,
    acks: Acks,
    stats: PacerStats,
}

/// What the pacer keeps about acknowledgements beside the estimates.
#[derive(Debug, Default)]
struct Acks {
    /// Datagrams sent since the stream last asked for one.
    unasked: usize,
    /// The last seq sent when a loss was reported: acknowledgements are
    /// cumulative, so every datagram up to it is acknowledged only once
    /// the hole is repaired, late by the repair. Their round trips and
    /// the delivery rate they show are not the path's, and are not
    /// sampled.
    late_through: u64,
    /// When the newest datagram acknowledged so far was sent.
    newest_sent: Option<Instant>,
    /// The occupancy at the law's last step: above the band, T grows only
    /// while the occupancy does not fall (a queue that drains is the last
    /// step working; stepping again on it would wind T up to its bound).
    last_occupancy: usize,
}

impl Pacer {
    /// A pacer with no estimates yet: unpaced until its first samples.
    pub fn new(config: PacerConfig) -> Self {
        Self {
            config,
            flight: VecDeque::new(),
            delivered: 0,
            delivered_at: None,
            rtts: VecDeque::new(),
            rates: VecDeque::new(),
            recent_rtts: VecDeque::new(),
            size: 0.0,
            per_ack: 1.0,
            interval: Duration::ZERO,
            next_release: None,
            next_control: None,
            gain_from: None,
            acks: Acks::default(),
            stats: PacerStats::default(),
        }
    }

    /// When the next datagram may go (`None`: now).
    pub fn next_release(&self) -> Option<Instant> {
        self.next_release
    }

    /// Whether a datagram may go at `now`.
    pub fn may_send(&self, now: Instant) -> bool {
        self.next_release.is_none_or(|t| t <= now)
    }

    /// Whether the stream should ask its reader for an acknowledgement now
    /// (every `ask_every` datagrams sent); counts the asking as done.
    pub fn take_ask(&mut self) -> bool {
        if self.acks.unasked < self.ask_every() {
            return false;
        }
        self.acks.unasked = 0;
        true
    }

    /// K, datagrams per request for an acknowledgement: the K − 1 the band
    /// lets queue are kept to about half of what the path holds (RTT₁·C),
    /// at least 2, at most `ask_every` (before the estimates: that).
    fn ask_every(&self) -> usize {
        let most = self.config.ask_every.max(2);
        let (Some(rtt), Some(rate)) = (self.min_rtt(), self.rate()) else {
            return most;
        };
        if self.size <= 0.0 {
            return most;
        }
        let bdp = rtt.as_secs_f64() * rate / self.size;
        ((bdp / 2.0) as usize + 1).clamp(2, most)
    }

    /// Datagram `seq` of `bytes` bytes went at `now`: the next may go one
    /// interval later.
    pub fn on_send(&mut self, now: Instant, seq: u64, bytes: usize) {
        self.acks.unasked += 1;
        self.size = if self.size == 0.0 {
            bytes as f64
        } else {
            self.size * 0.875 + bytes as f64 * 0.125
        };
        if self.flight.len() >= self.config.max_unacked {
            self.flight.pop_front();
        }
        self.flight.push_back(Sent {
            seq,
            at: now,
            bytes,
            delivered: self.delivered,
            delivered_at: self.delivered_at.unwrap_or(now),
            first_sent: self.acks.newest_sent.unwrap_or(now),
            sacked: false,
        });
        if let Some(rate) = self.config.fixed_rate {
            let t = bytes as f64 / rate.max(f64::MIN_POSITIVE);
            self.interval = Duration::try_from_secs_f64(t).unwrap_or(Duration::MAX / 2);
        }
        // Released from its slot, not from `now`: a late wake-up does not
        // slow the stream (the slots that passed, up to a quantum, are due
        // at once).
        let behind = self.interval.max(self.config.quantum);
        let slot_back = now.checked_sub(behind).unwrap_or(now);
        let base = self.next_release.map_or(now, |t| t.max(slot_back));
        self.next_release = (!self.interval.is_zero()).then(|| base + self.interval);
    }

    /// The reader said at `now` that it holds every seq in `through + 1 ..=
    /// known_through` but those `missing` (ascending): held out of order,
    /// behind a hole. Each is delivered now, a round trip and a rate
    /// sample like one acknowledged in order, so that a hole awaiting its
    /// resend holds back neither the estimates nor, counted as queue, the
    /// pace (call before [`Pacer::on_ack`] with the same acknowledgement).
    pub fn on_sack(&mut self, now: Instant, through: u64, known_through: u64, missing: &[u64]) {
        if known_through <= through {
            return;
        }
        let from = self.flight.partition_point(|s| s.seq <= through);
        let to = self.flight.partition_point(|s| s.seq <= known_through);
        for i in from..to {
            let Some(&s) = self.flight.get(i) else {
                break;
            };
            if s.sacked || missing.binary_search(&s.seq).is_ok() {
                continue;
            }
            if let Some(slot) = self.flight.get_mut(i) {
                slot.sacked = true;
            }
            self.delivered += s.bytes as u64;
            self.delivered_at = Some(now);
            if self.acks.newest_sent.is_none_or(|t| t < s.at) {
                self.acks.newest_sent = Some(s.at);
            }
            self.sample(now, s);
        }
    }

    /// The reader acknowledged every seq up to `through` at `now`, and the
    /// writer has `occupancy` datagrams in flight after it (sent, with no
    /// news: neither held by the reader nor named lost); `loss`: the
    /// acknowledgement named a datagram missing for the first time.
    pub fn on_ack(&mut self, now: Instant, through: u64, occupancy: usize, loss: bool) {
        let mut freed = 0usize;
        let mut newest: Option<Sent> = None;
        while self.flight.front().is_some_and(|s| s.seq <= through) {
            if let Some(s) = self.flight.pop_front() {
                freed += 1;
                if !s.sacked {
                    // (A sacked one was delivered when the reader said so.)
                    self.delivered += s.bytes as u64;
                    newest = Some(s);
                }
            }
        }
        if freed > 0 {
            self.per_ack = self.per_ack * 0.875 + freed as f64 * 0.125;
        }
        if let Some(s) = newest {
            self.delivered_at = Some(now);
            if self.acks.newest_sent.is_none_or(|t| t < s.at) {
                self.acks.newest_sent = Some(s.at);
            }
            if s.seq > self.acks.late_through {
                self.sample(now, s);
            }
        }
        if self.config.fixed_rate.is_some() {
            return;
        }
        if loss {
            // (Judged on the round trips before it.)
            self.on_loss(now);
            self.acks.late_through = self.flight.back().map_or(through, |s| s.seq);
        }
        if self.next_control.is_none_or(|t| now >= t) {
            self.control(now, occupancy);
        }
    }

    /// The interval T now.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The rate it releases at, bytes per second: a datagram per T (`None`
    /// while unpaced). Below the delivery-rate estimate C when C runs high
    /// (a bucket that lets bursts through at line rate).
    pub fn pace_rate(&self) -> Option<f64> {
        (!self.interval.is_zero() && self.size > 0.0)
            .then(|| self.size / self.interval.as_secs_f64())
    }

    /// W, the top of the occupancy band (`None` before the estimates).
    pub fn window(&self) -> Option<usize> {
        let (rtt, rate) = (self.min_rtt()?, self.rate()?);
        if self.size <= 0.0 {
            return None;
        }
        let bdp = rtt.as_secs_f64() * rate / self.size;
        Some((bdp + self.allowance()?).ceil().max(1.0) as usize)
    }

    /// α, the datagrams the band lets this stream keep queued (see the
    /// module docs; `None` before the estimates).
    fn allowance(&self) -> Option<f64> {
        let (rtt, rate) = (self.min_rtt()?, self.rate()?);
        let span = rtt + self.config.quantum;
        (self.size > 0.0).then(|| allowance(span.as_secs_f64() * rate / self.size))
    }

    /// What the pacer estimates now.
    pub fn stats(&self) -> PacerStats {
        PacerStats {
            interval: self.interval,
            window: self.window(),
            min_rtt: self.min_rtt(),
            rate: self.rate(),
            per_ack: self.per_ack,
            gain: self.stats.gain,
            ..self.stats
        }
    }

    /// A round trip and a delivery rate from datagram `s`, acknowledged at
    /// `now`.
    fn sample(&mut self, now: Instant, s: Sent) {
        let rtt = now.saturating_duration_since(s.at);
        let recent = self
            .min_rtt()
            .map_or(self.config.min_period, |r| r.max(self.config.min_period));
        push_windowed(&mut self.recent_rtts, now, rtt, recent, |a, b| a <= b);
        push_windowed(&mut self.rtts, now, rtt, self.config.rtt_window, |a, b| {
            a <= b
        });
        // Over the longer of the acknowledgements' span and the sends':
        // acknowledgements that come in a burst (a repaired hole, a reader
        // that answered late) would show a rate the path never had.
        let elapsed = now
            .saturating_duration_since(s.delivered_at)
            .max(s.at.saturating_duration_since(s.first_sent));
        if !elapsed.is_zero() {
            let rate = (self.delivered - s.delivered) as f64 / elapsed.as_secs_f64();
            push_windowed(
                &mut self.rates,
                now,
                rate,
                self.config.rate_window,
                |a, b| a >= b,
            );
        }
    }

    /// A NACK: congestion if the round trip grew beyond what the band
    /// itself lets queue (α datagrams at the rate seen), else random loss.
    fn on_loss(&mut self, now: Instant) {
        let (Some(min), Some(last), Some(rate), Some(alpha)) = (
            self.min_rtt(),
            self.recent_rtt(),
            self.rate(),
            self.allowance(),
        ) else {
            return;
        };
        let band = alpha * self.size / rate.max(1.0);
        if last.as_secs_f64() <= min.as_secs_f64() * (1.0 + self.config.rtt_slack) + band {
            self.stats.random_losses += 1;
            return;
        }
        self.stats.congestion_losses += 1;
        let g = self.gain(now);
        self.scale_interval(1.0 + g);
    }

    /// One step of the law (see the module docs).
    fn control(&mut self, now: Instant, occupancy: usize) {
        let (Some(rtt), Some(rate), Some(w)) = (self.min_rtt(), self.rate(), self.window()) else {
            return;
        };
        self.next_control = Some(now + rtt.max(self.config.min_period));
        let last = std::mem::replace(&mut self.acks.last_occupancy, occupancy);
        self.restart_gain_if_moved(now, rtt, rate);
        let g = self.gain(now);
        self.stats.gain = g;
        if self.interval.is_zero() {
            // First estimates: one datagram per its time at the rate seen.
            self.set_interval(self.size / rate.max(1.0));
            return;
        }
        let factor = if occupancy < self.config.low {
            1.0 - g / 2.0
        } else if occupancy > w {
            if occupancy >= last {
                1.0 + g
            } else {
                1.0
            }
        } else {
            1.0 - g * self.config.probe
        };
        self.scale_interval(factor);
    }

    /// The gain starts again when RTT₁ or C moved by more than a quarter
    /// since it last did.
    fn restart_gain_if_moved(&mut self, now: Instant, rtt: Duration, rate: f64) {
        let moved = self.gain_from.is_none_or(|(_, (r, c))| {
            let dr = (rtt.as_secs_f64() / r.as_secs_f64().max(1e-9) - 1.0).abs();
            let dc = (rate / c.max(1.0) - 1.0).abs();
            dr > 0.25 || dc > 0.25
        });
        if moved {
            self.gain_from = Some((now, (rtt, rate)));
        }
    }

    /// The gain at `now`: from `gain_start` to `gain_end`, linearly over
    /// `gain_decay` since it last started.
    fn gain(&self, now: Instant) -> f64 {
        let c = &self.config;
        let Some((from, _)) = self.gain_from else {
            return c.gain_start;
        };
        let f = if c.gain_decay.is_zero() {
            1.0
        } else {
            (now.saturating_duration_since(from).as_secs_f64() / c.gain_decay.as_secs_f64())
                .min(1.0)
        };
        c.gain_start + (c.gain_end - c.gain_start) * f
    }

    fn scale_interval(&mut self, factor: f64) {
        self.set_interval(self.interval.as_secs_f64() * factor);
    }

    /// T = `secs`, within the configured bounds (whatever the gains: a
    /// negative, infinite or NaN product is a bound, never a panic).
    fn set_interval(&mut self, secs: f64) {
        let (lo, hi) = (self.config.min_interval, self.config.max_interval);
        let t = Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(hi);
        self.interval = t.clamp(lo, hi.max(lo));
    }

    fn recent_rtt(&self) -> Option<Duration> {
        self.recent_rtts.front().map(|(_, r)| *r)
    }

    fn min_rtt(&self) -> Option<Duration> {
        self.rtts.front().map(|(_, r)| *r)
    }

    fn rate(&self) -> Option<f64> {
        self.rates.front().map(|(_, r)| *r)
    }
}

/// α for a stream that sends `datagrams` over RTT₁ and a release quantum
/// (see the module docs).
fn allowance(datagrams: f64) -> f64 {
    datagrams.max(0.0).sqrt().max(2.0)
}

/// Keeps in `q` the samples that can still be the extreme of the last
/// `window` (`better(a, b)`: `a` is at least as extreme as `b`): the front
/// is the extreme. Each sample is pushed once and popped once.
fn push_windowed<T: Copy>(
    q: &mut VecDeque<(Instant, T)>,
    now: Instant,
    v: T,
    window: Duration,
    better: impl Fn(T, T) -> bool,
) {
    while q.back().is_some_and(|(_, b)| better(v, *b)) {
        q.pop_back();
    }
    q.push_back((now, v));
    while q
        .front()
        .is_some_and(|(t, _)| now.saturating_duration_since(*t) > window)
    {
        q.pop_front();
    }
}

#[cfg(test)]
mod tests;
