//! A client with 10 subscriptions adds no thread per subscription: receiving runs
//! on the caller's thread. (Its own test binary, so no other test's threads are
//! counted.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tagwire::{Client, ClientOptions, Domain, SubscribeOptions};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn ten_subscriptions_add_no_thread() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    let _d = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
        socket: socket.clone(),
        ..Default::default()
    })
    .unwrap();
    let c = Client::with_options(ClientOptions {
        socket,
        autostart: false,
        ..Default::default()
    })
    .unwrap();
    let before = threads();
    let mut subs = Vec::new();
    for i in 0..10 {
        let name = format!("/t/{i}");
        c.create_tag(&name, Domain::Global).unwrap();
        subs.push(c.subscribe(&name, SubscribeOptions::default()).unwrap());
    }
    assert_eq!(threads(), before);
}
