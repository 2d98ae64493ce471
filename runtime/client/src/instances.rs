//! A subscription's per-instance QoS (exclusive ownership, deadline,
//! minimum separation): the client's glue around `tagwire_instances`,
//! which decides; here, only what to receive and how long to wait.
//!
//! A subscription that asks for none of them never comes here.

use std::time::{Duration, Instant};

use tagwire_instances::{Event, InstanceFilter, Sample};
use tagwire_wire::instance::Origin;
use tagwire_wire::SenderInfo;

use crate::{Error, Message, Result};

/// A publisher as ownership tells them apart: its process and stream, and
/// the DDS writer when a gateway published for one.
type Writer = (SenderInfo, u16, Option<[u8; 16]>);

/// The filter of one subscription.
pub(crate) type Filter = InstanceFilter<Writer, Message>;

/// The next message through `f`: `next(wait)` receives one from the tag
/// (waiting at most `wait`; `None` for ever).
pub(crate) fn receive(
    f: &mut Filter,
    tag: &str,
    timeout: Option<Duration>,
    mut next: impl FnMut(Option<Duration>) -> Result<Message>,
) -> Result<Message> {
    let until = timeout.and_then(|t| Instant::now().checked_add(t));
    // The ring had nothing more when last asked: past `until`, give up.
    let mut drained = false;
    loop {
        f.handle_timeout(Instant::now());
        match f.poll() {
            Some(Event::Deliver(m)) => return Ok(m),
            Some(Event::DeadlineMissed { key, writer }) => {
                return Err(Error::DeadlineMissed {
                    tag: tag.to_owned(),
                    key,
                    writer: writer.map(|w| w.0),
                });
            }
            None => {}
        }
        // Wait for a message, but no longer than the filter's next due
        // time or the caller's limit.
        let now = Instant::now();
        let wait = match (until, f.poll_timeout()) {
            (Some(u), Some(d)) => Some(u.min(d)),
            (u, d) => u.or(d),
        };
        if drained && until.is_some_and(|u| now >= u) {
            return Err(Error::Timeout);
        }
        drained = false;
        match next(wait.map(|w| w.saturating_duration_since(now))) {
            Ok(m) => {
                let s = Sample {
                    writer: (m.sender, m.stream, m.origin.map(|o: Origin| o.guid)),
                    key: m.key,
                    state: m.state,
                    strength: m.strength.unwrap_or(0),
                };
                f.offer(Instant::now(), s, m);
            }
            Err(Error::Timeout) => drained = true,
            Err(e) => return Err(e),
        }
    }
}
