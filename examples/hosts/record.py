#!/usr/bin/env python3
"""Appends the check's result to the host's history."""
import json, os, sys

with open(os.environ["WEIR_UPSTREAMS"]) as f:
    check = json.loads(json.load(f)["check"]["output"])
path = os.path.join(os.environ["WEIR_DATA"], "hosts", "history.jsonl")
with open(path, "a") as f:
    f.write(json.dumps({"partition": sys.argv[1], **check}) + "\n")
