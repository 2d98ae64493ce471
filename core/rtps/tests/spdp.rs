//! SPDP: two participants in memory (virtual time) find each other, keep
//! and lose each other (against Cyclone DDS: `cyclone_live.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use tagwire_rtps::discovery::{ParticipantData, BUILTIN_ENDPOINTS};
use tagwire_rtps::spdp::{Spdp, SpdpConfig, SpdpEvent};
use tagwire_rtps::{GuidPrefix, Locator, Message, Submessage};

fn local(n: u8, port: u16, lease_s: i32) -> ParticipantData {
    ParticipantData {
        prefix: GuidPrefix([0x01, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, n]),
        version: (2, 1),
        vendor: [0x01, 0x99],
        builtin_endpoints: BUILTIN_ENDPOINTS,
        lease: tagwire_rtps::qos::Duration {
            seconds: lease_s,
            fraction: 0,
        },
        domain: Some(0),
        metatraffic_unicast: vec![Locator::udp_v4(Ipv4Addr::LOCALHOST, port)],
        metatraffic_multicast: Vec::new(),
        default_unicast: vec![Locator::udp_v4(Ipv4Addr::LOCALHOST, port + 1)],
        default_multicast: Vec::new(),
        user_data: vec![n],
    }
}

/// Delivers every pending transmit of `from` addressed to `to_port` into `to`.
fn deliver(from: &mut Spdp, to: &mut Spdp, to_port: u32, now: Instant) -> usize {
    let mut n = 0;
    while let Some(t) = from.poll_transmit() {
        if t.to.port == to_port {
            to.handle_datagram(now, &t.bytes).unwrap();
            n += 1;
        }
    }
    n
}

fn events(s: &mut Spdp) -> Vec<SpdpEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn two_participants_find_each_other_on_the_first_announcement_then_lose_each_other() {
    let t0 = Instant::now();
    let (pa, pb) = (local(1, 7500, 10), local(2, 7502, 10));
    let cfg = |me: &ParticipantData, peer: u16| SpdpConfig {
        local: me.clone(),
        peers: vec![Locator::udp_v4(Ipv4Addr::LOCALHOST, peer)],
        announce_every: Duration::from_secs(3),
    };
    let mut a = Spdp::new(cfg(&pa, 7502), t0);
    let mut b = Spdp::new(cfg(&pb, 7500), t0);
    // A announces; B learns of A and answers at once, addressed to A.
    a.handle_timeout(t0);
    assert_eq!(deliver(&mut a, &mut b, 7502, t0), 1);
    assert_eq!(events(&mut b), vec![SpdpEvent::Discovered(pa.clone())]);
    let answer = b.poll_transmit().expect("B answers A directly");
    assert_eq!(answer.to.port, 7500);
    let m = Message::parse(&answer.bytes).unwrap();
    assert_eq!(m.submessages[0], Submessage::InfoDst(pa.prefix));
    a.handle_datagram(t0, &answer.bytes).unwrap();
    assert_eq!(events(&mut a), vec![SpdpEvent::Discovered(pb.clone())]);
    // Resends renew the lease and change nothing.
    for s in 1..=6u64 {
        let now = t0 + Duration::from_secs(3 * s);
        a.handle_timeout(now);
        b.handle_timeout(now);
        deliver(&mut a, &mut b, 7502, now);
        deliver(&mut b, &mut a, 7500, now);
    }
    assert!(events(&mut a).is_empty() && events(&mut b).is_empty());
    assert_eq!((a.remotes(), b.remotes()), (1, 1));
    // B stops announcing: A loses it when its 10 s lease runs out.
    let quiet = t0 + Duration::from_secs(18);
    let mut now = quiet;
    while events(&mut a).is_empty() {
        now = a
            .poll_timeout()
            .unwrap()
            .max(now + Duration::from_millis(1));
        a.handle_timeout(now);
        while a.poll_transmit().is_some() {}
        if let Some(e) = a.poll_event() {
            assert_eq!(e, SpdpEvent::Lost(pb.prefix));
            break;
        }
        assert!(now < quiet + Duration::from_secs(11), "never lost");
    }
    assert!(
        now >= quiet + Duration::from_secs(9),
        "lost after {:?}",
        now - quiet
    );
    assert_eq!(a.remotes(), 0);
    // A leaves: a B that knows it is told at once.
    let mut b = Spdp::new(cfg(&pb, 7500), now);
    a.handle_timeout(now + Duration::from_secs(3));
    deliver(&mut a, &mut b, 7502, now);
    assert_eq!(events(&mut b), vec![SpdpEvent::Discovered(pa.clone())]);
    while b.poll_transmit().is_some() {}
    a.leave();
    assert!(deliver(&mut a, &mut b, 7502, now) >= 1);
    assert_eq!(events(&mut b), vec![SpdpEvent::Lost(pa.prefix)]);
    assert_eq!(b.remotes(), 0);
}

#[test]
fn announcements_for_others_another_domain_or_our_own_are_ignored() {
    let t0 = Instant::now();
    let (pa, pb, pc) = (local(1, 7600, 10), local(2, 7602, 10), local(3, 7604, 10));
    let mk = |me: &ParticipantData| {
        Spdp::new(
            SpdpConfig {
                local: me.clone(),
                peers: vec![Locator::udp_v4(Ipv4Addr::LOCALHOST, 7602)],
                announce_every: Duration::from_secs(3),
            },
            t0,
        )
    };
    let (mut a, mut b) = (mk(&pa), mk(&pb));
    // C answers A: addressed to A, so B ignores it.
    let mut c = mk(&pc);
    c.handle_timeout(t0);
    let mut to_b = c.poll_transmit().unwrap();
    a.handle_timeout(t0);
    let from_a = a.poll_transmit().unwrap();
    c.handle_datagram(t0, &from_a.bytes).unwrap();
    let directed = std::iter::from_fn(|| c.poll_transmit())
        .find(|t| t.to.port == 7600)
        .expect("C answers A");
    b.handle_datagram(t0, &directed.bytes).unwrap();
    assert_eq!(b.remotes(), 0, "an answer addressed to A is not for B");
    // Our own announcement looped back: ignored.
    b.handle_timeout(t0);
    let own = b.poll_transmit().unwrap();
    b.handle_datagram(t0, &own.bytes).unwrap();
    assert_eq!(b.remotes(), 0);
    // Another domain's participant: ignored.
    let mut other = local(4, 7606, 10);
    other.domain = Some(7);
    let mut d = mk(&other);
    d.handle_timeout(t0);
    b.handle_datagram(t0, &d.poll_transmit().unwrap().bytes)
        .unwrap();
    assert_eq!(b.remotes(), 0);
    // C's own announcement is for everyone.
    to_b.to.port = 7602;
    b.handle_datagram(t0, &to_b.bytes).unwrap();
    assert_eq!(b.remotes(), 1);
    // Garbage is an error, not a panic, and changes nothing.
    assert!(b.handle_datagram(t0, b"RTPS\x02\x01").is_err());
    assert_eq!(b.remotes(), 1);
}
