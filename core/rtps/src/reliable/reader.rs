//! The reliable reader (see the parent module).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::{Change, MAX_MATCHES};
use crate::frag::Reassembly;
use crate::message::{Header, Message, MessageBuilder, Submessage};
use crate::types::{
    EntityId, Guid, Locator, SequenceNumber, SequenceNumberSet, Time, MAX_SET_BITS, VENDOR_TAGWIRE,
};
use crate::Transmit;

/// The most out-of-order samples a reader holds per writer.
const MAX_PENDING: usize = 1024;

/// The most samples a reader puts back together at once per writer.
const MAX_PARTIAL: usize = 16;

/// NACK_FRAGs sent with one ACKNACK at most.
const MAX_NACK_FRAGS: usize = 8;

/// How often a reliable volatile reader that does not know where a
/// writer's samples start for it asks (a pre-emptive ACKNACK), until a
/// heartbeat tells it.
const START_ASK: Duration = Duration::from_millis(50);

/// A sample a reader delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The writer.
    pub writer: Guid,
    /// Its sequence number.
    pub sn: SequenceNumber,
    /// The sample (or dispose, unregister) with its timestamp.
    pub change: Change,
}

#[derive(Debug)]
struct WriterProxy {
    locators: Vec<Locator>,
    transient_local: bool,
    /// The next sample to deliver; `None` until the writer's first
    /// heartbeat or sample says where to start.
    next: Option<i64>,
    /// Samples received ahead of `next` (`None`: will not come).
    pending: BTreeMap<i64, Option<Change>>,
    /// Samples arriving in fragments, with their source timestamps.
    partial: BTreeMap<i64, (Reassembly, Option<Time>)>,
    /// The highest sample the writer announced.
    last: i64,
    hb_count: Option<u32>,
    acknack_count: u32,
    nackfrag_count: u32,
    ack_due: Option<Instant>,
    lost: u64,
}

/// A reliable reader (or a best-effort one: [`Reader::best_effort`]).
#[derive(Debug)]
pub struct Reader {
    header: Header,
    entity: EntityId,
    /// False: best effort (samples delivered as they complete, in
    /// increasing order; what is skipped is counted lost; no ACKNACKs).
    reliable: bool,
    ack_delay: Duration,
    writers: BTreeMap<Guid, WriterProxy>,
    out: VecDeque<Transmit>,
    deliveries: VecDeque<Delivery>,
}

impl Reader {
    /// A reader `entity` of the participant in `header`, answering
    /// heartbeats after `ack_delay`.
    pub fn new(header: Header, entity: EntityId, ack_delay: Duration) -> Self {
        Self {
            header,
            entity,
            reliable: true,
            ack_delay,
            writers: BTreeMap::new(),
            out: VecDeque::new(),
            deliveries: VecDeque::new(),
        }
    }

    /// A best-effort reader: samples are delivered as they arrive (whole),
    /// in increasing order; older ones and duplicates are dropped, and the
    /// numbers skipped are counted lost. It sends nothing.
    pub fn best_effort(header: Header, entity: EntityId) -> Self {
        Self {
            reliable: false,
            ..Self::new(header, entity, Duration::from_secs(3600))
        }
    }

    /// Matches a writer reached at `locators` at `now`. A reliable
    /// volatile reader asks it at once where it starts (a pre-emptive
    /// ACKNACK, again every 50 ms until a heartbeat says), and
    /// holds what arrives meanwhile.
    pub fn add_writer(
        &mut self,
        now: Instant,
        writer: Guid,
        locators: Vec<Locator>,
        transient_local: bool,
    ) -> bool {
        if self.writers.len() >= MAX_MATCHES && !self.writers.contains_key(&writer) {
            return false;
        }
        self.writers.insert(
            writer,
            WriterProxy {
                locators,
                transient_local,
                next: None,
                pending: BTreeMap::new(),
                partial: BTreeMap::new(),
                last: 0,
                hb_count: None,
                acknack_count: 0,
                nackfrag_count: 0,
                ack_due: (self.reliable && !transient_local).then_some(now),
                lost: 0,
            },
        );
        true
    }

