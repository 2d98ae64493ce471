//! A publisher's or subscriber's share of the client (`Endpoint`): its
//! right, its ring, its registration and counters, which the update
//! thread moves to a new ring after a daemon restart; and the mapping of
//! a granted ring from the descriptors the daemon sent.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tagwire_shm::{Ring, Seat, Segment};
use tagwire_wire::control::{HeldGate, Request, RingParams, TagOpened};
use tagwire_wire::{ChannelQos, Domain, TagId, TagName};

use super::{lock, Core};
use crate::{Error, Result};

/// The descriptors a response came with: one, or a ring's two (its
/// records, read-only for a subscriber, and its control segment).
#[derive(Debug)]
pub(crate) struct Fds {
    pub(crate) first: OwnedFd,
    pub(crate) extra: Vec<OwnedFd>,
}

impl Fds {
    pub(crate) fn of(p: &mut tagwire_unix::Packet) -> Option<Self> {
        let first = p.fd.take()?;
        Some(Self {
            first,
            extra: std::mem::take(&mut p.extra),
        })
    }
}

/// What a publisher or subscriber shares with the update thread.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) name: TagName,
    pub(crate) kind: EndpointKind,
    pub(crate) tag: AtomicU32,
    pub(crate) generation: AtomicU64,
    /// Ring head when the current registration was made: a subscriber moved to a
    /// new ring reads from here, so nothing sent since re-registration is missed.
    pub(crate) registered_at: AtomicU64,
    pub(crate) destroyed: AtomicBool,
    /// Set by the publisher's/subscriber's Drop: never re-register it.
    pub(crate) closed: AtomicBool,
    /// The connection epoch its current registration belongs to.
    pub(super) epoch: AtomicU64,
    pub(crate) ring: Mutex<Ring>,
    pub(crate) domain: Domain,
    pub(crate) ring_params: RingParams,
    /// See [`Endpoint::take_held_gate`].
    pub(super) held_gate: Mutex<Option<HeldGate>>,
    /// A subscriber's counters, for the daemon's `tagwire stats` (the
    /// subscriber writes them, the update thread reads them).
    pub(crate) counters: ReceiveCounters,
    /// A subscriber's own socket for direct delivery (`crate::direct`).
    pub(crate) direct: Option<Arc<crate::direct::Direct>>,
    /// A subscriber's packet class and thread policy as last changed at
    /// run time (`TableEvent::ReceiverQos`); `None`: those it subscribed
    /// with. A re-registration asks for them.
    pub(crate) changed: Mutex<Option<(tagwire_wire::Priority, tagwire_wire::Sched)>>,
}

/// What a subscriber counts, readable from the update thread.
#[derive(Debug, Default)]
pub(crate) struct ReceiveCounters {
    /// Messages received.
    pub(crate) received: AtomicU64,
    /// Messages lost because the subscriber was a ring (or its depth)
    /// behind, or a large message was gone.
    pub(crate) overflowed: AtomicU64,
    /// Messages missing between two of one publisher (lost on the way).
    pub(crate) missing: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndpointKind {
    Publisher {
        qos: ChannelQos,
    },
    Subscriber {
        depth: u32,
        qos: ChannelQos,
        lossless: bool,
    },
}

impl EndpointKind {
    /// The request that gets this right on tag `name`; `hold_gate`: a
    /// lossless subscriber asks the daemon to hold its gate from the start
    /// (not when re-registering: the subscriber then attaches its own on the
    /// new ring as it moves there).
    pub(super) fn request(self, name: &TagName, hold_gate: bool) -> Request {
        match self {
            EndpointKind::Publisher { qos } => Request::GetSendAccess {
                name: name.clone(),
                qos,
            },
            EndpointKind::Subscriber {
                depth,
                qos,
                lossless,
            } => Request::Subscribe {
                name: name.clone(),
                depth,
                qos,
                lossless: lossless && hold_gate,
            },
        }
    }
}

impl Endpoint {
    pub(crate) fn tag(&self) -> TagId {
        TagId(self.tag.load(Ordering::Acquire))
    }

    pub(crate) fn current_ring(&self) -> Ring {
        lock(&self.ring).clone()
    }

    /// The request that gives this endpoint's right on `tag` back.
    pub(super) fn release_request(&self, tag: TagId) -> Request {
        match self.kind {
            EndpointKind::Publisher { .. } => Request::ReleaseSendAccess { tag },
            EndpointKind::Subscriber { .. } => Request::Unsubscribe {
                tag,
                seat: self.current_ring().own_seat().map_or(0, Seat::generation),
            },
        }
    }

    /// Gives the right back (the publisher's or subscriber's `Drop`). Fire and
    /// forget: dropping must not block on the daemon; a lost connection releases
    /// everything anyway, and re-registration skips closed endpoints.
    pub(crate) fn close(&self, core: &Core) {
        self.closed.store(true, Ordering::Release);
        if !self.destroyed.load(Ordering::Acquire) {
            core.send_only(self.release_request(self.tag()));
        }
    }

    /// The lossless gate the daemon holds for this endpoint on its current
    /// ring, if any (taken once, by the subscriber).
    pub(crate) fn take_held_gate(&self) -> Option<HeldGate> {
        lock(&self.held_gate).take()
    }

    /// Moves the endpoint onto a new registration; its publisher or subscriber
    /// notices the generation change on its next call.
    pub(super) fn install(&self, o: &TagOpened, ring: Ring, epoch: u64) {
        // A lossless subscriber's gate on the new ring, held by its daemon
        // at `o.start`: the subscriber takes it as it moves there.
        *lock(&self.held_gate) = o.gate;
        self.registered_at.store(o.start, Ordering::Release);
        *lock(&self.ring) = ring;
        self.tag.store(o.tag.0, Ordering::Release);
        self.epoch.store(epoch, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// Maps a ring from the descriptors the daemon sent with a grant: its
/// records, its control segment and, for a subscriber, its seat.
pub(crate) fn map_ring(fds: Fds) -> Result<Ring> {
    let io = |e: tagwire_shm::ShmError| Error::Io(e.to_string());
    let ring_err = |e: tagwire_shm::RingError| Error::Io(e.to_string());
    let mut extra = fds.extra.into_iter();
    let ctl = extra
        .next()
        .ok_or_else(|| Error::Protocol("ring granted without its control segment".into()))?;
    let ring = Ring::open(
        Segment::open(fds.first).map_err(io)?,
        Segment::open(ctl).map_err(io)?,
    )
    .map_err(ring_err)?;
    match extra.next() {
        Some(seat) => Ok(ring.with_seat(Seat::from_fd(seat).map_err(ring_err)?)),
        None if ring.is_read_only() => Err(Error::Protocol(
            "subscription granted without its seat".into(),
        )),
        None => Ok(ring),
    }
}

/// Lets publisher/subscriber code pass a descriptor to `call`.
pub(crate) fn borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    fd.as_fd()
}
