//! Authenticated TCP connections between daemons: the blocking glue around
//! `tagwire_auth`'s Noise handshake (control links in [`crate::peers`], the
//! TCP data carrier in `forward` / `delivery`), and the stream wrappers
//! that encrypt and authenticate every byte after it. Without a domain key
//! the wrappers pass bytes through and no handshake is made.

use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use tagwire_auth::link::MAX_PLAIN;
use tagwire_auth::{Deframer, Handshake, LinkError, LinkHello, LinkReceiver, LinkSender, Progress};

use crate::guard::Guard;

/// How long a handshake may take before the connection is dropped.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a connection was not authenticated.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// The socket failed or timed out.
    #[error("handshake i/o: {0}")]
    Io(#[from] io::Error),
    /// The other end has another key, or spoke something else.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The other end claims another address than it connects from.
    #[error("peer says it is {claimed} but connects from {actual}")]
    WrongAddress {
        /// What it said.
        claimed: IpAddr,
        /// Where it is.
        actual: IpAddr,
    },
}

/// A connection's authenticated directions, and who is at the other end.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) peer: LinkHello,
    pub(crate) sender: LinkSender,
    pub(crate) receiver: LinkReceiver,
}

/// Runs the handshake on `stream` (as the dialing end with `initiator`),
/// blocking at most [`HANDSHAKE_TIMEOUT`]. `None` without a key. The
/// stream's read timeout is left as it was.
pub(crate) fn handshake(
    stream: &TcpStream,
    guard: &Guard,
    initiator: bool,
) -> Result<Option<Session>, HandshakeError> {
    handshake_while(stream, guard, initiator, &|| true)
}

/// [`handshake`], giving up early (`Interrupted`) once `keep` says no: it
/// is asked at least every [`HANDSHAKE_POLL`] while waiting for the other
/// end (a stopping daemon is not held by a peer that does not answer).
pub(crate) fn handshake_while(
    stream: &TcpStream,
    guard: &Guard,
    initiator: bool,
    keep: &dyn Fn() -> bool,
) -> Result<Option<Session>, HandshakeError> {
    let (Some(keys), Some(mine)) = (guard.keys(), guard.hello()) else {
        return Ok(None);
    };
    let actual = stream.peer_addr()?.ip();
    let before = stream.read_timeout()?;
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let mut s = stream;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut hs = if initiator {
        let (hs, first) = Handshake::initiator(&keys.active, mine)?;
        s.write_all(&first)?;
        hs
    } else {
        // (During a key roll the other end may dial with either key.)
        let accepted: Vec<_> = keys.accepted.iter().cloned().collect();
        Handshake::responder_any(&accepted, mine)?
    };
    let mut frames = Deframer::default();
    let done = loop {
        let body = next_frame(&mut s, &mut frames, deadline, keep)?;
        match hs.handle_frame(&body)? {
            Progress::Send(f) => s.write_all(&f)?,
            Progress::Done {
                send,
                peer,
                sender,
                receiver,
            } => {
                if let Some(f) = send {
                    s.write_all(&f)?;
                }
                break Session {
                    peer,
                    sender,
                    receiver,
                };
            }
        }
    };
    // Bytes after the last handshake frame belong to the transport.
    let mut done = done;
    let rest = frames.take_rest();
    done.receiver.push(&rest);
    stream.set_read_timeout(before)?;
    if done.peer.node != actual {
        return Err(HandshakeError::WrongAddress {
            claimed: done.peer.node,
            actual,
        });
    }
    Ok(Some(done))
}

/// How often a handshake waiting for the other end asks whether to go on.
const HANDSHAKE_POLL: Duration = Duration::from_millis(100);

