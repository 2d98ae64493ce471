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

use std::time::Instant;

use tagwire_wire::datagram::{batch_len, push_batch_entry, BATCH_ENTRY_OVERHEAD};
use tagwire_wire::frame::{FrameHeader, FLAG_BLOB};
use tagwire_wire::TagName;

use crate::outbound::{batch_ref, clean, left_out, Outgoing};
use crate::{
    Carrier, Class, Event, Held, Mode, Offer, OfferDest, Session, TicketOutcome, Transmit,
};

impl Session {
    /// Offers the next record of `tag` to its publisher (send ticket), if
    /// every reliable node can take it now: its stream has sent before (so
    /// the node knows where to answer), has room for a batch datagram,
    /// credit for one message, and does not scale the tag down; at most
    /// `max_dests` of them. The session remembers the offer until the next
    /// record is handed in.
    pub fn offer(&mut self, tag: &TagName, max_dests: usize) -> Option<Offer> {
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
                && s.credit.is_none_or(|c| w.held_messages() < c as usize);
            if t.every > 1 || w.next_seq() <= 1 || !room || dests.len() == max_dests {
                return None;
            }
            dests.push(OfferDest {
                node: t.node,
                addr: s.addr,
                stream: s.id,
                seq: w.next_seq(),
            });
        }
        if dests.is_empty() {
            return None;
        }
        let offer = Offer {
            max_len: o.batch_limit,
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
    /// [`Session::handle_record`].
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
            let (id, addr) = (s.id, s.addr);
            let kept = s.writer.send_sent(now, 1, |seq, out| {
                batch_ref(tag, seq, 1, &entries).encode(id, out)
            });
            if let Ok((_, bytes)) = kept {
                if outcome == TicketOutcome::Abandoned {
                    self.transmits.push_back(Transmit {
                        dest: addr,
                        carrier: Carrier::Udp,
                        class: Class::Data,
                        bytes: bytes.to_vec(),
                    });
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
