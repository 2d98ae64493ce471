//! What Cyclone DDS really sends: every datagram of `data/cyclone-0.10.2.hex`
//! (captured from Debian's `ddsperf` on loopback) parses, reads as the
//! discovery and data it is, and survives being built again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use tagwire_rtps::plist::{pid, ParameterList};
use tagwire_rtps::{EntityId, Message, MessageBuilder, Submessage};

fn datagrams() -> Vec<Vec<u8>> {
    include_str!("data/cyclone-0.10.2.hex")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).expect("hex"))
                .collect()
        })
        .collect()
}

#[test]
fn every_captured_cyclone_datagram_parses_and_builds_back_the_same() {
    let all = datagrams();
    assert!(all.len() > 50, "{} datagrams", all.len());
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    for d in &all {
        let m = Message::parse(d).unwrap_or_else(|e| panic!("{e}: {}", d.len()));
        assert_eq!(m.header.vendor, [0x01, 0x10], "Cyclone's vendor id");
        assert_eq!(m.header.version, (2, 1));
        for s in &m.submessages {
            *kinds.entry(name(s)).or_default() += 1;
            assert!(!matches!(s, Submessage::Unknown { .. }), "{s:?}");
        }
        // Built again, it reads the same (Cyclone writes every length
        // explicitly and pads to 4, as the builder does: the bytes match too).
        let mut b = MessageBuilder::new(m.header);
        for s in &m.submessages {
            b.push(s).unwrap();
        }
        let again = b.finish();
        assert_eq!(Message::parse(&again).unwrap(), m);
        assert_eq!(&again, d, "rebuilt bytes differ");
    }
    for k in [
        "INFO_TS",
        "INFO_DST",
        "DATA",
        "DATA_FRAG",
        "HEARTBEAT",
        "HEARTBEAT_FRAG",
        "ACKNACK",
        "NACK_FRAG",
    ] {
        assert!(kinds.contains_key(k), "no {k} in the capture: {kinds:?}");
    }
}

#[test]
fn the_capture_reads_as_ddsperf_discovery_and_data() {
    let all = datagrams();
    let (mut participants, mut topics, mut pings, mut frags) = (0, Vec::new(), 0, 0);
    for d in &all {
        let m = Message::parse(d).expect("parses");
        for s in &m.submessages {
            match s {
                Submessage::Data(data) if data.writer == EntityId::SPDP_WRITER => {
                    let pl = ParameterList::from_payload(data.payload.expect("payload"))
                        .expect("SPDP parameter list");
                    let guid = pl.guid(pid::PARTICIPANT_GUID).unwrap().expect("GUID");
                    assert_eq!(guid.prefix, m.header.prefix, "GUID prefix is the sender's");
                    assert_eq!(guid.entity, EntityId::PARTICIPANT);
                    assert!(pl.u32(pid::BUILTIN_ENDPOINT_SET).unwrap().is_some());
                    let locs = pl.locators(pid::METATRAFFIC_UNICAST_LOCATOR).unwrap();
                    assert!(locs.iter().any(|l| l.to_udp_v4().is_some()), "{locs:?}");
                    participants += 1;
                }
                Submessage::Data(data)
                    if data.writer == EntityId::SEDP_PUBLICATIONS_WRITER
                        && data.payload.is_some() =>
                {
                    let pl = ParameterList::from_payload(data.payload.expect("payload"))
                        .expect("SEDP parameter list");
                    let topic = pl.string(pid::TOPIC_NAME).unwrap().expect("topic");
                    let ty = pl.string(pid::TYPE_NAME).unwrap().expect("type");
                    let g = pl.guid(pid::ENDPOINT_GUID).unwrap().expect("endpoint");
                    assert!(g.entity.is_writer(), "{g:?}");
                    topics.push((topic.to_owned(), ty.to_owned()));
                }
                Submessage::Data(data) if !data.writer.is_builtin() => {
                    // ddsperf's KeyedSeq in CDR_LE: seq, keyval, baggage.
                    let p = data.payload.expect("payload");
                    assert_eq!(&p[..2], &[0x00, 0x01], "CDR_LE");
                    assert!(p.len() >= 16, "{}", p.len());
                    pings += 1;
                }
                Submessage::DataFrag(f) => {
                    let n = usize::from(f.fragments);
                    let size = usize::from(f.fragment_size);
                    let end = (f.fragment_start as usize - 1 + n) * size;
                    // Whole fragments, but the sample's last may be short.
                    let expect = if end > f.sample_size as usize {
                        f.sample_size as usize - (f.fragment_start as usize - 1) * size
                    } else {
                        n * size
                    };
                    assert!(
                        f.bytes.len() >= expect && f.bytes.len() < expect + 4,
                        "{} bytes for {n} fragments of {size}",
                        f.bytes.len()
                    );
                    frags += 1;
                }
                _ => {}
            }
        }
    }
    assert!(participants > 0);
    assert!(pings > 0);
    assert!(frags > 0);
    assert!(
        topics.contains(&("DDSPerfRPingKS".to_owned(), "KeyedSeq".to_owned())),
        "{topics:?}"
    );
}

