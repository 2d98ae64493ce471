"""Type stubs of ``tagwire`` (the classes live in ``tagwire._tagwire``)."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Iterator, Literal, Optional, Union, final

from typing_extensions import Buffer, Self

from .errors import BufferTooSmall as BufferTooSmall
from .errors import Closed as Closed
from .errors import DaemonTimeout as DaemonTimeout
from .errors import DaemonUnreachable as DaemonUnreachable
from .errors import Error as Error
from .errors import InvalidName as InvalidName
from .errors import IoError as IoError
from .errors import NoLosslessRoom as NoLosslessRoom
from .errors import DepthTooLarge as DepthTooLarge
from .errors import Denied as Denied
from .errors import ForeignDaemon as ForeignDaemon
from .errors import Quota as Quota
from .errors import NotPermitted as NotPermitted
from .errors import NoPlacement as NoPlacement
from .errors import NoSendAccess as NoSendAccess
from .errors import NotSubscribed as NotSubscribed
from .errors import Overflowed as Overflowed
from .errors import PeersUnresponsive as PeersUnresponsive
from .errors import ProtocolError as ProtocolError
from .errors import Refused as Refused
from .errors import TagDestroyed as TagDestroyed
from .errors import Timeout as Timeout
from .errors import TooLarge as TooLarge
from .errors import UnknownTag as UnknownTag
from .errors import WindowFull as WindowFull

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

__version__: str
MAX_MESSAGE: int
"""Largest message ``Publisher.send`` accepts (256 MiB)."""
MAX_LOSSLESS: int
"""Lossless subscribers a tag may have on one node."""
DEFAULT_SEND_TIMEOUT: float
"""Seconds ``send`` waits by default for a held-back ring (1.0)."""

HistoryQuery = Union[Last, Since, Between]

@final
class Last:
    """History query: the last ``n`` messages kept by the daemon."""

    def __new__(cls, n: int) -> Self: ...
    @property
    def n(self) -> int: ...

@final
class Since:
    """History query: kept messages whose sequence number is >= ``seq``."""

    def __new__(cls, seq: int) -> Self: ...
    @property
    def seq(self) -> int: ...

@final
class Between:
    """History query: kept messages sent within ``[from_ns, to_ns]``."""

    def __new__(cls, from_ns: int, to_ns: int) -> Self: ...
    @property
    def from_ns(self) -> int: ...
    @property
    def to_ns(self) -> int: ...

@final
class Sender:
    """Who sent a message: process id and node address."""

    @property
    def pid(self) -> int: ...
    @property
    def node(self) -> str:
        """The node's address, e.g. ``"10.0.0.1"``."""

@final
class Message:
    """A received message."""

    @property
    def payload(self) -> bytes: ...
    @property
    def seq(self) -> int:
        """The publisher's sequence number (per publisher, from 1)."""
    @property
    def sender(self) -> Sender: ...
    @property
    def timestamp(self) -> float:
        """When it was sent: seconds since the epoch (publisher's clock)."""
    @property
    def timestamp_ns(self) -> int: ...
    @property
    def key(self) -> Optional[bytes]:
        """The instance's 16-byte key (``Publisher.send_keyed``), or None."""
    @property
    def state(
        self,
    ) -> Literal["alive", "disposed", "unregistered", "disposed_unregistered"]: ...
    @property
    def strength(self) -> Optional[int]:
        """The publisher's ownership strength, or None if it set none."""

@final
class MessageInfo:
    """What ``Subscriber.receive_into`` returns beside the payload."""

    @property
    def length(self) -> int:
        """Bytes of payload written at the start of the buffer."""
    @property
    def seq(self) -> int: ...
    @property
    def sender(self) -> Sender: ...
    @property
    def timestamp(self) -> float: ...
    @property
    def timestamp_ns(self) -> int: ...
    @property
    def key(self) -> Optional[bytes]:
        """The instance's 16-byte key (``Publisher.send_keyed``), or None."""
    @property
    def state(
        self,
    ) -> Literal["alive", "disposed", "unregistered", "disposed_unregistered"]: ...
    @property
    def strength(self) -> Optional[int]:
        """The publisher's ownership strength, or None if it set none."""

