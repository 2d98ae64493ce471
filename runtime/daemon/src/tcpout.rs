//! The TCP carrier's sending side: one connection per node a forwarder
//! sends a tag's frames to (`crate::forward`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::guard::Guard;
use crate::secure::{self, HandshakeError, SecureWrite};

/// The TCP carrier to one node: frames of a u32 LE length and a datagram
/// (numbered by the session as best-effort ones; TCP makes them reliable
/// and ordered). A write blocks while the receiver is slow, which stops the
/// forwarder, fills the ring and holds the publisher back through the
/// gate, like a full window.
pub(crate) struct TcpOut {
    dest: SocketAddr,
    /// Authenticated with a domain key (`secure`).
    conn: Option<SecureWrite<std::net::TcpStream>>,
    /// No connection attempt before this (after a failure).
    retry_at: Instant,
}

/// How often a stalled TCP write checks whether its node is still wanted.
const TCP_WRITE_POLL: Duration = Duration::from_millis(100);

impl TcpOut {
    /// Not connected yet: the first frame connects.
    pub(crate) fn new(dest: SocketAddr) -> Self {
        Self {
            dest,
            conn: None,
            retry_at: Instant::now(),
        }
    }

    /// Sends one frame; false if it was lost (no connection, it broke, or
    /// the node stopped being `wanted` while a write was stalled). A stall,
    /// however long (TCP backing off on a lossy link), loses nothing.
    pub(crate) fn send(&mut self, guard: &Guard, bytes: &[u8], wanted: impl Fn() -> bool) -> bool {
        if self.conn.is_none() {
            if Instant::now() < self.retry_at {
                return false;
            }
            let connected =
                tagwire_net::tcp_connect_from(guard.node(), self.dest, Duration::from_secs(1))
                    .map_err(HandshakeError::Io)
                    .and_then(|c| {
                        let session = secure::handshake(&c, guard, true)?;
                        Ok((c, session))
                    });
            match connected {
                Ok((c, session)) => {
                    let _ = tagwire_net::tune_link(&c);
                    let _ = c.set_write_timeout(Some(TCP_WRITE_POLL));
                    self.conn = Some(SecureWrite::new(c, session.map(|s| s.sender)));
                }
                Err(e) => {
                    tracing::debug!(dest = %self.dest, error = %e, "TCP data connection failed");
                    self.retry_at = Instant::now() + Duration::from_millis(500);
                    return false;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let len = (bytes.len() as u32).to_le_bytes();
        let sent = write_fully(conn, &len, &wanted)
            .and_then(|()| write_fully(conn, bytes, &wanted))
            .and_then(|()| flush_fully(conn, &wanted))
            .is_ok();
        if !sent {
            // A frame may be half written: this connection is unusable.
            self.conn = None;
        }
        sent
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
            Ok(n) => bytes = &bytes[n..],
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
