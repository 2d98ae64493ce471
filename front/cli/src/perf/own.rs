//! The benchmarks of `tagwire perf` that set up their own daemons and
//! write their own records (footprint, costs, napa, priority, place; record
//! and play in files of their own), beside the suite's ones in `perf.rs`.

use std::time::Duration;

use std::io::Write as _;

use tagwire_perf::{remote, report};

use super::{daemon_for, parse_pin, tempfile_dir, Args, Bench};

/// Runs `a`'s benchmark if it is one of these (or record or play):
/// `None` for the suite's.
pub(super) fn run(a: &Args) -> Option<anyhow::Result<()>> {
    Some(match &a.bench {
        Bench::Footprint => footprint(a),
        Bench::Record {
            size,
            count,
            compression,
        } => super::record::record(a, *size, *count, compression),
        Bench::Play { hz, count, sched } => super::play::play(a, *hz, *count, *sched),
        Bench::Place { max_nodes } => place(a, *max_nodes),
        Bench::Napa { .. } => napa(a),
        Bench::Priority { .. } => priority(a),
        Bench::Costs { .. } => costs(a),
        Bench::Soak { .. } => soak(a),
        Bench::SoakChild { spec } => serde_json::from_str(spec)
            .map_err(anyhow::Error::from)
            .and_then(|s| tagwire_perf::soak::child::run(&s)),
        _ => return None,
    })
}

/// The daemon a benchmark of the CLI's own commands talks to (see
/// `daemon_for`; kept running while the handle lives) and a client of it.
pub(super) fn daemon_and_client(
    a: &Args,
) -> anyhow::Result<(
    std::path::PathBuf,
    Option<tagwire_daemon::Daemon>,
    tagwire::Client,
)> {
    let (socket, daemon) = daemon_for(a)?;
    let client = tagwire::Client::with_options(tagwire::ClientOptions {
        socket: socket.clone(),
        autostart: false,
        ..tagwire::ClientOptions::default()
    })?;
    Ok((socket, daemon, client))
}

/// Prints a benchmark's records (`json`: JSON lines, with `--json`; else
/// `table`) and writes both to `NAME.json` and `NAME.txt` under `--out`.
pub(super) fn save(a: &Args, name: &str, json: &[u8], table: &str) -> anyhow::Result<()> {
    if a.json {
        std::io::stdout().write_all(json)?;
    } else {
        print!("{table}");
    }
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join(format!("{name}.json")), json)?;
    std::fs::write(a.out.join(format!("{name}.txt")), table)?;
    eprintln!("perf: results in {}/{name}.{{json,txt}}", a.out.display());
    Ok(())
}

fn footprint(a: &Args) -> anyhow::Result<()> {
    let dir = tempfile_dir()?;
    let f = tagwire_perf::footprint::measure(&std::env::current_exe()?, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let f = f?;
    let json = serde_json::to_string(&f)?;
    let table = tagwire_perf::footprint::table(&f);
    if a.json {
        println!("{json}");
    } else {
        print!("{table}");
    }
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("footprint.json"), format!("{json}\n"))?;
    std::fs::write(a.out.join("footprint.txt"), table)?;
    Ok(())
}

