//! A sample across the gateway, either way: what of a DDS change a tag
//! message carries, and what DDS change a tag message makes.
//!
//! * **DDS → tag.** The payload (serialized CDR) is the message; the
//!   writer's source timestamp is its timestamp; its instance is the
//!   KEY_HASH the writer sent, else the key read where the mapping says
//!   (`key=`); a dispose or unregister is an empty message in that state;
//!   the DDS writer's GUID and its participant's address are its
//!   [`Origin`], which every message from DDS has.
//! * **tag → DDS.** A message is written with its timestamp as the source
//!   timestamp (a tagwire process answering a DDS request with the
//!   request's timestamp is seen by DDS as doing exactly that); a dispose
//!   or unregister is sent with STATUS_INFO, the key hash, and the
//!   serialized key when the mapping's key fields allow it.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tagwire::{Ext, InstanceState, Key, Message, Origin};
use tagwire_rtps::reliable::Change;
use tagwire_rtps::{Guid, Time};

use crate::key::KeySpec;

/// A DDS change as a tag message: its payload, extension block and
/// timestamp.
pub fn to_tag(
    change: Change,
    writer: Guid,
    addr: Option<SocketAddr>,
    spec: Option<&KeySpec>,
) -> (Vec<u8>, Ext, Option<SystemTime>) {
    let state = InstanceState::from_status_bits(change.status);
    let key = change.key_hash.map(Key).or_else(|| {
        let s = spec?;
        let k = if state == InstanceState::Alive {
            s.of_sample(&change.payload)
        } else {
            s.of_key_payload(&change.payload)
        };
        k.map(|k| Key::of(&k))
    });
    // Always an origin (an unknown address is 0.0.0.0:0): it is what keeps
    // the sample from going back to DDS.
    let origin = Some(Origin {
        guid: writer.to_bytes(),
        addr: addr.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
    });
    let ts = change
        .timestamp
        .map(|t| UNIX_EPOCH + Duration::from_nanos(t.to_nanos()));
    let payload = if state == InstanceState::Alive {
        change.payload
    } else {
        Vec::new()
    };
    let ext = Ext {
        key,
        state,
        strength: None,
        origin,
    };
    (payload, ext, ts)
}

/// A tag message as a DDS change; `None`: a dispose or unregister without
/// a key, which DDS cannot take.
pub fn to_dds(m: Message, spec: Option<&KeySpec>) -> Option<Change> {
    let ns = m
        .timestamp
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let timestamp = Some(Time::from_nanos(ns));
    if m.state == InstanceState::Alive {
        return Some(Change {
            payload: m.payload,
            timestamp,
            status: 0,
            key_hash: None,
        });
    }
    let key = m.key?;
    Some(Change {
        payload: spec.and_then(|s| s.key_payload(&key)).unwrap_or_default(),
        timestamp,
        status: m.state.status_bits(),
        key_hash: Some(key.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwire::{NodeAddr, Pid, SenderInfo, SeqNum};
    use tagwire_rtps::{EntityId, GuidPrefix};

    fn writer() -> Guid {
        Guid {
            prefix: GuidPrefix([1; 12]),
            entity: EntityId([0, 0, 0x0a, 0x02]),
        }
    }

    fn message(payload: Vec<u8>, ext: Ext, ns: u64) -> Message {
        Message {
            payload,
            seq: SeqNum(1),
            sender: SenderInfo {
                pid: Pid(1),
                node: NodeAddr::LOCALHOST,
            },
            stream: 0,
            timestamp: UNIX_EPOCH + Duration::from_nanos(ns),
            key: ext.key,
            state: ext.state,
            strength: ext.strength,
            origin: ext.origin,
        }
    }

    #[test]
    fn a_dds_sample_keeps_its_time_instance_and_writer() {
        let spec = KeySpec::parse("u32@4").unwrap();
        let at = Time::from_nanos(1_700_000_000_123_456_789);
        let sample = vec![0, 1, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0];
        let addr: SocketAddr = "127.0.0.1:7410".parse().unwrap();
        let (p, ext, ts) = to_tag(
            Change {
                payload: sample.clone(),
                timestamp: Some(at),
                status: 0,
                key_hash: None,
            },
            writer(),
            Some(addr),
            Some(&spec),
        );
        assert_eq!(p, sample);
        assert_eq!(ext.key, Some(Key::of(&[0, 0, 0, 7])));
        assert_eq!(ext.state, InstanceState::Alive);
        assert_eq!(ext.origin.unwrap().guid, writer().to_bytes());
        assert_eq!(ext.origin.unwrap().addr, addr);
        // Back to DDS with the very same source timestamp (a pong).
        let back = to_dds(
            message(
                p,
                ext,
                ts.unwrap().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64,
            ),
            Some(&spec),
        )
        .unwrap();
        assert_eq!(back.timestamp, Some(at));
        assert_eq!(back.payload, sample);
    }

    #[test]
    fn disposes_cross_both_ways_by_key() {
        let spec = KeySpec::parse("u32@4").unwrap();
        let (p, ext, _) = to_tag(
            Change {
                payload: vec![0, 1, 0, 0, 7, 0, 0, 0],
                timestamp: None,
                status: 1,
                key_hash: None,
            },
            writer(),
            None,
            Some(&spec),
        );
        assert!(p.is_empty());
        assert_eq!(ext.state, InstanceState::Disposed);
        assert_eq!(ext.key, Some(Key::of(&[0, 0, 0, 7])));
        // A key hash the writer sent wins.
        let (_, ext2, _) = to_tag(
            Change {
                payload: Vec::new(),
                timestamp: None,
                status: 3,
                key_hash: Some([9; 16]),
            },
            writer(),
            None,
            Some(&spec),
        );
        assert_eq!(ext2.key, Some(Key([9; 16])));
        assert_eq!(ext2.state, InstanceState::DisposedUnregistered);

        let d = to_dds(message(Vec::new(), ext, 5), Some(&spec)).unwrap();
        assert_eq!(d.status, 1);
        assert_eq!(d.payload, vec![0, 1, 0, 0, 7, 0, 0, 0]);
        assert_eq!(d.key_hash, Some(Key::of(&[0, 0, 0, 7]).0));
        // No key: nothing DDS could take.
        let unkeyed = Ext {
            state: InstanceState::Disposed,
            ..Ext::default()
        };
        assert!(to_dds(message(Vec::new(), unkeyed, 5), None).is_none());
    }
}
