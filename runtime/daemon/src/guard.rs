//! The daemon's trust boundary with other hosts (docs/design.md §7): every
//! datagram sent is sealed here and every datagram received is opened here,
//! before anything of it is parsed (`tagwire_auth`). The delivery session
//! above never sees a byte that did not pass.
//!
//! * **With a domain key** (`NetConfig::key`): datagrams are sealed with
//!   this daemon's key for its life (its incarnation) and a counter shared
//!   by all its sending threads. A peer's datagrams are opened with the key
//!   of the life it announced over its authenticated control link
//!   (`secure`), from the counter floor it announced there, each
//!   counter once. Beacons (which announce a life before any link exists)
//!   are opened with the key their header names and kept newer than the
//!   last life and counter seen from that address.
//! * **Direct receivers** (`delivery::direct`): a tag's datagrams to
//!   another node's direct receiver are sealed for its holding
//!   (`tagwire_auth::direct`, a key derived from the table: that node's
//!   life, the receiver's grant, the tag), and what comes from its socket
//!   is opened only as its acknowledgements. This node's own direct
//!   receivers get their holding keys from `Guard::holding`.
//! * **Always**: a datagram whose source address is not an up peer's is
//!   refused (and counted as unauthenticated for that address).
//!
//! A refused datagram is counted per source address (`tagwire stats`).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use tagwire_auth::{
    tag_id, Accepted, DomainKey, KeyError, KeyFile, LinkHello, Opener, Refused, ReplayWindows,
    SealedHeader, Sealer, ToHolder,
};
use tagwire_wire::control::Response;
use tagwire_wire::TagName;

use crate::lock;
use tagwire_auth::HoldingKey;

/// A read guard however a writer panicked (the data stays consistent:
/// every write replaces whole values).
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// Why a key file was not used. (The message says the cause; it is not
/// also given as the error's source, which `{:#}` would print again.)
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// It cannot be read.
    #[error("cannot read key file {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// Others than its owner may read or write it.
    #[error(
        "key file {path} is accessible to group or others (mode {mode:o}); run `chmod 600 {path}`"
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Its text is not a key.
    #[error("key file {path}: {cause}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        cause: KeyError,
    },
}

/// Reads a domain key file (`tagwire keygen`), refusing one that group or
/// others may access: the key in use (see [`read_key_roll`] for a roll).
pub fn read_key_file(path: &Path) -> Result<DomainKey, KeyFileError> {
    read_key_roll(path).map(|f| f.current)
}

/// Reads a whole domain key file, a key roll's next key included.
pub fn read_key_roll(path: &Path) -> Result<KeyFile, KeyFileError> {
    let read = |cause| KeyFileError::Read {
        path: path.to_owned(),
        cause,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Exposed {
            path: path.to_owned(),
            mode,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    KeyFile::parse(&text).map_err(|cause| KeyFileError::Malformed {
        path: path.to_owned(),
        cause,
    })
}

/// Writes `file` to `path` at once: a new file beside it (mode 0600, on
/// disk) renamed over it, so a daemon following the file (a key roll)
/// never reads half of it.
pub fn write_key_file(path: &Path, file: &KeyFile) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(file.to_text().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Why a datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not from an up peer, not sealed, sealed with another key or life,
    /// or changed on the way.
    Unauthenticated,
    /// Authentic, but accepted before (or older than the window).
    Replayed,
}

/// The bits of a grant (member id) a send ticket carries above a port.
pub(crate) const MEMBER_MASK: u64 = tagwire_session::TicketEntry::MEMBER_MASK;

/// What opened a datagram (see [`Guard::open`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opened {
    /// The peer daemon's key (or no key at all).
    Node,
    /// A peer's publishing client's tag key: only data naming that tag
    /// (its id) may be taken.
    Tag(u64),
    /// Another node's direct receiver of the tag (its id), from its socket:
    /// only acknowledgements of that tag's streams to it may be taken.
    Holder(u64),
}

/// One direct receiver on another node, as the table says: its node, its
/// grant and its tag (see [`Guard::set_holders`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HolderAt {
    pub(crate) node: IpAddr,
    pub(crate) member: u64,
    pub(crate) tag: TagName,
}

/// Beacon senders remembered (their latest life and counters).
const BEACON_SENDERS: usize = 1024;

