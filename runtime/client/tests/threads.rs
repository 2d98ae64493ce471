//! A client with 10 subscriptions adds no thread per subscription: receiving runs
//! on the caller's thread (the in-process daemon's threads are not counted). (Its own test binary, so no other test's threads are
//! counted.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tagwire::{Client, ClientOptions, Domain, SubscribeOptions};

/// This process's threads but the in-process daemon's (`tagwired-*`, whose
/// worker pool grows with the requests in flight; a thread it starts bears
/// its parent's name until it names itself).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| !name.starts_with("tagwired"))
        .count()
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
    // (Threads the daemon just started name themselves first.)
    std::thread::sleep(std::time::Duration::from_millis(100));
    let before = threads();
    let mut subs = Vec::new();
    for i in 0..10 {
        let name = format!("/t/{i}");
        c.create_tag(&name, Domain::Global).unwrap();
        subs.push(c.subscribe(&name, SubscribeOptions::default()).unwrap());
    }
    assert_eq!(threads(), before);
}
