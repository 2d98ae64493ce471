//! The TCP carrier's sending side: one connection per node a forwarder
//! sends a tag's frames to (`crate::forward`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use tagwire_session::{Carrier, Transmit};

use crate::guard::Guard;
use crate::secure::{self, HandshakeError, SecureWrite};

/// The TCP carrier to one node: frames of a u32 LE length and a datagram
/// (numbered by the session as best-effort ones; TCP makes them reliable
/// and ordered). A write blocks while the receiver is slow, which stops the
/// forwarder, fills the ring and holds the publisher back through the
/// gate, like a full window. The frames of one drain of the session go in
/// one write: the connection has no Nagle delay (a lone frame leaves at
/// once), so a write per length and per frame was a segment each.
pub(crate) struct TcpOut {
    dest: SocketAddr,
    /// Authenticated with a domain key (`secure`).
    conn: Option<SecureWrite<std::net::TcpStream>>,
    /// The frames of the write being made (kept for the next one).
    out: Vec<u8>,
    /// The TOS byte the connection sends with (its leg's packet class).
    tos: u8,
}

/// How often a stalled TCP write checks whether its node is still wanted.
const TCP_WRITE_POLL: Duration = Duration::from_millis(100);

/// How long one connection attempt may take: longer than the kernel's
/// first SYN retransmission (1 s), so one lost SYN costs a second, not an
/// attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The largest write buffer kept between writes (a drain of the session
/// is at most about 64 KiB).
const MAX_KEPT: usize = 256 * 1024;

/// First and longest pause between failed connection attempts.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// The TCP carrier to each node a forwarder sends to.
#[derive(Default)]
pub(crate) struct TcpOuts {
    conns: HashMap<SocketAddr, TcpOut>,
    /// The nodes a call has sent to so far (kept: no allocation a call).
    sent: Vec<SocketAddr>,
}

impl TcpOuts {
    /// Sends the TCP frames among `tx`: each node's in order in one write
    /// (see [`TcpOut::send_all`]), while `wanted(node)`. Returns how many
    /// were lost.
    pub(crate) fn send(
        &mut self,
        guard: &Guard,
        tx: &[Transmit],
        wanted: impl Fn(SocketAddr) -> bool,
    ) -> u64 {
        let tcp = |t: &&Transmit| t.carrier == Carrier::Tcp;
        let mut lost = 0;
        self.sent.clear();
        for (i, first) in tx.iter().enumerate().filter(|(_, t)| tcp(t)) {
            let dest = first.dest;
            if self.sent.contains(&dest) {
                continue;
            }
            self.sent.push(dest);
            let frames = || {
                tx[i..]
                    .iter()
                    .filter(tcp)
                    .filter(move |t| t.dest == dest)
                    .map(|t| &t.bytes[..])
            };
            let conn = self.conns.entry(dest).or_insert_with(|| TcpOut::new(dest));
            // The leg's class: one per destination of a forwarder.
            conn.set_tos(first.priority.tos());
            if !conn.send_all(guard, frames(), || wanted(dest)) {
                lost += frames().count() as u64;
            }
        }
        lost
    }

    /// Keeps the connections to the nodes `keep` accepts; the others are
    /// given up on ([`TcpOut::abandon`]: a node that went down must not get
    /// their last frames after the next connection's, once it is back).
    pub(crate) fn retain(&mut self, keep: impl Fn(SocketAddr) -> bool) {
        self.conns.retain(|a, c| {
            let kept = keep(*a);
            if !kept {
                c.abandon();
            }
            kept
        });
    }
}

impl TcpOut {
    /// Not connected yet: the first frame connects.
    pub(crate) fn new(dest: SocketAddr) -> Self {
        Self {
            dest,
            conn: None,
            out: Vec::new(),
            tos: 0,
        }
    }

    /// Sends from now on with TOS byte `tos` (a class changed at run time
    /// applies to the connection's next segment; the kernel also queues
    /// them in the class's `pfifo_fast` band).
    pub(crate) fn set_tos(&mut self, tos: u8) {
        if tos == self.tos {
            return;
        }
        self.tos = tos;
        if let Some(c) = &self.conn {
            Self::apply_tos(c.get_ref(), tos);
        }
    }

