//! Where a reliable volatile reader starts with a writer it just matched:
//! a tagwire writer names the reader's own first sample in the heartbeats
//! it addresses to it, so a sample lost before the first one that reached
//! the reader is asked for, not skipped; another vendor's writer does not,
//! and the reader starts after that writer's first heartbeat, as Cyclone
//! DDS's readers do. The reader holds what arrives meanwhile, asks where
//! it starts (a pre-emptive ACKNACK, repeated), and ignores heartbeats and
//! GAPs addressed to another reader.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use tagwire_rtps::reliable::{Reader, ReaderStart, Writer};
use tagwire_rtps::{
    EntityId, Guid, GuidPrefix, Header, Locator, Message, MessageBuilder, SequenceNumber,
    SequenceNumberSet, Submessage, Transmit,
};

const TAGWIRE: [u8; 2] = [0x01, 0x99];
/// Another vendor (Eclipse Cyclone DDS's id).
const CYCLONE: [u8; 2] = [0x01, 0x10];
const R_ENTITY: EntityId = EntityId([0, 0, 0x09, 0x07]);

fn header(n: u8, vendor: [u8; 2]) -> Header {
    Header {
        version: (2, 1),
        vendor,
        prefix: GuidPrefix([0x01, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, n]),
    }
}

fn at(port: u16) -> Locator {
    Locator::udp_v4(Ipv4Addr::LOCALHOST, port)
}

fn sample(n: u8) -> Vec<u8> {
    vec![0, 1, 0, 0, n]
}

/// A writer (of `vendor`) that wrote samples 1..=`before` with nobody
/// matched, and a reliable volatile reader matched to it now.
fn pair(vendor: [u8; 2], before: u8, now: Instant) -> (Writer, Reader, Guid) {
    let mut w = Writer::new(
        header(1, vendor),
        EntityId([0, 0, 0x0a, 0x02]),
        64,
        Duration::from_millis(50),
    );
    for n in 1..=before {
        w.write(now, sample(n));
    }
    let r = Reader::new(header(2, TAGWIRE), R_ENTITY, Duration::from_millis(10));
    let rg = Guid {
        prefix: header(2, TAGWIRE).prefix,
        entity: R_ENTITY,
    };
    (w, r, rg)
}

fn drain_writer(w: &mut Writer) -> Vec<Transmit> {
    std::iter::from_fn(|| w.poll_transmit()).collect()
}

fn to_reader(r: &mut Reader, now: Instant, ts: &[Transmit]) {
    for t in ts {
        r.handle_message(now, &Message::parse(&t.bytes).unwrap());
    }
}

fn to_writer(w: &mut Writer, r: &mut Reader, now: Instant) -> usize {
    r.handle_timeout(now);
    let mut n = 0;
    while let Some(t) = r.poll_transmit() {
        w.handle_message(now, &Message::parse(&t.bytes).unwrap());
        n += 1;
    }
    n
}

fn delivered(r: &mut Reader) -> Vec<i64> {
    std::iter::from_fn(|| r.poll_delivery())
        .map(|d| d.sn.0)
        .collect()
}

#[test]
fn a_sample_lost_before_the_first_that_arrived_is_asked_for_from_a_tagwire_writer() {
    let now = Instant::now();
    let (mut w, mut r, rg) = pair(TAGWIRE, 4, now);
    w.add_reader_from(now, rg, vec![at(7413)], ReaderStart::Next { told: true });
    r.add_writer(now, w.guid(), vec![at(7411)], false);
    // The heartbeat of the match and sample 5 are lost; 6 arrives.
    drain_writer(&mut w);
    w.write(now, sample(5));
    drain_writer(&mut w);
    w.write(now, sample(6));
    let six = drain_writer(&mut w);
    to_reader(&mut r, now, &six);
    // Held: the reader does not know yet where it starts.
    assert!(delivered(&mut r).is_empty());
    // It asks (pre-emptive), the writer says "from 5" to it alone.
    assert_eq!(to_writer(&mut w, &mut r, now), 1);
    let told = drain_writer(&mut w);
    let hb = Message::parse(&told[0].bytes).unwrap();
    assert!(
        hb.submessages.iter().any(|s| matches!(s,
            Submessage::Heartbeat { reader, first, final_flag: true, .. }
                if *reader == R_ENTITY && *first == SequenceNumber(5))),
        "{:?}",
        hb.submessages
    );
    to_reader(&mut r, now, &told);
    // It lacks 5: asked for after the ACKNACK delay, resent, delivered.
    let later = now + Duration::from_millis(20);
    assert_eq!(to_writer(&mut w, &mut r, later), 1);
    let resent = drain_writer(&mut w);
    to_reader(&mut r, later, &resent);
    assert_eq!(delivered(&mut r), vec![5, 6]);
    assert_eq!(r.lost(w.guid()), 0);
}

