"""A ROS 2 listener as ROS 2 puts it on the wire, with Cyclone DDS's Python
binding: topic `rt/chatter`, type `std_msgs::msg::dds_::String_`, reliable,
keep last 7; volatile, or transient-local (a late joiner that gets what the
writer kept). Prints each string it reads, one per line, and exits after
COUNT of them or TIMEOUT seconds.

Usage: python ros2_listener.py DOMAIN COUNT TIMEOUT [transient-local]
"""

import sys
import time
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


def main() -> None:
    domain, count, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    durable = len(sys.argv) > 4 and sys.argv[4] == "transient-local"
    participant = DomainParticipant(domain)
    qos = Qos(
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
        Policy.Durability.TransientLocal if durable else Policy.Durability.Volatile,
        Policy.History.KeepLast(7),
    )
    topic = Topic(participant, "rt/chatter", String_)
    reader = DataReader(participant, topic, qos=qos)
    got = 0
    until = time.monotonic() + timeout
    while got < count and time.monotonic() < until:
        for sample in reader.take(N=16):
            print(sample.data, flush=True)
            got += 1
        time.sleep(0.01)


if __name__ == "__main__":
    main()
