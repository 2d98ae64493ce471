//! What the builder writes is what Wireshark's RTPS dissector expects:
//! datagrams of every submessage kind, written to a capture file (UDP on
//! loopback), dissected by `tshark` with no malformed packet and no expert
//! warning or error, each submessage found with its id.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use tagwire_rtps::discovery::{EndpointData, ParticipantData, BUILTIN_ENDPOINTS};
use tagwire_rtps::plist::{pid, ListBuilder, ParameterList};
use tagwire_rtps::qos::{Durability, Duration, History, Liveliness, Qos};
use tagwire_rtps::{
    Data, DataFrag, EntityId, FragmentNumberSet, Guid, GuidPrefix, Header, Locator, MessageBuilder,
    SequenceNumber, SequenceNumberSet, Submessage, Time,
};

const PREFIX: GuidPrefix = GuidPrefix([0x01, 0x99, 0xaa, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8]);

fn header() -> Header {
    Header {
        version: (2, 1),
        vendor: [0x01, 0x99],
        prefix: PREFIX,
    }
}

fn ts() -> Submessage<'static> {
    Submessage::InfoTs(Some(Time::from_nanos(1_764_000_000_000_000_000)))
}

/// One datagram per kind of traffic tagwire's RTPS side sends.
fn datagrams() -> Vec<(Vec<u8>, Vec<u8>)> {
    let writer = EntityId([0, 0, 0x0a, 0x02]);
    let reader = EntityId([0, 0, 0x09, 0x07]);
    let lo = std::net::Ipv4Addr::LOCALHOST;
    let mut out = Vec::new();
    let mut push = |subs: &[Submessage<'_>], ids: &[u8]| {
        let mut b = MessageBuilder::new(header());
        for s in subs {
            b.push(s).unwrap();
        }
        out.push((b.finish(), ids.to_vec()));
    };
    // SPDP: a participant announcement.
    let spdp = ParticipantData {
        prefix: PREFIX,
        version: (2, 1),
        vendor: [0x01, 0x99],
        builtin_endpoints: BUILTIN_ENDPOINTS,
        lease: Duration {
            seconds: 10,
            fraction: 0,
        },
        domain: Some(0),
        metatraffic_unicast: vec![Locator::udp_v4(lo, 7410)],
        metatraffic_multicast: Vec::new(),
        default_unicast: vec![Locator::udp_v4(lo, 7411)],
        default_multicast: Vec::new(),
        user_data: b"tagwire".to_vec(),
    }
    .to_payload();
    push(
        &[
            ts(),
            Submessage::Data(Data {
                reader: EntityId::SPDP_READER,
                writer: EntityId::SPDP_WRITER,
                sn: SequenceNumber(1),
                inline_qos: None,
                payload: Some(&spdp),
                key: false,
                non_standard: false,
            }),
        ],
        &[0x09, 0x15],
    );
    // SEDP: a publication, reliable, with every QoS it can say.
    let mut qos = Qos::default_for(true);
    qos.durability = Durability::TransientLocal;
    qos.deadline = Duration::from_millis(100);
    qos.latency_budget = Duration::from_millis(1);
    qos.liveliness = (Liveliness::ManualByTopic, Duration::from_millis(500));
    qos.exclusive = true;
    qos.strength = 7;
    qos.by_source = true;
    qos.history = History::KeepLast(10);
    qos.partitions = vec!["robot".into(), "arm*".into()];
    qos.representation = vec![0, 2];
    let sedp = EndpointData {
        guid: Guid {
            prefix: PREFIX,
            entity: writer,
        },
        topic: "rt/chatter".into(),
        type_name: "std_msgs::msg::dds_::String_".into(),
        qos,
        unicast: vec![Locator::udp_v4(lo, 7411)],
        multicast: Vec::new(),
        expects_inline_qos: false,
    }
    .to_payload();
    push(
        &[
            Submessage::InfoDst(GuidPrefix([0; 12])),
            ts(),
            Submessage::Data(Data {
                reader: EntityId::SEDP_PUBLICATIONS_READER,
                writer: EntityId::SEDP_PUBLICATIONS_WRITER,
                sn: SequenceNumber(1),
                inline_qos: None,
                payload: Some(&sedp),
                key: false,
                non_standard: false,
            }),
            Submessage::Heartbeat {
                reader: EntityId::UNKNOWN,
                writer: EntityId::SEDP_PUBLICATIONS_WRITER,
                first: SequenceNumber(1),
                last: SequenceNumber(1),
                count: 1,
                final_flag: false,
                liveliness: false,
            },
        ],
        &[0x0e, 0x09, 0x15, 0x07],
    );
    // A user sample, and a dispose of its instance (key, status info).
    let sample = [0, 1, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0];
    let mut qos = ListBuilder::new();
    qos.param(
        pid::KEY_HASH,
        &[0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    )
    .param(pid::STATUS_INFO, &[0, 0, 0, 1]);
    let qos = qos.finish();
    let qos = ParameterList::parse_prefix(&qos, true).unwrap().0;
    let key = [0, 1, 0, 0, 5, 0, 0, 0];
    push(
        &[
            ts(),
            Submessage::Data(Data {
                reader: EntityId::UNKNOWN,
                writer,
                sn: SequenceNumber(7),
                inline_qos: None,
                payload: Some(&sample),
                key: false,
                non_standard: false,
            }),
            ts(),
            Submessage::Data(Data {
                reader: EntityId::UNKNOWN,
                writer,
                sn: SequenceNumber(8),
                inline_qos: Some(qos),
                payload: Some(&key),
                key: true,
                non_standard: false,
            }),
        ],
        &[0x09, 0x15, 0x09, 0x15],
    );
    // A fragmented sample: the first of three fragments, and its heartbeat.
    let frag = vec![0x5a; 1024];
    push(
        &[
            ts(),
            Submessage::DataFrag(DataFrag {
                reader: EntityId::UNKNOWN,
                writer,
                sn: SequenceNumber(9),
                fragment_start: 1,
                fragments: 1,
                fragment_size: 1024,
                sample_size: 3000,
                inline_qos: None,
                key: false,
                non_standard: false,
                bytes: &frag,
            }),
            Submessage::HeartbeatFrag {
                reader: EntityId::UNKNOWN,
                writer,
                sn: SequenceNumber(9),
                last_fragment: 1,
                count: 1,
            },
        ],
        &[0x09, 0x16, 0x13],
    );
    // A reader's answers: ACKNACK with a NACK, NACK_FRAG.
    let mut missing = SequenceNumberSet::empty(SequenceNumber(3));
    missing.insert_offset(0);
    missing.insert_offset(2);
    let mut frags = FragmentNumberSet::empty(2);
    frags.insert_offset(0);
    frags.insert_offset(1);
    push(
        &[
            Submessage::InfoDst(PREFIX),
            Submessage::AckNack {
                reader,
                writer,
                state: missing,
                count: 4,
                final_flag: false,
            },
            Submessage::NackFrag {
                reader,
                writer,
                sn: SequenceNumber(9),
                state: frags,
                count: 1,
            },
        ],
        &[0x0e, 0x06, 0x12],
    );
    // A writer's GAP, from a relayed source.
    let mut gap = SequenceNumberSet::empty(SequenceNumber(6));
    gap.insert_offset(1);
    push(
        &[
            Submessage::InfoSrc {
                version: (2, 1),
                vendor: [0x01, 0x99],
                prefix: PREFIX,
            },
            Submessage::Gap {
                reader,
                writer,
                start: SequenceNumber(4),
                list: gap,
            },
            Submessage::Pad,
        ],
        &[0x0c, 0x08, 0x01],
    );
    out
}

/// A classic pcap file of raw IPv4 packets: UDP from 127.0.0.1:7411 to
/// 127.0.0.1:7410, one per datagram.
fn pcap(dgrams: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&101u32.to_le_bytes()); // LINKTYPE_RAW
    for (i, d) in dgrams.iter().enumerate() {
        let udp_len = 8 + d.len();
        let ip_len = 20 + udp_len;
        let mut ip = vec![
            0x45,
            0,
            (ip_len >> 8) as u8,
            ip_len as u8,
            0,
            i as u8,
            0x40,
            0,
            64,
            17,
            0,
            0,
        ];
        ip.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 1]);
        let sum: u32 = ip
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        let check = !((folded & 0xffff) + (folded >> 16)) as u16;
        ip[10..12].copy_from_slice(&check.to_be_bytes());
        ip.extend_from_slice(&7411u16.to_be_bytes());
        ip.extend_from_slice(&7410u16.to_be_bytes());
        ip.extend_from_slice(&(udp_len as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0]);
        ip.extend_from_slice(d);
        f.extend_from_slice(&(i as u32 + 1).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        f.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        f.extend_from_slice(&ip);
    }
    f
}

