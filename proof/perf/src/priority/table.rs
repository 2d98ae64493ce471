//! `tagwire perf priority`'s table: the records, then the bars' ratios.

use super::PriorityRecord;

/// A figure rounded to µs, or `-` where the system does not give it.
fn shown(v: f64) -> String {
    match v.is_finite() {
        true => format!("{v:.0}"),
        false => "-".into(),
    }
}

/// The records as a table, then the bars' ratios: each system's p99 over
/// the critical channel's unloaded p50, and normal ÷ critical per load.
pub fn table(records: &[PriorityRecord]) -> String {
    let mut out = records.first().map_or_else(String::new, |r| {
        let load = match r.load_sched.as_str() {
            "other" => String::new(),
            s => format!(", tagwire's load channel at {s}"),
        };
        format!(
            "Figure {} over {}{load}\n",
            r.figure,
            r.carrier.to_uppercase()
        )
    });
    out.push_str(
        "system            sched     load  load Mbit/s  mean us (min-max)      std us      p50 us (min-max)       p99 us (min-max)         p99.9 us   max us  RTs   lost\n",
    );
    for r in records {
        out += &format!(
            "{:<17} {:<9} {:>3} %  {:>10.1}  {:>7.0} ({:.0}-{:.0})  {:>9}  {:>7.0} ({:.0}-{:.0})  {:>8.0} ({:.0}-{:.0})  {:>9} {:>8.0} {:>5} {:>5}\n",
            r.system,
            r.sched,
            r.load_pct,
            r.load_mbit_s,
            r.mean_us[0],
            r.mean_us[1],
            r.mean_us[2],
            shown(r.std_us[0]),
            r.p50_us[0],
            r.p50_us[1],
            r.p50_us[2],
            r.p99_us[0],
            r.p99_us[1],
            r.p99_us[2],
            shown(r.p999_us),
            r.max_us,
            r.round_trips,
            r.load_lost,
        );
    }
    let find = |system: &str, load: u32| {
        records
            .iter()
            .find(|r| r.system == system && r.load_pct == load)
    };
    let idle = find("tagwire critical", 0).map(|r| r.p50_us[0]);
    let floor_system = match records.iter().any(|r| r.system == "tcp floor") {
        true => "tcp floor",
        false => "udp floor",
    };
    let floor_idle = find(floor_system, 0).map(|r| r.p50_us[0]);
    out += "\nper load: critical p99 / critical unloaded p50 (the bar: <= 2), the same for the floor \
            (what this machine allows), critical p99 / floor p99, normal p99 / critical p99, mean and std \
            critical / normal; with Zenoh: critical p99 / Zenoh's p99 on a link of its own (bar <= 1) and \
            on its shared link (bar <= 0.5); with Cyclone DDS: critical p99 / its p99 (bar <= 0.2)\n";
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    for r in records.iter().filter(|r| r.system == "tagwire critical") {
        let Some(n) = find("tagwire normal", r.load_pct) else {
            continue;
        };
        let floor = find(floor_system, r.load_pct);
        out += &format!(
            "{:>3} %  critical p99/idle p50 {:>7.2}  floor p99/idle p50 {:>7.2}  critical/floor p99 {:>6.2}  \
             normal/critical p99 {:>7.2}  mean {:.3}  std {:.3}\n",
            r.load_pct,
            idle.map_or(0.0, |i| ratio(r.p99_us[0], i)),
            floor
                .zip(floor_idle)
                .map_or(0.0, |(f, i)| ratio(f.p99_us[0], i)),
            floor.map_or(0.0, |f| ratio(r.p99_us[0], f.p99_us[0])),
            ratio(n.p99_us[0], r.p99_us[0]),
            ratio(r.mean_us[0], n.mean_us[0]),
            ratio(r.std_us[0], n.std_us[0]),
        );
        let zenoh = [
            ("zenoh rt own link", "own link"),
            ("zenoh realtime", "shared link"),
        ];
        for (system, what) in zenoh {
            if let Some(z) = find(system, r.load_pct) {
                out += &format!(
                    "        critical p99 / Zenoh p99 ({what}) {:>7.3}\n",
                    ratio(r.p99_us[0], z.p99_us[0])
                );
            }
        }
        if let Some(c) = find("cyclone dds", r.load_pct) {
            out += &format!(
                "        critical p99 / Cyclone DDS p99 {:>7.3}\n",
                ratio(r.p99_us[0], c.p99_us[0])
            );
        }
    }
    out
}
