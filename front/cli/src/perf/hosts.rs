//! `tagwire perf`'s multi-host benchmarks (remote round trips and
//! fan-out, proxies, remote throughput, several nodes): a site of network
//! namespaces with one daemon per host.

use tagwire_perf::remote;

use tagwire_perf::workload::Acks;

use super::{emit, parse_acks, parse_pin, parse_receivers, suite_opts, Args, Bench};

/// The multi-host benchmarks: a site of network namespaces with one daemon
/// per host (see `tagwire_perf::remote`).
pub(super) fn run(a: &Args) -> anyhow::Result<()> {
    if a.socket.is_some() {
        anyhow::bail!("--socket does not apply: the multi-host benchmarks start their own daemons");
    }
    let hosts = match a.bench {
        Bench::MultiNode { .. } => 4,
        Bench::ProxyRtt { .. } => 3,
        _ => 2,
    };
    let (mut on, mut off) = (false, false);
    for v in &a.auth {
        match v.as_str() {
            "on" => on = true,
            "off" => off = true,
            other => anyhow::bail!("--auth takes on, off or on,off, not {other:?}"),
        }
    }
    let both = on && off;
    if both && !matches!(a.bench, Bench::RemoteRtt { .. } | Bench::Throughput { .. }) {
        anyhow::bail!("--auth on,off applies to remote-rtt and throughput --remote");
    }
    // A benchmark key: these hosts exist for this run only.
    let key = || Some(tagwire_daemon::DomainKey::from_bytes([0x5a; 32]));
    // Throughput: each host's daemon on its side's CPU, with its publisher
    // or subscriber, as every peer's process is. (The round trips keep
    // the placement their bars were measured with: ends pinned, daemons
    // left to the scheduler.)
    let placed = match a.bench {
        Bench::Throughput { .. } => parse_pin(&a.pin)?,
        _ => None,
    };
    let pacing = a.pacing.then(tagwire_daemon::PacerConfig::default);
    let site =
        remote::Site::with_net(hosts, if on && !off { key() } else { None }, placed, pacing)?;
    let keyed = if both {
        Some(remote::Site::with_net(hosts, key(), placed, pacing)?)
    } else {
        None
    };
    let o = suite_opts(a, site.socket(0))?;
    let (name, records) = match &a.bench {
        Bench::RemoteRtt { sizes } => (
            "remote-rtt",
            remote::remote_rtt(&o, &site, keyed.as_ref(), sizes)?,
        ),
        Bench::RemoteFanout {
            receivers,
            acks,
            size,
        } => (
            "remote-fanout",
            remote::remote_fanout(
                &o,
                &site,
                "remote-fanout",
                &[1],
                &parse_receivers(receivers)?,
                &parse_acks(acks)?,
                *size,
            )?,
        ),
        Bench::MultiNode { receivers, size } => (
            "multi-node",
            remote::remote_fanout(
                &o,
                &site,
                "multi-node",
                &[1, 2, 3],
                &parse_receivers(receivers)?,
                &[Acks::All],
                *size,
            )?,
        ),
        Bench::ProxyRtt { size, every } => {
            ("proxy-rtt", remote::proxy_rtt(&o, &site, *size, *every)?)
        }
        Bench::Throughput { size, seconds, .. } => (
            "throughput-remote",
            remote::remote_throughput(&o, &site, keyed.as_ref(), size, *seconds)?,
        ),
        Bench::Rtt { .. }
        | Bench::Fanout { .. }
        | Bench::Footprint
        | Bench::Record { .. }
        | Bench::Play { .. }
        | Bench::Costs { .. }
        | Bench::Soak { .. }
        | Bench::SoakChild { .. }
        | Bench::Pull { .. }
        | Bench::Table2 { .. }
        | Bench::Napa { .. }
        | Bench::Priority { .. }
        | Bench::Place { .. } => {
            unreachable!("not a multi-host benchmark")
        }
    };
    drop(keyed);
    drop(site);
    emit(a, name, &records)
}
