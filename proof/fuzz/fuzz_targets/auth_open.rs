//! The authenticated openings on arbitrary bytes (tagwire-auth): a sealed
//! datagram (as a daemon's, and as a direct receiver's and its sender's
//! for a holding), a control link's first handshake frame, and transport
//! frames after a real handshake, also with both keys of a key roll.
//! None panics and none accepts what was not
//! sealed with the key; whatever the fuzzer seals opens to itself once, and
//! any changed byte of it is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr};
use tagwire_auth::{
    Accepted, Deframer, DomainKey, Handshake, Holder, LinkHello, Opener, Progress, Sealer, SealedHeader,
    ToHolder,
};

const NODE: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));

fn hello(epoch: u64) -> LinkHello {
    LinkHello {
        node: NODE,
        epoch,
        floor: 1,
    }
}

fuzz_target!(|data: &[u8]| {
    let key = DomainKey::from_bytes([9; 32]);
    let next = DomainKey::from_bytes([10; 32]).with_generation(1);
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        // Arbitrary bytes as a peer's datagram: never opened.
        0 => {
            let _ = SealedHeader::peek(rest);
            let mut rx = Opener::new(&key, &hello(7));
            let mut b = rest.to_vec();
            assert!(rx.open(&mut b).is_err(), "forged datagram opened");
            let mut rolling = Opener::accepting(&Accepted::two(key.clone(), next.clone()), &hello(7));
            let mut b = rest.to_vec();
            assert!(
                rolling.open_any(&mut b, |_| Some("/t".into())).is_err(),
                "forged datagram opened during a roll"
            );
            // As a direct receiver's data, and as its acknowledgement.
            let mut holder = Holder::new(key.holding_key(NODE, 3, 4, "/t"), "/t", false);
            let mut b = rest.to_vec();
            assert!(holder.open(NODE, &mut b).is_err(), "forged direct data opened");
            let mut to = ToHolder::new(&key, NODE, 3, 4, "/t", NODE, 7);
            let mut b = rest.to_vec();
            assert!(to.open_ack(&mut b).is_err(), "forged acknowledgement opened");
        }
        // Sealed for a holding: opens once at the holder; a flipped byte
        // never; the sender never takes it as an acknowledgement.
        1 if mode & 0x40 != 0 => {
            let mut holder = Holder::new(key.holding_key(NODE, 3, 4, "/t"), "/t", false);
            let mut to = ToHolder::new(&key, NODE, 3, 4, "/t", NODE, 7);
            let mut sealed = Vec::new();
            to.seal_into(5, mode & 0x10 != 0, rest, &mut sealed);
            assert_eq!(holder.open(NODE, &mut sealed.clone()).ok(), Some(rest));
            assert!(holder.open(NODE, &mut sealed.clone()).is_err(), "replay opened");
            assert!(to.open_ack(&mut sealed.clone()).is_err(), "data taken as an acknowledgement");
            let at = usize::from(mode) % sealed.len();
            sealed[at] ^= 0x5a;
            let mut fresh = Holder::new(key.holding_key(NODE, 3, 4, "/t"), "/t", false);
            assert!(fresh.open(NODE, &mut sealed).is_err(), "changed datagram opened");
        }
        // Sealed with a tag key: opens once, only as that tag.
        1 if mode & 0x20 != 0 => {
            let sealer = Sealer::new(&key, NODE, 7, false);
            let mut rx = Opener::new(&key, &sealer.hello());
            let tag = key.tag_key(NODE, 7, "/t");
            let id = tagwire_auth::tag_id("/t");
            let mut sealed = Vec::new();
            tag.seal_tagged_into(sealer.reserve(1), mode & 0x10 != 0, id, rest, &mut sealed);
            let name = |i: u64| (i == id).then(|| "/t".to_owned());
            let mut copy = sealed.clone();
            assert_eq!(rx.open_any(&mut copy, name).ok(), Some((rest, Some(id))));
            assert!(rx.open_any(&mut sealed.clone(), name).is_err(), "replay opened");
            let at = usize::from(mode) % sealed.len();
            sealed[at] ^= 0x5a;
            let mut fresh = Opener::new(&key, &sealer.hello());
            assert!(fresh.open_any(&mut sealed, name).is_err(), "changed datagram opened");
        }
        // Sealed bytes open to themselves once; a flipped byte never opens.
        1 => {
            let sealer = Sealer::new(&key, NODE, 7, mode & 0x10 != 0);
            let mut rx = Opener::new(&key, &sealer.hello());
            let mut sealed = Vec::new();
            sealer.seal_into(rest, &mut sealed);
            let mut copy = sealed.clone();
            assert_eq!(rx.open(&mut copy).ok(), Some(rest));
            assert!(rx.open(&mut sealed.clone()).is_err(), "replay opened");
            let at = usize::from(mode) % sealed.len();
            sealed[at] ^= 0x5a;
            let mut fresh = Opener::new(&key, &sealer.hello());
            assert!(fresh.open(&mut sealed).is_err(), "changed datagram opened");
        }
        // Arbitrary bytes as the first handshake frame: refused.
        2 => {
            let keys = [key.clone(), next.clone()];
            let mut r = Handshake::responder_any(&keys, hello(1)).expect("noise setup");
            let mut d = Deframer::default();
            d.push(rest);
            while let Some(f) = d.next_frame() {
                assert!(r.handle_frame(&f).is_err(), "forged handshake accepted");
            }
        }
        // Arbitrary bytes on an established link: never a plaintext.
        _ => {
            let (mut i, first) = Handshake::initiator(&key, hello(1)).expect("noise setup");
            let mut r = Handshake::responder(&key, hello(2)).expect("noise setup");
            let mut d = Deframer::default();
            d.push(&first);
            let Some(f) = d.next_frame() else { return };
            let Ok(Progress::Send(answer)) = r.handle_frame(&f) else {
                panic!("genuine handshake refused")
            };
            d.push(&answer);
            let Some(f) = d.next_frame() else { return };
            let Ok(Progress::Done { send: Some(last), .. }) = i.handle_frame(&f) else {
                panic!("genuine answer refused")
            };
            d.push(&last);
            let Some(f) = d.next_frame() else { return };
            let Ok(Progress::Done { mut receiver, .. }) = r.handle_frame(&f) else {
                panic!("genuine hello refused")
            };
            receiver.push(rest);
            assert!(!matches!(receiver.next_plain(), Ok(Some(_))), "forged frame opened");
        }
    }
});