fn costs(a: &Args) -> anyhow::Result<()> {
    let Bench::Costs {
        calls,
        sizes,
        remote,
        sched,
    } = &a.bench
    else {
        unreachable!("costs() is called for Bench::Costs");
    };
    let spec = tagwire_perf::costs::Spec {
        calls: (*calls).max(1),
        sizes: sizes.clone(),
        sched: *sched,
        far_cpu: None,
    };
    let show = |r: &tagwire_perf::costs::CostRecord| {
        let what = match r.cpu {
            Some(cpu) => format!("{} cpu{cpu} per {} us", r.call, r.size),
            None => format!("{} {} B {:?}", r.call, r.size, r.place),
        };
        eprintln!(
            "perf costs: {what}: p50 {:.2} us, p99.9 {:.2} us, max {:.1} us",
            r.p50_us, r.p999_us, r.max_us
        );
    };
    let (socket, _daemon) = daemon_for(a)?;
    let client = tagwire::Client::with_options(tagwire::ClientOptions {
        socket,
        timeout: Duration::from_secs(5),
        autostart: false,
        name: "tagwire-perf".into(),
    })?;
    let mut records = tagwire_perf::costs::measure(&client, None, &spec, show)?;
    drop(client);
    if *remote {
        let site = remote::Site::new(2)?;
        let (here, there) = (site.client(0)?, site.client(1)?);
        // The calls from host 0's namespace: its client's sockets are
        // made there.
        let spec2 = spec.clone();
        let measured = site
            .host(0)
            .spawn(move || tagwire_perf::costs::measure(&here, Some(&there), &spec2, show))?
            .join()
            .map_err(|_| anyhow::anyhow!("the remote costs thread panicked"))??;
        records.extend(measured);
    }
    save(
        a,
        "costs",
        &report::json_lines(&records)?,
        &tagwire_perf::costs::table(&records),
    )
}

fn napa(a: &Args) -> anyhow::Result<()> {
    let Bench::Napa {
        rates,
        sizes,
        settle,
        seconds,
        queue_ms,
        losses,
    } = &a.bench
    else {
        unreachable!("napa() is called for Bench::Napa");
    };
    if let Some(l) = losses.iter().find(|&&l| l >= 100) {
        anyhow::bail!("--losses {l}: a loss is a percentage below 100");
    }
    let rates = rates
        .iter()
        .map(|r| parse_rate(r))
        .collect::<anyhow::Result<Vec<u64>>>()?;
    let spec = tagwire_perf::napa::Spec {
        rates,
        sizes: sizes.clone(),
        warmup: Duration::from_secs_f64(*settle),
        measure: Duration::from_secs_f64(*seconds),
        queue: Duration::from_millis(*queue_ms),
        losses: losses.clone(),
        reps: a.reps.max(1),
        zenoh: match a.no_peers {
            true => None,
            false => tagwire_perf::peers::available()
                .inspect_err(|why| eprintln!("perf napa: no Zenoh rows: {why}"))
                .ok(),
        },
        cyclone: match a.no_peers {
            true => None,
            false => tagwire_perf::ddsperf::DdsOpts::detect()
                .inspect_err(|why| eprintln!("perf napa: no Cyclone DDS rows: {why}"))
                .ok(),
        },
    };
    let pin = parse_pin(&a.pin)?;
    let paced = remote::Site::with_net(2, None, pin, Some(tagwire_daemon::PacerConfig::default()))?;
    let unpaced = remote::Site::with_net(2, None, pin, None)?;
    let records = tagwire_perf::napa::napa(&paced, &unpaced, &spec, |line| {
        eprintln!("perf napa: {line}");
    })?;
    save(
        a,
        "napa",
        &report::json_lines(&records)?,
        &tagwire_perf::napa::table(&records),
    )?;
    match tagwire_perf::plot::napa_plots(&a.out, &records) {
        Ok(files) => {
            for f in files {
                eprintln!("perf: chart in {}", f.display());
            }
        }
        Err(e) => eprintln!("perf: no plot: {e:#}"),
    }
    Ok(())
}

