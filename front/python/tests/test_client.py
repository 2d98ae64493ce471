"""Client calls: tags, members, history, options, and the error kinds."""

from __future__ import annotations

import os
import threading
import time

import pytest

import tagwire
from _util import wait_until

T = 5.0


def test_create_tag_is_idempotent_and_tags_lists_it(client):
    assert client.create_tag("/robot/laser") is True
    assert client.create_tag("/robot/laser") is False
    assert client.create_tag("/robot/local", domain="local", slots=16, slot_payload=512) is True
    tags = {t.name: t for t in client.tags()}
    assert tags["/robot/laser"].domain == "global"
    assert tags["/robot/local"].domain == "local"
    with pytest.raises(ValueError, match="domain"):
        client.create_tag("/x", domain="planet")


def test_ring_shape_bounds_depth_and_the_fast_path(client):
    client.create_tag("/small", slots=16, slot_payload=256)
    pub = client.publisher("/small")
    assert 200 <= pub.max_fast_message <= 256
    sub = client.subscribe("/small", depth=16)
    # Larger than a slot: the daemon's large-message path, same call.
    pub.send(b"L" * 10_000)
    assert sub.receive(T).payload == b"L" * 10_000


def test_senders_and_receivers_list_the_right_pids(client, tag):
    assert client.senders(tag) == [] and client.receivers(tag) == []
    pub = client.publisher(tag)
    sub = client.subscribe(tag)
    (s,) = client.senders(tag)
    (r,) = client.receivers(tag)
    assert isinstance(s, tagwire.Member)
    assert s.pid == os.getpid() and r.pid == os.getpid()
    assert s.node == "127.0.0.1"
    assert s.sender == client.me
    assert abs(s.since - time.time()) < 60 and s.since_unix_ns > 0
    (info,) = [t for t in client.tags() if t.name == tag]
    assert [m.pid for m in info.senders] == [os.getpid()]
    assert [m.pid for m in info.receivers] == [os.getpid()]
    pub.close()
    sub.close()
    wait_until(lambda: client.senders(tag) == [] and client.receivers(tag) == [], what="release")


def test_me_ping_nodes(client):
    me = client.me
    assert me.pid == os.getpid() and me.node == "127.0.0.1"
    assert client.ping() is None
    nodes = client.nodes()
    assert nodes and nodes[0].state == "up" and nodes[0].node == "127.0.0.1"


