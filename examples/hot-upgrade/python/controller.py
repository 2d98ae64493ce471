#!/usr/bin/env python3
"""A controller build of the hot-upgrade example, in Python.

The same handshake and wire format as the Rust ``plant-controller``, so a
Python build can replace a Rust one and the other way round:

    python controller.py --build 2            # replaces the running build
    python controller.py --build 1 --first    # runs from cycle 1

Prints ``RUNNING build=B cycle=C`` when it starts publishing and
``DONE build=B`` when it has handed over to a newer build.
"""

from __future__ import annotations

import argparse
import os
import queue
import struct
import sys
import threading
import time

import tagwire

SENSOR_TAG = "/plant/sensor"
COMMAND_TAG = "/plant/command"
UPGRADE_TAG = "/plant/controller-upgrade"

COMMAND = struct.Struct("<BQdI")  # kind 1, cycle, value, build
HELLO = struct.Struct("<BI")  # kind 2, build
HANDOVER = struct.Struct("<BIIQ")  # kind 3, from, to, at
LAST = struct.Struct("<BIIQdI")  # kind 4, from, to, at, state, lead (µs)
NOTICE = 5  # cycles of notice a running build gives its successor


def control(state: float, setpoint: float, sensor: float) -> tuple[float, float]:
    """The law (as the Rust build's): returns (new state, command)."""
    error = setpoint - sensor
    state += 0.01 * error
    return state, 0.5 * error + state


def decode(b: bytes):
    """An upgrade message as a tuple (kind, fields...), or None."""
    for kind, s in ((2, HELLO), (3, HANDOVER), (4, LAST)):
        if len(b) == s.size and b[0] == kind:
            return s.unpack(b)
    return None


def reader(sub, q: queue.Queue, what: str) -> None:
    while True:
        try:
            m = sub.receive()
        except tagwire.Overflowed:
            continue  # counted by the subscription; the next one comes
        except tagwire.Error:
            return
        q.put((what, m.payload))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=int, required=True)
    ap.add_argument("--first", action="store_true")
    ap.add_argument("--period-ms", type=float, default=10.0)
    ap.add_argument("--socket", default=None)
    ap.add_argument("--sched", default=None, help="fifo:P to run at SCHED_FIFO priority P")
    a = ap.parse_args()
    if a.sched:
        # Before any thread starts: they inherit it.
        policy, _, prio = a.sched.partition(":")
        try:
            if policy != "fifo":
                raise ValueError(f"--sched takes fifo:P, not {a.sched!r}")
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(prio)))
        except (PermissionError, ValueError) as e:
            print(f"warning: running at the default policy: {e}", file=sys.stderr)
    period = a.period_ms / 1000.0
    tw = tagwire.Client(socket=a.socket)
    for tag in (SENSOR_TAG, COMMAND_TAG, UPGRADE_TAG):
        tw.create_tag(tag)
    # The rights first, the handshake after.
    q: queue.Queue = queue.Queue()
    sensor = tw.subscribe(SENSOR_TAG)
    upgrades = tw.subscribe(UPGRADE_TAG)
    commands = tw.publisher(COMMAND_TAG)
    say = tw.publisher(UPGRADE_TAG)
    for sub, what in ((sensor, "sensor"), (upgrades, "upgrade")):
        threading.Thread(target=reader, args=(sub, q, what), daemon=True).start()

    state, setpoint, reading = 0.0, 1.0, 0.0
    now = time.monotonic()
    phase = "running" if a.first else "waiting"
    nxt, due = 1, now  # the next cycle to publish, and when
    until = None  # (first cycle of the successor, its build)
    join_at, give_up = None, None
    next_hello = now
    announced = False
    while True:
        now = time.monotonic()
        if phase == "waiting" and now >= next_hello:
            say.send(HELLO.pack(2, a.build))
            next_hello = now + NOTICE * period
        wake = {"running": due, "joining": give_up, "waiting": next_hello}[phase]
        try:
            what, payload = q.get(timeout=max(0.0, wake - now))
        except queue.Empty:
            what, payload = None, None
        now = time.monotonic()
        if what == "sensor" and len(payload) >= 8:
            reading = struct.unpack_from("<d", payload)[0]
        elif what == "upgrade":
            m = decode(payload)
            if m is None:
                pass
            elif m[0] == 2 and phase == "running" and m[1] != a.build:
                if until is None:
                    until = (nxt + NOTICE, m[1])
                say.send(HANDOVER.pack(3, a.build, until[1], until[0]))
            elif m[0] == 3 and phase == "waiting" and m[2] == a.build:
                phase, join_at = "joining", m[3]
                give_up = now + (2 * NOTICE + 2) * period
            elif m[0] == 4 and phase == "joining" and m[2] == a.build and m[3] == join_at:
                # On the old build's schedule: cycle `at` is due `lead` after.
                lead = min(m[5] / 1e6, period)
                state, phase, nxt, due = m[4], "running", join_at, now + lead
        if phase == "joining" and now >= give_up:
            phase, nxt, due = "running", join_at, now
        while phase == "running" and now >= due:
            state, value = control(state, setpoint, reading)
            if not announced:
                announced = True
                print(f"RUNNING build={a.build} cycle={nxt}", flush=True)
            commands.send(COMMAND.pack(1, nxt, value, a.build))
            nxt += 1
            due += period
            if until is not None and nxt >= until[0]:
                lead_us = min(max(0, int((due - time.monotonic()) * 1e6)), 2**32 - 1)
                say.send(LAST.pack(4, a.build, until[1], until[0], state, lead_us))
                print(f"DONE build={a.build}", flush=True)
                return 0


if __name__ == "__main__":
    sys.exit(main())
