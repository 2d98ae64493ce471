//! The keyed-message extension block (`tagwire_wire::instance::Ext`) on
//! arbitrary bytes: never panics, never claims more bytes than it was
//! given, and whatever parses re-encodes to the bytes it took.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_wire::instance::Ext;

fuzz_target!(|data: &[u8]| {
    if let Ok((e, n)) = Ext::parse(data) {
        assert!(n <= data.len());
        assert_eq!(n, e.len());
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(&out[..], &data[..n]);
    }
});
