//! A tag's channels at run time: who receives it with which `ChannelQos`
//! (`Request::Channels`), and changing the packet class or thread policy
//! of subscriptions on this node or any other (`Request::SetChannelQos`).
//!
//! A change is a table operation: the node that holds the subscription
//! restates the right with the new class (a newer `Join`, last writer
//! wins) and replicates it; every sending node re-routes when it applies it
//! and its streams carry the new class from their next datagram, with no
//! stream closed (nothing lost, duplicated or reordered). A change of
//! another node's subscriptions is asked of that node (`remote_qos`).

use std::collections::{BTreeSet, HashSet};
use std::os::fd::OwnedFd;

use tagwire_proto::{ClientId, Role};
use tagwire_wire::control::{ErrorCode, Response};
use tagwire_wire::peer::TableOp;
use tagwire_wire::{NodeAddr, OnNodes, QosChange, TagName};

use super::{error, permit, Client};
use crate::policy::Right;
use crate::restate::{of, restate, role, what};
use crate::{Shared, State};

/// The tag's senders and its receivers (on every node), with their QoS.
pub(super) fn list(st: &State, name: &TagName) -> (Response, Option<OwnedFd>) {
    let Some(e) = st.table.entry(name) else {
        return error(ErrorCode::UnknownTag, format!("unknown tag {name}"));
    };
    let of = |role| e.rights(role).iter().map(|r| (r.member, r.qos)).collect();
    (
        Response::Channels {
            senders: of(Role::Sender),
            receivers: of(Role::Receiver),
        },
        None,
    )
}

/// Gives the subscriptions to `name` that `nodes` hold and `change`
/// chooses (a process's, or every one's) its class and policy. This
/// node's are restated here (their ops left in `ops`, replicated once the
/// lock is released); every other node's are asked of it
/// (`remote_qos::ask`), which restates its own. Who may: root, the
/// daemon's user, the tag's owner and whoever the policy lets destroy the
/// tag, for every subscription on every node; anyone else for the
/// subscriptions of processes of their own uid on this node (which is
/// what "every node's" means for them).
pub(super) fn set(
    shared: &Shared,
    client: &Client,
    (name, nodes, change): (TagName, OnNodes, QosChange),
    ops: &mut Vec<TableOp>,
) -> (Response, Option<OwnedFd>) {
    let st = shared.lock();
    if st.table.entry(&name).is_none() {
        return error(ErrorCode::UnknownTag, format!("unknown tag {name}"));
    }
    // The daemons' threads would run at it: only for a process that may
    // run at it itself, whoever's subscription it is.
    if let Some(s) = change.sched {
        if let Err(why) = tagwire_sched::may_use(client.who.pid.0, s) {
            return error(ErrorCode::NotPermitted, format!("{name}: {why}"));
        }
    }
    let admin = permit(shared, &st, client, &name, Right::Destroy).is_ok();
    let me = shared.node();
    let (here, elsewhere) = match nodes {
        OnNodes::This => (true, Vec::new()),
        OnNodes::Node(n) if n == me => (true, Vec::new()),
        OnNodes::Node(n) => (false, vec![n]),
        // Everything the caller may change: for anyone but an
        // administrator, its own processes' subscriptions here.
        OnNodes::Every if !admin => (true, Vec::new()),
        OnNodes::Every => {
            let chosen = holders(&st, &name, change);
            (
                chosen.contains(&me),
                chosen.into_iter().filter(|&n| n != me).collect(),
            )
        }
    };
    if !here && elsewhere.is_empty() {
        let code = match change.publishers {
            true => ErrorCode::NoSendAccess,
            false => ErrorCode::NotSubscribed,
        };
        return error(
            code,
            format!("no {}{} to {name} on any node", what(change), of(change)),
        );
    }
    if !elsewhere.is_empty() && !admin {
        return error(
            ErrorCode::Denied,
            format!(
                "only root, the tag's owner or a user the policy lets destroy {name} may change \
                 rights held on another node (or run `tagwire qos` on that node as the \
                 subscriber's user)"
            ),
        );
    }
    let mut changed = Vec::new();
    let mut st = st;
    if here {
        let uid = client.cred.uid;
        let own: HashSet<ClientId> = st
            .clients
            .iter()
            .filter(|(_, o)| o.uid == uid)
            .map(|(c, _)| *c)
            .collect();
        let mine = |c: ClientId| admin || own.contains(&c);
        match restate(shared, &mut st, &name, change, mine) {
            Ok((mut c, o)) => {
                changed.append(&mut c);
                ops.extend(o);
            }
            // Every node's: this node holds none of the chosen.
            Err((ErrorCode::NotSubscribed | ErrorCode::NoSendAccess, _))
                if nodes == OnNodes::Every => {}
            Err((code, why)) => return error(code, why),
        }
    }
    drop(st);
    for node in elsewhere {
        match crate::remote_qos::ask(shared, node, &name, change) {
            Ok(mut c) => changed.append(&mut c),
            Err((code, why)) => {
                let done = match changed.len() {
                    0 => String::new(),
                    n => format!(" ({n} subscriptions elsewhere were changed)"),
                };
                return error(code, format!("node {node}: {why}{done}"));
            }
        }
    }
    (
        Response::Members {
            senders: Vec::new(),
            receivers: changed,
        },
        None,
    )
}

/// The nodes holding the rights to `name` that `change` chooses.
fn holders(st: &State, name: &TagName, change: QosChange) -> BTreeSet<NodeAddr> {
    st.table.entry(name).map_or_else(BTreeSet::new, |e| {
        e.rights(role(change))
            .iter()
            .filter(|r| change.pid.is_none_or(|p| r.member.who.pid == p))
            .map(|r| r.key.node)
            .collect()
    })
}
