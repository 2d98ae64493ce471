//! A tag's shared-memory ring: made by the local manager for its clients'
//! tags and by the update manager for tags first heard of from a peer, so
//! it lives below both.

use tagwire_shm::{Ring, RingShape};
use tagwire_wire::control::RingParams;
use tagwire_wire::TagName;

/// Largest ring a tag may have (slots × slot size), so that one request
/// cannot reserve unbounded shared memory.
const MAX_RING_BYTES: u64 = 1 << 30;

/// Whether a ring of this shape may be made at all; the error says why not.
pub(crate) fn check(ring: RingParams) -> Result<(), String> {
    if u64::from(ring.slots) * u64::from(ring.slot_payload) > MAX_RING_BYTES {
        return Err(format!(
            "ring of {} slots x {} bytes exceeds the daemon's 1 GiB limit per tag",
            ring.slots, ring.slot_payload
        ));
    }
    Ok(())
}

/// Creates the shared-memory ring of tag `name`; the error says why not.
pub(crate) fn create(name: &TagName, ring: RingParams) -> Result<Ring, String> {
    check(ring)?;
    let shape = RingShape {
        slots: ring.slots,
        // Room for the frame header in front of each payload.
        payload: ring
            .slot_payload
            .saturating_add(tagwire_wire::frame::HEADER_LEN as u32),
    };
    Ring::create(&format!("tagwire:{name}"), shape)
        .map_err(|e| format!("cannot create ring for {name}: {e}"))
}
