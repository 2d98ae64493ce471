//! The gateway in-process with its daemon, and a DDS participant of our own
//! (`tagwire_rtps::participant`, on a loopback socket) as the DDS side: its
//! samples reach the mapped tag, in order, and are not echoed back to DDS
//! (the gateway's own publications do not go out again); the gateway counts
//! what crossed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use tagwire::{Client, ClientOptions, SubscribeOptions};
use tagwire_gateway::{Crossed, Gateway, GatewayConfig, Mapping};
use tagwire_rtps::participant::{Event, Participant, ParticipantConfig};
use tagwire_rtps::qos::Qos;
use tagwire_rtps::{GuidPrefix, Locator};

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

#[test]
fn a_dds_writers_samples_reach_the_tag_in_order_and_are_not_echoed_back() {
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
        domain: 48,
        address: Ipv4Addr::LOCALHOST,
        mappings: vec![Mapping {
            tag: "/echo".into(),
            topic: "T".into(),
            type_name: "Ty".into(),
            reliable: true,
            keyed: false,
            transient_local: None,
        }],
        user_data: Vec::new(),
        client: client.clone(),
    })
    .unwrap();
    let c = Client::with_options(client).unwrap();
    let mut sub = c.subscribe("/echo", SubscribeOptions::default()).unwrap();
    let mut peer = Peer::new(48, gateway.port());
    let now = Instant::now();
    let w = peer
        .part
        .add_writer(now, "T", "Ty", false, Qos::default_for(true))
        .unwrap();
    let r = peer
        .part
        .add_reader(now, "T", "Ty", false, Qos::default_for(false))
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while peer.part.matched(w) == 0 || peer.part.matched(r) == 0 {
        assert!(
            Instant::now() < until,
            "the gateway's endpoints never matched ours"
        );
        peer.run(Duration::from_millis(20));
    }
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