@final
class Batch:
    """Messages from one ``Subscriber.receive_batch`` call, oldest first."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> Message: ...
    def __iter__(self) -> Iterator[Message]: ...
    @property
    def nbytes(self) -> int:
        """Total payload bytes."""
    def payloads(self) -> list[bytes]:
        """Every payload as ``bytes``."""
    def seqs(self) -> list[int]: ...
    def timestamps_ns(self) -> list[int]: ...
    def senders(self) -> list[Sender]: ...
    def data(self) -> bytes:
        """All payloads back to back; message ``i`` is ``data[offsets[i]:offsets[i+1]]``."""
    def offsets(self) -> list[int]:
        """``len(batch) + 1`` boundaries into ``data()``."""

@final
class Member:
    """A process on a tag (``Client.senders`` / ``Client.receivers``)."""

    @property
    def pid(self) -> int: ...
    @property
    def node(self) -> str: ...
    @property
    def since_unix_ns(self) -> int: ...
    @property
    def since(self) -> float: ...
    @property
    def sender(self) -> Sender: ...

@final
class TagInfo:
    """A row of ``Client.tags()``."""

    @property
    def name(self) -> str: ...
    @property
    def id(self) -> int: ...
    @property
    def domain(self) -> Literal["global", "local"]: ...
    @property
    def senders(self) -> list[Member]: ...
    @property
    def receivers(self) -> list[Member]: ...

@final
class NodeInfo:
    """A row of ``Client.nodes()``."""

    @property
    def node(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def state(self) -> Literal["up", "connecting", "dead"]: ...
    @property
    def last_heard_ms(self) -> Optional[int]: ...
    @property
    def source(self) -> str: ...

@final
class Publisher:
    """Send access to one tag (``Client.publisher``)."""

    def send(self, data: Buffer) -> int:
        """Sends ``data`` (any contiguous bytes-like object); returns its seq."""
    def send_keyed(self, key: Buffer, data: Buffer) -> int:
        """Sends a sample of instance ``key``; returns its seq."""
    def dispose(self, key: Buffer) -> int:
        """Deletes instance ``key`` (subscribers see ``state == "disposed"``)."""
    def unregister(self, key: Buffer) -> int:
        """Writes instance ``key`` no more (an exclusive owner gives it up)."""
    def set_strength(self, strength: Optional[int]) -> None:
        """Ownership strength for ``exclusive`` subscribers (None: 0)."""
    def offer_deadline(self, period: Optional[float]) -> None:
        """Each instance written should get a sample at least every ``period`` s."""
    def missed_deadlines(self) -> list[Optional[bytes]]:
        """Instances left past the offered deadline since the last call."""
    def set_send_timeout(self, seconds: float) -> None: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def max_fast_message(self) -> int: ...
    @property
    def tag(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
        /,
    ) -> bool: ...

@final
class Subscriber:
    """A subscription to one tag (``Client.subscribe``)."""

    def receive(self, timeout: Optional[float] = None) -> Message:
        """The next message; ``timeout`` None waits for ever, 0 polls."""
    def receive_into(self, buffer: Buffer, timeout: Optional[float] = None) -> MessageInfo:
        """Writes the next payload into ``buffer`` (writable, contiguous)."""
    def receive_batch(self, max: int = 1024, timeout: Optional[float] = None) -> Batch:
        """Every message available (up to ``max``), waiting for the first."""
    async def receive_async(self, timeout: Optional[float] = None) -> Message:
        """``receive`` for asyncio (never blocks the event loop)."""
    def available(self) -> bool: ...
    def purge(self) -> int: ...
    @property
    def lost(self) -> int: ...
    @property
    def received(self) -> int: ...
    @property
    def tag(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
        /,
    ) -> bool: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> Message: ...
    def __aiter__(self) -> Self: ...
    async def __anext__(self) -> Message: ...

@final
class Client:
    """A connection to the node's tagwire daemon."""

    def __new__(
        cls,
        socket: Union[str, os.PathLike[str], None] = None,
        timeout: float = 1.0,
        autostart: bool = False,
        name: Optional[str] = None,
    ) -> Self: ...
    @property
    def socket(self) -> str: ...
    @property
    def me(self) -> Sender: ...
    @property
    def closed(self) -> bool: ...
    def create_tag(
        self,
        name: str,
        domain: Literal["global", "local"] = "global",
        slots: Optional[int] = None,
        slot_payload: Optional[int] = None,
        history_depth: int = 0,
        history_max_bytes: int = 0,
    ) -> bool: ...
    def destroy_tag(self, name: str) -> None: ...
    def publisher(
        self,
        name: str,
        priority: str = "normal",
        sched: str = "other",
        pacing: str = "daemon",
    ) -> Publisher: ...
    def subscribe(
        self,
        name: str,
        depth: int | None = None,
        reliability: Literal["reliable", "best_effort"] = "reliable",
        carrier: Literal["udp", "tcp", "multicast"] = "udp",
        every: int = 1,
        proxy: str = "subscriber",
        delay_bound: Optional[float] = None,
        lossless: bool = False,
        busy_poll: Optional[float] = None,
        history: Optional[HistoryQuery] = None,
        exclusive: bool = False,
        deadline: Optional[float] = None,
        min_separation: Optional[float] = None,
        priority: str = "normal",
        sched: str = "other",
    ) -> Subscriber: ...
    def senders(self, name: str) -> list[Member]: ...
    def receivers(self, name: str) -> list[Member]: ...
    def tags(self) -> list[TagInfo]: ...
    def nodes(self) -> list[NodeInfo]: ...
    def set_history(self, name: str, depth: int, max_bytes: int = 0) -> None: ...
    def set_channel_qos(
        self, name: str, priority: str, pid: Optional[int] = None
    ) -> list[Member]: ...
    def set_channel_sched(
        self, name: str, sched: str, pid: Optional[int] = None
    ) -> list[Member]: ...
    def change_channels(
        self,
        name: str,
        subscribers: str = "all",
        priority: Optional[str] = None,
        sched: Optional[str] = None,
    ) -> list[Member]: ...
    def change_publishers(
        self,
        name: str,
        publishers: str = "all",
        priority: Optional[str] = None,
        sched: Optional[str] = None,
    ) -> list[Member]: ...
    def change_pacing(
        self, name: str, pacing: str, publishers: str = "all"
    ) -> list[Member]: ...
    def pull(self, name: str, query: HistoryQuery) -> list[Message]: ...
    def ping(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
        /,
    ) -> bool: ...
