//! The delivery-port datagram decoder on arbitrary bytes: never panics, and
//! whatever decodes re-encodes to something that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_wire::datagram::{Body, Datagram};

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = Datagram::decode(data) {
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
