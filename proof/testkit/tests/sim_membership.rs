//! Membership and table replication between daemons, in the simulator: the
//! real membership core and tag table of every node (`sim::member`) over
//! TCP-like connections (`sim::conn`) on simulated links.
//!
//! The seeded property test prints `seed = N` for each failure and the
//! command that replays it:
//! `TAGWIRE_SIM_SEED=N cargo test -p tagwire-testkit --test sim_membership`.
//! `TAGWIRE_SIM_SEEDS=K` runs K scenarios instead of the default.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim_common;

use std::time::Duration;

use sim_common::{addr, ms};
use tagwire_proto::membership::DownReason;
use tagwire_proto::{ClientId, Holder, Role};
use tagwire_testkit::sim::member::{node_addr, MemberConfig, MemberNode, Observed, Outcome};
use tagwire_testkit::sim::{for_each_seed, Addr, LinkConfig, Sim, SimConfig, SimRng};
use tagwire_wire::{NodeAddr, TagName};

/// Scenarios of the property test per run.
const SEEDS: u64 = 1000;

fn tag(s: &str) -> TagName {
    TagName::new(s).unwrap()
}

/// `n` daemons that list each other, on links `link`.
fn network(seed: u64, n: u8, link: LinkConfig) -> (Sim<MemberNode>, Vec<Addr>, MemberConfig) {
    let addrs: Vec<Addr> = (1..=n).map(addr).collect();
    let config = MemberConfig::new(addrs.clone());
    let mut sim = Sim::new(SimConfig::seeded(seed));
    sim.set_all_links(link);
    for &a in &addrs {
        sim.add_node(a, MemberNode::factory(config.clone()))
            .unwrap();
    }
    (sim, addrs, config)
}

fn node_addrs(addrs: &[Addr]) -> Vec<NodeAddr> {
    addrs.iter().copied().map(node_addr).collect()
}

/// Every node of `live` is up and sees every other one of `live` up.
fn all_up(sim: &Sim<MemberNode>, live: &[Addr]) -> bool {
    let nodes = node_addrs(live);
    live.iter()
        .all(|&a| sim.node(a).is_some_and(|n| n.sees_up(&nodes)))
}

/// [`all_up`], no replication waiting, and every table the same.
fn converged(sim: &Sim<MemberNode>, live: &[Addr]) -> bool {
    if !all_up(sim, live) || live.iter().any(|&a| sim.node(a).unwrap().pending() > 0) {
        return false;
    }
    let first = sim.node(live[0]).unwrap().view();
    live[1..]
        .iter()
        .all(|&a| sim.node(a).unwrap().view() == first)
}

/// Runs until [`converged`] (checked every 20 ms of virtual time), for at
/// most `limit`; returns the virtual time it took.
fn run_to_convergence(
    sim: &mut Sim<MemberNode>,
    live: &[Addr],
    limit: Duration,
) -> Result<Duration, String> {
    let start = sim.elapsed();
    while !converged(sim, live) {
        if sim.elapsed() - start > limit {
            return Err(format!(
                "not converged within {limit:?} (now {:?}): {}",
                sim.elapsed(),
                describe(sim, live)
            ));
        }
        sim.run_for(ms(20)).map_err(|e| e.to_string())?;
    }
    Ok(sim.elapsed() - start)
}

/// Each node's peers' states, pending replications and table, for failures.
fn describe(sim: &Sim<MemberNode>, addrs: &[Addr]) -> String {
    let nodes = node_addrs(addrs);
    let mut out = String::new();
    for &a in addrs {
        let Some(n) = sim.node(a) else {
            out += &format!("\n  {a}: down");
            continue;
        };
        let states: Vec<_> = nodes
            .iter()
            .filter(|p| **p != n.node())
            .map(|p| (p.to_string(), n.peer_state(*p)))
            .collect();
        out += &format!(
            "\n  {a} (incarnation {}): peers {states:?}, pending {}, links {}, {:?}\n    table {:?}",
            n.incarnation(),
            n.pending(),
            n.membership().link_count(),
            n.stats(),
            n.view()
        );
    }
    out
}

