//! Direct delivery at the receiving node (docs/design.md §6).
//!
//! While a tag has exactly one receiving process on this node, with the
//! default carrier and its own socket, and no publisher here
//! (`tagwire_session::plan::direct_port`, which every node evaluates alike
//! from the table), other nodes send the tag's stream straight to that
//! process's socket: one wake-up per message instead of two. Its library
//! runs the same session core there. This module moves the tag's inbound
//! streams between the delivery port's session and that process, so
//! nothing is lost, repeated or reordered across the switch
//! (`tagwire_session::Handover`):
//!
//! ```text
//!  table change (under the state lock, before it is replicated)
//!   ├─ none → client C:  Give: the port's session exports the tag (its data
//!   │                    is dropped unacknowledged from now on) and, once
//!   │                    the messages it held back for a lossless subscriber
//!   │                    are all in the ring (C reads the ring first), sends
//!   │                    C `Streams` with them; C imports and receives.
//!   └─ client C → none:  Expect: the port's session drops the tag's data
//!                        unacknowledged and sends C `GiveStreams`; C
//!                        exports and answers `Streams`; Import takes them
//!                        over. A C that left, or does not answer in
//!                        EXPECT_FOR, is not waited for (Accept: new
//!                        streams start).
//! ```
//!
//! The commands reach the port's inbound thread, which owns the session,
//! through a queue and an empty datagram that wakes it; it takes them
//! before the next datagram it handles. That thread alone sends a client
//! its `Streams` and `GiveStreams`, in the order of the table changes: a
//! `GiveStreams` sent at the table change could overtake the `Streams`
//! of the change before it, and the client would hold streams the daemon
//! took back (asleep on its socket while its data comes to the ring).
//! Since the table change reaches other nodes only after this, their data
//! for the new holder comes after the holder has its streams.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tagwire_proto::{ClientId, Holder, Role};
use tagwire_session::plan::{direct_port, Plan};
use tagwire_session::{Handover, ReceiveSession};
use tagwire_wire::control::{Message, Request};
use tagwire_wire::handover::StreamState;
use tagwire_wire::{NodeAddr, TagId, TagName};

use crate::guard::Guard;
use crate::outbox::OutTx;
use crate::{lock, State};

/// How long the port's session waits for a client's streams before it
/// starts new ones (the client died or hangs; its unacknowledged data
/// comes again from the senders, a best-effort gap is counted).
pub(crate) const EXPECT_FOR: Duration = Duration::from_secs(1);

/// What the delivery port's inbound thread does for direct delivery.
#[derive(Debug)]
pub(crate) enum Cmd {
    /// Give the tag's streams to the client behind `to`.
    Give { tag: TagName, id: TagId, to: OutTx },
    /// Ask the tag's direct receiver `client` (behind `to`) for the
    /// streams back, and drop the tag's data unacknowledged until they
    /// come. Asked from here, not when the table changed, so that the
    /// client gets it after the `Streams` of an earlier `Give`, never
    /// before (it would then hold streams the daemon took back, and wait
    /// on its socket for data that goes to its ring).
    Expect {
        tag: TagName,
        id: TagId,
        client: ClientId,
        to: OutTx,
    },
    /// They came.
    Import {
        tag: TagName,
        streams: Vec<Handover>,
    },
    /// Receive the tag here again, afresh.
    Accept { tag: TagName },
}

/// What the delivery port's inbound thread waits for: streams a client is
/// to hand back (until when), and streams given away that wait until the
/// tag's held-back messages are in its ring.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    expecting: HashMap<TagName, Instant>,
    giving: Vec<(TagName, TagId, OutTx, Vec<StreamState>)>,
}

/// The direct receivers of this node and the commands on their way.
#[derive(Debug, Default)]
pub(crate) struct Direct {
    cmds: std::sync::Mutex<VecDeque<Cmd>>,
    /// Commands were queued since the inbound thread last looked (it
    /// takes no lock for direct delivery on a datagram otherwise).
    queued: std::sync::atomic::AtomicBool,
    /// This node's direct receiver per tag.
    holders: std::sync::Mutex<HashMap<TagId, (ClientId, TagName)>>,
    /// `GiveStreams` sent and not answered: tag → client.
    asked: std::sync::Mutex<HashMap<TagId, ClientId>>,
}