#[test]
fn tshark_dissects_every_datagram_the_builder_writes_without_a_warning() {
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("SKIPPED: tshark is not installed (apt install tshark; .ci/run installs it)");
        return;
    }
    let dgrams = datagrams();
    let dir = std::env::temp_dir().join(format!("tagwire-rtps-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("built.pcap");
    let raw: Vec<Vec<u8>> = dgrams.iter().map(|(d, _)| d.clone()).collect();
    std::fs::write(&file, pcap(&raw)).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&file)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Each packet is RTPS, with the submessages we built, in order.
    let ids = run(&["-Y", "rtps", "-T", "fields", "-e", "rtps.sm.id"]);
    let got: Vec<Vec<u8>> = ids
        .lines()
        .map(|l| {
            l.split(',')
                .map(|x| u8::from_str_radix(x.trim_start_matches("0x"), 16).unwrap())
                .collect()
        })
        .collect();
    let want: Vec<Vec<u8>> = dgrams.iter().map(|(_, ids)| ids.clone()).collect();
    assert_eq!(got, want, "submessage ids as tshark reads them");
    // The discovery data reads as such.
    let names = run(&[
        "-Y",
        "rtps.param.topicName",
        "-T",
        "fields",
        "-e",
        "rtps.param.topicName",
        "-e",
        "rtps.param.typeName",
    ]);
    assert!(
        names.contains("rt/chatter\tstd_msgs::msg::dds_::String_"),
        "{names}"
    );
    // No malformed packet, no expert warning or error.
    let full = run(&["-V"]);
    assert!(!full.contains("Malformed"), "{full}");
    for bad in ["Expert Info (Warning", "Expert Info (Error"] {
        assert!(!full.contains(bad), "{full}");
    }
    let expert = run(&["-q", "-z", "expert,warn"]);
    assert!(
        !expert.contains("Warns (") && !expert.contains("Errors ("),
        "tshark's expert info: {expert}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
