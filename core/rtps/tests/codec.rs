//! The codec on hand-made input: wire facts from the RTPS specification,
//! what Cyclone DDS refuses as
//! malformed, and round trips of every submessage kind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use tagwire_rtps::plist::{pid, ListBuilder, ParameterList};
use tagwire_rtps::{
    Data, DataFrag, EntityId, FragmentNumberSet, GuidPrefix, Header, Message, MessageBuilder,
    NumberSet, RtpsError, SequenceNumber, SequenceNumberSet, Submessage, Time,
};

fn header() -> Header {
    Header {
        version: (2, 1),
        vendor: [0x01, 0x99],
        prefix: GuidPrefix([1, 0x99, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
    }
}

fn raw(subs: &[u8]) -> Vec<u8> {
    let mut m = MessageBuilder::new(header()).finish();
    m.extend_from_slice(subs);
    m
}

#[test]
fn a_nack_of_one_to_four_is_msb_first_as_the_specification_draws_it() {
    let mut state = SequenceNumberSet::empty(SequenceNumber(1));
    for i in 0..4 {
        assert!(state.insert_offset(i));
    }
    let sm = Submessage::AckNack {
        reader: EntityId([0, 0, 9, 7]),
        writer: EntityId([0, 0, 10, 2]),
        state,
        count: 3,
        final_flag: true,
    };
    let mut b = MessageBuilder::new(header());
    b.push(&sm).unwrap();
    let bytes = b.finish();
    // id 0x06, flags E|F, length 28; ids; base {0,1}; numBits 4; 0xF0000000.
    assert_eq!(&bytes[20..24], &[0x06, 0x03, 28, 0]);
    assert_eq!(&bytes[32..40], &[0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(&bytes[40..48], &[4, 0, 0, 0, 0, 0, 0, 0xf0]);
    let m = Message::parse(&bytes).unwrap();
    assert_eq!(m.submessages, vec![sm]);
    let Submessage::AckNack { state, .. } = &m.submessages[0] else {
        unreachable!()
    };
    assert_eq!(state.offsets().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
}

#[test]
fn a_big_endian_submessage_is_read_in_its_own_byte_order() {
    // HEARTBEAT, E clear: every number big-endian.
    let mut sm = vec![0x07, 0x00, 0, 28];
    sm.extend_from_slice(&[0, 0, 0, 0, 0, 0, 3, 0xc2]);
    sm.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
    sm.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 5]);
    sm.extend_from_slice(&[0, 0, 0, 7]);
    let dgram = raw(&sm);
    let m = Message::parse(&dgram).unwrap();
    assert_eq!(
        m.submessages,
        vec![Submessage::Heartbeat {
            reader: EntityId::UNKNOWN,
            writer: EntityId::SEDP_PUBLICATIONS_WRITER,
            first: SequenceNumber(1),
            last: SequenceNumber(5),
            count: 7,
            final_flag: false,
            liveliness: false,
        }]
    );
}

#[test]
fn a_zero_length_means_to_the_end_but_for_pad_and_info_ts() {
    // INFO_TS with I set and length 0 (empty), then DATA with length 0
    // (to the end of the message).
    let mut sm = vec![0x09, 0x03, 0, 0];
    sm.extend_from_slice(&[0x15, 0x05, 0, 0]);
    sm.extend_from_slice(&[0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 10, 2, 0, 0, 0, 0, 1, 0, 0, 0]);
    sm.extend_from_slice(&[0, 1, 0, 0, 5, 0, 0, 0]);
    let dgram = raw(&sm);
    let m = Message::parse(&dgram).unwrap();
    assert_eq!(m.submessages.len(), 2);
    assert_eq!(m.submessages[0], Submessage::InfoTs(None));
    let Submessage::Data(d) = &m.submessages[1] else {
        panic!("{:?}", m.submessages)
    };
    assert_eq!(d.sn, SequenceNumber(1));
    assert_eq!(d.payload, Some(&[0, 1, 0, 0, 5, 0, 0, 0][..]));
}

#[test]
fn what_cyclone_calls_malformed_is_refused() {
    let data = |flags: u8, to_qos: u8| {
        let mut sm = vec![0x15, flags, 24, 0];
        sm.extend_from_slice(&[
            0, 0, to_qos, 0, 0, 0, 0, 0, 0, 0, 10, 2, 0, 0, 0, 0, 1, 0, 0, 0,
        ]);
        sm.extend_from_slice(&[0, 1, 0, 0]);
        sm
    };
    // Data and key at once.
    assert!(matches!(
        Message::parse(&raw(&data(0x0d, 16))),
        Err(RtpsError::Invalid(_))
    ));
    // octetsToInlineQos not a multiple of 4.
    assert!(matches!(
        Message::parse(&raw(&data(0x05, 17))),
        Err(RtpsError::Invalid(_))
    ));
    // A length that is not a multiple of 4, before another submessage.
    let mut odd = vec![0x0e, 0x01, 13, 0];
    odd.extend_from_slice(&[0; 13]);
    odd.extend_from_slice(&[0x01, 0x01, 0, 0]);
    assert!(matches!(
        Message::parse(&raw(&odd)),
        Err(RtpsError::Invalid(_))
    ));
    // An ACKNACK set of more than 256, or based below 1.
    let acknack = |base: u32, bits: u32| {
        let mut sm = vec![0x06, 0x01, 24, 0];
        sm.extend_from_slice(&[0; 8]);
        sm.extend_from_slice(&[0, 0, 0, 0]);
        sm.extend_from_slice(&base.to_le_bytes());
        sm.extend_from_slice(&bits.to_le_bytes());
        sm.extend_from_slice(&[0; 4]);
        sm
    };
    assert!(Message::parse(&raw(&acknack(1, 257))).is_err());
    assert!(Message::parse(&raw(&acknack(0, 4))).is_err());
    // …but the pre-emptive ACK (base 0, no bits) other vendors send is fine.
    assert!(Message::parse(&raw(&acknack(0, 0))).is_ok());
    // A submessage longer than the datagram.
    assert!(matches!(
        Message::parse(&raw(&[0x07, 0x01, 200, 0, 0, 0])),
        Err(RtpsError::Truncated { .. })
    ));
    // Not RTPS, or not version 2.
    assert_eq!(Message::parse(b"RTPX"), Err(RtpsError::NotRtps));
    assert_eq!(Message::parse(&[0x00]), Err(RtpsError::NotRtps));
    let mut v3 = raw(&[]);
    v3[4] = 3;
    assert_eq!(Message::parse(&v3), Err(RtpsError::Version(3, 1)));
}

#[test]
fn unknown_submessages_are_kept_for_whoever_skips_them() {
    let mut sm = vec![0x80, 0x01, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    sm.extend_from_slice(&[0x01, 0x01, 0, 0]);
    let dgram = raw(&sm);
    let m = Message::parse(&dgram).unwrap();
    assert_eq!(
        m.submessages,
        vec![
            Submessage::Unknown {
                id: 0x80,
                flags: 0x01,
                body: &[1, 2, 3, 4, 5, 6, 7, 8]
            },
            Submessage::Pad
        ]
    );
}

#[test]
fn a_discovery_payload_reads_back_through_its_parameter_list() {
    let guid = tagwire_rtps::Guid {
        prefix: header().prefix,
        entity: EntityId::PARTICIPANT,
    };
    let loc = tagwire_rtps::Locator::udp_v4(std::net::Ipv4Addr::LOCALHOST, 7410);
    let mut b = ListBuilder::new();
    b.guid(pid::PARTICIPANT_GUID, guid)
        .u32(pid::BUILTIN_ENDPOINT_SET, 0x3f)
        .locator(pid::METATRAFFIC_UNICAST_LOCATOR, &loc)
        .locator(pid::METATRAFFIC_UNICAST_LOCATOR, &loc)
        .string(pid::TOPIC_NAME, "KeyedSeq");
    let payload = b.finish_payload();
    assert_eq!(&payload[..4], &[0, 3, 0, 0]);
    let pl = ParameterList::from_payload(&payload).unwrap();
    assert_eq!(pl.guid(pid::PARTICIPANT_GUID).unwrap(), Some(guid));
    assert_eq!(pl.u32(pid::BUILTIN_ENDPOINT_SET).unwrap(), Some(0x3f));
    assert_eq!(pl.string(pid::TOPIC_NAME).unwrap(), Some("KeyedSeq"));
    // "KeyedSeq" is 4 + 9 bytes, padded to 16, as Cyclone sends it.
    assert_eq!(pl.get(pid::TOPIC_NAME).map(<[u8]>::len), Some(16));
    let locs = pl.locators(pid::METATRAFFIC_UNICAST_LOCATOR).unwrap();
    assert_eq!(locs.len(), 2);
    assert_eq!(
        locs[0].to_udp_v4(),
        Some(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::LOCALHOST,
            7410
        ))
    );
    // No sentinel, or an odd length: refused.
    assert!(ParameterList::parse_prefix(&payload[4..payload.len() - 4], true).is_err());
    assert!(ParameterList::parse_prefix(&[0x05, 0, 3, 0, 1, 2, 3, 1, 0, 0, 0], true).is_err());
}

#[test]
fn time_keeps_nanoseconds_through_a_round_trip() {
    for ns in [0u64, 1, 999_999_999, 1_764_000_000_123_456_789] {
        assert_eq!(Time::from_nanos(ns).to_nanos(), ns);
    }
}

// ---- round trips of arbitrary submessages ----

#[derive(Debug, Clone)]
enum Owned {
    Pad,
    AckNack(EntityId, EntityId, SequenceNumberSet, u32, bool),
    Heartbeat(EntityId, EntityId, i64, i64, u32, bool, bool),
    Gap(EntityId, EntityId, i64, SequenceNumberSet),
    InfoTs(Option<Time>),
    InfoSrc((u8, u8), [u8; 2], GuidPrefix),
    InfoDst(GuidPrefix),
    Data(
        EntityId,
        EntityId,
        i64,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        bool,
    ),
    DataFrag(EntityId, EntityId, i64, u32, u16, u16, u32, Vec<u8>, bool),
    HeartbeatFrag(EntityId, EntityId, i64, u32, u32),
    NackFrag(EntityId, EntityId, i64, FragmentNumberSet, u32),
    Unknown(u8, u8, Vec<u8>),
}

fn entity() -> impl Strategy<Value = EntityId> {
    any::<[u8; 4]>().prop_map(EntityId)
}

fn set<T: std::fmt::Debug + Copy + 'static>(
    base: impl Strategy<Value = T>,
) -> impl Strategy<Value = NumberSet<T>> {
    (base, 0u32..=256, any::<[u32; 8]>()).prop_map(|(base, n, words)| {
        let mut s = NumberSet::empty(base);
        for i in 0..n {
            if words[(i / 32) as usize] & (1 << (i % 32)) != 0 {
                s.insert_offset(i);
            }
        }
        s.num_bits = n;
        s
    })
}

fn words4(max: usize) -> impl Strategy<Value = Vec<u8>> {
    (0..=max / 4).prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n * 4))
}

