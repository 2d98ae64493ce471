//! Control links (and TCP data connections): a Noise handshake, then a
//! stream of Noise transport messages.
//!
//! Pattern `Noise_NNpsk0_25519_ChaChaPoly_SHA256` through `snow`, the PSK
//! derived from the domain key ([`crate::DomainKey::link_psk`]):
//!
//! ```text
//!   initiator (dials)                          responder (accepts)
//!     |-- frame: psk, e ------------------------------>|
//!     |<------------- frame: e, ee + LinkHello(resp) --|
//!     |-- frame: transport #0 = LinkHello(init) ------>|  link trusted
//!     |== frames: transport #1, #2, ... ==============>|
//! ```
//!
//! Every frame is a u16 big-endian length and one Noise message (at most
//! 65535 bytes). A party without the PSK fails the first message it reads
//! (the responder cannot open `psk, e`'s payload tag, the initiator
//! cannot open the answer). The responder trusts the initiator only after
//! transport message #0: a replayed first message yields keys that the
//! replaying party cannot compute. Transport nonces are implicit counters,
//! so a repeated, dropped or reordered frame fails to open and ends the link.
//!
//! [`LinkHello`] tells the other end this node's address, its epoch
//! (incarnation) and its datagram counter floor (see [`crate::replay`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use snow::{HandshakeState, StatelessTransportState};

use crate::DomainKey;

/// The Noise protocol name.
pub const NOISE_PARAMS: &str = "Noise_NNpsk0_25519_ChaChaPoly_SHA256";

/// Largest Noise message (and so frame body).
pub const MAX_FRAME: usize = 65535;

/// Bytes of a Noise transport message's tag.
const NOISE_TAG: usize = 16;

/// Largest plaintext in one transport frame.
pub const MAX_PLAIN: usize = MAX_FRAME - NOISE_TAG;

/// Why a handshake or a link failed. Any of them ends the link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// A handshake or transport message did not authenticate: the other end
    /// has another key, or the bytes were changed, replayed or reordered.
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
    /// The other end's hello is malformed.
    #[error("malformed link hello")]
    BadHello,
    /// A message arrived when none was expected (the handshake is over).
    #[error("unexpected handshake message")]
    Unexpected,
    /// `snow` refused to set up (a bug or an unsupported platform).
    #[error("noise setup failed: {0}")]
    Setup(String),
}

/// What each end says about itself inside the handshake.
///
/// ```text
///  0       1        2               2+n            10+n           18+n
///  +-------+--------+---------------+--------------+--------------+
///  | ver=1 | family | address (n=4  | epoch (u64   | floor (u64   |
///  |       | 4 or 6 |  or 16 bytes) |  LE)         |  LE)         |
///  +-------+--------+---------------+--------------+--------------+
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkHello {
    /// The node's address (its datagrams come from it).
    pub node: IpAddr,
    /// Its current life (the daemon's incarnation): its datagram key's epoch.
    pub epoch: u64,
    /// Its datagram counter now: nothing sealed before is accepted.
    pub floor: u64,
}

impl LinkHello {
    /// The bytes above.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![1u8];
        match self.node {
            IpAddr::V4(a) => {
                b.push(4);
                b.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                b.push(6);
                b.extend_from_slice(&a.octets());
            }
        }
        b.extend_from_slice(&self.epoch.to_le_bytes());
        b.extend_from_slice(&self.floor.to_le_bytes());
        b
    }

    /// Parses [`LinkHello::encode`]'s bytes, all of them.
    pub fn decode(b: &[u8]) -> Result<Self, LinkError> {
        let (node, rest) = match b {
            [1, 4, rest @ ..] if rest.len() == 4 + 16 => {
                let mut a = [0u8; 4];
                a.copy_from_slice(&rest[..4]);
                (IpAddr::V4(Ipv4Addr::from(a)), &rest[4..])
            }
            [1, 6, rest @ ..] if rest.len() == 16 + 16 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&rest[..16]);
                (IpAddr::V6(Ipv6Addr::from(a)), &rest[16..])
            }
            _ => return Err(LinkError::BadHello),
        };
        let mut e = [0u8; 8];
        let mut f = [0u8; 8];
        e.copy_from_slice(&rest[..8]);
        f.copy_from_slice(&rest[8..16]);
        Ok(Self {
            node,
            epoch: u64::from_le_bytes(e),
            floor: u64::from_le_bytes(f),
        })
    }
}