/// Under a domain key, hands the holding keys of `tag` (`id`) to its direct
/// receiver `client` (behind `out`). A new holding (`fresh`): the
/// generation sealed with now, alone, then during a key roll the other one
/// beside it. A key roll moving on: each key beside what the holder has,
/// or, once the roll is over, the one left alone (so the holder never
/// lacks a key that still opens). Returns false when the node is keyed and
/// the client holds no grant of the tag (no key, so no streams either).
fn give_holding(
    st: &State,
    guard: &Guard,
    out: &crate::Outbox,
    (id, tag): (TagId, &TagName),
    client: ClientId,
    fresh: bool,
) -> bool {
    let member = st.table.entry_by_id(id).and_then(|e| {
        e.rights(Role::Receiver)
            .iter()
            .find(|r| r.holder == Holder::Local(client))
            .map(|r| r.key.id)
    });
    let Some((keys, encrypt)) = member.and_then(|m| guard.holding(tag, m)) else {
        return !guard.is_keyed();
    };
    let alone = keys.len() == 1;
    for (i, key) in keys.into_iter().enumerate() {
        let give = Message::Request {
            id: 0,
            body: Request::Holding {
                tag: id,
                key: key.to_bytes(),
                encrypt,
                odd: key.odd(),
                also: if fresh { i > 0 } else { !alone },
            },
        };
        if out.tx.try_send((give.encode(), None, Vec::new())).is_err() {
            tracing::warn!(%tag, "cannot hand a holding key over");
        }
    }
    true
}

/// This node's direct receiver of `e`, if it has one (see the module docs).
pub(crate) fn holder(me: NodeAddr, e: &tagwire_proto::Entry, plan: &Plan) -> Option<ClientId> {
    let receivers = e
        .rights(Role::Receiver)
        .iter()
        .map(|r| (r.key.node, r.qos, r.holder));
    let senders = e.rights(Role::Sender).iter().map(|r| r.key.node);
    match direct_port(me, receivers, senders, plan.feeds_others(me)) {
        Some((Holder::Local(c), _)) => Some(c),
        _ => None,
    }
}

impl Direct {
    /// A key roll moved on (under the state lock): every direct receiver
    /// here gets its holding's keys again (the window and counters of its
    /// holding go on; see `tagwire_auth::Holder::give`).
    pub(crate) fn rekey(&self, st: &State, guard: &Guard) {
        for (id, (client, tag)) in lock(&self.holders).iter() {
            if let Some(out) = st.clients.get(client) {
                give_holding(st, guard, out, (*id, tag), *client, false);
            }
        }
    }

    /// After a table change (under the state lock): switches the tags
    /// whose direct receiver changed. Returns whether commands were queued
    /// (the inbound thread is to be woken).
    pub(crate) fn switch(
        &self,
        st: &State,
        guard: &Guard,
        now: HashMap<TagId, (ClientId, TagName)>,
    ) -> bool {
        self.switch_with(
            now,
            |id, old| {
                let still = st.table.entry_by_id(id).is_some_and(|e| {
                    e.rights(Role::Receiver)
                        .iter()
                        .any(|r| r.holder == Holder::Local(old))
                });
                st.clients
                    .get(&old)
                    .filter(|_| still)
                    .map(|out| out.tx.clone())
            },
            |id, tag, new| {
                let out = st.clients.get(&new)?;
                // Under a domain key, first its holding's key (the same
                // channel: it comes before the streams). Its grant gone:
                // no key, so no streams either.
                give_holding(st, guard, out, (id, tag), new, true).then(|| out.tx.clone())
            },
        )
    }

    /// [`Direct::switch`] without the daemon's state: `asked(tag, old)`
    /// is the outbox of an old holder still subscribed (to ask for its
    /// streams back), `given(tag, name, new)` that of a new holder, having
    /// handed it its holding's key. Queues commands only: what the clients
    /// get, the inbound thread sends (see the module's description).
    fn switch_with(
        &self,
        now: HashMap<TagId, (ClientId, TagName)>,
        asked: impl Fn(TagId, ClientId) -> Option<OutTx>,
        mut given: impl FnMut(TagId, &TagName, ClientId) -> Option<OutTx>,
    ) -> bool {
        let mut holders = lock(&self.holders);
        let mut cmds = lock(&self.cmds);
        let before = cmds.len();
        for (id, (old, tag)) in holders.iter() {
            if now.get(id).is_some_and(|(c, _)| c == old) {
                continue;
            }
            match asked(*id, *old) {
                Some(to) => cmds.push_back(Cmd::Expect {
                    tag: tag.clone(),
                    id: *id,
                    client: *old,
                    to,
                }),
                None => cmds.push_back(Cmd::Accept { tag: tag.clone() }),
            }
        }
        for (id, (new, tag)) in &now {
            if holders.get(id).is_some_and(|(c, _)| c == new) {
                continue;
            }
            if let Some(to) = given(*id, tag, *new) {
                cmds.push_back(Cmd::Give {
                    tag: tag.clone(),
                    id: *id,
                    to,
                });
            }
        }
        *holders = now;
        let more = cmds.len() > before;
        if more {
            self.queued.store(true, Ordering::Release);
        }
        more
    }

