//! Restating the rights this node holds with a new class or policy: the
//! one place a run-time QoS change is made, whoever asked for it (a local
//! client, `local::channels`, or another node, `remote_qos`).

use tagwire_proto::{ClientId, Holder, Role, TableError};
use tagwire_wire::control::ErrorCode;
use tagwire_wire::peer::TableOp;
use tagwire_wire::{ChannelQos, Member, QosChange, TagName};

use crate::{update, Shared, State};

/// A refused change: its code and the reason, for the asker.
pub(crate) type Refusal = (ErrorCode, String);

/// A table's refusal as the error a client or a peer is told.
pub(crate) fn refusal(e: TableError) -> Refusal {
    let code = match e {
        TableError::UnknownTag(_) => ErrorCode::UnknownTag,
        TableError::NoSendAccess(_) => ErrorCode::NoSendAccess,
        TableError::NotSubscribed(_) => ErrorCode::NotSubscribed,
    };
    (code, e.to_string())
}

/// Whose subscriptions `change` chooses, for an error: " of process P".
pub(crate) fn of(change: QosChange) -> String {
    change
        .pid
        .map_or_else(String::new, |p| format!(" of process {}", p.0))
}

/// Which rights `change` is about.
pub(crate) fn role(change: QosChange) -> Role {
    match change.publishers {
        true => Role::Sender,
        false => Role::Receiver,
    }
}

/// "subscription" or "send right", for messages.
pub(crate) fn what(change: QosChange) -> &'static str {
    match change.publishers {
        true => "send right",
        false => "subscription",
    }
}

/// Restates the rights to `name` held on this node that `change`
/// chooses and whose client `may` allows, with its class and policy;
/// applies the change here and returns the receivers it changed and the
/// ops that carry it to the other nodes. Both askers come here: a local
/// client (`set`) and another node (`remote_qos::serve`).
pub(crate) fn restate(
    shared: &Shared,
    st: &mut State,
    name: &TagName,
    change: QosChange,
    may: impl Fn(ClientId) -> bool,
) -> Result<(Vec<Member>, Vec<TableOp>), Refusal> {
    let Some(e) = st.table.entry(name) else {
        return Err((ErrorCode::UnknownTag, format!("unknown tag {name}")));
    };
    let tag = e.id;
    let chosen = |r: &tagwire_proto::Right| change.pid.is_none_or(|p| r.member.who.pid == p);
    let local = |r: &tagwire_proto::Right| match r.holder {
        Holder::Local(c) => Some(c),
        Holder::Remote => None,
    };
    let mut any = false;
    let mut allowed = Vec::new();
    for r in e.rights(role(change)).iter().filter(|r| chosen(r)) {
        if let Some(c) = local(r) {
            any = true;
            if may(c) {
                allowed.push(r.key);
            }
        }
    }
    if !any {
        let code = match change.publishers {
            true => ErrorCode::NoSendAccess,
            false => ErrorCode::NotSubscribed,
        };
        return Err((
            code,
            format!("no {}{} to {name} on this node", what(change), of(change)),
        ));
    }
    if allowed.is_empty() {
        return Err((
            ErrorCode::Denied,
            format!(
                "only root, the tag's owner, a user the policy lets destroy {name}, or the \
                 {} own user may change its class or policy",
                match change.publishers {
                    true => "publisher's",
                    false => "subscriber's",
                }
            ),
        ));
    }
    let to = |q: ChannelQos| ChannelQos {
        priority: change.priority.unwrap_or(q.priority),
        sched: change.sched.unwrap_or(q.sched),
        pacing: change.pacing.unwrap_or(q.pacing),
        ..q
    };
    match st
        .table
        .set_qos(role(change), tag, |r| allowed.contains(&r.key), to)
    {
        Ok((changed, c)) => {
            update::effects(shared, st, &c.updates);
            // A send right's restatement raises no event (only this
            // node's routes depend on it): re-plan them here.
            if change.publishers && !changed.is_empty() {
                update::reroute(shared, st);
            }
            Ok((changed, c.ops))
        }
        Err(e) => Err(refusal(e)),
    }
}
