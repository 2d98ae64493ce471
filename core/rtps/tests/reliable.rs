//! The reliable writer and reader over a lossy simulated link, in virtual
//! time: everything arrives once and in order; what the writer no longer
//! keeps is skipped and counted; late joiners get history only when
//! transient-local.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use tagwire_rtps::reliable::{Change, Reader, ReaderStart, Writer, DISPOSED, UNREGISTERED};
use tagwire_rtps::{EntityId, Guid, GuidPrefix, Header, Locator, Message, SequenceNumber, Time};

const W_PORT: u16 = 7411;
const R_PORT: u16 = 7413;

fn header(n: u8) -> Header {
    Header {
        version: (2, 1),
        vendor: [0x01, 0x99],
        prefix: GuidPrefix([0x01, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, n]),
    }
}

fn at(port: u16) -> Locator {
    Locator::udp_v4(Ipv4Addr::LOCALHOST, port)
}

/// A seeded link that drops `loss_pct` % of datagrams (and all while `down`).
struct Link {
    seed: u64,
    loss_pct: u64,
    down: bool,
    dropped: u64,
}

impl Link {
    fn pass(&mut self) -> bool {
        self.seed = self
            .seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let pass = !self.down && (self.seed >> 33) % 100 >= self.loss_pct;
        self.dropped += u64::from(!pass);
        pass
    }
}

struct Pair {
    w: Writer,
    r: Reader,
    wg: Guid,
    rg: Guid,
    link: Link,
    now: Instant,
    got: Vec<i64>,
    /// Bytes per sample.
    size: usize,
    /// Writer→reader datagrams that pass per step at most (0: any), as
    /// a receive buffer smaller than a burst lets through.
    cap: usize,
    /// Keep what is delivered here (and check nothing about it).
    changes: Option<Vec<Change>>,
}

/// Sample `n`: `size` bytes (at least 8) that say which sample it is.
fn payload(n: i64, size: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..size.max(8)).map(|i| (i as i64 * 7 + n) as u8).collect();
    p[..8].copy_from_slice(&n.to_le_bytes());
    p
}

impl Pair {
    fn new(depth: usize, loss_pct: u64, transient_local: bool, match_now: bool) -> Self {
        let now = Instant::now();
        let w = Writer::new(
            header(1),
            EntityId([0, 0, 0x0a, 0x02]),
            depth,
            Duration::from_millis(50),
        );
        let r = Reader::new(
            header(2),
            EntityId([0, 0, 0x09, 0x07]),
            Duration::from_millis(10),
        );
        let (wg, rg) = (
            w.guid(),
            Guid {
                prefix: header(2).prefix,
                entity: EntityId([0, 0, 0x09, 0x07]),
            },
        );
        let mut p = Self {
            w,
            r,
            wg,
            rg,
            link: Link {
                seed: 42,
                loss_pct,
                down: false,
                dropped: 0,
            },
            now,
            got: Vec::new(),
            size: 8,
            cap: 0,
            changes: None,
        };
        if match_now {
            p.connect(transient_local);
        }
        p
    }

    fn connect(&mut self, transient_local: bool) {
        self.r
            .add_writer(self.now, self.wg, vec![at(W_PORT)], transient_local);
        let start = match transient_local {
            true => ReaderStart::Kept,
            false => ReaderStart::Next { told: true },
        };
        self.w
            .add_reader_from(self.now, self.rg, vec![at(R_PORT)], start);
    }

