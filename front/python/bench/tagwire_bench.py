#!/usr/bin/env python3
"""Benchmarks of the Python binding, for ``tagwire perf`` and by hand.

Round trip (the paper's sender and receiver, Figures 4-1 and 4-2): the ping
side sends a ``--size`` byte message on the data tag and waits for the pong
side to echo it on the ack tag, ``--rounds`` times after ``--warmup``
unmeasured ones, timing each round trip::

    tagwire_bench.py rtt --socket S --role pong --data /b/data --ack /b/ack &
    tagwire_bench.py rtt --socket S --role ping --data /b/data --ack /b/ack --rounds 2000
    tagwire_bench.py rtt --socket S --role both ...   # ping here, pong in a child process

``ping ...`` and ``pong ...`` are short for ``rtt --role ping|pong ...``: the
runner protocol of ``tagwire perf rtt --lang python`` (proof/perf/src/lang.rs).

The ping side prints one JSON line: the per-round-trip samples' median, p10
and p90 in microseconds (and mean, min, max), and every sample in
nanoseconds (``samples_ns``). ``--mode spin`` busy-polls
receives for up to 50 ms before sleeping, as ``tagwire perf rtt``'s spin
mode; ``--pin CPU`` pins the process (``both`` pins ping to CPU 0 and pong
to CPU 1 unless ``--pin none``), as ``tagwire perf`` does.

Throughput at a Python subscriber: receives ``--count`` messages with
``receive_batch`` and prints one JSON line ``{messages, seconds,
msgs_per_s, lost, ...}`` (seconds from the first message to the last)::

    tagwire_bench.py throughput-sub --socket S --tag /b/tp --count 2000000 --lossless &
    tagwire pub /b/tp --socket S --size 256 --rate 0 --count 2000000 --wait-receivers 1

``--access`` says what the subscriber does with each batch: ``count``
(nothing but count it), ``payloads`` (``batch.payloads()``: a ``bytes`` per
message) or ``messages`` (``for m in batch``: a ``Message`` per message).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import tagwire

STOP = b"\xffSTOP"


def pin(cpu: Optional[str]) -> None:
    if cpu not in (None, "none", ""):
        os.sched_setaffinity(0, {int(cpu)})


def percentile(sorted_us: List[float], q: float) -> float:
    """The ``q`` quantile (0..1) by the nearest rank, as tagwire-perf does."""
    if not sorted_us:
        return float("nan")
    i = min(len(sorted_us) - 1, max(0, round(q * (len(sorted_us) - 1))))
    return sorted_us[i]


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            sys.exit(f"tagwire_bench: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.005)


def busy_poll(mode: str) -> Optional[float]:
    return 0.05 if mode == "spin" else None


def rtt_pong(a: argparse.Namespace) -> None:
    """Echoes every message on the data tag back on the ack tag, until STOP."""
    pin(a.pin)
    with tagwire.Client(socket=a.socket) as tw:
        tw.create_tag(a.data, domain=a.domain)
        tw.create_tag(a.ack, domain=a.domain)
        with tw.subscribe(a.data, depth=64, busy_poll=busy_poll(a.mode)) as sub, tw.publisher(a.ack) as pub:
            buf = bytearray(max(a.size, len(STOP)) + 65536)
            view = memoryview(buf)
            receive_into, send = sub.receive_into, pub.send
            while True:
                try:
                    info = receive_into(buf, 60.0)
                except tagwire.Overflowed:
                    continue
                except (tagwire.TagDestroyed, tagwire.Timeout):
                    return
                n = info.length
                if n == len(STOP) and buf[:n] == STOP:
                    return
                send(view[:n])


def rtt_ping(a: argparse.Namespace) -> Dict[str, Any]:
    """Sends, waits for the echo, repeats; returns the summary."""
    pin(a.pin)
    with tagwire.Client(socket=a.socket) as tw:
        tw.create_tag(a.data, domain=a.domain)
        tw.create_tag(a.ack, domain=a.domain)
        with tw.subscribe(a.ack, depth=256, busy_poll=busy_poll(a.mode)) as acks, tw.publisher(a.data) as pub:
            wait_for(lambda: len(tw.receivers(a.data)) >= 1, "the pong side subscribing")
            wait_for(lambda: len(tw.senders(a.ack)) >= 1, "the pong side's send access")
            payload = bytes([0x5A]) * a.size
            buf = bytearray(a.size + 65536)
            send, receive_into, clock = pub.send, acks.receive_into, time.perf_counter_ns
            samples: List[int] = []
            append = samples.append
            for i in range(a.warmup + a.rounds):
                t0 = clock()
                send(payload)
                receive_into(buf, 10.0)
                t1 = clock()
                if i >= a.warmup:
                    append(t1 - t0)
            pub.send(STOP)
    us = sorted(s / 1000 for s in samples)
    return {
        "bench": "rtt",
        "lang": "python",
        "mode": a.mode,
        "size": a.size,
        "rounds": len(us),
        "median_us": round(statistics.median(us), 3),
        "p10_us": round(percentile(us, 0.10), 3),
        "p90_us": round(percentile(us, 0.90), 3),
        "mean_us": round(statistics.fmean(us), 3),
        "min_us": round(us[0], 3),
        "max_us": round(us[-1], 3),
        "samples_ns": samples,
    }


def rtt(a: argparse.Namespace) -> None:
    if a.role == "pong":
        rtt_pong(a)
        return
    child = None
    if a.role == "both":
        cpus = (None, None) if a.pin == "none" else (a.pin or "0", "1")
        a.pin = cpus[0]
        cmd = [
            sys.executable, os.path.abspath(__file__), "rtt", "--role", "pong",
            "--data", a.data, "--ack", a.ack, "--size", str(a.size), "--mode", a.mode,
            "--domain", a.domain, "--pin", cpus[1] or "none",
        ]  # fmt: skip
        if a.socket:
            cmd += ["--socket", a.socket]
        child = subprocess.Popen(cmd)
    try:
        print(json.dumps(rtt_ping(a)), flush=True)
    finally:
        if child is not None:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def throughput_sub(a: argparse.Namespace) -> None:
    """Receives ``count`` messages in batches; prints the rate."""
    pin(a.pin)
    with tagwire.Client(socket=a.socket) as tw:
        tw.create_tag(a.tag)
        sub = tw.subscribe(a.tag, depth=a.depth, lossless=a.lossless)
        print(f"subscribed to {a.tag}", file=sys.stderr, flush=True)
        got = 0
        overflows = 0
        batches = 0
        nbytes = 0
        first = last = 0.0
        receive_batch, clock, mx = sub.receive_batch, time.perf_counter, a.max
        access = a.access
        while got < a.count:
            try:
                b = receive_batch(mx, a.timeout)
            except tagwire.Overflowed:
                overflows += 1
                continue
            except tagwire.Timeout:
                break
            if not got:
                first = clock()
            if access == "payloads":
                nbytes += sum(map(len, b.payloads()))
            elif access == "messages":
                for m in b:
                    nbytes += len(m.payload)
            got += len(b)
            batches += 1
            last = clock()
        seconds = last - first
        out = {
            "bench": "throughput-sub",
            "lang": "python",
            "access": access,
            "lossless": a.lossless,
            "messages": got,
            "seconds": round(seconds, 6),
            "msgs_per_s": round(got / seconds, 1) if seconds > 0 else 0.0,
            "lost": sub.lost,
            "overflow_reports": overflows,
            "batches": batches,
            "mean_batch": round(got / batches, 1) if batches else 0,
        }
        sub.close()
    print(json.dumps(out), flush=True)


def warm_up(tw: "tagwire.Client", data: str, n: int) -> None:
    """Sends ``n`` integers to this process through a private tag, untimed
    (the runner protocol's ``--warmup`` for sub-ints and pub-ints)."""
    if n <= 0:
        return
    tag = f"{data}/warmup-{os.getpid()}"
    tw.create_tag(tag, domain="local")
    try:
        with tw.subscribe(tag, lossless=True) as sub, tw.publisher(tag) as pub:
            sent = got = 0
            while got < n:
                while sent < n and sent - got < 128:
                    pub.send(sent.to_bytes(4, "little"))
                    sent += 1
                got += len(sub.receive_batch(1024, 60.0))
    finally:
        tw.destroy_tag(tag)


def sub_ints(a: argparse.Namespace) -> None:
    """Runner role ``sub-ints`` (proof/perf/src/lang.rs): a lossless
    subscriber takes ``--count`` messages whose first 4 bytes are the
    integers 0..N-1, in batches, and prints when the first and the last
    arrived (CLOCK_MONOTONIC ns). Each batch is checked at both ends: its
    integers and its publisher sequence numbers must run on without a gap."""
    with tagwire.Client(socket=a.socket) as tw:
        tw.create_tag(a.data)
        warm_up(tw, a.data, a.warmup)
        sub = tw.subscribe(a.data, lossless=True)
        got = first = last = 0
        clock, receive_batch = time.monotonic_ns, sub.receive_batch
        while got < a.count:
            b = receive_batch(1024, 60.0)
            n = len(b)
            if not got:
                first = clock()
            head, tail = b[0], b[n - 1]
            if (
                int.from_bytes(head.payload[:4], "little") != got
                or int.from_bytes(tail.payload[:4], "little") != got + n - 1
                or tail.seq - head.seq != n - 1
            ):
                raise SystemExit(f"sub-ints: batch of {n} at {got} is not the integers {got}..{got + n - 1}")
            got += n
            last = clock()
        print(json.dumps({"lang": "python", "first_ns": first, "last_ns": last, "received": got, "lost": sub.lost}), flush=True)
        sub.close()


def pub_ints(a: argparse.Namespace) -> None:
    """Runner role ``pub-ints``: once the tag has a receiver, sends
    ``--count`` integers flat out, padded to ``--size`` bytes."""
    with tagwire.Client(socket=a.socket) as tw:
        tw.create_tag(a.data)
        warm_up(tw, a.data, a.warmup)
        with tw.publisher(a.data) as pub:
            pub.set_send_timeout(60.0)
            wait_for(lambda: bool(tw.receivers(a.data)), "a receiver")
            pad = bytes(max(a.size, 4) - 4)
            send, clock = pub.send, time.monotonic_ns
            start = clock()
            for i in range(a.count):
                send(i.to_bytes(4, "little") + pad)
            end = clock()
        print(json.dumps({"lang": "python", "start_ns": start, "end_ns": end}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = ap.add_subparsers(dest="bench", required=True)
    for name in ("rtt", "ping", "pong"):
        r = sp.add_parser(name, help="round trip, the paper's sender/receiver" if name == "rtt" else f"rtt --role {name}")
        r.add_argument("--socket", default=None)
        r.add_argument("--size", type=int, default=256)
        r.add_argument("--rounds", type=int, default=2000)
        r.add_argument("--warmup", type=int, default=200)
        if name == "rtt":
            r.add_argument("--role", choices=["ping", "pong", "both"], default="both")
        r.add_argument("--data", default=f"/bench/py/{os.getpid()}/data")
        r.add_argument("--ack", default=f"/bench/py/{os.getpid()}/ack")
        r.add_argument("--mode", choices=["block", "spin"], default="block")
        r.add_argument("--domain", choices=["local", "global"], default="local")
        r.add_argument("--pin", default=None, help="CPU to pin to, or none")
    t = sp.add_parser("throughput-sub", help="messages per second at a Python subscriber")
    t.add_argument("--socket", default=None)
    t.add_argument("--tag", required=True)
    t.add_argument("--count", type=int, required=True)
    t.add_argument("--lossless", action="store_true")
    t.add_argument("--depth", type=int, default=256)
    t.add_argument("--max", type=int, default=1024, help="messages per receive_batch at most")
    t.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for a batch")
    t.add_argument("--access", choices=["count", "payloads", "messages"], default="count")
    t.add_argument("--pin", default=None)
    for name in ("sub-ints", "pub-ints"):
        r = sp.add_parser(name, help=f"runner role {name} (tagwire perf table2)")
        r.add_argument("--socket", default=None)
        r.add_argument("--data", required=True)
        r.add_argument("--count", type=int, required=True)
        r.add_argument("--warmup", type=int, default=0)
        r.add_argument("--size", type=int, default=4)
    a = ap.parse_args()
    if a.bench == "sub-ints":
        return sub_ints(a)
    if a.bench == "pub-ints":
        return pub_ints(a)
    if a.bench in ("ping", "pong"):
        a.role = a.bench
    if a.bench in ("rtt", "ping", "pong"):
        rtt(a)
    else:
        throughput_sub(a)


if __name__ == "__main__":
    main()
