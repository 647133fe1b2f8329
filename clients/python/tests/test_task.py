"""weir.task in a graph run by `weir run` and by a `weir worker`: params,
the partition's window, upstream outputs, outputs and artifacts go round
trip."""

import json
import os
import subprocess
import textwrap

import pytest

import weir
from weir import task
from conftest import PY, WEIR, Engine, clean_env, free_port, wait_for, write_def

STEPS = textwrap.dedent('''
    import json, sys
    from weir import task

    if sys.argv[1] == "extract":
        with open(task.artifact_out("raw.csv"), "w") as f:
            f.write("id,amount\\n1,10\\n2,32\\n")
        p = task.partition
        task.set_output({
            "graph": task.graph, "node": task.node, "partition": p,
            "start": p.start.isoformat(), "end": p.end.isoformat(),
            "params": task.params, "attempt": task.attempt, "run_id": task.run_id,
            "traceparent": task.traceparent, "worker": task.worker,
        })
    else:
        up = task.upstream("extract")
        with open(task.artifact_in("extract", "raw.csv")) as f:
            rows = f.read().splitlines()[1:]
        with open(task.artifact_out("out/summary.json"), "w") as f:
            json.dump({"rows": len(rows)}, f)
        try:
            task.upstream("nope")
            missing = None
        except KeyError as e:
            missing = str(e)
        task.set_output({"upstream": up.output, "status": up.status, "rows": len(rows),
                         "total": sum(int(r.split(",")[1]) for r in rows), "missing": missing})
''')


def graph_def(defs):
    write_def(defs, "py", textwrap.dedent(f'''
        name = "py"
        partitioning = "daily"
        timezone = "Europe/Paris"
        [params]
        region = "eu"
        [pools]
        default = 2
        [[nodes]]
        name = "extract"
        retry = {{ attempts = 1 }}
        command = ["{PY}", "steps.py", "extract"]
        artifacts = ["raw.csv"]
        [[nodes]]
        name = "load"
        upstreams = ["extract"]
        retry = {{ attempts = 1 }}
        command = ["{PY}", "steps.py", "load"]
        artifacts = ["out/*.json"]
    '''))
    (defs / "steps.py").write_text(STEPS)


def check_outputs(nodes, params, worker):
    by = {n["node"]: n for n in nodes}
    assert by["extract"]["state"] == "succeeded", by
    assert by["load"]["state"] == "succeeded", by
    ex = by["extract"]["output"]
    assert ex["graph"] == "py" and ex["node"] == "extract" and ex["partition"] == "2020-03-29"
    # The window in the graph's zone: the day DST starts in Paris.
    assert ex["start"] == "2020-03-29T00:00:00+01:00" and ex["end"] == "2020-03-30T00:00:00+02:00"
    assert ex["params"] == params and ex["attempt"] == 1
    assert ex["run_id"] == "py/2020-03-29/extract/0"
    assert ex["traceparent"].startswith("00-") and len(ex["traceparent"].split("-")) == 4
    assert ex["worker"].split(".")[0] == worker
    ld = by["load"]["output"]
    assert ld["upstream"] == ex and ld["status"] == "succeeded"
    assert (ld["rows"], ld["total"]) == (2, 42)
    assert "'nope' is not an upstream" in ld["missing"] and "extract" in ld["missing"]
    assert [a["name"] for a in by["load"]["artifacts"]] == ["out/summary.json"]


def test_task_under_weir_run(tmp_path):
    defs, data = tmp_path / "defs", tmp_path / "data"
    graph_def(defs)
    r = subprocess.run([WEIR, "run", str(defs), "--data", str(data), "--partition", "2020-03-29",
                        "--until-idle", "--durability", "flush", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, env=clean_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    st = subprocess.run([WEIR, "status", "py", "2020-03-29", "--json", "--data", str(data)],
                        capture_output=True, text=True, env=clean_env(), timeout=60)
    run = json.loads(st.stdout)
    assert run["state"] == "complete", run
    check_outputs(run["nodes"], {"region": "eu"}, "engine")


def test_task_on_a_worker(tmp_path):
    defs = tmp_path / "defs"
    graph_def(defs)
    cookie = tmp_path / "cookie"
    cookie.write_text("the-python-client-cookie-0123456789\n")
    os.chmod(cookie, 0o600)
    cluster = f"127.0.0.1:{free_port()}"
    arts = tmp_path / "arts"
    arts.mkdir()
    e = Engine(defs, tmp_path / "data",
               ["--cluster", cluster, "--cookie-file", str(cookie), "--no-local-workers",
                "--artifacts", f"file://{arts}"])
    w = subprocess.Popen([WEIR, "worker", "--join", cluster, "--cookie-file", str(cookie),
                          "--pool", "default=2", "--name", "pyw"],
                         stdout=subprocess.DEVNULL, stderr=open(tmp_path / "worker.log", "w"),
                         env=clean_env())
    try:
        with weir.Client(data=e.data) as c:
            wait_for("the worker", 30, lambda: c.api.get_workers())
            c.start("py", "2020-03-29", params={"region": "us"})
            run = c.wait("py", "2020-03-29", timeout=60)
            assert run.state == "complete", run
            check_outputs([n.to_json() for n in run.nodes], {"region": "us"}, "pyw")
            assert {n.worker.split(".")[0] for n in run.nodes} == {"pyw"}
    finally:
        w.kill()
        w.wait()
        e.stop()


def test_task_reads_what_it_is_given_and_refuses_bad_names(tmp_path):
    ups = tmp_path / "ups.json"
    ups.write_text(json.dumps({"a": {"status": "succeeded", "rerun": 0, "output": "plain text",
                                     "output_bytes": 10}}))
    out = tmp_path / "out"
    env = {"WEIR_GRAPH": "g", "WEIR_PARTITION": "key=db1", "WEIR_NODE": "n",
           "WEIR_ATTEMPT": "2", "WEIR_RUN_ID": "g/key=db1/n/0", "WEIR_UPSTREAMS": str(ups),
           "WEIR_OUTPUT": str(out), "WEIR_ARTIFACTS_IN": str(tmp_path / "in"),
           "WEIR_ARTIFACTS_OUT": str(tmp_path / "outs"), "WEIR_MEMBER": "3",
           "WEIR_ITEM": '{"k": 1}'}
    t = task.Task(env)
    assert t.in_weir and t.attempt == 2 and t.params == {}
    assert t.partition == "key=db1" and t.partition.key == "db1" and t.partition.start is None
    assert (t.member, t.item) == (3, {"k": 1})
    assert t.upstream("a").output == "plain text"
    with pytest.raises(FileNotFoundError, match="left no artifact"):
        t.artifact_in("a", "x.csv")
    for bad in ("../x", "/etc/passwd", "a/../../b", ""):
        with pytest.raises(ValueError):
            t.artifact_out(bad)
    with pytest.raises(ValueError, match="at most"):
        t.set_output("x" * (task.OUTPUT_BYTES_MAX + 1))
    t.set_output([1, 2])
    assert out.read_text() == "[1,2]"
    with pytest.raises(task.NotInWeir, match="WEIR_GRAPH"):
        task.Task({}).graph
