"""A Cyclone DDS writer of a keyed type, with Cyclone DDS's Python binding:
topic `Items`, type `Item` = { @key long id; string text; }, reliable.

Usage: python items_writer.py DOMAIN STRENGTH IDS COUNT PERIOD_MS [LINGER_S] [dispose=ID]

STRENGTH < 0: shared ownership; else exclusive with that strength (and
a 200 ms deadline offered). Writes COUNT rounds, each one sample of every
id in IDS (comma-separated), text "<strength>:<round>", PERIOD_MS apart;
then disposes ID if asked; then stays LINGER_S seconds (silent, alive)
before it exits. Prints "matched" once a reader matched.
"""

import sys
import time

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from items import Item


def main() -> None:
    domain, strength = int(sys.argv[1]), int(sys.argv[2])
    ids = [int(i) for i in sys.argv[3].split(",")]
    count, period = int(sys.argv[4]), int(sys.argv[5]) / 1000.0
    linger = float(sys.argv[6]) if len(sys.argv) > 6 else 1.0
    dispose = [int(a.split("=")[1]) for a in sys.argv[7:] if a.startswith("dispose=")]
    policies = [
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=500)),
        Policy.History.KeepLast(16),
    ]
    if strength >= 0:
        policies += [
            Policy.Ownership.Exclusive,
            Policy.OwnershipStrength(strength),
            Policy.Deadline(duration(milliseconds=200)),
        ]
    qos = Qos(*policies)
    participant = DomainParticipant(domain)
    topic = Topic(participant, "Items", Item)
    writer = DataWriter(participant, topic, qos=qos)
    until = time.monotonic() + 15
    while writer.get_matched_subscriptions() == [] and time.monotonic() < until:
        time.sleep(0.05)
    print("matched", flush=True)
    time.sleep(0.3)
    for r in range(count):
        for i in ids:
            writer.write(Item(id=i, text=f"{strength}:{r}"))
        time.sleep(period)
    for i in dispose:
        writer.dispose(Item(id=i, text=""))
    time.sleep(linger)


if __name__ == "__main__":
    main()
