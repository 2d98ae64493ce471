//! What the single-daemon tests of the command line share: a daemon on
//! a socket of its own in this process, a client of it, and `tagwire`
//! commands run against it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions};
use tagwire_daemon::{Config, Daemon};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_tagwire");

/// A daemon on a socket of its own, and a client of it.
pub(crate) struct Local {
    pub(crate) dir: tempfile::TempDir,
    daemon: Option<Daemon>,
    pub(crate) client: Client,
}

impl Local {
    pub(crate) fn new() -> Local {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tagwired.sock");
        let daemon = Daemon::start(Config {
            socket: socket.clone(),
            ..Config::default()
        })
        .unwrap();
        let client = Client::with_options(ClientOptions {
            socket,
            autostart: false,
            ..ClientOptions::default()
        })
        .unwrap();
        Local {
            dir,
            daemon: Some(daemon),
            client,
        }
    }

    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.path().join("tagwired.sock")
    }

    /// `tagwire ARGS --socket S`, its stdout piped.
    pub(crate) fn spawn(&self, args: &[&str], stdin: Stdio) -> Child {
        Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(self.socket())
            .env("TAGWIRE_LOG", "error")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Starts `tagwire sub TAG ARGS` and waits until it is subscribed.
    pub(crate) fn sub(&self, tag: &str, args: &[&str]) -> Child {
        let mut all = vec!["sub", tag, "--idle-timeout", "10"];
        all.extend_from_slice(args);
        let child = self.spawn(&all, Stdio::null());
        self.wait_receiver(tag);
        child
    }

    /// Waits (at most 10 s) until `tag` has a receiver.
    pub(crate) fn wait_receiver(&self, tag: &str) {
        let start = Instant::now();
        while self.client.receivers(tag).map_or(true, |r| r.is_empty()) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no receiver of {tag}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if let Some(d) = self.daemon.take() {
            d.shutdown();
        }
    }
}

/// Waits for `child` to succeed; its stdout.
pub(crate) fn stdout_of(child: Child) -> Vec<u8> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out.stdout
}

pub(crate) fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `tagwire ARGS` to completion; its stdout as text.
pub(crate) fn run(l: &Local, args: &[&str]) -> String {
    String::from_utf8(stdout_of(l.spawn(args, Stdio::null()))).unwrap()
}

/// An MCAP file's records, as the `mcap` crate (not tagwire's reader)
/// reads them.
#[derive(Default)]
pub(crate) struct Mcap {
    pub(crate) channels: std::collections::HashMap<u16, mcap::records::Channel>,
    /// In file order.
    pub(crate) messages: Vec<(mcap::records::MessageHeader, Vec<u8>)>,
    pub(crate) metadata: Vec<mcap::records::Metadata>,
}

pub(crate) fn mcap_records(path: &Path) -> Mcap {
    let bytes = std::fs::read(path).unwrap();
    let mut f = Mcap::default();
    for r in mcap::read::ChunkFlattener::new(&bytes).unwrap() {
        match r.unwrap() {
            mcap::records::Record::Channel(c) => {
                f.channels.insert(c.id, c);
            }
            mcap::records::Record::Message { header, data } => {
                f.messages.push((header, data.into_owned()))
            }
            mcap::records::Record::Metadata(m) => f.metadata.push(m),
            _ => {}
        }
    }
    f
}
