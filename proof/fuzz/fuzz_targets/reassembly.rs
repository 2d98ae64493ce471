//! The receive path's state machines on hostile datagrams: the input is a
//! sequence of `[delay ms: u8][len: u16 le][datagram]` records, fed to a
//! Reader, a Reassembler and (for AckNacks) a Writer. Nothing panics, the
//! Reader delivers strictly increasing seqs, and every bound holds.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tagwire_reliable::{
    Arrival, Reader, ReaderConfig, Reassembler, ReassemblerConfig, Writer, WriterConfig,
};
use tagwire_wire::datagram::{Body, DataRef, Datagram};

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
    let mut deliver = |d: &DataRef<'_>, reassembler: &mut Reassembler| {
        assert!(d.seq > last_delivered, "reader delivered out of order");
        last_delivered = d.seq;
        if let Some(m) = reassembler.handle_fragment(d) {
            assert_eq!(m.payload.len(), d.msg_len as usize);
        }
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
            Body::Data(d) => {
                // Best-effort path: straight into the reassembler.
                let _ = reassembler.handle_fragment(d);
                if reader.handle_data(now, d.seq, bytes) == Arrival::Deliver {
                    deliver(d, &mut reassembler);
                }
                while let Some(b) = reader.poll_event() {
                    let Ok(Datagram {
                        body: Body::Data(d),
                        ..
                    }) = Datagram::decode(&b)
                    else {
                        panic!("reader buffered something that is not a data datagram");
                    };
                    deliver(&d, &mut reassembler);
                }
                assert!(reader.buffered() <= BUFFERED);
            }
            Body::Heartbeat(h) => reader.handle_heartbeat(now, h.first, h.last),
            Body::AckNack(a) => writer.handle_acknack(now, a.ack_through, &a.missing),
        }
        while reader.poll_transmit(now).is_some() {}
        while writer.poll_transmit(now).is_some() {}
        assert!(writer.occupancy() <= WINDOW);
        let _ = (reader.poll_timeout(), writer.poll_timeout());
    }
});
