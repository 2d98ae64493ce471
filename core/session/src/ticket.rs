//! The send ticket's bookkeeping: what a publisher may send itself, and
//! what the session records when it did (see `tagwire_shm::Ticket` for the
//! shared-memory half, which the runtime owns).
//!
//! ```text
//!  session            runtime (forwarder)          publisher
//!  offer(tag) ──────▶ ticket.open(index, dests)
//!                                           ◀──── claim, send batch of one
//!                     ticket.close() ──▶ Sent / Abandoned / Unclaimed
//!  handle_direct_record ◀── Sent/Abandoned (record `index` read)
//!  handle_record        ◀── Unclaimed
//!  abandon_offer        ◀── record `index` lost or unreadable
//! ```

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use tagwire_wire::datagram::{
    batch_len, push_batch_entry, BatchRepr, BATCH_ENTRY_OVERHEAD, FLAG_DIRECT, FLAG_RELIABLE,
};
use tagwire_wire::frame::{FrameHeader, FLAG_BLOB};
use tagwire_wire::{NodeAddr, Priority, TagName};

use crate::outbound::{batch_repr, clean, left_out, Outgoing};
use crate::{
    Carrier, Class, Held, Mode, Offer, OfferDest, SendEvent as Event, SendSession, TicketOutcome,
    Transmit,
};

impl SendSession {
    /// Offers the next record of `tag` to its publisher (send ticket), if
    /// every reliable node can take it now: its stream has sent before (so
    /// the node knows where to answer), has room for a batch datagram,
    /// credit for one message, its pace lets a datagram go at `now`, and it
    /// does not scale the tag down; at most `max_dests` of them. The
    /// session remembers the offer until the next record is handed in.
    pub fn offer(&mut self, now: Instant, tag: &TagName, max_dests: usize) -> Option<Offer> {
        let (max_msgs, max_bytes) = (
            self.config.max_unacked_messages,
            self.config.max_unacked_bytes,
        );
        let o = self.out.get_mut(tag)?;
        o.offer = None;
        if !o.pending.is_empty() || o.count > 0 {
            return None;
        }
        let mut dests = Vec::new();
        for t in o.dests.iter().filter(|t| t.mode == Mode::Reliable) {
            let s = o.reliable.get(&t.node)?;
            let w = &s.writer;
            let room = w.can_send()
                && w.held_messages() < max_msgs
                && w.held_bytes() + o.batch_limit <= max_bytes
                && s.credit.is_none_or(|c| w.held_messages() < c as usize)
                && s.pacer.as_ref().is_none_or(|p| p.may_send(now));
            if t.every > 1 || w.next_seq() <= 1 || !room || dests.len() == max_dests {
                return None;
            }
            dests.push(OfferDest {
                node: t.node,
                addr: s.addr,
                stream: s.id,
                seq: w.next_seq(),
                priority: s.priority,
            });
        }
        if dests.is_empty() {
            return None;
        }
        // A lone message larger than the batch limit goes out whole anyway
        // (one datagram up to `datagram` bytes): the publisher may send it
        // as well, instead of waking the forwarder for it.
        let offer = Offer {
            max_len: o.batch_limit.max(self.config.datagram),
            dests,
        };
        o.offer = Some(offer.clone());
        Some(offer)
    }

