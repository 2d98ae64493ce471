//! The two ends of a daemon's datagrams, put together: a [`Sealer`] for
//! what this daemon sends, an [`Opener`] per authenticated peer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use crate::datagram::{DatagramKey, OpenError, SealedHeader};
use crate::link::LinkHello;
use crate::replay::{Replay, ReplayWindow};
use crate::{Accepted, DomainKey};

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
/// that every thread sending shares (each value used once, whatever the
/// key: a roll's switch changes the key, not the counter).
#[derive(Debug)]
pub struct Sealer {
    key: ArcSwap<DatagramKey>,
    node: IpAddr,
    epoch: u64,
    counter: AtomicU64,
    encrypt: bool,
}

impl Sealer {
    /// The sealer of the daemon at `node` in life `epoch`; with `encrypt`
    /// bodies are encrypted too.
    pub fn new(domain: &DomainKey, node: IpAddr, epoch: u64, encrypt: bool) -> Self {
        Self {
            key: ArcSwap::from_pointee(domain.datagram_key(node, epoch)),
            node,
            epoch,
            counter: AtomicU64::new(1),
            encrypt,
        }
    }

    /// Seals with `domain`'s key from now on (a key roll's switch).
    pub fn switch_to(&self, domain: &DomainKey) {
        self.key.store(std::sync::Arc::new(
            domain.datagram_key(self.node, self.epoch),
        ));
    }

    /// Whether the key it seals with now is of an odd generation.
    pub fn odd(&self) -> bool {
        self.key.load().odd()
    }

    /// `body` sealed into `out` under the next counter.
    pub fn seal_into(&self, body: &[u8], out: &mut Vec<u8>) {
        let counter = self.counter.fetch_add(1, Ordering::Relaxed);
        self.key.load().seal_into(counter, self.encrypt, body, out);
    }

    /// Reserves `n` counters (for datagrams sealed elsewhere: a publishing
    /// client's, with its tag key) and returns the first.
    pub fn reserve(&self, n: u64) -> u64 {
        self.counter.fetch_add(n, Ordering::Relaxed)
    }

