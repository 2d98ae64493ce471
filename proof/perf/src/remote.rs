//! The multi-host benchmarks of `tagwire perf` (paper Figures 4-3 column 4,
//! 4-6 and 4-7, and throughput across a link).
//!
//! A [`Site`] is a LAN of network namespaces joined by a bridge
//! (`tagwire-testkit`), with one daemon per host. The daemons run in this
//! process, each with its threads inside its host's namespace; the measuring
//! thread and the worker processes reach their host's daemon through its Unix
//! socket (Unix sockets are not part of a network namespace), so every byte
//! between nodes crosses the veth links and the bridge. The raw UDP baseline
//! uses sockets created inside the two namespaces, and Cyclone DDS's
//! `ddsperf` runs in them through `ip netns exec`: all three systems take the
//! same path, in the same run.

use std::time::Duration;

use tagwire::Proxy;
use tagwire_daemon::Daemon;

mod site;

pub use site::Site;

use crate::ddsperf;
use crate::peers;
use crate::raw;
use crate::report::Record;
use crate::suite::{dds_opts, note, push, Acc, Point, Rates, Series, SuiteOpts};
use crate::workload::{self, Acks, Rounds};

/// UDP payload of one datagram on the site's links (MTU 1500, less the IP
/// and UDP headers).
const MTU_PAYLOAD: usize = 1472;

/// Round trip to one receiver on host 1 against size, beside a raw UDP
/// ping-pong, the same ping-pong through a dispatcher thread on each host
/// (`raw-relay`, [`raw::udp_relay_pingpong`]: the floor of a per-node
/// delivery manager) and Cyclone DDS across the same link.
///
/// With `keyed` (a second site whose daemons authenticate with a domain
/// key), each repetition also measures `tagwire+auth` there, right after
/// `tagwire`, and pairs it with it.
pub fn remote_rtt(
    o: &SuiteOpts,
    site: &Site,
    keyed: Option<&Site>,
    sizes: &[usize],
) -> anyhow::Result<Vec<Record>> {
    let env = site.env(o.env.exe.clone(), o.env.cpus, &[1]);
    let keyed_env = keyed.map(|k| k.env(o.env.exe.clone(), o.env.cpus, &[1]));
    let dds = dds_opts(o).and_then(|d| site.dds(&d, 1, 0).map_err(|e| format!("{e:#}")));
    let zenoh = site.peers(o, 0, 1);
    let ropts = raw::RawOpts {
        cpus: o.env.cpus,
        ..raw::RawOpts::default()
    };
    let mut acc = Acc::default();
    let mut skipped = Vec::new();
    if let Err(reason) = &zenoh {
        for &size in sizes {
            skipped.push(Record::skipped(
                "remote-rtt",
                "zenoh",
                "block",
                size as u64,
                reason,
            ));
        }
    }
    for rep in 0..o.reps {
        acc.rep = rep;
        for &size in sizes {
            note(
                o,
                format!("remote-rtt rep {}/{} size {size}", rep + 1, o.reps),
            );
            let s = size as u64;
            let d = workload::rtt(&env, Rounds::new(size, o.iters, o.warmup))?;
            push(&mut acc, "tagwire", "block", s, 1, "all", &d);
            // The same through the daemons (the path before direct delivery).
            let r = Rounds::new(size, o.iters, o.warmup).through_daemon();
            let d = workload::rtt(&env, r)?;
            push(&mut acc, "tagwire-via-daemon", "block", s, 1, "all", &d);
            if let Some(env) = &keyed_env {
                let d = workload::rtt(env, Rounds::new(size, o.iters, o.warmup))?;
                push(&mut acc, "tagwire+auth", "block", s, 1, "all", &d);
            }
            if let Ok(p) = &zenoh {
                match peers::zenoh_rtt(p, size, o.iters, o.warmup) {
                    Ok(pt) => acc.push("zenoh", "block", s, 1, "all", pt),
                    Err(e) => skipped.push(Record::skipped(
                        "remote-rtt",
                        "zenoh",
                        "block",
                        s,
                        &format!("zenoh failed: {e:#}"),
                    )),
                }
            }
            let (a, b) = site.udp_pair(0, 1)?;
            let d = raw::udp_pingpong(a, b, size, o.iters, o.warmup, &ropts)?;
            push(&mut acc, "raw-udp", "block", s, 1, "all", &d);
            let (a, b) = site.udp_pair(0, 1)?;
            let d = raw::udp_relay_pingpong(a, b, size, (o.iters, o.warmup), &ropts)?;
            push(&mut acc, "raw-relay", "block", s, 1, "all", &d);
            match &dds {
                Ok(opts) => match ddsperf::rtt_with(s, o.dds_seconds, opts) {
                    Ok(r) => acc.push(
                        "cyclonedds",
                        "block",
                        s,
                        1,
                        "all",
                        Point {
                            p50_us: r.p50_us,
                            p99_us: r.p99_us,
                        },
                    ),
                    Err(e) => skipped.push(Record::skipped(
                        "remote-rtt",
                        "cyclonedds",
                        "block",
                        s,
                        &format!("ddsperf failed: {e:#}"),
                    )),
                },
                Err(reason) if rep == 0 => skipped.push(Record::skipped(
                    "remote-rtt",
                    "cyclonedds",
                    "block",
                    s,
                    reason,
                )),
                Err(_) => {}
            }
        }
    }
    let pairs = |e: &Series| -> Vec<(String, Series)> {
        let against: &[&str] = match e.0.as_str() {
            "tagwire" => &[
                "raw-udp",
                "raw-relay",
                "cyclonedds",
                "zenoh",
                "tagwire-via-daemon",
            ],
            "tagwire-via-daemon" => &["raw-udp", "cyclonedds"],
            // A keyed daemon has no direct delivery: the key's own cost is
            // against the same path unkeyed, what a user sees against the
            // default.
            "tagwire+auth" => &["tagwire-via-daemon", "tagwire", "raw-udp"],
            // The two-sided floor, as a ratio of the one-hop one.
            "raw-relay" => &["raw-udp"],
            _ => &[],
        };
        against
            .iter()
            .filter_map(|b| {
                acc.find(b, "block", e.2, 1, "all")
                    .map(|s| (b.to_string(), s.clone()))
            })
            .collect()
    };
    let mut out: Vec<Record> = acc
        .records("remote-rtt", pairs)
        .into_iter()
        .chain(skipped)
        .map(|r| r.with_nodes(2))
        .collect();
    out.sort_by_key(|r| r.size);
    Ok(out)
}