fn owned() -> impl Strategy<Value = Owned> {
    let sn = 1i64..i64::MAX / 2;
    prop_oneof![
        Just(Owned::Pad),
        (
            entity(),
            entity(),
            set(sn.clone().prop_map(SequenceNumber)),
            any::<u32>(),
            any::<bool>()
        )
            .prop_map(|(r, w, s, c, f)| Owned::AckNack(r, w, s, c, f)),
        (
            entity(),
            entity(),
            sn.clone(),
            0i64..1000,
            any::<u32>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(r, w, f, n, c, fl, l)| Owned::Heartbeat(
                r,
                w,
                f,
                f + n - 1,
                c,
                fl,
                l
            )),
        (
            entity(),
            entity(),
            sn.clone(),
            0i64..1000,
            set(Just(()).prop_map(|_| SequenceNumber(0)))
        )
            .prop_map(|(r, w, s, d, mut l)| {
                l.base = SequenceNumber(s + d);
                Owned::Gap(r, w, s, l)
            }),
        proptest::option::of((any::<u32>(), any::<u32>()))
            .prop_map(|t| Owned::InfoTs(t.map(|(seconds, fraction)| Time { seconds, fraction }))),
        (any::<(u8, u8)>(), any::<[u8; 2]>(), any::<[u8; 12]>())
            .prop_map(|(v, vd, p)| Owned::InfoSrc(v, vd, GuidPrefix(p))),
        any::<[u8; 12]>().prop_map(|p| Owned::InfoDst(GuidPrefix(p))),
        (
            entity(),
            entity(),
            sn.clone(),
            proptest::option::of(words4(64)),
            proptest::option::of(words4(2048)),
            any::<bool>()
        )
            .prop_map(|(r, w, s, q, p, k)| Owned::Data(r, w, s, q, p, k)),
        (
            entity(),
            entity(),
            sn.clone(),
            1u32..1000,
            any::<u16>(),
            1u16..=u16::MAX,
            any::<u32>(),
            words4(2048),
            any::<bool>()
        )
            .prop_map(|(r, w, s, st, n, fs, ss, b, k)| Owned::DataFrag(
                r, w, s, st, n, fs, ss, b, k
            )),
        (entity(), entity(), sn.clone(), any::<u32>(), any::<u32>())
            .prop_map(|(r, w, s, l, c)| Owned::HeartbeatFrag(r, w, s, l, c)),
        (entity(), entity(), sn, set(1u32..u32::MAX), any::<u32>())
            .prop_map(|(r, w, s, st, c)| Owned::NackFrag(r, w, s, st, c)),
        (0x80u8..=0xff, any::<u8>(), words4(256)).prop_map(|(i, f, mut b)| {
            b.extend_from_slice(&[1, 2, 3, 4]);
            Owned::Unknown(i, f, b)
        }),
    ]
}

