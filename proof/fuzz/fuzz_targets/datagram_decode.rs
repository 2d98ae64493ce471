//! The delivery-port datagram decoder on arbitrary bytes: never panics,
//! whatever decodes re-encodes to something that decodes the same, and
//! decoding with a known tag (a receiver's last one) decodes alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_wire::datagram::{Body, Datagram};
use tagwire_wire::TagName;

fuzz_target!(|data: &[u8]| {
    let plain = Datagram::decode(data);
    let known = TagName::new("/fuzz/known").expect("a valid name");
    let with = Datagram::decode_known(data, Some(&known));
    assert_eq!(plain.is_ok(), with.is_ok());
    if let (Ok(a), Ok(b)) = (&plain, &with) {
        assert_eq!(a, b);
    }
    if let Ok(g) = plain {
        let mut out = Vec::new();
        g.encode(&mut out);
        let again = Datagram::decode(&out).expect("re-encoded datagram decodes");
        assert_eq!(again, g);
        if let Body::Data(d) = &g.body {
            // Same length (the frame header's reserved bits are not kept).
            assert_eq!(out.len(), data.len());
            assert!(d.payload.len() <= d.msg_len as usize);
        }
    }
});
