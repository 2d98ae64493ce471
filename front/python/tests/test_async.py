"""asyncio: ``await sub.receive_async()`` and ``async for msg in sub``."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import tagwire

T = 5.0


def test_async_for_with_a_concurrent_publisher_keeps_the_loop_responsive(client, tag):
    n = 200
    sub = client.subscribe(tag, depth=256)
    pub = client.publisher(tag)

    async def publisher():
        for i in range(n):
            pub.send(i.to_bytes(4, "little"))
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.2)
        client.destroy_tag(tag)  # ends the async for

    async def ticker(ticks, stop):
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main():
        stop = asyncio.Event()
        ticks: list = []
        tick = asyncio.create_task(ticker(ticks, stop))
        publ = asyncio.create_task(publisher())
        got = []
        async for m in sub:
            got.append(m)
        await publ
        stop.set()
        await tick
        return got, ticks

    # A watchdog: were the loop blocked, the publisher task could not run and
    # the test would hang; destroying the tag ends the iteration instead.
    watchdog = threading.Timer(30, lambda: client.destroy_tag(tag))
    watchdog.start()
    try:
        got, ticks = asyncio.run(main())
    finally:
        watchdog.cancel()
    assert [m.seq for m in got] == list(range(1, n + 1))
    assert [int.from_bytes(m.payload, "little") for m in got] == list(range(n))
    # The ticker ran all along: the loop was never blocked for long (a
    # receive that blocked it would hold it until the watchdog, 30 s; the
    # bounds leave a loaded machine room).
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) > 10
    assert max(gaps) < 2.0, f"event loop blocked for {max(gaps):.3f} s"


def test_receive_async_times_out_without_blocking_the_loop(client, tag):
    sub = client.subscribe(tag)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        t0 = time.monotonic()
        with pytest.raises(tagwire.Timeout):
            await sub.receive_async(timeout=0.3)
        waited = time.monotonic() - t0
        t.cancel()
        return ticks, waited

    ticks, waited = asyncio.run(main())
    assert 0.25 < waited < 5
    # About 30 (one per 10 ms); a blocked loop ticks once.
    assert ticks >= 5, ticks


def test_receive_async_gets_a_message_from_another_thread(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)

    async def main():
        threading.Timer(0.1, lambda: pub.send(b"hi")).start()
        return await sub.receive_async(timeout=T)

    m = asyncio.run(main())
    assert m.payload == b"hi" and m.seq == 1


def test_a_cancelled_receive_async_loses_no_message(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)

    async def main():
        task = asyncio.create_task(sub.receive_async())
        await asyncio.sleep(0.05)  # its worker waits in receive now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        pub.send(b"kept")  # arrives for the cancelled wait
        return await sub.receive_async(timeout=T)

    m = asyncio.run(main())
    assert m.payload == b"kept"


def test_async_for_ends_when_the_subscriber_is_closed(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    pub.send(b"only")

    async def main():
        asyncio.get_running_loop().call_later(0.2, sub.close)
        return [m.payload async for m in sub]

    assert asyncio.run(main()) == [b"only"]
