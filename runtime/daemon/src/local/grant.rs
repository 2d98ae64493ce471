//! Granting a right: the tag's segment and the position the endpoint
//! starts at, and the lossless gates held for clients until they take them
//! over.

use super::*;

/// Frees the gates held for `client` (on `tag`, or all) that it did not take
/// over: an abandoned or failed lossless subscription must not hold writers.
pub(crate) fn release_held_gates(
    st: &mut State,
    client: ClientId,
    tag: Option<tagwire_wire::TagId>,
) {
    let Some(list) = st.held_gates.get_mut(&client) else {
        return;
    };
    let mut keep = Vec::new();
    for (t, idx, pid) in list.drain(..) {
        if tag.is_some_and(|x| x != t) {
            keep.push((t, idx, pid));
            continue;
        }
        if let Some(ring) = st.rings.get(&t) {
            if ring.release_held_gate(idx, pid) {
                tracing::debug!(
                    tag = t.0,
                    gate = idx,
                    "freed a lossless gate its client never took over"
                );
            }
        }
    }
    if keep.is_empty() {
        st.held_gates.remove(&client);
    } else {
        st.held_gates.insert(client, keep);
    }
}

/// Who a right is granted to (see `open`).
pub(super) enum Opening {
    Publisher,
    /// `hold`: a lossless subscriber's client and pid.
    Subscriber {
        hold: Option<(ClientId, u32)>,
    },
}

/// Grants a right on `name` (`grant`), with the tag's segments (a
/// `reader`'s records read-only; the control segment in `extra`) and the
/// ring position it starts at; for a lossless subscriber (`hold` = client and
/// its pid) a lossless gate held at that position first, so no writer laps
/// it before it takes the gate over.
pub(super) fn open(
    shared: &Shared,
    st: &mut State,
    name: &TagName,
    ops: &mut Vec<TableOp>,
    who: Opening,
    extra: &mut Option<OwnedFd>,
    grant: impl FnOnce(&mut State, tagwire_wire::TagId) -> Result<Change, TableError>,
) -> (Response, Option<OwnedFd>) {
    let (hold, reader) = match who {
        Opening::Publisher => (None, false),
        Opening::Subscriber { hold } => (hold, true),
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
    // No room for another lossless gate: the client's own attach says so.
    let gate = hold.and_then(|(_, pid)| {
        let idx = st
            .rings
            .get(&entry.id)?
            .hold_lossless_gate_for(start, pid)
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
        if let (Some(g), Some(ring)) = (gate, st.rings.get(&tag_id)) {
            ring.release_held_gate(usize::from(g.index), g.pid);
        }
    };
    // A subscriber gets the records read-only (it may read the tag, not
    // write it); everyone gets the control segment, where readers write.
    let fds = st.rings.get(&opened.tag).map(|r| {
        let records = if reader {
            r.segment().read_only_fd().map_err(std::io::Error::other)
        } else {
            r.segment().as_fd().try_clone_to_owned()
        };
        records.and_then(|d| Ok((d, r.control().as_fd().try_clone_to_owned()?)))
    });
    let (fd, ctl) = match fds {
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
            if let (Some((client, _)), Some(g)) = (hold, gate) {
                st.held_gates.entry(client).or_default().push((
                    opened.tag,
                    usize::from(g.index),
                    g.pid,
                ));
            }
            update::effects(shared, st, &c.updates);
            ops.extend(c.ops);
            // (Only with a grant: the control segment is no right to have.)
            *extra = Some(ctl);
            (Response::TagOpened(opened), Some(fd))
        }
        Err(e) => {
            free_gate(st);
            table_error(e)
        }
    }
}
