"""Helpers shared by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Callable, Optional

import pytest


def wait_until(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Polls ``cond`` every 10 ms; fails the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            pytest.fail(f"watchdog: {what} never became true within {timeout} s")
        time.sleep(0.01)


def python_script(code: str, *args: str, env: Optional[dict] = None) -> subprocess.Popen:
    """Runs ``code`` in a new Python process (this interpreter) with ``args``."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=dict(os.environ, **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
