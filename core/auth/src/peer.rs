//! The two ends of a daemon's datagrams, put together: a [`Sealer`] for
//! what this daemon sends, an [`Opener`] per authenticated peer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::datagram::{DatagramKey, OpenError, SealedHeader};
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

    /// Reserves `n` counters (for datagrams sealed elsewhere: a publishing
    /// client's, with its tag key) and returns the first.
    pub fn reserve(&self, n: u64) -> u64 {
        self.counter.fetch_add(n, Ordering::Relaxed)
    }

    /// This life.
    pub fn epoch(&self) -> u64 {
        self.key.epoch()
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

/// Tag keys one peer's opener keeps (one per tag its clients publish on
/// through the send ticket).
pub const MAX_TAG_KEYS: usize = 4096;

/// Opens one authenticated peer's datagrams: its key for the life it
/// announced, and the counters accepted since its floor; and the datagrams
/// its publishing clients sealed with their tags' keys, each tag with a
/// window of its own (their counters come from the daemon's, so the floor
/// holds for them too, and a client jumping ahead harms only its tag).
#[derive(Debug, Clone)]
pub struct Opener {
    domain: DomainKey,
    hello: LinkHello,
    key: DatagramKey,
    window: ReplayWindow,
    tags: HashMap<u64, (DatagramKey, ReplayWindow)>,
}

impl Opener {
    /// For the peer that said `hello` over an authenticated link.
    pub fn new(domain: &DomainKey, hello: &LinkHello) -> Self {
        Self {
            domain: domain.clone(),
            hello: *hello,
            key: domain.datagram_key(hello.node, hello.epoch),
            window: ReplayWindow::new(hello.floor),
            tags: HashMap::new(),
        }
    }

    /// The peer's epoch.
    pub fn epoch(&self) -> u64 {
        self.key.epoch()
    }

    /// Opens `datagram` in place: its body if authentic and new. Datagrams
    /// sealed with a tag key are refused (see [`Opener::open_any`]).
    pub fn open<'a>(&mut self, datagram: &'a mut [u8]) -> Result<&'a [u8], Refused> {
        match self.open_any(datagram, |_| None)? {
            (body, None) => Ok(body),
            (_, Some(tag)) => Err(Refused::Open(OpenError::UnknownTag(tag))),
        }
    }

    /// Opens `datagram` in place, sealed with the peer's key or one of its
    /// tags' keys: the body and, for the latter, the tag id, which the
    /// caller must check the body names. `name` gives a tag id's name (the
    /// tags the receiver knows); a key is derived once per tag.
    pub fn open_any<'a>(
        &mut self,
        datagram: &'a mut [u8],
        name: impl FnOnce(u64) -> Option<String>,
    ) -> Result<(&'a [u8], Option<u64>), Refused> {
        let peek = SealedHeader::peek(datagram)?;
        if peek.direct {
            // Sealed for a direct receiver: never a daemon's to open.
            return Err(Refused::Open(OpenError::UnknownTag(peek.tag.unwrap_or(0))));
        }
        let Some(tag) = peek.tag else {
            let (header, body) = self.key.open(datagram)?;
            self.window.accept(header.counter)?;
            return Ok((body, None));
        };
        if peek.epoch != self.hello.epoch {
            return Err(Refused::Open(OpenError::WrongEpoch {
                expected: self.hello.epoch,
                found: peek.epoch,
            }));
        }
        if !self.tags.contains_key(&tag) {
            let unknown = Refused::Open(OpenError::UnknownTag(tag));
            if self.tags.len() >= MAX_TAG_KEYS {
                return Err(unknown);
            }
            let n = name(tag).ok_or(unknown)?;
            let key = self.domain.tag_key(self.hello.node, self.hello.epoch, &n);
            self.tags
                .insert(tag, (key, ReplayWindow::new(self.hello.floor)));
        }
        let Some((key, window)) = self.tags.get_mut(&tag) else {
            return Err(Refused::Open(OpenError::UnknownTag(tag)));
        };
        let (header, body) = key.open(datagram)?;
        window.accept(header.counter)?;
        Ok((body, Some(tag)))
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
    fn a_clients_tag_key_opens_only_its_tag_once_and_not_as_the_node() {
        let d = domain(1);
        let s = Sealer::new(&d, A, 5, false);
        let mut rx = Opener::new(&d, &s.hello());
        let name = |id: u64| (id == crate::datagram::tag_id("/t")).then(|| "/t".to_owned());
        let key = DatagramKey::from_tag_key(&d.tag_key_bytes(A, 5, "/t"), 5);
        let c = s.reserve(1);
        let mut dg = Vec::new();
        key.seal_tagged_into(c, false, crate::datagram::tag_id("/t"), b"mine", &mut dg);
        let id = crate::datagram::tag_id("/t");
        assert_eq!(
            rx.open_any(&mut dg.clone(), name),
            Ok((&b"mine"[..], Some(id)))
        );
        assert!(matches!(
            rx.open_any(&mut dg.clone(), name),
            Err(Refused::Replay(_))
        ));
        // Not with `open` (node key only), and not under another tag's id.
        assert!(rx.open(&mut dg.clone()).is_err());
        let mut other = Vec::new();
        key.seal_tagged_into(
            s.reserve(1),
            false,
            crate::datagram::tag_id("/u"),
            b"x",
            &mut other,
        );
        let names = |id: u64| (id == crate::datagram::tag_id("/u")).then(|| "/u".to_owned());
        assert_eq!(
            rx.open_any(&mut other, names),
            Err(Refused::Open(OpenError::Forged))
        );
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