/// The Down events `at` logged about `peer`.
fn downs(sim: &Sim<MemberNode>, at: Addr, peer: Addr) -> Vec<(Duration, DownReason, usize)> {
    let origin = sim.instant_at(Duration::ZERO);
    sim.node(at)
        .unwrap()
        .log()
        .iter()
        .filter_map(|(t, o)| match o {
            Observed::Down {
                peer: p,
                reason,
                dropped,
            } if *p == node_addr(peer) => Some((*t - origin, reason.clone(), *dropped)),
            _ => None,
        })
        .collect()
}

/// The Up events `at` logged about `peer`: (incarnation, restarted).
fn ups(sim: &Sim<MemberNode>, at: Addr, peer: Addr) -> Vec<(u64, bool)> {
    sim.node(at)
        .unwrap()
        .log()
        .iter()
        .filter_map(|(_, o)| match o {
            Observed::Up {
                peer: p,
                incarnation,
                restarted,
            } if *p == node_addr(peer) => Some((*incarnation, *restarted)),
            _ => None,
        })
        .collect()
}

/// How many members of `node` hold `role` rights on `name` at `at`.
fn rights_of(sim: &Sim<MemberNode>, at: Addr, name: &str, node: Addr) -> (usize, usize) {
    let n = sim.node(at).unwrap();
    let Some(e) = n.table().entry(&tag(name)) else {
        return (0, 0);
    };
    let of = |m: &&tagwire_wire::Member| m.who.node == node_addr(node);
    (
        e.senders().filter(of).count(),
        e.receivers().filter(of).count(),
    )
}

#[test]
fn four_nodes_come_up_within_a_lease() {
    let (mut sim, addrs, config) = network(1, 4, LinkConfig::with_latency(ms(2)));
    let at = sim
        .run_until_cond(config.lease * 3, |s| all_up(s, &addrs))
        .unwrap();
    assert!(at < config.lease, "all up at {at:?}");
    // Then they stay up, each pair on one link, nobody declared down.
    sim.run_for(config.lease * 3).unwrap();
    assert!(all_up(&sim, &addrs));
    for &a in &addrs {
        let n = sim.node(a).unwrap();
        assert_eq!(n.membership().link_count(), 3, "{a}");
        assert_eq!(n.stats().refused + n.stats().decode_errors, 0);
        for &p in addrs.iter().filter(|p| **p != a) {
            assert_eq!(ups(&sim, a, p).len(), 1, "{a} saw {p} up once");
            assert!(downs(&sim, a, p).is_empty(), "{a} never saw {p} down");
        }
    }
}

#[test]
fn tables_converge_after_concurrent_conflicting_changes() {
    let link = LinkConfig {
        jitter: ms(3),
        loss: 0.05,
        ..LinkConfig::with_latency(ms(2))
    };
    let (mut sim, addrs, _) = network(2, 4, link);
    let (a, b, c, d) = (addrs[0], addrs[1], addrs[2], addrs[3]);
    sim.run_until_cond(ms(2000), |s| all_up(s, &addrs)).unwrap();
    // The same tag created on two nodes at once, another elsewhere.
    let x = tag("/x");
    sim.with_node(a, |n, now| n.create(now, &x)).unwrap();
    sim.with_node(b, |n, now| n.create(now, &x)).unwrap();
    sim.with_node(c, |n, now| n.create(now, &tag("/y")))
        .unwrap();
    run_to_convergence(&mut sim, &addrs, ms(3000)).unwrap();
    let view = sim.node(a).unwrap().view();
    let names: Vec<&str> = view.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["/x", "/y"]);
    // Rights on /x from two nodes, seen everywhere.
    let x2 = x.clone();
    sim.with_node(a, |n, now| n.add_receiver(now, &x2, ClientId(1)))
        .unwrap()
        .unwrap();
    sim.with_node(b, |n, now| n.add_sender(now, &x2, ClientId(2)))
        .unwrap()
        .unwrap();
    run_to_convergence(&mut sim, &addrs, ms(3000)).unwrap();
    for &at in &addrs {
        assert_eq!(rights_of(&sim, at, "/x", a), (0, 1));
        assert_eq!(rights_of(&sim, at, "/x", b), (1, 0));
    }
    // Destroyed on one node while another subscribes, at the same instant.
    sim.with_node(c, |n, now| n.destroy(now, &x2))
        .unwrap()
        .unwrap();
    sim.with_node(d, |n, now| n.add_receiver(now, &x2, ClientId(3)))
        .unwrap()
        .unwrap();
    run_to_convergence(&mut sim, &addrs, ms(3000)).unwrap();
    for &at in &addrs {
        // The destroy removed every right granted before it, everywhere.
        assert_eq!(rights_of(&sim, at, "/x", a), (0, 0), "{at}");
        assert_eq!(rights_of(&sim, at, "/x", b), (0, 0), "{at}");
    }
    // Whether d's subscription (concurrent with the destroy) survived is
    // decided by the versions, the same way on every node: the tag exists
    // exactly when it did.
    let survived = rights_of(&sim, a, "/x", d) == (0, 1);
    assert_eq!(sim.node(a).unwrap().table().entry(&x).is_some(), survived);
    // Quiet for a while: still the same everywhere, nobody went down.
    sim.run_for(ms(2000)).unwrap();
    assert!(converged(&sim, &addrs), "{}", describe(&sim, &addrs));
    for &at in &addrs {
        for &p in &addrs {
            if p != at {
                assert!(downs(&sim, at, p).is_empty());
            }
        }
    }
}

