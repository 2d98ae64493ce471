//! Granting a right: the tag's segments and the position the endpoint
//! starts at; for a subscriber, its seat in the ring (what it writes, see
//! `tagwire_shm::Seat`) and, when lossless, the gate held for it there.

use std::sync::Arc;

use tagwire_shm::{RingError, Seat};

use super::*;

/// A local subscription's seat in its tag's ring and the lossless gate the
/// daemon holds for it (gate index, pid written). Both end with the
/// subscription: on Unsubscribe, or when the client goes.
#[derive(Debug)]
pub(crate) struct Sitting {
    tag: tagwire_wire::TagId,
    seat: Arc<Seat>,
    gate: Option<(usize, u32)>,
}

impl Sitting {
    /// The subscription's tag.
    pub(crate) fn tag(&self) -> tagwire_wire::TagId {
        self.tag
    }
}

/// Ends the seats of `client` (on `tag`, or all; the one of generation
/// `seat`, or all): frees their gates and takes them out of their rings'
/// directories.
pub(crate) fn leave_seats(
    st: &mut State,
    client: ClientId,
    tag: Option<tagwire_wire::TagId>,
    seat: Option<u32>,
) {
    let Some(list) = st.seats.get_mut(&client) else {
        return;
    };
    let (gone, keep): (Vec<_>, Vec<_>) = list.drain(..).partition(|s| {
        tag.is_none_or(|t| t == s.tag) && seat.is_none_or(|g| g == s.seat.generation())
    });
    for s in gone {
        let Some(ring) = st.rings.get(&s.tag) else {
            continue;
        };
        if let Some((idx, pid)) = s.gate {
            if ring.release_held_gate(idx, pid) {
                tracing::debug!(
                    tag = s.tag.0,
                    gate = idx,
                    "freed a subscriber's lossless gate"
                );
            }
        }
        ring.retire_seat(&s.seat);
    }
    if keep.is_empty() {
        st.seats.remove(&client);
    } else {
        st.seats.insert(client, keep);
    }
}

/// Sends `seat` of `tag` to `client`, which may write the tag (see
/// `Request::Seat`). A client whose queue is full is being disconnected.
fn send_seat(st: &State, client: ClientId, tag: tagwire_wire::TagId, seat: &Seat) {
    let Some(out) = st.clients.get(&client) else {
        return;
    };
    let fd = match seat.segment().as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!(error = %e, "cannot duplicate a seat descriptor");
            return;
        }
    };
    let body = Request::Seat {
        tag,
        seat: seat.generation(),
    };
    let bytes = Message::Request { id: 0, body }.encode();
    if out.tx.try_send((bytes, Some(fd), Vec::new())).is_err() {
        tracing::debug!(
            client = client.0,
            "seat not sent: the client's queue is full"
        );
    }
}

/// Sends a new publisher every seat of `tag` (after its grant's answer).
pub(super) fn send_seats_to(st: &State, client: ClientId, tag: tagwire_wire::TagId) {
    for s in st.seats.values().flatten().filter(|s| s.tag == tag) {
        send_seat(st, client, tag, &s.seat);
    }
}

/// Who a right is granted to (see `open`).
pub(super) enum Opening {
    Publisher,
    Subscriber {
        client: ClientId,
        /// The subscriber's pid, whose lossless gate (if `lossless`) the
        /// daemon holds.
        pid: u32,
        lossless: bool,
    },
}