    /// The record the last offer was for, which its publisher sent
    /// ([`TicketOutcome::Sent`]) or may have sent (`Abandoned`) to the
    /// offered nodes: it goes into each of their windows as the batch of
    /// one the publisher was told to send, with the same number, even if
    /// the node no longer wants it (the number is used); after an abandoned
    /// claim it is sent again too. Other nodes get it as usual. Without an
    /// offer, or for a record too large for it, this is
    /// [`SendSession::handle_record`].
    pub fn handle_direct_record(
        &mut self,
        now: Instant,
        tag: &TagName,
        header: &FrameHeader,
        payload: &[u8],
        outcome: TicketOutcome,
    ) -> Result<(), Held> {
        let me = self.config.me;
        let Some(o) = self.out.get_mut(tag) else {
            return Ok(());
        };
        let Some(offer) = o.offer.take() else {
            return self.handle_record(now, tag, header, payload);
        };
        let len = batch_len(tag, BATCH_ENTRY_OVERHEAD + payload.len());
        if len > offer.max_len || header.flags & FLAG_BLOB != 0 {
            // An honest publisher declined it: nothing went out.
            return self.handle_record(now, tag, header, payload);
        }
        let mut entries = Vec::with_capacity(BATCH_ENTRY_OVERHEAD + payload.len());
        push_batch_entry(&mut entries, &clean(header), payload);
        let mut skip = left_out(&o.dests, me, header);
        for d in &offer.dests {
            let Some(s) = o.reliable.get_mut(&d.node) else {
                continue;
            };
            if s.id != d.stream || s.writer.next_seq() != d.seq {
                continue;
            }
            let (id, addr, priority) = (s.id, s.addr, s.priority);
            let kept = s.writer.send_sent(now, 1, |seq, out| {
                batch_repr(tag, seq, 1, &entries).encode(id, out)
            });
            if let Ok((seq, bytes)) = kept {
                let len = bytes.len();
                if outcome == TicketOutcome::Abandoned {
                    self.transmits.push_back(Transmit {
                        dest: addr,
                        carrier: Carrier::Udp,
                        class: Class::Data,
                        priority,
                        bytes: bytes.to_vec().into(),
                    });
                }
                // The publisher's copy went on the stream's pace too.
                if let Some(p) = &mut s.pacer {
                    p.on_send(now, seq, len);
                    if p.take_ask() {
                        s.writer.ask_again();
                    }
                }
                self.events.push_back(Event::DirectKept {
                    tag: tag.clone(),
                    node: d.node,
                });
                if !skip.contains(&d.node) {
                    skip.push(d.node);
                }
            }
        }
        if skip.len() < o.dests.len() {
            self.emit(now, tag, skip, Outgoing::Batch { count: 1, entries });
        }
        Ok(())
    }

    /// The record of the last offer will never be handed in (lost from the
    /// ring, or unreadable): the numbers its publisher may have used must
    /// not go to another datagram, so the streams offered start afresh.
    pub fn abandon_offer(&mut self, now: Instant, tag: &TagName) {
        let Some(o) = self.out.get_mut(tag) else {
            return;
        };
        let Some(offer) = o.offer.take() else {
            return;
        };
        let mut closed = Vec::new();
        for d in offer.dests {
            if o.reliable.get(&d.node).is_some_and(|s| s.id == d.stream) {
                o.reliable.remove(&d.node);
                closed.push((d.node, d.stream));
            }
        }
        for (node, id) in closed {
            self.close_stream(tag, node, id);
        }
        self.pump(now, tag);
    }
}

/// One destination as a send ticket carries it in shared memory: six
/// words the forwarder writes and the publisher reads, which is all they
/// share about it. The ticket itself (`tagwire_shm::Ticket`) treats the
/// words as opaque; this type is their only reader and writer.
///
/// ```text
///  word 0..1  address, 16 bytes (IPv4 as IPv4-mapped IPv6), little-endian halves
///  word 2     bits 0..16: port; bits 16..56: grant of a direct receiver (0: none);
///             bits 56..64: the packet class (`Priority::to_u8`)
///  word 3     stream id
///  word 4     sequence number the publisher's datagram takes
///  word 5     bits 0..63: sealing counter reserved by the forwarder (0 without
///             a domain key); bit 63: seal with the keys of the odd domain key
///             generation (a key roll)
/// ```
///
/// The words come from another process: [`TicketEntry::from_words`]
/// refuses what names no port, and a publisher skips such an entry (the
/// forwarder's window repairs the datagram it did not send).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketEntry {
    /// Where the publisher sends its copy, and as what.
    pub dest: OfferDest,
    /// Under a domain key, the grant (member id) of the direct receiver
    /// this copy is for: the publisher seals it with that holding's key.
    /// At most [`TicketEntry::MEMBER_MASK`]; zero for a node's daemon.
    pub member: u64,
    /// Under a domain key, the sealing counter reserved for this copy
    /// (never used twice, below 2⁶³); zero without a key.
    pub counter: u64,
    /// Under a domain key, whether the copy is sealed with a key of the
    /// odd generation (during a key roll the publisher sees the switch
    /// here, and asks for its new keys).
    pub odd: bool,
}

