//! The reliable writer (see the parent module).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use super::{Change, MAX_MATCHES};
use crate::frag::{data_frag, fragment_count, FRAGMENTS_PER_DATAGRAM, MAX_UNFRAGMENTED};
use crate::message::{Data, Header, Message, MessageBuilder, Submessage};
use crate::plist::ParameterList;
use crate::types::{
    EntityId, Guid, GuidPrefix, Locator, SequenceNumber, SequenceNumberSet, MAX_SET_BITS,
};
use crate::Transmit;

/// Where a matched reader's samples begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderStart {
    /// At the first sample the writer keeps (a transient-local reader).
    Kept,
    /// At the writer's next sample (a volatile reader). `told`: the reader
    /// is tagwire's, and every heartbeat addressed to it names that sample
    /// as its first, so it knows where it starts even when samples reach
    /// it before any heartbeat (one lost just after the match is then
    /// asked for, not skipped). Other vendors' readers get the writer's
    /// own first sample: Cyclone DDS applies a heartbeat to every reader of
    /// its participant, whatever reader it names.
    Next {
        /// The reader is tagwire's.
        told: bool,
    },
}

#[derive(Debug)]
struct ReaderProxy {
    locators: Vec<Locator>,
    /// Its first sample (see [`ReaderStart`]).
    start: i64,
    /// Heartbeats addressed to it name `start` as their first sample.
    told: bool,
    /// Every sample below this one is acknowledged.
    acked: i64,
    /// Samples it asked for again.
    requested: BTreeSet<i64>,
    /// The last ACKNACK count taken (older or equal ones are dropped).
    count: Option<u32>,
    /// The last NACK_FRAG count taken.
    frag_count: Option<u32>,
}

/// A change in the writer's history, with its inline QoS made once.
#[derive(Debug)]
struct Kept {
    change: Change,
    inline: Option<Vec<u8>>,
}

/// A reliable writer (or a best-effort one: [`Writer::best_effort`]).
#[derive(Debug)]
pub struct Writer {
    header: Header,
    entity: EntityId,
    /// False: best effort (no heartbeats, no resends, no history).
    reliable: bool,
    depth: usize,
    heartbeat_every: Duration,
    history: BTreeMap<i64, Kept>,
    next_sn: i64,
    hb_count: u32,
    /// HEARTBEAT_FRAG's count (its own, strictly increasing too).
    hbf_count: u32,
    next_hb: Option<Instant>,
    readers: BTreeMap<Guid, ReaderProxy>,
    out: VecDeque<Transmit>,
}

impl Writer {
    /// A writer `entity` of the participant in `header`, keeping the last
    /// `depth` samples, heartbeating every `heartbeat_every` while
    /// anything is unacknowledged.
    pub fn new(header: Header, entity: EntityId, depth: usize, heartbeat_every: Duration) -> Self {
        Self {
            header,
            entity,
            reliable: true,
            depth: depth.max(1),
            heartbeat_every,
            history: BTreeMap::new(),
            next_sn: 1,
            hb_count: 0,
            hbf_count: 0,
            next_hb: None,
            readers: BTreeMap::new(),
            out: VecDeque::new(),
        }
    }

    /// A best-effort writer: each sample goes out once, with no heartbeat,
    /// and nothing is kept or resent.
    pub fn best_effort(header: Header, entity: EntityId) -> Self {
        Self {
            reliable: false,
            ..Self::new(header, entity, 1, Duration::from_secs(3600))
        }
    }

    /// The writer's GUID.
    pub fn guid(&self) -> Guid {
        Guid {
            prefix: self.header.prefix,
            entity: self.entity,
        }
    }

    /// Matches a reader reached at `locators`: it gets a heartbeat
    /// addressed to it at once (a transient-local reader then asks for
    /// what is kept; a volatile one starts after it).
    pub fn add_reader(&mut self, now: Instant, reader: Guid, locators: Vec<Locator>) -> bool {
        self.add_reader_from(now, reader, locators, ReaderStart::Kept)
    }

    /// [`Writer::add_reader`] for a reader whose samples begin at `start`.
    pub fn add_reader_from(
        &mut self,
        now: Instant,
        reader: Guid,
        locators: Vec<Locator>,
        start: ReaderStart,
    ) -> bool {
        if self.readers.len() >= MAX_MATCHES && !self.readers.contains_key(&reader) {
            return false;
        }
        let (first, told) = match start {
            ReaderStart::Kept => (self.first_kept(), false),
            ReaderStart::Next { told } => (self.next_sn, told),
        };
        self.readers.insert(
            reader,
            ReaderProxy {
                locators,
                start: first,
                told,
                acked: first,
                requested: BTreeSet::new(),
                count: None,
                frag_count: None,
            },
        );
        if self.reliable {
            self.heartbeat_to(reader, false);
            self.schedule_hb(now);
        }
        true
    }

