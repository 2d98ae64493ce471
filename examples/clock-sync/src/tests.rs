use super::*;

const H: Duration = Duration::from_millis(100);

fn req(slave: u32, seq: u64) -> Request {
    Request {
        slave,
        seq,
        t1: seq as i64 * 1000,
    }
}

fn heartbeat(master: u32, rank: u32, active: bool, answered: Vec<(u32, u64)>) -> MasterMsg {
    MasterMsg::Heartbeat {
        master,
        rank,
        active,
        answered,
    }
}

fn replies(actions: &[Action]) -> Vec<(u32, u64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reply(r) => Some((r.slave, r.seq)),
            _ => None,
        })
        .collect()
}

#[test]
fn every_message_decodes_to_itself_and_garbage_to_nothing() {
    let r = req(3, 7);
    assert_eq!(Request::decode(&r.encode()), Some(r));
    let rep = Reply {
        slave: 3,
        seq: 7,
        t1: -5,
        t2: 6,
        t3: 9,
        master: 2,
    };
    assert_eq!(Reply::decode(&rep.encode()), Some(rep));
    for m in [
        heartbeat(1, 0, true, vec![(1, 5), (2, 9)]),
        MasterMsg::SyncRequest { from: 4, t1: 77 },
        MasterMsg::SyncReply {
            to: 4,
            t1: 77,
            t2: 80,
            t3: 81,
        },
    ] {
        let b = m.encode();
        assert_eq!(MasterMsg::decode(&b), Some(m.clone()));
        // Every truncation and one byte too many are refused.
        for n in 0..b.len() {
            assert_eq!(MasterMsg::decode(&b[..n]), None);
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(MasterMsg::decode(&long), None);
    }
    assert_eq!(Request::decode(&rep.encode()), None);
    assert_eq!(Reply::decode(&r.encode()), None);
    // A heartbeat claiming more slaves than it may list.
    let mut b = heartbeat(1, 0, true, vec![]).encode();
    let n = b.len() - 4;
    b[n..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(MasterMsg::decode(&b), None);
}

#[test]
fn a_master_clock_is_trusted_as_the_reference_or_within_its_bound_of_it() {
    let ms = 1_000_000;
    let mut c = MasterClock::default();
    assert!(!c.trusted(0), "no exchange yet");
    assert_eq!(c.read(5), 5);
    c.follow(1);
    // The reference is 3 ms ahead; a first exchange of 5 ms round trip
    // (startup under load) moves the clock but is not trusted.
    c.on_sync_reply(0, 7 * ms, 7 * ms, 5 * ms);
    assert_eq!(c.read(10 * ms), 14_500_000, "1.5 ms off, within 2.5 ms");
    assert!(!c.trusted(5 * ms));
    // A fast one (200 us): trusted, its offset the correction.
    c.on_sync_reply(
        100 * ms,
        103 * ms + 100_000,
        103 * ms + 100_000,
        100 * ms + 200_000,
    );
    assert_eq!(c.estimate(100 * ms + 200_000), Some((3 * ms, 100_000)));
    assert!(c.trusted(100 * ms + 200_000));
    // It ages at 50 ppm: 100 us of bound more after 2 s, 500 us after 8 s.
    assert!(c.trusted(2_100 * ms));
    assert!(!c.trusted(8_200 * ms));
    // The same reference heard again: still trusted. A new one (it was
    // following the old): the correction stays, trust waits for it.
    c.follow(1);
    assert!(c.trusted(200 * ms));
    c.follow(2);
    assert_eq!((c.read(0), c.estimate(200 * ms)), (3 * ms, None));
    // A slow exchange with it (800 us, offset 3.2 ms) leaves the better
    // correction and is not enough: 3.0 is within 0.2 + 0.4 ms of it.
    c.on_sync_reply(
        300 * ms,
        303 * ms + 600_000,
        303 * ms + 600_000,
        300 * ms + 800_000,
    );
    assert_eq!(c.read(0), 3 * ms);
    assert_eq!(c.estimate(301 * ms), Some((3 * ms, 600_000)));
    assert!(!c.trusted(301 * ms));
    // A fast one (100 us, offset 3.1 ms) is, and moves it.
    c.on_sync_reply(
        400 * ms,
        403 * ms + 150_000,
        403 * ms + 150_000,
        400 * ms + 100_000,
    );
    assert_eq!(c.estimate(401 * ms), Some((3_100_000, 50_000)));
    assert!(c.trusted(401 * ms));
    // Answering: the reference, trusted, no correction; back to following,
    // untrusted until an exchange.
    c.become_reference();
    assert_eq!(
        (c.read(7), c.estimate(0), c.trusted(0)),
        (7, Some((0, 0)), true)
    );
    c.follow(2);
    assert!(!c.trusted(0));
    assert_eq!(c.estimate(0), None);
}

#[test]
fn the_estimate_is_the_exchange_of_least_bound_and_a_late_burst_does_not_move_it() {
    let mut e = Estimator::default();
    assert_eq!(e.best(0), None);
    // The remote clock is 1000 ahead; round trips 100 (symmetric) and 40.
    assert_eq!(e.sample(0, 1050, 1050, 100), (1000, 100));
    // An asymmetric exchange of 400: its offset is off by 150.
    assert_eq!(e.sample(200, 1500, 1500, 600).1, 400);
    assert_eq!(e.sample(700, 1720, 1720, 740), (1000, 40));
    assert_eq!(e.best(740), Some((1000, 20)));
    // Two thousand exchanges delayed one way by a second (a backlog after
    // a link came back), more than the window holds: the fast one stays,
    // and stays the estimate until it has aged.
    let mut fast = Estimator::default();
    fast.sample(0, 1050, 1050, 100);
    let s = 1_000_000_000;
    for i in 0..2000 {
        let t1 = 1000 + i * 10_000;
        fast.sample(t1, t1 + 1000 + s, t1 + 1000 + s, t1 + s + 100);
    }
    let (offset, bound) = fast.best(s + 20_000_000).unwrap();
    assert_eq!(offset, 1000);
    assert!(bound < 100_000, "bound {bound}");
    // Ages: a second later, a fresh exchange of 1 ms round trip wins.
    fast.sample(
        10 * s,
        10 * s + 1_000 + 500_000,
        10 * s + 1_000 + 500_000,
        10 * s + 1_000_000,
    );
    assert_eq!(fast.best(10 * s + 1_000_000), Some((1000, 500_000)));
}

#[test]
fn a_lone_master_answers_after_settling_and_not_before() {
    let t0 = Instant::now();
    let mut m = Master::new(1, 0, Config::with_heartbeat(H), t0);
    assert_eq!(m.on_request(req(9, 1), 10), None);
    assert!(!m.tick(t0 + H, 0).contains(&Action::Role(true)));
    let a = m.tick(t0 + 2 * H, 20);
    assert!(a.contains(&Action::Role(true)));
    // The request heard while settling is answered at the take-over.
    assert_eq!(replies(&a), vec![(9, 1)]);
    assert!(m.on_request(req(9, 3), 30).is_some());
    // A request asked again (lost on the way, or its answer lost) is
    // answered, an older one than the newest answered too.
    assert!(m.on_request(req(9, 3), 31).is_some());
    assert!(m.on_request(req(9, 2), 32).is_some());
}

#[test]
fn a_backup_takes_over_when_heartbeats_stop_and_answers_what_is_outstanding() {
    let t0 = Instant::now();
    let cfg = Config::with_heartbeat(H);
    let mut b = Master::new(2, 1, cfg, t0);
    let mut t = t0;
    // The primary answers slave 5's requests 1..=3 and reports 1..=2.
    for seq in 1..=3 {
        b.on_request(req(5, seq), 0);
    }
    b.on_heartbeat(&heartbeat(1, 0, true, vec![(5, 2)]), t);
    assert_eq!(b.pending(), 1);
    // While heartbeats come, the backup never answers.
    for _ in 0..10 {
        t += H;
        b.on_heartbeat(&heartbeat(1, 0, true, vec![(5, 2)]), t);
        assert!(!b.tick(t, 0).contains(&Action::Role(true)));
    }
    assert_eq!(b.active_master(t), Some(1));
    // Silence: no take-over within 1.5 heartbeats, one after.
    assert!(!b.tick(t + H, 0).contains(&Action::Role(true)));
    let wake = b.poll_timeout(t + H);
    assert_eq!(wake, t + cfg.fail_after);
    let a = b.tick(wake, 0);
    assert!(a.contains(&Action::Role(true)));
    assert_eq!(replies(&a), vec![(5, 3)]);
    assert_eq!(b.active_master(wake), Some(2));
}

#[test]
fn of_two_backups_only_the_better_ranked_takes_over() {
    let t0 = Instant::now();
    let cfg = Config::with_heartbeat(H);
    let (mut b1, mut b2) = (Master::new(2, 1, cfg, t0), Master::new(3, 2, cfg, t0));
    let mut t = t0;
    for _ in 0..5 {
        t += H;
        for m in [&mut b1, &mut b2] {
            m.on_heartbeat(&heartbeat(1, 0, true, vec![]), t);
        }
        b1.on_heartbeat(&heartbeat(3, 2, false, vec![]), t);
        b2.on_heartbeat(&heartbeat(2, 1, false, vec![]), t);
    }
    // The primary stops; the backups keep hearing each other.
    let end = t + 3 * H;
    let mut took = (false, false);
    while t < end {
        t += H / 10;
        took.0 |= b1.tick(t, 0).contains(&Action::Role(true));
        took.1 |= b2.tick(t, 0).contains(&Action::Role(true));
        if (t - t0).as_millis() % 100 == 0 {
            b1.on_heartbeat(&heartbeat(3, 2, false, vec![]), t);
            b2.on_heartbeat(&heartbeat(2, 1, b1.is_active(), vec![]), t);
        }
    }
    assert_eq!(took, (true, false));
}

#[test]
fn a_returning_master_stays_backup_and_two_answering_masters_become_one() {
    let t0 = Instant::now();
    let cfg = Config::with_heartbeat(H);
    // The old primary (rank 0) comes back while rank 1 answers.
    let mut back = Master::new(1, 0, cfg, t0);
    let mut t = t0;
    for _ in 0..10 {
        t += H / 2;
        back.on_heartbeat(&heartbeat(2, 1, true, vec![]), t);
        assert!(
            !back.tick(t, 0).contains(&Action::Role(true)),
            "at {:?}",
            t - t0
        );
    }
    assert_eq!(back.active_master(t), Some(2));
    // After a partition, both answer: the worse-ranked stops.
    let mut worse = Master::new(2, 1, cfg, t0);
    let a = worse.tick(t0 + 3 * H, 0);
    assert!(a.contains(&Action::Role(true)));
    let a = worse.on_heartbeat(&heartbeat(1, 0, true, vec![]), t0 + 3 * H);
    assert_eq!(a, vec![Action::Role(false)]);
    // The better-ranked one keeps answering.
    let mut better = Master::new(1, 0, cfg, t0);
    assert!(better.tick(t0 + 3 * H, 0).contains(&Action::Role(true)));
    assert!(better
        .on_heartbeat(&heartbeat(2, 1, true, vec![]), t0 + 3 * H)
        .is_empty());
    assert!(better.is_active());
}

#[test]
fn outstanding_requests_are_bounded() {
    let t0 = Instant::now();
    let cfg = Config {
        max_pending: 4,
        ..Config::with_heartbeat(H)
    };
    let mut m = Master::new(1, 0, cfg, t0);
    for seq in 1..=10 {
        m.on_request(req(1, seq), 0);
    }
    assert_eq!((m.pending(), m.dropped), (4, 6));
    let a = m.tick(t0 + cfg.settle, 0);
    assert_eq!(replies(&a), vec![(1, 7), (1, 8), (1, 9), (1, 10)]);
}

#[test]
fn the_wire_bytes_are_pinned() {
    // The same hex is in the C++ programs' test (cpp/clock_sync_test.cpp):
    // C++ and Rust masters and slaves work together.
    let hex = |b: Vec<u8>| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let r = Request {
        slave: 3,
        seq: 7,
        t1: -5,
    };
    assert_eq!(
        hex(r.encode()),
        "01030000000700000000000000fbffffffffffffff"
    );
    let rep = Reply {
        slave: 3,
        seq: 7,
        t1: 1,
        t2: 2,
        t3: 3,
        master: 9,
    };
    assert_eq!(
        hex(rep.encode()),
        "0203000000070000000000000001000000000000000200000000000000030000000000000009000000"
    );
    assert_eq!(
        hex(heartbeat(1, 0, true, vec![(2, 9)]).encode()),
        "0301000000000000000101000000020000000900000000000000"
    );
    assert_eq!(
        hex(MasterMsg::SyncRequest { from: 4, t1: 77 }.encode()),
        "04040000004d00000000000000"
    );
    let sync = MasterMsg::SyncReply {
        to: 4,
        t1: 77,
        t2: 80,
        t3: 81,
    };
    assert_eq!(
        hex(sync.encode()),
        "05040000004d0000000000000050000000000000005100000000000000"
    );
}