def test_set_history_then_pull(client, tag):
    client.set_history(tag, 100)
    pub = client.publisher(tag)
    for i in range(10):
        pub.send(b"h%d" % i)
    wait_until(lambda: len(client.pull(tag, tagwire.Last(100))) == 10, what="history filled")
    last = client.pull(tag, tagwire.Last(3))
    assert [m.payload for m in last] == [b"h7", b"h8", b"h9"]
    assert [m.seq for m in last] == [8, 9, 10]
    assert all(m.sender.pid == os.getpid() for m in last)
    assert [m.seq for m in client.pull(tag, tagwire.Since(9))] == [9, 10]
    ts = [m.timestamp_ns for m in client.pull(tag, tagwire.Last(10))]
    between = client.pull(tag, tagwire.Between(ts[2], ts[4]))
    assert [m.seq for m in between] == [3, 4, 5]
    with pytest.raises(TypeError, match="Last"):
        client.pull(tag, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tagwire.Between(10, 1)
    assert tagwire.Last(3) == tagwire.Last(3) and repr(tagwire.Since(4)) == "Since(4)"


def test_a_late_subscriber_gets_history_then_live_messages(client):
    client.create_tag("/pose", history_depth=50)
    pub = client.publisher("/pose")
    for i in range(20):
        pub.send(b"old%d" % i)
    wait_until(lambda: len(client.pull("/pose", tagwire.Last(50))) == 20, what="history filled")
    sub = client.subscribe("/pose", history=tagwire.Last(5))
    pub.send(b"live")
    got = [sub.receive(T) for _ in range(6)]
    assert [m.seq for m in got] == [16, 17, 18, 19, 20, 21]
    assert got[-1].payload == b"live"
    with pytest.raises(tagwire.Timeout):
        sub.receive(0.05)


def test_every_nth_best_effort_gives_only_multiples(client, tag):
    sub = client.subscribe(tag, every=10, reliability="best_effort", depth=256)
    all_ = client.subscribe(tag, depth=256)
    pub = client.publisher(tag)
    for i in range(1, 101):
        pub.send(b"%d" % i)
    got = sub.receive_batch(timeout=T)
    assert got.seqs() == list(range(10, 101, 10))
    assert len(all_.receive_batch(timeout=T)) == 100
    with pytest.raises(tagwire.Timeout):
        sub.receive(0.05)
    assert sub.lost == 0


def test_subscribe_option_errors(client, tag):
    with pytest.raises(ValueError, match="reliability"):
        client.subscribe(tag, reliability="sometimes")
    with pytest.raises(ValueError, match="carrier"):
        client.subscribe(tag, carrier="pigeon")
    with pytest.raises(ValueError, match="neither"):
        client.subscribe(tag, proxy="host-7")
    with pytest.raises(ValueError, match="delay_bound"):
        client.subscribe(tag, proxy="publisher", delay_bound=0.01)
    with pytest.raises(ValueError, match="depth"):
        client.subscribe(tag, depth=0)
    with pytest.raises(ValueError, match="priority"):
        client.subscribe(tag, priority="urgent")
    with pytest.raises(ValueError, match="priority"):
        client.subscribe(tag, priority="dscp:64")
    for bad in ("fifo", "fifo:0", "rr:100", "other:20", "idle"):
        with pytest.raises(ValueError, match="sched"):
            client.subscribe(tag, sched=bad)
    # Valid combinations subscribe (single node: same delivery either way).
    for kw in (
        dict(carrier="tcp"),
        dict(carrier="multicast"),
        dict(proxy="publisher", every=2),
        dict(proxy="10.0.0.7", every=2),
        dict(busy_poll=0.0001),
        dict(priority="low"),
        dict(priority="high"),
        dict(priority="critical"),
        dict(priority="dscp:18"),
        dict(sched="other:5"),
    ):
        client.subscribe(tag, **kw).close()


def test_a_real_time_policy_subscribes_where_permitted_and_is_refused_elsewhere(client, tag):
    if os.geteuid() == 0:
        sub = client.subscribe(tag, sched="fifo:10")
        client.publisher(tag).send(b"x")
        assert sub.receive(5).payload == b"x"
    else:
        with pytest.raises(tagwire.NotPermitted, match="CAP_SYS_NICE"):
            client.subscribe(tag, sched="fifo:10")


def test_a_subscriptions_class_changes_at_run_time(client, tag):
    sub = client.subscribe(tag)
    changed = client.set_channel_qos(tag, "critical")
    assert [m.pid for m in changed] == [os.getpid()]
    # The class it has already: nothing changes.
    assert client.set_channel_qos(tag, "critical") == []
    assert len(client.set_channel_qos(tag, "dscp:18", pid=os.getpid())) == 1
    with pytest.raises(tagwire.NotSubscribed):
        client.set_channel_qos(tag, "high", pid=1)
    with pytest.raises(ValueError, match="priority"):
        client.set_channel_qos(tag, "urgent")
    # The thread policy likewise.
    assert len(client.set_channel_sched(tag, "other:5")) == 1
    assert client.set_channel_sched(tag, "other:5") == []
    if os.geteuid() == 0:
        assert len(client.set_channel_sched(tag, "fifo:10")) == 1
    else:
        with pytest.raises(tagwire.NotPermitted):
            client.set_channel_sched(tag, "fifo:10")
    with pytest.raises(ValueError, match="sched"):
        client.set_channel_sched(tag, "rr:0")
    # Whose, on which node, both at once, or one kept.
    assert len(client.change_channels(tag, "all", "high", "other:3")) == 1
    assert client.change_channels(tag, "here", "high", "other:3") == []
    assert len(client.change_channels(tag, str(os.getpid()), sched="other:4")) == 1
    with pytest.raises(tagwire.NotSubscribed):
        client.change_channels(tag, "1@127.0.0.1", "low")
    # A daemon alone reaches no other node; a choice that is none.
    with pytest.raises(tagwire.Error, match="alone"):
        client.change_channels(tag, "@10.99.0.9", "low")
    with pytest.raises(ValueError, match="subscribers"):
        client.change_channels(tag, "x@node", "low")
    pub = client.publisher(tag)
    pub.send(b"x")
    assert sub.receive(5).payload == b"x"
    # A publisher's own class and policy.
    classed = client.publisher(tag, priority="critical", sched="other:2")
    classed.send(b"y")
    assert sub.receive(5).payload == b"y"
    with pytest.raises(ValueError, match="priority"):
        client.publisher(tag, priority="urgent")
    with pytest.raises(ValueError, match="sched"):
        client.publisher(tag, sched="rr:0")
    if os.geteuid() == 0:
        client.publisher(tag, sched="fifo:10").send(b"z")
        assert sub.receive(5).payload == b"z"
    else:
        with pytest.raises(tagwire.NotPermitted):
            client.publisher(tag, sched="fifo:10")


def test_a_publisher_asks_a_pacing_and_its_rights_change_at_run_time(client, tag):
    sub = client.subscribe(tag)
    paced = client.publisher(tag, pacing="fixed:2MB")
    # A change to what the publisher already asked changes nothing: the
    # option reached its right.
    assert client.change_pacing(tag, "fixed:2000000") == []
    changed = client.change_pacing(tag, "adaptive")
    assert [m.pid for m in changed] == [os.getpid()]
    assert client.change_pacing(tag, "adaptive", str(os.getpid())) == []
    assert len(client.change_pacing(tag, "off", "here")) == 1
    with pytest.raises(ValueError, match="pacing"):
        client.change_pacing(tag, "fixed:0")
    with pytest.raises(ValueError, match="pacing"):
        client.publisher(tag, pacing="quickly")
    # Its class and policy likewise.
    assert len(client.change_publishers(tag, priority="critical")) == 1
    assert client.change_publishers(tag, "all", "critical", "other") == []
    assert len(client.change_publishers(tag, sched="other:3")) == 1
    with pytest.raises(tagwire.NoSendAccess):
        client.change_publishers(tag, "1@127.0.0.1", "low")
    # Another publisher asking adaptive from the start.
    adaptive = client.publisher(tag, pacing="adaptive")
    assert len(client.change_pacing(tag, "off")) == 1
    paced.send(b"p")
    adaptive.send(b"a")
    assert sub.receive(5).payload == b"p"
    assert sub.receive(5).payload == b"a"


def test_error_unknown_tag_and_invalid_name(client):
    with pytest.raises(tagwire.UnknownTag) as e:
        client.publisher("/no/such/tag")
    assert "unknown tag /no/such/tag" in str(e.value)
    assert e.value.tag == "/no/such/tag"
    assert isinstance(e.value, LookupError)
    with pytest.raises(tagwire.UnknownTag):
        client.subscribe("/no/such/tag")
    for bad in ("robot", "", "/a//b", "/a/"):
        with pytest.raises(tagwire.InvalidName, match="tag name"):
            client.create_tag(bad)
    with pytest.raises(ValueError):  # InvalidName is a ValueError too
        client.publisher("nope")


def test_error_too_large(client, tag):
    pub = client.publisher(tag)
    big = bytearray(tagwire.MAX_MESSAGE + 1)  # zero pages: not touched
    with pytest.raises(tagwire.TooLarge) as e:
        pub.send(big)
    assert e.value.length == tagwire.MAX_MESSAGE + 1
    assert e.value.limit == tagwire.MAX_MESSAGE
    assert "exceeds the limit" in str(e.value)
    assert pub.last_seq == 0


def test_a_tag_destroyed_while_receiving_raises_tag_destroyed(client, tag):
    sub = client.subscribe(tag)
    pub = client.publisher(tag)
    errors = []

    def receiver():
        try:
            sub.receive(T)
        except tagwire.Error as e:
            errors.append(e)

    t = threading.Thread(target=receiver)
    t.start()
    time.sleep(0.2)
    client.destroy_tag(tag)
    t.join(T)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], tagwire.TagDestroyed)
    assert str(errors[0]) == f"tag {tag} was destroyed"
    with pytest.raises(tagwire.TagDestroyed):
        pub.send(b"x")
    with pytest.raises(tagwire.UnknownTag):
        client.destroy_tag(tag)


