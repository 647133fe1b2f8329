"""huey (SqliteHuey, fsync=True -> PRAGMA synchronous=FULL) on weir's
benchmark scenarios; driven by benches/compare.sh. Prints RESULT lines.

Tasks run in consumer threads inside this process (Consumer.start(), the
same loop `huey_consumer -k thread` runs). huey's consumer polls SQLite:
the polling delay is 1 ms growing to at most 10 ms (huey's defaults are
100 ms and 10 s), which favours huey's latency. huey deletes a task when it
dequeues it, so execution is at most once and a completion is not
recorded (results are off; the no-op returns None).

usage: huey_bench.py DIR drain JOBS BUDGET_S
       huey_bench.py DIR latency SECS
       huey_bench.py DIR chain NODES
"""
import os
import sys
import threading
import time

from huey import SqliteHuey
from huey.consumer import Consumer

DIR = sys.argv[1]
os.makedirs(DIR, exist_ok=True)


def make(name):
    path = os.path.join(DIR, name + ".db")
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass
    return SqliteHuey(name, filename=path, fsync=True, results=False)


def consumer(h, workers):
    c = Consumer(h, workers=workers, periodic=False, initial_delay=0.001,
                 backoff=1.15, max_delay=0.01, worker_type="thread",
                 check_worker_health=False)
    c.start()
    return c


def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[round((len(xs) - 1) * q)]


def drain(jobs, budget_s):
    pairs = [("jobs", jobs)]
    for workers in (1, 8, 32):
        h = make("drain%d" % workers)
        done = [0]
        lock = threading.Lock()

        @h.task()
        def noop(i):
            with lock:
                done[0] += 1

        t0 = time.perf_counter()
        enq = 0
        # Enqueue durably (one fsynced transaction per job: huey has no
        # batch enqueue), within half the budget.
        while enq < jobs and time.perf_counter() - t0 < budget_s / 2:
            noop(enq)
            enq += 1
        c = consumer(h, workers)
        deadline = t0 + budget_s
        while done[0] < enq and time.perf_counter() < deadline:
            time.sleep(0.005)
        el = time.perf_counter() - t0
        c.stop(graceful=True)
        rate = done[0] / el
        print("huey drain, %d workers: %d of %d jobs enqueued, %d run in %.1f s = %.0f jobs/s"
              % (workers, enq, jobs, done[0], el, rate), flush=True)
        pairs.append(("w%d_jobs_per_s" % workers, "%.0f" % rate))
        pairs.append(("w%d_done" % workers, done[0]))
    pairs.append(("peak_rss_bytes", peak_rss()))
    print("RESULT scenario=drain " + " ".join("%s=%s" % kv for kv in pairs), flush=True)


def latency(secs):
    pairs = [("secs_per_rate", secs)]
    for rate in (100, 1000, 10000):
        h = make("lat%d" % rate)
        starts = {}

        @h.task()
        def stamp(i):
            starts[i] = time.perf_counter()

        c = consumer(h, 8)
        acks = {}
        period = 1.0 / rate
        t0 = time.perf_counter()
        n = rate * secs
        for i in range(n):
            due = t0 + i * period
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            stamp(i)
            acks[i] = time.perf_counter()
            # A producer that cannot keep the rate stops a quarter of the
            # window late; the figures cover what it enqueued.
            if time.perf_counter() - t0 > secs + max(2, secs / 4):
                break
        achieved = len(acks) / (time.perf_counter() - t0)
        deadline = time.perf_counter() + max(2, secs / 4)
        while len(starts) < len(acks) and time.perf_counter() < deadline:
            time.sleep(0.01)
        c.stop(graceful=True)
        lat = [max(0.0, starts[i] - a) * 1e6 for i, a in acks.items() if i in starts]
        print("huey latency at %d/s (achieved %.0f/s, a single producer thread): p50 %.0f us, p99 %.0f us"
              % (rate, achieved, pct(lat, 0.5), pct(lat, 0.99)), flush=True)
        pairs.append(("r%d_p50_us" % rate, "%.0f" % pct(lat, 0.5)))
        pairs.append(("r%d_p99_us" % rate, "%.0f" % pct(lat, 0.99)))
        pairs.append(("r%d_achieved_per_s" % rate, "%.0f" % achieved))
    print("RESULT scenario=latency " + " ".join("%s=%s" % kv for kv in pairs), flush=True)


def chain(nodes):
    h = make("chain")
    starts = {}
    ends = {}
    finished = threading.Event()

    @h.task()
    def step(i=0):
        starts[i] = time.perf_counter()
        ends[i] = time.perf_counter()
        if i == nodes - 1:
            finished.set()
        return i + 1

    # A pipeline: each stage receives the previous stage's return value.
    pipe = step.s(0)
    for _ in range(nodes - 1):
        pipe = pipe.then(step)
    sys.setrecursionlimit(10000)
    c = consumer(h, 8)
    t0 = time.perf_counter()
    h.enqueue(pipe)
    finished.wait(600)
    total = time.perf_counter() - t0
    c.stop(graceful=True)
    edges = [(starts[i + 1] - ends[i]) * 1e6 for i in range(nodes - 1) if i + 1 in starts]
    print("huey chain of %d (pipeline): %.1f ms, edge p50 %.0f us, p99 %.0f us"
          % (nodes, total * 1e3, pct(edges, 0.5), pct(edges, 0.99)), flush=True)
    print("RESULT scenario=chain nodes=%d settle_ms=%.1f edge_p50_us=%.0f edge_p99_us=%.0f"
          % (nodes, total * 1e3, pct(edges, 0.5), pct(edges, 0.99)), flush=True)


if __name__ == "__main__":
    what = sys.argv[2]
    if what == "drain":
        drain(int(sys.argv[3]), float(sys.argv[4]))
    elif what == "latency":
        latency(int(sys.argv[3]))
    elif what == "chain":
        chain(int(sys.argv[3]))
    else:
        sys.exit("unknown scenario " + what)
    os._exit(0)