#[test]
fn a_partitioned_node_is_declared_dead_within_its_lease_and_resynchronised_after() {
    let (mut sim, addrs, config) = network(3, 4, LinkConfig::with_latency(ms(1)));
    let (a, d) = (addrs[0], addrs[3]);
    let others = &addrs[..3];
    let heartbeat = config.lease / 6;
    sim.run_until_cond(ms(2000), |s| all_up(s, &addrs)).unwrap();
    let y = tag("/y");
    sim.with_node(a, |n, now| n.create(now, &y));
    run_to_convergence(&mut sim, &addrs, ms(2000)).unwrap();
    sim.with_node(d, |n, now| n.add_receiver(now, &y, ClientId(1)))
        .unwrap()
        .unwrap();
    run_to_convergence(&mut sim, &addrs, ms(2000)).unwrap();
    assert_eq!(rights_of(&sim, a, "/y", d), (0, 1));

    let cut = sim.elapsed();
    sim.partition(&[d], others);
    sim.run_for(config.lease + heartbeat).unwrap();
    for &at in others {
        let down = downs(&sim, at, d);
        assert_eq!(down.len(), 1, "{at}: {down:?}");
        let (when, reason, dropped) = &down[0];
        assert_eq!(*reason, DownReason::LeaseExpired);
        assert!(*when >= cut + config.lease - heartbeat, "{at} at {when:?}");
        assert_eq!(*dropped, 1, "{at} dropped d's subscription");
        assert_eq!(rights_of(&sim, at, "/y", d), (0, 0));
    }
    assert!(all_up(&sim, others));
    for &p in others {
        assert_eq!(downs(&sim, d, p).len(), 1, "d declared {p} dead too");
    }
    // Both sides change the table meanwhile.
    sim.with_node(d, |n, now| n.add_sender(now, &y, ClientId(2)))
        .unwrap()
        .unwrap();
    sim.with_node(a, |n, now| n.create(now, &tag("/z")));

    sim.heal_all();
    let took = run_to_convergence(&mut sim, &addrs, ms(5000)).unwrap();
    for &at in &addrs {
        assert_eq!(rights_of(&sim, at, "/y", d), (1, 1), "{at}");
        assert!(sim.node(at).unwrap().table().entry(&tag("/z")).is_some());
        if at != d {
            assert_eq!(ups(&sim, at, d).len(), 2, "{at} saw d up again");
            assert!(!ups(&sim, at, d)[1].1, "the same life came back");
        }
    }
    // Back within a dial timeout and a redial of the heal.
    assert!(
        took < config.conn.connect_timeout + config.lease,
        "{took:?}"
    );
}