/// Round trip to one subscriber on host 1 that asks for every `every`-th
/// sample, by where the filter (the push-pull proxy) runs: nowhere (the
/// plain round trip, every sample: the baseline), in the subscriber's
/// library, in the publishing node's delivery manager, or in the daemon of
/// host 2, a third host the samples then cross (one extra hop). Each round
/// publishes `every` samples back to back and times the one asked for; the
/// acknowledgement returns directly. A second baseline publishes the same
/// rounds without a proxy: every sample crosses and the subscribing
/// application acknowledges only the `every`-th (what a user without
/// scaling would do). A raw UDP ping-pong across the same link is measured
/// beside them.
pub fn proxy_rtt(
    o: &SuiteOpts,
    site: &Site,
    size: usize,
    every: u32,
) -> anyhow::Result<Vec<Record>> {
    anyhow::ensure!(site.hosts() >= 3, "the proxy round trip needs 3 hosts");
    let env = site.env(o.env.exe.clone(), o.env.cpus, &[1]);
    let node2 = Proxy::Node(tagwire::NodeAddr(site.host(2).addr().into()));
    let variants = [
        ("tagwire", 1, Some(Proxy::Subscriber)),
        ("tagwire+no-proxy", every, None),
        ("tagwire+proxy@subscriber", every, Some(Proxy::Subscriber)),
        ("tagwire+proxy@publisher", every, Some(Proxy::Publisher)),
        ("tagwire+proxy@third-host", every, Some(node2)),
    ];
    let ropts = raw::RawOpts {
        cpus: o.env.cpus,
        ..raw::RawOpts::default()
    };
    let mut acc = Acc::default();
    let s = size as u64;
    for rep in 0..o.reps {
        acc.rep = rep;
        for (name, n, proxy) in variants {
            note(
                o,
                format!("proxy-rtt rep {}/{} {name} every {n}", rep + 1, o.reps),
            );
            // The daemon that should filter, and its count before the run:
            // a placement that silently fell back would measure another path.
            let filter_at = match proxy {
                Some(Proxy::Publisher) => Some(0),
                Some(Proxy::Node(_)) => Some(2),
                _ => None,
            };
            let before = filter_at.map(|i| site.daemon(i).map_or(0, Daemon::scaled_out));
            let d = workload::rtt(&env, Rounds::new(size, o.iters, o.warmup).every(n, proxy))?;
            if let (Some(i), Some(before)) = (filter_at, before) {
                anyhow::ensure!(
                    site.daemon(i).map_or(0, Daemon::scaled_out) > before,
                    "{name}: host {i}'s daemon filtered nothing; the proxy was not where asked"
                );
            }
            push(&mut acc, name, "block", s, 1, "all", &d);
        }
        let (a, b) = site.udp_pair(0, 1)?;
        let d = raw::udp_pingpong(a, b, size, o.iters, o.warmup, &ropts)?;
        push(&mut acc, "raw-udp", "block", s, 1, "all", &d);
    }
    let pairs = |e: &Series| -> Vec<(String, Series)> {
        if !e.0.starts_with("tagwire") {
            return Vec::new();
        }
        ["tagwire", "tagwire+no-proxy", "raw-udp"]
            .iter()
            .filter(|b| **b != e.0)
            .filter_map(|b| {
                acc.find(b, "block", e.2, 1, "all")
                    .map(|s| (b.to_string(), s.clone()))
            })
            .collect()
    };
    Ok(acc
        .records("proxy-rtt", pairs)
        .into_iter()
        .map(|r| {
            let nodes = if r.system.ends_with("third-host") {
                3
            } else {
                2
            };
            let note = match r.system.as_str() {
                "tagwire" => "no proxy: every sample".to_string(),
                "tagwire+no-proxy" => format!(
                    "no proxy, {every} samples a round: all cross, the application acks every {every}th"
                ),
                "raw-udp" => "raw UDP ping-pong, host 0 and host 1".to_string(),
                _ => format!("every {every}th sample"),
            };
            r.with_nodes(nodes).with_note(&note)
        })
        .collect())
}

