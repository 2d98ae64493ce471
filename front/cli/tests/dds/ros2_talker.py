"""A ROS 2 talker as ROS 2 puts it on the wire, with Cyclone DDS's Python
binding (the PyPI package `cyclonedds`) and no ROS 2 installed: topic
`rt/chatter`, type `std_msgs::msg::dds_::String_` (one string field),
reliable, volatile, keep last 7 (ROS 2's default QoS).

Usage: python ros2_talker.py DOMAIN COUNT
"""

import sys
import time
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


def main() -> None:
    domain, count = int(sys.argv[1]), int(sys.argv[2])
    participant = DomainParticipant(domain)
    qos = Qos(
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
        Policy.Durability.Volatile,
        Policy.History.KeepLast(7),
    )
    topic = Topic(participant, "rt/chatter", String_, qos=qos)
    writer = DataWriter(participant, topic, qos=qos)
    for i in range(count):
        writer.write(String_(data=f"Hello World: {i}"))
        time.sleep(0.1)


if __name__ == "__main__":
    main()