#[test]
fn a_restarted_daemon_loses_its_old_rights_and_is_resynchronised() {
    let (mut sim, addrs, config) = network(4, 4, LinkConfig::with_latency(ms(1)));
    let b = addrs[1];
    let others: Vec<Addr> = addrs.iter().copied().filter(|&x| x != b).collect();
    sim.run_until_cond(ms(2000), |s| all_up(s, &addrs)).unwrap();
    let x = tag("/x");
    sim.with_node(addrs[0], |n, now| n.create(now, &x));
    run_to_convergence(&mut sim, &addrs, ms(2000)).unwrap();
    sim.with_node(b, |n, now| n.add_sender(now, &x, ClientId(1)))
        .unwrap()
        .unwrap();
    run_to_convergence(&mut sim, &addrs, ms(2000)).unwrap();
    let old = sim.node(b).unwrap().incarnation();
    assert_eq!(rights_of(&sim, addrs[3], "/x", b), (1, 0));

    // Back well within the lease: nobody noticed the crash by silence.
    sim.crash(b).unwrap();
    sim.run_for(ms(30)).unwrap();
    sim.restart(b).unwrap();
    let new = sim.node(b).unwrap().incarnation();
    assert!(new > old);
    run_to_convergence(&mut sim, &addrs, config.lease * 3).unwrap();
    for &at in &others {
        let down = downs(&sim, at, b);
        assert_eq!(down.len(), 1, "{at}: {down:?}");
        assert!(
            matches!(down[0].1, DownReason::Restarted | DownReason::LinkClosed),
            "{at}: {down:?}"
        );
        assert_eq!(down[0].2, 1, "{at} dropped b's old send access");
        assert_eq!(ups(&sim, at, b).last(), Some(&(new, true)), "{at}");
        assert_eq!(rights_of(&sim, at, "/x", b), (0, 0));
    }
    // The new life learnt the table from its peers' Syncs.
    assert!(sim.node(b).unwrap().table().entry(&x).is_some());
    assert!(sim.node(b).unwrap().stats().syncs_applied >= 3);
}

#[test]
fn replication_completes_when_every_peer_applied_and_times_out_naming_a_partitioned_peer() {
    let (mut sim, addrs, config) = network(5, 4, LinkConfig::with_latency(ms(1)));
    let (a, d) = (addrs[0], addrs[3]);
    sim.run_until_cond(ms(2000), |s| all_up(s, &addrs)).unwrap();
    let r = tag("/r");
    let ids = sim.with_node(a, |n, now| n.create(now, &r)).unwrap();
    assert_eq!(ids.len(), 1);
    let id = ids[0];
    let at = sim
        .run_until_cond(ms(1000), |s| s.node(a).unwrap().outcome(id).is_some())
        .unwrap();
    assert_eq!(sim.node(a).unwrap().outcome(id), Some(&Outcome::Replicated));
    assert!(at < config.apply_timeout);
    for &p in &addrs {
        assert!(sim.node(p).unwrap().table().entry(&r).is_some(), "{p}");
    }

    // d cannot hear a; the others still can.
    sim.partition(&[a], &[d]);
    sim.run_for(ms(20)).unwrap();
    let s = tag("/s");
    let id = sim.with_node(a, |n, now| n.create(now, &s)).unwrap()[0];
    let start = sim.elapsed();
    let at = sim
        .run_until_cond(ms(1000), |s| s.node(a).unwrap().outcome(id).is_some())
        .unwrap();
    assert_eq!(
        sim.node(a).unwrap().outcome(id),
        Some(&Outcome::TimedOut(vec![node_addr(d)]))
    );
    assert_eq!(at - start, config.apply_timeout);
    for &p in &addrs[1..3] {
        assert!(sim.node(p).unwrap().table().entry(&s).is_some(), "{p}");
    }
    // d has it all the same: the others passed the creation on (a only
    // cannot hear d say so).
    assert!(sim.node(d).unwrap().table().entry(&s).is_some());
    sim.heal_all();
    run_to_convergence(&mut sim, &addrs, ms(5000)).unwrap();
    assert!(sim.node(d).unwrap().table().entry(&s).is_some());
}

