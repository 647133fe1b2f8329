#!/usr/bin/env python3
"""The steps of the orders example. `export` drops a day's orders into
inbox/ after a moment; `regions` lists the regions of the file as a JSON
array of items and keeps the file as its artifact; `count` counts one
region's orders in that artifact (a member of the mapped node); `summary`
totals what the receiver (standing in for another system) stored for a
week."""
import datetime, json, os, random, sys, time


def out(value):
    with open(os.environ["WEIR_OUTPUT"], "w") as f:
        json.dump(value, f)


step = sys.argv[1]
if step == "export":
    day = sys.argv[2]
    rng = random.Random(day)
    orders = [{"region": rng.choice(["eu", "us", "apac"]), "amount": rng.randint(5, 500)}
              for _ in range(rng.randint(40, 80))]
    # The other system takes a moment: the sensor's first checks miss.
    time.sleep(1.5)
    os.makedirs("inbox", exist_ok=True)
    tmp = os.path.join("inbox", day + ".json.tmp")
    with open(tmp, "w") as f:
        json.dump(orders, f)
    os.replace(tmp, os.path.join("inbox", day + ".json"))
    out({"exported": len(orders)})
elif step == "regions":
    with open(sys.argv[2]) as f:
        orders = json.load(f)
    # The landed file, as an artifact: the members of `count` read it
    # wherever they run, not from this machine's inbox.
    with open(os.path.join(os.environ["WEIR_ARTIFACTS_OUT"], "orders.json"), "w") as f:
        json.dump(orders, f)
    out([{"name": r} for r in sorted({o["region"] for o in orders})])
elif step == "count":
    path, region = sys.argv[2], sys.argv[3]
    with open(path) as f:
        mine = [o for o in json.load(f) if o["region"] == region]
    print(f"{region}: {len(mine)} orders")
    out({"region": region, "orders": len(mine), "amount": sum(o["amount"] for o in mine)})
elif step == "summary":
    start, end = (datetime.datetime.fromisoformat(a.replace("Z", "+00:00")).date() for a in sys.argv[2:4])
    folder = os.path.join(os.environ["WEIR_DATA"], "orders", "received")
    days, total = [], 0
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        day = datetime.date.fromisoformat(name[:-5])
        if start <= day < end:
            with open(os.path.join(folder, name)) as f:
                total += sum(r["orders"] for r in json.load(f))
            days.append(str(day))
    print(f"week {start}..{end}: {total} orders over {days}")
    out({"days": days, "orders": total})
else:
    sys.exit(f"unknown step {step!r}")
