"""Fixtures: a private tagwire daemon per test, started as a subprocess.

The daemon is the CLI binary ``tagwire daemon``: ``$TAGWIRE_BIN`` if set,
else ``target/release/tagwire`` or ``target/debug/tagwire`` under the
repository root (found from this file). Without one, the tests that need it
are skipped with the reason (build it with ``cargo build -p tagwire-cli``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator, Optional

import pytest

import tagwire

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent  # front/python
REPO = PACKAGE.parent.parent  # the workspace root


def find_binary() -> Optional[Path]:
    """The ``tagwire`` CLI to run daemons with, or None."""
    env = os.environ.get("TAGWIRE_BIN")
    candidates = [Path(env)] if env else [REPO / "target" / p / "tagwire" for p in ("release", "debug")]
    for p in candidates:
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


class Daemon:
    """A ``tagwire daemon`` on a private socket; ``restart()`` and ``kill()``
    act on the process, the socket path stays the same."""

    def __init__(self, binary: Path, directory: Path) -> None:
        self.binary = binary
        self.dir = directory
        # Short: a Unix socket path has at most 107 bytes.
        self.socket = str(directory / "tagwired.sock")
        self.log = directory / "daemon.log"
        self.proc: Optional[subprocess.Popen] = None
        self.start()

    def start(self) -> None:
        env = dict(os.environ, TAGWIRE_SOCKET=self.socket)
        env.pop("TAGWIRE_NODE", None)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [str(self.binary), "daemon"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        end = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited with {self.proc.returncode}: {self.log_text()}")
            try:
                with tagwire.Client(socket=self.socket) as c:
                    c.ping()
                return
            except tagwire.DaemonUnreachable:
                if time.monotonic() > end:
                    raise RuntimeError(f"the daemon did not answer within 10 s: {self.log_text()}")
                time.sleep(0.02)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Stops the daemon process (SIGKILL by default: no clean-up)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def client(self, **kw) -> tagwire.Client:
        return tagwire.Client(socket=self.socket, **kw)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


@pytest.fixture(scope="session")
def tagwire_bin() -> Path:
    b = find_binary()
    if b is None:
        env = os.environ.get("TAGWIRE_BIN")
        reason = (
            f"TAGWIRE_BIN={env} is not an executable file"
            if env
            else "no tagwire binary: set TAGWIRE_BIN or build one with "
            f"`cargo build -p tagwire-cli` in {REPO}"
        )
        print(f"skipped: {reason}")
        pytest.skip(reason)
    return b


@pytest.fixture
def daemon(tagwire_bin: Path) -> Iterator[Daemon]:
    """A fresh daemon for the test, on a socket of its own."""
    d = Path(tempfile.mkdtemp(prefix="tw-py-"))
    dm = Daemon(tagwire_bin, d)
    try:
        yield dm
    finally:
        dm.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def client(daemon: Daemon) -> Iterator[tagwire.Client]:
    with daemon.client() as c:
        yield c


@pytest.fixture
def tag(client: tagwire.Client) -> str:
    """A fresh tag, created."""
    name = f"/test/{uuid.uuid4().hex[:12]}"
    client.create_tag(name)
    return name
