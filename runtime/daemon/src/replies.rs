//! Acknowledgements read by busy forwarders, without waking a thread.
//!
//! An acknowledgement that reaches the delivery socket, on which the
//! inbound thread sleeps, wakes that thread, and with a host's threads on
//! one CPU each wake-up preempts the forwarder that is sending (8 KiB flat
//! out: 3.7 k wake-ups a second, each two context switches on the sending
//! CPU). So the delivery port has a third socket that the kernel gives
//! every plain acknowledgement
//! (`tagwire_net::delivery_sockets`, steered by
//! `tagwire_wire::datagram::ACKNACK_PREFIX`); nothing sleeps on it while a
//! forwarder is busy:
//!
//! - A forwarder in its read loop ([`Replies::enter`] .. [`Replies::leave`])
//!   reads the socket without waiting each time round the loop once the
//!   watch has fired and been left unarmed ([`Replies::poll`]; while it is
//!   armed the watcher gets the next one, and the loop makes no system
//!   call for it), and hands each acknowledgement to its stream's
//!   forwarder (itself, or another route's, as the inbound thread does).
//! - While no forwarder is busy, a watcher thread sleeps on the socket
//!   through an epoll set in which the socket is armed for one event
//!   (`EPOLLONESHOT`). Once it has fired it stays unarmed while a
//!   forwarder is busy (arrivals wake nobody); the last forwarder to leave
//!   reads what is there and arms it again. Arming checks readiness, so an
//!   acknowledgement that arrives between that read and the arming wakes
//!   the watcher: none is left behind.
//! - One reader at a time ([`Replies::read`] takes a lock, or leaves the
//!   reading to whoever holds it), and it hands each acknowledgement on
//!   before it reads the next: a stream's acknowledgements reach it in
//!   arrival order.
//!
//! Sealed acknowledgements (under a domain key) do not begin with the
//! prefix: they reach the delivery socket and the inbound thread. So does
//! everything where the kernel refuses the third socket.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rustix::event::epoll;

use crate::lock;

/// Most acknowledgements one [`Replies::read`] takes.
const MOST_READ: usize = 256;

/// A buffer larger than any acknowledgement (its bitmap is 32 bytes): one
/// that fills it was cut (the taker drops it, counted).
pub(crate) const REPLY_BUFFER: usize = 2048;

/// The replies socket, its watch and who reads it.
#[derive(Debug)]
pub(crate) struct Replies {
    sock: UdpSocket,
    epoll: OwnedFd,
    state: Mutex<State>,
    /// `state.armed`, for a look without the lock ([`Replies::poll`]).
    armed: AtomicBool,
    /// Held by the one reading.
    reading: Mutex<()>,
    /// Acknowledgements read here.
    pub(crate) read: AtomicU64,
    /// Times the watcher was woken by one.
    pub(crate) woken: AtomicU64,
}

#[derive(Debug)]
struct State {
    /// Forwarders in their read loop.
    busy: usize,
    /// The socket is armed in the epoll set.
    armed: bool,
}

impl Replies {
    /// Watches `sock` (the delivery port's replies socket).
    pub(crate) fn new(sock: UdpSocket) -> std::io::Result<Self> {
        sock.set_nonblocking(true)?;
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(&epoll, &sock, epoll::EventData::new_u64(0), armed())?;
        Ok(Self {
            sock,
            epoll,
            state: Mutex::new(State {
                busy: 0,
                armed: true,
            }),
            armed: AtomicBool::new(true),
            reading: Mutex::new(()),
            read: AtomicU64::new(0),
            woken: AtomicU64::new(0),
        })
    }

    /// A forwarder enters its read loop: it reads the replies now.
    pub(crate) fn enter(&self) {
        lock(&self.state).busy += 1;
    }

    /// A forwarder leaves its read loop; the last one out reads what is
    /// there and arms the watch again.
    pub(crate) fn leave(&self, take: impl FnMut(SocketAddr, &mut [u8])) {
        let last = {
            let mut s = lock(&self.state);
            s.busy = s.busy.saturating_sub(1);
            s.busy == 0 && !s.armed
        };
        if last {
            self.read(take);
            self.arm_if_idle();
        }
    }

    /// A busy forwarder's look: [`Replies::read`] once the watch has fired
    /// and left the replies to the busy forwarders; nothing (no system
    /// call) while it is armed, for the watcher is then woken by the next
    /// one. (A forwarder that runs its loop once per message, at low
    /// rates, so pays no read.)
    pub(crate) fn poll(&self, take: impl FnMut(SocketAddr, &mut [u8])) -> usize {
        if self.armed.load(Ordering::Acquire) {
            return 0;
        }
        self.read(take)
    }

