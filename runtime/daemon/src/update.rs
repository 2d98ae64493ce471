//! The update manager: tag-table changes go out to every local client, in version
//! order (callers hold the state lock while broadcasting).
//!
//! A client whose socket stays full for the send timeout is disconnected rather
//! than allowed to stall the daemon; its library reconnects and re-registers.

use tagwire_proto::Update;
use tagwire_wire::control::Message;

use crate::State;

/// Sends `updates` to every client.
pub(crate) fn broadcast(state: &State, updates: &[Update]) {
    for u in updates {
        let bytes = Message::Update(u.clone()).encode();
        for (id, conn) in &state.clients {
            match conn.send(&bytes, None) {
                Ok(()) => {}
                // The send timeout expired: the client stopped reading.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    tracing::warn!(
                        client = id.0,
                        "client not reading its updates; disconnecting it"
                    );
                    let _ = conn.shutdown();
                }
                // Already gone; its connection thread is releasing its rights.
                Err(e) => {
                    tracing::debug!(client = id.0, error = %e, "update not delivered to a closing client")
                }
            }
        }
    }
}
