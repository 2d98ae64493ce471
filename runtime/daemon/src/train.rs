//! A forwarder's outgoing datagrams to one address, gathered into one
//! segmented send (UDP GSO, `tagwire_net::gso`): a run of datagrams of one
//! length (the last may be shorter) costs one system call and crosses the
//! links as one buffer. Each datagram stays in its own buffer until the
//! kernel reads it (one `iovec` each), and the buffers go back to their
//! owner for the next datagrams ([`Train::returned`]): nothing is copied
//! into a train. The session cuts messages evenly
//! (`tagwire_wire::datagram::FLAG_EVEN`) and fills batches to one length,
//! so a stream of equal messages makes long runs.
//!
//! Nothing waits for a train to fill: the forwarder sends it when it has
//! taken everything its ring holds now, before it sleeps, so a lone
//! message goes out at once, never waiting for company.
//!
//! **Two threads, one order, no send under a lock.** A route's datagrams
//! come from its forwarder and from the thread that takes its
//! acknowledgements (what they release), each gathering under the
//! session's lock, so the [`Train`] holds them in the session's order.
//! Sending is done after that lock, by one thread at a time
//! ([`Line::send_ready`]): a thread that finds the other sending leaves
//! its runs to it and goes on. Neither waits for the other's system call
//! (which, on a veth link, carries the receiver's UDP processing too),
//! and a run never overtakes one gathered before it.
//!
//! A run arrives at a router as a burst: through a short queue (a `tbf`
//! of two packets) most of a long one is dropped. So a train is one
//! datagram long after a retransmission and doubles after each clean
//! stretch ([`Train::adapt`]), as the session's batches do where they may
//! grow past a packet (the daemon's sessions keep them to one).
//!
//! **A train does not hold back a more urgent class.** To a qdisc a
//! segmented send is one packet: a `pfifo_fast` leaf under a shaping
//! `htb` class dequeues the whole train (up to 94 kB) at once, and the
//! class then owes its bytes, so a band-0 datagram that came just after
//! waits out the train's time at the shaped rate (15 ms at 50 Mbit/s)
//! although its band is first. So while a class of a better band is in
//! use on this node ([`Train::yield_to`]), the datagrams of worse bands go
//! as packets of their own: a run of them is one `sendmmsg`
//! (`gso::send_each_classed`), each datagram its own packet in the
//! qdisc, so a band-0 datagram waits behind one of them, not the run.
//! Measured through 50 Mbit/s at 120 % load (`tagwire perf priority`):
//! the critical channel's round trip p50 1.7 ms with trains, 0.21 ms with
//! one datagram per send (0.61 ms with four in one segmented send).
//! Sending them with one `sendmsg` each, as before, cost the bulk stream
//! three quarters of its throughput on a fast link (1.6 of 6.7 Gbit/s
//! at 8000 B through an unshaped veth) and gave the critical channel
//! nothing there (the same p99 to its floor, 1.4x, either way):
//! bench/results/priority/NOTES.md, "Yielding without one send each".

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tagwire_net::gso::{self, MAX_BYTES, MAX_SEGMENTS};
use tagwire_session::TxBuf;
use tagwire_wire::Priority;

use crate::lock;

/// How long a train stays at its length before it may double.
const CLEAN_STRETCH: Duration = Duration::from_millis(200);

/// Datagrams to one address that go out in one send.
#[derive(Debug, Default)]
struct Run {
    dest: Option<SocketAddr>,
    /// The datagrams' TOS byte (their packet class; 0: the socket's).
    tos: u8,
    /// The datagrams, each in a buffer of its own (sent where they are:
    /// one `iovec` each, no copy into one buffer).
    parts: Vec<TxBuf>,
    /// Their bytes.
    bytes: usize,
    /// The length of each datagram but the last.
    segment: usize,
    /// The last one was shorter: nothing may follow it.
    closed: bool,
    /// Each datagram a packet of its own (it yields to a better band):
    /// one `sendmmsg`, not one segmented send; any lengths.
    separate: bool,
}

