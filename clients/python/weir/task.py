"""For a command node written in Python: what weir gives the command, read
from its environment and files, and its output written where weir reads
it. No network call; the same on the engine's machine and on a worker.

    from weir import task

    task.graph, task.node, task.attempt, task.run_id
    task.partition            # "2026-11-29", with .start / .end (aware datetimes
                              # in the graph's zone) for a time window
    task.params               # {"region": "eu"}: the run's params
    task.upstream("extract").output      # its output, parsed when JSON
    task.artifact_in("extract", "raw.csv")   # a local path (fetched by weir)
    task.artifact_out("clean.csv")       # where to write a declared artifact
    task.set_output({"rows": 12})        # the node's output (JSON)
    task.traceparent          # the attempt's W3C trace context

What it reads (docs/definitions.md, Command): WEIR_GRAPH, WEIR_PARTITION,
WEIR_PARTITION_START/END (time partitionings), WEIR_NODE, WEIR_ATTEMPT,
WEIR_RUN_ID, WEIR_PARAMS (a JSON object), WEIR_UPSTREAMS (a JSON file),
WEIR_OUTPUT (a file, at most 1 MiB), WEIR_ARTIFACTS_IN, WEIR_ARTIFACTS_OUT,
WEIR_DATA, WEIR_WORKER, WEIR_MEMBER, WEIR_ITEM, TRACEPARENT.
"""

import json
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, Mapping, Optional

#: The largest output weir takes (the command task's OUTPUT_BYTES_MAX).
OUTPUT_BYTES_MAX = 1 << 20


class NotInWeir(RuntimeError):
    """The program does not run as a weir command node (a variable weir
    sets is missing)."""


class Partition(str):
    """A partition's name (``2026-11-29``, ``key=db1``, ``none``), with its
    window when it is a time window: ``start`` and ``end`` (half-open),
    aware datetimes in the graph's time zone; ``None`` otherwise."""

    start: Optional[datetime]
    end: Optional[datetime]

    def __new__(cls, name: str, start: Optional[str] = None,
                end: Optional[str] = None) -> "Partition":
        p = super().__new__(cls, name)
        p.start = _instant(start)
        p.end = _instant(end)
        return p

    @property
    def key(self) -> Optional[str]:
        """A keyed partition's key (``key=db1`` -> ``db1``)."""
        if self.startswith("key="):
            return self[4:].split("@", 1)[0]
        return None


def _instant(s: Optional[str]) -> Optional[datetime]:
    if not s:
        return None
    # Python 3.9's fromisoformat does not read a trailing Z.
    return datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith("Z") else s)


@dataclass
class Upstream:
    """An upstream node's record as weir handed it: ``status``
    (``succeeded``, ``failed``, ``skipped``...), ``rerun``, ``output``
    (parsed when it is JSON, else the text) and ``output_text``."""

    name: str
    status: str
    rerun: int
    output: Any
    output_text: str
    artifacts: str


