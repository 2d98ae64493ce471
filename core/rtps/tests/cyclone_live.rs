//! Against a running Cyclone DDS (Debian's `ddsperf`, loopback only): our
//! participant's discovery (SPDP, then SEDP over the reliable built-in
//! endpoints) and a reliable reader made of this crate's parts receive a
//! Cyclone writer's samples, in order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use tagwire_rtps::discovery::{EndpointData, ParticipantData, BUILTIN_ENDPOINTS};
use tagwire_rtps::qos::{Qos, Reliability};
use tagwire_rtps::reliable::Reader;
use tagwire_rtps::sedp::{Sedp, SedpEvent};
use tagwire_rtps::spdp::{Spdp, SpdpConfig, SpdpEvent};
use tagwire_rtps::{EntityId, Guid, GuidPrefix, Header, Locator, Message};

const CYCLONE_LOOPBACK: &str = concat!(
    "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/>",
    "</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery>",
    "<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>",
    "<Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>"
);

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_cyclone_dds_writer_matches_our_reader_through_sedp_and_its_samples_arrive_in_order() {
    if std::process::Command::new("ddsperf")
        .arg("-h")
        .output()
        .is_err()
    {
        println!(
            "SKIPPED: ddsperf is not installed (apt install cyclonedds-tools; .ci/run installs it)"
        );
        return;
    }
    // Cyclone publishes DDSPerfRDataKS (KeyedSeq, reliable, keep-all).
    let _publisher = Kill(
        std::process::Command::new("ddsperf")
            .args(["-D10", "pub", "100Hz", "size", "64"])
            .env("CYCLONEDDS_URI", CYCLONE_LOOPBACK)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(10)))
        .unwrap();
    let here = Locator::udp_v4(Ipv4Addr::LOCALHOST, sock.local_addr().unwrap().port());
    let prefix = GuidPrefix([0x01, 0x99, 7, 7, 7, 7, 0, 0, 0, 0, 0, 1]);
    let header = Header {
        version: (2, 1),
        vendor: [0x01, 0x99],
        prefix,
    };
    let me = ParticipantData {
        prefix,
        version: (2, 1),
        vendor: [0x01, 0x99],
        builtin_endpoints: BUILTIN_ENDPOINTS,
        lease: tagwire_rtps::qos::Duration {
            seconds: 10,
            fraction: 0,
        },
        domain: Some(0),
        metatraffic_unicast: vec![here],
        metatraffic_multicast: Vec::new(),
        default_unicast: vec![here],
        default_multicast: Vec::new(),
        user_data: Vec::new(),
    };
    let t0 = Instant::now();
    let mut spdp = Spdp::new(
        SpdpConfig {
            local: me,
            peers: (0..10)
                .map(|i| Locator::udp_v4(Ipv4Addr::LOCALHOST, 7410 + 2 * i))
                .collect(),
            announce_every: Duration::from_millis(500),
        },
        t0,
    );
    let mut sedp = Sedp::new(header);
    // Our subscription: a reliable reader of the topic.
    let reader_id = EntityId([0, 0, 1, 0x07]);
    let mut qos = Qos::default_for(false);
    qos.reliability.0 = Reliability::Reliable;
    sedp.announce(
        t0,
        &EndpointData {
            guid: Guid {
                prefix,
                entity: reader_id,
            },
            topic: "DDSPerfRDataKS".into(),
            type_name: "KeyedSeq".into(),
            qos,
            unicast: Vec::new(),
            multicast: Vec::new(),
            expects_inline_qos: false,
        },
    );
    let mut reader = Reader::new(header, reader_id, Duration::from_millis(10));
    let mut matched = None;
    let mut seqs: Vec<u32> = Vec::new();
    let mut buf = vec![0u8; 65536];
    while t0.elapsed() < Duration::from_secs(8) && seqs.len() < 30 {
        let now = Instant::now();
        spdp.handle_timeout(now);
        sedp.handle_timeout(now);
        reader.handle_timeout(now);
        loop {
            let t = spdp
                .poll_transmit()
                .or_else(|| sedp.poll_transmit())
                .or_else(|| reader.poll_transmit());
            let Some(t) = t else { break };
            let _ = sock.send_to(&t.bytes, t.to.to_udp_v4().unwrap());
        }
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let now = Instant::now();
        let _ = spdp.handle_datagram(now, &buf[..n]);
        while let Some(e) = spdp.poll_event() {
            match e {
                SpdpEvent::Discovered(p) => sedp.add_participant(now, &p),
                SpdpEvent::Lost(p) => sedp.remove_participant(p),
                SpdpEvent::Changed(_) => {}
            }
        }
        let Ok(m) = Message::parse(&buf[..n]) else {
            continue;
        };
        sedp.handle_message(now, &m);
        while let Some(e) = sedp.poll_event() {
            if let SedpEvent::Writer(w) = e {
                if w.topic == "DDSPerfRDataKS" && w.type_name == "KeyedSeq" {
                    let at = if w.unicast.is_empty() {
                        spdp.remote(w.guid.prefix)
                            .map(|p| p.default_unicast.clone())
                            .unwrap_or_default()
                    } else {
                        w.unicast.clone()
                    };
                    reader.add_writer(w.guid, at, false);
                    matched = Some(w);
                }
            }
        }
        reader.handle_message(now, &m);
        while let Some(d) = reader.poll_delivery() {
            // KeyedSeq in CDR_LE: seq u32, keyval u32, baggage.
            assert_eq!(&d.payload[..2], &[0x00, 0x01], "CDR_LE");
            seqs.push(u32::from_le_bytes(d.payload[4..8].try_into().unwrap()));
        }
    }
    let w = matched.expect("SEDP announced Cyclone's DDSPerfRDataKS writer");
    assert_eq!(w.qos.reliability.0, Reliability::Reliable);
    assert!(seqs.len() >= 30, "only {} samples arrived", seqs.len());
    assert!(
        seqs.windows(2).all(|p| p[1] == p[0] + 1),
        "samples out of order or missing: {seqs:?}"
    );
}