/// A parameter list of `n` words of pad parameters (what a QoS list is
/// made of, whatever its pids).
fn qos_list(words: &[u8]) -> Vec<u8> {
    let mut b = ListBuilder::new();
    for c in words.chunks(4) {
        b.param(0x7000 | u16::from(c[0] & 0x0f), c);
    }
    b.finish()
}

fn borrow<'a>(o: &'a Owned, lists: &'a [Vec<u8>]) -> Submessage<'a> {
    let list = |i: usize| {
        ParameterList::parse_prefix(&lists[i], true)
            .map(|(l, _)| l)
            .ok()
    };
    match o {
        Owned::Pad => Submessage::Pad,
        Owned::AckNack(r, w, s, c, f) => Submessage::AckNack {
            reader: *r,
            writer: *w,
            state: *s,
            count: *c,
            final_flag: *f,
        },
        Owned::Heartbeat(r, w, f, l, c, fl, lv) => Submessage::Heartbeat {
            reader: *r,
            writer: *w,
            first: SequenceNumber(*f),
            last: SequenceNumber(*l),
            count: *c,
            final_flag: *fl,
            liveliness: *lv,
        },
        Owned::Gap(r, w, s, l) => Submessage::Gap {
            reader: *r,
            writer: *w,
            start: SequenceNumber(*s),
            list: *l,
        },
        Owned::InfoTs(t) => Submessage::InfoTs(*t),
        Owned::InfoSrc(v, vd, p) => Submessage::InfoSrc {
            version: *v,
            vendor: *vd,
            prefix: *p,
        },
        Owned::InfoDst(p) => Submessage::InfoDst(*p),
        Owned::Data(r, w, s, q, p, k) => Submessage::Data(Data {
            reader: *r,
            writer: *w,
            sn: SequenceNumber(*s),
            inline_qos: q.as_ref().and_then(|_| list(0)),
            payload: p.as_deref(),
            key: p.is_some() && *k,
            non_standard: false,
        }),
        Owned::DataFrag(r, w, s, st, n, fs, ss, b, k) => Submessage::DataFrag(DataFrag {
            reader: *r,
            writer: *w,
            sn: SequenceNumber(*s),
            fragment_start: *st,
            fragments: *n,
            fragment_size: *fs,
            sample_size: *ss,
            inline_qos: None,
            key: *k,
            non_standard: false,
            bytes: b,
        }),
        Owned::HeartbeatFrag(r, w, s, l, c) => Submessage::HeartbeatFrag {
            reader: *r,
            writer: *w,
            sn: SequenceNumber(*s),
            last_fragment: *l,
            count: *c,
        },
        Owned::NackFrag(r, w, s, st, c) => Submessage::NackFrag {
            reader: *r,
            writer: *w,
            sn: SequenceNumber(*s),
            state: *st,
            count: *c,
        },
        Owned::Unknown(i, f, b) => Submessage::Unknown {
            id: *i,
            flags: *f,
            body: b,
        },
    }
}

