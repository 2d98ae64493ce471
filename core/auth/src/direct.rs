//! Direct delivery under a domain key (docs/design.md §6 and §7): other nodes
//! send a tag's stream straight to its sole receiving process on a node,
//! which must check what it receives without holding the domain key (with
//! it, a subscriber could forge anything, on any tag).
//!
//! The receiving node's daemon gives its direct receiver a **holding key**
//! ([`DomainKey::holding_key`]) bound to that node's life, the receiver's
//! grant (its member id) and the tag. Every other daemon derives the same
//! key from the table. From it, HKDF derives
//!
//! * one **data key per sender life** ([`HoldingKey::data_key`]): what a
//!   sending daemon (and its publishing clients, with their reserved
//!   counters) seals the tag's datagrams to that receiver with. The
//!   receiver derives it too, from the datagram's source and epoch;
//! * the **acknowledgement key** ([`HoldingKey::ack_key`]): what the
//!   receiver seals its acknowledgements with, under a counter of its own.
//!
//! Both are sealed with [`crate::datagram::FLAG_DIRECT`] and the tag's id.
//! So what the holder can do with its key is limited to its own tag at its
//! own node: it can forge data to itself, and acknowledgements of its own
//! streams. Daemons never accept a holding key's data; a new holder (another
//! grant) gets another key; a publishing client given a data key cannot
//! acknowledge. A sender's earlier lives are refused once a later one was
//! heard (epochs are start times), and each counter is accepted once.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use hkdf::Hkdf;
use sha2::Sha256;

use crate::datagram::{tag_id, DatagramKey, OpenError, SealedHeader};
use crate::peer::Refused;
use crate::replay::{ReplayWindow, ReplayWindows};
use crate::DomainKey;

/// Sending nodes a holder keeps replay windows (and keys) for.
pub const MAX_SENDERS: usize = 1024;

const SALT: &[u8] = b"tagwire direct v1";

/// A direct receiver's key for one holding (see the module docs), and
/// the parity of the domain key generation it comes from (a key roll:
/// `crate::key`). Its `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct HoldingKey {
    bytes: [u8; 32],
    odd: bool,
}

impl fmt::Debug for HoldingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HoldingKey(odd: {}, ..)", self.odd)
    }
}

fn addr_bytes(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

impl DomainKey {
    /// The holding key of the direct receiver of `tag` at `node` (in that
    /// daemon's life `epoch`) whose grant is `member`.
    pub fn holding_key(&self, node: IpAddr, epoch: u64, member: u64, tag: &str) -> HoldingKey {
        HoldingKey {
            bytes: self.expand(&[
                b"direct holding",
                &addr_bytes(node),
                &epoch.to_le_bytes(),
                &member.to_le_bytes(),
                tag.as_bytes(),
            ]),
            odd: self.odd(),
        }
    }
}

impl HoldingKey {
    /// From the bytes its daemon handed over (of an even generation: see
    /// [`HoldingKey::with_odd`]).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self { bytes, odd: false }
    }

    /// The same key, of an odd domain key generation or not.
    pub fn with_odd(mut self, odd: bool) -> Self {
        self.odd = odd;
        self
    }

    /// Whether it comes from a domain key of an odd generation.
    pub fn odd(&self) -> bool {
        self.odd
    }

    /// The bytes, to hand over.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.bytes
    }

    fn expand(&self, parts: &[&[u8]]) -> [u8; 32] {
        let hk = Hkdf::<Sha256>::new(Some(SALT), &self.bytes);
        let mut out = [0u8; 32];
        let _ = hk.expand(&parts.concat(), &mut out);
        out
    }

    /// The key the daemon at `sender` in life `epoch` (and its publishing
    /// clients) seal this holding's data with; the bytes, for a client.
    pub fn data_key_bytes(&self, sender: IpAddr, epoch: u64) -> [u8; 32] {
        self.expand(&[b"data", &addr_bytes(sender), &epoch.to_le_bytes()])
    }

    /// [`HoldingKey::data_key_bytes`] as a key.
    pub fn data_key(&self, sender: IpAddr, epoch: u64) -> DatagramKey {
        DatagramKey::new(&self.data_key_bytes(sender, epoch), epoch).with_odd(self.odd)
    }

    /// The key the holder seals its acknowledgements with (epoch 0: the
    /// key is new with every holding).
    pub fn ack_key(&self) -> DatagramKey {
        DatagramKey::new(&self.expand(&[b"ack"]), 0).with_odd(self.odd)
    }
}

