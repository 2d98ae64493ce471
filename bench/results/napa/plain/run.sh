#!/usr/bin/env bash
# Remote throughput on the plain veth link, pacing off and on, three
# alternated rounds, into bench/results/napa/plain/{off,on}-N.
set -u
bin=${BIN:-target/release/tagwire}
for round in 1 2 3; do
  for p in off on; do
    f=; [ $p = on ] && f=--pacing
    $bin perf throughput --remote --size 256,8192 --paced 0 --reps 3 --no-dds $f \
      --out bench/results/napa/plain/$p-$round > bench/results/napa/plain/$p-$round.log 2>&1
  done
done
