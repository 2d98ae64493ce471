//! A controller build: `--first` runs from cycle 1; otherwise it replaces
//! the running build (the handshake in the crate's description) and runs
//! until a newer build replaces it. Prints `RUNNING build=B cycle=C` when
//! it starts publishing and `DONE build=B` when it has handed over.

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;
use tagwire::{Client, Domain, PublishOptions, SubscribeOptions};
use tagwire_example_hot_upgrade::{
    Controller, Out, Phase, Upgrade, COMMAND_TAG, SENSOR_TAG, UPGRADE_TAG,
};

#[derive(Parser)]
#[command(about = "A controller build of the hot-upgrade example")]
struct Args {
    /// This build's number (unique).
    #[arg(long)]
    build: u32,
    /// Start publishing at once (the first build); otherwise take over
    /// from the running one.
    #[arg(long)]
    first: bool,
    /// Control period, ms.
    #[arg(long, default_value_t = 10)]
    period_ms: u64,
    /// Run at this scheduling policy (`fifo:30`, as a controller would);
    /// without the privilege, a warning and the default policy.
    #[arg(long, value_parser = str::parse::<tagwire::Sched>)]
    sched: Option<tagwire::Sched>,
}

enum Event {
    Sensor(f64),
    Upgrade(Upgrade),
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let period = Duration::from_millis(a.period_ms.max(1));
    if let Some(sched) = a.sched {
        // Before any thread starts: they inherit it.
        if let Err(e) = tagwire::set_thread_sched(sched) {
            eprintln!("warning: running at the default policy: {e}");
        }
    }
    let tw = Client::connect()?;
    for tag in [SENSOR_TAG, COMMAND_TAG, UPGRADE_TAG] {
        tw.create_tag(tag, Domain::Global)?;
    }
    // The rights first, the handshake after: by the time this build is
    // told its first cycle, its send access and subscriptions exist.
    let mut sensor = tw.subscribe(SENSOR_TAG, SubscribeOptions::default())?;
    // With a policy, the daemons' threads that carry the handshake and the
    // commands run at it too (where permitted).
    let opts = a.sched.map_or_else(SubscribeOptions::default, |s| {
        SubscribeOptions::default().sched(s)
    });
    let mut upgrades = match tw.subscribe(UPGRADE_TAG, opts) {
        Err(e @ tagwire::Error::NotPermitted(_)) => {
            eprintln!("warning: the handshake's threads at the default policy: {e}");
            tw.subscribe(UPGRADE_TAG, SubscribeOptions::default())?
        }
        r => r?,
    };
    let popts = a.sched.map_or_else(PublishOptions::default, |s| {
        PublishOptions::default().sched(s)
    });
    let mut commands = match tw.publisher_with(COMMAND_TAG, popts) {
        Err(tagwire::Error::NotPermitted(_)) => tw.publisher(COMMAND_TAG)?,
        r => r?,
    };
    let mut say = tw.publisher(UPGRADE_TAG)?;
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    std::thread::spawn(move || loop {
        match sensor.receive(None) {
            Ok(m) => {
                let v = m.payload.get(..8).and_then(|b| b.try_into().ok());
                if let Some(b) = v {
                    if tx.send(Event::Sensor(f64::from_le_bytes(b))).is_err() {
                        return;
                    }
                }
            }
            // Losing a reading is not fatal (the next one comes).
            Err(tagwire::Error::Overflowed { .. }) => {}
            Err(_) => return,
        }
    });
    std::thread::spawn(move || loop {
        match upgrades.receive(None) {
            Ok(m) => {
                if let Some(u) = Upgrade::decode(&m.payload) {
                    if tx2.send(Event::Upgrade(u)).is_err() {
                        return;
                    }
                }
            }
            Err(tagwire::Error::Overflowed { .. }) => {}
            Err(_) => return,
        }
    });
    let now = Instant::now();
    let mut c = if a.first {
        Controller::first(a.build, period, now)
    } else {
        let (c, hello) = Controller::successor(a.build, period, now);
        if let Out::Say(m) = hello {
            say.send(&m.encode())?;
        }
        c
    };
    let mut out = std::io::stdout();
    let mut announced = false;
    // A hello may reach the running build before its daemon knows this
    // build's subscription (which its answer needs): say it again while
    // waiting.
    let mut next_hello = now + period * 5;
    loop {
        let now = Instant::now();
        let mut wake = c.poll_timeout().unwrap_or(now + period);
        if c.phase() == Phase::Waiting {
            wake = wake.min(next_hello);
        }
        let event = rx.recv_timeout(wake.saturating_duration_since(now));
        let now = Instant::now();
        let mut todo = Vec::new();
        match event {
            Ok(Event::Sensor(v)) => c.on_sensor(v),
            Ok(Event::Upgrade(u)) => todo.extend(c.on_upgrade(u, now)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the daemon connection ended")
            }
        }
        if c.phase() == Phase::Waiting && now >= next_hello {
            next_hello = now + period * 5;
            say.send(&Upgrade::Hello { build: a.build }.encode())?;
        }
        todo.extend(c.tick(now));
        for o in todo {
            match o {
                Out::Command(cmd) => {
                    if !announced {
                        announced = true;
                        writeln!(out, "RUNNING build={} cycle={}", a.build, cmd.cycle)?;
                        out.flush()?;
                    }
                    commands.send(&cmd.encode())?;
                }
                Out::Say(m) => {
                    say.send(&m.encode())?;
                }
                Out::Exit => {
                    writeln!(out, "DONE build={}", a.build)?;
                    out.flush()?;
                    return Ok(());
                }
            }
        }
    }
}