/// The holder's side: opens the tag's data from any sender, seals its
/// acknowledgements. During a key roll it holds the holding's key of both
/// generations, opens data with the one its parity names and seals its
/// acknowledgements with the generation of the last data it opened.
#[derive(Debug)]
pub struct Holder {
    tag: u64,
    /// The holding's keys, by generation parity.
    keys: [Option<HoldingKey>; 2],
    /// Their acknowledgement keys.
    acks: [Option<DatagramKey>; 2],
    /// The parity acknowledgements are sealed with.
    ack_odd: bool,
    /// Acknowledgement counter (never repeated under this holding's keys).
    counter: u64,
    encrypt: bool,
    /// Each sender's key of its latest life (and the generation of it
    /// heard last).
    senders: HashMap<IpAddr, DatagramKey>,
    windows: ReplayWindows<IpAddr>,
}

impl Holder {
    /// The holder of `tag` with `key`; with `encrypt` its acknowledgements
    /// are encrypted too.
    pub fn new(key: HoldingKey, tag: &str, encrypt: bool) -> Self {
        let mut h = Self {
            tag: tag_id(tag),
            keys: [None, None],
            acks: [None, None],
            ack_odd: key.odd,
            counter: 1,
            encrypt,
            senders: HashMap::new(),
            windows: ReplayWindows::new(MAX_SENDERS),
        };
        h.give(key, false);
        h
    }

    /// Whether `key` is one of this holding's (a daemon hands the key over
    /// again after a switch: the acknowledgement counter and the windows
    /// go on).
    pub fn is(&self, key: &HoldingKey) -> bool {
        self.keys.iter().flatten().any(|k| k == key)
    }

    /// `key` is this holding's from now on: beside the other generation's
    /// with `also` (a key roll begins), alone without (a roll is over).
    /// The acknowledgement counter and the windows go on.
    pub fn give(&mut self, key: HoldingKey, also: bool) {
        let i = usize::from(key.odd);
        if !also {
            self.keys = [None, None];
            self.acks = [None, None];
            self.ack_odd = key.odd;
        }
        self.acks[i] = Some(key.ack_key());
        self.keys[i] = Some(key);
        self.senders
            .retain(|_, k| self.keys[usize::from(k.odd())].is_some());
    }

    /// Opens a datagram that came from `from`: its body if it is this
    /// tag's, sealed for this holding by `from` (in a life not older than
    /// one heard before), and new. The caller checks that the body names
    /// only this tag.
    pub fn open<'a>(&mut self, from: IpAddr, datagram: &'a mut [u8]) -> Result<&'a [u8], Refused> {
        let peek = SealedHeader::peek(datagram)?;
        if !peek.direct {
            return Err(Refused::Open(OpenError::NotSealed));
        }
        if peek.tag != Some(self.tag) {
            return Err(Refused::Open(OpenError::UnknownTag(peek.tag.unwrap_or(0))));
        }
        let Some(holding) = &self.keys[usize::from(peek.odd)] else {
            return Err(Refused::Open(OpenError::WrongGeneration));
        };
        let fresh;
        let key = match self.senders.get(&from) {
            Some(k) if k.epoch() == peek.epoch && k.odd() == peek.odd => k,
            _ => {
                fresh = holding.data_key(from, peek.epoch);
                &fresh
            }
        };
        let (header, body) = key.open(datagram)?;
        self.windows.accept(&from, header.epoch, header.counter)?;
        self.ack_odd = header.odd;
        let keep = self
            .senders
            .get(&from)
            .is_none_or(|k| k.epoch() < header.epoch || k.odd() != header.odd);
        if keep && (self.senders.len() < MAX_SENDERS || self.senders.contains_key(&from)) {
            self.senders
                .insert(from, holding.data_key(from, header.epoch));
        }
        Ok(body)
    }

    /// `body` (an acknowledgement) sealed into `out`.
    pub fn seal_ack(&mut self, body: &[u8], out: &mut Vec<u8>) {
        let counter = self.counter;
        self.counter += 1;
        let ack =
            self.acks[usize::from(self.ack_odd)]
                .as_ref()
                .or(self.acks.iter().flatten().next());
        if let Some(ack) = ack {
            ack.seal_direct_into(counter, self.encrypt, self.tag, body, out);
        }
    }
}

