//! The gateway in-process with its daemon, and a DDS participant of our own
//! (`tagwire_rtps::participant`, on a loopback socket) as the DDS side: its
//! samples reach the mapped tag, in order, and are not echoed back to DDS
//! (the gateway's own publications do not go out again); the gateway counts
//! what crossed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, InstanceState, Key, SubscribeOptions};
use tagwire_gateway::key::KeySpec;
use tagwire_gateway::{Crossed, Gateway, GatewayConfig, Mapping};
use tagwire_rtps::participant::{Event, Participant, ParticipantConfig};
use tagwire_rtps::qos::Qos;
use tagwire_rtps::reliable::{Change, DISPOSED};
use tagwire_rtps::{GuidPrefix, Locator, Time};

struct Peer {
    part: Participant,
    sock: UdpSocket,
    events: Vec<Event>,
}

impl Peer {
    fn new(domain: u32, gateway_port: u16) -> Self {
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        sock.set_nonblocking(true).unwrap();
        let here = Locator::udp_v4(Ipv4Addr::LOCALHOST, sock.local_addr().unwrap().port());
        let part = Participant::new(
            ParticipantConfig {
                prefix: GuidPrefix([0x01, 0x99, 0xee, 0, 0, 0, 0, 0, 0, 0, 0, 9]),
                domain,
                unicast: vec![here],
                multicast: Vec::new(),
                peers: vec![Locator::udp_v4(Ipv4Addr::LOCALHOST, gateway_port)],
                lease: Duration::from_secs(10),
                announce_every: Duration::from_millis(200),
                user_data: Vec::new(),
            },
            Instant::now(),
        );
        Self {
            part,
            sock,
            events: Vec::new(),
        }
    }

