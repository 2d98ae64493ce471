#!/bin/bash
# A/B of the worse band's datagrams while a better one is in use: one
# `sendmsg` each (old) against one `sendmmsg` a run (new). Run from the
# checkout with the two release builds copied to /tmp/tagwire-old and
# /tmp/tagwire-new (the daemons run inside `tagwire perf`); results land
# beside this script.
here=$(dirname "$0")
for round in 1 2; do
 for bin in old new; do
  for cfg in "10G 8000 120" "1G 1400 120" "50M 1400 70,120"; do
   set -- $cfg
   out=$here/$bin-$1-$2-r$round
   /tmp/tagwire-$bin perf priority --rate $1 --loads $3 --reps 3 --no-dds --no-peers \
     --seconds 3 --load-size $2 --sched fifo:40 --out $out > $out.log 2>&1
  done
 done
done
