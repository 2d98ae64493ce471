#!/bin/bash
for v in before-1 after-1 before-2 after-2; do
  b=${v%-*}
  /tmp/tagwire-$b perf napa --rates 1G,100M --sizes 5000,65536,200000 --losses 0,1 \
    --reps 1 --no-dds --no-peers --out /tmp/ab/$v > /tmp/ab/$v.log 2>&1
done
echo done > /tmp/ab/DONE