/// Tag names remembered for tag keys (past it the map starts afresh).
const MAX_NAMES: usize = 65536;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Guard {
    /// This node's address (its sockets' source).
    node: IpAddr,
    keyed: Option<Keyed>,
    /// Up peers' addresses (membership's `PeerUp` / `PeerDown`).
    up: RwLock<HashSet<IpAddr>>,
}

/// The domain keys a node opens with and the one it seals with (a key
/// roll changes them: `tagwire_auth::KeyFile::schedule`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    pub(crate) accepted: Accepted,
    pub(crate) active: DomainKey,
}

impl Keys {
    /// Keys for the file `file` at `now` (Unix seconds).
    pub(crate) fn at(file: &KeyFile, now: u64) -> Self {
        let (accepted, active) = file.schedule(now);
        Self { accepted, active }
    }
}

/// Locks are taken in this order: `keys`, `openers`, `holders` (and
/// within the last two, one entry's mutex at a time).
#[derive(Debug)]
struct Keyed {
    keys: RwLock<Keys>,
    sealer: Sealer,
    /// Per peer address, the opener of the life it announced last.
    openers: RwLock<HashMap<IpAddr, Mutex<Opener>>>,
    encrypt: bool,
    /// Tag names by tag id, for datagrams peers' clients sealed with their
    /// tags' keys (every tag this daemon has known; cleared past a bound).
    names: RwLock<HashMap<u64, String>>,
    beacons: Mutex<ReplayWindows<IpAddr>>,
    /// Other nodes' direct receivers, by socket: how to seal their tags'
    /// datagrams and open their acknowledgements.
    holders: RwLock<HashMap<SocketAddr, Mutex<ToHolder>>>,
}

impl Guard {
    /// The guard of the daemon at `node` in life `incarnation`: keyed when
    /// `key` is given.
    pub(crate) fn new(
        key: Option<&DomainKey>,
        encrypt: bool,
        node: IpAddr,
        incarnation: u64,
    ) -> Self {
        Self {
            node,
            keyed: key.map(|k| Keyed {
                keys: RwLock::new(Keys {
                    accepted: Accepted::one(k.clone()),
                    active: k.clone(),
                }),
                sealer: Sealer::new(k, node, incarnation, encrypt),
                openers: RwLock::new(HashMap::new()),
                encrypt,
                names: RwLock::new(HashMap::new()),
                beacons: Mutex::new(ReplayWindows::new(BEACON_SENDERS)),
                holders: RwLock::new(HashMap::new()),
            }),
            up: RwLock::new(HashSet::new()),
        }
    }

    /// This node's address.
    pub(crate) fn node(&self) -> IpAddr {
        self.node
    }

    /// Whether a domain key is configured.
    pub(crate) fn is_keyed(&self) -> bool {
        self.keyed.is_some()
    }

    /// The domain keys now, if any.
    pub(crate) fn keys(&self) -> Option<Keys> {
        self.keyed.as_ref().map(|k| read(&k.keys).clone())
    }

    /// Whether first copies are sealed with keys of the odd generation
    /// now (the send ticket tells publishers).
    pub(crate) fn sealing_odd(&self) -> bool {
        self.keyed.as_ref().is_some_and(|k| k.sealer.odd())
    }

    /// A key roll moved on (`crate::keyroll`): seal with `keys.active`,
    /// open with `keys.accepted`, from now on. Returns the keys before
    /// when anything changed.
    pub(crate) fn roll_to(&self, keys: Keys) -> Option<Keys> {
        let k = self.keyed.as_ref()?;
        let mut now = k.keys.write().unwrap_or_else(|e| e.into_inner());
        if *now == keys {
            return None;
        }
        if now.active != keys.active {
            k.sealer.switch_to(&keys.active);
        }
        for o in read(&k.openers).values() {
            lock(o).accept(&keys.accepted);
        }
        for h in read(&k.holders).values() {
            lock(h).set_keys(&keys.accepted, &keys.active);
        }
        Some(std::mem::replace(&mut *now, keys))
    }

    /// What this daemon tells a peer in a link handshake.
    pub(crate) fn hello(&self) -> Option<LinkHello> {
        self.keyed.as_ref().map(|k| k.sealer.hello())
    }

