//! `tagwire perf footprint`: memory and threads, the resource bars.
//!
//! * the resident set (VmRSS) of an idle daemon **process** (`tagwire daemon`),
//!   right after start and after 10 tags were created and released by a client;
//! * the threads a client process has before and after taking 10 subscriptions
//!   (the receive path runs on the caller's thread, so there must be none added).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tagwire::{Client, ClientOptions, Domain, SubscribeOptions};

/// The measurements.
#[derive(Debug, Clone, Serialize)]
pub struct Footprint {
    /// Always "footprint".
    pub bench: &'static str,
    /// Always "tagwire".
    pub system: &'static str,
    /// Daemon VmRSS just after it answered its first request, KiB.
    pub daemon_idle_rss_kib: u64,
    /// Daemon VmRSS after a client created 10 tags with 10 subscriptions and left, KiB.
    pub daemon_after_use_rss_kib: u64,
    /// Daemon threads when idle.
    pub daemon_idle_threads: u64,
    /// Client threads after connecting.
    pub client_threads_connected: u64,
    /// Client threads with 10 subscriptions.
    pub client_threads_with_10_subscriptions: u64,
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status_field(pid: u32, field: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

/// Measures, starting `exe daemon` on a private socket in `dir`.
pub fn measure(exe: &Path, dir: &Path) -> anyhow::Result<Footprint> {
    let socket = dir.join("footprint.sock");
    let daemon = Kill(
        Command::new(exe)
            .args(["daemon", "--socket"])
            .arg(&socket)
            .stderr(Stdio::null())
            .spawn()
            .context("starting the daemon")?,
    );
    let pid = daemon.0.id();
    let opts = ClientOptions {
        socket: socket.clone(),
        autostart: false,
        ..ClientOptions::default()
    };
    let start = Instant::now();
    let client = loop {
        match Client::with_options(opts.clone()) {
            Ok(c) => break c,
            Err(e) if start.elapsed() > Duration::from_secs(10) => return Err(e.into()),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    client.ping()?;
    std::thread::sleep(Duration::from_millis(200));
    let daemon_idle_rss_kib = status_field(pid, "VmRSS:")?;
    let daemon_idle_threads = status_field(pid, "Threads:")?;
    let me = std::process::id();
    let client_threads_connected = status_field(me, "Threads:")?;
    let mut subs = Vec::new();
    for i in 0..10 {
        let name = format!("/footprint/{i}");
        client.create_tag(&name, Domain::Local)?;
        subs.push(client.subscribe(&name, SubscribeOptions::default())?);
    }
    let client_threads_with_10_subscriptions = status_field(me, "Threads:")?;
    drop(subs);
    for i in 0..10 {
        client.destroy_tag(&format!("/footprint/{i}"))?;
    }
    drop(client);
    std::thread::sleep(Duration::from_millis(200));
    let daemon_after_use_rss_kib = status_field(pid, "VmRSS:")?;
    Ok(Footprint {
        bench: "footprint",
        system: "tagwire",
        daemon_idle_rss_kib,
        daemon_after_use_rss_kib,
        daemon_idle_threads,
        client_threads_connected,
        client_threads_with_10_subscriptions,
    })
}

/// A readable table.
pub fn table(f: &Footprint) -> String {
    format!(
        "Footprint\n\
         daemon idle RSS            {:>8} KiB   (bar: <= 16384 KiB)\n\
         daemon RSS after use       {:>8} KiB\n\
         daemon threads (idle)      {:>8}\n\
         client threads, connected  {:>8}\n\
         client threads, 10 subs    {:>8}       (bar: no thread per subscription)\n",
        f.daemon_idle_rss_kib,
        f.daemon_after_use_rss_kib,
        f.daemon_idle_threads,
        f.client_threads_connected,
        f.client_threads_with_10_subscriptions
    )
}