impl Run {
    /// Sends it: one segmented send, or, where the kernel refuses
    /// segmentation (it then stays off for this socket), one datagram at
    /// a time. Gives its buffers back.
    fn send(self, sock: &UdpSocket, gso_off: &AtomicBool) -> Vec<TxBuf> {
        let Some(dest) = self.dest else {
            return self.parts;
        };
        if self.separate && self.parts.len() > 1 {
            return self.send_each(sock, dest);
        }
        let mut one_by_one = self.parts.len() == 1 || gso_off.load(Ordering::Relaxed);
        if !one_by_one {
            let mut refs = [&[][..]; MAX_SEGMENTS];
            for (r, p) in refs.iter_mut().zip(&self.parts) {
                *r = p;
            }
            let refs = &refs[..self.parts.len()];
            // EIO / EINVAL: no offload here (the datagrams of a refused
            // send never left; ENOBUFS and the like lose this train,
            // which the reliable windows repair as any loss).
            if gso::send_parts_classed(sock, dest, refs, self.segment, self.tos).is_err()
                && !gso::gso_supported(sock)
            {
                gso_off.store(true, Ordering::Relaxed);
                one_by_one = true;
            }
        }
        if one_by_one {
            for d in &self.parts {
                let _ = gso::send_parts_classed(sock, dest, &[d], d.len(), self.tos);
            }
        }
        self.parts
    }

    /// Sends it as packets of their own, in as few `sendmmsg` calls as
    /// the kernel takes them (one a datagram where it refuses the call; a
    /// datagram it refuses is lost, as from any send, and the reliable
    /// windows repair it).
    fn send_each(self, sock: &UdpSocket, dest: SocketAddr) -> Vec<TxBuf> {
        let mut refs = [&[][..]; MAX_SEGMENTS];
        for (r, p) in refs.iter_mut().zip(&self.parts) {
            *r = p;
        }
        let mut from = 0;
        while from < self.parts.len() {
            match gso::send_each_classed(sock, dest, &refs[from..self.parts.len()], self.tos) {
                Ok(n) if n > 0 => from += n,
                // (Refused or none taken: this one alone, and on.)
                _ => {
                    let d = refs[from];
                    let _ = gso::send_parts_classed(sock, dest, &[d], d.len(), self.tos);
                    from += 1;
                }
            }
        }
        self.parts
    }
}

/// Datagrams waiting to go, in the order they were gathered: runs ready
/// to send and the one still forming.
#[derive(Debug)]
pub(crate) struct Train {
    forming: Run,
    ready: VecDeque<Run>,
    /// Most datagrams a run takes now (see [`Train::adapt`]).
    limit: usize,
    /// The best band (as [`Priority::rank`]'s first element) in use on
    /// this node: datagrams of a worse one go as packets of their own.
    urgent: u8,
    /// Retransmissions seen so far, and when the limit may next grow.
    resent: u64,
    grow_at: Option<Instant>,
    /// Buffers of sent datagrams, for the owner to reuse
    /// ([`Train::returned`]).
    sent: Vec<TxBuf>,
    /// Emptied lists of sent runs, for the next runs (a new one grew from
    /// nothing, five reallocations for a run of 64).
    lists: Vec<Vec<TxBuf>>,
}

/// The band rank of a TOS byte.
fn rank_of(tos: u8) -> u8 {
    Priority::Dscp(tos >> 2).rank().0
}

/// Most emptied lists a train keeps.
const MAX_LISTS: usize = 8;

/// Most sent buffers a train keeps for its owner.
const MAX_RETURNED: usize = 4 * MAX_SEGMENTS;

impl Default for Train {
    fn default() -> Self {
        Self {
            forming: Run::default(),
            ready: VecDeque::new(),
            limit: MAX_SEGMENTS,
            urgent: 0,
            resent: 0,
            grow_at: None,
            sent: Vec::new(),
            lists: Vec::new(),
        }
    }
}

