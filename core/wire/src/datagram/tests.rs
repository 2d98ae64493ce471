//! The datagram codec against its own encodings and against hostile bytes.

use super::*;
use crate::frame::FrameHeader;
use crate::ids::{NodeAddr, Pid, SenderInfo, SeqNum};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = TagName> {
    "(/[a-z0-9_]{1,12}){1,4}".prop_map(|s| TagName::new(&s).unwrap())
}

fn header() -> impl Strategy<Value = FrameHeader> {
    (
        any::<u8>(),
        any::<u32>(),
        any::<[u8; 16]>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(flags, pid, node, seq, ts)| FrameHeader {
            flags,
            sender: SenderInfo {
                pid: Pid(pid),
                node: NodeAddr::from_bytes(node),
            },
            stream: 0,
            seq: SeqNum(seq),
            timestamp_ns: ts,
        })
}

/// An owned data datagram: (stream, seq, flags, frag, frags, header, tag,
/// payload, extra message length).
type DataParts = (u64, u64, u8, u16, u16, FrameHeader, TagName, Vec<u8>, u32);

fn data_parts() -> impl Strategy<Value = DataParts> {
    (
        any::<u64>(),
        1u64..u64::MAX / 2,
        any::<u8>(),
        1u16..=u16::MAX,
        header(),
        name(),
        proptest::collection::vec(any::<u8>(), 0..300),
        0u32..1000,
    )
        .prop_flat_map(|(stream, seq, flags, frags, h, tag, payload, extra)| {
            (0..frags).prop_map(move |frag| {
                (
                    stream,
                    seq + u64::from(frag),
                    // (Evenly cut fragments have lengths of their own:
                    // `even_cuts_round_trip`.)
                    flags & !FLAG_EVEN,
                    frag,
                    frags,
                    h,
                    tag.clone(),
                    payload.clone(),
                    extra,
                )
            })
        })
}

fn encode_data(p: &DataParts) -> Vec<u8> {
    let (stream, seq, flags, frag, frags, header, tag, payload, extra) = p;
    let d = DataRepr {
        seq: *seq,
        flags: *flags,
        frag: *frag,
        frags: *frags,
        msg_len: payload.len() as u32 + extra,
        header: *header,
        tag,
        payload,
    };
    let mut out = vec![0xAA; 3];
    d.encode(*stream, &mut out);
    out.split_off(3)
}

fn acknack() -> impl Strategy<Value = AckNack> {
    (
        0u64..u64::MAX - 300,
        proptest::collection::btree_set(1u64..=MAX_MISSING_SPAN, 0..40),
        proptest::option::of(any::<u32>()),
        0u64..=MAX_MISSING_SPAN,
    )
        .prop_map(|(ack_through, offs, credit, known)| {
            let missing: Vec<u64> = offs.into_iter().map(|o| ack_through + o).collect();
            // What the encoding can say of `known` (see
            // `AckNack::known_through`), so that it round-trips.
            let last = missing.last().copied();
            let whole = ack_through + known / 8 * 8;
            let known_through = match last {
                Some(l) if (l - ack_through).div_ceil(8) * 8 >= whole - ack_through => l,
                Some(_) | None => whole,
            };
            AckNack {
                ack_through,
                missing,
                credit,
                known_through,
            }
        })
}

fn any_datagram() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        data_parts().prop_map(|p| encode_data(&p)),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(s, first, last)| {
            let mut out = Vec::new();
            Heartbeat { first, last }.encode(s, &mut out);
            out
        }),
        (any::<u64>(), acknack()).prop_map(|(s, a)| {
            let mut out = Vec::new();
            a.encode(s, &mut out);
            out
        }),
        batch_parts().prop_map(|p| encode_batch(&p)),
    ]
}

type BatchParts = (u64, u64, u8, TagName, Vec<(FrameHeader, Vec<u8>)>);

fn batch_parts() -> impl Strategy<Value = BatchParts> {
    (
        any::<u64>(),
        1..u64::MAX,
        any::<u8>(),
        name(),
        proptest::collection::vec(
            (header(), proptest::collection::vec(any::<u8>(), 0..64)),
            1..12,
        ),
    )
}

fn encode_batch(p: &BatchParts) -> Vec<u8> {
    let (stream, seq, flags, tag, msgs) = p;
    let mut entries = Vec::new();
    for (h, m) in msgs {
        push_batch_entry(&mut entries, h, m);
    }
    let mut out = Vec::new();
    BatchRepr {
        seq: *seq,
        flags: *flags,
        count: msgs.len() as u16,
        tag,
        entries: &entries,
    }
    .encode(*stream, &mut out);
    out
}