    /// Unmatches a writer.
    pub fn remove_writer(&mut self, writer: Guid) {
        self.writers.remove(&writer);
    }

    /// Samples of `writer` that will never come (gaps, history dropped).
    pub fn lost(&self, writer: Guid) -> u64 {
        self.writers.get(&writer).map_or(0, |w| w.lost)
    }

    /// Handles a datagram from a writer's participant.
    pub fn handle_message(&mut self, now: Instant, m: &Message<'_>) {
        // A tagwire writer names a volatile reader's own start in the
        // heartbeats it addresses to it; another vendor's writer does not.
        let told = m.header.vendor == VENDOR_TAGWIRE;
        let mut src = m.header.prefix;
        let mut ts = None;
        for s in &m.submessages {
            match s {
                Submessage::InfoSrc { prefix, .. } => src = *prefix,
                Submessage::InfoTs(t) => ts = *t,
                Submessage::Data(d) => {
                    let g = Guid {
                        prefix: src,
                        entity: d.writer,
                    };
                    if let Some(w) = self.writers.get_mut(&g) {
                        let sn = d.sn.0;
                        let mut c = Change {
                            payload: d.payload.map(<[u8]>::to_vec).unwrap_or_default(),
                            timestamp: ts,
                            ..Change::default()
                        };
                        c.read_inline(d.inline_qos.as_ref());
                        // Neither data nor a dispose or unregister (a bare
                        // inline QoS): nothing to deliver, but it is not
                        // waited for either.
                        let c = (c.status != 0 || d.payload.is_some() && !d.key).then_some(c);
                        // A best-effort volatile reader starts at the first
                        // sample it gets. A reliable one holds what comes
                        // until a heartbeat says where it starts (a sample
                        // lost just before the first it got is then asked
                        // for, not skipped), as a transient-local one does.
                        if w.next.is_none() && !w.transient_local && !self.reliable {
                            w.next = Some(sn);
                        }
                        let wanted = w.next.is_none_or(|n| sn >= n);
                        if wanted && w.next == Some(sn) && w.pending.is_empty() {
                            // In order with nothing held: out at once,
                            // without the map (the common case).
                            match c {
                                Some(change) => self.deliveries.push_back(Delivery {
                                    writer: g,
                                    sn: SequenceNumber(sn),
                                    change,
                                }),
                                None => w.lost += 1,
                            }
                            w.next = Some(sn + 1);
                        } else if wanted
                            && !w.pending.contains_key(&sn)
                            && w.pending.len() < MAX_PENDING
                        {
                            w.pending.insert(sn, c);
                        }
                        w.last = w.last.max(sn);
                        Self::drain(g, w, &mut self.deliveries, self.reliable);
                    }
                }
                Submessage::DataFrag(f) => {
                    let g = Guid {
                        prefix: src,
                        entity: f.writer,
                    };
                    if let Some(w) = self.writers.get_mut(&g) {
                        let sn = f.sn.0;
                        if w.next.is_none() && !w.transient_local && !self.reliable {
                            w.next = Some(sn);
                        }
                        let wanted = w.next.is_none_or(|n| sn >= n)
                            && !w.pending.contains_key(&sn)
                            && w.pending.len() < MAX_PENDING;
                        if wanted {
                            if !w.partial.contains_key(&sn) && w.partial.len() < MAX_PARTIAL {
                                if let Some(r) = Reassembly::new(f) {
                                    w.partial.insert(sn, (r, ts));
                                }
                            }
                            let done = w.partial.get_mut(&sn).is_some_and(|(r, _)| r.add(f));
                            if done {
                                if let Some((r, t)) = w.partial.remove(&sn) {
                                    let mut c = Change {
                                        payload: r.into_bytes(),
                                        timestamp: t,
                                        ..Change::default()
                                    };
                                    c.read_inline(f.inline_qos.as_ref());
                                    w.pending.insert(sn, Some(c));
                                }
                            }
                        }
                        w.last = w.last.max(sn);
                        Self::drain(g, w, &mut self.deliveries, self.reliable);
                    }
                }
                // (Addressed to another reader of this participant: not ours.)
                Submessage::Gap { reader, .. } | Submessage::Heartbeat { reader, .. }
                    if *reader != EntityId::UNKNOWN && *reader != self.entity => {}
                Submessage::Gap {
                    writer,
                    start,
                    list,
                    ..
                } => {
                    let g = Guid {
                        prefix: src,
                        entity: *writer,
                    };
                    if let Some(w) = self.writers.get_mut(&g) {
                        let next = w.next;
                        let mut mark = |sn: i64| {
                            if next.is_none_or(|n| sn >= n) && w.pending.len() < MAX_PENDING {
                                w.pending.entry(sn).or_insert(None);
                            }
                        };
                        // [start, list.base) (bounded), then the set.
                        let upto = list.base.0.min(start.0.saturating_add(MAX_PENDING as i64));
                        for sn in start.0..upto {
                            mark(sn);
                        }
                        for off in list.offsets() {
                            mark(list.base.0 + i64::from(off));
                        }
                        Self::drain(g, w, &mut self.deliveries, self.reliable);
                    }
                }
                Submessage::Heartbeat {
                    reader,
                    writer,
                    first,
                    last,
                    count,
                    final_flag,
                    ..
                } if self.reliable => {
                    let g = Guid {
                        prefix: src,
                        entity: *writer,
                    };
                    if let Some(w) = self.writers.get_mut(&g) {
                        if w.hb_count.is_some_and(|c| *count <= c) {
                            continue;
                        }
                        w.hb_count = Some(*count);
                        w.last = w.last.max(last.0);
                        if w.next.is_none()
                            && !Self::start(
                                g,
                                w,
                                told,
                                *reader != EntityId::UNKNOWN,
                                first.0,
                                last.0,
                                &mut self.deliveries,
                            )
                        {
                            // Not told yet: hold, and keep asking.
                            w.ack_due.get_or_insert(now + START_ASK);
                            continue;
                        }
                        let Some(next) = w.next else { continue };
                        // What the writer no longer keeps will not come.
                        if first.0 > next {
                            w.lost += (first.0 - next) as u64;
                            w.next = Some(first.0);
                            w.pending.retain(|&sn, _| sn >= first.0);
                        }
                        Self::drain(g, w, &mut self.deliveries, self.reliable);
                        // Nothing missing: acknowledge at once (a writer
                        // that asks may be holding back for it); something
                        // missing: after the delay, which lets reordered
                        // samples arrive before they are asked for again.
                        let lacking = Self::missing(w).num_bits > 0 || !w.partial.is_empty();
                        if lacking {
                            w.ack_due.get_or_insert(now + self.ack_delay);
                        } else if !final_flag {
                            w.ack_due = Some(now);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Where a reliable reader starts with writer `g`, from its first
    /// heartbeat (`first`, `last`; `addressed` to this reader; `told`: the
    /// writer is tagwire's); false while it cannot tell yet.
    ///
    /// - Transient local: at the first sample the writer keeps.
    /// - Volatile, a tagwire writer: at the first sample a heartbeat
    ///   addressed to this reader names (the writer's next sample when it
    ///   matched this reader); an unaddressed one does not say, and what
    ///   arrives is held until an addressed one comes.
    /// - Volatile, another vendor's writer (no such statement): after the
    ///   heartbeat's last sample, as Cyclone DDS's readers do; what this
    ///   reader holds up to there is delivered in order and what it lacks
    ///   there is not waited for (nor counted: it may never have been
    ///   meant for this reader).
    fn start(
        g: Guid,
        w: &mut WriterProxy,
        told: bool,
        addressed: bool,
        first: i64,
        last: i64,
        out: &mut VecDeque<Delivery>,
    ) -> bool {
        let start = if w.transient_local {
            first
        } else if told {
            if !addressed {
                return false;
            }
            first
        } else {
            let held: Vec<i64> = w.pending.range(..=last).map(|(sn, _)| *sn).collect();
            for sn in held {
                if let Some(Some(change)) = w.pending.remove(&sn) {
                    out.push_back(Delivery {
                        writer: g,
                        sn: SequenceNumber(sn),
                        change,
                    });
                }
            }
            last.saturating_add(1)
        };
        let start = start.max(1);
        w.pending.retain(|&sn, _| sn >= start);
        w.partial.retain(|&sn, _| sn >= start);
        w.next = Some(start);
        // (No more asking where: what it lacks is asked for as usual.)
        w.ack_due = None;
        true
    }

    /// Moves in-order samples of `w` to the deliveries. A best-effort
    /// reader (`!reliable`) first skips to the lowest sample it holds,
    /// counting what it skips as lost: nothing it lacks will be resent.
    fn drain(g: Guid, w: &mut WriterProxy, out: &mut VecDeque<Delivery>, reliable: bool) {
        if !reliable {
            if let (Some(next), Some((&low, _))) = (w.next, w.pending.first_key_value()) {
                if low > next {
                    w.lost += (low - next) as u64;
                    w.next = Some(low);
                }
            }
        }
        let Some(mut next) = w.next else { return };
        while let Some(entry) = w.pending.remove(&next) {
            match entry {
                Some(change) => out.push_back(Delivery {
                    writer: g,
                    sn: SequenceNumber(next),
                    change,
                }),
                None => w.lost += 1,
            }
            next += 1;
        }
        w.next = Some(next);
        w.partial.retain(|&sn, _| sn >= next);
    }

    /// What `w` lacks: base = the next sample, bits = the missing ones up
    /// to the last announced (within 256). A sample partly received is not
    /// in it: its missing fragments are asked for by NACK_FRAG (asking for
    /// the whole sample again would bring every fragment again, and a burst
    /// larger than the socket's buffer would never get through whole).
    fn missing(w: &WriterProxy) -> SequenceNumberSet {
        let next = w.next.unwrap_or(1);
        let mut set = SequenceNumberSet::empty(SequenceNumber(next));
        let mut sn = next;
        while sn <= w.last && sn - next < i64::from(MAX_SET_BITS) {
            if !w.pending.contains_key(&sn) && !w.partial.contains_key(&sn) {
                set.insert_offset((sn - next) as u32);
            }
            sn += 1;
        }
        set
    }

    /// Sends the ACKNACKs that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let header = self.header;
        let entity = self.entity;
        for (g, w) in &mut self.writers {
            if w.ack_due.is_none_or(|t| now < t) {
                continue;
            }
            w.ack_due = None;
            w.acknack_count += 1;
            let state = if w.next.is_none() && !w.transient_local {
                // Where do I start? (Pre-emptive: nothing acknowledged,
                // nothing asked for.) Asked again until a heartbeat says.
                w.ack_due = Some(now + START_ASK);
                SequenceNumberSet::empty(SequenceNumber(1))
            } else {
                Self::missing(w)
            };
            let mut b = MessageBuilder::new(header);
            let ok = b.push(&Submessage::InfoDst(g.prefix)).is_ok()
                && b.push(&Submessage::AckNack {
                    reader: entity,
                    writer: g.entity,
                    state,
                    count: w.acknack_count,
                    final_flag: state.num_bits == 0,
                })
                .is_ok();
            // Then, for the samples partly received, their missing fragments.
            let mut ok = ok;
            for (sn, (r, _)) in w.partial.iter().take(MAX_NACK_FRAGS) {
                w.nackfrag_count += 1;
                ok &= b
                    .push(&Submessage::NackFrag {
                        reader: entity,
                        writer: g.entity,
                        sn: SequenceNumber(*sn),
                        state: r.missing_set(),
                        count: w.nackfrag_count,
                    })
                    .is_ok();
            }
            if ok {
                let bytes = b.finish();
                for to in &w.locators {
                    self.out.push_back(Transmit {
                        to: *to,
                        bytes: bytes.clone(),
                    });
                }
            }
        }
    }

    /// When [`Reader::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.writers.values().filter_map(|w| w.ack_due).min()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// The next sample, in each writer's order.
    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }
}
