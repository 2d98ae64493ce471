"""A Cyclone DDS writer that writes from its first moment, before any
reader has matched it: topic `Items`, type `Item` (items.py), reliable,
volatile; sample n (from 1) of instance 0 has text "n:m", m being the
last n written before the writer first saw a matched reader (0 until it
does). So a reader can tell whether it started where the writer matched
it. The first BURST samples go at once (discovery is still under way),
the rest PERIOD_MS apart.

Usage: python counter_writer.py DOMAIN COUNT PERIOD_MS BURST
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
    domain, count, period = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) / 1000.0
    burst = int(sys.argv[4])
    qos = Qos(
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=500)),
        Policy.History.KeepLast(64),
    )
    participant = DomainParticipant(domain)
    writer = DataWriter(participant, Topic(participant, "Items", Item), qos=qos)
    matched_at = 0
    for n in range(1, count + 1):
        if matched_at == 0 and writer.get_matched_subscriptions():
            matched_at = n - 1
            print(f"matched after {matched_at}", flush=True)
        writer.write(Item(id=0, text=f"{n}:{matched_at}"))
        if n > burst:
            time.sleep(period)
    print("done", flush=True)
    time.sleep(1.0)


if __name__ == "__main__":
    main()