/// Round trip against the number of receivers, with the receivers spread
/// in turn over `hosts` (paper Figure 4-6: all on host 1; Figure 4-7: over
/// three hosts, all acknowledging). With one host, the same run measures
/// its floor, `raw-udp` ([`raw::udp_fanout_rtt`]): the operating system's
/// cost of one datagram handed to n sleeping receivers on that host.
pub fn remote_fanout(
    o: &SuiteOpts,
    site: &Site,
    bench: &str,
    hosts: &[usize],
    receivers: &[usize],
    acks: &[Acks],
    size: usize,
) -> anyhow::Result<Vec<Record>> {
    let env = site.env(o.env.exe.clone(), o.env.cpus, hosts);
    let mut acc = Acc::default();
    for rep in 0..o.reps {
        acc.rep = rep;
        for &n in receivers {
            for &a in acks {
                note(
                    o,
                    format!(
                        "{bench} rep {}/{} receivers {n} acks {}",
                        rep + 1,
                        o.reps,
                        a.as_str()
                    ),
                );
                let d = workload::rtt(&env, Rounds::new(size, o.iters, o.warmup).fan(n, a))?;
                push(
                    &mut acc,
                    "tagwire",
                    "block",
                    size as u64,
                    n as u32,
                    a.as_str(),
                    &d,
                );
                // The floor, with every receiver on one host: a datagram
                // across the same link to a dispatcher thread there that
                // wakes n receiver threads, placed alike.
                if let [host] = hosts {
                    let (x, y) = site.udp_pair(0, *host)?;
                    let d = raw::udp_fanout_rtt(
                        x,
                        y,
                        size,
                        n,
                        a == Acks::All,
                        (o.iters, o.warmup),
                        &raw::RawOpts {
                            cpus: o.env.cpus,
                            ..raw::RawOpts::default()
                        },
                    )?;
                    push(
                        &mut acc,
                        "raw-udp",
                        "block",
                        size as u64,
                        n as u32,
                        a.as_str(),
                        &d,
                    );
                }
            }
        }
    }
    let first = receivers.iter().copied().min().unwrap_or(1) as u32;
    Ok(acc
        .records(bench, |e| {
            acc.find(&e.0, &e.1, e.2, first, &e.4)
                .map(|b| vec![(format!("{first}-receiver"), b.clone())])
                .unwrap_or_default()
        })
        .into_iter()
        .map(|r| {
            let used = (r.receivers as usize).min(hosts.len()) as u32;
            r.with_nodes(1 + used)
        })
        .collect())
}