impl TicketEntry {
    /// How many words an entry takes (`tagwire_shm::TICKET_DEST_WORDS`).
    pub const WORDS: usize = 6;

    /// The bits of a grant an entry carries above the port.
    pub const MEMBER_MASK: u64 = (1 << 40) - 1;

    /// Word 5's bit for [`TicketEntry::odd`].
    const ODD_BIT: u64 = 1 << 63;

    /// The entry's words (see the type's diagram); a grant wider than
    /// [`TicketEntry::MEMBER_MASK`] is cut to it.
    pub fn to_words(&self) -> [u64; Self::WORDS] {
        let ip = match self.dest.addr.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let b = ip.octets();
        let mut hi = [0u8; 8];
        let mut lo = [0u8; 8];
        hi.copy_from_slice(&b[..8]);
        lo.copy_from_slice(&b[8..]);
        [
            u64::from_le_bytes(hi),
            u64::from_le_bytes(lo),
            u64::from(self.dest.addr.port())
                | (self.member & Self::MEMBER_MASK) << 16
                | u64::from(self.dest.priority.to_u8()) << 56,
            self.dest.stream,
            self.dest.seq,
            (self.counter & !Self::ODD_BIT) | if self.odd { Self::ODD_BIT } else { 0 },
        ]
    }

    /// Reads [`TicketEntry::to_words`] back (the node is the address's);
    /// `None` for port 0, which no destination has.
    pub fn from_words(w: [u64; Self::WORDS]) -> Option<Self> {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&w[0].to_le_bytes());
        b[8..].copy_from_slice(&w[1].to_le_bytes());
        let v6 = Ipv6Addr::from(b);
        let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
        let port = u16::try_from(w[2] & 0xffff).ok().filter(|p| *p != 0)?;
        Some(Self {
            dest: OfferDest {
                node: NodeAddr(ip),
                addr: SocketAddr::new(ip, port),
                stream: w[3],
                seq: w[4],
                // (Another process's word: a code it does not know is
                // the default class.)
                priority: Priority::from_u8((w[2] >> 56) as u8).unwrap_or_default(),
            },
            member: (w[2] >> 16) & Self::MEMBER_MASK,
            counter: w[5] & !Self::ODD_BIT,
            odd: w[5] & Self::ODD_BIT != 0,
        })
    }
}

/// A publisher's own first copy of an offered record (send ticket): the
/// batch of one the session keeps for resends, flagged as sent by the
/// publisher. The publisher's library builds it here, so datagrams between
/// nodes are only ever encoded by the session core.
#[derive(Debug, Default)]
pub struct DirectCopy {
    entries: Vec<u8>,
}

impl DirectCopy {
    /// Takes the record (its header as written in the ring, its payload);
    /// returns the datagram's length, to compare with [`Offer::max_len`].
    pub fn prepare(&mut self, tag: &TagName, header: &FrameHeader, payload: &[u8]) -> usize {
        self.entries.clear();
        push_batch_entry(&mut self.entries, &clean(header), payload);
        batch_len(tag, self.entries.len())
    }

