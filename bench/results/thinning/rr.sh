#!/usr/bin/env bash
# BIN_DIR: the directory holding the two release binaries, tagwire-before
# (ef14048) and tagwire-after (955c313).
BIN_DIR=${BIN_DIR:?set BIN_DIR to the directory of tagwire-before and tagwire-after}
out=$1
mkdir -p $out
for round in $(seq 1 10); do
  if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for b in $order; do
    d=$out/$b-$round; mkdir -p $d
    "$BIN_DIR/tagwire-$b" perf remote-rtt --sizes 256 --reps 9 --no-dds --no-peers --out $d > $d/remote-rtt.log 2>&1
  done
done