impl Train {
    /// Follows the link: one datagram a send after the stream's
    /// retransmission count (`resent`) moved, twice as many after each
    /// clean stretch, up to [`MAX_SEGMENTS`].
    pub(crate) fn adapt(&mut self, resent: u64, now: Instant) {
        let grow_at = *self.grow_at.get_or_insert(now + CLEAN_STRETCH);
        if resent != self.resent {
            self.resent = resent;
            self.limit = 1;
            self.grow_at = Some(now + CLEAN_STRETCH);
        } else if now >= grow_at {
            self.limit = (self.limit * 2).min(MAX_SEGMENTS);
            self.grow_at = Some(now + CLEAN_STRETCH);
        }
    }

    /// Datagrams of a band worse than `rank` (the best band in use on this
    /// node, [`Priority::rank`]'s first element) go as packets of their
    /// own (a run of them is one `sendmmsg`, not one segmented send).
    pub(crate) fn yield_to(&mut self, rank: u8) {
        self.urgent = rank;
    }

    /// Adds `datagram` for `dest` with TOS byte `tos` to the forming run,
    /// or, if it cannot join it, to a new one after it (a run is one
    /// address and one packet class).
    pub(crate) fn push(&mut self, dest: SocketAddr, tos: u8, datagram: impl Into<TxBuf>) {
        let datagram = datagram.into();
        let len = datagram.len();
        let separate = rank_of(tos) < self.urgent;
        let f = &self.forming;
        let joins = f.dest == Some(dest)
            && f.tos == tos
            && f.separate == separate
            && (separate || (!f.closed && len <= f.segment))
            && f.parts.len() < self.limit
            && f.bytes + len <= MAX_BYTES;
        if !joins {
            self.close();
        }
        let f = &mut self.forming;
        if f.parts.is_empty() {
            f.dest = Some(dest);
            f.tos = tos;
            f.segment = len;
            f.separate = separate;
        }
        f.parts.push(datagram);
        f.bytes += len;
        f.closed = len < f.segment;
        if len > MAX_BYTES / 2 || f.parts.len() >= self.limit {
            // Full (or a datagram too large to share a send).
            self.close();
        }
    }

    /// The forming run is ready to go.
    pub(crate) fn close(&mut self) {
        if !self.forming.parts.is_empty() {
            let next = Run {
                parts: self.lists.pop().unwrap_or_default(),
                ..Run::default()
            };
            self.ready
                .push_back(std::mem::replace(&mut self.forming, next));
        }
    }

    /// The buffers of datagrams sent so far, for the next ones.
    pub(crate) fn returned(&mut self) -> std::vec::Drain<'_, TxBuf> {
        self.sent.drain(..)
    }

    /// Keeps sent buffers of their own for the owner; lets go of the ones
    /// a window shares at once, so that the window, acknowledged, finds
    /// itself their only holder and writes its next datagrams there.
    fn give_back(&mut self, mut parts: Vec<TxBuf>) {
        let room = MAX_RETURNED.saturating_sub(self.sent.len());
        self.sent.extend(
            parts
                .drain(..)
                .filter(|p| matches!(p, TxBuf::Own(_)))
                .take(room),
        );
        if self.lists.len() < MAX_LISTS {
            self.lists.push(parts);
        }
    }
}

/// A route's [`Train`] and the right to send it, which one thread holds
/// at a time.
#[derive(Debug, Default)]
pub(crate) struct Line {
    train: Mutex<Train>,
    sending: AtomicBool,
}

