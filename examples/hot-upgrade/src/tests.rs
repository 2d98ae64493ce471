use super::*;

const T: Duration = Duration::from_millis(10);

fn commands(out: &[Out]) -> Vec<u64> {
    out.iter()
        .filter_map(|o| match o {
            Out::Command(c) => Some(c.cycle),
            _ => None,
        })
        .collect()
}

#[test]
fn messages_decode_to_themselves_and_garbage_to_nothing() {
    let c = Command {
        cycle: 9,
        value: -1.5,
        build: 3,
    };
    assert_eq!(Command::decode(&c.encode()), Some(c));
    for m in [
        Upgrade::Hello { build: 4 },
        Upgrade::Handover {
            from: 3,
            to: 4,
            at: 77,
        },
        Upgrade::Last {
            from: 3,
            to: 4,
            at: 77,
            state: 0.25,
            lead_us: 9000,
        },
    ] {
        let b = m.encode();
        assert_eq!(Upgrade::decode(&b), Some(m));
        for n in 0..b.len() {
            assert_eq!(Upgrade::decode(&b[..n]), None);
        }
        let mut long = b.clone();
        long.push(1);
        assert_eq!(Upgrade::decode(&long), None);
    }
    assert_eq!(Command::decode(&Upgrade::Hello { build: 1 }.encode()), None);
    assert_eq!(Upgrade::decode(&c.encode()), None);
}

/// Runs two builds against each other through the handshake, on a
/// virtual clock, messages delivered after `lag`; returns every command
/// published, in order, with its time.
fn upgrade_once(lag: Duration) -> Vec<(Instant, Command)> {
    let t0 = Instant::now();
    let mut old = Controller::first(1, T, t0);
    let mut published = Vec::new();
    let mut now = t0;
    let mut new = None;
    // (deliver at, message, to the new build?)
    let mut wire: Vec<(Instant, Upgrade, bool)> = Vec::new();
    let step = Duration::from_micros(100);
    while now < t0 + T * 60 {
        now += step;
        if now >= t0 + T * 20 && new.is_none() {
            let (c, hello) = Controller::successor(2, T, now);
            if let Out::Say(m) = hello {
                wire.push((now + lag, m, false));
            }
            new = Some(c);
        }
        let due: Vec<_> = wire.iter().filter(|w| w.0 <= now).cloned().collect();
        wire.retain(|w| w.0 > now);
        for (_, m, to_new) in due {
            let out = match (to_new, new.as_mut()) {
                (true, Some(n)) => n.on_upgrade(m, now),
                _ => old.on_upgrade(m, now),
            };
            for o in out {
                if let Out::Say(m) = o {
                    wire.push((now + lag, m, true));
                }
            }
        }
        let mut out = old.tick(now);
        if let Some(n) = new.as_mut() {
            out.extend(n.tick(now));
        }
        for o in out {
            match o {
                Out::Command(c) => published.push((now, c)),
                Out::Say(m) => wire.push((now + lag, m, true)),
                Out::Exit => {}
            }
        }
    }
    assert_eq!(old.phase(), Phase::Done);
    published
}

#[test]
fn every_cycle_is_published_once_in_order_across_an_upgrade() {
    for lag in [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_millis(4),
    ] {
        let p = upgrade_once(lag);
        let cycles: Vec<u64> = p.iter().map(|(_, c)| c.cycle).collect();
        let expected: Vec<u64> = (1..=cycles.len() as u64).collect();
        assert_eq!(cycles, expected, "lag {lag:?}");
        // Both builds published, the old first.
        let builds: Vec<u32> = p.iter().map(|(_, c)| c.build).collect();
        let switch = builds
            .iter()
            .position(|b| *b == 2)
            .expect("the new build ran");
        assert!(builds[..switch].iter().all(|b| *b == 1));
        assert!(builds[switch..].iter().all(|b| *b == 2));
        // No gap above a period plus the message's lag.
        for w in p.windows(2) {
            assert!(
                w[1].0 - w[0].0 <= T + lag + Duration::from_micros(100),
                "lag {lag:?}"
            );
        }
    }
}

#[test]
fn the_successor_starts_from_the_state_the_old_build_ended_with() {
    let t0 = Instant::now();
    let mut old = Controller::first(1, T, t0);
    old.on_sensor(0.4);
    let mut now = t0;
    for _ in 0..10 {
        old.tick(now);
        now += T;
    }
    let (mut new, _) = Controller::successor(2, T, now);
    let hand = old.on_upgrade(Upgrade::Hello { build: 2 }, now);
    let [Out::Say(h @ Upgrade::Handover { at, .. })] = hand[..] else {
        panic!("{hand:?}");
    };
    new.on_upgrade(h, now);
    assert_eq!(new.phase(), Phase::Joining { at });
    // The old build runs up to `at - 1` and hands its state over.
    let mut last = None;
    while last.is_none() {
        now += T;
        for o in old.tick(now) {
            if let Out::Say(m @ Upgrade::Last { .. }) = o {
                last = Some(m);
            }
        }
    }
    let Some(Upgrade::Last { state, .. }) = last else {
        unreachable!()
    };
    // A twin that never upgraded: the same state after cycle at - 1.
    let mut twin = 0.0;
    for _ in 1..at {
        control(&mut twin, 1.0, 0.4);
    }
    assert!((state - twin).abs() < 1e-12);
    new.on_upgrade(last.unwrap(), now);
    new.on_sensor(0.4);
    let out = new.tick(now + T);
    assert_eq!(commands(&out), vec![at]);
    control(&mut twin, 1.0, 0.4);
    let Out::Command(c) = out[0] else {
        unreachable!()
    };
    assert!((c.value - (0.5 * 0.6 + twin)).abs() < 1e-12);
}

#[test]
fn a_successor_whose_predecessor_died_starts_at_the_agreed_cycle_anyway() {
    let t0 = Instant::now();
    let (mut new, _) = Controller::successor(2, T, t0);
    new.on_upgrade(
        Upgrade::Handover {
            from: 1,
            to: 2,
            at: 50,
        },
        t0,
    );
    let give_up = new.poll_timeout().expect("a deadline");
    assert!(new.tick(give_up - Duration::from_millis(1)).is_empty());
    assert_eq!(commands(&new.tick(give_up)), vec![50]);
    // A handover meant for another build is ignored.
    let (mut other, _) = Controller::successor(3, T, t0);
    other.on_upgrade(
        Upgrade::Handover {
            from: 1,
            to: 2,
            at: 50,
        },
        t0,
    );
    assert_eq!(other.phase(), Phase::Waiting);
}