    fn apply_tos(c: &std::net::TcpStream, tos: u8) {
        if let Err(e) = tagwire_net::set_stream_tos(c, tos) {
            tracing::warn!(error = %e, tos, "a TCP data connection keeps its packet class");
        }
    }

    /// Sends frames; false if they were lost (the connection broke, or the
    /// node stopped being `wanted` while a connection or a write was
    /// waiting). A stall, however long (TCP backing off on a lossy link, a
    /// node that does not answer yet), loses nothing: without a connection
    /// the frame waits for one, with a growing pause between attempts,
    /// as long as its node is wanted, which holds the forwarder and through
    /// the ring's gate the publisher back. (Dropping frames for a while
    /// after a failed attempt instead loses data without a word: with 3 %
    /// drops between two namespaces, one lost SYN and 500 ms of dropping
    /// cost a lossless subscriber the whole stream.)
    ///
    /// `frames` go in order in one write; a broken connection may have
    /// taken any of them (the receiver counts the gap).
    pub(crate) fn send_all<'a>(
        &mut self,
        guard: &Guard,
        frames: impl IntoIterator<Item = &'a [u8]>,
        wanted: impl Fn() -> bool,
    ) -> bool {
        let mut pause = RETRY_FIRST;
        let mut failures = 0u32;
        while self.conn.is_none() {
            // (Both watch `wanted`: a stopping forwarder is not held by a
            // node that does not answer.)
            let connected = tagwire_net::tcp_connect_from_while(
                guard.node(),
                self.dest,
                CONNECT_TIMEOUT,
                &wanted,
            )
            .map_err(HandshakeError::Io)
            .and_then(|c| {
                let session = secure::handshake_while(&c, guard, true, &wanted)?;
                Ok((c, session))
            });
            match connected {
                Ok((c, session)) => {
                    let _ = tagwire_net::tune_link(&c);
                    if self.tos != 0 {
                        Self::apply_tos(&c, self.tos);
                    }
                    let _ = c.set_write_timeout(Some(TCP_WRITE_POLL));
                    self.conn = Some(SecureWrite::new(c, session.map(|s| s.sender)));
                }
                Err(e) => {
                    failures += 1;
                    if failures == 1 {
                        tracing::debug!(dest = %self.dest, error = %e, "TCP data connection failed; trying again");
                    } else if failures == 5 {
                        tracing::warn!(dest = %self.dest, error = %e, "TCP data connection failed 5 times; holding the tag's frames back while its node is a destination");
                    }
                    if !wanted() {
                        return false;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(RETRY_MAX);
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        self.out.clear();
        for f in frames {
            self.out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            self.out.extend_from_slice(f);
        }
        let sent = write_fully(conn, &self.out, &wanted)
            .and_then(|()| flush_fully(conn, &wanted))
            .is_ok();
        if self.out.capacity() > MAX_KEPT {
            self.out = Vec::new();
        }
        if !sent {
            // A frame may be half written: this connection is unusable.
            self.abandon();
        }
        sent
    }

    /// Gives the connection up: what it has not sent is dropped with it
    /// (the receiver counts those frames missing), never delivered later,
    /// behind the frames of the next connection.
    fn abandon(&mut self) {
        if let Some(c) = self.conn.take() {
            let _ = tagwire_net::abort_on_close(c.get_ref());
        }
    }
}

/// Writes all of `bytes`, resuming after each write timeout while `wanted`.
fn write_fully(
    conn: &mut impl std::io::Write,
    mut bytes: &[u8],
    wanted: &impl Fn() -> bool,
) -> std::io::Result<()> {
    use std::io::ErrorKind;
    while !bytes.is_empty() {
        match conn.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            // (Asked between writes too, not only when one waited: a long
            // write, sealed a frame at a time, must not hold a stopping
            // forwarder.)
            Ok(n) => {
                bytes = &bytes[n..];
                if !bytes.is_empty() && !wanted() {
                    return Err(ErrorKind::Interrupted.into());
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !wanted() {
                    return Err(e);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Flushes what a sealing writer holds back, resuming after each write
/// timeout while `wanted`.
fn flush_fully(conn: &mut impl std::io::Write, wanted: &impl Fn() -> bool) -> std::io::Result<()> {
    use std::io::ErrorKind;
    loop {
        match conn.flush() {
            Ok(()) => return Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !wanted() {
                    return Err(e);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{IpAddr, Ipv4Addr, TcpListener};
    use std::sync::atomic::{AtomicBool, Ordering};

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn a_long_write_stops_between_writes_when_its_node_is_no_longer_wanted() {
        /// Takes 10 bytes a call, however many it is given.
        struct Slow(usize);
        impl std::io::Write for Slow {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                let n = b.len().min(10);
                self.0 += n;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let calls = std::cell::Cell::new(0);
        let wanted = || {
            calls.set(calls.get() + 1);
            calls.get() < 3
        };
        let mut w = Slow(0);
        let e = write_fully(&mut w, &[0u8; 1000], &wanted).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert_eq!(w.0, 30, "it went on after being told");
        // Wanted throughout: all of it.
        let mut w = Slow(0);
        write_fully(&mut w, &[0u8; 1000], &|| true).unwrap();
        assert_eq!(w.0, 1000);
    }

    /// What a connection carries for `frames`: each behind its length.
    fn framed(frames: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for f in frames {
            v.extend_from_slice(&(f.len() as u32).to_le_bytes());
            v.extend_from_slice(f);
        }
        v
    }

    /// A loopback listener and the thread that takes its one connection:
    /// everything that arrived on it once it closes.
    fn listen() -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind((LO, 0)).unwrap();
        let dest = l.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            got
        });
        (dest, reader)
    }

    /// A loopback port nobody listens on (yet).
    fn free_port() -> SocketAddr {
        let l = TcpListener::bind((LO, 0)).unwrap();
        l.local_addr().unwrap()
    }

    #[test]
    fn a_connection_given_up_on_delivers_nothing_it_had_not_sent() {
        // A receiver that does not read yet: the writes stall once both
        // buffers are full, and the node stops being wanted.
        let guard = Guard::new(None, false, LO, 1);
        let l = TcpListener::bind((LO, 0)).unwrap();
        let dest = l.local_addr().unwrap();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let _ = wait.recv();
            let mut buf = vec![0u8; 1 << 16];
            // To the end (a plain close, after all it had sent), or to the
            // reset.
            loop {
                match c.read(&mut buf) {
                    Ok(0) => return false,
                    Ok(_) => {}
                    Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
                }
            }
        });
        let mut out = TcpOut::new(dest);
        let frame = vec![1u8; 60_000];
        let stop = AtomicBool::new(false);
        for _ in 0..1000 {
            if !out.send_all(&guard, [&frame[..]], || !stop.swap(true, Ordering::Relaxed)) {
                break;
            }
            stop.store(false, Ordering::Relaxed);
        }
        assert!(out.conn.is_none(), "a write stalled and was given up");
        let _ = go.send(());
        // The rest of the sender's buffer never came, and the reader knows
        // (a plain close would have delivered all of it, however late).
        assert!(
            reader.join().unwrap(),
            "the connection ended without a reset"
        );
    }

    #[test]
    fn a_frame_waits_for_a_node_that_listens_late_and_arrives_whole() {
        let guard = Guard::new(None, false, LO, 1);
        let dest = free_port();
        let late = std::thread::spawn(move || {
            // Refused for 300 ms (several attempts), then listening.
            std::thread::sleep(Duration::from_millis(300));
            let l = TcpListener::bind(dest).unwrap();
            let (mut c, _) = l.accept().unwrap();
            let mut got = vec![0u8; 4 + 5];
            c.read_exact(&mut got).unwrap();
            got
        });
        let mut out = TcpOut::new(dest);
        let start = std::time::Instant::now();
        assert!(
            out.send_all(&guard, [&b"hello"[..]], || true),
            "sent, not dropped"
        );
        assert!(start.elapsed() >= Duration::from_millis(250));
        let got = late.join().unwrap();
        assert_eq!(&got[..4], &5u32.to_le_bytes());
        assert_eq!(&got[4..], b"hello");
    }

    #[test]
    fn a_connection_sends_with_its_legs_class_and_follows_a_change() {
        use tagwire_session::Class;
        use tagwire_wire::Priority;
        let guard = Guard::new(None, false, LO, 1);
        let (dest, reader) = listen();
        let t = |priority: Priority| Transmit {
            priority,
            dest,
            carrier: Carrier::Tcp,
            class: Class::Data,
            bytes: b"x".to_vec().into(),
        };
        let mut outs = TcpOuts::default();
        let tos = |outs: &TcpOuts| {
            let c = outs.conns[&dest].conn.as_ref().expect("connected");
            tagwire_net::stream_tos(c.get_ref()).unwrap()
        };
        // Classed before the connection exists: it connects classed.
        assert_eq!(outs.send(&guard, &[t(Priority::Critical)], |_| true), 0);
        assert_eq!(tos(&outs), Priority::Critical.tos());
        // Changed at run time: the live connection follows.
        assert_eq!(outs.send(&guard, &[t(Priority::Low)], |_| true), 0);
        assert_eq!(tos(&outs), Priority::Low.tos());
        assert_eq!(outs.send(&guard, &[t(Priority::Normal)], |_| true), 0);
        assert_eq!(tos(&outs), 0);
        drop(outs);
        assert_eq!(reader.join().unwrap(), framed(&[b"x", b"x", b"x"]));
    }

    #[test]
    fn frames_sent_together_arrive_in_order_each_behind_its_length() {
        let guard = Guard::new(None, false, LO, 1);
        let (dest, reader) = listen();
        let mut out = TcpOut::new(dest);
        let big = vec![7u8; 1400];
        assert!(out.send_all(&guard, [&b"one"[..], &big, b""], || true));
        assert!(out.send_all(&guard, [&b"four"[..]], || true));
        drop(out);
        assert_eq!(
            reader.join().unwrap(),
            framed(&[b"one", &big, b"", b"four"])
        );
    }

    #[test]
    fn each_node_gets_its_own_tcp_frames_in_order_and_nothing_else() {
        use tagwire_session::Class;
        let guard = Guard::new(None, false, LO, 1);
        let ((a, ra), (b, rb)) = (listen(), listen());
        let t = |dest, carrier, bytes: &[u8]| Transmit {
            priority: Default::default(),
            dest,
            carrier,
            class: Class::Data,
            bytes: bytes.to_vec().into(),
        };
        let tx = [
            t(b, Carrier::Tcp, b"b1"),
            t(a, Carrier::Tcp, b"a1"),
            t(a, Carrier::Udp, b"udp"),
            t(b, Carrier::Tcp, b"b2"),
            t(a, Carrier::Tcp, b"a2"),
        ];
        let mut outs = TcpOuts::default();
        assert_eq!(outs.send(&guard, &tx, |_| true), 0);
        assert_eq!(outs.send(&guard, &tx[1..2], |_| true), 0);
        drop(outs);
        assert_eq!(ra.join().unwrap(), framed(&[b"a1", b"a2", b"a1"]));
        assert_eq!(rb.join().unwrap(), framed(&[b"b1", b"b2"]));
    }

    #[test]
    fn a_frame_for_a_node_no_longer_wanted_is_given_up() {
        let guard = Guard::new(None, false, LO, 1);
        let mut out = TcpOut::new(free_port());
        let asked = AtomicBool::new(false);
        let wanted = || !asked.swap(true, Ordering::Relaxed);
        // Wanted for the first attempt's failure, then not: false, at once.
        assert!(!out.send_all(&guard, [&b"x"[..]], wanted));
    }
}