    /// Unmatches a reader.
    pub fn remove_reader(&mut self, reader: Guid) {
        self.readers.remove(&reader);
    }

    /// Writes a sample (its serialized payload, encapsulation header
    /// first): sent to every matched reader with a heartbeat. Returns its
    /// sequence number.
    pub fn write(&mut self, now: Instant, payload: Vec<u8>) -> SequenceNumber {
        self.write_change(now, Change::data(payload))
    }

    /// Writes a change: a sample with its source timestamp, or a dispose
    /// or unregister (`status` set, the payload the serialized key).
    pub fn write_change(&mut self, now: Instant, change: Change) -> SequenceNumber {
        let sn = self.next_sn;
        self.next_sn += 1;
        let inline = change.inline_qos();
        self.history.insert(sn, Kept { change, inline });
        while self.history.len() > self.depth {
            self.history.pop_first();
        }
        if !self.readers.is_empty() {
            let to = self.all_locators();
            let reliable = self.reliable;
            for d in self.sample(EntityId::UNKNOWN, None, sn, reliable) {
                self.send(d, &to);
            }
            if reliable {
                self.schedule_hb(now);
            }
        }
        if !self.reliable {
            self.history.clear();
        }
        SequenceNumber(sn)
    }

    /// Handles a datagram from a reader's participant (its ACKNACKs).
    pub fn handle_message(&mut self, now: Instant, m: &Message<'_>) {
        if !self.reliable {
            return; // a best-effort writer takes no answers
        }
        let mut src = m.header.prefix;
        for s in &m.submessages {
            match s {
                Submessage::InfoSrc { prefix, .. } => src = *prefix,
                Submessage::AckNack {
                    reader,
                    writer,
                    state,
                    count,
                    ..
                } if *writer == self.entity || *writer == EntityId::UNKNOWN => {
                    let guid = Guid {
                        prefix: src,
                        entity: *reader,
                    };
                    self.handle_acknack(now, guid, state, *count);
                }
                Submessage::NackFrag {
                    reader,
                    writer,
                    sn,
                    state,
                    count,
                } if *writer == self.entity => {
                    let guid = Guid {
                        prefix: src,
                        entity: *reader,
                    };
                    self.handle_nack_frag(guid, sn.0, state, *count);
                }
                _ => {}
            }
        }
    }

    fn handle_acknack(
        &mut self,
        now: Instant,
        reader: Guid,
        state: &SequenceNumberSet,
        count: u32,
    ) {
        let first = self.first_kept();
        let Some(p) = self.readers.get_mut(&reader) else {
            return;
        };
        if state.base.0 <= 1 && state.num_bits == 0 {
            // A pre-emptive ACKNACK (a reader that does not know where it
            // starts yet): a heartbeat addressed to it, final (nothing to
            // answer), however often it comes. Cyclone DDS repeats them
            // with count 0 until it hears one.
            if p.count.is_none_or(|c| count > c) {
                p.count = Some(count);
            }
            self.heartbeat_to(reader, true);
            return;
        }
        if p.count.is_some_and(|c| count <= c) {
            return; // an old or repeated ACKNACK
        }
        p.count = Some(count);
        // (A base past what was written acknowledges what was written.)
        p.acked = p.acked.max(state.base.0.min(self.next_sn));
        for i in state.offsets() {
            let sn = state.base.0 + i64::from(i);
            if sn < self.next_sn {
                p.requested.insert(sn);
            }
        }
        let requested = std::mem::take(&mut p.requested);
        let locators = p.locators.clone();
        if requested.is_empty() {
            // Nothing missing: a reader that acknowledged not all we have
            // (a pre-emptive ACKNACK) gets a heartbeat.
            if state.base.0 < self.next_sn && state.num_bits == 0 {
                self.heartbeat_to(reader, false);
            }
            return;
        }
        let mut b = MessageBuilder::new(self.header);
        let _ = b.push(&Submessage::InfoDst(reader.prefix));
        let mut gone: Vec<i64> = Vec::new();
        for sn in requested {
            if sn < first || !self.history.contains_key(&sn) {
                gone.push(sn);
                continue;
            }
            if self
                .history
                .get(&sn)
                .is_some_and(|k| k.change.payload.len() > MAX_UNFRAGMENTED)
            {
                // A large sample: its fragments in datagrams of their own.
                for d in self.sample(reader.entity, Some(reader.prefix), sn, false) {
                    self.send(d, &locators);
                }
                continue;
            }
            // One datagram per retransmitted sample past the first.
            if b.len() > 1400 {
                self.flush(&mut b, reader.prefix, &locators);
            }
            let ts = self.history.get(&sn).and_then(|k| k.change.timestamp);
            let _ = b.push(&Submessage::InfoTs(ts));
            let _ = b.push(&self.data(reader.entity, sn));
        }
        if let Some(g) = gap(&gone, reader.entity, self.entity) {
            let _ = b.push(&g);
        }
        let _ = b.push(&self.heartbeat(Some(reader), false));
        self.send(b.finish(), &locators);
        self.schedule_hb(now);
    }

