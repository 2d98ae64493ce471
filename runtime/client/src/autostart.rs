//! Starting a background daemon when none answers (`TAGWIRE_AUTOSTART=1` or
//! [`ClientOptions::autostart`](crate::ClientOptions)).
//!
//! The daemon binary is found as `$TAGWIRE_DAEMON`, else `tagwired` next to the
//! running program (or one directory up, for test binaries in `target/*/deps`),
//! else `tagwired` on `PATH` (`tagwire daemon` where only the front end is found). It runs in its own session, detached from our
//! terminal, logging to `tagwired.log` beside its socket.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tagwire_unix::SeqPacket;

use crate::{ClientOptions, Error, Result};

pub(crate) fn daemon_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TAGWIRE_DAEMON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Ok(exe) = std::env::current_exe() {
        for name in ["tagwired", "tagwire"] {
            for dir in exe.ancestors().skip(1).take(2) {
                let cand = dir.join(name);
                if cand.is_file() {
                    return cand;
                }
            }
        }
    }
    PathBuf::from("tagwired")
}

pub(crate) fn start_and_connect(opts: &ClientOptions, first: &std::io::Error) -> Result<SeqPacket> {
    let bin = daemon_binary();
    let unreachable = |reason: String| Error::DaemonUnreachable {
        socket: opts.socket.clone(),
        reason,
    };
    let log_path = opts
        .socket
        .parent()
        .map(|d| d.join("tagwired.log"))
        .unwrap_or_else(|| PathBuf::from("/dev/null"));
    if let Some(d) = opts.socket.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null());
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(&bin);
    // The `tagwire` front end runs the daemon as its `daemon` subcommand.
    if bin.file_name().is_some_and(|n| n == "tagwire") {
        cmd.arg("daemon");
    }
    let spawned = cmd
        .env("TAGWIRE_SOCKET", &opts.socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        return Err(unreachable(format!(
            "{first}; autostart of {} failed: {e} (set TAGWIRE_DAEMON to the tagwired binary)",
            bin.display()
        )));
    }
    tracing::info!(daemon = %bin.display(), socket = %opts.socket.display(), "started a background tagwire daemon");
    let deadline = Instant::now() + opts.timeout.max(Duration::from_secs(2));
    loop {
        match SeqPacket::connect(&opts.socket) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => {
                return Err(unreachable(format!(
                    "autostarted daemon did not come up: {e}"
                )))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}
