#!/usr/bin/env python3
"""The steps of the daily ETL example. Each step reads the files its
upstreams left as artifacts ($WEIR_ARTIFACTS_IN/<upstream>/<name>, fetched
from the artifact store on whatever machine runs it), writes its own under
$WEIR_ARTIFACTS_OUT, and leaves a small JSON summary in $WEIR_OUTPUT (the
node's output)."""
import csv, json, os, random, sys

step, partition = sys.argv[1], sys.argv[2]
# Options from the definition's templates: --name=value.
opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--") and "=" in a)
ins, outs = os.environ["WEIR_ARTIFACTS_IN"], os.environ["WEIR_ARTIFACTS_OUT"]
# A start log, so tests can check which steps ran in which process.
with open(os.path.join(os.environ["WEIR_DATA"], "starts.log"), "a") as f:
    f.write(f"{os.environ.get('ETL_ROUND', '-')} {os.environ['WEIR_RUN_ID']}\n")


def out(summary):
    with open(os.environ["WEIR_OUTPUT"], "w") as f:
        json.dump(summary, f)


def upstreams():
    with open(os.environ["WEIR_UPSTREAMS"]) as f:
        return {k: json.loads(v["output"]) for k, v in json.load(f).items()}


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_rows(name, rows, fields):
    with open(os.path.join(outs, name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


if step == "extract":
    # The source is flaky: its first try of each day times out, and the
    # node's `retry` runs it again 200 ms later (see `weir status etl DAY`:
    # extract, 2 attempts).
    if os.environ.get("WEIR_ATTEMPT") == "1":
        print(f"the source timed out on {partition} (first try)", file=sys.stderr)
        sys.exit(1)
    rng = random.Random(partition)  # the same partition always extracts the same orders
    regions = ["north", "south", "east", "west"]
    rows = []
    for i in range(rng.randint(800, 1200)):
        amount = round(rng.uniform(-5, 500), 2)  # a few negative amounts are bad rows
        rows.append({"id": f"{partition}-{i}", "region": rng.choice(regions), "amount": amount})
    write_rows("raw.csv", rows, ["id", "region", "amount"])
    out({"rows": len(rows)})
elif step == "clean":
    min_amount = float(opts.get("min-amount", "0"))
    # --in= is the template {upstream.extract.artifact.raw.csv}: a local path.
    rows = [r for r in read_rows(opts["in"]) if float(r["amount"]) >= min_amount]
    write_rows("clean.csv", rows, ["id", "region", "amount"])
    out({"rows": len(rows), "dropped": upstreams()["extract"]["rows"] - len(rows)})
elif step == "enrich":
    rate = float(opts.get("tax-rate", "1.2"))
    rows = read_rows(os.path.join(ins, "extract", "raw.csv"))
    for r in rows:
        r["amount_with_tax"] = round(float(r["amount"]) * rate, 2)
    write_rows("enriched.csv", rows, ["id", "region", "amount", "amount_with_tax"])
    out({"rows": len(rows), "tax_rate": rate})
elif step == "aggregate":
    totals = {}
    for r in read_rows(os.path.join(ins, "extract", "raw.csv")):
        if float(r["amount"]) >= 0:
            totals[r["region"]] = round(totals.get(r["region"], 0) + float(r["amount"]), 2)
    with open(os.path.join(outs, "totals.json"), "w") as f:
        json.dump(totals, f, sort_keys=True)
    out({"regions": len(totals)})
elif step == "load":
    ups = upstreams()
    clean = read_rows(os.path.join(ins, "clean", "clean.csv"))
    with open(os.path.join(ins, "aggregate", "totals.json")) as f:
        totals = json.load(f)
    record = {"partition": partition, "orders": len(clean), "totals": totals,
              "extracted": ups["clean"]["rows"] + ups["clean"]["dropped"],
              "enriched_rows": ups["enrich"]["rows"]}
    # The warehouse stands in for a database: what was loaded is also the
    # node's artifact, which the report reads wherever it runs.
    with open(os.path.join(outs, "loaded.json"), "w") as f:
        json.dump(record, f, sort_keys=True)
    out({"loaded": len(clean)})
elif step == "report":
    ups = upstreams()
    with open(os.path.join(ins, "load", "loaded.json")) as f:
        loaded = json.load(f)
    lines = [
        f"report for {partition} ({opts.get('window', '?')})",
        f"extracted {loaded['extracted']} rows",
        f"kept {loaded['orders']} clean orders",
        f"loaded {opts.get('loaded', ups['load']['loaded'])} orders into the warehouse",
        "totals: " + ", ".join(f"{k}={v}" for k, v in sorted(loaded["totals"].items())),
    ]
    with open(os.path.join(outs, "report.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    out({"loaded": loaded["orders"]})
else:
    print(f"unknown step {step!r}", file=sys.stderr)
    sys.exit(2)
