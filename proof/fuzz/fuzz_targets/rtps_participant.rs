//! A whole DDS participant (what the gateway runs) fed an RTPS datagram from
//! anyone on the network, twice, with its timers run before, between and
//! long after (leases expire): it must never panic, and never deliver a
//! sample of a writer it did not match.
#![no_main]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tagwire_rtps::participant::{Event, Participant, ParticipantConfig};
use tagwire_rtps::qos::Qos;
use tagwire_rtps::{GuidPrefix, Locator};

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let here = Locator::udp_v4(Ipv4Addr::LOCALHOST, 7410);
    let mut p = Participant::new(
        ParticipantConfig {
            prefix: GuidPrefix([0x01, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            domain: 0,
            unicast: vec![here],
            multicast: Vec::new(),
            peers: vec![Locator::udp_v4(Ipv4Addr::LOCALHOST, 7412)],
            lease: Duration::from_secs(10),
            announce_every: Duration::from_secs(1),
            user_data: Vec::new(),
        },
        t0,
    );
    let mut matched = std::collections::HashSet::new();
    for keyed in [false, true] {
        let _ = p.add_writer(t0, "DDSPerfRDataKS", "KeyedSeq", keyed, Qos::default_for(true));
        let _ = p.add_reader(t0, "DDSPerfRDataKS", "KeyedSeq", keyed, Qos::default_for(false));
    }
    for (i, at) in [0u64, 1, 2, 30].into_iter().enumerate() {
        let now = t0 + Duration::from_secs(at);
        p.handle_timeout(now);
        if i < 2 {
            p.handle_datagram(now, data);
        }
        while p.poll_transmit().is_some() {}
        while let Some(e) = p.poll_event() {
            match e {
                Event::Matched { remote, .. } => {
                    matched.insert(remote);
                }
                Event::Sample { writer, .. } => {
                    assert!(matched.contains(&writer), "a sample of an unmatched writer")
                }
                _ => {}
            }
        }
    }
});
