//! The one error type of the client API. Each variant is something a user can act
//! on; the messages say how.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use tagwire_wire::control::ErrorCode;
use tagwire_wire::NameError;

/// Everything that can go wrong in a tagwire call.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// No daemon answers on the socket.
    #[error(
        "no tagwire daemon at {} ({reason}); start one with `tagwire daemon` (or `tagwired`), \
         or set TAGWIRE_AUTOSTART=1 to start one automatically",
        socket.display()
    )]
    DaemonUnreachable {
        /// The socket tried.
        socket: PathBuf,
        /// What the connection attempt said.
        reason: String,
    },
    /// The daemon did not answer a request in time.
    #[error("the tagwire daemon at {} did not answer within {after:?}; is it overloaded or stopped?", socket.display())]
    DaemonTimeout {
        /// The socket.
        socket: PathBuf,
        /// The configured timeout.
        after: Duration,
    },
    /// No such tag.
    #[error("unknown tag {0}: create it first with Client::create_tag")]
    UnknownTag(String),
    /// The tag was destroyed while in use.
    #[error("tag {0} was destroyed")]
    TagDestroyed(String),
    /// The name is not a valid tag name.
    #[error("invalid tag name: {0}")]
    InvalidName(#[from] NameError),
    /// The caller holds no send access on the tag.
    #[error("no send access on tag {0}: call Client::publisher first")]
    NoSendAccess(String),
    /// The caller is not subscribed to the tag.
    #[error("not subscribed to tag {0}")]
    NotSubscribed(String),
    /// The message is larger than tagwire accepts.
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Message length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Messages were lost: this subscriber fell behind (its queue depth was
    /// exceeded), or they went missing on the way (a gap in a publisher's
    /// numbers, e.g. on a best-effort carrier). The subscription stays
    /// valid: receive again for the next one.
    #[error("{lost} messages lost (this subscriber fell more than its depth behind, or they went missing on the way); receive faster, subscribe with a larger depth, or use a reliable or lossless subscription")]
    Overflowed {
        /// How many messages were dropped (oldest first).
        lost: u64,
    },
    /// An instance got no sample for a whole deadline period
    /// ([`SubscribeOptions::deadline`](crate::SubscribeOptions::deadline)).
    /// The subscription stays valid: receive again.
    #[error("tag {tag}: instance {} got no sample for a deadline period (last from {})", key.map_or_else(|| "(unkeyed)".to_owned(), |k| k.to_string()), writer.map_or_else(|| "nobody".to_owned(), |w| w.to_string()))]
    DeadlineMissed {
        /// The tag.
        tag: String,
        /// The instance.
        key: Option<tagwire_wire::instance::Key>,
        /// Its owner (exclusive) or last publisher then.
        writer: Option<tagwire_wire::SenderInfo>,
    },
    /// A send waited its whole send timeout for a reliable receiver on another
    /// node (its network window is full, so the ring holds unsent messages),
    /// or for a lossless subscriber (`SubscribeOptions::lossless`) a whole ring
    /// behind, and gave up. Nothing was sent; the message can be sent again.
    #[error(
        "send on tag {tag} gave up after {waited:?}: a reliable receiver on another node \
         has not acknowledged enough (network slower than the publisher, or the node is \
         unreachable), or a lossless subscriber is a whole ring behind; nothing was sent: \
         retry, publish slower, or raise Publisher::set_send_timeout"
    )]
    WindowFull {
        /// The tag.
        tag: String,
        /// How long the send waited.
        waited: Duration,
    },
    /// A lossless subscription found every gate of the tag's ring on this
    /// node taken (by other lossless subscribers and the daemon's forwarder).
    #[error(
        "no room for another lossless subscriber of tag {tag} on this node (at most {max} \
         per tag and node): subscribe without SubscribeOptions::lossless, or drop another \
         lossless subscriber of the tag"
    )]
    NoLosslessRoom {
        /// The tag.
        tag: String,
        /// Lossless subscribers a tag may have on one node.
        max: usize,
    },
    /// A subscription asked to keep more unread messages than the tag's
    /// ring has slots.
    #[error(
        "subscription depth {depth} exceeds the {slots} slots of tag {tag}'s ring: ask for at \
         most {slots}, or create the tag with more slots (Client::create_tag_with, \
         `tagwire daemon --slots`)"
    )]
    DepthTooLarge {
        /// The tag.
        tag: String,
        /// The depth asked for.
        depth: u32,
        /// The ring's slots.
        slots: u32,
    },
    /// No message arrived within the receive timeout.
    #[error("no message within the timeout")]
    Timeout,
    /// Peer daemons on other nodes did not confirm a table change in time.
    #[error("{0}; retry, or see `tagwire nodes` for the state of the other nodes")]
    PeersUnresponsive(String),
    /// A subscription with `Proxy::Auto` cannot be placed (the message says
    /// why: no topology file, the tag or node is missing from it, or no node
    /// meets the delay bound).
    #[error("cannot place the proxy: {0}")]
    NoPlacement(String),
    /// The daemon's access policy does not grant this right on the tag.
    #[error("{message}")]
    Denied {
        /// The tag.
        tag: String,
        /// What the daemon said: who may not do what, the rule that applies,
        /// and what would grant it.
        message: String,
    },
    /// The socket's daemon runs as another user (neither root nor this
    /// process's): tagwire does not talk to it.
    #[error(
        "the daemon at {} runs as uid {uid}, neither root nor this process's uid {me}: refusing          to talk to it (it could read and forge your messages); set TAGWIRE_SOCKET to your          own daemon's socket",
        socket.display()
    )]
    ForeignDaemon {
        /// The socket.
        socket: PathBuf,
        /// The daemon's uid.
        uid: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// A resource bound of the daemon was reached (connections, tags, ring
    /// bytes, history size, per user or in all).
    #[error("the daemon's limit on {what} ({limit}) is reached: release some, or raise the daemon's quota")]
    Quota {
        /// What is bounded.
        what: String,
        /// The bound.
        limit: u64,
    },
    /// This process may not ask for a thread policy (a real-time one, or a
    /// nice below 0): neither for its own threads nor, through its
    /// subscription, for the daemons'. The message says what would grant
    /// it.
    #[error("{0}")]
    NotPermitted(String),
    /// The daemon refused a request for a reason not listed above.
    #[error("daemon refused the request ({code:?}): {message}")]
    Refused {
        /// The daemon's error class.
        code: ErrorCode,
        /// The daemon's explanation.
        message: String,
    },
    /// A local resource failed (shared memory, descriptors).
    #[error("{0}")]
    Io(String),
    /// The daemon sent something this library does not understand.
    #[error("protocol error talking to the daemon: {0}")]
    Protocol(String),
}

impl Error {
    pub(crate) fn from_daemon(code: ErrorCode, message: String, tag: &str) -> Self {
        match code {
            ErrorCode::UnknownTag => Error::UnknownTag(tag.to_owned()),
            ErrorCode::NoSendAccess => Error::NoSendAccess(tag.to_owned()),
            ErrorCode::NotSubscribed => Error::NotSubscribed(tag.to_owned()),
            ErrorCode::PeersUnresponsive => Error::PeersUnresponsive(message),
            ErrorCode::NoPlacement => Error::NoPlacement(message),
            ErrorCode::Quota => {
                // `quota: <what> (limit <n>); …`
                let parsed = message
                    .strip_prefix("quota: ")
                    .and_then(|m| m.split_once(" (limit "))
                    .and_then(|(what, rest)| {
                        let n = rest.split(')').next()?.parse().ok()?;
                        Some((what.to_owned(), n))
                    });
                let (what, limit) = parsed.unwrap_or((message, 0));
                Error::Quota { what, limit }
            }
            ErrorCode::NotPermitted => Error::NotPermitted(message),
            ErrorCode::Denied => Error::Denied {
                tag: tag.to_owned(),
                message,
            },
            code => Error::Refused { code, message },
        }
    }
}