    /// Resends the fragments of sample `sn` a reader asked for.
    fn handle_nack_frag(
        &mut self,
        reader: Guid,
        sn: i64,
        state: &crate::types::FragmentNumberSet,
        count: u32,
    ) {
        let Some(p) = self.readers.get_mut(&reader) else {
            return;
        };
        if p.frag_count.is_some_and(|c| count <= c) {
            return;
        }
        p.frag_count = Some(count);
        let locators = p.locators.clone();
        let Some(kept) = self.history.get(&sn) else {
            return;
        };
        let (payload, ts) = (&kept.change.payload, kept.change.timestamp);
        let mut out = Vec::new();
        for off in state.offsets() {
            let Some(n) = state.base.checked_add(off) else {
                break;
            };
            if n > fragment_count(payload.len()) {
                break;
            }
            let frag = data_frag(
                reader.entity,
                self.entity,
                SequenceNumber(sn),
                payload,
                n,
                1,
            );
            let mut b = MessageBuilder::new(self.header);
            let ok = b.push(&Submessage::InfoDst(reader.prefix)).is_ok()
                && ts.is_none_or(|t| b.push(&Submessage::InfoTs(Some(t))).is_ok())
                && b.push(&Submessage::DataFrag(frag)).is_ok();
            if ok {
                out.push(b.finish());
            }
        }
        for d in out {
            self.send(d, &locators);
        }
    }

    /// The datagrams that carry sample `sn` to `reader` (addressed to
    /// `dst` when given), with a heartbeat after the last when `heartbeat`:
    /// one DATA, or its fragments, ten to a datagram, each datagram but
    /// the last followed by a HEARTBEAT_FRAG.
    fn sample(
        &mut self,
        reader: EntityId,
        dst: Option<GuidPrefix>,
        sn: i64,
        heartbeat: bool,
    ) -> Vec<Vec<u8>> {
        let header = self.header;
        // The heartbeat that rides with a sample is final: a reader that
        // lacks nothing need not answer it (one datagram less back per
        // sample); the periodic one asks for the acknowledgements.
        let to = dst.map(|prefix| Guid {
            prefix,
            entity: reader,
        });
        let hb = heartbeat.then(|| self.heartbeat(to, true));
        let Some(kept) = self.history.get(&sn) else {
            return Vec::new();
        };
        let (payload, ts) = (&kept.change.payload, kept.change.timestamp);
        let begin = |b: &mut MessageBuilder| {
            if let Some(p) = dst {
                let _ = b.push(&Submessage::InfoDst(p));
            }
            if let Some(t) = ts {
                let _ = b.push(&Submessage::InfoTs(Some(t)));
            }
        };
        if payload.len() <= MAX_UNFRAGMENTED {
            let mut b = MessageBuilder::new(header);
            begin(&mut b);
            let ok = b.push(&self.data(reader, sn)).is_ok()
                && hb.as_ref().is_none_or(|h| b.push(h).is_ok());
            return if ok { vec![b.finish()] } else { Vec::new() };
        }
        let total = fragment_count(payload.len());
        let mut out = Vec::new();
        let mut first = 1;
        while first <= total {
            let f = data_frag(
                reader,
                self.entity,
                SequenceNumber(sn),
                payload,
                first,
                FRAGMENTS_PER_DATAGRAM,
            );
            let (start, n) = (f.fragment_start, f.fragments);
            let mut b = MessageBuilder::new(header);
            begin(&mut b);
            let frag = Submessage::DataFrag(f);
            if b.push(&frag).is_err() {
                return Vec::new();
            }
            first = start + u32::from(n);
            let last = first > total;
            let tail = if last {
                hb.clone()
            } else {
                self.hbf_count += 1;
                Some(Submessage::HeartbeatFrag {
                    reader,
                    writer: self.entity,
                    sn: SequenceNumber(sn),
                    last_fragment: first - 1,
                    count: self.hbf_count,
                })
            };
            if let Some(t) = tail {
                let _ = b.push(&t);
            }
            out.push(b.finish());
        }
        out
    }

    fn flush(&mut self, b: &mut MessageBuilder, dst: GuidPrefix, locators: &[Locator]) {
        let full = std::mem::replace(b, MessageBuilder::new(self.header)).finish();
        let _ = b.push(&Submessage::InfoDst(dst));
        self.send(full, locators);
    }

