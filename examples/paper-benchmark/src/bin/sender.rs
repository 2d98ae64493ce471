//! The sender loop of the paper's Figure 4-1, on the tagwire API:
//! send a message on the *data* tag, wait for the acknowledgement(s) on the *ack*
//! tag, repeat, and divide the elapsed time by the number of round trips.
//!
//! Usage: `paper-sender [ROUNDS] [SIZE] [RECEIVERS]` (defaults 1000, 256, 1).
//! Start `paper-receiver` processes first (or after: the sender waits for them).

use std::time::{Duration, Instant};

use tagwire::{Client, Domain, SubscribeOptions};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: u32 = args.next().map_or(Ok(1000), |s| s.parse())?;
    let size: usize = args.next().map_or(Ok(256), |s| s.parse())?;
    let receivers: usize = args.next().map_or(Ok(1), |s| s.parse())?;

    let tw = Client::connect()?;
    tw.create_tag("/paper/data", Domain::Global)?;
    tw.create_tag("/paper/ack", Domain::Global)?;
    let mut data = tw.publisher("/paper/data")?; // get send access
    let mut acks = tw.subscribe("/paper/ack", SubscribeOptions::default())?;

    // Wait until every receiver is there (the paper starts them by hand).
    let t0 = Instant::now();
    while tw.senders("/paper/ack")?.len() < receivers {
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(30),
            "receivers did not come up"
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    let msg = vec![b'x'; size];
    let start = Instant::now();
    for _ in 0..rounds {
        data.send(&msg)?;
        for _ in 0..receivers {
            acks.receive(Some(Duration::from_secs(5)))?;
        }
    }
    let per_round = start.elapsed() / rounds.max(1);
    println!(
        "rounds={rounds} size={size} receivers={receivers} round_trip_us={:.2}",
        per_round.as_secs_f64() * 1e6
    );
    data.send(b"quit")?;
    Ok(())
}
