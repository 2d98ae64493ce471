//! Micro-benchmarks of the codecs: the data frame header (on every message)
//! and control messages (rare, but a large tag listing must stay cheap).
#![allow(missing_docs, clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tagwire_wire::control::{Message, Request, Response, TagSummary};
use tagwire_wire::frame::{FrameHeader, HEADER_LEN};
use tagwire_wire::{Domain, Member, NodeAddr, Pid, SenderInfo, SeqNum, TagId, TagName};

fn frame(c: &mut Criterion) {
    let h = FrameHeader {
        flags: 0,
        sender: SenderInfo {
            pid: Pid(4242),
            node: NodeAddr::LOCALHOST,
        },
        stream: 0,
        seq: SeqNum(7),
        timestamp_ns: 1_700_000_000_000_000_000,
    };
    let mut buf = [0u8; HEADER_LEN + 256];
    c.bench_function("frame_header_emit", |b| {
        b.iter(|| black_box(&h).emit(black_box(&mut buf)))
    });
    h.emit(&mut buf).expect("fits");
    c.bench_function("frame_header_parse", |b| {
        b.iter(|| FrameHeader::parse(black_box(&buf)).expect("parses"))
    });
}

fn control(c: &mut Criterion) {
    let sub = Message::Request {
        id: 9,
        body: Request::Subscribe {
            name: TagName::new("/robot/laser").expect("name"),
            depth: 64,
            qos: tagwire_wire::ChannelQos::default(),
            lossless: false,
        },
    };
    let bytes = sub.encode();
    c.bench_function("control_subscribe_encode", |b| {
        b.iter(|| black_box(&sub).encode())
    });
    c.bench_function("control_subscribe_decode", |b| {
        b.iter(|| Message::decode(black_box(&bytes)).expect("decodes"))
    });
    let member = Member {
        who: SenderInfo {
            pid: Pid(1),
            node: NodeAddr::LOCALHOST,
        },
        since_unix_ns: 1,
    };
    let tags: Vec<TagSummary> = (0..100)
        .map(|i| TagSummary {
            tag: TagId(i),
            name: TagName::new(&format!("/many/{i}")).expect("name"),
            domain: Domain::Global,
            senders: vec![member],
            receivers: vec![member; 10],
        })
        .collect();
    let listing = Message::Response {
        id: 1,
        body: Response::Tags { version: 1, tags },
    };
    let bytes = listing.encode();
    c.bench_function("control_listing_100_tags_decode", |b| {
        b.iter(|| Message::decode(black_box(&bytes)).expect("decodes"))
    });
}

criterion_group!(benches, frame, control);
criterion_main!(benches);