    /// Queues `bytes` for every locator in `to`.
    fn send(&mut self, bytes: Vec<u8>, to: &[Locator]) {
        for l in to {
            self.out.push_back(Transmit {
                to: *l,
                bytes: bytes.clone(),
            });
        }
    }

    /// Heartbeats while a reader has not acknowledged everything.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(due) = self.next_hb else { return };
        if now < due {
            return;
        }
        self.next_hb = None;
        // Heartbeats go on while a sample is unacknowledged, and while a
        // reader has never answered: the one sent at the match may have
        // been lost, and a volatile reader takes where to start from a
        // heartbeat (without one, from the first sample that reaches it).
        if self.is_acknowledged() && self.readers.values().all(|p| p.count.is_some()) {
            return;
        }
        let mut b = MessageBuilder::new(self.header);
        if b.push(&self.heartbeat(None, false)).is_ok() {
            let to = self.all_locators();
            self.send(b.finish(), &to);
        }
        self.schedule_hb(now);
    }

    /// Whether every matched reader acknowledged every sample written.
    pub fn is_acknowledged(&self) -> bool {
        !self.reliable || self.readers.values().all(|p| p.acked >= self.next_sn)
    }

    /// When [`Writer::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_hb
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    fn schedule_hb(&mut self, now: Instant) {
        if self.next_hb.is_none() {
            self.next_hb = Some(now + self.heartbeat_every);
        }
    }

    fn first_kept(&self) -> i64 {
        self.history.keys().next().copied().unwrap_or(self.next_sn)
    }

    fn all_locators(&self) -> Vec<Locator> {
        let mut to: Vec<Locator> = Vec::new();
        for p in self.readers.values() {
            for l in &p.locators {
                if !to.contains(l) {
                    to.push(*l);
                }
            }
        }
        to
    }

    fn data(&self, reader: EntityId, sn: i64) -> Submessage<'_> {
        let kept = self.history.get(&sn);
        let inline_qos = kept
            .and_then(|k| k.inline.as_deref())
            .and_then(|b| ParameterList::parse_prefix(b, true).ok())
            .map(|(q, _)| q);
        let status = kept.map_or(0, |k| k.change.status);
        // A dispose or unregister carries the serialized key (K), or only
        // its inline QoS when it has none.
        let payload = kept
            .map(|k| k.change.payload.as_slice())
            .filter(|p| status == 0 || !p.is_empty());
        Submessage::Data(Data {
            reader,
            writer: self.entity,
            sn: SequenceNumber(sn),
            inline_qos,
            payload,
            key: status != 0 && payload.is_some(),
            non_standard: false,
        })
    }

    /// A heartbeat to every reader (`None`) or addressed to `reader`: a
    /// told reader's names its start as the first sample (or the first
    /// kept, when the history dropped what followed the start).
    fn heartbeat(&mut self, reader: Option<Guid>, final_flag: bool) -> Submessage<'static> {
        self.hb_count += 1;
        let mut first = self.first_kept();
        if let Some(p) = reader.and_then(|r| self.readers.get(&r)).filter(|p| p.told) {
            first = first.max(p.start);
        }
        Submessage::Heartbeat {
            reader: reader.map_or(EntityId::UNKNOWN, |r| r.entity),
            writer: self.entity,
            first: SequenceNumber(first),
            last: SequenceNumber(self.next_sn - 1),
            count: self.hb_count,
            final_flag,
            liveliness: false,
        }
    }

    fn heartbeat_to(&mut self, reader: Guid, final_flag: bool) {
        let Some(locators) = self.readers.get(&reader).map(|p| p.locators.clone()) else {
            return;
        };
        let mut b = MessageBuilder::new(self.header);
        let hb = self.heartbeat(Some(reader), final_flag);
        if b.push(&Submessage::InfoDst(reader.prefix)).is_ok() && b.push(&hb).is_ok() {
            self.send(b.finish(), &locators);
        }
    }
}

/// A GAP for sequence numbers `gone` (sorted), if any: a range from the
/// first, then a bitmap of the rest within 256.
fn gap(gone: &[i64], reader: EntityId, writer: EntityId) -> Option<Submessage<'static>> {
    let (&start, _) = gone.split_first()?;
    // Contiguous from `start`, then the set.
    let mut end = start;
    while gone.contains(&(end + 1)) {
        end += 1;
    }
    let mut list = SequenceNumberSet::empty(SequenceNumber(end + 1));
    for &sn in gone.iter().filter(|&&s| s > end) {
        let off = sn - (end + 1);
        if off < i64::from(MAX_SET_BITS) {
            list.insert_offset(off as u32);
        }
    }
    Some(Submessage::Gap {
        reader,
        writer,
        start: SequenceNumber(start),
        list,
    })
}
