use super::*;
use proptest::prelude::*;

fn hello(last: u8, epoch: u64) -> LinkHello {
    LinkHello {
        node: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)),
        epoch,
        floor: 100 + u64::from(last),
    }
}

struct End {
    peer: LinkHello,
    sender: LinkSender,
    receiver: LinkReceiver,
}

/// Runs a handshake between two keys; the frames the initiator sent too.
fn connect(ki: &DomainKey, kr: &DomainKey) -> Result<(End, End, Vec<Vec<u8>>), LinkError> {
    connect_any(ki, std::slice::from_ref(kr))
}

/// [`connect`] to a responder that accepts any of `kr`.
fn connect_any(ki: &DomainKey, kr: &[DomainKey]) -> Result<(End, End, Vec<Vec<u8>>), LinkError> {
    let (mut i, first) = Handshake::initiator(ki, hello(1, 11))?;
    let mut r = Handshake::responder_any(kr, hello(2, 22))?;
    let mut sent = vec![first.clone()];
    let mut d = Deframer::default();
    d.push(&first);
    let Progress::Send(answer) = r.handle_frame(&d.next_frame().ok_or(LinkError::Unexpected)?)?
    else {
        return Err(LinkError::Unexpected);
    };
    d.push(&answer);
    let Progress::Done {
        send: Some(last),
        peer: pi,
        sender: si,
        receiver: ri,
    } = i.handle_frame(&d.next_frame().ok_or(LinkError::Unexpected)?)?
    else {
        return Err(LinkError::Unexpected);
    };
    sent.push(last.clone());
    d.push(&last);
    let Progress::Done {
        send: None,
        peer: pr,
        sender: sr,
        receiver: rr,
    } = r.handle_frame(&d.next_frame().ok_or(LinkError::Unexpected)?)?
    else {
        return Err(LinkError::Unexpected);
    };
    Ok((
        End {
            peer: pi,
            sender: si,
            receiver: ri,
        },
        End {
            peer: pr,
            sender: sr,
            receiver: rr,
        },
        sent,
    ))
}

fn key(b: u8) -> DomainKey {
    DomainKey::from_bytes([b; 32])
}

#[test]
fn both_ends_learn_each_others_hello_and_exchange_messages() {
    let (mut i, mut r, _) = connect(&key(1), &key(1)).unwrap();
    assert_eq!(i.peer, hello(2, 22));
    assert_eq!(r.peer, hello(1, 11));
    let big = vec![7u8; MAX_PLAIN * 2 + 5];
    let mut wire = Vec::new();
    i.sender.seal(b"first", &mut wire);
    i.sender.seal(&big, &mut wire);
    // Fed a byte at a time, as a stream may split it.
    let mut got = Vec::new();
    for b in &wire {
        r.receiver.push(std::slice::from_ref(b));
        while let Some(p) = r.receiver.next_plain().unwrap() {
            got.extend(p);
        }
    }
    assert_eq!(got, [&b"first"[..], &big].concat());
    let mut back = Vec::new();
    r.sender.seal(b"ok", &mut back);
    i.receiver.push(&back);
    assert_eq!(i.receiver.next_plain().unwrap().unwrap(), b"ok");
}

#[test]
fn during_a_key_roll_a_responder_takes_either_key_and_no_other() {
    let roll = [key(1), key(2).with_generation(1)];
    for k in &roll {
        let (mut i, mut r, _) = connect_any(k, &roll).unwrap();
        let mut wire = Vec::new();
        i.sender.seal(b"hi", &mut wire);
        r.receiver.push(&wire);
        assert_eq!(r.receiver.next_plain().unwrap().unwrap(), b"hi");
    }
    assert!(matches!(
        connect_any(&key(3), &roll),
        Err(LinkError::Unauthenticated(_))
    ));
}

#[test]
fn a_peer_without_the_key_never_completes_the_handshake() {
    assert!(matches!(
        connect(&key(1), &key(2)),
        Err(LinkError::Unauthenticated(_))
    ));
}

#[test]
fn a_recorded_initiator_cannot_be_replayed_to_a_responder() {
    let (_, _, recorded) = connect(&key(1), &key(1)).unwrap();
    // The attacker replays the initiator's frames to a fresh responder.
    let mut r = Handshake::responder(&key(1), hello(2, 23)).unwrap();
    let mut d = Deframer::default();
    d.push(&recorded[0]);
    assert!(matches!(
        r.handle_frame(&d.next_frame().unwrap()),
        Ok(Progress::Send(_))
    ));
    d.push(&recorded[1]);
    assert!(matches!(
        r.handle_frame(&d.next_frame().unwrap()),
        Err(LinkError::Unauthenticated(_))
    ));
}

#[test]
fn repeated_dropped_or_changed_transport_frames_are_refused() {
    let (mut i, mut r, _) = connect(&key(1), &key(1)).unwrap();
    let mut one = Vec::new();
    i.sender.seal(b"one", &mut one);
    let mut two = Vec::new();
    i.sender.seal(b"two", &mut two);
    // Dropped: "two" first fails (its nonce is not the next).
    r.receiver.push(&two);
    assert!(r.receiver.next_plain().is_err());

    let (mut i, mut r, _) = connect(&key(1), &key(1)).unwrap();
    let mut one = Vec::new();
    i.sender.seal(b"one", &mut one);
    r.receiver.push(&one);
    assert_eq!(r.receiver.next_plain().unwrap().unwrap(), b"one");
    r.receiver.push(&one);
    assert!(r.receiver.next_plain().is_err(), "replayed");

    let (mut i, mut r, _) = connect(&key(1), &key(1)).unwrap();
    let mut one = Vec::new();
    i.sender.seal(b"one", &mut one);
    let last = one.len() - 1;
    one[last] ^= 1;
    r.receiver.push(&one);
    assert!(r.receiver.next_plain().is_err(), "changed");
}

#[test]
fn hellos_round_trip_and_bad_ones_are_refused() {
    let v6 = LinkHello {
        node: "fd00::1".parse().unwrap(),
        epoch: u64::MAX,
        floor: 0,
    };
    for h in [hello(9, 1), v6] {
        assert_eq!(LinkHello::decode(&h.encode()), Ok(h));
    }
    assert_eq!(LinkHello::decode(&[]), Err(LinkError::BadHello));
    let mut long = hello(1, 1).encode();
    long.push(0);
    assert_eq!(LinkHello::decode(&long), Err(LinkError::BadHello));
}

proptest! {
    #[test]
    fn arbitrary_first_frames_never_panic_a_responder(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut r = Handshake::responder(&key(1), hello(2, 1)).unwrap();
        prop_assert!(r.handle_frame(&body).is_err());
    }
}