    /// A client's `Streams` answering `GiveStreams`: taken only from the
    /// client that was asked, once. Returns whether it was.
    pub(crate) fn answered(
        &self,
        client: ClientId,
        id: TagId,
        tag: TagName,
        streams: Vec<Handover>,
    ) -> bool {
        let mut asked = lock(&self.asked);
        if asked.get(&id) != Some(&client) {
            return false;
        }
        asked.remove(&id);
        lock(&self.cmds).push_back(Cmd::Import { tag, streams });
        self.queued.store(true, Ordering::Release);
        true
    }

    /// Runs the queued commands on the delivery port's session (its inbound
    /// thread); starts new streams for tags waited for too long; sends the
    /// streams given away once the tag holds nothing back (`drained`).
    pub(crate) fn apply(
        &self,
        session: &mut ReceiveSession,
        now: Instant,
        w: &mut Waiting,
        mut drained: impl FnMut(&TagName) -> bool,
    ) {
        if !self.queued.swap(false, Ordering::AcqRel)
            && w.expecting.is_empty()
            && w.giving.is_empty()
        {
            return;
        }
        let cmds: Vec<Cmd> = lock(&self.cmds).drain(..).collect();
        for cmd in cmds {
            tracing::debug!(?cmd, "direct: command");
            match cmd {
                Cmd::Give { tag, id, to } => {
                    lock(&self.asked).remove(&id);
                    w.expecting.remove(&tag);
                    let streams = session.export_inbound(&tag);
                    w.giving.retain(|g| g.0 != tag);
                    w.giving.push((tag, id, to, streams));
                }
                Cmd::Expect {
                    tag,
                    id,
                    client,
                    to,
                } => {
                    // Already away since its Give; a stream begun here since
                    // (a sender that had not heard) is dropped with it.
                    let _ = session.export_inbound(&tag);
                    // Streams not sent yet are not sent at all.
                    w.giving.retain(|g| g.0 != tag);
                    let ask = Message::Request {
                        id: id.0.max(1),
                        body: Request::GiveStreams { tag: id },
                    };
                    // (Asked before it can answer.)
                    lock(&self.asked).insert(id, client);
                    if to.try_send((ask.encode(), None, Vec::new())).is_ok() {
                        w.expecting.insert(tag, now + EXPECT_FOR);
                    } else {
                        // Gone or stuck: not waited for.
                        lock(&self.asked).remove(&id);
                        w.expecting.remove(&tag);
                        session.accept_inbound(&tag);
                    }
                }
                Cmd::Import { tag, streams } => {
                    if w.expecting.remove(&tag).is_some() {
                        session.import_inbound(now, &tag, streams);
                    }
                }
                Cmd::Accept { tag } => {
                    w.expecting.remove(&tag);
                    w.giving.retain(|g| g.0 != tag);
                    session.accept_inbound(&tag);
                }
            }
        }
        // The receiver reads the ring before its socket: what this session
        // delivered must all be in the ring before the receiver holds the
        // streams, or a held-back message would come after newer ones.
        w.giving.retain(|(tag, id, to, streams)| {
            if !drained(tag) {
                return true;
            }
            let bytes = tagwire_wire::handover::encode(streams);
            match tagwire_unix::sealed_memfd("tagwire-streams", &bytes) {
                Ok(fd) => {
                    let take = Message::Request {
                        id: 0,
                        body: Request::Streams { tag: *id, query: 0 },
                    };
                    if to.try_send((take.encode(), Some(fd), Vec::new())).is_err() {
                        tracing::warn!(%tag, "direct receiver gone before its streams");
                    }
                }
                Err(e) => tracing::warn!(%tag, error = %e, "cannot hand streams over"),
            }
            false
        });
        w.expecting.retain(|tag, until| {
            if *until > now {
                return true;
            }
            tracing::warn!(%tag, "direct receiver did not hand its streams back; starting new ones");
            session.accept_inbound(tag);
            false
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use tagwire_session::Config;
    use tagwire_unix::SeqPacket;

    use super::*;
    use crate::outbox::Wake;

    /// A node's direct receivers, its delivery port's session, and client
    /// 3: its outbox and both ends of its socket.
    struct Rig {
        d: Direct,
        session: ReceiveSession,
        w: Waiting,
        tx: OutTx,
        daemon: SeqPacket,
        client: SeqPacket,
    }

    impl Rig {
        fn new() -> Rig {
            let efd = rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK).unwrap();
            let (daemon, client) = SeqPacket::pair().unwrap();
            Rig {
                d: Direct::default(),
                session: ReceiveSession::new(Config::default()),
                w: Waiting::default(),
                tx: OutTx::new(ClientId(3), None, Arc::new(Wake::new(efd))),
                daemon,
                client,
            }
        }

        /// The inbound thread's pass, the tag's held-back messages all in
        /// its ring (`drained`) or not; `during` runs as it looks.
        fn apply(&mut self, drained: bool, during: impl Fn(&Direct, &OutTx)) {
            let Rig {
                d, session, w, tx, ..
            } = self;
            d.apply(session, Instant::now(), w, |_| {
                during(d, tx);
                drained
            });
        }

        /// The requests the client got so far (written out as the local
        /// manager's loop does).
        fn got(&self) -> Vec<Request> {
            use rustix::event::{poll, PollFd, PollFlags, Timespec};
            self.tx.write_out(&self.daemon).unwrap();
            let mut out = Vec::new();
            let zero = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            while poll(&mut [PollFd::new(&self.client, PollFlags::IN)], Some(&zero)).unwrap() > 0 {
                let p = self.client.recv(1 << 16).unwrap().unwrap();
                match Message::decode(&p.data).unwrap() {
                    Message::Request { body, .. } => out.push(body),
                    m => panic!("not a request: {m:?}"),
                }
            }
            out
        }
    }

    fn tag() -> (TagName, TagId) {
        (TagName::new("/direct/switch").unwrap(), TagId(9))
    }

    /// Client 3 becomes the tag's direct receiver (`true`) or stops being
    /// it, as a table change says.
    fn switch(d: &Direct, tx: &OutTx, holds: bool) -> bool {
        let (name, id) = tag();
        let now = match holds {
            true => HashMap::from([(id, (ClientId(3), name))]),
            false => HashMap::new(),
        };
        d.switch_with(now, |_, _| Some(tx.clone()), |_, _, _| Some(tx.clone()))
    }

    #[test]
    fn a_give_back_asked_while_the_streams_went_out_reaches_the_client_after_them() {
        let mut r = Rig::new();
        let (name, id) = tag();
        assert!(switch(&r.d, &r.tx, true));
        // The table changes back (a publisher on the node) while the
        // inbound thread is about to send the streams.
        r.apply(true, |d, tx| assert!(switch(d, tx, false)));
        r.apply(true, |_, _| {});
        let got = r.got();
        assert!(
            matches!(
                got[..],
                [
                    Request::Streams { tag: a, query: 0 },
                    Request::GiveStreams { tag: b }
                ] if a == id && b == id
            ),
            "{got:?}"
        );
        // Its answer is taken, once.
        assert!(r.d.answered(ClientId(3), id, name.clone(), Vec::new()));
        assert!(!r.d.answered(ClientId(3), id, name, Vec::new()));
    }

    #[test]
    fn streams_still_waiting_when_the_give_back_comes_are_never_sent() {
        let mut r = Rig::new();
        let (_, id) = tag();
        switch(&r.d, &r.tx, true);
        // Held back for a lossless subscriber: not drained yet.
        r.apply(false, |_, _| {});
        assert!(r.got().is_empty());
        switch(&r.d, &r.tx, false);
        assert!(r.got().is_empty(), "asked by the inbound thread");
        r.apply(true, |_, _| {});
        r.apply(true, |_, _| {});
        let got = r.got();
        assert!(
            matches!(got[..], [Request::GiveStreams { tag: b }] if b == id),
            "{got:?}"
        );
    }

    #[test]
    fn a_client_that_cannot_be_asked_is_not_waited_for() {
        let mut r = Rig::new();
        let (name, id) = tag();
        switch(&r.d, &r.tx, true);
        r.apply(true, |_, _| {});
        r.tx.close();
        switch(&r.d, &r.tx, false);
        r.apply(true, |_, _| {});
        assert!(r.w.expecting.is_empty());
        assert!(!r.d.answered(ClientId(3), id, name, Vec::new()));
    }
}
