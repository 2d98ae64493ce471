//! The TCP carrier's inbound side: one thread per connection from a peer's
//! forwarder, frames of a u32 LE length and a data or batch datagram. With
//! a domain key each connection authenticates first (`crate::secure`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tagwire_reliable::{Reassembler, ReassemblerConfig};
use tagwire_wire::datagram::{Body, Datagram};

use super::{drain_held, held_full, take, HELD_POLL};
use crate::{lock, Shared};

/// TCP data connections one peer may hold open here (a thread each).
const TCP_PER_PEER: usize = 8;

pub(super) fn accept_loop(shared: &Arc<Shared>, listener: &std::net::TcpListener) {
    let open: Arc<Mutex<HashMap<std::net::IpAddr, usize>>> = Arc::default();
    while !shared.is_stopping() {
        match listener.accept() {
            Ok((conn, from)) => {
                // Only up peers, and a bounded number each.
                let ip = from.ip();
                let admitted = shared.guard.is_up(ip) && {
                    let mut o = lock(&open);
                    let n = o.entry(ip).or_insert(0);
                    (*n < TCP_PER_PEER).then(|| *n += 1).is_some()
                };
                if !admitted {
                    crate::stats::refused(shared, ip, crate::guard::Refusal::Unauthenticated);
                    tracing::debug!(%from, "TCP data connection refused (not a peer, or too many)");
                    continue;
                }
                let (s, o) = (shared.clone(), open.clone());
                let spawned = std::thread::Builder::new()
                    .name("tagwired-tcp-in".into())
                    .spawn(move || {
                        tcp_inbound(&s, conn, from);
                        if let Some(n) = lock(&o).get_mut(&ip) {
                            *n -= 1;
                        }
                    });
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "cannot serve a TCP data connection");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                tracing::debug!(error = %e, "accept failed");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Largest frame on a TCP data connection: one datagram.
const MAX_TCP_FRAME: usize = tagwire_wire::datagram::MAX_DATAGRAM;

/// One TCP data connection: frames of a u32 LE length and a data or batch
/// datagram, delivered in order. A malformed frame is counted and ends the
/// connection (the sender reconnects).
fn tcp_inbound(shared: &Arc<Shared>, conn: std::net::TcpStream, from: SocketAddr) {
    use std::io::Read;
    let _ = conn.set_nonblocking(false);
    // With a key, the connection authenticates first (as a control link
    // does); its frames are then Noise transport messages.
    let session = match crate::secure::handshake(&conn, &shared.guard, false) {
        Ok(s) => s,
        Err(e) => {
            crate::stats::refused(shared, from.ip(), crate::guard::Refusal::Unauthenticated);
            tracing::debug!(%from, error = %e, "TCP data connection not authenticated");
            return;
        }
    };
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let conn = crate::secure::SecureRead::new(conn, session.map(|s| s.receiver));
    let mut conn = std::io::BufReader::with_capacity(256 * 1024, conn);
    let mut reasm = Reassembler::new(ReassemblerConfig::default());
    let mut buf = vec![0u8; MAX_TCP_FRAME];
    // Reads exactly `out.len()` bytes; None on EOF, error or shutdown.
    type Conn = std::io::BufReader<crate::secure::SecureRead<std::net::TcpStream>>;
    let read_exact = |conn: &mut Conn, out: &mut [u8]| {
        let mut done = 0;
        while done < out.len() {
            match conn.read(&mut out[done..]) {
                Ok(0) => return None,
                Ok(n) => done += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    // Stop, or the peer is gone (a TCP backing off through
                    // a lossy link may stay silent for long: no idle limit).
                    if shared.is_stopping() || !shared.guard.is_up(from.ip()) {
                        return None;
                    }
                }
                Err(_) => return None,
            }
        }
        Some(())
    };
    loop {
        let mut len = [0u8; 4];
        if read_exact(&mut conn, &mut len).is_none() {
            break;
        }
        let n = u32::from_le_bytes(len) as usize;
        if n > MAX_TCP_FRAME {
            shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%from, len = n, "oversized TCP data frame; closing");
            break;
        }
        if read_exact(&mut conn, &mut buf[..n]).is_none() {
            break;
        }
        match Datagram::decode(&buf[..n]) {
            Ok(g) if matches!(g.body, Body::Data(_) | Body::Batch(_)) => {
                shared.stats.tcp_frames.fetch_add(1, Ordering::Relaxed);
                // A lossless subscriber a ring behind: stop reading, and TCP
                // holds the sender back.
                let tag = match &g.body {
                    Body::Data(d) => Some(&d.tag),
                    Body::Batch(b) => Some(&b.tag),
                    _ => None,
                };
                while tag.is_some_and(|t| held_full(shared, t)) && !shared.is_stopping() {
                    drain_held(shared);
                    std::thread::sleep(HELD_POLL);
                }
                take(shared, &mut reasm, &g.body);
            }
            _ => {
                shared.stats.bad_datagrams.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%from, "malformed TCP data frame; closing");
                break;
            }
        }
    }
}
