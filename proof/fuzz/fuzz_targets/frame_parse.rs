//! The data frame header and blob reference parsers on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_wire::frame::{BlobRef, FrameHeader};

fuzz_target!(|data: &[u8]| {
    if let Ok((h, rest)) = FrameHeader::parse(data) {
        assert_eq!(rest.len(), data.len() - tagwire_wire::frame::HEADER_LEN);
        let mut out = vec![0u8; tagwire_wire::frame::HEADER_LEN];
        h.emit(&mut out).expect("header fits");
        let (back, _) = FrameHeader::parse(&out).expect("emitted header parses");
        assert_eq!(back, h);
    }
    let _ = BlobRef::parse(data);
});
