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
//! message goes out as soon as it did before.
//!
//! A run arrives at a router as a burst: through a short queue (a `tbf`
//! of two packets) most of a long one is dropped. So, as the session's
//! batches did when they were larger than a packet, a train is one
//! datagram long after a retransmission and doubles after each clean
//! stretch ([`Train::adapt`]).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tagwire_net::gso::{self, MAX_BYTES, MAX_SEGMENTS};

/// How long a train stays at its length before it may double.
const CLEAN_STRETCH: Duration = Duration::from_millis(200);

/// Datagrams waiting to go to one address.
#[derive(Debug)]
pub(crate) struct Train {
    /// The datagrams, each in a buffer of its own (sent where they are:
    /// one `iovec` each, no copy into one buffer).
    parts: Vec<Vec<u8>>,
    /// Their bytes.
    bytes: usize,
    dest: Option<SocketAddr>,
    /// The length of each datagram but the last.
    segment: usize,
    /// The last one was shorter: nothing may follow it.
    closed: bool,
    /// Most datagrams a send takes now (see [`Train::adapt`]).
    limit: usize,
    /// Retransmissions seen so far, and when the limit may next grow.
    resent: u64,
    grow_at: Option<Instant>,
    /// Buffers of sent datagrams, for the owner to reuse
    /// ([`Train::returned`]).
    sent: Vec<Vec<u8>>,
}

/// Most sent buffers a train keeps for its owner.
const MAX_RETURNED: usize = 4 * MAX_SEGMENTS;

impl Default for Train {
    fn default() -> Self {
        Self {
            parts: Vec::new(),
            bytes: 0,
            dest: None,
            segment: 0,
            closed: false,
            limit: MAX_SEGMENTS,
            resent: 0,
            grow_at: None,
            sent: Vec::new(),
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

    /// Adds `datagram` for `dest`, sending what waits first if it cannot
    /// join them.
    pub(crate) fn push(
        &mut self,
        sock: &UdpSocket,
        gso_off: &AtomicBool,
        dest: SocketAddr,
        datagram: Vec<u8>,
    ) {
        let len = datagram.len();
        let joins = self.dest == Some(dest)
            && !self.closed
            && len <= self.segment
            && self.parts.len() < self.limit
            && self.bytes + len <= MAX_BYTES;
        if !joins {
            self.send(sock, gso_off);
        }
        if self.parts.is_empty() {
            self.dest = Some(dest);
            self.segment = len;
        }
        self.parts.push(datagram);
        self.bytes += len;
        self.closed = len < self.segment;
        if gso_off.load(Ordering::Relaxed) || len > MAX_BYTES / 2 || self.parts.len() >= self.limit
        {
            // No offload (or a datagram too large to share a send).
            self.send(sock, gso_off);
        }
    }

    /// Sends what waits: one segmented send, or, where the kernel refuses
    /// segmentation (it then stays off for this socket), one datagram at
    /// a time.
    pub(crate) fn send(&mut self, sock: &UdpSocket, gso_off: &AtomicBool) {
        let Some(dest) = self.dest.take() else {
            return;
        };
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
            if gso::send_parts(sock, dest, refs, self.segment).is_err() && !gso::gso_supported(sock)
            {
                gso_off.store(true, Ordering::Relaxed);
                one_by_one = true;
            }
        }
        if one_by_one {
            for d in &self.parts {
                let _ = sock.send_to(d, dest);
            }
        }
        for p in self.parts.drain(..) {
            if self.sent.len() < MAX_RETURNED {
                self.sent.push(p);
            }
        }
        self.bytes = 0;
        self.closed = false;
    }

    /// The buffers of datagrams sent so far, for the next ones.
    pub(crate) fn returned(&mut self) -> std::vec::Drain<'_, Vec<u8>> {
        self.sent.drain(..)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn recv_all(rx: &UdpSocket) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; gso::RECV_BUFFER];
        while let Ok((n, _)) = rx.recv_from(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    #[test]
    fn runs_of_one_length_go_together_and_every_datagram_arrives_whole_in_order() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        other
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let (to, elsewhere) = (rx.local_addr().unwrap(), other.local_addr().unwrap());
        let off = AtomicBool::new(false);
        let mut t = Train::default();
        let mut want = Vec::new();
        // Equal ones, a shorter one (closes the run), a longer one (a new
        // run), another address, then a lone one.
        for i in 0..5u8 {
            want.push(vec![i; 100]);
        }
        want.push(vec![9; 40]);
        want.push(vec![10; 300]);
        for d in &want {
            t.push(&tx, &off, to, d.clone());
        }
        t.push(&tx, &off, elsewhere, vec![7; 10]);
        t.push(&tx, &off, to, vec![11; 50]);
        t.send(&tx, &off);
        want.push(vec![11; 50]);
        assert_eq!(recv_all(&rx), want);
        assert_eq!(recv_all(&other), vec![vec![7u8; 10]]);
        // The bounds: at most MAX_SEGMENTS datagrams per send.
        for i in 0..(MAX_SEGMENTS + 3) {
            t.push(&tx, &off, to, vec![(i % 251) as u8; 20]);
        }
        t.send(&tx, &off);
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
        // At a limit of one, every datagram goes at once.
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        t.adapt(5, t0);
        let off = AtomicBool::new(false);
        t.push(&tx, &off, rx.local_addr().unwrap(), vec![1; 50]);
        assert!(t.parts.is_empty(), "a one-datagram train waits for nothing");
        assert_eq!(recv_all(&rx), vec![vec![1u8; 50]]);
    }

    #[test]
    fn sent_buffers_go_back_to_the_owner() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let off = AtomicBool::new(false);
        let mut t = Train::default();
        let bufs: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 64]).collect();
        let at: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
        for b in bufs {
            t.push(&tx, &off, rx.local_addr().unwrap(), b);
        }
        assert_eq!(t.returned().count(), 0, "nothing sent yet");
        t.send(&tx, &off);
        let back: Vec<usize> = t.returned().map(|b| b.as_ptr() as usize).collect();
        assert_eq!(back, at);
        assert_eq!(recv_all(&rx).len(), 3);
    }

    #[test]
    fn a_run_is_one_send() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        if !gso::gso_supported(&tx) || gso::enable_gro(&rx).is_err() {
            println!("skipping: no UDP_SEGMENT / UDP_GRO here");
            return;
        }
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let off = AtomicBool::new(false);
        let mut t = Train::default();
        for i in 0..5u8 {
            t.push(&tx, &off, rx.local_addr().unwrap(), vec![i; 100]);
        }
        t.push(&tx, &off, rx.local_addr().unwrap(), vec![5; 30]);
        t.send(&tx, &off);
        // Loopback hands a segmented send to a coalescing socket whole.
        let mut buf = vec![0u8; gso::RECV_BUFFER];
        let m = gso::recv_coalesced(&rx, &mut buf).unwrap();
        assert_eq!((m.len, m.segment), (530, Some(100)), "{m:?}");
        let parts: Vec<&[u8]> = gso::segments(&buf[..m.len], m.segment).collect();
        assert_eq!(parts.len(), 6);
        assert_eq!(parts[5], &[5u8; 30][..]);
        assert!(!off.load(Ordering::Relaxed));
    }
}
