"""A Cyclone DDS reader of the keyed `Items` topic (see items_writer.py),
reliable, shared ownership. Prints a line per sample it takes:
`data <id> <text>` for data, `disposed <id>` when an instance is disposed;
exits after COUNT lines or TIMEOUT seconds.

Usage: python items_reader.py DOMAIN COUNT TIMEOUT
"""

import sys
import time

from cyclonedds.core import InstanceState, Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from items import Item


def main() -> None:
    domain, count, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    qos = Qos(
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
        Policy.History.KeepLast(16),
    )
    participant = DomainParticipant(domain)
    topic = Topic(participant, "Items", Item)
    reader = DataReader(participant, topic, qos=qos)
    got = 0
    until = time.monotonic() + timeout
    while got < count and time.monotonic() < until:
        for s in reader.take(N=16):
            info = s.sample_info
            if info.valid_data:
                print(f"data {s.id} {s.text}", flush=True)
            elif info.instance_state == InstanceState.NotAliveDisposed:
                # No data: the binding hands an InvalidSample with the key.
                print(f"disposed {s.key_sample.id}", flush=True)
            else:
                print(f"state {s.key_sample.id} {info.instance_state}", flush=True)
            got += 1
        time.sleep(0.01)


if __name__ == "__main__":
    main()