/// A sending daemon's side for one holding: seals the tag's data to the
/// holder, opens its acknowledgements. During a key roll it holds both
/// generations' keys: it seals with the one its daemon seals with, and
/// opens acknowledgements of either.
#[derive(Debug)]
pub struct ToHolder {
    tag: u64,
    tag_name: String,
    node: IpAddr,
    member: u64,
    node_epoch: u64,
    me: IpAddr,
    my_epoch: u64,
    /// By generation parity.
    gens: [Option<Generation>; 2],
    /// The parity it seals with.
    active: bool,
    window: ReplayWindow,
}

/// One generation's keys of a [`ToHolder`].
#[derive(Debug)]
struct Generation {
    data: DatagramKey,
    data_bytes: [u8; 32],
    ack: DatagramKey,
}

impl Generation {
    fn new(domain: &DomainKey, to: &ToHolder) -> Self {
        let key = domain.holding_key(to.node, to.node_epoch, to.member, &to.tag_name);
        let data_bytes = key.data_key_bytes(to.me, to.my_epoch);
        Self {
            data: DatagramKey::new(&data_bytes, to.my_epoch).with_odd(key.odd),
            data_bytes,
            ack: key.ack_key(),
        }
    }
}

impl ToHolder {
    /// To the holder of `tag` at `node` (life `node_epoch`, grant `member`),
    /// from the daemon at `me` in life `my_epoch`.
    pub fn new(
        domain: &DomainKey,
        node: IpAddr,
        node_epoch: u64,
        member: u64,
        tag: &str,
        me: IpAddr,
        my_epoch: u64,
    ) -> Self {
        let mut to = Self {
            tag: tag_id(tag),
            tag_name: tag.to_owned(),
            node,
            member,
            node_epoch,
            me,
            my_epoch,
            gens: [None, None],
            active: domain.odd(),
            window: ReplayWindow::new(0),
        };
        to.gens[usize::from(domain.odd())] = Some(Generation::new(domain, &to));
        to
    }

    /// Opens acknowledgements sealed with any of `accepted` and seals with
    /// `active` (one of them) from now on: a key roll. The window goes on.
    pub fn set_keys(&mut self, accepted: &crate::Accepted, active: &DomainKey) {
        for odd in [false, true] {
            self.gens[usize::from(odd)] = accepted.get(odd).map(|d| Generation::new(d, self));
        }
        if self.gens[usize::from(active.odd())].is_none() {
            self.gens[usize::from(active.odd())] = Some(Generation::new(active, self));
        }
        self.active = active.odd();
    }

    fn sealing(&self) -> Option<&Generation> {
        self.gens[usize::from(self.active)].as_ref()
    }

    /// The holder's grant.
    pub fn member(&self) -> u64 {
        self.member
    }

    /// The holder's node's life.
    pub fn node_epoch(&self) -> u64 {
        self.node_epoch
    }

    /// The tag's id.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// The data key's bytes it seals with now and whether they are of an
    /// odd generation, for a publishing client of this daemon (it seals
    /// with counters the daemon reserves).
    pub fn data_key_bytes(&self) -> ([u8; 32], bool) {
        (
            self.sealing().map_or([0; 32], |g| g.data_bytes),
            self.active,
        )
    }

    /// `body` sealed to the holder with `counter` (the daemon's).
    pub fn seal_into(&self, counter: u64, encrypt: bool, body: &[u8], out: &mut Vec<u8>) {
        if let Some(g) = self.sealing() {
            g.data
                .seal_direct_into(counter, encrypt, self.tag, body, out);
        }
    }

