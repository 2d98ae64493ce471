//! The subscriber's side of direct delivery (`crate::direct`): taking
//! what its own socket's session queued, and sleeping on that socket while
//! the subscription holds the stream.

use std::time::{Duration, Instant};

use crate::direct::Direct;
use crate::gaps::Note;
use crate::{Error, Message, Result};

use super::{ring_spin, MessageInfo, Step, Subscriber};

impl Subscriber {
    /// The next message from the direct socket's queue, when the
    /// subscription is (`holding`) or is not the stream's holder (else
    /// nothing): a loss it counted comes first.
    pub(super) fn look_at_socket(
        &mut self,
        d: &Direct,
        holding: bool,
        payload: &mut Vec<u8>,
    ) -> Step {
        let mut st = d.lock();
        if !holding && st.overflowed > 0 {
            let dropped = st.dropped.replace(Vec::new());
            let mut lost = std::mem::take(&mut st.overflowed);
            // Counted here, the dropped messages are noted as if taken: a
            // message missing before or between them (lost on the way, or
            // when the streams moved) is counted too, once.
            let missing = self.gaps.note_dropped(dropped, lost, self.opts.qos.every);
            lost += missing;
            self.missing += missing;
            self.lost += lost;
            self.count();
            return Step::Done(Err(Error::Overflowed { lost }));
        }
        if !holding {
            d.recycle(&mut st, &mut self.spare);
        }
        if st.holder != holding {
            return Step::Nothing;
        }
        if holding {
            d.pump_if_due(&mut st);
        }
        let Some(m) = d.pop(&mut st) else {
            return Step::Nothing;
        };
        drop(st);
        match self.direct_message(m, payload) {
            Some(r) => Step::Done(r),
            None => Step::Again,
        }
    }

    /// Sleeps on the direct socket for at most `slice` if the subscription
    /// holds the stream (true; false: it does not, sleep on the ring).
    pub(super) fn wait_socket(&mut self, d: &Direct, slice: Duration) -> bool {
        let st = d.lock();
        if !st.holder {
            return false;
        }
        // A flowing stream looks at the socket a while before sleeping, as
        // at the ring: a sleeping reader is woken by its sender's send, and
        // the sender pays for that wake-up. It polls longer while its
        // sender's runs come soon after it gave up (`crate::socket_spin`,
        // with the figures).
        let spin = ring_spin(&self.opts, self.since_wait);
        let adapts = self.opts.busy_poll.is_none() && !spin.is_zero();
        let spin = if adapts {
            self.socket_spin.poll(self.opts.flow_poll)
        } else {
            spin
        };
        let began = Instant::now();
        if d.wait(st, slice, spin, self.opts.busy_poll.is_none()) {
            if adapts {
                let slept = began.elapsed().saturating_sub(spin);
                self.socket_spin.slept(self.opts.flow_poll, slept);
            }
            self.sleeps += 1;
            self.since_wait = 0;
        }
        true
    }

    /// A message that came by direct delivery, as `receive` hands it out:
    /// `None` if this subscription skips it (scaling, pulled already).
    pub(super) fn direct_message(
        &mut self,
        m: tagwire_session::Delivery,
        payload: &mut Vec<u8>,
    ) -> Option<Result<MessageInfo>> {
        let h = m.header;
        if !self.wanted(Some(&h)) {
            return None;
        }
        let every = self.opts.qos.every;
        let Note::Take(missing) =
            self.gaps
                .note(h.sender, h.stream, h.seq.0, h.timestamp_ns, every)
        else {
            // Its publisher's numbering went past it (see `crate::gaps`).
            self.spare.push(m.payload);
            return None;
        };
        let mut bytes = m.payload;
        let info = match crate::describe(&h, &mut bytes) {
            Ok(i) => i,
            Err(e) => return Some(Err(self.unreadable(&e, missing))),
        };
        if missing == 0 {
            // The caller's buffer goes back to the session for the next
            // small messages: no allocation per message.
            std::mem::swap(payload, &mut bytes);
            self.spare.push(bytes);
            self.received += 1;
            self.count();
            return Some(Ok(info));
        }
        // Report the gap first; the message comes next.
        self.backlog.push_front(Message::from_parts(bytes, info));
        self.lost += missing;
        self.missing += missing;
        self.count();
        Some(Err(Error::Overflowed { lost: missing }))
    }
}
