//! A client with 10 subscriptions adds no thread per subscription: receiving runs
//! on the caller's thread (the in-process daemon's threads are not counted). (Its own test binary, so no other test's threads are
//! counted.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tagwire::{Client, ClientOptions, Domain, SubscribeOptions};

/// This process's threads but the in-process daemon's (`tagwired-*`, whose
/// worker pool grows with the requests in flight; a thread it starts bears
/// its parent's name until it names itself).
fn threads() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .filter(|name| !name.starts_with("tagwired"))
        .collect();
    names.sort();
    names
}

/// The threads once they stay the same for 100 ms (a thread just started
/// may not have named itself yet), within 5 s.
fn settled() -> Vec<String> {
    let start = std::time::Instant::now();
    let mut last = threads();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = threads();
        if now == last || start.elapsed() > std::time::Duration::from_secs(5) {
            return now;
        }
        last = now;
    }
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
    let before = settled();
    let mut subs = Vec::new();
    for i in 0..10 {
        let name = format!("/t/{i}");
        c.create_tag(&name, Domain::Global).unwrap();
        subs.push(c.subscribe(&name, SubscribeOptions::default()).unwrap());
    }
    assert_eq!(settled(), before);
}
