"""Sending and receiving: payload types, receive variants, timeouts, the GIL."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import tagwire
from _util import python_script, wait_until

T = 5.0  # seconds: a receive that should succeed at once


def test_round_trip_carries_payload_seq_sender_and_timestamp(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    before = time.time()
    assert pub.send(b"scan") == 1
    assert pub.send(b"scan2") == 2
    assert pub.last_seq == 2
    m = sub.receive(T)
    assert isinstance(m, tagwire.Message)
    assert m.payload == b"scan" and isinstance(m.payload, bytes)
    assert m.seq == 1
    assert m.sender.pid == os.getpid()
    assert m.sender.node == "127.0.0.1"
    assert m.sender == client.me
    assert str(m.sender) == f"{os.getpid()}@127.0.0.1"
    assert before - 1 <= m.timestamp <= time.time() + 1
    assert m.timestamp_ns == pytest.approx(m.timestamp * 1e9, rel=1e-9)
    assert sub.receive(T).payload == b"scan2"
    assert sub.received == 2 and sub.lost == 0
    assert sub.tag == tag and pub.tag == tag
    assert pub.max_fast_message >= 60_000


def test_send_takes_bytes_bytearray_memoryview_and_array(client, tag):
    import array

    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    pub.send(b"bytes")
    pub.send(bytearray(b"bytearray"))
    pub.send(memoryview(b"xxmemoryviewxx")[2:-2])
    pub.send(array.array("i", [1, 2, 3]))
    pub.send(b"")
    got = [sub.receive(T).payload for _ in range(5)]
    assert got[:3] == [b"bytes", b"bytearray", b"memoryview"]
    assert got[3] == array.array("i", [1, 2, 3]).tobytes()
    assert got[4] == b""


def test_send_takes_numpy_arrays_in_place(client, tag):
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    a = np.arange(100, dtype=np.float64)
    pub.send(a)
    m = np.arange(12, dtype=np.uint16).reshape(3, 4)
    pub.send(m)
    assert np.array_equal(np.frombuffer(sub.receive(T).payload, dtype=np.float64), a)
    assert np.array_equal(np.frombuffer(sub.receive(T).payload, dtype=np.uint16).reshape(3, 4), m)
    # A strided view is refused with a clear error, and nothing is sent.
    with pytest.raises(BufferError, match="contiguous"):
        pub.send(m[:, ::2])
    assert pub.last_seq == 2


def test_a_non_contiguous_memoryview_is_a_clear_error(client, tag):
    pub = client.publisher(tag)
    with pytest.raises(BufferError, match="contiguous"):
        pub.send(memoryview(b"abcdef")[::2])
    with pytest.raises(TypeError, match="bytes-like"):
        pub.send("a str is not bytes")  # type: ignore[arg-type]
    assert pub.last_seq == 0


def test_receive_timeout_raises_timeout_which_is_a_timeouterror(client, tag):
    sub = client.subscribe(tag)
    t0 = time.monotonic()
    with pytest.raises(tagwire.Timeout) as e:
        sub.receive(timeout=0.2)
    waited = time.monotonic() - t0
    assert isinstance(e.value, TimeoutError)
    assert isinstance(e.value, tagwire.Error)
    assert "no message within the timeout" in str(e.value)
    assert 0.15 <= waited < 2.0
    with pytest.raises(TimeoutError):
        sub.receive(0)  # a poll
    with pytest.raises(ValueError):
        sub.receive(-1)


def test_receive_releases_the_gil(client, tag):
    sub = client.subscribe(tag)
    started = threading.Event()
    done_at = []

    def blocked():
        started.set()
        try:
            sub.receive(1.5)
        except tagwire.Timeout:
            pass
        done_at.append(time.monotonic())

    t = threading.Thread(target=blocked)
    t.start()
    started.wait()
    time.sleep(0.2)  # the other thread is inside receive now
    n = 0
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        n += 1
    finished = time.monotonic()
    t.join()
    assert n > 1000
    # This thread counted to the end while the other one still waited.
    assert finished < done_at[0], "receive held the GIL while waiting"


def test_iteration_yields_messages_and_ends_when_the_tag_is_destroyed(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    for i in range(5):
        pub.send(b"%d" % i)

    def destroy_later():
        time.sleep(0.3)
        client.destroy_tag(tag)

    threading.Thread(target=destroy_later).start()
    got = [m.payload for m in sub]
    assert got == [b"0", b"1", b"2", b"3", b"4"]


def test_closing_from_another_thread_ends_an_iteration(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    pub.send(b"one")
    threading.Timer(0.3, sub.close).start()
    t0 = time.monotonic()
    assert [m.payload for m in sub] == [b"one"]
    assert time.monotonic() - t0 < 3
    with pytest.raises(tagwire.Closed):
        sub.receive(0)


def test_receive_batch_takes_every_message_available_in_order(client, tag):
    sub = client.subscribe(tag, depth=256)
    pub = client.publisher(tag)
    n = 200
    for i in range(n):
        pub.send(i.to_bytes(4, "little") * 10)
    b = sub.receive_batch(max=1024, timeout=T)
    assert isinstance(b, tagwire.Batch)
    assert len(b) == n
    assert b.seqs() == list(range(1, n + 1))
    assert b.payloads() == [i.to_bytes(4, "little") * 10 for i in range(n)]
    assert [m.seq for m in b] == list(range(1, n + 1))
    assert b[0].payload == bytes(40) and b[-1].seq == n
    assert b[5].sender.pid == os.getpid()
    assert b.nbytes == 40 * n
    off = b.offsets()
    assert len(off) == n + 1
    data = b.data()
    assert data[off[7] : off[8]] == (7).to_bytes(4, "little") * 10
    assert all(t > 0 for t in b.timestamps_ns())
    assert b.senders()[0] == client.me
    with pytest.raises(IndexError):
        b[n]
    # Nothing left: the next batch times out.
    with pytest.raises(tagwire.Timeout):
        sub.receive_batch(timeout=0.05)


def test_receive_batch_respects_max_and_waits_for_the_first(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    for i in range(10):
        pub.send(b"m%d" % i)
    assert sub.receive_batch(max=4, timeout=T).seqs() == [1, 2, 3, 4]
    assert sub.receive_batch(max=100, timeout=T).seqs() == list(range(5, 11))
    threading.Timer(0.2, lambda: pub.send(b"late")).start()
    t0 = time.monotonic()
    b = sub.receive_batch(timeout=T)
    assert b.payloads() == [b"late"]
    assert 0.1 < time.monotonic() - t0 < T


def test_receive_into_writes_into_the_callers_buffer(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    pub.send(b"hello")
    buf = bytearray(64)
    info = sub.receive_into(buf, T)
    assert isinstance(info, tagwire.MessageInfo)
    assert info.length == 5 and buf[:5] == b"hello"
    assert info.seq == 1 and info.sender.pid == os.getpid() and info.timestamp > 0
    # Into a memoryview slice: the offset is honoured.
    pub.send(b"abc")
    info = sub.receive_into(memoryview(buf)[10:20], T)
    assert buf[10:13] == b"abc" and info.length == 3


def test_receive_into_a_too_small_buffer_keeps_the_message(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    pub.send(b"0123456789")
    pub.send(b"next")
    with pytest.raises(tagwire.BufferTooSmall) as e:
        sub.receive_into(bytearray(4), T)
    assert e.value.needed == 10
    assert "10 bytes" in str(e.value)
    big = bytearray(10)
    info = sub.receive_into(big, T)
    assert (info.seq, bytes(big)) == (1, b"0123456789")
    assert sub.receive(T).payload == b"next"
    with pytest.raises(TypeError, match="writable"):
        sub.receive_into(b"read-only bytes", T)


def test_receive_into_a_numpy_array(client, tag):
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    src = np.linspace(0, 1, 50)
    pub.send(src)
    dst = np.zeros(64, dtype=np.float64)
    info = sub.receive_into(dst, T)
    assert info.length == src.nbytes
    assert np.array_equal(dst[:50], src)


def test_available_and_purge(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    assert not sub.available()
    for _ in range(3):
        pub.send(b"x")
    assert sub.available()
    assert sub.purge() == 3
    assert not sub.available()


def test_context_managers_and_close_are_idempotent(daemon, tag):
    with daemon.client() as c:
        with c.subscribe(tag) as sub, c.publisher(tag) as pub:
            pub.send(b"x")
            assert sub.receive(T).payload == b"x"
            assert len(c.receivers(tag)) == 1
        assert sub.closed and pub.closed
        sub.close()
        pub.close()
        with pytest.raises(tagwire.Closed, match="closed"):
            pub.send(b"y")
        with pytest.raises(tagwire.Closed):
            sub.receive(0)
        with pytest.raises(tagwire.Closed):
            list(iter(lambda: sub.receive_batch(timeout=0), None))
        # The daemon saw them go.
        wait_until(lambda: c.receivers(tag) == [] and c.senders(tag) == [], what="release")
    assert c.closed
    c.close()
    with pytest.raises(tagwire.Closed):
        c.ping()
    with pytest.raises(ValueError):  # Closed is a ValueError too
        c.tags()


def test_ctrl_c_interrupts_a_blocking_receive(daemon, tag):
    # Python leaves SIGINT alone when it starts with SIGINT ignored (a
    # runner started in the background of a non-interactive shell passes
    # that on): the script asks for KeyboardInterrupt itself.
    code = r"""
import signal, sys, tagwire
signal.signal(signal.SIGINT, signal.default_int_handler)
c = tagwire.Client(socket=sys.argv[1])
sub = c.subscribe(sys.argv[2])
print("waiting", flush=True)
try:
    sub.receive()
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""
    p = python_script(code, daemon.socket, tag)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=5)
    assert out.strip() == "interrupted", err
    assert p.returncode == 0
