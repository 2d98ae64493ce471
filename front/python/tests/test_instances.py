"""Keyed messages from Python: keys, instance states and strength reach the
subscriber; exclusive ownership, deadlines and minimum separation per
instance."""

from __future__ import annotations

import time

import pytest

import tagwire

T = 5.0  # seconds: a receive that should succeed at once


def key16(k: bytes) -> bytes:
    """What a key of at most 16 bytes becomes: itself, zero-padded."""
    return k + bytes(16 - len(k))


def test_keys_states_and_strength_reach_the_subscriber(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    pub.send(b"plain")
    pub.send_keyed(b"robot-7", b"pose")
    pub.set_strength(30)
    pub.send_keyed(bytearray(b"robot-8"), memoryview(b"twist"))
    pub.dispose(b"robot-7")
    pub.unregister(b"robot-8")
    long_key = b"k" * 40
    pub.send_keyed(long_key, b"x")

    m = sub.receive(T)
    assert (m.payload, m.key, m.state, m.strength) == (b"plain", None, "alive", None)
    m = sub.receive(T)
    assert (m.payload, m.key, m.state, m.strength) == (b"pose", key16(b"robot-7"), "alive", None)
    m = sub.receive(T)
    assert (m.payload, m.key, m.state, m.strength) == (b"twist", key16(b"robot-8"), "alive", 30)
    m = sub.receive(T)
    assert (m.payload, m.key, m.state) == (b"", key16(b"robot-7"), "disposed")
    # receive_into reports the same through MessageInfo.
    buf = bytearray(64)
    info = sub.receive_into(buf, T)
    assert (info.length, info.key, info.state, info.strength) == (0, key16(b"robot-8"), "unregistered", 30)
    m = sub.receive(T)
    # A key longer than 16 bytes travels as its MD5 (a DDS key hash).
    import hashlib

    assert m.key == hashlib.md5(long_key).digest()


def test_an_exclusive_subscriber_takes_each_instance_from_its_strongest_publisher(client, tag):
    sub = client.subscribe(tag, exclusive=True)
    weak, strong = client.publisher(tag), client.publisher(tag)
    weak.set_strength(10)
    strong.set_strength(20)
    weak.send_keyed(b"a", b"weak-1")
    strong.send_keyed(b"a", b"strong-1")
    weak.send_keyed(b"a", b"weak-2")  # not the owner: dropped
    weak.send_keyed(b"b", b"weak-b")  # another instance: its own owner
    strong.unregister(b"a")  # the owner gives up: the next one takes over
    weak.send_keyed(b"a", b"weak-3")
    got = []
    while len(got) < 5:
        m = sub.receive(T)
        got.append((m.payload, m.state))
    assert got == [
        (b"weak-1", "alive"),
        (b"strong-1", "alive"),
        (b"weak-b", "alive"),
        (b"", "unregistered"),
        (b"weak-3", "alive"),
    ]
    with pytest.raises(tagwire.Timeout):
        sub.receive(0.2)


def test_a_missed_deadline_is_raised_for_the_silent_instance(client, tag):
    sub = client.subscribe(tag, deadline=0.2)
    pub = client.publisher(tag)
    pub.send_keyed(b"quiet", b"1")
    assert sub.receive(T).payload == b"1"
    start = time.monotonic()
    with pytest.raises(tagwire.DeadlineMissed) as e:
        sub.receive(T)
    assert 0.15 <= time.monotonic() - start < 3
    assert e.value.key == key16(b"quiet") and e.value.tag == tag
    # The subscription goes on.
    pub.send_keyed(b"quiet", b"2")
    assert sub.receive(T).payload == b"2"


def test_minimum_separation_keeps_the_newest_of_each_interval(client, tag):
    sub = client.subscribe(tag, min_separation=0.3)
    pub = client.publisher(tag)
    for i in range(5):
        pub.send_keyed(b"k", b"%d" % i)
    assert sub.receive(T).payload == b"0"  # the first at once
    assert sub.receive(T).payload == b"4"  # then the newest at the interval's end
    with pytest.raises(tagwire.Timeout):
        sub.receive(0.5)


@pytest.mark.parametrize("bad", [{"deadline": 0}, {"min_separation": -1.0}])
def test_instance_options_are_checked(client, tag, bad):
    with pytest.raises(ValueError):
        client.subscribe(tag, **bad)


def test_a_publisher_is_told_which_instances_it_left_past_its_offered_deadline(client, tag):
    pub = client.publisher(tag)
    assert pub.missed_deadlines() == []
    pub.offer_deadline(0.05)
    start = time.monotonic()
    pub.send_keyed(b"quiet", b"q")
    while time.monotonic() - start < 0.18:
        pub.send_keyed(b"busy", b"b")
        time.sleep(0.01)
    missed = pub.missed_deadlines()
    # At most one per whole period gone by (fewer if this thread was held
    # up past a period: the exact count is a Rust unit test's).
    periods = int((time.monotonic() - start) / 0.05)
    assert 1 <= len(missed) <= periods, (missed, periods)
    assert all(k == key16(b"quiet") for k in missed)
    pub.offer_deadline(None)
    assert pub.missed_deadlines() == []
