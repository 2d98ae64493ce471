//! The update manager: tag-table changes go out to every local client, in version
//! order (callers hold the state lock while broadcasting).
//!
//! Updates go into each client's bounded outbox (see `Outbox`), drained by
//! that client's writer thread, so a client that stops reading cannot stall
//! the daemon: when its outbox is full it is disconnected; its library
//! reconnects and re-registers.

use std::sync::mpsc::TrySendError;
use tagwire_proto::Update;

use tagwire_wire::control::Message;

use crate::State;

/// Queues `updates` for every client (never blocks).
pub(crate) fn broadcast(state: &State, updates: &[Update]) {
    for u in updates {
        let bytes = Message::Update(u.clone()).encode();
        for (id, out) in &state.clients {
            match out.tx.try_send((bytes.clone(), None)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    tracing::warn!(
                        client = id.0,
                        "client not reading its updates; disconnecting it"
                    );
                    let _ = out.conn.shutdown();
                }
                // Its writer is gone; its connection thread is releasing its rights.
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }
}
