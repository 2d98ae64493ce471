#!/bin/bash
mkdir -p /tmp/ab2
for v in after-1 lead-1 after-2 lead-2; do
  b=${v%-*}
  /tmp/tagwire-$b perf napa --rates 100M,1G --sizes 5000,65536,200000 --losses 0 \
    --reps 1 --no-dds --no-peers --out /tmp/ab2/$v > /tmp/ab2/$v.log 2>&1
done
echo done > /tmp/ab2/DONE
