"""The example and the benchmark script run and say what they should."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import PACKAGE

EXAMPLE = PACKAGE / "examples" / "pubsub.py"
BENCH = PACKAGE / "bench" / "tagwire_bench.py"


def run(args, timeout=60, **kw):
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def test_the_pubsub_example_publishes_to_its_subscriber_process(daemon):
    r = run([EXAMPLE, "demo", "/example/chatter", "--count", "5", "--rate", "200", "--socket", daemon.socket])
    assert r.returncode == 0, r.stderr
    got = re.findall(r"seq=(\d+) from=(\d+)@127\.0\.0\.1 latency=\d+us payload='hello #(\d+)", r.stdout)
    assert [int(s) for s, _, _ in got] == [1, 2, 3, 4, 5], r.stdout
    assert {int(pid) for _, pid, _ in got} == {int(re.search(r"from (\d+)@", r.stdout).group(1))}
    assert int(got[0][1]) != os.getpid()
    assert r.stdout.count("sent seq=") == 5


def test_the_pubsub_example_pub_and_sub_commands(daemon):
    sub = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "sub", "/example/two", "--count", "3", "--socket", daemon.socket],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert sub.stdout is not None
    assert sub.stdout.readline().startswith("subscribed")
    r = run([EXAMPLE, "pub", "/example/two", "--count", "3", "--rate", "0", "--socket", daemon.socket])
    assert r.returncode == 0, r.stderr
    out, _ = sub.communicate(timeout=30)
    assert sub.returncode == 0
    assert len(re.findall(r"^seq=\d+ from=", out, re.M)) == 3


def test_the_rtt_benchmark_prints_one_json_line(daemon):
    r = run([BENCH, "rtt", "--socket", daemon.socket, "--role", "both", "--rounds", "200", "--warmup", "20", "--pin", "none"])
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.strip().splitlines()
    res = json.loads(line)
    assert res["rounds"] == 200 and res["size"] == 256
    assert 0 < res["p10_us"] <= res["median_us"] <= res["p90_us"]


def test_the_rtt_benchmark_ping_and_pong_processes(daemon):
    tags = ["--data", "/bench/d", "--ack", "/bench/a", "--socket", daemon.socket]
    pong = subprocess.Popen([sys.executable, str(BENCH), "rtt", "--role", "pong", *tags])
    r = run([BENCH, "rtt", "--role", "ping", "--rounds", "100", "--warmup", "10", "--size", "64", *tags])
    assert r.returncode == 0, r.stderr
    assert pong.wait(timeout=30) == 0
    assert json.loads(r.stdout)["size"] == 64


def test_the_rtt_benchmark_speaks_the_perf_runner_protocol(daemon):
    """``tagwire perf rtt --lang python`` runs ``SCRIPT pong|ping --socket S
    --data D --ack A [--size N --rounds R --warmup W]`` and reads
    ``samples_ns`` from the last JSON line (proof/perf/src/lang.rs)."""
    common = ["--socket", daemon.socket, "--data", "/lang/d", "--ack", "/lang/a"]
    pong = subprocess.Popen([sys.executable, str(BENCH), "pong", *common], stdout=subprocess.DEVNULL)
    r = run([BENCH, "ping", *common, "--size", "256", "--rounds", "50", "--warmup", "5"])
    assert r.returncode == 0, r.stderr
    assert pong.wait(timeout=30) == 0
    last = [line for line in r.stdout.splitlines() if line.startswith("{")][-1]
    res = json.loads(last)
    assert res["lang"] == "python" and res["size"] == 256
    assert len(res["samples_ns"]) == 50 and all(isinstance(x, int) and x > 0 for x in res["samples_ns"])


def test_the_throughput_benchmark_counts_a_lossless_stream(daemon, tagwire_bin):
    n = 20000
    sub = subprocess.Popen(
        [sys.executable, str(BENCH), "throughput-sub", "--socket", daemon.socket, "--tag", "/bench/tp",
         "--count", str(n), "--lossless", "--access", "payloads"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    pub = subprocess.run(
        [str(tagwire_bin), "pub", "/bench/tp", "--socket", daemon.socket, "--size", "256", "--rate", "0",
         "--count", str(n), "--wait-receivers", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert pub.returncode == 0, pub.stderr
    out, err = sub.communicate(timeout=60)
    assert sub.returncode == 0, err
    res = json.loads(out)
    assert res["messages"] == n and res["lost"] == 0
    assert res["msgs_per_s"] > 0