    /// One millisecond: timeouts, then every datagram across the link.
    fn step(&mut self) {
        self.now += Duration::from_millis(1);
        self.w.handle_timeout(self.now);
        self.r.handle_timeout(self.now);
        let mut moved = true;
        let mut passed = 0;
        while moved {
            moved = false;
            while let Some(t) = self.w.poll_transmit() {
                moved = true;
                assert_eq!(t.to, at(R_PORT));
                let room = self.cap == 0 || passed < self.cap;
                if !room {
                    self.link.dropped += 1;
                }
                if room && self.link.pass() {
                    passed += 1;
                    self.r
                        .handle_message(self.now, &Message::parse(&t.bytes).unwrap());
                }
            }
            while let Some(t) = self.r.poll_transmit() {
                moved = true;
                assert_eq!(t.to, at(W_PORT));
                if self.link.pass() {
                    self.w
                        .handle_message(self.now, &Message::parse(&t.bytes).unwrap());
                }
            }
        }
        while let Some(d) = self.r.poll_delivery() {
            assert_eq!(d.writer, self.wg);
            self.got.push(d.sn.0);
            if let Some(c) = &mut self.changes {
                c.push(d.change);
                continue;
            }
            assert_eq!(d.change.payload, payload(d.sn.0, self.size));
        }
    }

    fn write(&mut self, n: i64) {
        let sn = self.w.write(self.now, payload(n, self.size));
        assert_eq!(sn, SequenceNumber(n));
    }

    fn settle(&mut self, limit: Duration) {
        let until = self.now + limit;
        while !self.w.is_acknowledged() {
            assert!(
                self.now < until,
                "not acknowledged; got {} samples",
                self.got.len()
            );
            self.step();
        }
        self.step();
    }
}

#[test]
fn every_sample_arrives_once_and_in_order_through_a_lossy_link() {
    let mut p = Pair::new(1000, 25, false, true);
    for n in 1..=500 {
        p.write(n);
        p.step();
    }
    p.settle(Duration::from_secs(30));
    assert_eq!(p.got, (1..=500).collect::<Vec<_>>());
    assert_eq!(p.r.lost(p.wg), 0);
    assert!(
        p.link.dropped > 100,
        "the link dropped only {}",
        p.link.dropped
    );
}

/// Change `n`: every third disposes instance `n % 7` (its key; every
/// ninth only by key hash), every fifth unregisters; the others are data;
/// even ones carry a source timestamp. Some data are fragmented.
fn change(n: i64) -> Change {
    let key = [0x00, 0x01, 0, 0, (n % 7) as u8, 0, 0, 0];
    let timestamp = (n % 2 == 0).then(|| Time::from_nanos(1_700_000_000_000_000_001 + n as u64));
    let mut hash = [0u8; 16];
    hash[3] = (n % 7) as u8;
    match n {
        n if n % 9 == 0 => Change {
            payload: Vec::new(),
            timestamp,
            status: DISPOSED | UNREGISTERED,
            key_hash: Some(hash),
        },
        n if n % 3 == 0 => Change {
            payload: key.to_vec(),
            timestamp,
            status: DISPOSED,
            key_hash: Some(hash),
        },
        n if n % 5 == 0 => Change {
            payload: key.to_vec(),
            timestamp,
            status: UNREGISTERED,
            key_hash: None,
        },
        n => Change {
            payload: payload(n, if n % 11 == 1 { 70_000 } else { 8 }),
            timestamp,
            status: 0,
            key_hash: None,
        },
    }
}

#[test]
fn timestamps_disposes_and_unregisters_arrive_in_order_through_a_lossy_link() {
    let mut p = Pair::new(1000, 25, false, true);
    p.changes = Some(Vec::new());
    for n in 1..=90 {
        let sn = p.w.write_change(p.now, change(n));
        assert_eq!(sn, SequenceNumber(n));
        p.step();
    }
    p.settle(Duration::from_secs(30));
    assert_eq!(p.got, (1..=90).collect::<Vec<_>>());
    assert_eq!(p.changes.unwrap(), (1..=90).map(change).collect::<Vec<_>>());
    assert_eq!(p.r.lost(p.wg), 0);
}

