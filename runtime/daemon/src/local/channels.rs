//! A tag's channels at run time: who receives it with which `ChannelQos`
//! (`Request::Channels`), and changing the packet class or thread policy
//! of this node's subscriptions (`Request::SetChannelQos`).
//!
//! A change is a table operation: this node holds the subscription,
//! so it restates the right with the new class (a newer `Join`, last writer
//! wins) and replicates it; every sending node re-routes when it applies it
//! and its streams carry the new class from their next datagram, with no
//! stream closed (nothing lost, duplicated or reordered).

use std::os::fd::OwnedFd;

use tagwire_proto::{Holder, Role};
use tagwire_wire::control::{ErrorCode, Response};
use tagwire_wire::peer::TableOp;
use tagwire_wire::{ChannelQos, Pid, Priority, Sched, TagName};

use super::{error, permit, table_error, Client};
use crate::policy::Right;
use crate::{update, Shared, State};

/// The tag's senders, and its receivers (on every node) with their QoS.
pub(super) fn list(st: &State, name: &TagName) -> (Response, Option<OwnedFd>) {
    let Some(e) = st.table.entry(name) else {
        return error(ErrorCode::UnknownTag, format!("unknown tag {name}"));
    };
    let receivers = e
        .rights(Role::Receiver)
        .iter()
        .map(|r| (r.member, r.qos))
        .collect();
    (
        Response::Channels {
            senders: e.senders().copied().collect(),
            receivers,
        },
        None,
    )
}

/// Gives the subscriptions this node holds to `name` (of process `pid`, or
/// all) the class `priority` and the policy `sched` (each if given). Who may: root, the daemon's user, the tag's
/// owner and whoever the policy lets destroy the tag, for every
/// subscription; anyone else for the subscriptions of processes of their
/// own uid.
pub(super) fn set(
    shared: &Shared,
    st: &mut State,
    client: &Client,
    (name, pid, priority, sched): (TagName, Option<Pid>, Option<Priority>, Option<Sched>),
    ops: &mut Vec<TableOp>,
) -> (Response, Option<OwnedFd>) {
    let Some(tag) = st.table.entry(&name).map(|e| e.id) else {
        return error(ErrorCode::UnknownTag, format!("unknown tag {name}"));
    };
    // The daemons' threads would run at it: only for a process that may
    // run at it itself, whoever's subscription it is.
    if let Some(s) = sched {
        if let Err(why) = tagwire_sched::may_use(client.who.pid.0, s) {
            return error(ErrorCode::NotPermitted, format!("{name}: {why}"));
        }
    }
    let admin = permit(shared, st, client, &name, Right::Destroy).is_ok();
    let uid = client.cred.uid;
    let clients = &st.clients;
    let mine = |h: Holder| match h {
        Holder::Local(c) => admin || clients.get(&c).is_some_and(|o| o.uid == uid),
        Holder::Remote => false,
    };
    let chosen = |r: &tagwire_proto::Right| pid.is_none_or(|p| r.member.who.pid == p);
    let any = st.table.entry(&name).is_some_and(|e| {
        e.rights(Role::Receiver)
            .iter()
            .any(|r| matches!(r.holder, Holder::Local(_)) && chosen(r))
    });
    if !any {
        let whose = pid.map_or_else(|| "no process".to_owned(), |p| format!("process {}", p.0));
        return error(
            ErrorCode::NotSubscribed,
            format!(
                "{whose} on this node subscribes to {name}: a class is changed on the node that \
                 holds the subscription (run `tagwire qos` there)"
            ),
        );
    }
    let allowed: Vec<_> = st
        .table
        .entry(&name)
        .map(|e| {
            e.rights(Role::Receiver)
                .iter()
                .filter(|r| chosen(r) && mine(r.holder))
                .map(|r| r.key)
                .collect()
        })
        .unwrap_or_default();
    if allowed.is_empty() {
        return error(
            ErrorCode::Denied,
            format!(
                "only root, the tag's owner, a user the policy lets destroy {name}, or the \
                 subscriber's own user may change its class or policy"
            ),
        );
    }
    let change = |q: ChannelQos| ChannelQos {
        priority: priority.unwrap_or(q.priority),
        sched: sched.unwrap_or(q.sched),
        ..q
    };
    match st
        .table
        .set_receiver_qos(tag, |r| allowed.contains(&r.key), change)
    {
        Ok((changed, c)) => {
            update::effects(shared, st, &c.updates);
            ops.extend(c.ops);
            (
                Response::Members {
                    senders: Vec::new(),
                    receivers: changed,
                },
                None,
            )
        }
        Err(e) => table_error(e),
    }
}
