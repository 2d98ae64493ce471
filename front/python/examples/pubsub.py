#!/usr/bin/env python3
"""A publisher and a subscriber on one tag (the paper's sender and receiver).

    python pubsub.py sub /demo/chatter --count 10      # in one terminal
    python pubsub.py pub /demo/chatter --count 10      # in another
    python pubsub.py demo                              # both: sub in a child process

The subscriber prints each message's sequence number, sender (pid@node) and
latency; the publisher names nobody, yet the subscriber knows who sent what.
Every command takes ``--socket PATH`` (default ``$TAGWIRE_SOCKET`` or the
per-user default) and ``--autostart`` (start a daemon if none answers).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import tagwire


def publish(tw: tagwire.Client, tag: str, count: int, rate: float, receivers: int) -> None:
    """The sender: create the tag, get send access, send ``count`` messages."""
    tw.create_tag(tag)  # creating an existing tag is fine
    with tw.publisher(tag) as pub:  # send access; released on exit
        deadline = time.monotonic() + 30
        while len(tw.receivers(tag)) < receivers:  # wait for the subscribers
            if time.monotonic() > deadline:
                sys.exit(f"no {receivers} receivers on {tag} within 30 s")
            time.sleep(0.01)
        for i in range(1, count + 1):
            seq = pub.send(f"hello #{i} from {tw.me}".encode())
            print(f"sent seq={seq}", flush=True)
            if rate > 0:
                time.sleep(1 / rate)


def subscribe(tw: tagwire.Client, tag: str, count: int, timeout: float) -> None:
    """The receiver: subscribe and print ``count`` messages with their sender."""
    tw.create_tag(tag)
    with tw.subscribe(tag, depth=64) as sub:
        print(f"subscribed to {tag}", flush=True)
        for n, msg in enumerate(iter(lambda: sub.receive(timeout), None), start=1):
            latency_us = (time.time() - msg.timestamp) * 1e6
            print(
                f"seq={msg.seq} from={msg.sender} latency={latency_us:.0f}us "
                f"payload={msg.payload.decode(errors='replace')!r}",
                flush=True,
            )
            if n >= count:
                break


def demo(args: argparse.Namespace) -> None:
    """A subscriber process, then this process publishing to it."""
    cmd = [sys.executable, __file__, "sub", args.tag, "--count", str(args.count)]
    if args.socket:
        cmd += ["--socket", args.socket]
    child = subprocess.Popen(cmd)
    with connect(args) as tw:
        publish(tw, args.tag, args.count, args.rate, receivers=1)
    sys.exit(child.wait(timeout=30))


def connect(args: argparse.Namespace) -> tagwire.Client:
    return tagwire.Client(socket=args.socket, autostart=args.autostart)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="demo", choices=["pub", "sub", "demo"])
    ap.add_argument("tag", nargs="?", default="/demo/chatter")
    ap.add_argument("--count", type=int, default=5, help="messages to send or receive")
    ap.add_argument("--rate", type=float, default=20.0, help="messages per second (0: flat out)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds a receive may wait")
    ap.add_argument("--socket", default=None, help="the daemon's socket")
    ap.add_argument("--autostart", action="store_true", help="start a daemon if none answers")
    args = ap.parse_args()
    if args.command == "demo":
        demo(args)
        return
    with connect(args) as tw:
        if args.command == "pub":
            publish(tw, args.tag, args.count, args.rate, receivers=0)
        else:
            subscribe(tw, args.tag, args.count, args.timeout)


if __name__ == "__main__":
    main()
