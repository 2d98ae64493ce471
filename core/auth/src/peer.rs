//! The two ends of a daemon's datagrams, put together: a [`Sealer`] for
//! what this daemon sends, an [`Opener`] per authenticated peer.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::datagram::{DatagramKey, OpenError};
use crate::link::LinkHello;
use crate::replay::{Replay, ReplayWindow};
use crate::DomainKey;

/// Why a peer's datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// It did not authenticate (or was sealed in another life).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// It authenticated, but was accepted before or is too old.
    #[error(transparent)]
    Replay(#[from] Replay),
}

/// Seals this daemon's datagrams: its key for this life, and the counter
/// that every thread sending shares (each value used once).
#[derive(Debug)]
pub struct Sealer {
    key: DatagramKey,
    node: IpAddr,
    counter: AtomicU64,
    encrypt: bool,
}

impl Sealer {
    /// The sealer of the daemon at `node` in life `epoch`; with `encrypt`
    /// bodies are encrypted too.
    pub fn new(domain: &DomainKey, node: IpAddr, epoch: u64, encrypt: bool) -> Self {
        Self {
            key: domain.datagram_key(node, epoch),
            node,
            counter: AtomicU64::new(1),
            encrypt,
        }
    }

    /// `body` sealed into `out` under the next counter.
    pub fn seal_into(&self, body: &[u8], out: &mut Vec<u8>) {
        let counter = self.counter.fetch_add(1, Ordering::Relaxed);
        self.key.seal_into(counter, self.encrypt, body, out);
    }

    /// What to tell a peer in a [`LinkHello`]: this life and the counter
    /// now (nothing sealed before it will be accepted by that peer).
    pub fn hello(&self) -> LinkHello {
        LinkHello {
            node: self.node,
            epoch: self.key.epoch(),
            floor: self.counter.load(Ordering::Relaxed),
        }
    }
}

/// Opens one authenticated peer's datagrams: its key for the life it
/// announced, and the counters accepted since its floor.
#[derive(Debug, Clone)]
pub struct Opener {
    key: DatagramKey,
    window: ReplayWindow,
}

impl Opener {
    /// For the peer that said `hello` over an authenticated link.
    pub fn new(domain: &DomainKey, hello: &LinkHello) -> Self {
        Self {
            key: domain.datagram_key(hello.node, hello.epoch),
            window: ReplayWindow::new(hello.floor),
        }
    }

    /// The peer's epoch.
    pub fn epoch(&self) -> u64 {
        self.key.epoch()
    }

    /// Opens `datagram` in place: its body if authentic and new.
    pub fn open<'a>(&mut self, datagram: &'a mut [u8]) -> Result<&'a [u8], Refused> {
        let (header, body) = self.key.open(datagram)?;
        self.window.accept(header.counter)?;
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(b: u8) -> DomainKey {
        DomainKey::from_bytes([b; 32])
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

    #[test]
    fn a_datagram_is_accepted_once() {
        let s = Sealer::new(&domain(1), A, 5, false);
        let mut rx = Opener::new(&domain(1), &s.hello());
        let mut d = Vec::new();
        s.seal_into(b"data", &mut d);
        assert_eq!(rx.open(&mut d.clone()), Ok(&b"data"[..]));
        assert!(matches!(
            rx.open(&mut d),
            Err(Refused::Replay(Replay::Replayed(_)))
        ));
    }

    #[test]
    fn the_wrong_key_is_refused() {
        let s = Sealer::new(&domain(1), A, 5, true);
        let mut rx = Opener::new(&domain(2), &s.hello());
        let mut d = Vec::new();
        s.seal_into(b"data", &mut d);
        assert_eq!(rx.open(&mut d), Err(Refused::Open(OpenError::Forged)));
    }

    #[test]
    fn after_a_sender_restart_its_old_datagrams_are_refused() {
        let old = Sealer::new(&domain(1), A, 5, false);
        let mut recorded = Vec::new();
        old.seal_into(b"old life", &mut recorded);
        // The sender restarts: a new epoch, a new handshake.
        let new = Sealer::new(&domain(1), A, 6, false);
        let mut rx = Opener::new(&domain(1), &new.hello());
        assert!(matches!(
            rx.open(&mut recorded),
            Err(Refused::Open(OpenError::WrongEpoch { .. }))
        ));
    }

    #[test]
    fn after_a_receiver_restart_datagrams_sent_before_are_refused() {
        let s = Sealer::new(&domain(1), A, 5, false);
        let mut rx = Opener::new(&domain(1), &s.hello());
        let mut recorded = Vec::new();
        s.seal_into(b"before", &mut recorded);
        assert!(rx.open(&mut recorded.clone()).is_ok());
        // The receiver restarts: it forgot its window, but the new
        // handshake's floor is above everything sealed before it.
        let mut rx = Opener::new(&domain(1), &s.hello());
        assert!(matches!(
            rx.open(&mut recorded),
            Err(Refused::Replay(Replay::TooOld(_)))
        ));
        let mut fresh = Vec::new();
        s.seal_into(b"after", &mut fresh);
        assert_eq!(rx.open(&mut fresh), Ok(&b"after"[..]));
    }
}