class Task:
    """What weir gave this command, read from `env` (default: the
    process's environment)."""

    def __init__(self, env: Optional[Mapping[str, str]] = None) -> None:
        self._env = os.environ if env is None else env
        self._upstreams: Optional[Dict[str, Any]] = None

    def _var(self, name: str) -> str:
        v = self._env.get(name)
        if v is None:
            raise NotInWeir(f"${name} is not set: weir.task reads what weir gives a command "
                            "node; this program does not run as one")
        return v

    @property
    def in_weir(self) -> bool:
        """Whether this runs as a weir command node."""
        return "WEIR_RUN_ID" in self._env and "WEIR_OUTPUT" in self._env

    @property
    def graph(self) -> str:
        return self._var("WEIR_GRAPH")

    @property
    def node(self) -> str:
        return self._var("WEIR_NODE")

    @property
    def partition(self) -> Partition:
        return Partition(self._var("WEIR_PARTITION"), self._env.get("WEIR_PARTITION_START"),
                         self._env.get("WEIR_PARTITION_END"))

    @property
    def attempt(self) -> int:
        return int(self._var("WEIR_ATTEMPT"))

    @property
    def run_id(self) -> str:
        return self._var("WEIR_RUN_ID")

    @property
    def params(self) -> Dict[str, str]:
        raw = self._env.get("WEIR_PARAMS")
        if raw is None:
            self._var("WEIR_RUN_ID")
            return {}
        value = json.loads(raw)
        return dict(value) if isinstance(value, dict) else {}

    @property
    def worker(self) -> str:
        """The worker's id, or ``engine`` when the engine runs it."""
        return self._env.get("WEIR_WORKER", "engine")

    @property
    def member(self) -> Optional[int]:
        """A mapped node's member index, else None."""
        m = self._env.get("WEIR_MEMBER")
        return int(m) if m is not None else None

    @property
    def item(self) -> Any:
        """A mapped node's member's item (parsed JSON), else None."""
        i = self._env.get("WEIR_ITEM")
        return json.loads(i) if i is not None else None

    @property
    def data_dir(self) -> str:
        """A folder for the command's own files (it stays on this machine)."""
        return self._var("WEIR_DATA")

    @property
    def traceparent(self) -> Optional[str]:
        """The attempt's W3C ``traceparent``, for the command's own spans."""
        return self._env.get("TRACEPARENT")

    def _read_upstreams(self) -> Dict[str, Any]:
        if self._upstreams is None:
            path = self._var("WEIR_UPSTREAMS")
            with open(path, encoding="utf-8") as f:
                self._upstreams = json.load(f)
        return self._upstreams

    @property
    def upstreams(self) -> Dict[str, Upstream]:
        """Every upstream, by node name."""
        return {n: self.upstream(n) for n in self._read_upstreams()}

    def upstream(self, name: str) -> Upstream:
        """The upstream `name`'s record and output."""
        ups = self._read_upstreams()
        if name not in ups:
            have = ", ".join(sorted(ups)) or "none"
            raise KeyError(f"node {self._env.get('WEIR_NODE', '?')}: {name!r} is not an "
                           f"upstream (its upstreams: {have})")
        u = ups[name]
        text = u.get("output", "")
        try:
            output = json.loads(text) if text.strip() else None
        except ValueError:
            output = text
        arts = os.path.join(self._env.get("WEIR_ARTIFACTS_IN", ""), name)
        return Upstream(name, u.get("status", ""), int(u.get("rerun", 0)), output, text, arts)

    def set_output(self, value: Any) -> None:
        """Writes the node's output: a str or bytes as it is, anything
        else as JSON. At most 1 MiB."""
        if isinstance(value, bytes):
            data = value
        elif isinstance(value, str):
            data = value.encode("utf-8")
        else:
            data = json.dumps(value, separators=(",", ":")).encode("utf-8")
        if len(data) > OUTPUT_BYTES_MAX:
            raise ValueError(f"the output is {len(data)} bytes; weir takes at most "
                             f"{OUTPUT_BYTES_MAX} (put large data in an artifact)")
        path = self._var("WEIR_OUTPUT")
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def artifact_in(self, upstream: str, name: str) -> str:
        """The local path of upstream `upstream`'s artifact `name` (weir
        fetched and checked it before the command started)."""
        path = os.path.join(self._var("WEIR_ARTIFACTS_IN"), upstream, *_relative(name).split("/"))
        if not os.path.exists(path):
            raise FileNotFoundError(f"upstream {upstream!r} left no artifact {name!r} "
                                    f"(looked at {path})")
        return path

    def artifact_out(self, name: str) -> str:
        """Where to write artifact `name` (a name the node's ``artifacts``
        patterns match); its folders are made."""
        path = os.path.join(self._var("WEIR_ARTIFACTS_OUT"), *_relative(name).split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path


def _relative(name: str) -> str:
    parts = name.replace("\\", "/").split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"artifact name {name!r}: a relative path without '..', '.' or "
                         "empty parts")
    return "/".join(parts)


def _current() -> Task:
    return Task()


def upstream(name: str) -> Upstream:
    return _current().upstream(name)


def set_output(value: Any) -> None:
    _current().set_output(value)


def artifact_in(upstream: str, name: str) -> str:
    return _current().artifact_in(upstream, name)


def artifact_out(name: str) -> str:
    return _current().artifact_out(name)


_ATTRS = ("graph", "node", "partition", "attempt", "run_id", "params", "worker", "member",
          "item", "data_dir", "traceparent", "upstreams", "in_weir")


def __getattr__(name: str) -> Any:
    # `task.graph` and the others read the environment when asked (PEP 562).
    if name in _ATTRS:
        return getattr(_current(), name)
    raise AttributeError(f"module 'weir.task' has no attribute {name!r}")
