"""Every client operation against a live `weir serve`, sync and async."""

import asyncio
import time

import pytest

import weir
from conftest import chain_def, days


def client_of(e, **kw):
    return weir.Client(url=e.url, token=e.token, **kw)


def test_finds_the_engine_as_the_cli_does(chain, monkeypatch, tmp_path):
    # By data directory (engine.json and DATA/token), by $WEIR_DATA_DIR,
    # and by $WEIR_ENGINE with $WEIR_TOKEN.
    with weir.Client(data=chain.data) as c:
        assert c.urls[0] == chain.url
        assert [g.name for g in c.api.get_graphs()] == ["g"]
    monkeypatch.setenv("WEIR_DATA_DIR", str(chain.data))
    with weir.Client() as c:
        assert c.urls[0] == chain.url
    monkeypatch.delenv("WEIR_DATA_DIR")
    monkeypatch.setenv("WEIR_ENGINE", chain.url)
    monkeypatch.setenv("WEIR_TOKEN", chain.token)
    with weir.Client() as c:
        assert c.status  # constructed; a call proves the token
        assert c.api.get_graphs()[0].name == "g"
    monkeypatch.delenv("WEIR_ENGINE")
    monkeypatch.delenv("WEIR_TOKEN")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with pytest.raises(weir.ConfigError, match="no engine found"):
        weir.Client()
    tf = tmp_path / "tok"
    tf.write_text(chain.token + "\n")
    with weir.Client(url=chain.url, token_file=tf) as c:
        assert c.api.get_graphs()[0].name == "g"


def test_start_wait_status_logs_and_a_failing_run(chain):
    (chain.defs / "fail-b").write_text("2020-01-02\n")
    with client_of(chain) as c:
        out = c.start("g", ["2020-01-01", "2020-01-02"])
        assert [(o.partition, o.started) for o in out] == [("2020-01-01", True), ("2020-01-02", True)]
        assert c.start("g", "2020-01-01")[0].started is False
        ok = c.wait("g", "2020-01-01", timeout=30)
        assert ok.state == "complete"
        assert [(n.node, n.state) for n in ok.nodes] == [("a", "succeeded"), ("b", "succeeded"),
                                                         ("c", "succeeded")]
        bad = c.wait("g", "2020-01-02", timeout=30)
        assert bad.state == "failed"
        assert {n.node: n.state for n in bad.nodes}["b"] == "failed"
        assert c.status("g", "2020-01-02").state == "failed"
        lines = [l.text for l in c.logs("g", "2020-01-01", "b")]
        assert lines == ["line one of b 2020-01-01", "line two of b", "b goes on"]
        # A finished attempt's log, followed: its lines, then the end.
        assert [l.text for l in c.logs("g", "2020-01-01", "a", follow=True)] == [
            "line one of a 2020-01-01", "line two of a"]


def test_follow_a_running_log(chain):
    (chain.defs / "hold-b").write_text("")
    with client_of(chain) as c:
        c.start("g", "2020-03-01")
        weir_wait(lambda: c.status("g", "2020-03-01").live.get("b") is not None
                  and c.status("g", "2020-03-01").live["b"].running)
        it = c.logs("g", "2020-03-01", "b", follow=True)
        assert next(it).text == "line one of b 2020-03-01"
        assert next(it).text == "line two of b"
        # The attempt waits: the stream stays open until it prints again
        # and ends.
        (chain.defs / "hold-b").unlink()
        assert [l.text for l in it] == ["b goes on"]
        assert c.wait("g", "2020-03-01", timeout=30).state == "complete"


def weir_wait(f, timeout=30):
    t0 = time.monotonic()
    while not f():
        assert time.monotonic() - t0 < timeout
        time.sleep(0.05)


def test_rerun_clear_mark_cancel(chain):
    (chain.defs / "fail-b").write_text("2020-01-03\n")
    with client_of(chain) as c:
        c.start("g", "2020-01-03")
        assert c.wait("g", "2020-01-03", timeout=30).state == "failed"
        (chain.defs / "fail-b").write_text("")
        cleared = c.clear("g", "2020-01-03")
        assert [n.node for n in cleared][:1] == ["b"]
        assert c.wait("g", "2020-01-03", timeout=30).state == "complete"
        answer = c.rerun("g", "2020-01-03", "c")
        assert answer.outcome == "submitted" and answer.run_id == "g/2020-01-03/c/2"
        assert c.wait("g", "2020-01-03", timeout=30).state == "complete"
        # A node that has never run: 409, carrying the outcome.
        (chain.defs / "hold-b").write_text("")
        c.start("g", "2020-01-04")
        weir_wait(lambda: c.status("g", "2020-01-04").live.get("b") is not None
                  and c.status("g", "2020-01-04").live["b"].running)
        with pytest.raises(weir.Conflict) as e:
            c.rerun("g", "2020-01-04", "c")
        assert e.value.status == 409
        assert e.value.outcome.outcome == "no_record"
        marked = c.mark("g", "2020-01-04", "b", "succeeded")
        assert marked["outcome"] == "cancelled_and_marked" and marked["state"] == "succeeded"
        assert c.wait("g", "2020-01-04", timeout=30).state == "complete"
        c.start("g", "2020-01-05")
        assert c.cancel("g", "2020-01-05").cancelled is True
        assert c.wait("g", "2020-01-05", timeout=30).state == "cancelled"
        with pytest.raises(weir.Conflict) as e:
            c.cancel("g", "2020-01-05")
        assert e.value.outcome.cancelled is False


