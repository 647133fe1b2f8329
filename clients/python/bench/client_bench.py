#!/usr/bin/env python3
"""The Python side of `weir bench client` (src/bench/client.rs runs it).

    client_bench.py starts URL TOKEN_FILE WEIR_BIN GRAPH N
        Starts N runs and waits until all settle, four ways in turn, each
        on its own N partitions: raw http.client (one keep-alive
        connection; waits by polling the list of active runs), the sync
        client (start per run, then wait_all on the event stream), the
        async client (starts 32 at a time, then wait_all) and the CLI
        (`weir start` per run, then `weir runs --state active` until
        none). Prints one JSON object: per way, start_ms and
        total_ms.

    client_bench.py iter URL TOKEN_FILE
        Iterates client.runs() over every run the engine holds and prints
        {count, seconds, rss_before, rss_tenth, rss_peak} (bytes, from
        /proc/self/status: VmRSS, and VmHWM for the peak).
"""

import asyncio
import datetime
import http.client
import json
import os
import subprocess
import sys
import time
from urllib.parse import urlsplit

import weir


#: The async client's starts in flight: two per core (more only queue in
#: the engine, which makes each start durable in turn, and cost switches).
CONCURRENCY = 2 * (os.cpu_count() or 2)
#: Runs started (raw, untimed) before the ways are timed, so that none pays
#: the engine's warm-up.
WARM_UP = 100


def days(first, n):
    d0 = datetime.date.fromisoformat(first)
    return [(d0 + datetime.timedelta(days=i)).isoformat() for i in range(n)]


def rss(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def raw(url, token, graph, parts):
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    h = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    t0 = time.monotonic()
    for p in parts:
        conn.request("POST", f"/api/v1/graphs/{graph}/runs",
                     json.dumps({"partitions": [p]}), h)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit(f"raw start {p}: {r.status} {body[:200]!r}")
    started = time.monotonic()
    q = f"/api/v1/runs?graph={graph}&state=active&from={parts[0]}&to={parts[-1]}&limit=1"
    while True:
        conn.request("GET", q, headers=h)
        r = conn.getresponse()
        page = json.loads(r.read())
        if not page["runs"]:
            break
        time.sleep(0.02)
    conn.close()
    return started - t0, time.monotonic() - t0


def sync(url, token, graph, parts):
    with weir.Client(url=url, token=token) as c:
        t0 = time.monotonic()
        for p in parts:
            c.start(graph, p)
        started = time.monotonic()
        states = c.wait_all(graph, parts, timeout=600)
        assert len(states) == len(parts)
        return started - t0, time.monotonic() - t0


def async_(url, token, graph, parts):
    async def main():
        async with weir.AsyncClient(url=url, token=token) as c:
            sem = asyncio.Semaphore(CONCURRENCY)

            async def one(p):
                async with sem:
                    await c.start(graph, p)

            t0 = time.monotonic()
            await asyncio.gather(*(one(p) for p in parts))
            started = time.monotonic()
            states = await c.wait_all(graph, parts, timeout=600)
            assert len(states) == len(parts)
            return started - t0, time.monotonic() - t0

    return asyncio.run(main())


def cli(url, token_file, weir_bin, graph, parts):
    conn = ["--engine", url, "--token-file", token_file]
    t0 = time.monotonic()
    for p in parts:
        subprocess.run([weir_bin, "start", graph, p, *conn], check=True,
                       stdout=subprocess.DEVNULL)
    started = time.monotonic()
    while True:
        out = subprocess.run([weir_bin, "runs", "--graph", graph, "--state", "active", "--from",
                              parts[0], "--to", parts[-1], "--limit", "1", "--json", *conn],
                             check=True, capture_output=True, text=True).stdout
        v = json.loads(out)
        if not (v.get("runs") if isinstance(v, dict) else v):
            break
        time.sleep(0.02)
    return started - t0, time.monotonic() - t0


def main(argv):
    mode, url, token_file = argv[0], argv[1], argv[2]
    with open(token_file) as f:
        token = f.read().strip()
    if mode == "iter":
        c = weir.Client(url=url, token=token)
        before = rss()
        t0 = time.monotonic()
        count, tenth = 0, 0
        for _ in c.runs():
            count += 1
            if count == 10_000:
                tenth = rss()
        print(json.dumps({"count": count, "seconds": time.monotonic() - t0, "rss_before": before,
                          "rss_tenth": tenth or rss(), "rss_peak": rss("VmHWM")}))
        return
    weir_bin, graph, n = argv[3], argv[4], int(argv[5])
    raw(url, token, graph, days("1990-01-01", WARM_UP))
    out = {}
    ways = [("raw", "2001-01-01", lambda ps: raw(url, token, graph, ps)),
            ("sync", "2005-01-01", lambda ps: sync(url, token, graph, ps)),
            ("async", "2009-01-01", lambda ps: async_(url, token, graph, ps)),
            ("cli", "2013-01-01", lambda ps: cli(url, token_file, weir_bin, graph, ps))]
    for name, first, f in ways:
        s, t = f(days(first, n))
        out[name] = {"start_ms": round(s * 1e3, 1), "total_ms": round(t * 1e3, 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