fn name(s: &Submessage<'_>) -> &'static str {
    match s {
        Submessage::Pad => "PAD",
        Submessage::AckNack { .. } => "ACKNACK",
        Submessage::Heartbeat { .. } => "HEARTBEAT",
        Submessage::Gap { .. } => "GAP",
        Submessage::InfoTs(_) => "INFO_TS",
        Submessage::InfoSrc { .. } => "INFO_SRC",
        Submessage::InfoDst(_) => "INFO_DST",
        Submessage::Data(_) => "DATA",
        Submessage::DataFrag(_) => "DATA_FRAG",
        Submessage::HeartbeatFrag { .. } => "HEARTBEAT_FRAG",
        Submessage::NackFrag { .. } => "NACK_FRAG",
        Submessage::Unknown { .. } => "unknown",
    }
}

#[test]
fn cyclone_discovery_reads_as_participants_and_endpoints_that_match_as_cyclone_matched_them() {
    use tagwire_rtps::discovery::{EndpointData, ParticipantData};
    use tagwire_rtps::qos::{Mismatch, Reliability};
    let all = datagrams();
    let (mut participants, mut writers, mut readers) = (Vec::new(), Vec::new(), Vec::new());
    for d in &all {
        let m = Message::parse(d).expect("parses");
        for s in &m.submessages {
            let Submessage::Data(data) = s else { continue };
            let (Some(p), false) = (data.payload, data.key) else {
                continue;
            };
            let sender = m.header.prefix;
            match data.writer {
                EntityId::SPDP_WRITER => {
                    let pd = ParticipantData::from_payload(p, sender).expect("SPDP");
                    // Built again and read back: the same.
                    assert_eq!(
                        ParticipantData::from_payload(&pd.to_payload(), sender).unwrap(),
                        pd
                    );
                    participants.push(pd);
                }
                EntityId::SEDP_PUBLICATIONS_WRITER => {
                    let e = EndpointData::from_payload(p, sender, true).expect("publication");
                    assert_eq!(
                        EndpointData::from_payload(&e.to_payload(), sender, true).unwrap(),
                        e
                    );
                    writers.push(e);
                }
                EntityId::SEDP_SUBSCRIPTIONS_WRITER => {
                    let e = EndpointData::from_payload(p, sender, false).expect("subscription");
                    assert_eq!(
                        EndpointData::from_payload(&e.to_payload(), sender, false).unwrap(),
                        e
                    );
                    readers.push(e);
                }
                _ => {}
            }
        }
    }
    // ddsperf's participants say who they are in USER_DATA, lease 10 s.
    assert!(!participants.is_empty());
    for p in &participants {
        assert!(p.user_data.starts_with(b"DDSPerf:"), "{:?}", p.user_data);
        assert_eq!(p.lease.seconds, 10);
        assert!(p
            .metatraffic_unicast
            .iter()
            .any(|l| l.to_udp_v4().is_some()));
        assert_eq!(p.builtin_endpoints & 0x3f, 0x3f);
    }
    // ddsperf's R topics are reliable; its ping writer matches the ping
    // readers, not the pong ones.
    let ping_w = writers
        .iter()
        .find(|w| w.topic == "DDSPerfRPingKS")
        .expect("a ping writer");
    assert_eq!(ping_w.qos.reliability.0, Reliability::Reliable);
    let ping_r = readers
        .iter()
        .find(|r| r.topic == "DDSPerfRPingKS")
        .expect("a ping reader");
    assert_eq!(EndpointData::matches(ping_r, ping_w), Ok(()));
    let pong_r = readers
        .iter()
        .find(|r| r.topic == "DDSPerfRPongKS")
        .expect("a pong reader");
    assert_eq!(EndpointData::matches(pong_r, ping_w), Err(Mismatch::Topic));
    // Pong readers sit in their participant's partition; the pong writer
    // answering that participant publishes into it.
    assert!(!pong_r.qos.partitions.is_empty(), "{:?}", pong_r.qos);
    let pong_w = writers
        .iter()
        .find(|w| w.topic == "DDSPerfRPongKS" && w.qos.partitions == pong_r.qos.partitions)
        .expect("a pong writer in that partition");
    assert_eq!(EndpointData::matches(pong_r, pong_w), Ok(()));
    let elsewhere = writers
        .iter()
        .find(|w| w.topic == "DDSPerfRPongKS" && w.qos.partitions != pong_r.qos.partitions);
    if let Some(w) = elsewhere {
        assert_eq!(EndpointData::matches(pong_r, w), Err(Mismatch::Partition));
    }
}