/// Found by the property test (seed 56 of its first run): a tag created on
/// one node reached one peer, its creator crashed before the other peer got
/// it, and the survivors never agreed again (their link never went down, so
/// no `Sync` came). Now a node that applied a tag's creation or destruction
/// that changed its table passes it on (`tagwire_proto::replication`).
#[test]
fn a_tag_op_survives_its_creators_crash() {
    let (mut sim, addrs, config) = network(6, 3, LinkConfig::with_latency(ms(1)));
    let (a, b, c) = (addrs[0], addrs[1], addrs[2]);
    sim.run_until_cond(ms(2000), |s| all_up(s, &addrs)).unwrap();
    // a's op reaches b, not c; then a crashes.
    sim.set_link_up(a, c, false);
    let lost = tag("/lost");
    sim.with_node(a, |n, now| n.create(now, &lost));
    sim.run_for(ms(20)).unwrap();
    assert!(sim.node(b).unwrap().table().entry(&lost).is_some());
    assert!(
        sim.node(c).unwrap().table().entry(&lost).is_some(),
        "b passed the creation on to c"
    );
    sim.crash(a).unwrap();
    sim.set_link_up(a, c, true);
    sim.run_for(ms(50)).unwrap();
    // The new life hears c's Hello before b's Sync (which carries the tag).
    sim.set_link_pair(a, b, LinkConfig::with_latency(ms(20)));
    sim.restart(a).unwrap();
    let converged = run_to_convergence(&mut sim, &addrs, config.lease * 10);
    assert!(converged.is_ok(), "{converged:?}");
}

// ----- the property test over seeds ---------------------------------------------

/// One random step of a scenario.
#[derive(Debug, Clone)]
enum Step {
    Create(usize, u8),
    Destroy(usize, u8),
    Send(usize, u8, u64),
    Unsend(usize, u8, u64),
    Sub(usize, u8, u64),
    Unsub(usize, u8, u64),
    Leave(usize, u64),
    /// Cut these nodes off from the rest.
    Partition(Vec<usize>),
    Heal,
    /// Crash a node, restart it this much later.
    Crash(usize, Duration),
}

#[derive(Debug)]
struct Scenario {
    nodes: u8,
    link: LinkConfig,
    steps: Vec<(Duration, Step)>,
}

/// How long the random part of a scenario lasts (virtual time).
const ACTIVE: Duration = Duration::from_millis(1500);

fn draw(seed: u64) -> Scenario {
    let mut rng = SimRng::derived(seed, "membership scenario");
    let nodes = rng.range(2, 5) as u8;
    let n = usize::from(nodes);
    let link = LinkConfig {
        latency: Duration::from_micros(rng.range(100, 5000)),
        jitter: Duration::from_micros(rng.range(0, 3000)),
        loss: rng.float(0.0, 0.10),
        duplicate: rng.float(0.0, 0.05),
        ..LinkConfig::default()
    };
    let mut steps = Vec::new();
    for _ in 0..rng.range(3, 25) {
        let at = rng.duration(Duration::ZERO, ACTIVE);
        let k = rng.range_usize(0, n - 1);
        let t = rng.range(0, 2) as u8;
        let c = rng.range(1, 3);
        let step = match rng.range(0, 99) {
            0..=17 => Step::Create(k, t),
            18..=27 => Step::Destroy(k, t),
            28..=42 => Step::Send(k, t, c),
            43..=50 => Step::Unsend(k, t, c),
            51..=65 => Step::Sub(k, t, c),
            66..=73 => Step::Unsub(k, t, c),
            74..=78 => Step::Leave(k, c),
            79..=86 => {
                let cut: Vec<usize> = (0..n).filter(|_| rng.chance(0.4)).collect();
                Step::Partition(cut)
            }
            87..=91 => Step::Heal,
            _ => Step::Crash(k, ms(rng.range(1, 1500))),
        };
        steps.push((at, step));
    }
    steps.sort_by_key(|(at, _)| *at);
    Scenario { nodes, link, steps }
}

fn name(t: u8) -> TagName {
    tag(&format!("/p{t}"))
}