def test_backfill_and_wait_all(chain):
    with client_of(chain) as c:
        b = c.backfill("g", "2020-02-01", "2020-02-10")
        assert (b.from_, b.to) == ("2020-02-01", "2020-02-10")
        states = c.wait_all("g", days(10, "2020-02-01"), timeout=60)
        assert states == {p: "complete" for p in days(10, "2020-02-01")}


def test_runs_pages_past_a_thousand(engines):
    # One slot: the runs are created at once and wait their turn; listing
    # them does not wait for them.
    e = engines({"p": 'name = "p"\npartitioning = "daily"\nmax_active_runs = 1\n[pools]\ndefault = 1\n'
                      '[[nodes]]\nname = "a"\ncommand = ["true"]\n'})
    parts = days(1050)
    with client_of(e) as c:
        for i in range(0, len(parts), 500):
            assert all(o.started for o in c.start("p", parts[i:i + 500]))
        seen = [r.partition for r in c.runs(graph="p")]
        assert len(seen) == 1050 and set(seen) == set(parts)
        assert seen == sorted(seen, reverse=True)  # newest partition first, no page repeated
        assert len(list(c.runs(graph="p", page_size=7, to="2020-01-10"))) == 10


def test_events_resume_after_a_cut_without_loss_or_repeat(chain):
    from proxy import Proxy
    with Proxy(chain.url) as px, weir.Client(url=px.url, token=chain.token) as c, \
            client_of(chain) as direct:
        stream = c.events()
        direct.start("g", "2020-04-01")
        got = []
        for ev in stream:
            got.append(ev)
            if len(got) == 5:
                px.cut()  # every open connection reset: the stream reopens with Last-Event-ID
                direct.start("g", "2020-04-02")
            if any(e.kind == "run_settled" and e.data["partition"] == "2020-04-02" for e in got):
                break
        seqs = [e.data["seq"] for e in got]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
        assert px.cuts >= 1 and px.connections >= 2
        # Resuming from an id: exactly the events after it.
        again = c.events(since=got[2].id)
        assert [next(again).data["seq"] for _ in range(3)] == seqs[3:6]
        # An id from another engine: one reset event.
        assert next(c.events(since="1-1")).kind == "reset"


def test_the_async_client(chain):
    (chain.defs / "fail-b").write_text("2020-05-02\n")

    async def main():
        async with weir.AsyncClient(url=chain.url, token=chain.token) as c:
            out = await asyncio.gather(*(c.start("g", p) for p in days(4, "2020-05-01")))
            assert [o[0].started for o in out] == [True] * 4
            states = await c.wait_all("g", days(4, "2020-05-01"), timeout=60)
            assert states["2020-05-02"] == "failed" and states["2020-05-01"] == "complete"
            run = await c.wait("g", "2020-05-02", timeout=10)
            assert run.state == "failed"
            assert [r.partition async for r in c.runs(graph="g", page_size=3)] == \
                list(reversed(days(4, "2020-05-01")))
            lines = [l.text async for l in c.logs("g", "2020-05-01", "a", follow=True)]
            assert lines == ["line one of a 2020-05-01", "line two of a"]
            (chain.defs / "fail-b").write_text("")
            assert [n.node for n in await c.clear("g", "2020-05-02")][:1] == ["b"]
            assert (await c.wait("g", "2020-05-02", timeout=30)).state == "complete"
            assert (await c.rerun("g", "2020-05-02", "c")).outcome == "submitted"
            await c.wait("g", "2020-05-02", timeout=30)
            assert (await c.mark("g", "2020-05-02", "c", "failed"))["outcome"] == "marked"
            with pytest.raises(weir.Conflict):
                await c.cancel("g", "2020-05-01")
            b = await c.backfill("g", "2020-06-01", "2020-06-02")
            assert b.to == "2020-06-02"
            ev = c.events(since="1-1")
            assert (await ev.__anext__()).kind == "reset"
            await ev.aclose()
            with pytest.raises(weir.NotFound, match="not adopted"):
                await c.start("nope", "2020-01-01")

    asyncio.run(main())


def test_generated_api_covers_the_rest(chain):
    with client_of(chain) as c:
        facts = c.api.get_engine()
        assert facts.to_json()
        assert c.api.get_graphs_graph("g").summary.name == "g"
        assert c.api.get_queue_pools()
        assert c.api.post_graphs_graph_pause("g") is not None
        assert c.api.get_graphs()[0].paused is True
        c.api.post_graphs_graph_unpause("g")
        assert c.api.get_graphs()[0].paused is False