    /// Hands each acknowledgement that has arrived to `take`, in order,
    /// without waiting for any (none if another thread is reading: it
    /// takes them). Returns how many.
    pub(crate) fn read(&self, mut take: impl FnMut(SocketAddr, &mut [u8])) -> usize {
        let Ok(_reading) = self.reading.try_lock() else {
            return 0;
        };
        let mut buf = [0u8; REPLY_BUFFER];
        let mut n = 0;
        while n < MOST_READ {
            let Ok((len, from)) = self.sock.recv_from(&mut buf) else {
                break;
            };
            n += 1;
            take(from, &mut buf[..len]);
        }
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// The watcher: sleeps up to `timeout` until an acknowledgement
    /// arrives while the socket is armed, then reads what is there and
    /// arms it again unless a forwarder is busy.
    pub(crate) fn watch(&self, timeout: Duration, take: impl FnMut(SocketAddr, &mut [u8])) {
        let mut events = Vec::with_capacity(1);
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let fired = matches!(
            epoll::wait(&self.epoll, rustix::buffer::spare_capacity(&mut events), Some(&ts)),
            Ok(n) if n > 0
        );
        if fired {
            self.woken.fetch_add(1, Ordering::Relaxed);
            lock(&self.state).armed = false;
            self.armed.store(false, Ordering::Release);
        }
        self.read(take);
        self.arm_if_idle();
    }

    /// Arms the socket for one wake-up of the watcher, unless a forwarder
    /// is busy (it reads them) or it is armed already.
    fn arm_if_idle(&self) {
        let mut s = lock(&self.state);
        if s.busy == 0 && !s.armed {
            match epoll::modify(
                &self.epoll,
                &self.sock,
                epoll::EventData::new_u64(0),
                armed(),
            ) {
                Ok(()) => {
                    s.armed = true;
                    self.armed.store(true, Ordering::Release);
                }
                Err(e) => tracing::warn!(error = %e, "acknowledgement watch not armed"),
            }
        }
    }
}

fn armed() -> epoll::EventFlags {
    epoll::EventFlags::IN | epoll::EventFlags::ONESHOT
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pair() -> (Arc<Replies>, UdpSocket, SocketAddr) {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = sock.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        (Arc::new(Replies::new(sock).unwrap()), peer, to)
    }

    fn got(r: &Replies, read: impl Fn(&Replies, &mut dyn FnMut(SocketAddr, &mut [u8]))) -> Vec<u8> {
        let mut v = Vec::new();
        read(r, &mut |_, b: &mut [u8]| v.push(b[0]));
        v
    }

    #[test]
    fn the_watcher_is_woken_while_no_forwarder_is_busy() {
        let (r, peer, to) = pair();
        peer.send_to(&[1], to).unwrap();
        let v = got(&r, |r, f| r.watch(Duration::from_secs(5), f));
        assert_eq!(v, [1]);
        assert_eq!(r.woken.load(Ordering::Relaxed), 1);
        // Armed again: the next one wakes it too.
        peer.send_to(&[2], to).unwrap();
        assert_eq!(got(&r, |r, f| r.watch(Duration::from_secs(5), f)), [2]);
        assert_eq!(r.woken.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn while_a_forwarder_is_busy_it_reads_them_and_the_watcher_sleeps() {
        let (r, peer, to) = pair();
        // The watch fires once and is not armed again while busy.
        r.enter();
        peer.send_to(&[1], to).unwrap();
        assert_eq!(got(&r, |r, f| r.watch(Duration::from_secs(5), f)), [1]);
        for n in 2..6 {
            peer.send_to(&[n], to).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        let v = got(&r, |r, f| r.watch(Duration::from_millis(50), f));
        // (It read them without being woken: it looks once after a wait.)
        assert_eq!(r.woken.load(Ordering::Relaxed), 1, "woken while busy");
        assert_eq!(v, [2, 3, 4, 5]);
        peer.send_to(&[6], to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            got(&r, |r, f| {
                r.read(f);
            }),
            [6],
            "the busy forwarder reads it"
        );
        // An arrival just before the last one leaves: read on leaving.
        peer.send_to(&[7], to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(got(&r, |r, f| r.leave(f)), [7]);
        // Armed again once idle.
        peer.send_to(&[8], to).unwrap();
        assert_eq!(got(&r, |r, f| r.watch(Duration::from_secs(5), f)), [8]);
        assert_eq!(r.woken.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_busy_forwarder_reads_only_once_the_watch_has_fired() {
        let (r, peer, to) = pair();
        r.enter();
        peer.send_to(&[1], to).unwrap();
        // Armed: left to the watcher, which is woken by it.
        assert!(got(&r, |r, f| {
            r.poll(f);
        })
        .is_empty());
        assert_eq!(got(&r, |r, f| r.watch(Duration::from_secs(5), f)), [1]);
        // Fired while busy: the forwarder reads.
        peer.send_to(&[2], to).unwrap();
        assert_eq!(
            got(&r, |r, f| {
                r.poll(f);
            }),
            [2]
        );
        r.leave(|_, _| {});
        peer.send_to(&[3], to).unwrap();
        assert!(
            got(&r, |r, f| {
                r.poll(f);
            })
            .is_empty(),
            "armed again once idle"
        );
    }

    /// Forwarders entering and leaving while acknowledgements arrive and a
    /// watcher waits: every one is read exactly once, in order.
    #[test]
    fn none_is_left_behind_as_forwarders_come_and_go() {
        const N: u32 = 3000;
        let (r, peer, to) = pair();
        let seen = Arc::new(Mutex::new(Vec::<u32>::new()));
        let take = |seen: &Mutex<Vec<u32>>, b: &[u8]| {
            lock(seen).push(u32::from_le_bytes(b.try_into().unwrap()));
        };
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (r, seen, stop) = (r.clone(), seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    r.watch(Duration::from_millis(200), |_, b| take(&seen, b));
                }
            })
        };
        let forwarder = {
            let (r, seen, stop) = (r.clone(), seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    r.enter();
                    for _ in 0..3 {
                        r.poll(|_, b| take(&seen, b));
                    }
                    r.leave(|_, b| take(&seen, b));
                }
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        for n in 0..N {
            // At most 64 unread (within the socket's buffer, which drops
            // what does not fit: under load the readers fall behind).
            while lock(&seen).len() + 64 < n as usize && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            peer.send_to(&n.to_le_bytes(), to).unwrap();
        }
        while lock(&seen).len() < N as usize && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        forwarder.join().unwrap();
        watcher.join().unwrap();
        assert_eq!(*lock(&seen), (0..N).collect::<Vec<_>>());
    }
}