    /// Encodes the prepared record's datagram for `dest` into `out`.
    pub fn encode(&self, tag: &TagName, dest: &OfferDest, out: &mut Vec<u8>) {
        out.clear();
        BatchRepr {
            seq: dest.seq,
            flags: FLAG_RELIABLE | FLAG_DIRECT,
            count: 1,
            tag,
            entries: &self.entries,
        }
        .encode(dest.stream, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwire_wire::datagram::{Body, Datagram};
    use tagwire_wire::{Pid, SenderInfo, SeqNum};

    #[test]
    fn a_ticket_entry_survives_its_words_with_its_grant_and_counter() {
        for (addr, priority) in [
            ("10.0.0.2:7402", Priority::Critical),
            ("[fe80::1]:7401", Priority::Dscp(63)),
        ] {
            let e = TicketEntry {
                dest: OfferDest {
                    priority,
                    node: NodeAddr(addr.parse::<SocketAddr>().unwrap().ip()),
                    addr: addr.parse().unwrap(),
                    stream: u64::MAX,
                    seq: 41,
                },
                member: 5,
                counter: 1 << 40,
                odd: false,
            };
            assert_eq!(TicketEntry::from_words(e.to_words()), Some(e));
            let e = TicketEntry {
                member: 0,
                counter: 0,
                ..e
            };
            assert_eq!(TicketEntry::from_words(e.to_words()), Some(e));
            // A key roll's generation rides above the counter.
            let e = TicketEntry {
                counter: (1 << 63) - 1,
                odd: true,
                ..e
            };
            assert_eq!(TicketEntry::from_words(e.to_words()), Some(e));
        }
        // The grant sits above the port and never changes it.
        let e = TicketEntry::from_words([0, 0, 7402 | (5 << 16), 1, 1, 9]).unwrap();
        assert_eq!((e.dest.addr.port(), e.member, e.counter), (7402, 5, 9));
        let wide = TicketEntry {
            member: u64::MAX,
            ..e
        };
        let back = TicketEntry::from_words(wide.to_words()).unwrap();
        assert_eq!(back.member, TicketEntry::MEMBER_MASK);
        // A wide grant never spills into the class, nor the class into it.
        assert_eq!(back.dest.priority, Priority::Normal);
        let classed = TicketEntry {
            dest: OfferDest {
                priority: Priority::High,
                ..e.dest
            },
            ..wide
        };
        let back = TicketEntry::from_words(classed.to_words()).unwrap();
        assert_eq!(
            (back.member, back.dest.priority),
            (TicketEntry::MEMBER_MASK, Priority::High)
        );
        // A class code another process made up is the default class.
        let e = TicketEntry::from_words([0, 0, 7402 | (0x7f << 56), 1, 1, 9]).unwrap();
        assert_eq!(e.dest.priority, Priority::Normal);
        // Words that name no port (another process wrote them) are refused.
        assert_eq!(TicketEntry::from_words([0; 6]), None);
    }

    #[test]
    fn a_direct_copy_is_a_reliable_batch_of_one_flagged_direct() {
        let tag = TagName::new("/t").unwrap();
        let header = FrameHeader {
            flags: FLAG_BLOB,
            sender: SenderInfo {
                pid: Pid(7),
                node: NodeAddr::LOCALHOST,
            },
            stream: 2,
            seq: SeqNum(9),
            timestamp_ns: 5,
        };
        let mut c = DirectCopy::default();
        let len = c.prepare(&tag, &header, b"hello");
        let dest = OfferDest {
            priority: Default::default(),
            node: NodeAddr::LOCALHOST,
            addr: "127.0.0.1:7402".parse().unwrap(),
            stream: 77,
            seq: 3,
        };
        let mut out = Vec::new();
        c.encode(&tag, &dest, &mut out);
        assert_eq!(out.len(), len);
        let dg = Datagram::decode(&out).unwrap();
        assert_eq!(dg.stream, 77);
        let Body::Batch(b) = dg.body else {
            panic!("not a batch")
        };
        assert_eq!((b.seq(), b.count()), (3, 1));
        assert_eq!(b.flags(), FLAG_RELIABLE | FLAG_DIRECT);
        let (h, p) = b.messages().next().unwrap();
        assert_eq!(p, b"hello");
        assert_eq!(h.flags & FLAG_BLOB, 0, "the ring's blob flag stays home");
        assert_eq!(h.seq, SeqNum(9));
    }
}
