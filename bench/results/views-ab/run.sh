#!/usr/bin/env bash
# Alternated A/B of two tagwire release binaries in BIN_DIR: tagwire-before
# (c05b6b1) and tagwire-after (8f3a10f: data-path datagrams read through
# checked views). Remote paths only: no datagram is decoded on a local one.
BIN_DIR=${BIN_DIR:?set BIN_DIR to the directory of tagwire-before and tagwire-after}
set -u
out=bench/results/views-ab
for round in ${ROUNDS:-1 2 3 4 5 6}; do
  if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for b in $order; do
    bin="$BIN_DIR/tagwire-$b"
    d=$out/$b-$round
    mkdir -p $d
    $bin perf remote-rtt --sizes 256 --reps 9 --no-dds --no-peers --out $d > $d/remote-rtt.log 2>&1
    $bin perf throughput --remote --size 256,8192 --paced 0 --reps 3 --no-dds --no-peers --out $d > $d/throughput-remote.log 2>&1
    echo "round $round $b done $(date +%T)"
  done
done
echo ALLDONE
