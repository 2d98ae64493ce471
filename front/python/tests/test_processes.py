"""Across processes and daemon restarts: lossless delivery from a flat-out
publisher process, several publisher processes on one tag, and a client
that survives its daemon being killed and started again."""

from __future__ import annotations

import os
import time

import pytest

import tagwire
from _util import python_script, wait_until

T = 10.0

PUBLISHER = r"""
import sys, tagwire
socket, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with tagwire.Client(socket=socket) as c, c.publisher(tag) as p:
    p.set_send_timeout(30)
    for i in range(1, count + 1):
        p.send(b"%d:%d" % (p.last_seq + 1, i))
print("sent", p.last_seq if not p.closed else count)
"""


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"publisher failed: {err}"
    return out


def slow_read(sub, n):
    """Receives ``n`` messages in batches, pausing now and then: a reader
    slower than a flat-out publisher."""
    seqs = []
    batches = 0
    while len(seqs) < n:
        seqs.extend(sub.receive_batch(max=256, timeout=T).seqs())
        batches += 1
        if batches % 8 == 0:
            time.sleep(0.002)
    return seqs


def test_a_lossless_subscriber_loses_nothing_from_a_flat_out_publisher(daemon, client, tag):
    n = 50_000
    sub = client.subscribe(tag, lossless=True)
    proc = python_script(PUBLISHER, daemon.socket, tag, str(n))
    seqs = slow_read(sub, n)
    finish(proc)
    assert seqs == list(range(1, n + 1))
    assert sub.lost == 0
    sub.close()
    # The control: the same reader without lossless loses messages.
    plain = client.subscribe(tag, depth=64)
    proc = python_script(PUBLISHER, daemon.socket, tag, str(n))
    with pytest.raises(tagwire.Overflowed):
        slow_read(plain, n)
    finish(proc)
    assert plain.lost > 0


def test_several_publisher_processes_on_one_tag(daemon, client, tag):
    k = 500
    sub = client.subscribe(tag, lossless=True)
    procs = [python_script(PUBLISHER, daemon.socket, tag, str(k)) for _ in range(2)]
    pids = {p.pid for p in procs}
    per_sender: dict = {}
    for _ in range(2 * k):
        m = sub.receive(T)
        per_sender.setdefault(m.sender.pid, []).append(m)
    for p in procs:
        finish(p)
    assert set(per_sender) == pids
    assert os.getpid() not in per_sender
    for pid, msgs in per_sender.items():
        assert [m.seq for m in msgs] == list(range(1, k + 1)), f"sender {pid} out of order"
        assert [m.payload for m in msgs] == [b"%d:%d" % (i, i) for i in range(1, k + 1)]
        assert all(m.sender.node == "127.0.0.1" for m in msgs)
    with pytest.raises(tagwire.Timeout):
        sub.receive(0.05)


def test_the_client_reconnects_after_a_daemon_restart(daemon, client, tag):
    pub = client.publisher(tag)
    sub = client.subscribe(tag)
    pub.send(b"before")
    assert sub.receive(T).payload == b"before"
    daemon.kill()  # SIGKILL: no goodbye
    # While it is down: a clear error.
    def unreachable():
        try:
            client.ping()
            return False
        except tagwire.DaemonUnreachable:
            return True

    wait_until(unreachable, what="DaemonUnreachable while the daemon is down")
    with pytest.raises(tagwire.DaemonUnreachable, match="no tagwire daemon"):
        client.tags()
    daemon.start()

    def reregistered():
        try:
            client.ping()
            return len(client.senders(tag)) == 1 and len(client.receivers(tag)) == 1
        except (tagwire.DaemonUnreachable, tagwire.UnknownTag, tagwire.DaemonTimeout):
            return False

    wait_until(reregistered, what="re-registration with the new daemon")
    assert client.senders(tag)[0].pid == os.getpid()
    pub.send(b"after")
    assert sub.receive(T).payload == b"after"
    # And a new subscriber on the new daemon hears the same publisher.
    late = client.subscribe(tag)
    pub.send(b"again")
    assert late.receive(T).payload == b"again"
    assert sub.receive(T).payload == b"again"
