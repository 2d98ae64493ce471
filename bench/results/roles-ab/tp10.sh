#!/usr/bin/env bash
# Ten alternated rounds of remote throughput (256 B and 8 KiB) of the two
# binaries in BIN_DIR (see run.sh), into tp10/.
BIN_DIR=${BIN_DIR:?set BIN_DIR to the directory of tagwire-before and tagwire-after}
set -u
out=bench/results/roles-ab/tp10
for round in 1 2 3 4 5 6 7 8 9 10; do
  if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for b in $order; do
    d=$out/$b-$round
    mkdir -p $d
    "$BIN_DIR/tagwire-$b" perf throughput --remote --size 256,8192 --paced 0 --reps 3 --no-dds --no-peers --out $d > $d/throughput-remote.log 2>&1
    echo "round $round $b done $(date +%T)"
  done
done
echo ALLDONE
