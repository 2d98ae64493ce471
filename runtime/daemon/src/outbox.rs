//! A client's outbox (docs/design.md §7): a bounded queue of what the daemon
//! sends one client (responses and updates, in order), so a client that
//! stops reading delays only itself, never a broadcast made under the
//! state lock. While nothing waits in it, a packet goes straight to the
//! client's non-blocking socket; otherwise it waits for the local
//! manager's event loop (`local::conns`), which it wakes with a [`Note`],
//! to write it once the socket is writable.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TrySendError;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tagwire_proto::ClientId;
use tagwire_unix::SeqPacket;

use crate::{lock, OUTBOX_DEPTH};

/// A packet on its way to a client, with up to two descriptors (a ring's
/// records and its control segment).
pub(crate) type Outgoing = (Vec<u8>, Option<OwnedFd>, Vec<OwnedFd>);

/// How long a response waits for room in a full outbox before its client
/// counts as stuck and is disconnected.
pub(crate) const WRITE_PATIENCE: Duration = Duration::from_secs(1);

/// What other threads tell the loop, with an eventfd that wakes it.
#[derive(Debug)]
pub(crate) struct Wake {
    pub(crate) efd: OwnedFd,
    notes: Mutex<Vec<Note>>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Note {
    /// A client's outbox went from empty to not.
    Queued(ClientId),
    /// A worker finished with a client's request (or its release).
    Done(ClientId),
}

impl Wake {
    /// Wakes the loop through `efd` (an eventfd).
    pub(crate) fn new(efd: OwnedFd) -> Self {
        Self {
            efd,
            notes: Mutex::new(Vec::new()),
        }
    }

    /// The notes posted since the last call (the loop reads `efd` first).
    pub(crate) fn take(&self) -> Vec<Note> {
        std::mem::take(&mut *lock(&self.notes))
    }

    pub(crate) fn post(&self, note: Note) {
        let mut notes = lock(&self.notes);
        let first = notes.is_empty();
        notes.push(note);
        drop(notes);
        // The loop reads the eventfd before it takes the notes: a note
        // posted after it took them finds the list empty and wakes it.
        if first {
            self.ring();
        }
    }

    pub(crate) fn ring(&self) {
        let _ = rustix::io::write(&self.efd, &1u64.to_ne_bytes());
    }
}

/// A client's outbox, as the rest of the daemon sends to it (the loop
/// writes it to the socket).
#[derive(Debug, Clone)]
pub(crate) struct OutTx(Arc<Queue>);

#[derive(Debug)]
struct Queue {
    id: ClientId,
    /// The client's socket (non-blocking), written directly while nothing
    /// waits before (`None` in tests).
    conn: Option<Arc<SeqPacket>>,
    items: Mutex<VecDeque<Outgoing>>,
    /// The client left the loop: nothing more is queued.
    closed: AtomicBool,
    room: Condvar,
    wake: Arc<Wake>,
}

impl OutTx {
    /// The outbox of client `id` on `conn` (non-blocking), whose loop
    /// `wake` wakes.
    pub(crate) fn new(id: ClientId, conn: Option<Arc<SeqPacket>>, wake: Arc<Wake>) -> Self {
        Self(Arc::new(Queue {
            id,
            conn,
            items: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            room: Condvar::new(),
            wake,
        }))
    }

    /// Queues `item` unless the outbox is full or closed (never blocks).
    pub(crate) fn try_send(&self, item: Outgoing) -> Result<(), TrySendError<Outgoing>> {
        let q = &self.0;
        let items = lock(&q.items);
        if q.closed.load(Ordering::Acquire) {
            return Err(TrySendError::Disconnected(item));
        }
        if items.len() >= OUTBOX_DEPTH {
            return Err(TrySendError::Full(item));
        }
        self.push(items, item);
        Ok(())
    }