/// Carries out `step` on the network (a change on a crashed node is not
/// made; one the table refuses, say on an unknown tag, is a no-op).
fn apply(sim: &mut Sim<MemberNode>, addrs: &[Addr], step: &Step) {
    let on = |k: usize| addrs[k];
    match step.clone() {
        Step::Create(k, t) => {
            sim.with_node(on(k), |n, now| n.create(now, &name(t)));
        }
        Step::Destroy(k, t) => {
            sim.with_node(on(k), |n, now| n.destroy(now, &name(t)));
        }
        Step::Send(k, t, c) => {
            sim.with_node(on(k), |n, now| n.add_sender(now, &name(t), ClientId(c)));
        }
        Step::Unsend(k, t, c) => {
            sim.with_node(on(k), |n, now| n.remove_sender(now, &name(t), ClientId(c)));
        }
        Step::Sub(k, t, c) => {
            sim.with_node(on(k), |n, now| n.add_receiver(now, &name(t), ClientId(c)));
        }
        Step::Unsub(k, t, c) => {
            sim.with_node(on(k), |n, now| {
                n.remove_receiver(now, &name(t), ClientId(c))
            });
        }
        Step::Leave(k, c) => {
            sim.with_node(on(k), |n, now| n.remove_client(now, ClientId(c)));
        }
        Step::Partition(cut) => {
            let inside: Vec<Addr> = cut.iter().map(|&k| on(k)).collect();
            let outside: Vec<Addr> = addrs
                .iter()
                .copied()
                .filter(|a| !inside.contains(a))
                .collect();
            sim.partition(&inside, &outside);
        }
        Step::Heal => sim.heal_all(),
        Step::Crash(k, down) => {
            let a = on(k);
            if sim.is_up(a) {
                sim.crash(a).unwrap();
                sim.schedule_in(down, move |s| {
                    if !s.is_up(a) {
                        s.restart(a).unwrap();
                    }
                });
            }
        }
    }
}

fn scenario(seed: u64) -> Result<(), String> {
    let s = draw(seed);
    let (mut sim, addrs, config) = network(seed, s.nodes, s.link);
    let fail =
        |sim: &Sim<MemberNode>, what: String| format!("{what}; {s:?}{}", describe(sim, &addrs));
    for (at, step) in s.steps.clone() {
        let addrs = addrs.clone();
        sim.schedule(at, move |sim| apply(sim, &addrs, &step));
    }
    sim.run_until(ACTIVE)
        .map_err(|e| fail(&sim, e.to_string()))?;
    // Heal everything, bring every daemon back, and wait for quiet.
    sim.heal_all();
    for &a in &addrs {
        if !sim.is_up(a) {
            sim.restart(a).unwrap();
        }
    }
    // A connection broken on one side only (a crash the other did not
    // notice) takes the lease, a failed dial its timeout plus a redial.
    let limit = config.lease * 4 + config.conn.give_up + config.conn.connect_timeout;
    if let Err(e) = run_to_convergence(&mut sim, &addrs, limit) {
        return Err(fail(&sim, e));
    }
    // Quiescent means stable: nothing changes any more.
    let view = sim.node(addrs[0]).unwrap().view();
    sim.run_for(config.lease)
        .map_err(|e| fail(&sim, e.to_string()))?;
    if !converged(&sim, &addrs) || sim.node(addrs[0]).unwrap().view() != view {
        return Err(fail(&sim, "converged, then changed again".into()));
    }
    for &a in &addrs {
        let n = sim.node(a).unwrap();
        if n.stats().decode_errors > 0 {
            return Err(fail(&sim, format!("{a} could not decode a peer frame")));
        }
        // A node's own rights in its table are its clients' (Local), never
        // a copy of a previous life's that a peer sent back. With every
        // table equal, the others list exactly these.
        for e in n.table().entries() {
            for role in [Role::Sender, Role::Receiver] {
                for r in e.rights(role) {
                    let mine = r.member.who.node == n.node();
                    if mine != matches!(r.holder, Holder::Local(_)) {
                        return Err(fail(&sim, format!("{a} holds {r:?} on {}", e.name)));
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn live_daemons_converge_after_any_mix_of_changes_loss_partitions_and_restarts() {
    let start = std::time::Instant::now();
    let runs = for_each_seed("live_daemons_converge_after_any_mix", SEEDS, scenario);
    eprintln!(
        "live_daemons_converge_after_any_mix: {runs} scenarios in {:?}",
        start.elapsed()
    );
}

#[test]
fn the_same_seed_replays_the_same_run() {
    let run = |seed: u64| {
        let s = draw(seed);
        let (mut sim, addrs, _) = network(seed, s.nodes, s.link);
        for (at, step) in s.steps.clone() {
            let addrs = addrs.clone();
            sim.schedule(at, move |sim| apply(sim, &addrs, &step));
        }
        sim.run_until(ACTIVE * 2).unwrap();
        let views: Vec<_> = addrs
            .iter()
            .map(|&a| sim.node(a).map(MemberNode::view))
            .collect();
        (sim.trace_hash(), sim.stats().events, views)
    };
    for seed in 0..20 {
        assert_eq!(run(seed), run(seed), "seed {seed}");
    }
    assert_ne!(run(3).0, run(4).0);
}
