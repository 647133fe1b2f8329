#!/usr/bin/env python3
"""The steps of the daily ETL example. Each step reads the files its
upstreams left as artifacts (fetched from the artifact store on whatever
machine runs it), writes its own, and leaves a small JSON summary as the
node's output, through `weir.task` (clients/python: `pip install
./clients/python`). Where the package is not installed, a few lines below
read the same variables weir gives every command ($WEIR_ARTIFACTS_IN/
<upstream>/<name>, $WEIR_ARTIFACTS_OUT, $WEIR_OUTPUT, $WEIR_UPSTREAMS), so
the example runs with nothing but python3."""
import csv, json, os, random, sys

try:
    from weir import task
except ImportError:
    class task:  # what weir.task does, for a machine without the package
        attempt = int(os.environ["WEIR_ATTEMPT"])
        run_id, data_dir = os.environ["WEIR_RUN_ID"], os.environ["WEIR_DATA"]

        class upstream:
            def __init__(self, name):
                with open(os.environ["WEIR_UPSTREAMS"]) as f:
                    self.output = json.loads(json.load(f)[name]["output"])

        def set_output(value):
            with open(os.environ["WEIR_OUTPUT"], "w") as f:
                json.dump(value, f)

        def artifact_in(upstream, name):
            return os.path.join(os.environ["WEIR_ARTIFACTS_IN"], upstream, name)

        def artifact_out(name):
            return os.path.join(os.environ["WEIR_ARTIFACTS_OUT"], name)

step, partition = sys.argv[1], sys.argv[2]
# Options from the definition's templates: --name=value.
opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--") and "=" in a)
# A start log, so tests can check which steps ran in which process.
with open(os.path.join(task.data_dir, "starts.log"), "a") as f:
    f.write(f"{os.environ.get('ETL_ROUND', '-')} {task.run_id}\n")


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_rows(name, rows, fields):
    with open(task.artifact_out(name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


if step == "extract":
    # The source is flaky: its first try of each day times out, and the
    # node's `retry` runs it again 200 ms later (see `weir status etl DAY`:
    # extract, 2 attempts).
    if task.attempt == 1:
        print(f"the source timed out on {partition} (first try)", file=sys.stderr)
        sys.exit(1)
    rng = random.Random(partition)  # the same partition always extracts the same orders
    regions = ["north", "south", "east", "west"]
    rows = []
    for i in range(rng.randint(800, 1200)):
        amount = round(rng.uniform(-5, 500), 2)  # a few negative amounts are bad rows
        rows.append({"id": f"{partition}-{i}", "region": rng.choice(regions), "amount": amount})
    write_rows("raw.csv", rows, ["id", "region", "amount"])
    task.set_output({"rows": len(rows)})
elif step == "clean":
    min_amount = float(opts.get("min-amount", "0"))
    # --in= is the template {upstream.extract.artifact.raw.csv}: a local path.
    rows = [r for r in read_rows(opts["in"]) if float(r["amount"]) >= min_amount]
    write_rows("clean.csv", rows, ["id", "region", "amount"])
    extracted = task.upstream("extract").output["rows"]
    task.set_output({"rows": len(rows), "dropped": extracted - len(rows)})
elif step == "enrich":
    rate = float(opts.get("tax-rate", "1.2"))
    rows = read_rows(task.artifact_in("extract", "raw.csv"))
    for r in rows:
        r["amount_with_tax"] = round(float(r["amount"]) * rate, 2)
    write_rows("enriched.csv", rows, ["id", "region", "amount", "amount_with_tax"])
    task.set_output({"rows": len(rows), "tax_rate": rate})
elif step == "aggregate":
    totals = {}
    for r in read_rows(task.artifact_in("extract", "raw.csv")):
        if float(r["amount"]) >= 0:
            totals[r["region"]] = round(totals.get(r["region"], 0) + float(r["amount"]), 2)
    with open(task.artifact_out("totals.json"), "w") as f:
        json.dump(totals, f, sort_keys=True)
    task.set_output({"regions": len(totals)})
elif step == "load":
    cleaned = task.upstream("clean").output
    clean = read_rows(task.artifact_in("clean", "clean.csv"))
    with open(task.artifact_in("aggregate", "totals.json")) as f:
        totals = json.load(f)
    record = {"partition": partition, "orders": len(clean), "totals": totals,
              "extracted": cleaned["rows"] + cleaned["dropped"],
              "enriched_rows": task.upstream("enrich").output["rows"]}
    # The warehouse stands in for a database: what was loaded is also the
    # node's artifact, which the report reads wherever it runs.
    with open(task.artifact_out("loaded.json"), "w") as f:
        json.dump(record, f, sort_keys=True)
    task.set_output({"loaded": len(clean)})
elif step == "report":
    with open(task.artifact_in("load", "loaded.json")) as f:
        loaded = json.load(f)
    lines = [
        f"report for {partition} ({opts.get('window', '?')})",
        f"extracted {loaded['extracted']} rows",
        f"kept {loaded['orders']} clean orders",
        f"loaded {opts.get('loaded', task.upstream('load').output['loaded'])} orders into the warehouse",
        "totals: " + ", ".join(f"{k}={v}" for k, v in sorted(loaded["totals"].items())),
    ]
    with open(task.artifact_out("report.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    task.set_output({"loaded": loaded["orders"]})
else:
    print(f"unknown step {step!r}", file=sys.stderr)
    sys.exit(2)
