//! The plant's sensor: a reading every period on `/plant/sensor`.

use std::time::{Duration, Instant};

use clap::Parser;
use tagwire::{Client, Domain};
use tagwire_example_hot_upgrade::SENSOR_TAG;

#[derive(Parser)]
#[command(about = "The sensor of the hot-upgrade example")]
struct Args {
    /// Period, ms.
    #[arg(long, default_value_t = 5)]
    period_ms: u64,
    /// Seconds to run (0: for ever).
    #[arg(long, default_value_t = 0.0)]
    seconds: f64,
    /// Run at this scheduling policy (`fifo:30`, as a controller would);
    /// without the privilege, a warning and the default policy.
    #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
    sched: Option<tagwire::Sched>,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if let Some(sched) = a.sched {
        // Before any thread starts: they inherit it.
        if let Err(e) = tagwire::set_thread_sched(sched) {
            eprintln!("warning: running at the default policy: {e}");
        }
    }
    let tw = Client::connect()?;
    tw.create_tag(SENSOR_TAG, Domain::Global)?;
    let mut p = tw.publisher(SENSOR_TAG)?;
    let period = Duration::from_millis(a.period_ms.max(1));
    let start = Instant::now();
    let mut next = start;
    loop {
        let t = start.elapsed().as_secs_f64();
        if a.seconds > 0.0 && t >= a.seconds {
            return Ok(());
        }
        // A plant that settles toward 1 with a slow wobble.
        let reading = 1.0 - (-t).exp() + 0.05 * (t * 3.0).sin();
        p.send(&reading.to_le_bytes())?;
        next += period;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
}
