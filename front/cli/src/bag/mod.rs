//! `tagwire record` and `tagwire play`: tags to an MCAP file and back
//! (what `ros2 bag record` and `ros2 bag play` do, in the format ROS 2,
//! Foxglove and the `mcap` tools read).
//!
//! **Layout of a recording.** One MCAP channel per tag, sender (pid@node)
//! and publisher stream, with no schema: its topic is the tag's name, its
//! metadata `sender` and `stream`. A message's `log_time` is when it
//! arrived here, its `publish_time` the publisher's timestamp, its
//! `sequence` the publisher's sequence number (cut to 32 bits, as MCAP
//! keeps it). Payloads are stored as sent ([`RAW_ENCODING`]); a keyed
//! message goes on a channel of its own whose encoding is
//! [`KEYED_ENCODING`]: its 16-byte key hash, its instance state (one byte)
//! and then the payload. A metadata record `tagwire.record` ends the file:
//! per tag, what was recorded and what the recorder lost (a full queue), so
//! that a recording says itself whether it is whole.
//!
//! **Playing** publishes each message, in log-time order where the file
//! has an index (`read`), on its channel's topic (tags made if
//! missing, `--remap` renames them) at its recorded spacing of `log_time`,
//! scaled by `--rate` (0: as fast as the publishers take them). Files
//! written by other tools play too: every channel's messages go out as
//! their bytes. The players's sends are its own: subscribers see the
//! player as the sender, not the recorded one (a process cannot send as
//! another).

mod play;
mod read;
mod record;

pub(crate) use play::{play, PlayArgs};
pub(crate) use record::{record, RecordArgs};

use std::time::{SystemTime, UNIX_EPOCH};

use tagwire::{InstanceState, Key};

/// The message encoding of a channel whose messages are the payloads as
/// sent.
pub(crate) const RAW_ENCODING: &str = "application/octet-stream";
/// The message encoding of a channel of keyed messages: key hash (16
/// bytes), instance state (1 byte: 0 alive, 1 disposed, 2 unregistered, 3
/// both), payload.
pub(crate) const KEYED_ENCODING: &str = "application/x-tagwire-keyed";
/// Bytes in front of a keyed message's payload.
const KEYED_HEAD: usize = 17;
/// A keyed message's bytes in a recording: key hash, state, payload.
pub(crate) fn encode_keyed(key: &Key, state: InstanceState, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(KEYED_HEAD + payload.len());
    out.extend_from_slice(&key.0);
    out.push(match state {
        InstanceState::Alive => 0,
        InstanceState::Disposed => 1,
        InstanceState::Unregistered => 2,
        InstanceState::DisposedUnregistered => 3,
    });
    out.extend_from_slice(payload);
    out
}

/// What [`encode_keyed`] wrote, or why `bytes` cannot be one.
pub(crate) fn decode_keyed(bytes: &[u8]) -> Result<(Key, InstanceState, &[u8]), String> {
    let (head, payload) = bytes.split_at_checked(KEYED_HEAD).ok_or_else(|| {
        format!(
            "{} bytes, shorter than a keyed message's {KEYED_HEAD}",
            bytes.len()
        )
    })?;
    let mut key = [0u8; 16];
    key.copy_from_slice(&head[..16]);
    let state = match head[16] {
        0 => InstanceState::Alive,
        1 => InstanceState::Disposed,
        2 => InstanceState::Unregistered,
        3 => InstanceState::DisposedUnregistered,
        s => return Err(format!("instance state {s} (0..=3 are known)")),
    };
    Ok((Key(key), state, payload))
}

pub(crate) fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_message_comes_back_as_it_went_in() {
        for state in [
            InstanceState::Alive,
            InstanceState::Disposed,
            InstanceState::Unregistered,
            InstanceState::DisposedUnregistered,
        ] {
            let key = Key::of(b"robot-7");
            let bytes = encode_keyed(&key, state, b"pose");
            assert_eq!(decode_keyed(&bytes), Ok((key, state, &b"pose"[..])));
        }
    }

    #[test]
    fn a_short_or_unknown_keyed_envelope_is_refused_with_the_reason() {
        let e = decode_keyed(&[0u8; 16]).unwrap_err();
        assert!(e.contains("16 bytes"), "{e}");
        let mut bytes = encode_keyed(&Key::of(b"k"), InstanceState::Alive, b"");
        bytes[16] = 9;
        let e = decode_keyed(&bytes).unwrap_err();
        assert!(e.contains("state 9"), "{e}");
    }
}
