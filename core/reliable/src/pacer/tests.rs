//! The pacer against a model of a bottleneck, on a virtual clock: a FIFO
//! queue served at a rate that may change, a fixed propagation delay each
//! way, a reader that acknowledges every K datagrams, and a writer that
//! sends as soon as its window and (when paced) the pacer let it.

use super::*;

const SIZE: usize = 1472;

fn mbit(m: f64) -> f64 {
    m * 1e6 / 8.0
}

/// What a run measured after its warm-up.
#[derive(Debug)]
struct Outcome {
    /// Bytes acknowledged per second, per phase (after each phase's
    /// settling time).
    goodput: Vec<f64>,
    /// Time datagrams waited in the bottleneck's queue, per phase, sorted.
    queued: Vec<Vec<Duration>>,
    stats: Option<PacerStats>,
}

impl Outcome {
    fn p99(&self, phase: usize) -> Duration {
        let q = &self.queued[phase];
        q[(q.len() * 99 / 100).min(q.len() - 1)]
    }
}

/// A run: `phases` of (length, bottleneck rate in bytes/s); what each
/// phase's last `measure` sees is measured. `loss_every`: every n-th
/// acknowledgement names a missing datagram (random loss: the path's
/// delay does not change).
fn run(
    pacer: Option<Pacer>,
    phases: &[(Duration, f64)],
    measure: Duration,
    k: u64,
    loss_every: Option<u64>,
) -> Outcome {
    let t0 = Instant::now();
    let delay = Duration::from_micros(100);
    let window = 1024u64;
    let mut pacer = pacer;
    let mut now = t0;
    let (mut sent, mut acked) = (0u64, 0u64);
    let mut free_at = t0;
    let mut acks: VecDeque<(Instant, u64)> = VecDeque::new();
    let mut out = Outcome {
        goodput: Vec::new(),
        queued: Vec::new(),
        stats: None,
    };
    let mut phase_end = t0;
    let mut n_acks = 0u64;
    for &(len, rate) in phases {
        let begin = phase_end;
        phase_end = begin + len;
        let from = phase_end - measure;
        let (mut bytes_acked, mut queued) = (0u64, Vec::new());
        loop {
            let can_send = sent - acked < window;
            let send_at = if can_send {
                pacer
                    .as_ref()
                    .and_then(Pacer::next_release)
                    .map_or(now, |t| t.max(now))
            } else {
                phase_end + Duration::from_secs(3600)
            };
            let ack_at = acks.front().map(|(t, _)| *t);
            let next = ack_at.map_or(send_at, |a| a.min(send_at));
            if next >= phase_end {
                break;
            }
            now = next;
            if ack_at.is_some_and(|a| a <= send_at) {
                let Some((_, seq)) = acks.pop_front() else {
                    break;
                };
                if now >= from {
                    bytes_acked += (seq - acked) * SIZE as u64;
                }
                acked = seq;
                n_acks += 1;
                let loss = loss_every.is_some_and(|n| n_acks % n == 0);
                if let Some(p) = pacer.as_mut() {
                    p.on_ack(now, acked, (sent - acked) as usize, loss);
                }
                continue;
            }
            sent += 1;
            let start = now.max(free_at);
            free_at = start + Duration::from_secs_f64(SIZE as f64 / rate);
            if now >= from {
                queued.push(start - now);
            }
            if sent % k == 0 {
                acks.push_back((free_at + delay + delay, sent));
            }
            if let Some(p) = pacer.as_mut() {
                p.on_send(now, sent, SIZE);
            }
        }
        now = phase_end;
        queued.sort();
        out.goodput.push(bytes_acked as f64 / measure.as_secs_f64());
        out.queued.push(queued);
    }
    out.stats = pacer.map(|p| p.stats());
    out
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn pacer() -> Pacer {
    Pacer::new(PacerConfig {
        gain_decay: secs(2),
        ..PacerConfig::default()
    })
}

#[test]
fn a_paced_stream_keeps_the_bottleneck_busy_without_filling_its_queue() {
    let phases = [(secs(6), mbit(100.0))];
    let paced = run(Some(pacer()), &phases, secs(3), 8, None);
    let unpaced = run(None, &phases, secs(3), 8, None);
    let service = Duration::from_secs_f64(SIZE as f64 / mbit(100.0));
    let w = paced.stats.and_then(|s| s.window).unwrap_or(0);
    // The window alone keeps 1024 datagrams queued: 120 ms.
    assert!(unpaced.p99(0) > service * 900, "{:?}", unpaced.p99(0));
    // Paced: within the band's top, at (nearly) the full rate.
    assert!(
        paced.p99(0) <= service * (w as u32 + 2),
        "{:?} W {w}",
        paced.p99(0)
    );
    assert!(paced.p99(0) * 20 < unpaced.p99(0));
    assert!(
        paced.goodput[0] >= 0.9 * mbit(100.0),
        "{}",
        paced.goodput[0]
    );
    assert!(unpaced.goodput[0] >= 0.99 * mbit(100.0));
}

#[test]
fn the_pace_follows_a_bottleneck_that_changes() {
    let phases = [
        (secs(5), mbit(100.0)),
        (secs(5), mbit(30.0)),
        (secs(5), mbit(300.0)),
    ];
    let o = run(Some(pacer()), &phases, secs(2), 8, None);
    for (i, (_, rate)) in phases.iter().enumerate() {
        let service = Duration::from_secs_f64(SIZE as f64 / rate);
        assert!(
            o.goodput[i] >= 0.85 * rate,
            "phase {i}: {} of {rate}",
            o.goodput[i]
        );
        assert!(o.p99(i) <= service * 40, "phase {i}: {:?}", o.p99(i));
    }
    let s = o.stats.unwrap_or_default();
    let rate = s.rate.unwrap_or(0.0);
    assert!(
        rate > 0.8 * mbit(300.0) && rate < 1.2 * mbit(300.0),
        "{rate}"
    );
}

#[test]
fn random_loss_does_not_cut_the_rate() {
    let phases = [(secs(6), mbit(100.0))];
    let clean = run(Some(pacer()), &phases, secs(3), 8, None);
    let lossy = run(Some(pacer()), &phases, secs(3), 8, Some(20));
    let s = lossy.stats.unwrap_or_default();
    assert!(s.random_losses > 100, "{s:?}");
    // Most are told apart (those at the top of the band's oscillation,
    // where the queue briefly exceeds K - 1 datagrams, look like
    // congestion); the rate is what must not collapse.
    assert!(s.random_losses > 2 * s.congestion_losses, "{s:?}");
    assert!(
        lossy.goodput[0] >= 0.9 * clean.goodput[0],
        "{} vs {}",
        lossy.goodput[0],
        clean.goodput[0]
    );
}

#[test]
fn a_loss_with_a_grown_round_trip_is_congestion_and_lengthens_the_interval() {
    let t0 = Instant::now();
    let us = Duration::from_micros;
    let mut p = pacer();
    // Round trips of 300 us at 1472 bytes per 100 us.
    for seq in 1..=40u64 {
        let at = t0 + us(100 * seq);
        p.on_send(at, seq, SIZE);
        p.on_ack(at + us(300), seq, 3, false);
    }
    let before = p.interval();
    assert!(!before.is_zero());
    // A NACK whose round trip is as short: random loss, T stays.
    p.on_send(t0 + us(4200), 41, SIZE);
    p.on_ack(t0 + us(4500), 41, 3, true);
    assert_eq!(p.stats().random_losses, 1);
    // One round trip three times as long is not yet a queue (the reader
    // reports what it holds behind a hole only when asked): random.
    p.on_send(t0 + us(4600), 42, SIZE);
    p.on_ack(t0 + us(5500), 42, 3, true);
    assert_eq!(p.stats().random_losses, 2);
    assert_eq!(p.stats().congestion_losses, 0);
    // Every round trip that long for longer than RTT₁ (and the control
    // period): the queue grew, and a NACK then is congestion.
    for seq in 43..=60u64 {
        let at = t0 + us(5000 + 100 * (seq - 43));
        p.on_send(at, seq, SIZE);
        p.on_ack(at + us(900), seq, 3, false);
    }
    let t = p.interval();
    p.on_send(t0 + us(6800), 61, SIZE);
    p.on_ack(t0 + us(7700), 61, 3, true);
    assert_eq!(p.stats().congestion_losses, 1);
    assert!(p.interval() > t, "{:?} -> {:?}", t, p.interval());
}

#[test]
fn a_new_pacer_lets_everything_go_until_it_has_estimates() {
    let t0 = Instant::now();
    let mut p = Pacer::new(PacerConfig::default());
    assert!(p.may_send(t0) && p.next_release().is_none());
    assert_eq!((p.window(), p.interval()), (None, Duration::ZERO));
    for seq in 1..=100 {
        p.on_send(t0, seq, SIZE);
        assert!(p.may_send(t0));
    }
}

#[test]
fn the_gain_decays_and_starts_again_when_the_bottleneck_moves() {
    let t0 = Instant::now();
    let mut p = pacer();
    let us = Duration::from_micros;
    let mut seq = 0u64;
    let mut feed = |p: &mut Pacer, from: Duration, to: Duration, per: Duration| {
        let mut t = from;
        while t < to {
            seq += 1;
            p.on_send(t0 + t, seq, SIZE);
            p.on_ack(t0 + t + us(300), seq, 3, false);
            t += per;
        }
    };
    feed(&mut p, Duration::ZERO, secs(3), us(100));
    let c = PacerConfig::default();
    let settled = p.stats().gain;
    assert!((settled - c.gain_end).abs() < 1e-9, "{settled}");
    // The delivery rate falls to a third: the estimates moved.
    feed(
        &mut p,
        secs(3),
        secs(4) + Duration::from_millis(100),
        us(300),
    );
    let mid = (c.gain_start + c.gain_end) / 2.0;
    assert!(p.stats().gain > mid, "{}", p.stats().gain);
}

#[test]
fn the_windowed_extremes_forget_old_samples() {
    let t0 = Instant::now();
    let mut q = VecDeque::new();
    let le = |a: u32, b: u32| a <= b;
    push_windowed(&mut q, t0, 5, secs(1), le);
    push_windowed(&mut q, t0 + secs(0), 9, secs(1), le);
    assert_eq!(q.front().map(|(_, v)| *v), Some(5));
    push_windowed(&mut q, t0 + Duration::from_millis(1500), 7, secs(1), le);
    assert_eq!(q.front().map(|(_, v)| *v), Some(7), "5 and 9 are too old");
    push_windowed(&mut q, t0 + Duration::from_millis(1600), 3, secs(1), le);
    assert_eq!(q.len(), 1);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the acknowledgements say (they come from the network:
        /// any order, any seq, any occupancy), the pacer never panics, T
        /// stays within its bounds and its tables within the window.
        #[test]
        fn any_sends_and_acknowledgements_keep_the_interval_in_bounds(
            ops in proptest::collection::vec((any::<bool>(), 0u64..5_000, 0u64..2_000, 0usize..4_000, any::<bool>()), 1..400)
        ) {
            let t0 = Instant::now();
            let config = PacerConfig { max_unacked: 64, ..PacerConfig::default() };
            let mut p = Pacer::new(config);
            let mut now = t0;
            let mut seq = 0u64;
            for (send, dt_us, through, occupancy, loss) in ops {
                now += Duration::from_micros(dt_us);
                if send {
                    // (A caller that waits for its release; one that does
                    // not is charged each send and waits longer after.)
                    let ready = p.may_send(now);
                    seq += 1;
                    p.on_send(now, seq, 1 + (dt_us as usize % 9000));
                    if ready {
                        prop_assert!(p.next_release().is_none_or(|t| t <= now + config.max_interval));
                    }
                } else {
                    p.on_ack(now, through, occupancy, loss);
                }
                prop_assert!(p.interval() <= config.max_interval);
                prop_assert!(p.flight.len() <= config.max_unacked);
            }
        }
    }
}

#[test]
fn a_late_wake_up_catches_up_at_most_a_quantum() {
    let t0 = Instant::now();
    let us = Duration::from_micros;
    let mut p = Pacer::new(PacerConfig {
        quantum: Duration::from_millis(2),
        ..PacerConfig::default()
    });
    for seq in 1..=40u64 {
        let at = t0 + us(100 * seq);
        p.on_send(at, seq, SIZE);
        p.on_ack(at + us(300), seq, 3, false);
    }
    let t = p.interval();
    assert!(!t.is_zero());
    // On schedule: one datagram per slot.
    let mut now = p.next_release().unwrap_or(t0);
    p.on_send(now, 41, SIZE);
    assert!(!p.may_send(now));
    // Woken ten quanta late: the slots of one quantum go at once, no more.
    now += p.config.quantum * 10;
    let mut burst = 0u32;
    while p.may_send(now) && burst < 10_000 {
        p.on_send(now, 42 + u64::from(burst), SIZE);
        burst += 1;
    }
    let most = (p.config.quantum.as_secs_f64() / t.as_secs_f64()).ceil() as u32 + 1;
    assert!(
        burst + 2 >= most && burst <= most,
        "{burst} at once, T {t:?}"
    );
}

#[test]
fn a_fixed_pace_holds_its_rate_whatever_the_path_and_losses_say() {
    // 20 Mbit/s asked through a 100 Mbit/s bottleneck, one acknowledgement
    // in 5 naming a loss: the stream goes at the rate asked, not the
    // path's, and the losses do not slow it.
    let phases = [(secs(3), mbit(100.0))];
    let fixed = Pacer::new(PacerConfig::fixed(mbit(20.0)));
    let out = run(Some(fixed), &phases, secs(2), 8, Some(5));
    let got = out.goodput[0] / mbit(20.0);
    assert!((0.97..=1.03).contains(&got), "{got} of the rate asked");
    assert_eq!(
        out.p99(0),
        Duration::ZERO,
        "a queue formed below the path's rate"
    );
    let stats = out.stats.unwrap();
    assert_eq!(stats.congestion_losses + stats.random_losses, 0);
    let t = SIZE as f64 / mbit(20.0);
    assert!((stats.interval.as_secs_f64() - t).abs() < 1e-9, "{stats:?}");
}

#[test]
fn datagrams_held_behind_a_hole_are_delivered_when_the_reader_says_so_and_once() {
    let t0 = Instant::now();
    let us = Duration::from_micros;
    let mut p = pacer();
    // Ten datagrams 100 us apart; the first is lost, the reader holds the
    // other nine and says so 300 us after the last.
    for seq in 1..=10u64 {
        p.on_send(t0 + us(100 * seq), seq, SIZE);
    }
    p.on_sack(t0 + us(1300), 0, 10, &[1]);
    p.on_ack(t0 + us(1300), 0, 1, true);
    let s = p.stats();
    assert_eq!(s.min_rtt, Some(us(300)), "{s:?}");
    let rate = s.rate.unwrap_or_default();
    // Nine datagrams over the 900 us between the second's send and the
    // last's: about one per 100 us.
    assert!(rate > 0.8 * SIZE as f64 / 100e-6, "{rate}");
    assert_eq!(s.random_losses, 1);
    // The resend of the first arrives 5 ms later: the cumulative
    // acknowledgement frees all ten, but only the first is delivered
    // now, and its round trip (the repair's) is not a path sample.
    p.on_ack(t0 + us(6300), 10, 0, false);
    let s = p.stats();
    assert_eq!(s.min_rtt, Some(us(300)));
    assert!(s.rate.unwrap_or_default() <= rate * 1.01, "{s:?}");
    assert_eq!(p.delivered, 10 * SIZE as u64);
    // Named missing: never counted delivered by a sack.
    p.on_send(t0 + us(6400), 11, SIZE);
    p.on_send(t0 + us(6500), 12, SIZE);
    p.on_sack(t0 + us(6900), 10, 12, &[11, 12]);
    assert_eq!(p.delivered, 10 * SIZE as u64);
}