fn next_frame(
    s: &mut &TcpStream,
    frames: &mut Deframer,
    deadline: Instant,
    keep: &dyn Fn() -> bool,
) -> Result<Vec<u8>, HandshakeError> {
    loop {
        if let Some(f) = frames.next_frame() {
            return Ok(f);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut).into());
        }
        if !keep() {
            return Err(io::Error::from(io::ErrorKind::Interrupted).into());
        }
        s.set_read_timeout(Some(left.min(HANDSHAKE_POLL)))?;
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => frames.push(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads plaintext from an authenticated connection (or passes bytes
/// through without a key). A frame that fails to open is `InvalidData`.
#[derive(Debug)]
pub(crate) struct SecureRead<R> {
    inner: R,
    rx: Option<LinkReceiver>,
    plain: Vec<u8>,
    at: usize,
}

impl<R: Read> SecureRead<R> {
    pub(crate) fn new(inner: R, rx: Option<LinkReceiver>) -> Self {
        Self {
            inner,
            rx,
            plain: Vec::new(),
            at: 0,
        }
    }

    pub(crate) fn get_ref(&self) -> &R {
        &self.inner
    }
}

impl<R: Read> Read for SecureRead<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let Some(rx) = self.rx.as_mut() else {
            return self.inner.read(out);
        };
        loop {
            if self.at < self.plain.len() {
                let n = out.len().min(self.plain.len() - self.at);
                out[..n].copy_from_slice(&self.plain[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            match rx.next_plain() {
                Ok(Some(p)) => {
                    self.plain = p;
                    self.at = 0;
                    continue;
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.inner.read(&mut chunk)?;
            if n == 0 {
                return Ok(0);
            }
            rx.push(&chunk[..n]);
        }
    }
}

/// Writes plaintext to an authenticated connection (or passes bytes through
/// without a key). Each `write` seals up to one frame; what the socket did
/// not take yet goes out first on the next `write` or `flush`, so a write
/// timeout never tears a frame.
#[derive(Debug)]
pub(crate) struct SecureWrite<W> {
    inner: W,
    tx: Option<LinkSender>,
    pending: Vec<u8>,
    at: usize,
}

impl<W: Write> SecureWrite<W> {
    pub(crate) fn new(inner: W, tx: Option<LinkSender>) -> Self {
        Self {
            inner,
            tx,
            pending: Vec::new(),
            at: 0,
        }
    }

    pub(crate) fn get_ref(&self) -> &W {
        &self.inner
    }

    fn drain(&mut self) -> io::Result<()> {
        while self.at < self.pending.len() {
            match self.inner.write(&self.pending[self.at..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.at += n,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl<W: Write> Write for SecureWrite<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.tx.is_none() {
            return self.inner.write(buf);
        }
        self.drain()?;
        let n = buf.len().min(MAX_PLAIN);
        self.pending.clear();
        self.at = 0;
        if let Some(tx) = self.tx.as_mut() {
            tx.seal(&buf[..n], &mut self.pending);
        }
        // The plaintext is taken; a stalled socket gets the rest later.
        match self.drain() {
            Err(e)
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Err(e)
            }
            _ => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()?;
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use tagwire_auth::DomainKey;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    fn guard(k: u8, epoch: u64) -> Guard {
        let key = DomainKey::from_bytes([k; 32]);
        Guard::new(Some(&key), false, "127.0.0.1".parse().unwrap(), epoch)
    }

    #[test]
    fn a_handshake_with_a_silent_peer_gives_up_when_told() {
        let (a, _silent) = pair();
        let start = Instant::now();
        let told = start + Duration::from_millis(200);
        let e = handshake_while(&a, &guard(1, 1), true, &|| Instant::now() < told).unwrap_err();
        assert!(
            matches!(&e, HandshakeError::Io(e) if e.kind() == io::ErrorKind::Interrupted),
            "{e}"
        );
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(200) + 2 * HANDSHAKE_POLL,
            "{took:?}"
        );
        assert!(took < HANDSHAKE_TIMEOUT);
    }

    #[test]
    fn keyed_ends_handshake_and_exchange_bytes_and_a_wrong_key_fails() {
        let (a, b) = pair();
        let t = std::thread::spawn(move || {
            let s = handshake(&b, &guard(1, 2), false).unwrap().unwrap();
            let mut r = SecureRead::new(&b, Some(s.receiver));
            let mut got = vec![0u8; 100_000];
            r.read_exact(&mut got).unwrap();
            (s.peer.epoch, got)
        });
        let s = handshake(&a, &guard(1, 1), true).unwrap().unwrap();
        assert_eq!(s.peer.epoch, 2);
        let mut w = SecureWrite::new(&a, Some(s.sender));
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        w.write_all(&data).unwrap();
        w.flush().unwrap();
        let (epoch, got) = t.join().unwrap();
        assert_eq!((epoch, got), (1, data));

        let (a, b) = pair();
        let t = std::thread::spawn(move || handshake(&b, &guard(2, 2), false).map(|_| ()));
        assert!(handshake(&a, &guard(1, 1), true).is_err());
        assert!(t.join().unwrap().is_err());
    }

    #[test]
    fn a_silent_or_garbage_speaking_peer_fails_the_handshake() {
        let (a, b) = pair();
        let t = std::thread::spawn(move || handshake(&b, &guard(1, 2), false).map(|_| ()));
        (&a).write_all(&[0, 3, 1, 2, 3]).unwrap();
        assert!(matches!(
            t.join().unwrap(),
            Err(HandshakeError::Link(LinkError::Unauthenticated(_)))
        ));
        drop(a);
    }
}
