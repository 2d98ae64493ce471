//! Keyed messages: instances, dispose and unregister, strength, as a
//! subscriber sees them, on the ring, through the large-message path and
//! from a tag's history.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tagwire::{
    Client, ClientOptions, Domain, HistoryQuery, InstanceState, KeepHistory, Key, RingParams,
    SubscribeOptions,
};
use tagwire_daemon::{Config, Daemon};

const T: Option<Duration> = Some(Duration::from_secs(5));

fn node() -> (tempfile::TempDir, Daemon, Client) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let daemon = Daemon::start(Config {
        socket: socket.clone(),
        ..Config::default()
    })
    .unwrap();
    let c = Client::with_options(ClientOptions {
        socket,
        autostart: false,
        ..ClientOptions::default()
    })
    .unwrap();
    (dir, daemon, c)
}

#[test]
fn keys_states_and_strength_reach_subscribers_and_history_the_payload_untouched() {
    let (_dir, _d, c) = node();
    let keep = KeepHistory {
        depth: 20,
        max_bytes: 0,
    };
    c.create_tag_keeping("/k", Domain::Local, RingParams::default(), keep)
        .unwrap();
    let mut sub = c.subscribe("/k", SubscribeOptions::default()).unwrap();
    let mut p = c.publisher("/k").unwrap();
    p.send(b"plain").unwrap();
    p.send_keyed(b"robot-1", b"pose").unwrap();
    // Larger than a ring slot: the large-message path keeps the key too.
    let big = vec![7u8; 1 << 20];
    p.send_keyed(b"a key longer than sixteen bytes", &big)
        .unwrap();
    p.set_strength(Some(-3));
    p.dispose(b"robot-1").unwrap();
    p.unregister(b"robot-2").unwrap();

    let want = [
        (b"plain".to_vec(), None, InstanceState::Alive, None),
        (
            b"pose".to_vec(),
            Some(Key::of(b"robot-1")),
            InstanceState::Alive,
            None,
        ),
        (
            big,
            Some(Key::of(b"a key longer than sixteen bytes")),
            InstanceState::Alive,
            None,
        ),
        (
            Vec::new(),
            Some(Key::of(b"robot-1")),
            InstanceState::Disposed,
            Some(-3),
        ),
        (
            Vec::new(),
            Some(Key::of(b"robot-2")),
            InstanceState::Unregistered,
            Some(-3),
        ),
    ];
    for (i, (payload, key, state, strength)) in want.iter().enumerate() {
        let m = sub.receive(T).unwrap();
        assert_eq!(&m.payload, payload, "message {i}");
        assert_eq!(
            (m.key, m.state, m.strength),
            (*key, *state, *strength),
            "message {i}"
        );
        assert_eq!(m.origin, None);
    }
    assert_eq!(
        Key::of(b"robot-1").0[..7],
        *b"robot-1",
        "a short key is itself"
    );
    let hist = c.pull("/k", HistoryQuery::Since(0)).unwrap();
    assert_eq!(hist.len(), 5);
    assert_eq!(hist[1].key, Some(Key::of(b"robot-1")));
    assert_eq!(hist[1].payload, b"pose");
    assert_eq!(hist[3].state, InstanceState::Disposed);
}
