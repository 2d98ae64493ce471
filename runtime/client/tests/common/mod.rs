//! What the client's test files share: an in-process daemon on a private socket.

#![allow(dead_code, clippy::unwrap_used)]

use tagwire::ClientOptions;
use tagwire_daemon::{Config, Daemon};

/// A daemon with `config` (its socket set here) and options to reach it.
pub(crate) fn start_with(config: Config) -> (tempfile::TempDir, Daemon, ClientOptions) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let daemon = Daemon::start(Config {
        socket: socket.clone(),
        ..config
    })
    .unwrap();
    let opts = ClientOptions {
        socket,
        autostart: false,
        ..ClientOptions::default()
    };
    (dir, daemon, opts)
}
