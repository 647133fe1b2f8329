#!/usr/bin/env python3
"""Merges the shards' outputs: every item must be counted exactly once."""
import json, os, sys

with open(os.environ["WEIR_UPSTREAMS"]) as f:
    shards = [json.loads(v["output"]) for v in json.load(f).values()]
count = sum(s["count"] for s in shards)
total = sum(s["sum"] for s in shards)
expected = 800 * 801 // 2
print(f"merged {len(shards)} shards: {count} items, sum {total} (expected {expected})")
if count != 800 or total != expected:
    sys.exit(2)
with open(os.environ["WEIR_OUTPUT"], "w") as f:
    json.dump({"shards": len(shards), "count": count, "sum": total}, f)
