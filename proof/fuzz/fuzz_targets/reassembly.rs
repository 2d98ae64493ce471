//! The receive path's state machines on hostile datagrams: the input is a
//! sequence of `[delay ms: u8][len: u16 le][datagram]` records, fed to a
//! Reader, a Reassembler and (for AckNacks) a Writer. Nothing panics, the
//! Reader delivers strictly increasing seqs, every bound holds, and a batch's
//! messages are read without reading past its entries.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tagwire_reliable::{
    Arrival, Reader, ReaderConfig, Reassembler, ReassemblerConfig, Writer, WriterConfig,
};
use tagwire_wire::datagram::{BatchView, Body, Datagram};
use tagwire_wire::TagName;

const PARTIALS: usize = 4;
const BYTES: usize = 4096;
const BUFFERED: usize = 16;
const WINDOW: usize = 8;

fuzz_target!(|data: &[u8]| {
    let mut now = Instant::now();
    let mut reader = Reader::new(ReaderConfig {
        max_buffered: BUFFERED,
        ..ReaderConfig::default()
    });
    let mut reassembler = Reassembler::new(ReassemblerConfig {
        max_partials: PARTIALS,
        max_bytes: BYTES,
        completed_memory: 8,
    });
    let mut writer = Writer::new(WriterConfig {
        window: WINDOW,
        ..WriterConfig::default()
    });
    for i in 0..WINDOW as u8 {
        let _ = writer.send(now, |seq, out| out.extend_from_slice(&[i, seq as u8]));
    }
    let mut last_delivered = 0u64;
    let mut deliver = |body: &Body<'_>, reassembler: &mut Reassembler| {
        let seq = match body {
            Body::Data(d) => {
                if let Some(m) = reassembler.handle_fragment(d, &tag_of(d.tag())) {
                    assert_eq!(m.payload.len(), d.msg_len() as usize);
                }
                d.seq()
            }
            Body::Batch(b) => {
                check_batch(b);
                b.seq()
            }
            _ => panic!("reader buffered something that is neither data nor a batch"),
        };
        assert!(seq > last_delivered, "reader delivered out of order");
        last_delivered = seq;
        assert!(reassembler.partials() <= PARTIALS);
        assert!(reassembler.bytes_held() <= BYTES);
    };

    let mut rest = data;
    while rest.len() >= 3 {
        now += Duration::from_millis(u64::from(rest[0]));
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let (bytes, tail) = rest[3..].split_at(len);
        rest = tail;
        let Ok(g) = Datagram::decode(bytes) else {
            continue;
        };
        match &g.body {
            Body::Data(_) | Body::Batch(_) => {
                let Some((seq, _, _)) = g.data() else {
                    panic!("data without a seq");
                };
                // Best-effort path: fragments go straight into the reassembler.
                if let Body::Data(d) = &g.body {
                    let _ = reassembler.handle_fragment(d, &tag_of(d.tag()));
                } else if let Body::Batch(b) = &g.body {
                    check_batch(b);
                }
                if reader.handle_data(now, seq, bytes) == Arrival::Deliver {
                    deliver(&g.body, &mut reassembler);
                }
                while let Some(b) = reader.poll_event() {
                    let Ok(g) = Datagram::decode(&b) else {
                        panic!("reader buffered a datagram that no longer decodes");
                    };
                    deliver(&g.body, &mut reassembler);
                }
                assert!(reader.buffered() <= BUFFERED);
            }
            Body::Heartbeat(h) => reader.handle_heartbeat(now, h.first, h.last),
            Body::AckNack(a) => {
                let missing: Vec<u64> = a.missing().collect();
                writer.handle_acknack(now, a.ack_through(), a.known_through(), &missing);
            }
        }
        while reader.poll_transmit(now).is_some() {}
        while writer.poll_transmit(now).is_some() {}
        assert!(writer.occupancy() <= WINDOW);
        let _ = (reader.poll_timeout(), writer.poll_timeout());
    }
});

/// Every message a batch yields lies inside its entries, and there are at
/// most as many as the entries could hold.
fn check_batch(b: &BatchView<'_>) {
    let mut total = 0usize;
    let mut n = 0usize;
    for (_, payload) in b.messages() {
        total += payload.len();
        n += 1;
    }
    assert!(total <= b.entries().len());
    assert!(n <= b.entries().len() / tagwire_wire::frame::HEADER_LEN + 1);
}

/// A checked view's tag as a name (the view validated it).
fn tag_of(name: &str) -> TagName {
    TagName::new(name).expect("the view checked the name")
}
