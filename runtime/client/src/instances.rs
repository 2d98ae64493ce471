//! A subscription's per-instance QoS (exclusive ownership, deadline,
//! minimum separation): the client's glue around `tagwire_instances`,
//! which decides; here, only what to receive and how long to wait.
//!
//! A subscription that asks for none of them never comes here.

use std::time::{Duration, Instant};

use tagwire_instances::{Event, InstanceFilter, Sample};
use tagwire_wire::instance::Origin;
use tagwire_wire::SenderInfo;

use crate::subscriber::{MessageInfo, Subscriber};
use crate::{Error, Message, Result};

/// A publisher as ownership tells them apart: its process and stream, and
/// the DDS writer when a gateway published for one.
type Writer = (SenderInfo, u16, Option<[u8; 16]>);

/// The filter of one subscription.
pub(crate) type Filter = InstanceFilter<Writer, Message>;

/// `Subscriber::receive_into` through the subscription's filter.
pub(crate) fn receive(
    sub: &mut Subscriber,
    timeout: Option<Duration>,
    payload: &mut Vec<u8>,
) -> Result<MessageInfo> {
    let until = timeout.and_then(|t| Instant::now().checked_add(t));
    // The ring had nothing more when last asked: past `until`, give up.
    let mut drained = false;
    loop {
        let Some(f) = sub.instances.as_mut() else {
            return sub.receive_unfiltered(timeout, payload);
        };
        f.handle_timeout(Instant::now());
        match f.poll() {
            Some(Event::Deliver(m)) => {
                let info = m.info();
                *payload = m.payload;
                return Ok(info);
            }
            Some(Event::DeadlineMissed { key, writer }) => {
                return Err(Error::DeadlineMissed {
                    tag: sub.tag().to_owned(),
                    key,
                    writer: writer.map(|w| w.0),
                });
            }
            None => {}
        }
        // Wait for a message, but no longer than the filter's next due
        // time or the caller's limit.
        let now = Instant::now();
        let due = f.poll_timeout();
        let wait = match (until, due) {
            (Some(u), Some(d)) => Some(u.min(d)),
            (u, d) => u.or(d),
        };
        if drained && until.is_some_and(|u| now >= u) {
            return Err(Error::Timeout);
        }
        let slice = wait.map(|w| w.saturating_duration_since(now));
        drained = false;
        let mut buf = Vec::new();
        match sub.receive_unfiltered(slice, &mut buf) {
            Ok(info) => {
                let m = Message::from_parts(buf, info);
                let s = Sample {
                    writer: (m.sender, m.stream, m.origin.map(|o: Origin| o.guid)),
                    key: m.key,
                    state: m.state,
                    strength: m.strength.unwrap_or(0),
                };
                if let Some(f) = sub.instances.as_mut() {
                    f.offer(Instant::now(), s, m);
                }
            }
            Err(Error::Timeout) => drained = true,
            Err(e) => return Err(e),
        }
    }
}
