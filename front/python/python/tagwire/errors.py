"""The exceptions tagwire raises.

``tagwire.Error`` is the base of every error the library raises; there is one
subclass per variant of the Rust ``tagwire::Error`` enum, and its message is
that error's text. Some subclasses also derive from the builtin exception a
Python programmer would catch (``Timeout`` is a ``TimeoutError``).

Besides the message, some carry the variant's fields as attributes:
``Overflowed.lost``, ``TooLarge.length``/``.limit``, ``.tag`` on the per-tag
errors, ``WindowFull.waited`` (seconds), ``.socket`` on the daemon errors,
``Refused.code``.
"""

from __future__ import annotations

__all__ = [
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


class Error(Exception):
    """Base class of every tagwire error."""


class DaemonUnreachable(Error, ConnectionError):
    """No daemon answers on the socket (start one with ``tagwire daemon``).

    A client whose daemon restarts gets this meanwhile, then reconnects by
    itself. ``.socket`` is the socket path tried.
    """

    socket: str = ""


class DaemonTimeout(Error, TimeoutError):
    """The daemon did not answer a request within the client's timeout."""

    socket: str = ""


class UnknownTag(Error, LookupError):
    """No tag of that name: create it first with ``Client.create_tag``."""

    tag: str = ""


class TagDestroyed(Error):
    """The tag was destroyed while in use (``Client.destroy_tag``)."""

    tag: str = ""


class InvalidName(Error, ValueError):
    """Not a valid tag name (a path such as ``/robot/laser``)."""


class NoSendAccess(Error):
    """The caller holds no send access on the tag."""

    tag: str = ""


class NotSubscribed(Error):
    """The caller is not subscribed to the tag."""

    tag: str = ""


class TooLarge(Error, ValueError):
    """The message is larger than tagwire accepts (``.length`` > ``.limit``)."""

    length: int = 0
    limit: int = 0


class Overflowed(Error):
    """The subscriber fell more than its depth behind: the oldest ``.lost``
    messages were dropped. The subscription stays valid: receive again for
    the next message."""

    lost: int = 0


class WindowFull(Error):
    """A send waited its whole send timeout for a lossless subscriber or a
    reliable receiver on another node and gave up; nothing was sent (retry,
    publish slower or raise ``Publisher.set_send_timeout``)."""

    tag: str = ""
    waited: float = 0.0


class NoLosslessRoom(Error):
    """Every lossless gate of the tag's ring on this node is taken (at most
    ``tagwire.MAX_LOSSLESS`` lossless subscribers per tag and node)."""

    tag: str = ""
    limit: int = 0


class DepthTooLarge(Error):
    """A subscription asked to keep more unread messages (``depth``) than the
    tag's ring has slots (``limit``)."""

    tag: str = ""
    depth: int = 0
    limit: int = 0


class Denied(Error, PermissionError):
    """The daemon's access policy does not grant this right on the tag
    (the message says which rule applies and what would grant it)."""

    tag: str = ""


class ForeignDaemon(Error, PermissionError):
    """The socket's daemon runs as another user (neither root nor this
    process's): tagwire does not talk to it."""

    socket: str = ""
    uid: int = 0


class Quota(Error):
    """A resource bound of the daemon was reached (``what``, ``limit``):
    connections, tags, ring bytes or history size, per user or in all."""

    what: str = ""
    limit: int = 0


class DeadlineMissed(Error):
    """An instance (``key``: the 16 bytes of ``Message.key``, or None for
    messages sent without a key) of ``tag`` got no sample for a deadline
    period; the subscription stays valid."""

    tag: str = ""
    key: "bytes | None" = None


class NotPermitted(Error, PermissionError):
    """The process may not ask for a thread policy (a real-time one, or a
    nice below 0): the message says what would grant it (CAP_SYS_NICE, or
    the matching limit)."""


class Timeout(Error, TimeoutError):
    """No message arrived within the receive timeout."""


class PeersUnresponsive(Error):
    """Daemons on other nodes did not confirm a table change in time."""


class NoPlacement(Error):
    """A ``proxy="auto"`` subscription cannot be placed (the message says why)."""


class Refused(Error):
    """The daemon refused the request for another reason (``.code``)."""

    code: str = ""


class IoError(Error, OSError):
    """A local resource failed (shared memory, descriptors)."""


class ProtocolError(Error):
    """The daemon sent something this library does not understand."""


class Closed(Error, ValueError):
    """A method was called on a closed client, publisher or subscriber."""


class BufferTooSmall(Error, ValueError):
    """``Subscriber.receive_into`` got a buffer shorter than the message.

    The message is kept: the next receive returns it. ``.needed`` is its
    length in bytes.
    """

    needed: int = 0