def test_overflow_reports_the_loss_count(client, tag):
    sub = client.subscribe(tag, depth=8)
    pub = client.publisher(tag)
    for i in range(50):
        pub.send(b"%d" % i)
    with pytest.raises(tagwire.Overflowed) as e:
        while True:
            sub.receive(T)
    assert e.value.lost > 0
    assert sub.lost == e.value.lost
    # The subscription stays valid.
    rest = sub.receive_batch(timeout=T)
    assert rest.seqs()[-1] == 50


def test_overflow_met_inside_a_batch_is_raised_by_the_next_call(client, tag):
    sub = client.subscribe(tag, depth=8)
    pub = client.publisher(tag)
    pub.send(b"first")
    held = bytearray(1)
    with pytest.raises(tagwire.BufferTooSmall):
        sub.receive_into(held, T)  # now held by the binding
    for i in range(50):
        pub.send(b"%d" % i)
    b = sub.receive_batch(timeout=T)
    assert b.payloads() == [b"first"]
    with pytest.raises(tagwire.Overflowed):
        sub.receive_batch(timeout=T)
    assert sub.receive_batch(timeout=T).seqs()[-1] == 51


def test_daemon_unreachable(tmp_path):
    with pytest.raises(tagwire.DaemonUnreachable) as e:
        tagwire.Client(socket=str(tmp_path / "none.sock"))
    assert "tagwire daemon" in str(e.value)
    assert isinstance(e.value, ConnectionError)
    assert e.value.socket.endswith("none.sock")