    /// Queues `item`, waiting up to [`WRITE_PATIENCE`] for room; gives it
    /// back when the client is gone or stuck.
    pub(crate) fn send(&self, item: Outgoing) -> Result<(), Outgoing> {
        let q = &self.0;
        let deadline = Instant::now() + WRITE_PATIENCE;
        let mut items = lock(&q.items);
        loop {
            if q.closed.load(Ordering::Acquire) {
                return Err(item);
            }
            if items.len() < OUTBOX_DEPTH {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(item);
            }
            items = match q.room.wait_timeout(items, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        self.push(items, item);
        Ok(())
    }

    fn push(&self, mut items: std::sync::MutexGuard<'_, VecDeque<Outgoing>>, item: Outgoing) {
        if items.is_empty() {
            // Nothing before it: straight to the socket, without waking
            // the loop, unless the socket is full (or failed: the loop
            // finds out when it writes).
            if let Some(conn) = &self.0.conn {
                if send(conn, &item).is_ok() {
                    return;
                }
            }
            items.push_back(item);
            drop(items);
            self.0.wake.post(Note::Queued(self.0.id));
            return;
        }
        items.push_back(item);
    }

    /// Writes what the outbox holds to `conn` until its buffer is full.
    /// Ok(true): something still waits (the socket is full).
    pub(crate) fn write_out(&self, conn: &SeqPacket) -> std::io::Result<bool> {
        let q = &self.0;
        let mut items = lock(&q.items);
        while let Some(item) = items.front() {
            match send(conn, item) {
                Ok(()) => {
                    items.pop_front();
                    q.room.notify_one();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// The client left: nothing more is queued, what waits is dropped, and
    /// a response waiting for room gives up.
    pub(crate) fn close(&self) {
        let mut items = lock(&self.0.items);
        self.0.closed.store(true, Ordering::Release);
        items.clear();
        drop(items);
        self.0.room.notify_all();
    }
}

/// Writes one packet and its descriptors.
pub(crate) fn send(conn: &SeqPacket, (bytes, fd, extra): &Outgoing) -> std::io::Result<()> {
    let fds: Vec<_> = fd.iter().chain(extra).map(AsFd::as_fd).collect();
    conn.send_fds(bytes, &fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox() -> (OutTx, Arc<Wake>) {
        let efd = rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK).unwrap();
        let wake = Arc::new(Wake::new(efd));
        (OutTx::new(ClientId(7), None, wake.clone()), wake)
    }

    #[test]
    fn an_outbox_tells_the_loop_once_when_it_stops_being_empty_and_refuses_past_its_depth() {
        let (tx, wake) = outbox();
        tx.try_send((vec![1], None, Vec::new())).unwrap();
        tx.try_send((vec![2], None, Vec::new())).unwrap();
        let notes = wake.take();
        assert!(
            matches!(notes[..], [Note::Queued(ClientId(7))]),
            "{notes:?}"
        );
        let mut b = [0u8; 8];
        assert_eq!(rustix::io::read(&wake.efd, &mut b).unwrap(), 8);
        for i in 2..OUTBOX_DEPTH {
            tx.try_send((vec![i as u8], None, Vec::new())).unwrap();
        }
        assert!(matches!(
            tx.try_send((vec![0], None, Vec::new())),
            Err(TrySendError::Full(_))
        ));
        // A response waits for room, then gives up: the client is stuck.
        let start = Instant::now();
        assert!(tx.send((vec![0], None, Vec::new())).is_err());
        assert!(start.elapsed() >= WRITE_PATIENCE);
        tx.close();
        assert!(matches!(
            tx.try_send((vec![0], None, Vec::new())),
            Err(TrySendError::Disconnected(_))
        ));
    }

    #[test]
    fn a_response_waiting_for_room_is_queued_once_the_loop_writes() {
        let (tx, _wake) = outbox();
        for i in 0..OUTBOX_DEPTH {
            tx.try_send((vec![i as u8], None, Vec::new())).unwrap();
        }
        let loop_side = tx.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let q = &loop_side.0;
            lock(&q.items).pop_front();
            q.room.notify_one();
        });
        tx.send((vec![9], None, Vec::new())).unwrap();
        writer.join().unwrap();
        let items = lock(&tx.0.items);
        assert_eq!(items.len(), OUTBOX_DEPTH);
        assert_eq!(items.back().map(|i| i.0.clone()), Some(vec![9]));
    }
}