/// A link's handshake, fed frame bodies ([`Deframer`]) until it is done.
#[derive(Debug)]
pub struct Handshake {
    stage: Stage,
    mine: LinkHello,
}

#[derive(Debug)]
enum Stage {
    /// Initiator: sent `psk, e`, awaits `e, ee`.
    AwaitAnswer(Box<HandshakeState>),
    /// Responder: awaits `psk, e`, under each key it accepts.
    AwaitFirst(Vec<HandshakeState>),
    /// Responder: answered, awaits the initiator's hello (transport #0).
    AwaitHello(Arc<StatelessTransportState>),
    /// Over (or failed).
    Done,
}

/// What a frame moved the handshake to.
#[derive(Debug)]
pub enum Progress {
    /// Send this frame (length prefix included) and read the next one.
    Send(Vec<u8>),
    /// The link is authenticated: send `send` first if any, then use the
    /// link's two directions.
    Done {
        /// A last frame to send (the initiator's hello).
        send: Option<Vec<u8>>,
        /// The other end's hello (authenticated).
        peer: LinkHello,
        /// This end's sending direction.
        sender: LinkSender,
        /// This end's receiving direction.
        receiver: LinkReceiver,
    },
}

impl Handshake {
    /// The dialing end, and the first frame to send.
    pub fn initiator(key: &DomainKey, mine: LinkHello) -> Result<(Self, Vec<u8>), LinkError> {
        let mut noise = builder(key, |b| b.build_initiator())?;
        let mut msg = vec![0u8; MAX_FRAME];
        let n = noise.write_message(&[], &mut msg).map_err(setup)?;
        let frame = framed(&msg[..n]);
        Ok((
            Self {
                stage: Stage::AwaitAnswer(Box::new(noise)),
                mine,
            },
            frame,
        ))
    }

    /// The accepting end.
    pub fn responder(key: &DomainKey, mine: LinkHello) -> Result<Self, LinkError> {
        Self::responder_any(std::slice::from_ref(key), mine)
    }

    /// The accepting end, during a key roll: the initiator may use any of
    /// `keys` (the first frame is tried under each; at most two).
    pub fn responder_any(keys: &[DomainKey], mine: LinkHello) -> Result<Self, LinkError> {
        let noise = keys
            .iter()
            .map(|k| builder(k, |b| b.build_responder()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            stage: Stage::AwaitFirst(noise),
            mine,
        })
    }

    /// The next frame's body from the other end.
    pub fn handle_frame(&mut self, body: &[u8]) -> Result<Progress, LinkError> {
        let mut payload = vec![0u8; MAX_FRAME];
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::AwaitFirst(states) => {
                let mut failure = LinkError::Unauthenticated("no key accepted".into());
                let mut opened = None;
                for mut noise in states {
                    match noise.read_message(body, &mut payload) {
                        Ok(_) => {
                            opened = Some(noise);
                            break;
                        }
                        Err(e) => failure = refused(e),
                    }
                }
                let mut noise = opened.ok_or(failure)?;
                let mut msg = vec![0u8; MAX_FRAME];
                let n = noise
                    .write_message(&self.mine.encode(), &mut msg)
                    .map_err(setup)?;
                let t = noise.into_stateless_transport_mode().map_err(setup)?;
                self.stage = Stage::AwaitHello(Arc::new(t));
                Ok(Progress::Send(framed(&msg[..n])))
            }
            Stage::AwaitAnswer(mut noise) => {
                let n = noise.read_message(body, &mut payload).map_err(refused)?;
                let peer = LinkHello::decode(&payload[..n])?;
                let t = Arc::new(noise.into_stateless_transport_mode().map_err(setup)?);
                let mut sender = LinkSender::new(t.clone());
                let mut send = Vec::new();
                sender.seal(&self.mine.encode(), &mut send);
                Ok(Progress::Done {
                    send: Some(send),
                    peer,
                    sender,
                    receiver: LinkReceiver::new(t),
                })
            }
            Stage::AwaitHello(t) => {
                let mut receiver = LinkReceiver::new(t.clone());
                let hello = receiver.open(body)?;
                let peer = LinkHello::decode(&hello)?;
                Ok(Progress::Done {
                    send: None,
                    peer,
                    sender: LinkSender::new(t),
                    receiver,
                })
            }
            Stage::Done => Err(LinkError::Unexpected),
        }
    }
}