def test_every_exception_class_exists_and_derives_from_error():
    names = [
        "DaemonUnreachable", "DaemonTimeout", "UnknownTag", "TagDestroyed",
        "InvalidName", "NoSendAccess", "NotSubscribed", "TooLarge", "Overflowed",
        "WindowFull", "NoLosslessRoom", "DepthTooLarge", "Denied", "ForeignDaemon", "Quota",
        "Timeout", "PeersUnresponsive",
        "NoPlacement", "Refused", "IoError", "ProtocolError",
    ]  # fmt: skip
    for n in names:
        cls = getattr(tagwire, n)
        assert issubclass(cls, tagwire.Error) and issubclass(cls, Exception), n
    assert issubclass(tagwire.Timeout, TimeoutError)
    assert tagwire.Overflowed("x").lost == 0


def test_a_depth_beyond_the_rings_slots_is_a_typed_error(client, tag):
    tag += "/small"  # the fixture's tag exists already, with the default ring
    assert client.create_tag(tag, slots=16)
    with pytest.raises(tagwire.DepthTooLarge) as e:
        client.subscribe(tag, depth=17)
    assert (e.value.depth, e.value.limit, e.value.tag) == (17, 16, tag)
    assert "16 slots" in str(e.value)
    client.subscribe(tag, depth=16).close()
    # Unset, the depth fits the ring; 64 asked for is checked like any.
    client.subscribe(tag).close()
    with pytest.raises(tagwire.DepthTooLarge):
        client.subscribe(tag, depth=64)


def _children_named(name: str) -> set:
    """Pids of this process's children whose command is ``name``."""
    out = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if comm == name and ppid == os.getpid():
            out.add(int(d))
    return out


def test_autostart_starts_a_daemon_when_none_answers(tagwire_bin, monkeypatch):
    import shutil
    import signal
    import tempfile

    d = tempfile.mkdtemp(prefix="tw-auto-")
    sock = os.path.join(d, "tagwired.sock")
    monkeypatch.setenv("TAGWIRE_DAEMON", str(tagwire_bin))
    before = _children_named("tagwire")
    with pytest.raises(tagwire.DaemonUnreachable):
        tagwire.Client(socket=sock)  # autostart is off by default
    try:
        with tagwire.Client(socket=sock, autostart=True, timeout=5) as c:
            c.ping()
            assert c.create_tag("/auto") is True
    finally:
        for pid in _children_named("tagwire") - before:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        shutil.rmtree(d, ignore_errors=True)
