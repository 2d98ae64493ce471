//! One sending node cannot take more than its share of a receiving
//! session: a bounded number of streams, and a bounded number of bytes in
//! partial messages across all of them. Other nodes are not affected, and
//! messages already begun always finish.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Instant;

use tagwire_session::{Config, Event, ReceiveEvent, Session};
use tagwire_wire::datagram::{DataRepr, FLAG_RELIABLE};
use tagwire_wire::frame::FrameHeader;
use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum, TagName};

fn tag() -> TagName {
    TagName::new("/bounds").unwrap()
}

fn header(seq: u64) -> FrameHeader {
    FrameHeader {
        flags: 0,
        sender: SenderInfo {
            pid: Pid(1),
            node: NodeAddr::LOCALHOST,
        },
        stream: 0,
        seq: SeqNum(seq),
        timestamp_ns: 0,
    }
}

/// Fragment `frag` of `frags` of a `msg_len`-byte message whose first
/// fragment is datagram `first` of `stream` (best effort: no reader order
/// in the way).
fn fragment(
    stream: u64,
    first: u64,
    frag: u16,
    frags: u16,
    msg_len: u32,
    reliable: bool,
) -> Vec<u8> {
    let piece = msg_len as usize / usize::from(frags);
    let len = if frag + 1 == frags {
        msg_len as usize - piece * (usize::from(frags) - 1)
    } else {
        piece
    };
    let payload = vec![frag as u8; len];
    let mut out = Vec::new();
    DataRepr {
        seq: first + u64::from(frag),
        flags: if reliable { FLAG_RELIABLE } else { 0 },
        frag,
        frags,
        msg_len,
        header: header(first),
        tag: &tag(),
        payload: &payload,
    }
    .encode(stream, &mut out);
    out
}

/// Two sending nodes' delivery ports.
fn nodes() -> (SocketAddr, SocketAddr) {
    (
        "10.0.0.1:7402".parse().unwrap(),
        "10.0.0.2:7402".parse().unwrap(),
    )
}

fn bounded(events: &mut Session) -> usize {
    std::iter::from_fn(|| events.poll_event())
        .filter(|e| matches!(e, Event::Receive(ReceiveEvent::PeerBound { .. })))
        .count()
}

fn delivered(s: &mut Session) -> Vec<usize> {
    std::iter::from_fn(|| s.poll_deliver())
        .map(|d| d.payload.len())
        .collect()
}

#[test]
fn a_node_with_too_many_streams_gets_no_more_and_another_node_still_does() {
    let mut s = Session::new(Config {
        max_peer_streams: 4,
        ..Config::default()
    });
    let now = Instant::now();
    let (a, b) = nodes();
    for stream in 1..=6u64 {
        s.handle_datagram(now, a, &fragment(stream * 2 + 1, 1, 0, 1, 10, false));
    }
    assert_eq!(delivered(&mut s).len(), 4);
    assert_eq!(bounded(&mut s), 2);
    // A stream it has goes on; another node's new one is taken.
    s.handle_datagram(now, a, &fragment(3, 2, 0, 1, 10, false));
    s.handle_datagram(now, b, &fragment(99, 1, 0, 1, 10, false));
    assert_eq!(delivered(&mut s).len(), 2);
    assert_eq!(bounded(&mut s), 0);
}

#[test]
fn partial_messages_of_one_node_stay_within_its_bytes_and_those_begun_finish() {
    let mut s = Session::new(Config {
        max_peer_reassembly: 1000,
        ..Config::default()
    });
    let now = Instant::now();
    let (a, b) = nodes();
    // Two 400-byte messages begun on two streams: 800 reserved.
    s.handle_datagram(now, a, &fragment(1, 1, 0, 2, 400, false));
    s.handle_datagram(now, a, &fragment(3, 1, 0, 2, 400, false));
    assert_eq!(bounded(&mut s), 0);
    // A third would pass 1000 bytes: refused, reliable or not.
    s.handle_datagram(now, a, &fragment(5, 1, 0, 2, 400, false));
    s.handle_datagram(now, a, &fragment(7, 1, 0, 2, 400, true));
    assert_eq!(bounded(&mut s), 2);
    // Another node is not affected.
    s.handle_datagram(now, b, &fragment(1, 1, 0, 2, 900, false));
    assert_eq!(bounded(&mut s), 0);
    // The messages begun finish, which frees their bytes.
    s.handle_datagram(now, a, &fragment(1, 1, 1, 2, 400, false));
    s.handle_datagram(now, a, &fragment(3, 1, 1, 2, 400, false));
    assert_eq!(delivered(&mut s), [400, 400]);
    // Now the refused reliable one, sent again, is taken and finishes.
    s.handle_datagram(now, a, &fragment(7, 1, 0, 2, 400, true));
    s.handle_datagram(now, a, &fragment(7, 1, 1, 2, 400, true));
    assert_eq!(bounded(&mut s), 0);
    assert_eq!(delivered(&mut s), [400]);
}