fn builder(
    key: &DomainKey,
    build: impl FnOnce(snow::Builder<'_>) -> Result<HandshakeState, snow::Error>,
) -> Result<HandshakeState, LinkError> {
    let params = NOISE_PARAMS.parse().map_err(setup)?;
    let psk = key.link_psk();
    let b = snow::Builder::new(params)
        .prologue(b"tagwire link v1")
        .map_err(setup)?
        .psk(0, &psk)
        .map_err(setup)?;
    build(b).map_err(setup)
}

fn setup(e: snow::Error) -> LinkError {
    LinkError::Setup(e.to_string())
}

fn refused(e: snow::Error) -> LinkError {
    LinkError::Unauthenticated(e.to_string())
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(msg.len() + 2);
    push_frame(msg, &mut f);
    f
}

fn push_frame(msg: &[u8], out: &mut Vec<u8>) {
    // Noise messages are at most MAX_FRAME (u16::MAX) bytes.
    let len = u16::try_from(msg.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(msg);
}

/// A link's sending direction: plaintext in, frames out.
#[derive(Debug)]
pub struct LinkSender {
    state: Arc<StatelessTransportState>,
    nonce: u64,
    scratch: Vec<u8>,
}

impl LinkSender {
    fn new(state: Arc<StatelessTransportState>) -> Self {
        Self {
            state,
            nonce: 0,
            scratch: vec![0u8; MAX_FRAME],
        }
    }

    /// Appends `plain` to `out` as frames (one per [`MAX_PLAIN`] bytes).
    pub fn seal(&mut self, plain: &[u8], out: &mut Vec<u8>) {
        for chunk in plain.chunks(MAX_PLAIN) {
            // A chunk of at most MAX_PLAIN bytes always fits: cannot fail.
            if let Ok(n) = self
                .state
                .write_message(self.nonce, chunk, &mut self.scratch)
            {
                self.nonce += 1;
                push_frame(&self.scratch[..n], out);
            }
        }
    }
}

/// A link's receiving direction: frames in, plaintext out, in order.
#[derive(Debug)]
pub struct LinkReceiver {
    state: Arc<StatelessTransportState>,
    nonce: u64,
    frames: Deframer,
}

impl LinkReceiver {
    fn new(state: Arc<StatelessTransportState>) -> Self {
        Self {
            state,
            nonce: 0,
            frames: Deframer::default(),
        }
    }

    /// Bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.frames.push(bytes);
    }

    /// The plaintext of the next whole frame pushed, if one is.
    pub fn next_plain(&mut self) -> Result<Option<Vec<u8>>, LinkError> {
        match self.frames.next_frame() {
            Some(body) => self.open(&body).map(Some),
            None => Ok(None),
        }
    }

    /// Opens one frame body, the next in order.
    fn open(&mut self, body: &[u8]) -> Result<Vec<u8>, LinkError> {
        let mut out = vec![0u8; body.len()];
        let n = self
            .state
            .read_message(self.nonce, body, &mut out)
            .map_err(refused)?;
        self.nonce += 1;
        out.truncate(n);
        Ok(out)
    }
}

/// Splits a byte stream into frame bodies (u16 BE length, body).
#[derive(Debug, Default)]
pub struct Deframer {
    buf: Vec<u8>,
}

impl Deframer {
    /// Bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame's body, if one is buffered.
    pub fn next_frame(&mut self) -> Option<Vec<u8>> {
        let len = usize::from(u16::from_be_bytes([*self.buf.first()?, *self.buf.get(1)?]));
        let body = self.buf.get(2..2 + len)?.to_vec();
        self.buf.drain(..2 + len);
        Some(body)
    }

    /// Bytes buffered (a whole frame or less after `next_frame` is None).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Takes the bytes buffered (what follows the frames taken).
    pub fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests;
