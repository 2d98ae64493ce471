//! A tag's handed-over inbound streams (direct delivery) as another
//! process sends them, on arbitrary bytes: the decoder never panics, what
//! decodes re-encodes the same, and a session takes it over (its
//! reassembler checks every partial message again) without panicking.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use tagwire_session::{Config, Session};
use tagwire_wire::handover::{decode, encode};
use tagwire_wire::TagName;

fuzz_target!(|data: &[u8]| {
    let Ok(streams) = decode(data) else { return };
    assert_eq!(decode(&encode(&streams)).expect("re-encoded handover decodes"), streams);
    let tag = TagName::new("/fuzz").expect("a valid name");
    let mut s = Session::new(Config::default());
    let now = Instant::now();
    s.import_inbound(now, &tag, streams);
    while s.poll_transmit(now).is_some() {}
    let _ = s.export_inbound(&tag);
});
