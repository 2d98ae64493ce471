"""The hot-upgrade example across languages: Rust and Python builds of its
controller replace each other twenty times in a row under the Rust
consumer, which must see every control cycle once, in order, without a
gap over 1.5 periods.

Needs the example's Rust programs: ``$TAGWIRE_EXAMPLES`` (a directory
holding ``plant-sensor``, ``plant-consumer``, ``plant-controller``; the
Rust test runner sets it after building them), else skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

PERIOD_MS = 10
UPGRADES = 20
# Real-time where permitted (root: CI), as a plant's processes would run;
# on two cores a Python build's start-up otherwise delays the running
# build's cycles by milliseconds.
SCHED = "fifo:30"
CONTROLLER_PY = REPO / "examples" / "hot-upgrade" / "python" / "controller.py"


def programs() -> Path:
    d = os.environ.get("TAGWIRE_EXAMPLES")
    if not d or not (Path(d) / "plant-controller").is_file():
        pytest.skip("no $TAGWIRE_EXAMPLES with the hot-upgrade programs (cargo build -p tagwire-example-hot-upgrade)")
    return Path(d)


def field(line: str, key: str) -> str:
    for w in line.split():
        if w.startswith(key + "="):
            return w[len(key) + 1 :]
    raise AssertionError(f"no {key} in {line}")


def test_rust_and_python_builds_replace_each_other_losing_nothing(daemon):
    bin_dir = programs()
    env = dict(os.environ, TAGWIRE_SOCKET=daemon.socket)
    procs = []

    def start(args, out=False):
        p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE if out else subprocess.DEVNULL, text=True)
        procs.append(p)
        return p

    def controller(build: int, first: bool = False):
        if build % 2 == 0:
            args = [sys.executable, str(CONTROLLER_PY), "--build", str(build)]
        else:
            args = [str(bin_dir / "plant-controller"), "--build", str(build)]
        args += ["--period-ms", str(PERIOD_MS), "--sched", SCHED] + (["--first"] if first else [])
        p = start(args, out=True)
        line = p.stdout.readline()
        assert line.startswith("RUNNING "), line
        return p, int(field(line, "cycle"))

    try:
        start([str(bin_dir / "plant-sensor"), "--sched", SCHED])
        last = UPGRADES + 1
        consumer = start([str(bin_dir / "plant-consumer"), "--until-build", str(last), "--after", "50", "--sched", SCHED], out=True)
        assert consumer.stdout.readline().strip() == "READY"
        old, first_cycle = controller(1, first=True)
        assert first_cycle == 1
        starts = []
        for build in range(2, last + 1):
            time.sleep(0.15)
            new, first = controller(build)
            starts.append(first)
            assert old.wait(timeout=10) == 0, f"build {build - 1} failed"
            old = new
        out, _ = consumer.communicate(timeout=60)
        result = next(line for line in out.splitlines() if line.startswith("RESULT "))
        print(result)
        print("first cycles of builds 2..:", starts)
        for key in ("lost", "duplicated", "reordered", "reported_lost"):
            assert field(result, key) == "0", result
        assert field(result, "commands") == field(result, "last_cycle"), result
        assert field(result, "builds") == ",".join(str(b) for b in range(1, last + 1)), result
        assert int(field(result, "max_switch_gap_us")) <= PERIOD_MS * 1500, result
        assert int(field(result, "max_gap_us")) <= PERIOD_MS * 1500, result
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