impl Line {
    /// The train, to gather into (under the session's lock, in its
    /// order; nothing is sent while it is held).
    pub(crate) fn gather(&self) -> MutexGuard<'_, Train> {
        lock(&self.train)
    }

    /// Sends the runs that are ready, and any that are added meanwhile,
    /// unless another thread is sending: it then sends ours too, after
    /// its own, and this returns at once.
    pub(crate) fn send_ready(&self, sock: &UdpSocket, gso_off: &AtomicBool) {
        if self.sending.swap(true, Ordering::Acquire) {
            return;
        }
        let mut train = lock(&self.train);
        loop {
            let Some(run) = train.ready.pop_front() else {
                // (Cleared under the lock: a thread that adds a run after
                // this finds the right free and sends it itself.)
                self.sending.store(false, Ordering::Release);
                return;
            };
            drop(train);
            let parts = run.send(sock, gso_off);
            train = lock(&self.train);
            train.give_back(parts);
        }
    }

    /// Sends everything gathered, the forming run too.
    pub(crate) fn send_all(&self, sock: &UdpSocket, gso_off: &AtomicBool) {
        lock(&self.train).close();
        self.send_ready(sock, gso_off);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::Arc;

    fn recv_all(rx: &UdpSocket) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; gso::RECV_BUFFER];
        while let Ok((n, _)) = rx.recv_from(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    fn receiver() -> UdpSocket {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        rx
    }

    #[test]
    fn runs_of_one_length_go_together_and_every_datagram_arrives_whole_in_order() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (rx, other) = (receiver(), receiver());
        let (to, elsewhere) = (rx.local_addr().unwrap(), other.local_addr().unwrap());
        let off = AtomicBool::new(false);
        let line = Line::default();
        let mut want = Vec::new();
        // Equal ones, a shorter one (closes the run), a longer one (a new
        // run), another address, then a lone one.
        for i in 0..5u8 {
            want.push(vec![i; 100]);
        }
        want.push(vec![9; 40]);
        want.push(vec![10; 300]);
        {
            let mut t = line.gather();
            for d in &want {
                t.push(to, 0, d.clone());
            }
            t.push(elsewhere, 0, vec![7; 10]);
            t.push(to, 0, vec![11; 50]);
        }
        line.send_all(&tx, &off);
        want.push(vec![11; 50]);
        assert_eq!(recv_all(&rx), want);
        assert_eq!(recv_all(&other), vec![vec![7u8; 10]]);
        // The bounds: at most MAX_SEGMENTS datagrams per send.
        {
            let mut t = line.gather();
            for i in 0..(MAX_SEGMENTS + 3) {
                t.push(to, 0, vec![(i % 251) as u8; 20]);
            }
            assert_eq!(t.ready.len(), 1);
            assert_eq!(t.ready[0].parts.len(), MAX_SEGMENTS);
        }
        line.send_all(&tx, &off);
        assert_eq!(recv_all(&rx).len(), MAX_SEGMENTS + 3);
    }

    #[test]
    fn a_retransmission_shortens_trains_and_clean_stretches_lengthen_them() {
        let t0 = Instant::now();
        let mut t = Train::default();
        t.adapt(0, t0);
        assert_eq!(t.limit, MAX_SEGMENTS);
        t.adapt(3, t0);
        assert_eq!(t.limit, 1);
        t.adapt(3, t0 + CLEAN_STRETCH / 2);
        assert_eq!(t.limit, 1);
        t.adapt(3, t0 + CLEAN_STRETCH);
        assert_eq!(t.limit, 2);
        t.adapt(3, t0 + CLEAN_STRETCH * 2);
        assert_eq!(t.limit, 4);
        t.adapt(4, t0 + CLEAN_STRETCH * 3);
        assert_eq!(t.limit, 1);
        for i in 4..20 {
            t.adapt(4, t0 + CLEAN_STRETCH * i);
        }
        assert_eq!(t.limit, MAX_SEGMENTS);
        // At a limit of one, every datagram is a run of its own.
        t.adapt(5, t0);
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        t.push(to, 0, vec![1; 50]);
        t.push(to, 0, vec![2; 50]);
        assert!(
            t.forming.parts.is_empty(),
            "a one-datagram run waits for nothing"
        );
        assert_eq!(t.ready.len(), 2);
    }

    #[test]
    fn while_a_better_band_is_in_use_worse_ones_go_as_packets_of_their_own() {
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let (critical, normal, low) = (
            Priority::Critical.tos(),
            Priority::Normal.tos(),
            Priority::Low.tos(),
        );
        // (class, datagrams, separate) of each run.
        let runs = |t: &mut Train| -> Vec<(u8, usize, bool)> {
            t.close();
            let r = t
                .ready
                .iter()
                .map(|r| (r.tos, r.parts.len(), r.separate))
                .collect();
            t.ready.clear();
            r
        };
        let mut t = Train::default();
        let push_all = |t: &mut Train| {
            for (tos, len) in [
                (normal, 50),
                (normal, 50),
                (normal, 20),
                (normal, 50),
                (critical, 50),
                (critical, 50),
                (low, 50),
                (low, 50),
            ] {
                t.push(to, tos, vec![1; len]);
            }
        };
        // Only the default class in use: everything in segmented trains
        // (a shorter datagram ends one).
        push_all(&mut t);
        assert_eq!(
            runs(&mut t),
            vec![
                (normal, 3, false),
                (normal, 1, false),
                (critical, 2, false),
                (low, 2, false)
            ]
        );
        // A critical leg on this node: normal and low go as packets of
        // their own (any lengths in one run), critical still segmented.
        t.yield_to(Priority::Critical.rank().0);
        push_all(&mut t);
        assert_eq!(
            runs(&mut t),
            vec![(normal, 4, true), (critical, 2, false), (low, 2, true)]
        );
        // A normal one at best: low yields to it, normal does not.
        t.yield_to(Priority::Normal.rank().0);
        push_all(&mut t);
        assert_eq!(
            runs(&mut t),
            vec![
                (normal, 3, false),
                (normal, 1, false),
                (critical, 2, false),
                (low, 2, true)
            ]
        );
    }

    #[test]
    fn a_yielding_run_reaches_a_coalescing_socket_as_separate_datagrams() {
        let Some((tx, rx)) = gro_pair() else { return };
        let off = AtomicBool::new(false);
        let line = Line::default();
        line.gather().yield_to(Priority::Critical.rank().0);
        let to = rx.local_addr().unwrap();
        for i in 0..5u8 {
            line.gather().push(to, Priority::Low.tos(), vec![i; 100]);
        }
        assert_eq!(lock(&line.train).forming.parts.len(), 5, "one run");
        line.send_all(&tx, &off);
        // A segmented send would reach it whole (`a_run_is_one_send`):
        // here every datagram is a packet of its own.
        let mut buf = vec![0u8; gso::RECV_BUFFER];
        for i in 0..5u8 {
            let m = gso::recv_coalesced(&rx, &mut buf).unwrap();
            assert_eq!((m.len, m.segment), (100, None), "{m:?}");
            assert_eq!(buf[0], i, "in order");
        }
    }

    #[test]
    fn datagrams_of_two_packet_classes_never_share_a_run() {
        let mut t = Train::default();
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        t.push(to, 0, vec![1; 50]);
        t.push(to, 0, vec![2; 50]);
        t.push(to, 0x90, vec![3; 50]);
        t.push(to, 0x90, vec![4; 50]);
        t.push(to, 0, vec![5; 50]);
        t.close();
        let runs: Vec<(u8, usize)> = t.ready.iter().map(|r| (r.tos, r.parts.len())).collect();
        assert_eq!(runs, vec![(0, 2), (0x90, 2), (0, 1)]);
    }

    #[test]
    fn sent_buffers_go_back_to_the_owner() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = receiver();
        let off = AtomicBool::new(false);
        let line = Line::default();
        let bufs: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 64]).collect();
        let at: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
        for b in bufs {
            line.gather().push(rx.local_addr().unwrap(), 0, b);
        }
        assert_eq!(line.gather().returned().count(), 0, "nothing sent yet");
        line.send_all(&tx, &off);
        let back: Vec<usize> = line
            .gather()
            .returned()
            .map(|b| b.as_ptr() as usize)
            .collect();
        assert_eq!(back, at);
        assert_eq!(recv_all(&rx).len(), 3);
    }

    /// A sending socket and a coalescing receiver on loopback, if this
    /// kernel segments and coalesces (else it says it skips).
    fn gro_pair() -> Option<(UdpSocket, UdpSocket)> {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        if !gso::gso_supported(&tx) || gso::enable_gro(&rx).is_err() {
            println!("skipping: no UDP_SEGMENT / UDP_GRO here");
            return None;
        }
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Some((tx, rx))
    }

    #[test]
    fn a_run_is_one_send() {
        let Some((tx, rx)) = gro_pair() else { return };
        let off = AtomicBool::new(false);
        let line = Line::default();
        for i in 0..5u8 {
            line.gather()
                .push(rx.local_addr().unwrap(), 0, vec![i; 100]);
        }
        line.gather().push(rx.local_addr().unwrap(), 0, vec![5; 30]);
        line.send_all(&tx, &off);
        // Loopback hands a segmented send to a coalescing socket whole.
        let mut buf = vec![0u8; gso::RECV_BUFFER];
        let m = gso::recv_coalesced(&rx, &mut buf).unwrap();
        assert_eq!((m.len, m.segment), (530, Some(100)), "{m:?}");
        let parts: Vec<&[u8]> = gso::segments(&buf[..m.len], m.segment).collect();
        assert_eq!(parts.len(), 6);
        assert_eq!(parts[5], &[5u8; 30][..]);
        assert!(!off.load(Ordering::Relaxed));
    }

    #[test]
    fn a_thread_that_finds_another_sending_leaves_its_runs_to_it() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = receiver();
        let off = AtomicBool::new(false);
        let line = Line::default();
        // Another thread holds the right to send (it is in its system
        // call): ours wait for it, and this thread does not.
        line.sending.store(true, Ordering::Release);
        line.gather().push(rx.local_addr().unwrap(), 0, vec![1; 10]);
        line.send_all(&tx, &off);
        assert!(recv_all(&rx).is_empty(), "left to the sending thread");
        assert_eq!(line.gather().ready.len(), 1);
        // That thread, done with its run, finds ours and sends it.
        line.sending.store(false, Ordering::Release);
        line.send_ready(&tx, &off);
        assert_eq!(recv_all(&rx), vec![vec![1u8; 10]]);
        assert!(
            !line.sending.load(Ordering::Acquire),
            "the right is free again"
        );
    }

    #[test]
    fn two_threads_gathering_in_turn_send_in_the_order_they_gathered() {
        let tx = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let rx = receiver();
        let to = rx.local_addr().unwrap();
        let line = Arc::new(Line::default());
        // The session's lock: whoever holds it numbers the next datagrams
        // and gathers them; each sends after it, as the forwarder and the
        // acknowledgement thread do.
        let order = Arc::new(Mutex::new(0u32));
        const EACH: u32 = 60;
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (tx, line, order) = (tx.clone(), line.clone(), order.clone());
                std::thread::spawn(move || {
                    let off = AtomicBool::new(false);
                    for round in 0..EACH / 3 {
                        {
                            let mut n = lock(&order);
                            let mut t = line.gather();
                            for _ in 0..3 {
                                t.push(to, 0, n.to_be_bytes().to_vec());
                                *n += 1;
                            }
                            if round % 2 == 0 {
                                t.close();
                            }
                        }
                        line.send_ready(&tx, &off);
                    }
                    line.send_all(&tx, &off);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let got: Vec<u32> = recv_all(&rx)
            .iter()
            .map(|d| u32::from_be_bytes(d[..4].try_into().unwrap()))
            .collect();
        assert_eq!(got, (0..2 * EACH).collect::<Vec<_>>());
    }
}
