//! What a daemon does with the membership core's table events: one home
//! for the daemon's update manager and the network simulator's nodes.
//!
//! ```text
//!  Membership ── Event::PeerUp ──────▶ send it our sync_ops()
//!             ── Event::PeerDown ────▶ drop that node's rights
//!             ── Event::Sync / Op ───▶ merge into the TagTable, acknowledge
//!                                      └─ a tag's creation or destruction that
//!                                         changed our table is passed on to
//!                                         every up peer (begin_replication)
//! ```
//!
//! **Why pass changes on.** Rights belong to a node's clients and die with
//! that node, so only their node sends them. A tag's existence outlives its
//! creator: if the creator reaches only some peers and crashes, the others
//! would never learn (the links between survivors stay up, so no sync comes);
//! found by the network simulator (`sim_membership`, seed 56). A node that
//! applied a `TagUp` or `TagDown` that changed its table sends it on; one it
//! knew already changes nothing and goes no further, so this ends.

use std::time::Instant;

use crate::membership::{Event, Membership};
use crate::{TableEvent, TableOp, TagTable, Update};

/// Applies a table event of the membership core to `table`, answering
/// through `members` (syncs, acknowledgements, changes passed on). Returns
/// the table's updates (for local effects: rings, clients), or `None` for
/// an event that is not about the table (the caller handles it).
pub fn apply(
    table: &mut TagTable,
    members: &mut Membership,
    now: Instant,
    event: &Event,
) -> Option<Vec<Update>> {
    match event {
        Event::PeerUp { link, .. } => {
            // Built after the core counts the peer up: every later change
            // reaches it as an Op behind this Sync.
            members.send_sync(*link, table.sync_ops());
            Some(Vec::new())
        }
        Event::PeerDown { peer, .. } => Some(table.drop_node(*peer)),
        Event::Sync { peer, ops } => {
            let updates = table.apply_sync(*peer, ops);
            pass_on(members, now, ops, &updates);
            Some(updates)
        }
        Event::Op { link, id, op, .. } => {
            let updates = table.apply_remote(op);
            members.acknowledge(*link, *id);
            pass_on(members, now, std::slice::from_ref(op), &updates);
            Some(updates)
        }
        _ => None,
    }
}

/// Sends on the tag creations and destructions among `ops` that `updates`
/// show changed the table.
fn pass_on(members: &mut Membership, now: Instant, ops: &[TableOp], updates: &[Update]) {
    for op in ops {
        let changed = |name| {
            updates.iter().any(|u| match &u.event {
                TableEvent::TagCreated { name: n, .. }
                | TableEvent::TagDestroyed { name: n, .. } => n == name,
                _ => false,
            })
        };
        let relay = match op {
            TableOp::TagUp { name, .. } | TableOp::TagDown { name, .. } => changed(name),
            _ => false,
        };
        if relay {
            let _ = members.begin_replication(now, op.clone());
        }
    }
}