/// Messages per second from host 0 to a subscriber on host 1, reliable and
/// lossless, by direct delivery and (reliable) through the daemons,
/// publisher flat out (held back by the window), beside raw UDP and Cyclone
/// DDS (reliable) across the same link.
///
/// With `keyed`, also `tagwire+auth` on that site, paired with `tagwire`.
pub fn remote_throughput(
    o: &SuiteOpts,
    site: &Site,
    keyed: Option<&Site>,
    sizes: &[usize],
    seconds: f64,
) -> anyhow::Result<Vec<Record>> {
    let env = site.env(o.env.exe.clone(), o.env.cpus, &[1]);
    let keyed_env = keyed.map(|k| k.env(o.env.exe.clone(), o.env.cpus, &[1]));
    let dds = dds_opts(o).and_then(|d| site.dds(&d, 1, 0).map_err(|e| format!("{e:#}")));
    let zenoh = site.peers(o, 0, 1);
    let dur = Duration::from_secs_f64(seconds);
    let mut rates = Rates::default();
    let mut add = |rep: usize, system: &str, size: u64, rate: f64, extra: String| {
        rates.add(rep, system, size, rate, extra)
    };
    let mut skipped = Vec::new();
    for rep in 0..o.reps {
        for &size in sizes {
            note(
                o,
                format!("remote throughput rep {}/{} size {size}", rep + 1, o.reps),
            );
            let s = size as u64;
            // Reliable and lossless by direct delivery (the default), and
            // reliable through the daemons (the path before it).
            // And reliable over the TCP carrier (`SubscribeOptions::tcp`:
            // the node's copy by TCP, then its ring).
            for (system, lossless, via, tcp) in [
                ("tagwire", false, false, false),
                ("tagwire-lossless", true, false, false),
                ("tagwire-via-daemon", false, true, false),
                ("tagwire-tcp", false, false, true),
            ] {
                let resent = site.retransmissions(0);
                let t = workload::throughput(&env, size, dur, None, lossless, via, tcp)?;
                let resent = site.retransmissions(0) - resent;
                add(
                    rep,
                    system,
                    s,
                    t.msgs_per_s,
                    format!(
                        "sent {} received {} lost {} (datagrams resent {resent})",
                        t.sent, t.received, t.lost
                    ),
                );
            }
            if let Some(env) = &keyed_env {
                let t = workload::throughput(env, size, dur, None, false, false, false)?;
                add(
                    rep,
                    "tagwire+auth",
                    s,
                    t.msgs_per_s,
                    format!("sent {} received {} lost {}", t.sent, t.received, t.lost),
                );
            }
            let (tx, rx) = site.udp_pair(0, 1)?;
            add(
                rep,
                "raw-udp",
                s,
                raw::udp_throughput(tx, rx, size, dur)?,
                String::new(),
            );
            // The kernel's bulk floor: MTU-sized datagrams, 64 KiB a send.
            let (tx, rx) = site.udp_pair(0, 1)?;
            match raw::udp_gso_throughput(tx, rx, size, MTU_PAYLOAD, dur) {
                Ok(r) => add(
                    rep,
                    "raw-udp-gso",
                    s,
                    r,
                    format!("{MTU_PAYLOAD}-byte datagrams, 64 KiB per send, received coalesced"),
                ),
                Err(e) if rep == 0 => skipped.push(Record::skipped(
                    "throughput",
                    "raw-udp-gso",
                    "block",
                    s,
                    &format!("{e:#}"),
                )),
                Err(_) => {}
            }
            match &dds {
                Ok(opts) => match ddsperf::throughput_with(s, o.dds_seconds, opts) {
                    Ok(r) => add(
                        rep,
                        "cyclonedds",
                        s,
                        r.msgs_per_s,
                        format!("reliable; lost {}", r.lost),
                    ),
                    Err(e) => skipped.push(Record::skipped(
                        "throughput",
                        "cyclonedds",
                        "block",
                        s,
                        &format!("ddsperf failed: {e:#}"),
                    )),
                },
                Err(reason) if rep == 0 => skipped.push(Record::skipped(
                    "throughput",
                    "cyclonedds",
                    "block",
                    s,
                    reason,
                )),
                Err(_) => {}
            }
            if let Ok(p) = &zenoh {
                peers::PeerThroughput::record(
                    peers::zenoh_throughput(p, size, seconds),
                    (rep, "zenoh", s, "TCP, peer mode"),
                    &mut add,
                    &mut skipped,
                );
            }
        }
    }
    let mut out = rates.records(2);
    if let Err(reason) = &zenoh {
        for &size in sizes {
            skipped.push(Record::skipped(
                "throughput",
                "zenoh",
                "block",
                size as u64,
                reason,
            ));
        }
    }
    out.extend(skipped.into_iter().map(|r| r.with_nodes(2)));
    Ok(out)
}
