//! Authentication between tagwire daemons (docs/design.md §7, "Between hosts"),
//! sans-IO: bytes, counters and keys in, bytes and verdicts out. No socket,
//! no clock, no thread. The runtime (`tagwire-daemon`) applies it at the
//! socket boundary, so the protocol cores above it (membership, the
//! delivery session) never see a byte that was not authenticated.
//!
//! No cryptography is written here: key derivation is HKDF-SHA256
//! (RustCrypto `hkdf` + `sha2`), datagrams are sealed with
//! ChaCha20-Poly1305 (`ring`'s), and control links
//! run the Noise protocol `Noise_NNpsk0_25519_ChaChaPoly_SHA256` (`snow`).
//! This crate only lays out bytes around them, derives the per-purpose
//! keys and keeps replay windows.
//!
//! # Keys
//!
//! One **domain key** ([`DomainKey`], 32 random bytes in a file, the same on
//! every node) is never used directly. From it HKDF derives:
//!
//! * the **link PSK** ([`DomainKey::link_psk`]), mixed into every Noise
//!   handshake: a peer without the domain key never completes one;
//! * one **datagram key per sender life** ([`DomainKey::datagram_key`]),
//!   bound to the sender's node address and its *epoch* (the daemon's
//!   incarnation, new at every start).
//! * one **holding key** per direct receiver ([`DomainKey::holding_key`],
//!   [`direct`]), which its daemon hands to the receiving process: it
//!   opens only that tag's data sent to that process, and seals only its
//!   acknowledgements.
//!
//! # Datagrams ([`datagram`])
//!
//! Every datagram a daemon sends (data, batches, heartbeats,
//! acknowledgements, multicast data, discovery beacons) is wrapped as
//! `header ‖ body ‖ tag`: the header names the sender's epoch and a counter
//! (one per daemon, never reused under one key: it is the AEAD nonce). The
//! tag covers header and body; with encryption the body is ciphertext.
//! A receiver opens a datagram before parsing anything of it.
//!
//! # Replay ([`replay`])
//!
//! A receiver accepts a peer's datagrams only under the epoch that the peer
//! announced over its authenticated control link, and only counters at or
//! above the floor it announced there, each once (a sliding bitmap,
//! [`replay::ReplayWindow`]). So a datagram recorded in an earlier life of
//! either end is refused: the sender's restart changes the epoch (the old
//! key is no longer accepted), the receiver's restart brings a new handshake
//! whose floor is above everything sent before it.
//!
//! # Control links ([`link`])
//!
//! `Noise_NNpsk0`: two ephemeral key pairs and the PSK; the responder sends
//! its [`link::LinkHello`] (node, epoch, datagram floor) in the second
//! handshake message, the initiator its own in the first transport message,
//! which the responder must read before it trusts the link. A recorded
//! session cannot be replayed: the responder's fresh ephemeral key makes
//! every transport key new. After the handshake the link is a stream of
//! Noise transport messages with implicit nonces, so a dropped, repeated or
//! reordered frame is refused too.

pub mod datagram;
pub mod direct;
pub mod key;
pub mod link;
pub mod peer;
pub mod replay;

pub use datagram::{tag_id, DatagramKey, OpenError, SealedHeader};
pub use direct::{Holder, HoldingKey, ToHolder};
pub use key::{Accepted, DomainKey, KeyError, KeyFile, ROLL_GRACE};
pub use link::{Deframer, Handshake, LinkError, LinkHello, LinkReceiver, LinkSender, Progress};
pub use peer::{Opener, Refused, Sealer};
pub use replay::{Replay, ReplayWindow, ReplayWindows};