    /// This life.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What to tell a peer in a [`LinkHello`]: this life and the counter
    /// now (nothing sealed before it will be accepted by that peer).
    pub fn hello(&self) -> LinkHello {
        LinkHello {
            node: self.node,
            epoch: self.epoch,
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
/// During a key roll it holds both generations' keys and opens each
/// datagram with the one its parity names; the windows are the same.
#[derive(Debug, Clone)]
pub struct Opener {
    domains: Accepted,
    hello: LinkHello,
    keys: [Option<DatagramKey>; 2],
    window: ReplayWindow,
    tags: HashMap<u64, TagKeys>,
}

/// One tag's keys (by generation parity) and its window.
#[derive(Debug, Clone)]
struct TagKeys {
    keys: [Option<DatagramKey>; 2],
    window: ReplayWindow,
}

impl Opener {
    /// For the peer that said `hello` over an authenticated link.
    pub fn new(domain: &DomainKey, hello: &LinkHello) -> Self {
        Self::accepting(&Accepted::one(domain.clone()), hello)
    }

    /// For the peer that said `hello`, opening with any of `domains`.
    pub fn accepting(domains: &Accepted, hello: &LinkHello) -> Self {
        let mut o = Self {
            domains: domains.clone(),
            hello: *hello,
            keys: [None, None],
            window: ReplayWindow::new(hello.floor),
            tags: HashMap::new(),
        };
        o.derive();
        o
    }

    /// Opens with `domains` from now on (a key roll); the windows go on.
    pub fn accept(&mut self, domains: &Accepted) {
        if &self.domains != domains {
            self.domains = domains.clone();
            self.derive();
        }
    }

    fn derive(&mut self) {
        for odd in [false, true] {
            self.keys[usize::from(odd)] = self
                .domains
                .get(odd)
                .map(|d| d.datagram_key(self.hello.node, self.hello.epoch));
        }
        // Tag keys are derived again as datagrams name them.
        for t in self.tags.values_mut() {
            t.keys = [None, None];
        }
    }

    /// The peer's epoch.
    pub fn epoch(&self) -> u64 {
        self.hello.epoch
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
        let parity = usize::from(peek.odd);
        let Some(tag) = peek.tag else {
            let key = self.keys[parity]
                .as_ref()
                .ok_or(OpenError::WrongGeneration)?;
            let (header, body) = key.open(datagram)?;
            self.window.accept(header.counter)?;
            return Ok((body, None));
        };
        if peek.epoch != self.hello.epoch {
            return Err(Refused::Open(OpenError::WrongEpoch {
                expected: self.hello.epoch,
                found: peek.epoch,
            }));
        }
        let domain = self
            .domains
            .get(peek.odd)
            .ok_or(OpenError::WrongGeneration)?;
        let known = self
            .tags
            .get(&tag)
            .is_some_and(|t| t.keys[parity].is_some());
        if !known {
            let unknown = Refused::Open(OpenError::UnknownTag(tag));
            if !self.tags.contains_key(&tag) && self.tags.len() >= MAX_TAG_KEYS {
                return Err(unknown);
            }
            let n = name(tag).ok_or(unknown)?;
            let key = domain.tag_key(self.hello.node, self.hello.epoch, &n);
            let floor = self.hello.floor;
            self.tags
                .entry(tag)
                .or_insert_with(|| TagKeys {
                    keys: [None, None],
                    window: ReplayWindow::new(floor),
                })
                .keys[parity] = Some(key);
        }
        let Some(t) = self.tags.get_mut(&tag) else {
            return Err(Refused::Open(OpenError::UnknownTag(tag)));
        };
        let Some(key) = &t.keys[parity] else {
            return Err(Refused::Open(OpenError::UnknownTag(tag)));
        };
        let (header, body) = key.open(datagram)?;
        t.window.accept(header.counter)?;
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
    fn a_key_roll_opens_both_generations_during_it_and_the_old_one_never_after() {
        let old = domain(1);
        let next = domain(2).with_generation(1);
        let s = Sealer::new(&old, A, 5, true);
        let mut rx = Opener::new(&old, &s.hello());
        let id = crate::datagram::tag_id("/t");
        let name = |i: u64| (i == id).then(|| "/t".to_owned());
        let mut before = Vec::new();
        s.seal_into(b"before", &mut before);
        let tagged = |d: &DomainKey, c: u64| {
            let mut dg = Vec::new();
            d.tag_key(A, 5, "/t")
                .seal_tagged_into(c, false, id, b"t", &mut dg);
            dg
        };
        let old_tagged = tagged(&old, s.reserve(1));
        // The roll starts here (both keys open) and the sealer switches
        // before the receiver has heard of it: refused until it has.
        s.switch_to(&next);
        assert!(s.odd());
        let mut after = Vec::new();
        s.seal_into(b"after", &mut after);
        assert_eq!(
            rx.open(&mut after.clone()),
            Err(Refused::Open(OpenError::WrongGeneration))
        );
        rx.accept(&Accepted::two(old.clone(), next.clone()));
        assert_eq!(rx.open(&mut after.clone()), Ok(&b"after"[..]));
        assert_eq!(rx.open(&mut before.clone()), Ok(&b"before"[..]));
        assert_eq!(
            rx.open_any(&mut old_tagged.clone(), name),
            Ok((&b"t"[..], Some(id)))
        );
        let new_tagged = tagged(&next, s.reserve(1));
        assert_eq!(
            rx.open_any(&mut new_tagged.clone(), name),
            Ok((&b"t"[..], Some(id)))
        );
        // One window for both generations: a counter is taken once.
        assert!(matches!(
            rx.open(&mut after.clone()),
            Err(Refused::Replay(_))
        ));
        // The roll is over: the old key opens nothing, however new.
        rx.accept(&Accepted::one(next.clone()));
        let mut late = Vec::new();
        Sealer::new(&old, A, 5, true).seal_into(b"late", &mut late);
        assert_eq!(
            rx.open(&mut late),
            Err(Refused::Open(OpenError::WrongGeneration))
        );
        let c = s.reserve(1);
        assert_eq!(
            rx.open_any(&mut tagged(&old, c), name),
            Err(Refused::Open(OpenError::WrongGeneration))
        );
        let mut dg = Vec::new();
        s.seal_into(b"on", &mut dg);
        assert_eq!(rx.open(&mut dg), Ok(&b"on"[..]));
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
