#!/bin/bash
# The A/B of the adaptive lead: two release binaries, 'before' (the commit
# before the lead followed lateness) and 'after' (with it and the gate's
# wake-up for a shorter step), alternated, one repetition each, no peers.
for v in before-1 after-1 before-2 after-2; do
  b=${v%-*}
  /tmp/tagwire-$b perf napa --rates 1G,100M --sizes 5000,20000,65536,200000 \
    --reps 1 --no-dds --no-peers --out /tmp/ab/$v > /tmp/ab/$v.log 2>&1
done
