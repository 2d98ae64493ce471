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
use tagwire_session::{Config, Mode, PACED_LEAD, PACED_LEAD_MIN};

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
