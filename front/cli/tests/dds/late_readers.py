"""Cyclone DDS readers of `Items` (items.py) that join a stream late:
reader A from the start; when A has taken JOIN samples, reader B in the
same participant and reader C in a participant of its own. All reliable,
volatile, KeepLast(64). Prints `joined <n>` (the last n A had taken),
then `<reader> <n>` per sample (the sample's text is "n"), and at the end
`lost <reader> <count>` from each reader's sample-lost status.

Usage: python late_readers.py DOMAIN JOIN SECONDS
"""

import sys
import time

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from items import Item


def main() -> None:
    domain, join, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    qos = Qos(
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
        Policy.History.KeepLast(64),
    )
    first = DomainParticipant(domain)
    topic = Topic(first, "Items", Item)
    readers = {"A": DataReader(first, topic, qos=qos)}
    taken = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for name, reader in list(readers.items()):
            for s in reader.take(N=64):
                if s.sample_info.valid_data:
                    print(f"{name} {s.text}", flush=True)
                    if name == "A":
                        taken = int(s.text)
        if taken >= join and "B" not in readers:
            print(f"joined {taken}", flush=True)
            readers["B"] = DataReader(first, topic, qos=qos)
            other = DomainParticipant(domain)
            readers["C"] = DataReader(other, Topic(other, "Items", Item), qos=qos)
        time.sleep(0.002)
    for name, reader in readers.items():
        print(f"lost {name} {reader.get_sample_lost_status().total_count}", flush=True)


if __name__ == "__main__":
    main()