#[test]
fn another_vendors_writer_is_followed_from_its_first_heartbeat() {
    let now = Instant::now();
    let (mut w, mut r, rg) = pair(CYCLONE, 3, now);
    w.add_reader_from(now, rg, vec![at(7413)], ReaderStart::Next { told: false });
    r.add_writer(now, w.guid(), vec![at(7411)], false);
    drain_writer(&mut w);
    w.write(now, sample(4));
    drain_writer(&mut w);
    w.write(now, sample(5));
    let five = drain_writer(&mut w);
    // Sample 5 comes with the writer's heartbeat (1..5, to every reader):
    // the reader delivers what it holds up to 5 and goes on from 6; what
    // it lacks there is not counted (it may never have been meant for it).
    to_reader(&mut r, now, &five);
    assert_eq!(delivered(&mut r), vec![5]);
    w.write(now, sample(6));
    let six = drain_writer(&mut w);
    to_reader(&mut r, now, &six);
    assert_eq!(delivered(&mut r), vec![6]);
    assert_eq!(r.lost(w.guid()), 0);
    // (The writer told it nothing of its own: a heartbeat addressed to it
    // names the first sample kept, as Cyclone's do.)
    let later = now + Duration::from_millis(60);
    w.handle_timeout(later);
    let hb = drain_writer(&mut w);
    assert!(!hb.is_empty());
    let m = Message::parse(&hb[0].bytes).unwrap();
    assert!(m.submessages.iter().any(|s| matches!(s,
        Submessage::Heartbeat { first, .. } if *first == SequenceNumber(1))));
}

#[test]
fn a_reader_asks_where_it_starts_until_a_heartbeat_addressed_to_it_says() {
    let now = Instant::now();
    let (mut w, mut r, rg) = pair(TAGWIRE, 2, now);
    r.add_writer(now, w.guid(), vec![at(7411)], false);
    // The writer has not matched the reader yet: the first asks go unheard.
    r.handle_timeout(now);
    let first_ask: Vec<Transmit> = std::iter::from_fn(|| r.poll_transmit()).collect();
    assert_eq!(first_ask.len(), 1);
    let m = Message::parse(&first_ask[0].bytes).unwrap();
    assert!(m.submessages.iter().any(|s| matches!(s,
        Submessage::AckNack { state, .. }
            if state.base == SequenceNumber(1) && state.num_bits == 0)));
    // A heartbeat to every reader does not tell a tagwire writer's reader
    // where it starts; one addressed to another reader is not for it.
    w.add_reader_from(now, rg, vec![at(7413)], ReaderStart::Next { told: true });
    drain_writer(&mut w);
    let t = now + Duration::from_millis(60);
    w.write(t, sample(3));
    w.handle_timeout(t + Duration::from_millis(60));
    let periodic = drain_writer(&mut w);
    to_reader(&mut r, t, &periodic);
    let mut b = MessageBuilder::new(header(1, TAGWIRE));
    b.push(&Submessage::Heartbeat {
        reader: EntityId([0, 0, 0x0b, 0x07]),
        writer: w.guid().entity,
        first: SequenceNumber(1),
        last: SequenceNumber(3),
        count: 1000,
        final_flag: true,
        liveliness: false,
    })
    .unwrap();
    let other = b.finish();
    r.handle_message(t, &Message::parse(&other).unwrap());
    assert!(delivered(&mut r).is_empty());
    // So it asks again, every 50 ms, and the writer answers each time.
    let mut asks = 0;
    let mut at_ms = 60;
    while asks < 3 {
        at_ms += 50;
        asks += to_writer(&mut w, &mut r, now + Duration::from_millis(at_ms));
    }
    let answers = drain_writer(&mut w);
    assert_eq!(answers.len(), 3);
    to_reader(&mut r, now + Duration::from_millis(at_ms), &answers);
    assert_eq!(delivered(&mut r), vec![3]);
    assert_eq!(r.lost(w.guid()), 0);
}

#[test]
fn repeated_pre_emptive_acknacks_of_count_zero_are_each_answered() {
    // Cyclone DDS sends its pre-emptive ACKNACK with count 0, again and
    // again until a heartbeat comes.
    let now = Instant::now();
    let (mut w, _r, rg) = pair(TAGWIRE, 2, now);
    w.add_reader_from(now, rg, vec![at(7413)], ReaderStart::Next { told: false });
    drain_writer(&mut w);
    let mut b = MessageBuilder::new(header(2, CYCLONE));
    b.push(&Submessage::InfoDst(w.guid().prefix)).unwrap();
    b.push(&Submessage::AckNack {
        reader: R_ENTITY,
        writer: w.guid().entity,
        state: SequenceNumberSet::empty(SequenceNumber(1)),
        count: 0,
        final_flag: false,
    })
    .unwrap();
    let ask = b.finish();
    for _ in 0..3 {
        w.handle_message(now, &Message::parse(&ask).unwrap());
        let out = drain_writer(&mut w);
        assert_eq!(out.len(), 1);
        let m = Message::parse(&out[0].bytes).unwrap();
        assert!(m.submessages.iter().any(|s| matches!(s,
            Submessage::Heartbeat { reader, .. } if *reader == R_ENTITY)));
    }
}
