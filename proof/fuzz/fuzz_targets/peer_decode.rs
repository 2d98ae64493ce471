//! The daemon ⇄ daemon decoders on arbitrary bytes: never panic, and whatever
//! decodes re-encodes to the same bytes, which decode to an equal value.
//!
//! The first input byte picks what the rest is (modulo 3):
//! 0. one peer-message body (what follows the length prefix);
//! 1. one discovery beacon datagram;
//! 2. a TCP stream of length-prefixed peer messages, split as the daemon's
//!    frame reader does (stops at the first incomplete or refused frame).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwire_wire::peer::{Beacon, PeerMessage};

/// Checks one peer-message body; `true` if it decoded.
fn body(b: &[u8]) -> bool {
    let Ok(m) = PeerMessage::decode(b) else {
        return false;
    };
    let out = m.encode();
    let n = PeerMessage::frame_len([out[0], out[1], out[2], out[3]]).expect("own prefix accepted");
    assert_eq!(n, out.len() - 4);
    let again = PeerMessage::decode(&out[4..]).expect("re-encoded peer message decodes");
    assert_eq!(again, m);
    // The encoding is canonical: nothing decoded is dropped or normalised.
    assert_eq!(&out[4..], b);
    true
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick % 3 {
        0 => {
            body(rest);
        }
        1 => {
            if let Ok(b) = Beacon::decode(rest) {
                let out = b.encode();
                let again = Beacon::decode(&out).expect("re-encoded beacon decodes");
                assert_eq!(again, b);
                // Same bytes, except the reserved byte (not kept).
                assert_eq!(out.len(), rest.len());
                assert_eq!(out[..3], rest[..3]);
                assert_eq!(out[4..], rest[4..]);
            }
        }
        _ => {
            let mut s = rest;
            while let Some(prefix) = s.get(..4) {
                let Ok(n) = PeerMessage::frame_len([prefix[0], prefix[1], prefix[2], prefix[3]])
                else {
                    break;
                };
                let Some(b) = s.get(4..4 + n) else {
                    break;
                };
                if !body(b) {
                    break;
                }
                s = &s[4 + n..];
            }
        }
    }
});
