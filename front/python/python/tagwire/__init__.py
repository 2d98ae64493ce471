"""tagwire: real-time publish/subscribe over distribution tags.

Programs exchange messages through named channels such as ``/robot/laser``.
A publisher never names its subscribers and a subscriber never names its
publishers, yet every message says who sent it (process id and node
address), and anyone can ask who is on a tag. A per-node daemon
(``tagwire daemon``) keeps the tag table; messages go through shared
memory, written once whatever the number of subscribers.

>>> import tagwire
>>> with tagwire.Client() as tw:                       # the node's daemon
...     tw.create_tag("/robot/laser")                  # existing is fine
...     sub = tw.subscribe("/robot/laser", depth=64)
...     pub = tw.publisher("/robot/laser")
...     pub.send(b"scan")                              # any bytes-like object
...     m = sub.receive(timeout=0.1)                   # None = for ever
...     print(m.payload, m.seq, m.sender.pid, m.sender.node, m.timestamp)

This package wraps the Rust client crate ``tagwire``; see the package's
README for the whole API, and ``tagwire.errors`` for the exceptions.
"""

from __future__ import annotations

from typing import Union

from ._tagwire import (
    DEFAULT_SEND_TIMEOUT,
    MAX_LOSSLESS,
    MAX_MESSAGE,
    Batch,
    Between,
    Client,
    Last,
    Member,
    Message,
    MessageInfo,
    NodeInfo,
    Publisher,
    Sender,
    Since,
    Subscriber,
    TagInfo,
    __version__,
)
from .errors import (
    BufferTooSmall,
    Closed,
    DaemonTimeout,
    DaemonUnreachable,
    Denied,
    DepthTooLarge,
    Error,
    ForeignDaemon,
    InvalidName,
    IoError,
    NoLosslessRoom,
    NoPlacement,
    NoSendAccess,
    NotSubscribed,
    Overflowed,
    PeersUnresponsive,
    Quota,
    DeadlineMissed,
    NotPermitted,
    ProtocolError,
    Refused,
    TagDestroyed,
    Timeout,
    TooLarge,
    UnknownTag,
    WindowFull,
)

HistoryQuery = Union[Last, Since, Between]
"""What ``Client.pull`` and ``Client.subscribe(history=...)`` take."""

__all__ = [
    "HistoryQuery",
    "Client",
    "Publisher",
    "Subscriber",
    "Message",
    "MessageInfo",
    "Sender",
    "Batch",
    "Member",
    "TagInfo",
    "NodeInfo",
    "Last",
    "Since",
    "Between",
    "MAX_MESSAGE",
    "MAX_LOSSLESS",
    "DEFAULT_SEND_TIMEOUT",
    "__version__",
    "Error",
    "DaemonUnreachable",
    "DaemonTimeout",
    "UnknownTag",
    "TagDestroyed",
    "InvalidName",
    "NoSendAccess",
    "NotSubscribed",
    "TooLarge",
    "Overflowed",
    "WindowFull",
    "NoLosslessRoom",
    "DepthTooLarge",
    "Denied",
    "ForeignDaemon",
    "Quota",
    "DeadlineMissed",
    "NotPermitted",
    "Timeout",
    "PeersUnresponsive",
    "NoPlacement",
    "Refused",
    "IoError",
    "ProtocolError",
    "Closed",
    "BufferTooSmall",
]