    /// Runs the participant for `d`.
    fn run(&mut self, d: Duration) {
        let until = Instant::now() + d;
        let mut buf = vec![0u8; 65536];
        while Instant::now() < until {
            let now = Instant::now();
            self.part.handle_timeout(now);
            while let Ok(n) = self.sock.recv(&mut buf) {
                self.part.handle_datagram(Instant::now(), &buf[..n]);
            }
            while let Some(t) = self.part.poll_transmit() {
                let _ = self.sock.send_to(&t.bytes, t.to.to_udp_v4().unwrap());
            }
            self.events
                .extend(std::iter::from_fn(|| self.part.poll_event()));
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A daemon, a gateway of it in `domain` mapping tag `/echo` to topic `T`
/// (`keyed` with its key at `key=u32@0`), a subscriber of the tag, and our
/// DDS participant with a writer and a reader of `T`, matched.
struct Setup {
    daemon: tagwire_daemon::Daemon,
    gateway: Gateway,
    client: Client,
    sub: tagwire::Subscriber,
    peer: Peer,
    w: tagwire_rtps::EntityId,
    r: tagwire_rtps::EntityId,
    _dir: tempfile::TempDir,
}

fn setup(domain: u32, keyed: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("tagwired.sock");
    let daemon = tagwire_daemon::Daemon::start(tagwire_daemon::Config {
        socket: socket.clone(),
        ..tagwire_daemon::Config::default()
    })
    .unwrap();
    let client = ClientOptions {
        socket,
        autostart: false,
        ..ClientOptions::default()
    };
    let gateway = Gateway::start(GatewayConfig {
        domain,
        address: Ipv4Addr::LOCALHOST,
        mappings: vec![Mapping {
            tag: "/echo".into(),
            topic: "T".into(),
            type_name: "Ty".into(),
            reliable: true,
            keyed,
            transient_local: None,
            key: keyed.then(|| KeySpec::parse("u32@0").unwrap()),
            partitions: Vec::new(),
            exclusive: false,
            strength: 0,
            deadline_ms: None,
        }],
        user_data: Vec::new(),
        client: client.clone(),
        busy_poll: None,
    })
    .unwrap();
    let c = Client::with_options(client).unwrap();
    let sub = c.subscribe("/echo", SubscribeOptions::default()).unwrap();
    let mut peer = Peer::new(domain, gateway.port());
    let now = Instant::now();
    let w = peer
        .part
        .add_writer(now, "T", "Ty", keyed, Qos::default_for(true))
        .unwrap();
    let r = peer
        .part
        .add_reader(now, "T", "Ty", keyed, Qos::default_for(false))
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while peer.part.matched(w) == 0 || peer.part.matched(r) == 0 {
        assert!(
            Instant::now() < until,
            "the gateway's endpoints never matched ours"
        );
        peer.run(Duration::from_millis(20));
    }
    Setup {
        daemon,
        gateway,
        client: c,
        sub,
        peer,
        w,
        r,
        _dir: dir,
    }
}

#[test]
fn a_dds_writers_samples_reach_the_tag_in_order_and_are_not_echoed_back() {
    let Setup {
        daemon,
        gateway,
        mut sub,
        mut peer,
        w,
        ..
    } = setup(48, false);
    for i in 0..10u8 {
        peer.part
            .write(Instant::now(), w, vec![0x00, 0x01, 0, 0, i])
            .unwrap();
    }
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while got.len() < 10 && Instant::now() < until {
        peer.run(Duration::from_millis(10));
        while let Ok(m) = sub.receive(Some(Duration::ZERO)) {
            got.push(m.payload[4]);
        }
    }
    assert_eq!(got, (0..10).collect::<Vec<u8>>());
    // What the gateway published into the tag does not come back to DDS.
    peer.run(Duration::from_millis(500));
    assert!(
        !peer
            .events
            .iter()
            .any(|e| matches!(e, Event::Sample { .. })),
        "echoed back: {:?}",
        peer.events
    );
    assert_eq!(
        gateway.counters(),
        Crossed {
            to_dds: 0,
            from_dds: 10,
            refused: 0
        }
    );
    gateway.stop();
    daemon.shutdown();
}

#[test]
fn instances_timestamps_and_the_dds_writer_cross_with_disposes_both_ways() {
    let Setup {
        daemon,
        gateway,
        client,
        mut sub,
        mut peer,
        w,
        r,
        ..
    } = setup(49, true);
    let key = |k: u32| {
        let mut p = vec![0x00, 0x01, 0, 0];
        p.extend_from_slice(&k.to_le_bytes());
        p
    };
    // DDS → tag: three instances, stamped, then instance 2 disposed (its
    // key alone, as Cyclone sends it).
    let t0 = 1_700_000_000_000_000_001u64;
    for k in 1..=3u32 {
        let mut sample = key(k);
        sample.extend_from_slice(b"data");
        let c = Change {
            payload: sample,
            timestamp: Some(Time::from_nanos(t0 + u64::from(k))),
            ..Change::default()
        };
        peer.part.write_change(Instant::now(), w, c).unwrap();
    }
    let dispose = Change {
        payload: key(2),
        timestamp: Some(Time::from_nanos(t0 + 10)),
        status: DISPOSED,
        key_hash: None,
    };
    peer.part.write_change(Instant::now(), w, dispose).unwrap();
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while got.len() < 4 && Instant::now() < until {
        peer.run(Duration::from_millis(10));
        while let Ok(m) = sub.receive(Some(Duration::ZERO)) {
            got.push(m);
        }
    }
    assert_eq!(got.len(), 4, "{got:?}");
    let ours = peer.part.prefix();
    for (i, m) in got.iter().enumerate() {
        let k = if i < 3 { i as u32 + 1 } else { 2 };
        assert_eq!(m.key, Some(Key::of(&k.to_be_bytes())), "message {i}");
        let ns = m.timestamp.duration_since(std::time::UNIX_EPOCH).unwrap();
        let want = t0 + if i < 3 { u64::from(k) } else { 10 };
        assert_eq!(ns.as_nanos() as u64, want, "the DDS writer's timestamp");
        let o = m.origin.expect("the DDS writer");
        assert_eq!(o.guid[..12], ours.0, "its participant");
        assert_eq!(o.addr.port(), peer.sock.local_addr().unwrap().port());
    }
    assert_eq!(got[0].payload[8..], *b"data");
    assert_eq!(got[3].state, InstanceState::Disposed);
    assert!(got[3].payload.is_empty());

    // Tag → DDS: a keyed sample, then its dispose with the key serialized.
    let mut p = client.publisher("/echo").unwrap();
    let mut sample = key(5);
    sample.extend_from_slice(b"wxyz");
    p.send_keyed(&5u32.to_be_bytes(), &sample).unwrap();
    p.dispose(&5u32.to_be_bytes()).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let samples = |peer: &Peer| -> Vec<Change> {
        peer.events
            .iter()
            .filter_map(|e| match e {
                Event::Sample { reader, change, .. } if *reader == r => Some(change.clone()),
                _ => None,
            })
            .collect()
    };
    while samples(&peer).len() < 2 && Instant::now() < until {
        peer.run(Duration::from_millis(10));
    }
    let got = samples(&peer);
    assert_eq!(got.len(), 2, "{:?}", peer.events);
    assert_eq!(got[0].payload, sample);
    assert_eq!(got[0].status, 0);
    assert!(got[0].timestamp.is_some(), "INFO_TS");
    assert_eq!(got[1].status, DISPOSED);
    assert_eq!(got[1].payload, key(5), "the serialized key");
    assert_eq!(got[1].key_hash, Some(Key::of(&5u32.to_be_bytes()).0));
    drop(p);
    gateway.stop();
    daemon.shutdown();
}
