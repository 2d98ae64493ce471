//! The daemon's (and the client's) control-message decoder on arbitrary bytes:
//! never panics, and whatever decodes re-encodes to something that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_wire::control::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode(data) {
        let again = Message::decode(&m.encode()).expect("re-encoded message decodes");
        assert_eq!(again, m);
    }
});