#[test]
fn what_the_writer_no_longer_keeps_is_skipped_and_counted_never_reordered() {
    let mut p = Pair::new(10, 0, false, true);
    for n in 1..=5 {
        p.write(n);
        p.step();
    }
    // The link goes down while 100 more are written: the writer keeps 10.
    p.link.down = true;
    for n in 6..=105 {
        p.write(n);
        p.step();
    }
    p.link.down = false;
    p.settle(Duration::from_secs(10));
    let lost = p.r.lost(p.wg);
    assert_eq!(
        p.got.len() as u64 + lost,
        105,
        "got {:?}, lost {lost}",
        p.got
    );
    assert!(lost >= 90, "lost {lost}");
    assert!(p.got.windows(2).all(|w| w[0] < w[1]), "{:?}", p.got);
    assert_eq!(p.got.last(), Some(&105));
}

#[test]
fn a_late_joiner_gets_history_only_when_transient_local() {
    for (transient_local, expect_first) in [(true, 1), (false, 6)] {
        let mut p = Pair::new(100, 10, transient_local, false);
        for n in 1..=5 {
            p.write(n);
            p.step();
        }
        p.connect(transient_local);
        for _ in 0..50 {
            p.step();
        }
        for n in 6..=20 {
            p.write(n);
            p.step();
        }
        p.settle(Duration::from_secs(10));
        assert_eq!(
            p.got,
            (expect_first..=20).collect::<Vec<_>>(),
            "transient_local={transient_local}"
        );
    }
}

#[test]
fn old_or_repeated_acknacks_and_heartbeats_change_nothing() {
    use tagwire_rtps::{MessageBuilder, SequenceNumberSet, Submessage};
    let mut p = Pair::new(100, 0, false, true);
    while p.w.poll_transmit().is_some() {}
    for n in 1..=3 {
        p.write(n);
    }
    while p.w.poll_transmit().is_some() {}
    // An ACKNACK asking for 1..3 again: answered once, not twice.
    let mut nack = SequenceNumberSet::empty(SequenceNumber(1));
    for i in 0..3 {
        nack.insert_offset(i);
    }
    let mut b = MessageBuilder::new(header(2));
    b.push(&Submessage::AckNack {
        reader: p.rg.entity,
        writer: p.wg.entity,
        state: nack,
        count: 5,
        final_flag: false,
    })
    .unwrap();
    let bytes = b.finish();
    let m = Message::parse(&bytes).unwrap();
    p.w.handle_message(p.now, &m);
    let resent = p.w.poll_transmit().expect("a resend");
    let rm = Message::parse(&resent.bytes).unwrap();
    let datas = rm
        .submessages
        .iter()
        .filter(|s| matches!(s, Submessage::Data(d) if d.reader == p.rg.entity))
        .count();
    assert_eq!(datas, 3, "{:?}", rm.submessages);
    assert_eq!(rm.submessages[0], Submessage::InfoDst(p.rg.prefix));
    p.w.handle_message(p.now, &m);
    assert!(
        p.w.poll_transmit().is_none(),
        "a repeated ACKNACK was answered"
    );
    // A heartbeat repeated with the same count is not answered again.
    // (Addressed to the reader, which tells this volatile reader where it
    // starts: the one of the match was dropped above.)
    let mut b = MessageBuilder::new(header(1));
    b.push(&Submessage::Heartbeat {
        reader: p.rg.entity,
        writer: p.wg.entity,
        first: SequenceNumber(1),
        last: SequenceNumber(3),
        count: 9,
        final_flag: false,
        liveliness: false,
    })
    .unwrap();
    let hb = b.finish();
    let hb = Message::parse(&hb).unwrap();
    p.r.handle_message(p.now, &hb);
    p.r.handle_timeout(p.now + Duration::from_secs(1));
    assert!(p.r.poll_transmit().is_some(), "the heartbeat is answered");
    p.r.handle_message(p.now, &hb);
    p.r.handle_timeout(p.now + Duration::from_secs(2));
    assert!(
        p.r.poll_transmit().is_none(),
        "a repeated heartbeat was answered"
    );
}

