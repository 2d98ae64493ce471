//! Moving a tag's inbound streams from one receiving session to another on
//! the same node (direct delivery, docs/design.md §6): from the node's delivery
//! manager to its sole receiving process when the second one leaves, and
//! back when a second one subscribes.
//!
//! ```text
//!  old holder                        new holder                  sender
//!  export_inbound(tag) ──Handover──▶ import_inbound(now, tag, …)
//!   (tag away: its data is            reader from `next`, the
//!    dropped unacknowledged)          partial messages, credit;
//!                                     announces itself (AckNack)
//!                        the node's new address reaches the sender ──▶ set_routes
//!                                                                     (same node, new
//!                                                                      address): the
//!                                                                      stream keeps its
//!                                                                      numbers and sends
//!                                                                      what is unacked
//!                                                                      again, there
//! ```
//!
//! Nothing is lost, repeated or reordered: the old holder delivered every
//! seq before `next` and acknowledged no more (its out-of-order datagrams
//! were only selectively acknowledged, so the writer still holds them);
//! the new holder starts at `next`, with the messages whose first
//! fragments the old one had. Whatever reaches the old holder after the
//! export is dropped without an acknowledgement, so the writer sends it
//! again, to the new address once it has it.

use std::time::Instant;

use tagwire_reliable::{BestEffort, PartialMessage, Reader};
use tagwire_wire::handover::{PartialState, StreamState};
use tagwire_wire::TagName;

use crate::inbound::InStream;
use crate::ReceiveSession;

/// Most streams one [`ReceiveSession::import_inbound`] takes (a handover may come
/// from another process); the rest are ignored and start afresh.
pub use tagwire_wire::handover::MAX_STREAMS as MAX_HANDOVER_STREAMS;

/// One inbound stream of a tag as it moves between two receiving sessions
/// of one node: plain data, the same between sessions of one process and
/// (encoded by `tagwire_wire::handover`) between processes. `next` is the
/// first seq the new holder delivers: every one before it was delivered by
/// the old holder (or, for best effort, skipped and counted there); 0: any
/// (a best-effort stream not yet seen). `partials` are the messages the old
/// holder had some fragments of.
pub type Handover = StreamState;

impl ReceiveSession {
    /// Gives up `tag`'s inbound streams to another session of this node:
    /// returns their state and from now on drops the tag's data here
    /// unacknowledged (the sender sends it again to the new holder). Take
    /// what [`ReceiveSession::poll_deliver`] holds first: it stays here.
    pub fn export_inbound(&mut self, tag: &TagName) -> Vec<Handover> {
        self.away.insert(tag.clone());
        let keys: Vec<_> = self
            .streams
            .iter()
            .filter(|(_, s)| s.tag.as_ref() == Some(tag))
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(mut s) = self.streams.remove(&key) else {
                continue;
            };
            let reliable = s.reliable.unwrap_or(true);
            out.push(Handover {
                sender: key.0,
                id: key.1,
                reply: s.reply,
                reliable,
                next: if reliable {
                    s.reader.next_to_deliver()
                } else {
                    s.best.next()
                },
                partials: s
                    .reasm
                    .take_partials()
                    .into_iter()
                    .map(partial_state)
                    .collect(),
            });
            self.away_streams.insert(key, tag.clone());
        }
        out
    }

    /// Takes `tag`'s inbound streams over from another session of this
    /// node ([`ReceiveSession::export_inbound`]); the tag is received here again.
    /// Each reliable stream announces its state to its sender at once.
    pub fn import_inbound(&mut self, now: Instant, tag: &TagName, streams: Vec<Handover>) {
        self.away.remove(tag);
        self.away_streams.retain(|_, t| t != tag);
        let (reader, reasm) = (self.config.reader, self.config.reassembler);
        for h in streams.into_iter().take(MAX_HANDOVER_STREAMS) {
            let key = (h.sender, h.id);
            let mut s = InStream::new(reader, reasm, now);
            s.tag = Some(tag.clone());
            s.reply = h.reply.filter(|r| r.ip() == h.sender);
            s.reliable = Some(h.reliable);
            if h.reliable {
                s.reader = Reader::with_start(reader, h.next.max(1));
            } else {
                s.best = BestEffort::with_start(h.next);
            }
            for p in h.partials {
                if p.tag == *tag {
                    s.reasm.put_partial(partial_message(p));
                }
            }
            if h.reliable {
                s.reader.request_ack();
            }
            self.streams.insert(key, s);
            if h.reliable {
                self.ack(now, key);
            }
        }
    }

    /// Receives `tag` here again without taking streams over (a handover
    /// that did not happen): its next datagrams start new streams.
    pub fn accept_inbound(&mut self, tag: &TagName) {
        self.away.remove(tag);
        self.away_streams.retain(|_, t| t != tag);
    }

    /// Whether `tag`'s inbound streams were given up
    /// ([`ReceiveSession::export_inbound`]).
    pub fn is_away(&self, tag: &TagName) -> bool {
        self.away.contains(tag)
    }
}

/// A partial message as a handover carries it (from the reassembler's
/// form: pieces by index).
fn partial_state(p: PartialMessage) -> PartialState {
    PartialState {
        first_seq: p.first_seq,
        frags: p.frags,
        msg_len: p.msg_len,
        header: p.header,
        tag: p.tag,
        pieces: p.pieces.into_iter().collect(),
    }
}

/// Back to the reassembler's form (from another process: the reassembler
/// checks it again when it takes it).
fn partial_message(p: PartialState) -> PartialMessage {
    PartialMessage {
        first_seq: p.first_seq,
        frags: p.frags,
        msg_len: p.msg_len,
        header: p.header,
        tag: p.tag,
        pieces: p.pieces.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::net::{IpAddr, SocketAddr};
    use tagwire_wire::frame::FrameHeader;
    use tagwire_wire::{NodeAddr, Pid, SenderInfo, SeqNum};

    #[test]
    fn a_handover_crosses_processes_unchanged() {
        let tag = TagName::new("/robot/scan").unwrap();
        let partial = PartialMessage {
            first_seq: 41,
            frags: 3,
            msg_len: 150_000,
            header: FrameHeader {
                flags: 0,
                sender: SenderInfo {
                    pid: Pid(12),
                    node: NodeAddr(IpAddr::from([10, 1, 0, 2])),
                },
                stream: 1,
                seq: SeqNum(9),
                timestamp_ns: 5,
            },
            tag: tag.clone(),
            pieces: BTreeMap::from([(0, vec![7; 60_000]), (2, vec![8; 30_000])]),
        };
        let h = Handover {
            sender: IpAddr::from([10, 1, 0, 2]),
            id: 77,
            reply: Some(SocketAddr::from(([10, 1, 0, 2], 7402))),
            reliable: true,
            next: 41,
            partials: vec![partial_state(partial.clone())],
        };
        let bytes = tagwire_wire::handover::encode(std::slice::from_ref(&h));
        let back = tagwire_wire::handover::decode(&bytes).unwrap();
        assert_eq!(back, vec![h]);
        // And back to the reassembler's form, piece for piece.
        let p = back.into_iter().next().unwrap().partials.remove(0);
        assert_eq!(partial_message(p), partial);
    }
}