proptest! {
    #[test]
    fn batch_round_trips(p in batch_parts()) {
        let bytes = encode_batch(&p);
        let d = Datagram::decode(&bytes).unwrap();
        let (stream, seq, flags, tag, msgs) = p;
        prop_assert_eq!(d.stream, stream);
        let Body::Batch(b) = d.body else { panic!("not a batch") };
        prop_assert_eq!((b.seq(), b.flags(), b.count() as usize), (seq, flags, msgs.len()));
        prop_assert_eq!((b.tag(), b.stream()), (tag.as_str(), stream));
        prop_assert_eq!(b.as_bytes(), &bytes[..]);
        prop_assert_eq!(peek_tag(&bytes).unwrap(), Some(tag.as_str()));
        let got: Vec<(FrameHeader, Vec<u8>)> =
            b.messages().map(|(h, m)| (h, m.to_vec())).collect();
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn a_batch_whose_count_disagrees_with_its_entries_is_rejected(p in batch_parts(), more: bool) {
        let mut bytes = encode_batch(&p);
        // count sits after the common header, seq and flags.
        let at = COMMON_LEN + 8 + 1;
        let n = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let wrong = if more { n.wrapping_add(1) } else { n - 1 };
        bytes[at..at + 2].copy_from_slice(&wrong.to_le_bytes());
        prop_assert!(Datagram::decode(&bytes).is_err());
    }

    #[test]
    fn even_cuts_round_trip(
        msg in proptest::collection::vec(any::<u8>(), 0..5000),
        frags in 1u16..40,
    ) {
        let tag = TagName::new("/even").unwrap();
        let mut back = Vec::new();
        let mut lens = Vec::new();
        for frag in 0..frags {
            let (range, _) = even_piece(msg.len(), frags, frag);
            let d = DataRepr {
                seq: 1 + u64::from(frag),
                flags: FLAG_EVEN | FLAG_RELIABLE,
                frag,
                frags,
                msg_len: msg.len() as u32,
                header: FrameHeader {
                    flags: 0,
                    sender: SenderInfo::default(),
                    stream: 0,
                    seq: SeqNum(9),
                    timestamp_ns: 5,
                },
                tag: &tag,
                payload: &msg[range],
            };
            let mut out = Vec::new();
            d.encode(7, &mut out);
            lens.push(out.len());
            let g = Datagram::decode(&out).unwrap();
            let Body::Data(got) = &g.body else { panic!("not data") };
            back.extend_from_slice(got.payload());
            // Read and built again: the same bytes.
            let mut again = Vec::new();
            DataRepr { payload: got.payload(), ..d }.encode(7, &mut again);
            prop_assert_eq!(&again, &out);
            // A byte more is refused, and a byte less unless the
            // pieces are empty.
            out.push(0);
            prop_assert!(Datagram::decode(&out).is_err());
            out.truncate(out.len() - 2);
            prop_assert!(Datagram::decode(&out).is_err() || msg.len() < usize::from(frags));
        }
        prop_assert_eq!(back, msg);
        // Every datagram of the message has one length.
        lens.dedup();
        prop_assert_eq!(lens.len(), 1);
    }

    #[test]
    fn data_round_trips(p in data_parts()) {
        let bytes = encode_data(&p);
        let d = Datagram::decode(&bytes).unwrap();
        let (stream, seq, flags, frag, frags, header, tag, payload, extra) = p;
        prop_assert_eq!(d.stream, stream);
        let Body::Data(d) = d.body else { panic!("not data") };
        prop_assert_eq!(d.seq(), seq);
        prop_assert_eq!(d.flags(), flags);
        prop_assert_eq!(d.frag(), frag);
        prop_assert_eq!(d.frags(), frags);
        prop_assert_eq!(d.msg_len(), payload.len() as u32 + extra);
        prop_assert_eq!(d.header(), header);
        prop_assert_eq!((d.tag(), d.stream()), (tag.as_str(), stream));
        prop_assert_eq!(peek_tag(&bytes).unwrap(), Some(tag.as_str()));
        prop_assert_eq!(d.payload(), &payload[..]);
        prop_assert_eq!(d.first_seq(), seq - u64::from(frag));
        prop_assert_eq!(
            bytes.len(),
            DATA_FIXED_LEN + tag.as_str().len() + payload.len()
        );
    }

    #[test]
    fn heartbeat_round_trips(stream: u64, first: u64, last: u64) {
        let g = Datagram { stream, body: Body::Heartbeat(Heartbeat { first, last }) };
        let mut out = Vec::new();
        Heartbeat { first, last }.encode(stream, &mut out);
        prop_assert_eq!(Datagram::decode(&out).unwrap(), g);
        prop_assert_eq!(peek_tag(&out).unwrap(), None);
    }

    #[test]
    fn acknack_round_trips(stream: u64, a in acknack()) {
        let mut out = Vec::new();
        a.encode(stream, &mut out);
        prop_assert!(out.len() <= COMMON_LEN + 9 + MAX_BITMAP + 4);
        let g = Datagram::decode(&out).unwrap();
        prop_assert_eq!(g.stream, stream);
        let Body::AckNack(v) = g.body else { panic!("not an acknack") };
        prop_assert_eq!(v.stream(), stream);
        prop_assert_eq!(v.to_acknack(), a);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes: Vec<u8>) {
        let _ = Datagram::decode(&bytes);
        let _ = peek_tag(&bytes);
    }

    /// A view's tag is the datagram's own bytes, and a name that is not
    /// a tag name is refused, by the views and by `peek_tag` (`bad` is not
    /// a tag name).
    #[test]
    fn the_tag_is_borrowed_and_checked(
        p in data_parts(),
        b in batch_parts(),
        bad in prop_oneof![Just("no-slash"), Just("/a//b"), Just("/x\u{7}")],
    ) {
        // (Where the name starts: after the fixed fields and its length.)
        let data_at = COMMON_LEN + 8 + 1 + 2 + 2 + 4 + HEADER_LEN + 1;
        let batch_at = COMMON_LEN + 8 + 1 + 2 + 1;
        for (bytes, tag, at) in [
            (encode_data(&p), p.6.clone(), data_at),
            (encode_batch(&b), b.3.clone(), batch_at),
        ] {
            let plain = Datagram::decode(&bytes).unwrap();
            let (_, _, name) = plain.data().unwrap();
            prop_assert_eq!(name.as_ptr(), bytes[at..].as_ptr());
            // The same datagram naming an invalid tag of the same length.
            let name = tag.as_str();
            prop_assert_eq!(&bytes[at..at + name.len()], name.as_bytes());
            let mut forged = bytes.clone();
            let mut wrong = bad.as_bytes().to_vec();
            wrong.resize(name.len(), b'x');
            forged[at..at + name.len()].copy_from_slice(&wrong);
            if TagName::new(std::str::from_utf8(&wrong).unwrap()).is_err() {
                prop_assert!(Datagram::decode(&forged).is_err());
                prop_assert!(peek_tag(&forged).is_err());
            }
        }
    }

    #[test]
    fn truncated_datagrams_are_errors(bytes in any_datagram(), cut: usize) {
        let data = bytes[..2] == MAGIC.to_le_bytes() && bytes[3] == KIND_DATA;
        let cut = cut % bytes.len();
        let r = Datagram::decode(&bytes[..cut]);
        // A data datagram cut inside its payload is a shorter, valid
        // fragment; everything else must fail.
        let min_data = bytes.len() - match Datagram::decode(&bytes) {
            Ok(Datagram { body: Body::Data(d), .. }) => d.payload().len(),
            _ => 0,
        };
        // An AckNack cut just before its credit is one without credit.
        let credit_cut = matches!(
            Datagram::decode(&bytes),
            Ok(Datagram { body: Body::AckNack(a), .. }) if a.credit().is_some()
        ) && cut == bytes.len() - 4;
        if (data && cut >= min_data) || credit_cut {
            prop_assert!(r.is_ok());
        } else {
            prop_assert!(r.is_err());
        }
    }

    #[test]
    fn mutated_datagrams_never_panic(bytes in any_datagram(), pos: usize, byte: u8) {
        let mut bytes = bytes;
        let i = pos % bytes.len();
        bytes[i] = byte;
        let _ = Datagram::decode(&bytes);
    }
}

fn sample_data(frag: u16, frags: u16, msg_len: u32, payload: &[u8]) -> Vec<u8> {
    let tag = TagName::new("/robot/laser").unwrap();
    let d = DataRepr {
        seq: 10,
        flags: FLAG_RELIABLE,
        frag,
        frags,
        msg_len,
        header: FrameHeader {
            flags: 0,
            sender: SenderInfo::default(),
            stream: 0,
            seq: SeqNum(1),
            timestamp_ns: 0,
        },
        tag: &tag,
        payload,
    };
    let mut out = Vec::new();
    d.encode(7, &mut out);
    out
}

#[test]
fn every_tag_has_a_stable_administratively_scoped_group() {
    let a = TagName::new("/robot/laser").unwrap();
    let g = tag_group(&a);
    assert_eq!(g, tag_group(&TagName::new("/robot/laser").unwrap()));
    assert_eq!(&g.octets()[..3], &[239, 255, 75]);
    let groups: std::collections::HashSet<_> = (0..200)
        .map(|i| tag_group(&TagName::new(&format!("/t/{i}")).unwrap()))
        .collect();
    assert!(groups.len() > 100, "names spread over the groups");
    assert!(groups.iter().all(|g| (1..=254).contains(&g.octets()[3])));
}

#[test]
fn inconsistent_fragments_are_rejected() {
    assert!(Datagram::decode(&sample_data(0, 1, 3, b"abc")).is_ok());
    let invalid = |b: Vec<u8>| matches!(Datagram::decode(&b), Err(DecodeError::Invalid(_)));
    assert!(invalid(sample_data(0, 0, 3, b"abc")));
    assert!(invalid(sample_data(2, 2, 3, b"abc")));
    assert!(invalid(sample_data(0, 1, 2, b"abc")));
    assert!(invalid(sample_data(0, 1, MAX_MESSAGE + 1, b"abc")));
    // seq 10 with frag 10 would put the message's first seq at 0.
    assert!(invalid(sample_data(10, 11, 3, b"abc")));
}

#[test]
fn bad_headers_and_bitmaps_are_named() {
    let mut hb = Vec::new();
    Heartbeat { first: 1, last: 2 }.encode(5, &mut hb);
    let mut bad = hb.clone();
    bad[0] = 0;
    assert!(matches!(
        Datagram::decode(&bad),
        Err(DecodeError::BadMagic(_))
    ));
    bad = hb.clone();
    bad[2] = 9;
    assert_eq!(Datagram::decode(&bad), Err(DecodeError::BadVersion(9)));
    bad = hb.clone();
    bad[3] = 99;
    assert!(matches!(
        Datagram::decode(&bad),
        Err(DecodeError::Unknown { .. })
    ));
    hb.push(0);
    assert_eq!(Datagram::decode(&hb), Err(DecodeError::Trailing(1)));

    let mut an = Vec::new();
    open(&mut an, KIND_ACKNACK, 5, COMMON_LEN);
    an.extend_from_slice(&0u64.to_le_bytes());
    an.push(33);
    an.extend_from_slice(&[0xff; 33]);
    assert!(matches!(
        Datagram::decode(&an),
        Err(DecodeError::Invalid(_))
    ));
    let mut wrap = Vec::new();
    open(&mut wrap, KIND_ACKNACK, 5, COMMON_LEN);
    wrap.extend_from_slice(&u64::MAX.to_le_bytes());
    wrap.extend_from_slice(&[1, 1]);
    assert!(Datagram::decode(&wrap).is_err());
    assert!(Datagram::decode(&vec![0; MAX_DATAGRAM + 1]).is_err());
}

#[test]
fn out_of_span_missing_seqs_are_not_encoded() {
    let a = AckNack {
        ack_through: 10,
        missing: vec![5, 11, 266, 267],
        credit: None,
        known_through: 10,
    };
    let mut out = Vec::new();
    a.encode(1, &mut out);
    let Body::AckNack(back) = Datagram::decode(&out).unwrap().body else {
        panic!("not an acknack")
    };
    assert_eq!(back.missing().collect::<Vec<_>>(), vec![11, 266]);
}

#[test]
fn acknacks_and_only_acknacks_begin_with_their_prefix() {
    let mut out = Vec::new();
    AckNack::default().encode(9, &mut out);
    assert_eq!(out[..4], ACKNACK_PREFIX);
    assert_eq!(&ACKNACK_PREFIX[..2], b"TD");
    for kind in [KIND_DATA, KIND_HEARTBEAT, KIND_BATCH] {
        let mut other = Vec::new();
        open(&mut other, kind, 9, COMMON_LEN);
        assert_ne!(other[..4], ACKNACK_PREFIX);
    }
}

#[test]
fn an_acknack_without_credit_is_the_old_encoding_and_credit_is_a_trailing_u32() {
    let mut old = Vec::new();
    open(&mut old, KIND_ACKNACK, 5, COMMON_LEN);
    old.extend_from_slice(&7u64.to_le_bytes());
    old.extend_from_slice(&[1, 0b101]);
    let a = AckNack {
        ack_through: 7,
        missing: vec![8, 10],
        credit: None,
        known_through: 10,
    };
    let mut out = Vec::new();
    a.encode(5, &mut out);
    assert_eq!(out, old, "no credit: byte for byte what older nodes send");
    let limited = AckNack {
        credit: Some(300),
        ..a
    };
    out.clear();
    limited.encode(5, &mut out);
    assert_eq!(&out[..old.len()], &old[..]);
    assert_eq!(&out[old.len()..], &300u32.to_le_bytes());
    let Body::AckNack(back) = Datagram::decode(&out).unwrap().body else {
        panic!("not an acknack")
    };
    assert_eq!(back.to_acknack(), limited);
    // A partial credit field is malformed.
    out.pop();
    assert!(Datagram::decode(&out).is_err());
}

#[test]
fn what_the_reader_holds_beyond_its_last_missing_seq_rides_in_the_bitmap_length() {
    // Seq 8 missing, 9..=30 held: the statement ends at 30, two whole bytes
    // of the bitmap past 7 (8..=23) say it up to 23; the third byte would
    // end past 30 and is not sent.
    let a = AckNack {
        ack_through: 7,
        missing: vec![8],
        credit: Some(5),
        known_through: 30,
    };
    let mut out = Vec::new();
    a.encode(3, &mut out);
    let Body::AckNack(v) = Datagram::decode(&out).unwrap().body else {
        panic!("not an acknack")
    };
    assert_eq!(v.missing().collect::<Vec<_>>(), vec![8]);
    assert_eq!(v.credit(), Some(5));
    assert_eq!(v.known_through(), 23);
    // What an older node decodes: the same missing seqs, the same credit
    // (the bitmap's length is read as it always was).
    assert_eq!(out[field::BITMAP_LEN], 2);
    // A last byte that names a seq ends the statement at that seq (an older
    // reader's bitmap: the bits above its last missing seq say nothing).
    let b = AckNack {
        ack_through: 7,
        missing: vec![8, 21],
        credit: None,
        known_through: 23,
    };
    out.clear();
    b.encode(3, &mut out);
    let Body::AckNack(v) = Datagram::decode(&out).unwrap().body else {
        panic!("not an acknack")
    };
    assert_eq!(v.known_through(), 21);
    // Never past the bitmap's span.
    let c = AckNack {
        ack_through: 7,
        missing: vec![],
        credit: None,
        known_through: u64::MAX,
    };
    out.clear();
    c.encode(3, &mut out);
    let Body::AckNack(v) = Datagram::decode(&out).unwrap().body else {
        panic!("not an acknack")
    };
    assert_eq!(v.known_through(), 7 + MAX_MISSING_SPAN);
    assert!(v.missing().next().is_none());
}

#[test]
fn an_ack_bitmap_reaching_past_the_last_seq_is_malformed() {
    // Found by the fuzzer: ack_through 2^64 - 3 and one byte of bitmap,
    // naming nothing, spoke of seqs past u64::MAX (its statement then
    // saturated and did not survive encoding again).
    let crash = [
        0x54, 0x44, 0x1, 0x3, 0x54, 0x44, 0x3f, 0x1, 0x1, 0x0, 0x0, 0x20, 0xfd, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1, 0x0,
    ];
    assert!(Datagram::decode(&crash).is_err());
    // The same with the bitmap's byte naming the seq past u64::MAX.
    let mut named = crash;
    named[21] = 0b1000;
    assert!(Datagram::decode(&named).is_err());
    // An ack at 2^64 - 9 with one byte of bitmap ends on u64::MAX: read.
    let mut edge = crash;
    edge[12] = 0xf7;
    let Body::AckNack(v) = Datagram::decode(&edge).unwrap().body else {
        panic!("not an acknack")
    };
    assert_eq!(v.known_through(), u64::MAX);
}

#[test]
fn fragment_payload_budget_fills_a_datagram() {
    let tag = TagName::new("/robot/laser").unwrap();
    let n = max_fragment_payload(&tag, MAX_DATAGRAM);
    let payload = vec![1u8; n];
    let bytes = sample_data(0, 1, n as u32, &payload);
    assert_eq!(bytes.len(), MAX_DATAGRAM);
    assert!(Datagram::decode(&bytes).is_ok());
    assert_eq!(max_fragment_payload(&tag, 10), 0);
}
