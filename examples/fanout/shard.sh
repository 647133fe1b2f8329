#!/bin/sh
# Sums the lines of input.txt that fall in shard $1 of $2; the sum and the
# count are the node's output.
set -eu
shard="$1"; shards="$2"
awk -v s="$shard" -v n="$shards" '(NR - 1) % n == s { sum += $1; count++ } END { printf "{\"shard\": %d, \"count\": %d, \"sum\": %d}", s, count, sum }' \
  "$WEIR_DATA/fanout/input.txt" > "$WEIR_OUTPUT"
