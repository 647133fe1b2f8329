"""A three-member replicated engine whose leader is killed -9 while the
client starts runs and waits: every call succeeds or raises (a documented
exception), none outlives its bound, and every start the engine
acknowledged settles."""

import asyncio
import os
import signal
import subprocess
import threading
import time

import httpx

import weir
from conftest import WEIR, clean_env, days, free_port, wait_for, write_def

TOKEN = "the-shared-admin-token-0123456789abcdef"


class Group:
    def __init__(self, tmp, n=3):
        self.tmp = tmp
        self.defs = tmp / "defs"
        write_def(self.defs, "r", 'name = "r"\npartitioning = "daily"\nmax_active_runs = 16\n'
                  '[pools]\ndefault = 8\n[[nodes]]\nname = "a"\ncommand = ["sh", "-c", "sleep 0.1"]\n'
                  '[[nodes]]\nname = "b"\nupstreams = ["a"]\ncommand = ["true"]\n')
        (tmp / "cookie").write_text("the-members-cookie-0123456789\n")
        (tmp / "token").write_text(TOKEN + "\n")
        for f in ("cookie", "token"):
            os.chmod(tmp / f, 0o600)
        self.api = {i: f"127.0.0.1:{free_port()}" for i in range(1, n + 1)}
        raft = {i: f"127.0.0.1:{free_port()}" for i in range(1, n + 1)}
        peers = ",".join(f"{i}={a}" for i, a in raft.items())
        self.procs = {}
        for i in self.api:
            self.procs[i] = subprocess.Popen(
                [WEIR, "serve", str(self.defs), "--data", str(tmp / f"m{i}"),
                 "--listen", self.api[i], "--raft-id", str(i), "--raft-peers", peers,
                 "--election-timeout-ms", "600", "--cookie-file", str(tmp / "cookie"),
                 "--token-file", str(tmp / "token"), "--grace-secs", "2",
                 "--durability", "flush"],
                stdout=subprocess.DEVNULL, stderr=open(tmp / f"m{i}.log", "w"), env=clean_env())
        wait_for("a leader whose engine answers", 30, self.leader)

    def urls(self):
        return [f"http://{a}" for a in self.api.values()]

    def leader(self):
        for i, a in self.api.items():
            if self.procs[i].poll() is not None:
                continue
            try:
                r = httpx.get(f"http://{a}/api/v1/members", timeout=2,
                              headers={"Authorization": f"Bearer {TOKEN}", "x-weir-passed": "1"})
                v = r.json()
                if v.get("state") == "leader" and v.get("leader") == i:
                    g = httpx.get(f"http://{a}/api/v1/graphs", timeout=2,
                                  headers={"Authorization": f"Bearer {TOKEN}"})
                    if g.status_code == 200:
                        return i
            except (httpx.HTTPError, ValueError):
                continue
        return None

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()


def test_the_leader_killed_while_starting_and_waiting(tmp_path):
    g = Group(tmp_path)
    try:
        # Given one member's URL, the client learns the others from the
        # members view.
        with weir.Client(url=g.urls()[0], token=TOKEN) as c:
            c.api.get_graphs()
            assert sorted(c.urls) == sorted(g.urls())
        acked, outcomes, durations = [], [], []
        parts = days(60)
        bound = 10 + 10 + 5  # failover wait + request timeout + slack
        c = weir.Client(url=g.urls(), token=TOKEN, timeout=10, failover_wait=10)
        killed = threading.Event()

        def starter():
            for i, p in enumerate(parts):
                t0 = time.monotonic()
                try:
                    if c.start("r", p)[0].partition == p:
                        acked.append(p)
                    outcomes.append("ok")
                except weir.WeirError as e:
                    outcomes.append(type(e).__name__)
                durations.append(time.monotonic() - t0)
                if i == 15:
                    killed.wait(30)

        waits, overshoots = {}, []

        def waiter():
            # Waits, from before the kill to after it, on runs not started
            # yet: their settling comes through the event stream of
            # whichever member answers.
            wc = weir.Client(url=g.urls(), token=TOKEN, timeout=10, failover_wait=10)
            wait_for("3 starts", 30, lambda: len(acked) >= 3)
            t0 = time.monotonic()
            try:
                waits[parts[40]] = wc.wait("r", parts[40], timeout=60).state
            except weir.WeirError as e:
                waits[parts[40]] = type(e).__name__
            overshoots.append(time.monotonic() - t0 - 60)
            wc.close()

        def async_waiter():
            # The same through the async client.
            async def main():
                async with weir.AsyncClient(url=g.urls(), token=TOKEN, timeout=10,
                                            failover_wait=10) as ac:
                    return (await ac.wait("r", parts[45], timeout=60)).state

            t0 = time.monotonic()
            try:
                waits[parts[45]] = asyncio.run(main())
            except weir.WeirError as e:
                waits[parts[45]] = type(e).__name__
            overshoots.append(time.monotonic() - t0 - 60)

        ts = [threading.Thread(target=f, daemon=True) for f in (starter, waiter, async_waiter)]
        for t in ts:
            t.start()
        wait_for("15 starts", 60, lambda: len(outcomes) >= 15)
        leader = g.leader()
        assert leader is not None
        g.procs[leader].send_signal(signal.SIGKILL)
        g.procs[leader].wait()
        killed.set()
        for t in ts:
            t.join(180)
            assert not t.is_alive(), "a call hung"
        print("outcomes", outcomes, "waits", waits, "max", max(durations))
        assert len(outcomes) == len(parts)
        assert max(durations) < bound, durations
        # A wait ends by its timeout at the latest (60 s), give or take
        # its last read.
        assert len(overshoots) == 2 and max(overshoots) < 5, overshoots
        assert set(outcomes) <= {"ok", "ConnectionFailed", "Unavailable"}, outcomes
        assert outcomes.count("ok") >= len(parts) - 5, outcomes
        assert len(waits) == 2, waits
        for p, state in waits.items():
            # Started after the kill: an acknowledged run settles, and the
            # wait that began before the kill sees it.
            if p in acked:
                assert state == "complete", waits
            else:
                assert state in ("WaitTimeout", "ConnectionFailed", "Unavailable"), waits
        # Every acknowledged start settles, on the engine that leads now.
        states = c.wait_all("r", acked, timeout=90)
        assert set(states) == set(acked)
        assert set(states.values()) == {"complete"}, states
        c.close()
    finally:
        g.stop()