proptest! {
    #[test]
    fn every_submessage_kind_reads_back_as_it_was_built(
        owned in proptest::collection::vec(owned(), 0..8),
    ) {
        // One inline-QoS list for the DATAs that carry one.
        let lists = vec![qos_list(&[1, 2, 3, 4, 5, 6, 7, 8])];
        let subs: Vec<Submessage<'_>> = owned.iter().map(|o| borrow(o, &lists)).collect();
        let mut b = MessageBuilder::new(header());
        for s in &subs {
            b.push(s).unwrap();
        }
        let bytes = b.finish();
        let m = Message::parse(&bytes).unwrap();
        prop_assert_eq!(m.header, header());
        prop_assert_eq!(m.submessages, subs);
    }

    #[test]
    fn arbitrary_bytes_after_a_header_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(m) = Message::parse(&raw(&tail)) {
            for s in &m.submessages {
                if let Submessage::Data(Data { payload: Some(p), .. }) = s {
                    let _ = ParameterList::from_payload(p).map(|l| l.iter().count());
                }
            }
        }
    }
}

#[test]
fn an_endpoint_that_expects_inline_qos_says_so_when_written_back() {
    // Found by the rtps_decode fuzz target: the flag was read and not
    // written.
    let prefix = GuidPrefix([1; 12]);
    for expects in [false, true] {
        let e = tagwire_rtps::discovery::EndpointData {
            guid: tagwire_rtps::Guid {
                prefix,
                entity: EntityId([0, 0, 1, 0x07]),
            },
            topic: "t".into(),
            type_name: "T".into(),
            qos: tagwire_rtps::qos::Qos::default_for(false),
            unicast: Vec::new(),
            multicast: Vec::new(),
            expects_inline_qos: expects,
        };
        let again =
            tagwire_rtps::discovery::EndpointData::from_payload(&e.to_payload(), prefix, false);
        assert_eq!(again, Ok(e));
    }
}
