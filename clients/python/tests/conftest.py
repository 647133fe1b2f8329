"""Real engines for the client's tests: `weir serve` processes on
127.0.0.1 ports (the binary of target/debug, or $WEIR_BIN), each in a
temporary folder, stopped at the end of the test that made them."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[3]
WEIR = os.environ.get("WEIR_BIN") or str(REPO / "target" / "debug" / "weir")
PY = sys.executable


def clean_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("WEIR_DATA_DIR", "WEIR_ENGINE", "WEIR_TOKEN", "WEIR_CA")}
    env["RUST_LOG"] = "warn"
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, timeout: float, f):
    t0 = time.monotonic()
    while True:
        v = f()
        if v:
            return v
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def write_def(defs: Path, name: str, text: str) -> None:
    defs.mkdir(parents=True, exist_ok=True)
    (defs / f"{name}.toml").write_text(text)


def chain_def(name: str, max_active: int = 16, extra: str = "") -> str:
    """A daily graph a -> b -> c of shell one-liners; b fails on
    partitions listed in the definitions folder's file `fail-b`, and
    sleeps while the file `hold-b` exists."""
    def node(n, ups, body):
        return (f'\n[[nodes]]\nname = "{n}"\nupstreams = [{ups}]\nretry = {{ attempts = 1 }}\n'
                f'command = ["sh", "-c", "echo line one of {n} $WEIR_PARTITION; '
                f'echo line two of {n}; {body}"]\n')
    return (f'name = "{name}"\npartitioning = "daily"\nmax_active_runs = {max_active}\n'
            f'[pools]\ndefault = 4\n{extra}'
            + node("a", "", "true")
            + node("b", '"a"', "while [ -e hold-b ]; do sleep 0.05; done; echo b goes on; "
                   "if grep -qx $WEIR_PARTITION fail-b 2>/dev/null; then echo b fails >&2; exit 1; fi")
            + node("c", '"b"', "true"))


class Engine:
    """One `weir serve DEFS --data DATA` process."""

    def __init__(self, defs: Path, data: Path, args: List[str] = (), listen: str = "127.0.0.1:0",
                 env: Optional[Dict[str, str]] = None, cmd: str = "serve"):
        self.defs, self.data = defs, data
        data.parent.mkdir(parents=True, exist_ok=True)
        self.log = data.parent / f"{data.name}.log"
        self.proc = subprocess.Popen(
            [WEIR, cmd, str(defs), "--data", str(data), "--listen", listen,
             "--durability", "flush", *args],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "w"), env=clean_env(env))
        self.url = wait_for("the engine file", 60, self._url)
        self.token = (data / "token").read_text().strip()

    def _url(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"weir exited {self.proc.returncode}: {self.log.read_text()}")
        try:
            info = json.loads((self.data / "engine.json").read_text())
        except (OSError, ValueError):
            return None
        return info["url"] if info.get("pid") == self.proc.pid else None

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([WEIR, *args, "--data", str(self.data)], capture_output=True, text=True,
                           env=clean_env(), timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"weir {args}: {r.returncode}: {r.stdout} {r.stderr}")
        return r

    def make_token(self, name: str, role: str) -> str:
        out = self.cli("token", "create", "--name", name, "--role", role, "--json").stdout
        return json.loads(out)["secret"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


#: No test may take longer than this (a hung call fails its test).
TEST_SECONDS_MAX = 150


@pytest.fixture(autouse=True)
def bounded():
    def expired(signum, frame):
        raise TimeoutError(f"the test took longer than {TEST_SECONDS_MAX} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_SECONDS_MAX)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def engines(tmp_path):
    made: List[Engine] = []

    def start(text_by_graph: Dict[str, str], args: List[str] = (), **kw) -> Engine:
        defs = tmp_path / f"defs{len(made)}"
        for name, text in text_by_graph.items():
            write_def(defs, name, text)
        e = Engine(defs, tmp_path / f"data{len(made)}", list(args), **kw)
        made.append(e)
        return e

    yield start
    for e in made:
        e.stop()


@pytest.fixture
def chain(engines):
    """An engine serving chain graph `g`."""
    return engines({"g": chain_def("g")})


def days(n: int, start: str = "2020-01-01") -> List[str]:
    import datetime
    d0 = datetime.date.fromisoformat(start)
    return [(d0 + datetime.timedelta(days=i)).isoformat() for i in range(n)]
