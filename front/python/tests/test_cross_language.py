"""A Python, a Rust and a C++ program on one tag.

The Rust and C++ programs are the ``tagwire perf rtt --lang`` runners
(``tagwire lang-runner pong`` and ``tagwire-lang-cpp pong``, see
proof/perf/src/lang.rs): each echoes every message of the data tag on the
ack tag until ``b"\\xffSTOP"``. The C++ runner comes from
``$TAGWIRE_CPP_RUNNER`` or the CMake build under ``target/``; without it
that half is skipped with the reason.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List, Optional

import pytest

from _util import wait_until
from conftest import REPO

STOP = b"\xffSTOP"
T = 10.0


def cpp_runner() -> Optional[Path]:
    env = os.environ.get("TAGWIRE_CPP_RUNNER")
    candidates = [Path(env)] if env else []
    candidates += [
        REPO / "target" / "cmake-ffi" / "cpp" / "tagwire-lang-cpp",
        REPO / "target" / "bindings" / "cmake-ffi" / "cpp" / "tagwire-lang-cpp",
    ]
    return next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


def pong(cmd: List[str], daemon, data: str, ack: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*cmd, "pong", "--socket", daemon.socket, "--data", data, "--ack", ack],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def echo_round(client, peers: List[subprocess.Popen], data: str, ack: str, n: int = 5) -> None:
    """Sends ``n`` messages on ``data``; every peer must echo each one on
    ``ack``, in order, as itself (its pid)."""
    client.create_tag(data)
    client.create_tag(ack)
    acks = client.subscribe(ack, depth=256)
    pub = client.publisher(data)
    wait_until(lambda: len(client.receivers(data)) == len(peers), what="the peers subscribing")
    wait_until(lambda: len(client.senders(ack)) == len(peers), what="the peers' send access")
    sent = [b"py#%d:" % i + bytes(range(200)) for i in range(n)]
    for p in sent:
        pub.send(p)
    per_pid: dict = {}
    for _ in range(n * len(peers)):
        m = acks.receive(T)
        per_pid.setdefault(m.sender.pid, []).append(m.payload)
    pub.send(STOP)
    for p in peers:
        assert p.wait(timeout=T) == 0, p.stderr.read() if p.stderr else ""
    assert set(per_pid) == {p.pid for p in peers}
    for pid, payloads in per_pid.items():
        assert payloads == sent, f"peer {pid} echoed something else"


def test_python_and_rust_on_one_tag(daemon, client, tagwire_bin):
    rust = pong([str(tagwire_bin), "lang-runner"], daemon, "/x/rs/data", "/x/rs/ack")
    echo_round(client, [rust], "/x/rs/data", "/x/rs/ack")


def test_python_rust_and_cpp_on_one_tag(daemon, client, tagwire_bin):
    cpp = cpp_runner()
    if cpp is None:
        reason = (
            "no C++ runner: build it with `cmake -S front/ffi -B target/cmake-ffi && "
            "cmake --build target/cmake-ffi` (or set TAGWIRE_CPP_RUNNER)"
        )
        print(f"skipped: {reason}")
        pytest.skip(reason)
    peers = [
        pong([str(tagwire_bin), "lang-runner"], daemon, "/x/all/data", "/x/all/ack"),
        pong([str(cpp)], daemon, "/x/all/data", "/x/all/ack"),
    ]
    echo_round(client, peers, "/x/all/data", "/x/all/ack")