    /// `body` as it goes on the wire: sealed into `scratch` when keyed.
    pub(crate) fn seal<'a>(&self, body: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
        match &self.keyed {
            Some(k) => {
                k.sealer.seal_into(body, scratch);
                scratch
            }
            None => body,
        }
    }

    /// `body` as it goes on the wire to `dest`: sealed for its holding when
    /// `dest` is another node's direct receiver, else as [`Guard::seal`].
    pub(crate) fn seal_to<'a>(
        &self,
        body: &'a [u8],
        scratch: &'a mut Vec<u8>,
        dest: SocketAddr,
    ) -> &'a [u8] {
        let Some(k) = &self.keyed else {
            return body;
        };
        let holders = k.holders.read().unwrap_or_else(|e| e.into_inner());
        match holders.get(&dest) {
            Some(h) => {
                let counter = k.sealer.reserve(1);
                lock(h).seal_into(counter, k.encrypt, body, scratch);
                scratch
            }
            None => {
                k.sealer.seal_into(body, scratch);
                scratch
            }
        }
    }

    /// After a table change: the direct receivers on other nodes, by
    /// socket. A holding that stays keeps its acknowledgements' window; one
    /// whose node's life is not known yet (no handshake) is left out, so
    /// its datagrams go sealed as this node's and it refuses them until
    /// the next change (they are resent).
    pub(crate) fn set_holders(&self, now: HashMap<SocketAddr, HolderAt>) {
        let Some(k) = &self.keyed else {
            return;
        };
        // (Lock order: keys, openers, holders, as in `roll_to`.)
        let keys = read(&k.keys);
        let epochs: HashMap<IpAddr, u64> = {
            let openers = k.openers.read().unwrap_or_else(|e| e.into_inner());
            now.values()
                .filter_map(|h| Some((h.node, lock(openers.get(&h.node)?).epoch())))
                .collect()
        };
        let mut holders = k.holders.write().unwrap_or_else(|e| e.into_inner());
        holders.retain(|addr, h| {
            let h = h.get_mut().unwrap_or_else(|e| e.into_inner());
            now.get(addr).is_some_and(|w| {
                w.member == h.member()
                    && tag_id(w.tag.as_str()) == h.tag()
                    && epochs.get(&w.node) == Some(&h.node_epoch())
            })
        });
        for (addr, h) in now {
            let Some(&epoch) = epochs.get(&h.node) else {
                continue;
            };
            holders.entry(addr).or_insert_with(|| {
                let mut to = ToHolder::new(
                    &keys.active,
                    h.node,
                    epoch,
                    h.member,
                    h.tag.as_str(),
                    self.node,
                    k.sealer.epoch(),
                );
                to.set_keys(&keys.accepted, &keys.active);
                Mutex::new(to)
            });
        }
    }

    /// The holding keys of this node's direct receiver of `tag` (grant
    /// `member`): the generation sealed with first, then, during a key
    /// roll, the other; and whether to encrypt. `None` without a key.
    pub(crate) fn holding(&self, tag: &TagName, member: u64) -> Option<(Vec<HoldingKey>, bool)> {
        let k = self.keyed.as_ref()?;
        let keys = read(&k.keys);
        let epoch = k.sealer.epoch();
        let make = |d: &DomainKey| d.holding_key(self.node, epoch, member, tag.as_str());
        let mut all = vec![make(&keys.active)];
        all.extend(
            keys.accepted
                .iter()
                .filter(|d| d.odd() != keys.active.odd())
                .map(make),
        );
        Some((all, k.encrypt))
    }

    /// The grant of another node's direct receiver at `addr`, if it is one
    /// this daemon seals for.
    pub(crate) fn holder_member(&self, addr: SocketAddr) -> Option<u64> {
        let k = self.keyed.as_ref()?;
        let holders = k.holders.read().unwrap_or_else(|e| e.into_inner());
        let member = lock(holders.get(&addr)?).member();
        Some(member)
    }

    /// Answers a publishing client's `DirectKey` request (its send access
    /// checked): the data key for the direct receiver at `to`, if that is
    /// `tag`'s receiver with grant `member`.
    pub(crate) fn direct_key(
        &self,
        tag: &TagName,
        to: SocketAddr,
        member: u64,
    ) -> Option<Response> {
        let k = self.keyed.as_ref()?;
        let holders = k.holders.read().unwrap_or_else(|e| e.into_inner());
        let h = lock(holders.get(&to)?);
        let (key, odd) = h.data_key_bytes();
        (h.member() & MEMBER_MASK == member & MEMBER_MASK && h.tag() == tag_id(tag.as_str())).then(
            || Response::TagKey {
                epoch: k.sealer.epoch(),
                key,
                encrypt: k.encrypt,
                odd,
            },
        )
    }

    /// A peer authenticated a link and said `hello` (its address already
    /// checked against the connection's): from now on its datagrams are
    /// opened under that life, from that floor.
    pub(crate) fn admit(&self, hello: &LinkHello) {
        if let Some(k) = &self.keyed {
            // (Held until the opener is in: a roll moving on meanwhile
            // would miss it.)
            let keys = read(&k.keys);
            let opener = Opener::accepting(&keys.accepted, hello);
            k.openers
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(hello.node, Mutex::new(opener));
        }
    }

    /// Reserves `n` sealing counters for a publishing client's first copies
    /// (the send ticket) and returns the first; 0 without a key.
    pub(crate) fn reserve(&self, n: u64) -> u64 {
        self.keyed.as_ref().map_or(0, |k| k.sealer.reserve(n))
    }

    /// Answers a client's `TagKey` request for `tag` (its send access
    /// checked): the tag's key for this life, or `Ok` without a key.
    pub(crate) fn tag_key(&self, tag: &TagName) -> Response {
        let Some(k) = &self.keyed else {
            return Response::Ok;
        };
        let epoch = k.sealer.epoch();
        let keys = read(&k.keys);
        Response::TagKey {
            epoch,
            key: keys.active.tag_key_bytes(self.node, epoch, tag.as_str()),
            encrypt: k.encrypt,
            odd: keys.active.odd(),
        }
    }

    /// A tag exists here now: peers' clients may seal its datagrams with
    /// its key.
    pub(crate) fn know_tag(&self, tag: &TagName) {
        if let Some(k) = &self.keyed {
            let mut names = k.names.write().unwrap_or_else(|e| e.into_inner());
            if names.len() >= MAX_NAMES {
                names.clear();
            }
            names.insert(tag_id(tag.as_str()), tag.as_str().to_owned());
        }
    }

    /// Membership says `peer` is up (or no longer).
    pub(crate) fn set_up(&self, peer: IpAddr, up: bool) {
        let mut set = self.up.write().unwrap_or_else(|e| e.into_inner());
        if up {
            set.insert(peer);
        } else {
            set.remove(&peer);
        }
    }

    /// Whether `peer` is an up peer's address.
    pub(crate) fn is_up(&self, peer: IpAddr) -> bool {
        self.up
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&peer)
    }

    /// Opens a datagram that arrived from `from`: its body (decrypted in
    /// place when encrypted) and what opened it (the caller takes of it
    /// only what that allows), or why it is refused. Nothing else of it may
    /// be looked at before.
    pub(crate) fn open<'a>(
        &self,
        from: SocketAddr,
        datagram: &'a mut [u8],
    ) -> Result<(&'a [u8], Opened), Refusal> {
        if !self.is_up(from.ip()) {
            return Err(Refusal::Unauthenticated);
        }
        let Some(k) = &self.keyed else {
            return Ok((datagram, Opened::Node));
        };
        if SealedHeader::peek(datagram).is_ok_and(|h| h.direct) {
            let holders = k.holders.read().unwrap_or_else(|e| e.into_inner());
            let Some(h) = holders.get(&from) else {
                return Err(Refusal::Unauthenticated);
            };
            let mut h = lock(h);
            let tag = h.tag();
            return match h.open_ack(datagram) {
                Ok(body) => Ok((body, Opened::Holder(tag))),
                Err(Refused::Replay(_)) => Err(Refusal::Replayed),
                Err(Refused::Open(_)) => Err(Refusal::Unauthenticated),
            };
        }
        let from = from.ip();
        let openers = k.openers.read().unwrap_or_else(|e| e.into_inner());
        let Some(opener) = openers.get(&from) else {
            return Err(Refusal::Unauthenticated);
        };
        let mut opener = lock(opener);
        let name = |id: u64| {
            k.names
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&id)
                .cloned()
        };
        match opener.open_any(datagram, name) {
            Ok((body, None)) => Ok((body, Opened::Node)),
            Ok((body, Some(tag))) => Ok((body, Opened::Tag(tag))),
            Err(Refused::Replay(_)) => Err(Refusal::Replayed),
            Err(Refused::Open(_)) => Err(Refusal::Unauthenticated),
        }
    }

    /// Opens a discovery beacon from `from` (any sender: beacons announce
    /// nodes not known yet). Keyed: it must be sealed by `from`'s key of the
    /// life in its header, that life not older than the last one seen from
    /// `from`, its counter new. Returns the body and the sealed life.
    pub(crate) fn open_beacon<'a>(
        &self,
        from: IpAddr,
        datagram: &'a mut [u8],
    ) -> Result<(&'a [u8], Option<u64>), Refusal> {
        let Some(k) = &self.keyed else {
            return Ok((datagram, None));
        };
        let header = SealedHeader::peek(datagram).map_err(|_| Refusal::Unauthenticated)?;
        let key = read(&k.keys)
            .accepted
            .get(header.odd)
            .ok_or(Refusal::Unauthenticated)?
            .datagram_key(from, header.epoch);
        let (h, body) = key.open(datagram).map_err(|_| Refusal::Unauthenticated)?;
        lock(&k.beacons)
            .accept(&from, h.epoch, h.counter)
            .map_err(|_| Refusal::Replayed)?;
        Ok((body, Some(h.epoch)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn datagrams_from_addresses_that_are_not_up_peers_are_refused() {
        let g = Guard::new(None, false, A, 1);
        let mut d = *b"data";
        assert_eq!(
            g.open(SocketAddr::new(B, 1), &mut d),
            Err(Refusal::Unauthenticated)
        );
        g.set_up(B, true);
        assert_eq!(
            g.open(SocketAddr::new(B, 1), &mut d),
            Ok((&b"data"[..], Opened::Node))
        );
        g.set_up(B, false);
        assert_eq!(
            g.open(SocketAddr::new(B, 1), &mut d),
            Err(Refusal::Unauthenticated)
        );
    }

    #[test]
    fn keyed_datagrams_open_only_from_the_admitted_life_and_once() {
        let key = DomainKey::from_bytes([4; 32]);
        let (a, b) = (
            Guard::new(Some(&key), false, A, 1),
            Guard::new(Some(&key), true, B, 2),
        );
        let mut s = Vec::new();
        let mut early = b.seal(b"hi", &mut s).to_vec();
        a.set_up(B, true);
        assert_eq!(
            a.open(SocketAddr::new(B, 1), &mut early.clone()),
            Err(Refusal::Unauthenticated),
            "not admitted"
        );
        a.admit(&b.hello().unwrap());
        // Sealed before the handshake that admitted it: below the floor.
        assert_eq!(
            a.open(SocketAddr::new(B, 1), &mut early),
            Err(Refusal::Replayed)
        );
        let mut s = Vec::new();
        let mut sealed = b.seal(b"hi", &mut s).to_vec();
        assert_eq!(
            a.open(SocketAddr::new(B, 1), &mut sealed.clone()),
            Ok((&b"hi"[..], Opened::Node))
        );
        assert_eq!(
            a.open(SocketAddr::new(B, 1), &mut sealed),
            Err(Refusal::Replayed)
        );
        let mut plain = *b"hi";
        assert_eq!(
            a.open(SocketAddr::new(B, 1), &mut plain),
            Err(Refusal::Unauthenticated)
        );
    }

    #[test]
    fn another_nodes_direct_receiver_gets_its_tag_sealed_for_its_holding_and_is_heard_only_as_its_acknowledgements(
    ) {
        use tagwire_auth::{Holder, OpenError};
        let key = DomainKey::from_bytes([4; 32]);
        let (a, b) = (
            Guard::new(Some(&key), false, A, 1),
            Guard::new(Some(&key), false, B, 2),
        );
        a.set_up(B, true);
        a.admit(&b.hello().unwrap());
        let tag = TagName::new("/d").unwrap();
        let (r, port) = (SocketAddr::new(B, 40000), SocketAddr::new(B, 7402));
        let at = |member| HolderAt {
            node: B,
            member,
            tag: tag.clone(),
        };
        a.set_holders(HashMap::from([(r, at(7))]));
        assert_eq!(a.holder_member(r), Some(7));
        assert_eq!(a.holder_member(port), None);
        // What B hands its receiver with grant 7.
        let (hk, encrypt) = b.holding(&tag, 7).unwrap();
        assert_eq!(hk.len(), 1);
        let mut holder = Holder::new(hk[0].clone(), "/d", encrypt);
        let mut s = Vec::new();
        let mut dg = a.seal_to(b"data", &mut s, r).to_vec();
        assert_eq!(holder.open(A, &mut dg), Ok(&b"data"[..]));
        // To B's daemon: sealed as A, which the holder cannot open.
        let mut s = Vec::new();
        let mut to_daemon = a.seal_to(b"data", &mut s, port).to_vec();
        assert!(holder.open(A, &mut to_daemon).is_err());
        // Its acknowledgements, from its socket: only as the tag's holder.
        let mut ack = Vec::new();
        holder.seal_ack(b"ack", &mut ack);
        assert_eq!(
            a.open(r, &mut ack.clone()),
            Ok((&b"ack"[..], Opened::Holder(tag_id("/d"))))
        );
        assert_eq!(a.open(r, &mut ack), Err(Refusal::Replayed));
        // From any other socket (B's daemon's): refused.
        let mut ack = Vec::new();
        holder.seal_ack(b"ack", &mut ack);
        assert_eq!(a.open(port, &mut ack), Err(Refusal::Unauthenticated));
        // A's publishers get the data key for that grant and tag only.
        assert!(matches!(
            a.direct_key(&tag, r, 7),
            Some(Response::TagKey { .. })
        ));
        assert!(a.direct_key(&tag, r, 8).is_none());
        assert!(a.direct_key(&TagName::new("/e").unwrap(), r, 7).is_none());
        assert!(a.direct_key(&tag, port, 7).is_none());
        // Another grant on the same socket: another key, the old one opens
        // nothing more.
        a.set_holders(HashMap::from([(r, at(8))]));
        let mut s = Vec::new();
        let mut dg = a.seal_to(b"data", &mut s, r).to_vec();
        assert_eq!(
            holder.open(A, &mut dg),
            Err(Refused::Open(OpenError::Forged))
        );
        // No holders: sealed as A again.
        a.set_holders(HashMap::new());
        assert_eq!(a.holder_member(r), None);
    }

    #[test]
    fn beacons_are_refused_when_forged_replayed_or_from_an_older_life() {
        let key = DomainKey::from_bytes([4; 32]);
        let a = Guard::new(Some(&key), false, A, 1);
        let old = Guard::new(Some(&key), false, B, 5);
        let new = Guard::new(Some(&key), false, B, 6);
        let mut s = Vec::new();
        let old_beacon = old.seal(b"beacon", &mut s).to_vec();
        let mut s = Vec::new();
        let new_beacon = new.seal(b"beacon", &mut s).to_vec();
        assert!(a.open_beacon(B, &mut new_beacon.clone()).is_ok());
        assert_eq!(
            a.open_beacon(B, &mut new_beacon.clone()),
            Err(Refusal::Replayed)
        );
        assert_eq!(
            a.open_beacon(B, &mut old_beacon.clone()),
            Err(Refusal::Replayed)
        );
        // From another address than the sealer's: another key.
        assert_eq!(
            a.open_beacon(A, &mut new_beacon.clone()),
            Err(Refusal::Unauthenticated)
        );
        let wrong = Guard::new(Some(&DomainKey::from_bytes([5; 32])), false, B, 7);
        let mut s = Vec::new();
        let mut forged = wrong.seal(b"beacon", &mut s).to_vec();
        assert_eq!(a.open_beacon(B, &mut forged), Err(Refusal::Unauthenticated));
    }

    #[test]
    fn a_key_roll_carries_datagrams_tag_keys_and_holdings_across_the_switch() {
        use tagwire_auth::{DatagramKey, Holder};
        let old = DomainKey::from_bytes([4; 32]);
        let next = DomainKey::from_bytes([6; 32]).with_generation(1);
        let (a, b) = (
            Guard::new(Some(&old), false, A, 1),
            Guard::new(Some(&old), false, B, 2),
        );
        b.set_up(A, true);
        b.admit(&a.hello().unwrap());
        a.set_up(B, true);
        a.admit(&b.hello().unwrap());
        let tag = TagName::new("/d").unwrap();
        b.know_tag(&tag);
        let r = SocketAddr::new(B, 40000);
        a.set_holders(HashMap::from([(
            r,
            HolderAt {
                node: B,
                member: 7,
                tag: tag.clone(),
            },
        )]));
        let (keys, _) = b.holding(&tag, 7).unwrap();
        let mut holder = Holder::new(keys[0].clone(), "/d", false);
        let seal = |g: &Guard, to: Option<SocketAddr>| {
            let mut s = Vec::new();
            match to {
                Some(to) => g.seal_to(b"x", &mut s, to).to_vec(),
                None => g.seal(b"x", &mut s).to_vec(),
            }
        };
        let before = seal(&a, None);
        let before_direct = seal(&a, Some(r));
        // The roll begins on both (both keys open), then A switches.
        let rolling = |active: &DomainKey| Keys {
            accepted: Accepted::two(old.clone(), next.clone()),
            active: active.clone(),
        };
        assert!(b.roll_to(rolling(&old)).is_some());
        assert!(b.roll_to(rolling(&old)).is_none(), "no change, no roll");
        assert!(a.roll_to(rolling(&old)).is_some());
        assert!(!a.sealing_odd());
        assert!(a.roll_to(rolling(&next)).is_some());
        assert!(a.sealing_odd());
        let after = seal(&a, None);
        assert!(SealedHeader::peek(&after).unwrap().odd);
        let from = SocketAddr::new(A, 1);
        for mut d in [after, before] {
            assert_eq!(b.open(from, &mut d), Ok((&b"x"[..], Opened::Node)));
        }
        // A client's tag key now is the next generation's, and B opens it.
        let Response::TagKey {
            epoch, key, odd, ..
        } = a.tag_key(&tag)
        else {
            panic!("no tag key")
        };
        assert!(odd);
        let k = DatagramKey::from_tag_key(&key, epoch).with_odd(odd);
        let mut d = Vec::new();
        k.seal_tagged_into(a.reserve(1), false, tag_id("/d"), b"t", &mut d);
        assert_eq!(
            b.open(from, &mut d),
            Ok((&b"t"[..], Opened::Tag(tag_id("/d"))))
        );
        // B's holder is handed both generations (the one B seals with
        // first) and opens the direct data of both.
        let (keys, _) = b.holding(&tag, 7).unwrap();
        assert_eq!(keys.len(), 2);
        assert!(!keys[0].odd() && keys[1].odd());
        holder.give(keys[1].clone(), true);
        let mut after_direct = seal(&a, Some(r));
        assert!(SealedHeader::peek(&after_direct).unwrap().odd);
        assert_eq!(holder.open(A, &mut after_direct), Ok(&b"x"[..]));
        let mut before_direct = before_direct;
        assert_eq!(holder.open(A, &mut before_direct), Ok(&b"x"[..]));
        let mut ack = Vec::new();
        holder.seal_ack(b"ack", &mut ack);
        assert!(a.open(r, &mut ack).is_ok());
        // The roll is over: what the old key seals is refused.
        let done = Keys {
            accepted: Accepted::one(next.clone()),
            active: next.clone(),
        };
        assert!(b.roll_to(done).is_some());
        let stale = Guard::new(Some(&old), false, A, 1);
        let mut d = seal(&stale, None);
        assert_eq!(b.open(from, &mut d), Err(Refusal::Unauthenticated));
    }

    #[test]
    fn key_files_readable_by_others_or_malformed_are_refused() {
        let dir = std::env::temp_dir().join(format!("tagwire-key-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        std::fs::write(&path, DomainKey::from_bytes([1; 32]).to_text()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            read_key_file(&path),
            Err(KeyFileError::Exposed { mode: 0o644, .. })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            read_key_file(&path).unwrap(),
            DomainKey::from_bytes([1; 32])
        );
        std::fs::write(&path, "tagwire-domain-key-v1\nnot hex\n").unwrap();
        assert!(matches!(
            read_key_file(&path),
            Err(KeyFileError::Malformed { .. })
        ));
        let missing = read_key_file(&dir.join("none")).unwrap_err();
        assert!(matches!(missing, KeyFileError::Read { .. }));
        // The message says the cause; it is not a source as well, which a
        // chain (`tagwire: {e:#}`) would print a second time.
        assert!(missing.to_string().contains("os error"), "{missing}");
        assert!(std::error::Error::source(&missing).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
