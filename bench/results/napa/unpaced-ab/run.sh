#!/bin/bash
for v in before-1 head-1 before-2 head-2; do
  b=${v%-*}
  /tmp/tagwire-$b perf throughput --remote --size 256,8192 --paced 0 --reps 3 --no-dds \
    --out /tmp/ab3/$v > /tmp/ab3/$v.log 2>&1
done
echo done > /tmp/ab3/DONE