/// Grants a right on `name` (`grant`), with the tag's segments and the ring
/// position it starts at. A publisher gets them writable. A subscriber gets
/// them read-only, and in `extra` after the control segment a seat of its
/// own; for a lossless one, a lossless gate held at its start position
/// first (read from its seat), so no writer laps it before it reads.
pub(super) fn open(
    shared: &Shared,
    st: &mut State,
    name: &TagName,
    ops: &mut Vec<TableOp>,
    who: Opening,
    extra: &mut Vec<OwnedFd>,
    grant: impl FnOnce(&mut State, tagwire_wire::TagId) -> Result<Change, TableError>,
) -> (Response, Option<OwnedFd>) {
    let (sub, reader) = match who {
        Opening::Publisher => (None, false),
        Opening::Subscriber {
            client,
            pid,
            lossless,
        } => (Some((client, pid, lossless)), true),
    };
    let Some(entry) = st.table.entry(name) else {
        return error(
            ErrorCode::UnknownTag,
            format!("unknown tag {name}: create it first (create_tag / `tagwire pub` creates it)"),
        );
    };
    // Read under the lock, before the grant is visible to anyone: a publisher
    // that sees this receiver counted publishes at or after `start`.
    let start = st.rings.get(&entry.id).map_or(0, Ring::head_index);
    if sub.is_some() {
        if let Err(q) = crate::quota::descriptors_for_seat() {
            return error(ErrorCode::Quota, q.message());
        }
    }
    let seat = match (sub, st.rings.get(&entry.id)) {
        (Some(_), Some(ring)) => match ring.create_seat() {
            Ok(seat) => Some(seat),
            Err(RingError::NoSeat) => {
                return error(
                    ErrorCode::Quota,
                    format!(
                        "tag {name} has {} subscriptions on this node already, the most one \
                         ring seats: unsubscribe some first",
                        tagwire_shm::MAX_SEATS
                    ),
                )
            }
            Err(e) => return error(ErrorCode::Internal, format!("cannot create a seat: {e}")),
        },
        _ => None,
    };
    // No room for another lossless gate: the client says so (no gate held).
    let gate = sub
        .zip(seat.as_ref())
        .and_then(|((_, pid, lossless), seat)| {
            if !lossless {
                return None;
            }
            let idx = st
                .rings
                .get(&entry.id)?
                .hold_lossless_gate_for_seat(start, pid, seat)
                .ok()?;
            Some(HeldGate {
                index: u8::try_from(idx).ok()?,
                pid,
            })
        });
    let opened = TagOpened {
        tag: entry.id,
        name: entry.name.clone(),
        domain: entry.domain,
        ring: entry.ring,
        start,
        gate,
    };
    let tag_id = entry.id;
    let free_gate = |st: &State| {
        if let Some(ring) = st.rings.get(&tag_id) {
            if let Some(g) = gate {
                ring.release_held_gate(usize::from(g.index), g.pid);
            }
            if let Some(seat) = &seat {
                ring.retire_seat(seat);
            }
        }
    };
    // A subscriber gets the records and the control segment read-only (it
    // may read the tag, not write it) and its seat; a publisher both
    // segments writable.
    let fds = st.rings.get(&opened.tag).map(|r| {
        let segments = if reader {
            r.segment()
                .read_only_fd()
                .and_then(|d| Ok((d, r.control().read_only_fd()?)))
                .map_err(std::io::Error::other)
        } else {
            r.segment()
                .as_fd()
                .try_clone_to_owned()
                .and_then(|d| Ok((d, r.control().as_fd().try_clone_to_owned()?)))
        };
        let seat = seat
            .as_ref()
            .map(|s| s.segment().as_fd().try_clone_to_owned())
            .transpose();
        segments.and_then(|(d, c)| Ok((d, c, seat?)))
    });
    let (fd, ctl, seat_fd) = match fds {
        Some(Ok(both)) => both,
        Some(Err(e)) => {
            free_gate(st);
            return error(
                ErrorCode::Internal,
                format!("cannot duplicate segment descriptor: {e}"),
            );
        }
        None => {
            free_gate(st);
            return error(ErrorCode::Internal, "tag has no segment");
        }
    };
    match grant(st, opened.tag) {
        Ok(c) => {
            if let (Some((client, _, _)), Some(seat)) = (sub, seat) {
                // Every process that may write the tag wakes this
                // subscriber and reads its gate from now on.
                let writers: Vec<ClientId> = st
                    .clients
                    .keys()
                    .copied()
                    .filter(|&c| st.table.is_sender(opened.tag, c))
                    .collect();
                for w in writers {
                    send_seat(st, w, opened.tag, &seat);
                }
                st.seats.entry(client).or_default().push(Sitting {
                    tag: opened.tag,
                    seat,
                    gate: gate.map(|g| (usize::from(g.index), g.pid)),
                });
            }
            update::effects(shared, st, &c.updates);
            ops.extend(c.ops);
            // (Only with a grant: the control segment is no right to have.)
            extra.push(ctl);
            extra.extend(seat_fd);
            (Response::TagOpened(opened), Some(fd))
        }
        Err(e) => {
            free_gate(st);
            table_error(e)
        }
    }
}
