#!/usr/bin/env python3
"""Medians over rounds of remote throughput, pacing off and on (run.sh)."""
import json, pathlib, statistics, sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/napa/plain")
vals = {}
for d in sorted(root.glob("*-*")):
    if not d.is_dir():
        continue
    mode = d.name.split("-")[0]
    for line in (d / "throughput-remote.json").read_text().splitlines():
        r = json.loads(line)
        if r.get("system", "").startswith("tagwire") or r.get("system") == "raw-udp":
            key = (r["system"], r["size"])
            vals.setdefault(key, {}).setdefault(mode, []).append(r["msgs_per_s"])
print("| system | size | off, by round (msg/s) | on, by round | off median | on median | on/off |")
print("|---|---|---|---|---|---|---|")
for (system, size), m in sorted(vals.items()):
    off, on = m.get("off", []), m.get("on", [])
    if not off or not on:
        continue
    mo, mn = statistics.median(off), statistics.median(on)
    fmt = lambda v: ", ".join(f"{x/1e3:.0f}k" for x in v)
    print(f"| {system} | {size} | {fmt(off)} | {fmt(on)} | {mo/1e3:.0f}k | {mn/1e3:.0f}k | {mn/mo:.3f} |")
