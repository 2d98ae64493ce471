"""asyncio support for ``Subscriber``: ``receive_async`` and ``async for``.

A receive that has to wait runs in the subscriber's own worker thread (one
per subscriber, made on first use), which waits with the GIL released, so
the event loop never blocks. A message already there is taken at once,
without the thread hop. Waits are cut into slices of ``_SLICE`` seconds so
that the worker is never stuck for long in a wait nobody awaits any more
(a cancelled task, interpreter exit). A message that arrives for a
cancelled wait is handed back to the subscriber and returned by its next
receive: cancelling loses nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from typing import Any, Optional

from .errors import Closed, Error, TagDestroyed, Timeout

_SLICE = 0.25
"""Seconds one job of the worker thread waits at most."""

_YIELD_EVERY = 64
"""``async for`` yields to the event loop at least once per this many
messages, even when every message was there at once."""

_lock = threading.Lock()


def _executor(sub: Any) -> concurrent.futures.ThreadPoolExecutor:
    d = sub.__dict__
    ex: Optional[concurrent.futures.ThreadPoolExecutor] = d.get("_aio_executor")
    if ex is None:
        with _lock:
            ex = d.get("_aio_executor")
            if ex is None:
                ex = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="tagwire-aio"
                )
                d["_aio_executor"] = ex
    return ex


def on_close(sub: Any) -> None:
    """Stops the subscriber's worker thread (called by ``Subscriber.close``)."""
    ex = sub.__dict__.pop("_aio_executor", None)
    if ex is not None:
        ex.shutdown(wait=False, cancel_futures=True)


def _wait(sub: Any, seconds: float) -> Any:
    """One job of the worker: a message, or None after ``seconds``."""
    try:
        return sub.receive(seconds)
    except Timeout:
        return None


def _keep_for(sub: Any) -> Any:
    """A done-callback handing a cancelled wait's message back to ``sub``."""

    def done(f: "concurrent.futures.Future[Any]") -> None:
        if f.cancelled() or f.exception() is not None:
            return
        msg = f.result()
        if msg is not None:
            try:
                sub._requeue(msg)
            except Error:
                pass  # closed meanwhile: nobody will receive it

    return done


async def receive_async(sub: Any, timeout: Optional[float] = None) -> Any:
    """``await sub.receive_async(timeout)``: see ``Subscriber.receive_async``."""
    loop = asyncio.get_running_loop()
    forever = timeout is None or math.isinf(timeout)
    deadline = 0.0 if forever else loop.time() + float(timeout)  # type: ignore[arg-type]
    try:
        return sub.receive(0)
    except Timeout:
        if not forever and loop.time() >= deadline:
            raise
    try:
        ex = _executor(sub)
    except RuntimeError as e:  # pragma: no cover - closed between the two lines
        raise Closed("this subscriber is closed; make a new one") from e
    while True:
        wait = _SLICE if forever else min(_SLICE, max(0.0, deadline - loop.time()))
        try:
            job = ex.submit(_wait, sub, wait)
        except RuntimeError as e:  # the executor was shut down: closed
            raise Closed("this subscriber is closed; make a new one") from e
        try:
            msg = await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            job.add_done_callback(_keep_for(sub))
            raise
        if msg is not None:
            return msg
        if not forever and loop.time() >= deadline:
            raise Timeout("no message within the timeout")


async def anext(sub: Any) -> Any:
    """``async for msg in sub``: the next message; the loop ends when the tag
    is destroyed or the subscriber closed."""
    d = sub.__dict__
    streak = d.get("_aio_streak", 0) + 1
    if streak >= _YIELD_EVERY:
        streak = 0
        await asyncio.sleep(0)
    d["_aio_streak"] = streak
    try:
        return await receive_async(sub)
    except (TagDestroyed, Closed):
        raise StopAsyncIteration from None
