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

/// A direct receiver's key for one holding (see the module docs). Its
/// `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct HoldingKey([u8; 32]);

impl fmt::Debug for HoldingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HoldingKey(..)")
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
        HoldingKey(self.expand(&[
            b"direct holding",
            &addr_bytes(node),
            &epoch.to_le_bytes(),
            &member.to_le_bytes(),
            tag.as_bytes(),
        ]))
    }
}

impl HoldingKey {
    /// From the bytes its daemon handed over.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The bytes, to hand over.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0
    }

    fn expand(&self, parts: &[&[u8]]) -> [u8; 32] {
        let hk = Hkdf::<Sha256>::new(Some(SALT), &self.0);
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
        DatagramKey::new(&self.data_key_bytes(sender, epoch), epoch)
    }

    /// The key the holder seals its acknowledgements with (epoch 0: the
    /// key is new with every holding).
    pub fn ack_key(&self) -> DatagramKey {
        DatagramKey::new(&self.expand(&[b"ack"]), 0)
    }
}

/// The holder's side: opens the tag's data from any sender, seals its
/// acknowledgements.
#[derive(Debug)]
pub struct Holder {
    tag: u64,
    key: HoldingKey,
    ack: DatagramKey,
    /// Acknowledgement counter (never repeated under this holding key).
    counter: u64,
    encrypt: bool,
    /// Each sender's key of its latest life.
    keys: HashMap<IpAddr, DatagramKey>,
    windows: ReplayWindows<IpAddr>,
}

impl Holder {
    /// The holder of `tag` with `key`; with `encrypt` its acknowledgements
    /// are encrypted too.
    pub fn new(key: HoldingKey, tag: &str, encrypt: bool) -> Self {
        Self {
            tag: tag_id(tag),
            ack: key.ack_key(),
            key,
            counter: 1,
            encrypt,
            keys: HashMap::new(),
            windows: ReplayWindows::new(MAX_SENDERS),
        }
    }

    /// The same holding (a daemon hands the key over again after a
    /// switch): the acknowledgement counter and the windows go on.
    pub fn is(&self, key: &HoldingKey) -> bool {
        &self.key == key
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
        let fresh;
        let key = match self.keys.get(&from) {
            Some(k) if k.epoch() == peek.epoch => k,
            _ => {
                fresh = self.key.data_key(from, peek.epoch);
                &fresh
            }
        };
        let (header, body) = key.open(datagram)?;
        self.windows.accept(&from, header.epoch, header.counter)?;
        if self
            .keys
            .get(&from)
            .is_none_or(|k| k.epoch() < header.epoch)
            && (self.keys.len() < MAX_SENDERS || self.keys.contains_key(&from))
        {
            self.keys
                .insert(from, self.key.data_key(from, header.epoch));
        }
        Ok(body)
    }

    /// `body` (an acknowledgement) sealed into `out`.
    pub fn seal_ack(&mut self, body: &[u8], out: &mut Vec<u8>) {
        let counter = self.counter;
        self.counter += 1;
        self.ack
            .seal_direct_into(counter, self.encrypt, self.tag, body, out);
    }
}

/// A sending daemon's side for one holding: seals the tag's data to the
/// holder, opens its acknowledgements.
#[derive(Debug)]
pub struct ToHolder {
    tag: u64,
    member: u64,
    node_epoch: u64,
    data: DatagramKey,
    data_bytes: [u8; 32],
    ack: DatagramKey,
    window: ReplayWindow,
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
        let key = domain.holding_key(node, node_epoch, member, tag);
        let data_bytes = key.data_key_bytes(me, my_epoch);
        Self {
            tag: tag_id(tag),
            member,
            node_epoch,
            data: DatagramKey::new(&data_bytes, my_epoch),
            data_bytes,
            ack: key.ack_key(),
            window: ReplayWindow::new(0),
        }
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

    /// The data key's bytes, for a publishing client of this daemon (it
    /// seals with counters the daemon reserves).
    pub fn data_key_bytes(&self) -> [u8; 32] {
        self.data_bytes
    }

    /// `body` sealed to the holder with `counter` (the daemon's).
    pub fn seal_into(&self, counter: u64, encrypt: bool, body: &[u8], out: &mut Vec<u8>) {
        self.data
            .seal_direct_into(counter, encrypt, self.tag, body, out);
    }

    /// Opens the holder's acknowledgement: its body if authentic and new.
    pub fn open_ack<'a>(&mut self, datagram: &'a mut [u8]) -> Result<&'a [u8], Refused> {
        let peek = SealedHeader::peek(datagram)?;
        if !peek.direct || peek.tag != Some(self.tag) {
            return Err(Refused::Open(OpenError::UnknownTag(peek.tag.unwrap_or(0))));
        }
        let (header, body) = self.ack.open(datagram)?;
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
        let forged_data = DatagramKey::new(&h.key.data_key_bytes(S, 100), 0);
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
        let k = DatagramKey::from_tag_key(&to.data_key_bytes(), 100);
        let mut dg = Vec::new();
        k.seal_direct_into(3, false, tag_id("/t"), b"first copy", &mut dg);
        assert_eq!(h.open(S, &mut dg), Ok(&b"first copy"[..]));
    }
}