    /// Opens the holder's acknowledgement: its body if authentic and new.
    pub fn open_ack<'a>(&mut self, datagram: &'a mut [u8]) -> Result<&'a [u8], Refused> {
        let peek = SealedHeader::peek(datagram)?;
        if !peek.direct || peek.tag != Some(self.tag) {
            return Err(Refused::Open(OpenError::UnknownTag(peek.tag.unwrap_or(0))));
        }
        let Some(g) = &self.gens[usize::from(peek.odd)] else {
            return Err(Refused::Open(OpenError::WrongGeneration));
        };
        let (header, body) = g.ack.open(datagram)?;
        self.window.accept(header.counter)?;
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Replay;

    const N: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));
    const S: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

    fn domain() -> DomainKey {
        DomainKey::from_bytes([3; 32])
    }

    fn pair(member: u64) -> (Holder, ToHolder) {
        let d = domain();
        let holder = Holder::new(d.holding_key(N, 9, member, "/t"), "/t", false);
        let to = ToHolder::new(&d, N, 9, member, "/t", S, 100);
        (holder, to)
    }

    #[test]
    fn data_and_acknowledgements_cross_once_each() {
        let (mut h, mut to) = pair(4);
        let mut dg = Vec::new();
        to.seal_into(7, false, b"data", &mut dg);
        assert_eq!(h.open(S, &mut dg.clone()), Ok(&b"data"[..]));
        assert!(matches!(
            h.open(S, &mut dg.clone()),
            Err(Refused::Replay(Replay::Replayed(7)))
        ));
        // From another address: another sender's key, not this one.
        assert_eq!(
            h.open(N, &mut dg.clone()),
            Err(Refused::Open(OpenError::Forged))
        );
        let mut ack = Vec::new();
        h.seal_ack(b"ack", &mut ack);
        assert_eq!(to.open_ack(&mut ack.clone()), Ok(&b"ack"[..]));
        assert!(matches!(
            to.open_ack(&mut ack),
            Err(Refused::Replay(Replay::Replayed(1)))
        ));
    }

    #[test]
    fn the_holders_key_forges_no_data_for_others_and_no_daemon_datagram() {
        let (mut h, mut to) = pair(4);
        // The holder can seal data (to itself) with what it derives, but
        // the sender takes only acknowledgements from it.
        // (Under the acknowledgements' epoch: only the key differs.)
        let holding = h.keys[0].clone().unwrap();
        let forged_data = DatagramKey::new(&holding.data_key_bytes(S, 100), 0);
        let mut dg = Vec::new();
        forged_data.seal_direct_into(1, false, tag_id("/t"), b"x", &mut dg);
        assert_eq!(
            to.open_ack(&mut dg.clone()),
            Err(Refused::Open(OpenError::Forged))
        );
        // A daemon's opener refuses anything sealed for a holding.
        let s = crate::Sealer::new(&domain(), S, 100, false);
        let mut daemon = crate::Opener::new(&domain(), &s.hello());
        let mut ack = Vec::new();
        h.seal_ack(b"ack", &mut ack);
        assert!(daemon.open_any(&mut ack, |_| Some("/t".into())).is_err());
        assert!(daemon.open_any(&mut dg, |_| Some("/t".into())).is_err());
    }

    #[test]
    fn another_holding_or_tag_does_not_open() {
        let (mut h, _) = pair(4);
        let (_, other_grant) = pair(5);
        let mut dg = Vec::new();
        other_grant.seal_into(1, false, b"x", &mut dg);
        assert_eq!(h.open(S, &mut dg), Err(Refused::Open(OpenError::Forged)));
        let other_tag = ToHolder::new(&domain(), N, 9, 4, "/u", S, 100);
        let mut dg = Vec::new();
        other_tag.seal_into(1, false, b"x", &mut dg);
        assert!(matches!(
            h.open(S, &mut dg),
            Err(Refused::Open(OpenError::UnknownTag(_)))
        ));
        // A publishing client's tag key (not for a holding) does not open.
        let tk = DatagramKey::from_tag_key(&domain().tag_key_bytes(S, 100, "/t"), 100);
        let mut dg = Vec::new();
        tk.seal_tagged_into(1, false, tag_id("/t"), b"x", &mut dg);
        assert!(h.open(S, &mut dg).is_err());
    }

    #[test]
    fn a_senders_earlier_life_is_refused_once_a_later_one_was_heard() {
        let d = domain();
        let mut h = Holder::new(d.holding_key(N, 9, 4, "/t"), "/t", true);
        let old = ToHolder::new(&d, N, 9, 4, "/t", S, 100);
        let new = ToHolder::new(&d, N, 9, 4, "/t", S, 200);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        old.seal_into(5, true, b"old", &mut a);
        new.seal_into(1, true, b"new", &mut b);
        assert_eq!(h.open(S, &mut b), Ok(&b"new"[..]));
        assert!(matches!(
            h.open(S, &mut a),
            Err(Refused::Replay(Replay::StaleEpoch(100)))
        ));
    }

    #[test]
    fn client_data_keys_match_the_daemons() {
        let (mut h, to) = pair(4);
        let k = DatagramKey::from_tag_key(&to.data_key_bytes().0, 100);
        let mut dg = Vec::new();
        k.seal_direct_into(3, false, tag_id("/t"), b"first copy", &mut dg);
        assert_eq!(h.open(S, &mut dg), Ok(&b"first copy"[..]));
    }

    #[test]
    fn a_holding_crosses_a_key_roll_without_losing_its_windows() {
        let old = domain();
        let next = DomainKey::from_bytes([4; 32]).with_generation(1);
        let mut h = Holder::new(old.holding_key(N, 9, 4, "/t"), "/t", false);
        let mut to = ToHolder::new(&old, N, 9, 4, "/t", S, 100);
        let mut before = Vec::new();
        to.seal_into(1, false, b"old", &mut before);
        // The sender switches first: the holder refuses until its daemon
        // gives it the next generation's key too.
        to.set_keys(&crate::Accepted::two(old.clone(), next.clone()), &next);
        assert!(to.data_key_bytes().1);
        let mut after = Vec::new();
        to.seal_into(2, false, b"new", &mut after);
        assert_eq!(
            h.open(S, &mut after.clone()),
            Err(Refused::Open(OpenError::WrongGeneration))
        );
        h.give(next.holding_key(N, 9, 4, "/t"), true);
        assert!(h.is(&old.holding_key(N, 9, 4, "/t")));
        assert_eq!(h.open(S, &mut after.clone()), Ok(&b"new"[..]));
        assert_eq!(h.open(S, &mut before.clone()), Ok(&b"old"[..]));
        // Acknowledgements follow the last data's generation; either opens.
        let mut ack = Vec::new();
        h.seal_ack(b"a1", &mut ack);
        assert!(!SealedHeader::peek(&ack).unwrap().odd);
        assert_eq!(to.open_ack(&mut ack), Ok(&b"a1"[..]));
        h.open(S, &mut {
            let mut d = Vec::new();
            to.seal_into(3, false, b"n", &mut d);
            d
        })
        .unwrap();
        let mut ack = Vec::new();
        h.seal_ack(b"a2", &mut ack);
        assert!(SealedHeader::peek(&ack).unwrap().odd);
        assert_eq!(to.open_ack(&mut ack), Ok(&b"a2"[..]));
        // The roll is over: the old generation opens nothing, and counters
        // seen under either stay seen.
        h.give(next.holding_key(N, 9, 4, "/t"), false);
        assert!(!h.is(&old.holding_key(N, 9, 4, "/t")));
        let mut late = Vec::new();
        ToHolder::new(&old, N, 9, 4, "/t", S, 100).seal_into(9, false, b"late", &mut late);
        assert_eq!(
            h.open(S, &mut late),
            Err(Refused::Open(OpenError::WrongGeneration))
        );
        assert!(matches!(
            h.open(S, &mut after),
            Err(Refused::Replay(Replay::Replayed(2)))
        ));
    }
}