fn priority(a: &Args) -> anyhow::Result<()> {
    use tagwire_perf::priority::Figure;
    let Bench::Priority {
        figure,
        tcp,
        rate,
        loads,
        load_size,
        size,
        gap_ms,
        settle,
        seconds,
        hogs,
        sched,
        load_sched,
    } = &a.bench
    else {
        unreachable!("priority() is called for Bench::Priority");
    };
    let spec = tagwire_perf::priority::Spec {
        rate: parse_rate(rate)?,
        loads: loads.clone(),
        load_size: *load_size,
        probe_size: *size,
        gap: Duration::from_secs_f64(gap_ms / 1000.0),
        warmup: Duration::from_secs_f64(*settle),
        measure: Duration::from_secs_f64(*seconds),
        reps: a.reps.max(1),
        hogs: *hogs,
        sched: *sched,
        load_sched: *load_sched,
        zenoh: match a.no_peers {
            true => None,
            false => tagwire_perf::peers::available()
                .inspect_err(|why| eprintln!("perf priority: no Zenoh rows: {why}"))
                .ok(),
        },
        cyclone: match a.no_peers || *tcp {
            true => None,
            false => tagwire_perf::ddsperf::DdsOpts::detect()
                .inspect_err(|why| eprintln!("perf priority: no Cyclone DDS rows: {why}"))
                .ok(),
        },
        figure: *figure,
        tcp: *tcp,
    };
    let pin = parse_pin(&a.pin)?;
    let site = match figure.routed() {
        true => remote::Site::routed(figure.hosts(), pin)?,
        false => remote::Site::with_net(figure.hosts(), None, pin, None)?,
    };
    let records = tagwire_perf::priority::priority(&site, &spec, |line| {
        eprintln!("perf priority: {line}");
    })?;
    drop(site);
    // Figure 5a over UDP keeps the plain name.
    let name = match (figure, tcp) {
        (Figure::A, false) => "priority".to_owned(),
        (f, tcp) => format!("priority-{}{}", f.name(), if *tcp { "-tcp" } else { "" }),
    };
    save(
        a,
        &name,
        &report::json_lines(&records)?,
        &tagwire_perf::priority::table(&records),
    )?;
    let png = a.out.join(format!("{name}.png"));
    match tagwire_perf::plot::priority_plot(&png, &records) {
        Ok(()) => eprintln!("perf: chart in {}", png.display()),
        Err(e) => eprintln!("perf: no plot: {e:#}"),
    }
    Ok(())
}

/// `100M`, `1G`, `500k` or plain bit/s.
fn parse_rate(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1_000),
        Some('m' | 'M') => (&s[..s.len() - 1], 1_000_000),
        Some('g' | 'G') => (&s[..s.len() - 1], 1_000_000_000),
        _ => (s, 1),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("a rate is like 100M, 1G or bit/s: {s:?}"))?;
    if n.is_nan() || n <= 0.0 {
        anyhow::bail!("a rate must be more than 0: {s:?}");
    }
    Ok((n * mul as f64) as u64)
}

fn place(a: &Args, max_nodes: usize) -> anyhow::Result<()> {
    let records = tagwire_perf::place::measure(max_nodes, a.reps, |name| {
        eprintln!("perf place: {name}");
    })?;
    save(
        a,
        "place",
        &report::json_lines(&records)?,
        &tagwire_perf::place::table(&records),
    )
}

/// `perf soak`: see `tagwire_perf::soak`. Exits with an error when an
/// invariant broke.
fn soak(a: &Args) -> anyhow::Result<()> {
    let Bench::Soak {
        nodes,
        tags,
        seconds,
        fault_every,
        seed,
        faults,
        kinds,
    } = &a.bench
    else {
        unreachable!("soak's arguments");
    };
    let spec = tagwire_perf::soak::Spec {
        nodes: *nodes,
        tags: (*tags).max(1),
        duration: Duration::from_secs(*seconds),
        fault_every: Duration::from_secs((*fault_every).max(1)),
        seed: *seed,
        faults: faults.clone(),
        kinds: kinds.clone(),
        exe: std::env::current_exe()?,
    };
    let outcome = tagwire_perf::soak::run(&spec, |line| eprintln!("{line}"))?;
    let json = serde_json::to_string(&outcome)? + "\n";
    save(
        a,
        "soak",
        json.as_bytes(),
        &tagwire_perf::soak::table(&outcome),
    )?;
    anyhow::ensure!(
        outcome.violations.is_empty(),
        "the soak broke its invariants: {}",
        outcome.violations.join("; ")
    );
    Ok(())
}
