//! Measures the raw baselines and Cyclone DDS at a few sizes, interleaved,
//! three repetitions, and prints/saves the tables and a chart.
//!
//! `cargo run --release -p tagwire-perf --example baselines [out-dir]`

use std::path::PathBuf;
use std::time::Duration;

use tagwire_perf::report::{self, Record};
use tagwire_perf::stats::{Repeated, RepeatedRate, Summary};
use tagwire_perf::{ddsperf, plot, raw};

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/perf-baselines".into()),
    );
    let sizes = [64usize, 256, 8192];
    let reps = 3;
    let dds = ddsperf::DdsOpts::detect();
    if let Err(e) = &dds {
        println!("cyclonedds skipped: {e}");
    }
    let mut records = Vec::new();
    for &size in &sizes {
        let (mut fx, mut sp, mut ud, mut cy) = (vec![], vec![], vec![], vec![]);
        for _ in 0..reps {
            fx.push(Summary::from_durations(&raw::raw_shm_futex_rtt(
                size, 20_000, 2_000,
            )?));
            sp.push(Summary::from_durations(&raw::raw_shm_spin_rtt(
                size, 100_000, 10_000,
            )?));
            ud.push(Summary::from_durations(&raw::raw_udp_rtt(
                size, 20_000, 2_000,
            )?));
            if let Ok(o) = &dds {
                let r = ddsperf::rtt_with(size as u64, 3, o)?;
                cy.push((r.p50_us, r.p99_us));
            }
        }
        let fold = |v: Vec<Option<Summary>>| {
            Repeated::from_summaries(&v.into_iter().flatten().collect::<Vec<_>>())
        };
        if let Some(r) = fold(fx) {
            records.push(Record::rtt("raw-futex", "block", size as u64, &r));
        }
        if let Some(r) = fold(sp) {
            records.push(Record::rtt("raw-spin", "spin", size as u64, &r));
        }
        if let Some(r) = fold(ud) {
            records.push(Record::rtt("raw-udp", "block", size as u64, &r));
        }
        match (&dds, Repeated::from_p50_p99(&cy)) {
            (Ok(_), Some(r)) => records.push(Record::rtt("cyclonedds", "block", size as u64, &r)),
            (Err(e), _) => records.push(Record::skipped(
                "rtt",
                "cyclonedds",
                "block",
                size as u64,
                e,
            )),
            _ => {}
        }
    }
    for &size in &[256usize, 8192] {
        let mut udp = Vec::new();
        let mut cy = Vec::new();
        for _ in 0..reps {
            udp.push(raw::raw_udp_throughput(size, Duration::from_secs(1))?);
            if let Ok(o) = &dds {
                cy.push(ddsperf::throughput_with(size as u64, 3, o)?.msgs_per_s);
            }
        }
        if let Some(r) = RepeatedRate::from_rates(&udp) {
            records.push(Record::throughput("raw-udp", "block", size as u64, &r));
        }
        if let Some(r) = RepeatedRate::from_rates(&cy) {
            records.push(Record::throughput("cyclonedds", "block", size as u64, &r));
        }
    }
    report::print_rtt_table(&records);
    println!();
    report::print_throughput_table(&records);
    report::save_results(&out, "baselines", &records)?;
    if let Err(e) = plot::rtt_plot(&out.join("baselines-rtt.png"), &records) {
        println!("plot: {e:#}");
    }
    println!("saved to {}", out.display());
    Ok(())
}
