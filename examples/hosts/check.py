#!/usr/bin/env python3
"""Checks a host (simulated). A host named flaky-* fails its first checks,
enough to open the breaker of the ssh target; the others answer."""
import json, os, sys

partition = sys.argv[1]                     # key=<host>@<due instant>
host = partition.split("=", 1)[1].rsplit("@", 1)[0]
state_dir = os.path.join(os.environ["WEIR_DATA"], "hosts")
os.makedirs(state_dir, exist_ok=True)
counter = os.path.join(state_dir, host + ".attempts")
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
with open(counter, "w") as f:
    f.write(str(n))
if host.startswith("flaky") and n <= 5:
    print(f"{host}: connection refused (attempt {n})", file=sys.stderr)
    sys.exit(1)
with open(os.environ["WEIR_OUTPUT"], "w") as f:
    json.dump({"host": host, "up": True, "checks": n}, f)
