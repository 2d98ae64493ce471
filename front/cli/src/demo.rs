//! `tagwire demo`: the README's first command. Starts a daemon if none answers,
//! then a publisher and subscribers as separate processes, and lets the
//! subscribers print live latency summaries.

use std::process::{Child, Command};
use std::time::Duration;

use crate::ConnectArgs;

/// Arguments of `tagwire demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// How long to run, seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Number of subscriber processes.
    #[arg(long, default_value_t = 3)]
    subscribers: usize,
    /// Publish rate, Hz.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Message size, bytes.
    #[arg(long, default_value_t = 256)]
    size: usize,
    #[command(flatten)]
    connect: ConnectArgs,
}

struct Reaper(Vec<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) fn run(a: Args) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let mut opts = a.connect.options();
    let mut daemon = Reaper(Vec::new());
    let mut children = Reaper(Vec::new());
    // Our own daemon unless one already answers.
    let client = match tagwire::Client::with_options(opts.clone()) {
        Ok(c) => {
            println!(
                "demo: using the running daemon at {}",
                opts.socket.display()
            );
            c
        }
        Err(_) => {
            println!(
                "demo: no daemon answers at {}; starting one",
                opts.socket.display()
            );
            let d = Command::new(&exe)
                .arg("daemon")
                .env("TAGWIRE_SOCKET", &opts.socket)
                .spawn()?;
            daemon.0.push(d);
            opts.timeout = Duration::from_secs(5);
            let start = std::time::Instant::now();
            loop {
                match tagwire::Client::with_options(opts.clone()) {
                    Ok(c) => break c,
                    Err(e) if start.elapsed() > Duration::from_secs(5) => return Err(e.into()),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    };
    let tag = "/demo/chatter";
    client.create_tag(tag, tagwire::Domain::Global)?;
    let count = (a.rate * a.seconds as f64) as u64;
    for i in 0..a.subscribers {
        let s = Command::new(&exe)
            .args([
                "sub",
                tag,
                "--stats",
                "--count",
                &count.to_string(),
                "--idle-timeout",
                "3",
            ])
            .args(["--label", &format!("sub{}", i + 1)])
            .env("TAGWIRE_SOCKET", &opts.socket)
            .spawn()?;
        children.0.push(s);
    }
    println!(
        "demo: 1 publisher -> {} subscribers on {tag}, {} B at {} Hz for {} s (latency = receive time - send time)",
        a.subscribers, a.size, a.rate, a.seconds
    );
    let mut publ = Command::new(&exe)
        .args([
            "pub",
            tag,
            "--rate",
            &a.rate.to_string(),
            "--size",
            &a.size.to_string(),
        ])
        .args([
            "--count",
            &count.to_string(),
            "--wait-receivers",
            &a.subscribers.to_string(),
        ])
        .env("TAGWIRE_SOCKET", &opts.socket)
        .spawn()?;
    let status = publ.wait()?;
    anyhow::ensure!(status.success(), "publisher failed: {status}");
    // Let subscribers drain and print their last summary, then show the table.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    for c in &mut children.0 {
        while std::time::Instant::now() < deadline {
            if c.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(children);
    drop(client);
    drop(daemon);
    println!("demo: done");
    Ok(())
}