#[test]
fn large_samples_arrive_whole_and_in_order_through_a_lossy_link() {
    let mut p = Pair::new(1000, 10, false, true);
    p.size = 30_004; // 23 fragments: three datagrams each
    for n in 1..=40 {
        p.write(n);
        p.step();
    }
    p.settle(Duration::from_secs(60));
    assert_eq!(p.got, (1..=40).collect::<Vec<_>>());
    assert_eq!(p.r.lost(p.wg), 0);
    assert!(
        p.link.dropped > 10,
        "the link dropped only {}",
        p.link.dropped
    );
}

#[test]
fn a_sample_larger_than_what_a_burst_gets_through_completes_by_nack_frag() {
    // 200 KiB: 153 fragments in 16 datagrams, of which 4 pass at a time.
    // Asking for the whole sample again would bring the same 4 every time.
    let mut p = Pair::new(100, 0, false, true);
    p.size = 200 * 1024;
    p.cap = 4;
    for n in 1..=3 {
        p.write(n);
        p.step();
    }
    p.settle(Duration::from_secs(30));
    assert_eq!(p.got, [1, 2, 3]);
    assert!(p.link.dropped > 20, "dropped only {}", p.link.dropped);
}

#[test]
fn a_nack_frag_gets_exactly_the_fragments_it_asks_for() {
    use tagwire_rtps::{FragmentNumberSet, MessageBuilder, Submessage};
    let mut p = Pair::new(100, 0, false, true);
    p.size = 30_004;
    while p.w.poll_transmit().is_some() {}
    p.write(1);
    let first: Vec<_> = std::iter::from_fn(|| p.w.poll_transmit()).collect();
    assert_eq!(first.len(), 3, "23 fragments go in three datagrams");
    let mut want = FragmentNumberSet::empty(2);
    want.insert_offset(0);
    want.insert_offset(5);
    let mut b = MessageBuilder::new(header(2));
    b.push(&Submessage::NackFrag {
        reader: p.rg.entity,
        writer: p.wg.entity,
        sn: SequenceNumber(1),
        state: want,
        count: 1,
    })
    .unwrap();
    let bytes = b.finish();
    let m = Message::parse(&bytes).unwrap();
    p.w.handle_message(p.now, &m);
    let resent: Vec<u32> = std::iter::from_fn(|| p.w.poll_transmit())
        .flat_map(|t| {
            Message::parse(&t.bytes)
                .unwrap()
                .submessages
                .into_iter()
                .filter_map(|s| match s {
                    Submessage::DataFrag(f) => Some(f.fragment_start),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(resent, vec![2, 7]);
    // The same count again: nothing.
    p.w.handle_message(p.now, &m);
    assert!(p.w.poll_transmit().is_none());
}

#[test]
fn best_effort_delivers_in_increasing_order_sends_nothing_back_and_counts_what_it_skips() {
    let now = Instant::now();
    let mut w = Writer::best_effort(header(1), EntityId([0, 0, 0x0a, 0x03]));
    let rid = EntityId([0, 0, 0x09, 0x04]);
    let mut r = Reader::best_effort(header(2), rid);
    let wg = w.guid();
    r.add_writer(now, wg, vec![at(W_PORT)], false);
    w.add_reader(
        now,
        Guid {
            prefix: header(2).prefix,
            entity: rid,
        },
        vec![at(R_PORT)],
    );
    assert!(
        w.poll_transmit().is_none(),
        "no heartbeat to a best-effort match"
    );
    let mut link = Link {
        seed: 7,
        loss_pct: 25,
        down: false,
        dropped: 0,
    };
    let mut got = Vec::new();
    for n in 1..=500i64 {
        // Every tenth sample is large: it comes in fragments or not at all.
        let size = if n % 10 == 0 { 30_004 } else { 8 };
        w.write(now, payload(n, size));
        w.handle_timeout(now + Duration::from_secs(10));
        r.handle_timeout(now + Duration::from_secs(10));
        assert!(
            r.poll_transmit().is_none(),
            "a best-effort reader answers nothing"
        );
        while let Some(t) = w.poll_transmit() {
            let m = Message::parse(&t.bytes).unwrap();
            assert!(
                m.submessages
                    .iter()
                    .all(|s| !matches!(s, tagwire_rtps::Submessage::Heartbeat { .. })),
                "a best-effort writer heartbeats"
            );
            if link.pass() {
                r.handle_message(now, &m);
            }
        }
        while let Some(d) = r.poll_delivery() {
            let size = if d.sn.0 % 10 == 0 { 30_004 } else { 8 };
            assert_eq!(d.change.payload, payload(d.sn.0, size));
            got.push(d.sn.0);
        }
    }
    assert!(link.dropped > 50);
    assert!(got.windows(2).all(|p| p[0] < p[1]), "{got:?}");
    let (first, last) = (got[0], *got.last().unwrap());
    assert_eq!(
        got.len() as u64 + r.lost(wg),
        (last - first + 1) as u64,
        "every number skipped is counted"
    );
    assert!(got.len() > 300, "{} of 500", got.len());
}

/// One reader, `n` writers: writer `i` has entity id `[0, 0, i % ids, 2]`
/// on participant `i + 10` (so with `ids < n` several writers share an
/// entity id). Every writer writes three samples; what the reader delivers
/// per writer, plus the samples of a writer it never matched (participant
/// 200, entity id of writer 0).
fn many_writers(n: u8, ids: u8, unmatch: Option<u8>) -> (Vec<Vec<i64>>, usize) {
    let now = Instant::now();
    let mut r = Reader::new(
        header(2),
        EntityId([0, 0, 0x09, 0x07]),
        Duration::from_millis(10),
    );
    let rg = Guid {
        prefix: header(2).prefix,
        entity: EntityId([0, 0, 0x09, 0x07]),
    };
    let mut ws: Vec<Writer> = (0..n)
        .map(|i| {
            Writer::new(
                header(i + 10),
                EntityId([0, 0, i % ids, 0x02]),
                8,
                Duration::from_millis(50),
            )
        })
        .collect();
    let mut stranger = Writer::new(
        header(200),
        EntityId([0, 0, 0, 0x02]),
        8,
        Duration::from_millis(50),
    );
    stranger.add_reader(now, rg, vec![at(R_PORT)]);
    for w in &mut ws {
        assert!(r.add_writer(now, w.guid(), vec![at(W_PORT)], false));
        w.add_reader(now, rg, vec![at(R_PORT)]);
    }
    if let Some(u) = unmatch {
        r.remove_writer(ws[usize::from(u)].guid());
    }
    let mut got = vec![Vec::new(); usize::from(n)];
    let mut strangers = 0;
    for k in 1..=3i64 {
        for w in ws.iter_mut().chain(std::iter::once(&mut stranger)) {
            w.write(now, payload(k, 8));
            while let Some(t) = w.poll_transmit() {
                r.handle_message(now, &Message::parse(&t.bytes).unwrap());
            }
        }
        while let Some(d) = r.poll_delivery() {
            match ws.iter().position(|w| w.guid() == d.writer) {
                Some(i) => got[i].push(d.sn.0),
                None => strangers += 1,
            }
        }
    }
    (got, strangers)
}

#[test]
fn a_reader_takes_each_matched_writer_and_only_those_however_many_there_are() {
    // Few writers and many, some sharing an entity id across participants
    // (only the whole GUID names a writer).
    for (n, ids) in [(3, 3), (6, 2), (20, 20), (20, 5)] {
        let (got, strangers) = many_writers(n, ids, Some(1));
        assert_eq!(
            strangers, 0,
            "{n} writers, {ids} ids: an unmatched writer got in"
        );
        for (i, g) in got.iter().enumerate() {
            let want: Vec<i64> = if i == 1 { vec![] } else { vec![1, 2, 3] };
            assert_eq!(g, &want, "{n} writers, {ids} ids: writer {i}");
        }
    }
}
