//! Sending an item's datagrams into a reliable stream's window: as far as
//! the window, the congestion window, the bounds on unacknowledged
//! messages and bytes, and the receiver's credit allow, else why not.

use std::collections::VecDeque;
use std::time::Instant;

use tagwire_wire::datagram::FLAG_RELIABLE;
use tagwire_wire::{NodeAddr, TagName};

use super::item::{Outgoing, Piece};
use super::{Pending, RelStream, StreamTimer};
use crate::{Carrier, Class, Transmit, TxBuf};

/// Why a reliable stream takes no datagram now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blocked {
    Window,
    Credit,
    /// Its pacing controller's next release is later.
    Pace,
}

/// What sending an item's datagrams on a reliable stream needs beside the
/// stream and the item.
pub(super) struct Sending<'a> {
    pub(super) tag: &'a TagName,
    pub(super) now: Instant,
    /// Most payload bytes of a message's piece.
    pub(super) max: usize,
    pub(super) bounds: Unacked,
    /// How long a stream held back by credit waits before it asks again.
    pub(super) probe_after: std::time::Duration,
    pub(super) spare: &'a mut Vec<Vec<u8>>,
    pub(super) transmits: &'a mut VecDeque<Transmit>,
}

/// Sends what `p` still owes `node` on its stream `s`, as far as the
/// stream's window, bounds and credit allow; true once all of it went.
pub(super) fn send_pending(
    s: &mut RelStream,
    node: NodeAddr,
    p: &mut Pending,
    cx: &mut Sending<'_>,
) -> bool {
    let at = match p
        .sent
        .iter()
        .position(|(n, id, _)| *n == node && *id == s.id)
    {
        Some(i) => i,
        None => {
            p.sent.push((node, s.id, 0));
            p.sent.len() - 1
        }
    };
    // Woken for the pace's release, or later: how much later.
    if let Some(due) = s.timers.get(StreamTimer::Pace) {
        if due <= cx.now {
            s.late.sample(cx.now - due);
        }
    }
    s.timers.stop(StreamTimer::Pace);
    while p.sent[at].2 < p.datagrams {
        let piece = Piece {
            tag: cx.tag,
            out: &p.out,
            index: p.sent[at].2,
            max: cx.max,
        };
        match send_one(s, piece, cx.bounds, cx.now, cx.spare) {
            Ok(bytes) => {
                cx.transmits.push_back(Transmit {
                    dest: s.addr,
                    carrier: Carrier::Udp,
                    class: Class::Data,
                    priority: s.priority,
                    bytes,
                });
                p.sent[at].2 += 1;
            }
            Err(Blocked::Pace) => {
                // The timer moves it on (`poll_timeout`), not an answer.
                if let Some(at) = s.pacer.as_ref().and_then(|p| p.next_release()) {
                    s.timers.set(StreamTimer::Pace, at);
                }
                break;
            }
            Err(b) => {
                if b == Blocked::Credit && s.timers.get(StreamTimer::Probe).is_none() {
                    s.timers.set(StreamTimer::Probe, cx.now + cx.probe_after);
                }
                // Whatever holds it back, the reader's answer (progress,
                // credit) is what moves it on.
                s.writer.request_ack();
                break;
            }
        }
    }
    p.sent[at].2 == p.datagrams
}

/// The most a reliable stream may have unacknowledged ([`crate::Config`]'s
/// `max_unacked_messages` and `max_unacked_bytes`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Unacked {
    pub(super) messages: usize,
    pub(super) bytes: usize,
}

/// Sends `piece` on `s`, or says why it must wait.
fn send_one(
    s: &mut RelStream,
    piece: Piece<'_>,
    bounds: Unacked,
    now: Instant,
    spare: &mut Vec<Vec<u8>>,
) -> Result<TxBuf, Blocked> {
    let (max_msgs, max_bytes) = (bounds.messages, bounds.bytes);
    let w = &s.writer;
    let (messages, len) = piece.size();
    if messages > 0 {
        if let Some(c) = s.credit {
            let c = c as usize;
            // (Anything is allowed into an empty window with some credit,
            // or a batch larger than the credit would never go.)
            if c == 0 || (w.held_messages() > 0 && w.held_messages() + messages > c) {
                return Err(Blocked::Credit);
            }
        }
        // (A batch larger than either bound goes once the window is empty.)
        if w.occupancy() > 0 && w.held_messages() + messages > max_msgs {
            return Err(Blocked::Window);
        }
    }
    if w.occupancy() > 0 && w.held_bytes() + len > max_bytes {
        return Err(Blocked::Window);
    }
    if s.pacer.as_ref().is_some_and(|p| !p.may_send(now)) {
        return Err(Blocked::Pace);
    }
    let id = s.id;
    let write = |seq, buf: &mut Vec<u8>| piece.encode(id, seq, FLAG_RELIABLE, buf);
    // A message's own datagrams (the pieces of a large one) are shared
    // with the window, not copied; a batch of small messages is copied
    // into a spare buffer. Measured (alternated runs,
    // bench/results/stop40/ab-throughput): sharing 8 KiB messages' pieces
    // +11 %, sharing batches too -8 % at 256 B (why was not measured; the
    // window takes a buffer back only once the sender let go of it).
    let (seq, bytes) = match piece.out {
        Outgoing::Message { .. } => s
            .writer
            .send_shared(now, messages, write)
            .map(|(seq, bytes)| (seq, TxBuf::Shared(bytes))),
        Outgoing::Batch { .. } => s
            .writer
            .send_counted(now, messages, write)
            .map(|(seq, bytes)| (seq, TxBuf::Own(crate::copied(spare, bytes)))),
    }
    .map_err(|_| Blocked::Window)?;
    if let Some(p) = &mut s.pacer {
        p.on_send(now, seq, bytes.len());
        if p.take_ask() {
            // The law's K: a paced stream is answered every few datagrams,
            // not every `ack_every`, or the band would let that many queue.
            s.writer.ask_again();
        }
    }
    let w = &s.writer;
    if w.held_messages() * 2 > max_msgs || w.held_bytes() * 2 > max_bytes {
        // Half a bound used: ask the reader now (it acknowledges unasked
        // only every `ack_every` datagrams: a ring of 256 small messages
        // fills long before), so that its answer comes before the bound
        // holds the stream back. Once per answer. (The congestion window
        // asks when it is full.)
        s.writer.request_ack();
    }
    Ok(bytes)
}
