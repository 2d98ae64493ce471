#!/usr/bin/env bash
# BIN_DIR: the directory holding the two release binaries, tagwire-before
# (ef14048) and tagwire-after (955c313).
BIN_DIR=${BIN_DIR:?set BIN_DIR to the directory of tagwire-before and tagwire-after}
# Alternated A/B of two tagwire binaries: before (ef14048) and after (955c313).
set -u
out=bench/results/thinning/ab
mkdir -p $out
for round in 1 2 3 4; do
  if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for b in $order; do
    bin="$BIN_DIR/tagwire-$b"
    d=$out/$b-$round
    mkdir -p $d
    $bin perf rtt --sizes 256 --modes block,spin --reps 9 --no-dds --no-peers --out $d > $d/rtt.log 2>&1
    $bin perf remote-rtt --sizes 256 --reps 9 --no-dds --no-peers --out $d > $d/remote-rtt.log 2>&1
    $bin perf throughput --size 256,8192 --paced 0 --reps 3 --no-dds --no-peers --out $d > $d/throughput.log 2>&1
    $bin perf throughput --remote --size 256,8192 --paced 0 --reps 3 --no-dds --no-peers --out $d > $d/throughput-remote.log 2>&1
    echo "round $round $b done $(date +%T)"
  done
done
echo ALLDONE
