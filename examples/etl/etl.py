#!/usr/bin/env python3
"""The steps of the daily ETL example. Each step reads what its upstreams
wrote under $WEIR_DATA/etl/<partition>/, writes its own file there, and
leaves a small JSON summary in $WEIR_OUTPUT (the node's output)."""
import csv, json, os, random, sys

step, partition = sys.argv[1], sys.argv[2]
# Options from the definition's templates: --name=value.
opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--") and "=" in a)
base = os.path.join(os.environ["WEIR_DATA"], "etl", partition)
os.makedirs(base, exist_ok=True)
# A start log, so tests can check which steps ran in which process.
with open(os.path.join(os.environ["WEIR_DATA"], "starts.log"), "a") as f:
    f.write(f"{os.environ.get('ETL_ROUND', '-')} {os.environ['WEIR_RUN_ID']}\n")


def out(summary):
    with open(os.environ["WEIR_OUTPUT"], "w") as f:
        json.dump(summary, f)


def upstreams():
    with open(os.environ["WEIR_UPSTREAMS"]) as f:
        return {k: json.loads(v["output"]) for k, v in json.load(f).items()}


def read_rows(name):
    with open(os.path.join(base, name), newline="") as f:
        return list(csv.DictReader(f))


def write_rows(name, rows, fields):
    tmp = os.path.join(base, name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, os.path.join(base, name))


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
    rows = [r for r in read_rows("raw.csv") if float(r["amount"]) >= min_amount]
    write_rows("clean.csv", rows, ["id", "region", "amount"])
    out({"rows": len(rows), "dropped": upstreams()["extract"]["rows"] - len(rows)})
elif step == "enrich":
    rate = float(opts.get("tax-rate", "1.2"))
    rows = read_rows("raw.csv")
    for r in rows:
        r["amount_with_tax"] = round(float(r["amount"]) * rate, 2)
    write_rows("enriched.csv", rows, ["id", "region", "amount", "amount_with_tax"])
    out({"rows": len(rows), "tax_rate": rate})
elif step == "aggregate":
    totals = {}
    for r in read_rows("raw.csv"):
        if float(r["amount"]) >= 0:
            totals[r["region"]] = round(totals.get(r["region"], 0) + float(r["amount"]), 2)
    with open(os.path.join(base, "totals.json"), "w") as f:
        json.dump(totals, f, sort_keys=True)
    out({"regions": len(totals)})
elif step == "load":
    ups = upstreams()
    clean = read_rows("clean.csv")
    with open(os.path.join(base, "totals.json")) as f:
        totals = json.load(f)
    warehouse = os.path.join(os.environ["WEIR_DATA"], "warehouse")
    os.makedirs(warehouse, exist_ok=True)
    record = {"partition": partition, "orders": len(clean), "totals": totals, "enriched_rows": ups["enrich"]["rows"]}
    tmp = os.path.join(warehouse, partition + ".json.tmp")
    with open(tmp, "w") as f:
        json.dump(record, f, sort_keys=True)
    os.replace(tmp, os.path.join(warehouse, partition + ".json"))
    out({"loaded": len(clean)})
elif step == "report":
    ups = upstreams()
    with open(os.path.join(os.environ["WEIR_DATA"], "warehouse", partition + ".json")) as f:
        loaded = json.load(f)
    lines = [
        f"report for {partition} ({opts.get('window', '?')})",
        f"extracted {len(read_rows('raw.csv'))} rows",
        f"kept {loaded['orders']} clean orders",
        f"loaded {opts.get('loaded', ups['load']['loaded'])} orders into the warehouse",
        "totals: " + ", ".join(f"{k}={v}" for k, v in sorted(loaded["totals"].items())),
    ]
    with open(os.path.join(base, "report.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    out({"loaded": loaded["orders"], "report": os.path.join(base, "report.txt")})
else:
    print(f"unknown step {step!r}", file=sys.stderr)
    sys.exit(2)
