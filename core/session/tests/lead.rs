//! How far a paced tag's publishers may run ahead of its session
//! (`SendSession::paced_lead`) follows how late the pace's releases are
//! acted on: a punctual runtime gets the shortest lead, one that wakes
//! late a lead that covers it, and both less than the lead before
//! anything is known.

#![allow(clippy::unwrap_used)]

mod net;

use std::time::Duration;

use net::*;
use tagwire_reliable::pacer::PacerConfig;
use tagwire_session::{Batching, Config, Mode, PACED_LEAD, PACED_LEAD_MIN};

/// 1000-byte messages flat out, paced at 12.5 MB/s (100 Mbit/s), with
/// the runtime acting on every timer `late` after it is due; the lead in
/// records after half a millisecond and after 200 ms more.
fn leads(late: Duration) -> (usize, usize) {
    let mut net = Net::new(2, Link::default(), 7, |_| Config {
        pacing: Some(PacerConfig::fixed(12.5e6)),
        ..Config::default()
    });
    net.timer_late = late;
    let now = net.now;
    net.nodes[0]
        .session
        .set_routes(now, &tag(), vec![dest(1, Mode::Reliable)]);
    net.publish(0, 1..=20_000, |_| 1000);
    // A few datagrams: paced, fewer releases than the estimate needs.
    net.run_until(Duration::from_micros(500), |_| false);
    let first = net.nodes[0].session.sending().paced_lead(&tag()).unwrap();
    net.run_until(Duration::from_millis(200), |_| false);
    let then = net.nodes[0].session.sending().paced_lead(&tag()).unwrap();
    (first, then)
}

/// Records in `lead` at 12.5 MB/s of 1000-byte records (the session's
/// own record size estimate: the payloads).
fn records(lead: Duration) -> usize {
    (12.5e6 * lead.as_secs_f64() / 1000.0).ceil() as usize
}

#[test]
fn a_punctual_runtime_gets_the_shortest_lead_and_a_late_one_a_lead_that_covers_it() {
    let (start, punctual) = leads(Duration::ZERO);
    // Before the lateness is known: the full lead (the pace's rate is an
    // estimate from the first datagrams: within a record of it).
    assert!(start.abs_diff(records(PACED_LEAD)) <= 2, "{start}");
    assert!(punctual <= records(PACED_LEAD_MIN) + 1, "{punctual}");
    let (_, late) = leads(Duration::from_micros(600));
    let want = records(Duration::from_micros(600));
    assert!(
        late >= want && late <= want * 2,
        "{late}, want about {want}"
    );
    assert!(late < records(PACED_LEAD), "{late}");
}

/// A message longer on the wire than the lead: while the session still
/// has more than the lead of it to release, its publishers may write
/// nothing more (a second large message waiting in the ring would add
/// its whole time to the next one's latency); within the lead of the
/// end, one.
#[test]
fn a_message_longer_than_the_lead_lets_the_next_be_written_only_near_its_end() {
    let mut net = Net::new(2, Link::default(), 7, |_| Config {
        pacing: Some(PacerConfig::fixed(12.5e6)),
        // Datagrams of a packet, as the daemon's forwarder sends them.
        datagram: 1428,
        batch: Batching::fixed(1428),
        ..Config::default()
    });
    let now = net.now;
    net.nodes[0]
        .session
        .set_routes(now, &tag(), vec![dest(1, Mode::Reliable)]);
    // 200 kB at 12.5 MB/s: 16 ms each on the wire.
    net.publish(0, 1..=3, |_| 200_000);
    net.run_until(Duration::from_millis(1), |_| false);
    let lead = |net: &mut Net| net.nodes[0].session.sending().paced_lead(&tag());
    assert_eq!(lead(&mut net), Some(0), "15 ms of the first left");
    net.run_until(Duration::from_millis(9), |_| false);
    assert_eq!(lead(&mut net), Some(0), "6 ms left");
    // Until the first message is done (the session then takes the next),
    // in steps shorter than a datagram's time at the pace: within its
    // lead (here the shortest, 250 µs: the runtime is punctual) of the
    // end, one record.
    let sent = |net: &mut Net| {
        let st = net.nodes[0].session.sending().stream_stats();
        st.first().map_or(0, |s| s.writer.sent)
    };
    let mut opened = false;
    // (149 datagrams: 200 kB in pieces of what a 1428-byte datagram carries.)
    while sent(&mut net) < 149 {
        net.run_until(Duration::from_micros(50), |_| false);
        opened |= lead(&mut net) == Some(1);
    }
    assert!(opened, "the lead never opened before the message was done");
}
