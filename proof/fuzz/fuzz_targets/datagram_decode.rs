//! The delivery-port datagram views on arbitrary bytes: never panic, what
//! is accepted reads the same as its representation built again, and
//! `peek_tag` names the tag the views name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_wire::datagram::{peek_tag, BatchRepr, Body, DataRepr, Datagram};
use tagwire_wire::TagName;

fuzz_target!(|data: &[u8]| {
    let peeked = peek_tag(data);
    let Ok(g) = Datagram::decode(data) else {
        return;
    };
    let mut out = Vec::new();
    match g.body {
        Body::Data(d) => {
            assert_eq!(peeked.ok().flatten(), Some(d.tag()));
            assert!(d.payload().len() <= d.msg_len() as usize);
            assert_eq!(d.first_seq() + u64::from(d.frag()), d.seq());
            let tag = TagName::new(d.tag()).expect("the view checked the name");
            DataRepr {
                seq: d.seq(),
                flags: d.flags(),
                frag: d.frag(),
                frags: d.frags(),
                msg_len: d.msg_len(),
                header: d.header(),
                tag: &tag,
                payload: d.payload(),
            }
            .encode(g.stream, &mut out);
            // Same length (the frame header's reserved bits are not kept).
            assert_eq!(out.len(), data.len());
            let Ok(Datagram {
                body: Body::Data(again),
                ..
            }) = Datagram::decode(&out)
            else {
                panic!("built again, it is not data");
            };
            assert_eq!(
                (again.seq(), again.header(), again.payload()),
                (d.seq(), d.header(), d.payload())
            );
        }
        Body::Batch(b) => {
            assert_eq!(peeked.ok().flatten(), Some(b.tag()));
            let tag = TagName::new(b.tag()).expect("the view checked the name");
            BatchRepr {
                seq: b.seq(),
                flags: b.flags(),
                count: b.count(),
                tag: &tag,
                entries: b.entries(),
            }
            .encode(g.stream, &mut out);
            assert_eq!(out, data);
            assert_eq!(b.messages().count(), usize::from(b.count()));
        }
        Body::Heartbeat(h) => {
            h.encode(g.stream, &mut out);
            assert_eq!(out, data);
        }
        Body::AckNack(a) => {
            let owned = a.to_acknack();
            owned.encode(g.stream, &mut out);
            let Ok(Datagram {
                body: Body::AckNack(again),
                ..
            }) = Datagram::decode(&out)
            else {
                panic!("built again, it is not an acknowledgement");
            };
            assert_eq!(again.to_acknack(), owned);
        }
    }
});
