//! The keys a publisher seals its own first copies with on a daemon with a
//! domain key (the send ticket): its tag's, and those of other nodes'
//! direct receivers.

use tagwire_wire::control::{Request, Response};
use tagwire_wire::TagName;

use super::{unexpected, Client};
use crate::Result;

/// A sealing key as the daemon hands it over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SealKey {
    /// The daemon's life (the key's epoch).
    pub(crate) epoch: u64,
    pub(crate) key: [u8; 32],
    /// Whether to encrypt bodies.
    pub(crate) encrypt: bool,
    /// Of an odd domain key generation (a key roll).
    pub(crate) odd: bool,
}

impl SealKey {
    /// As a key to seal with.
    pub(crate) fn datagram_key(&self) -> tagwire_auth::DatagramKey {
        tagwire_auth::DatagramKey::from_tag_key(&self.key, self.epoch).with_odd(self.odd)
    }
}

impl Client {
    /// The key this client's publisher of `tag` seals its own first copies
    /// with; `None` from a daemon without a domain key.
    pub(crate) fn tag_key(&self, tag: &TagName) -> Result<Option<SealKey>> {
        self.key(Request::TagKey { name: tag.clone() }, tag)
    }

    /// The data key for the direct receiver at `to` (grant `member`) of
    /// `tag`, which this client's publisher seals its first copies to it
    /// with; `None` from a daemon without a domain key.
    pub(crate) fn direct_key(
        &self,
        tag: &TagName,
        to: std::net::SocketAddr,
        member: u64,
    ) -> Result<Option<SealKey>> {
        let req = Request::DirectKey {
            name: tag.clone(),
            to,
            member,
        };
        self.key(req, tag)
    }

    fn key(&self, req: Request, tag: &TagName) -> Result<Option<SealKey>> {
        match self.core.call(req, None)? {
            (Response::Ok, _) => Ok(None),
            (
                Response::TagKey {
                    epoch,
                    key,
                    encrypt,
                    odd,
                },
                _,
            ) => Ok(Some(SealKey {
                epoch,
                key,
                encrypt,
                odd,
            })),
            other => Err(unexpected(other, tag)),
        }
    }
}
