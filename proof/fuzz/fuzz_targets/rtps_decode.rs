//! An RTPS datagram from anyone on the network (what a DDS participant, or
//! an attacker, sends to the gateway): parsed, its parameter lists read
//! (discovery payloads and inline QoS), discovery data read and written
//! back the same, and what parses built again and parsed to the same.
//! Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_rtps::plist::{pid, ParameterList};
use tagwire_rtps::discovery::{EndpointData, ParticipantData};
use tagwire_rtps::{Message, MessageBuilder, Submessage};

fn read_list(l: &ParameterList<'_>) {
    let _ = l.iter().count();
    let _ = l.string(pid::TOPIC_NAME);
    let _ = l.u32(pid::BUILTIN_ENDPOINT_SET);
    let _ = l.guid(pid::PARTICIPANT_GUID);
    let _ = l.locators(pid::METATRAFFIC_UNICAST_LOCATOR);
}

/// A participant's discovery, fed the same datagram.
fn spdp(data: &[u8]) {
    use tagwire_rtps::discovery::BUILTIN_ENDPOINTS;
    use tagwire_rtps::spdp::{Spdp, SpdpConfig};
    let local = ParticipantData {
        prefix: tagwire_rtps::GuidPrefix([1; 12]),
        version: (2, 1),
        vendor: [0x01, 0x99],
        builtin_endpoints: BUILTIN_ENDPOINTS,
        lease: tagwire_rtps::qos::Duration { seconds: 10, fraction: 0 },
        domain: Some(0),
        metatraffic_unicast: Vec::new(),
        metatraffic_multicast: Vec::new(),
        default_unicast: Vec::new(),
        default_multicast: Vec::new(),
        user_data: Vec::new(),
    };
    let now = std::time::Instant::now();
    let mut s = Spdp::new(SpdpConfig { local, peers: Vec::new(), announce_every: std::time::Duration::from_secs(1) }, now);
    let _ = s.handle_datagram(now, data);
    s.handle_timeout(now + std::time::Duration::from_secs(200_000));
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
}

fuzz_target!(|data: &[u8]| {
    spdp(data);
    let Ok(m) = Message::parse(data) else { return };
    let mut b = MessageBuilder::new(m.header);
    for s in &m.submessages {
        match s {
            Submessage::Data(d) => {
                if let Some(q) = &d.inline_qos {
                    read_list(q);
                }
                if let Some(Ok(l)) = d.payload.map(ParameterList::from_payload) {
                    read_list(&l);
                }
                if let Some(p) = d.payload {
                    // Discovery data, read and written back the same.
                    if let Ok(pd) = ParticipantData::from_payload(p, m.header.prefix) {
                        let again = ParticipantData::from_payload(&pd.to_payload(), m.header.prefix);
                        assert_eq!(again.as_ref(), Ok(&pd));
                    }
                    for writer in [true, false] {
                        if let Ok(e) = EndpointData::from_payload(p, m.header.prefix, writer) {
                            let again = EndpointData::from_payload(&e.to_payload(), m.header.prefix, writer);
                            assert_eq!(again.as_ref(), Ok(&e));
                            let _ = EndpointData::matches(&e, &e);
                        }
                    }
                }
            }
            Submessage::DataFrag(d) => {
                if let Some(q) = &d.inline_qos {
                    read_list(q);
                }
            }
            _ => {}
        }
        if b.push(s).is_err() {
            return;
        }
    }
    let again = b.finish();
    let m2 = Message::parse(&again).expect("what the builder writes parses");
    assert_eq!(m2.submessages.len(), m.submessages.len());
});
