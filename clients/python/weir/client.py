"""The synchronous client: :class:`Client`.

It finds the engine as the CLI does (see :mod:`weir._discover`), sends
each request to the member that answered last, and to a replicated
engine's other members in turn while one cannot be connected to or answers
503 (no leader yet), for up to ``failover_wait`` seconds. A request that
may have reached an engine is never sent twice: a connection cut after the
request was sent raises :class:`~weir.errors.ConnectionFailed`."""

import ssl
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import httpx

from . import _core
from ._core import OP, Event, Failover, SseParser, settled
from ._discover import PathLike, find
from ._generated import (Api, Backfill, Cancelled, ClearedNode, LogLine, RerunAnswer, RunBrief,
                         RunWithLive, StartOutcome)
from .errors import ConnectionFailed, Unavailable, WaitTimeout, WeirError

Partitions = Union[str, Sequence[str]]


def _parts(p: Partitions) -> List[str]:
    return [p] if isinstance(p, str) else list(p)


class Client:
    """A connection to a weir engine.

    ``url``: the engine's URL, or several (a list, or comma-separated) for
    a replicated engine's members; default ``$WEIR_ENGINE``, else the data
    directory's ``engine.json``. ``token`` / ``token_file``: default
    ``$WEIR_TOKEN``, else ``DATA/token``. ``ca``: a PEM file of a private
    CA to trust beside the system's (default ``$WEIR_CA``). ``data``: the
    data directory (default ``$WEIR_DATA_DIR``, ``./.weir``, or the one
    ``weir run``/``serve`` recorded for this folder).

    ``client.api`` has every operation of the OpenAPI document (generated);
    the methods here are the everyday ones."""

    def __init__(self, url: Union[None, str, Sequence[str]] = None, token: Optional[str] = None,
                 token_file: Optional[PathLike] = None, ca: Optional[PathLike] = None,
                 data: Optional[PathLike] = None, timeout: float = _core.REQUEST_TIMEOUT_S,
                 failover_wait: float = _core.FAILOVER_WAIT_S) -> None:
        found = find(url, token, token_file, ca, data)
        self.urls: List[str] = found.urls
        self.data = found.data
        self._ca = found.ca
        verify = _core.ssl_context(found.ca, "ca=" if ca is not None else "$WEIR_CA=")
        self._timeout = timeout
        self._failover_wait = failover_wait
        self._current = 0
        self._learned = False
        self._http = httpx.Client(verify=verify, timeout=timeout, follow_redirects=False,
                                  headers={"Authorization": f"Bearer {found.token}"})
        self.api = Api(self._call)

    # -- plumbing ----------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _request(self, method: str, path: str, query: Any = None, body: Any = None,
                 stream: bool = False, timeout: Optional[float] = None,
                 headers: Optional[Dict[str, str]] = None) -> httpx.Response:
        if not self._learned:
            self._learned = True
            self._learn_members()
        plan = Failover(self.urls, self._failover_wait if len(self.urls) > 1 else 0.0,
                        start=self._current)
        t = self._timeout if timeout is None else timeout
        while True:
            base = plan.base()
            try:
                req = self._http.build_request(method, base + path, params=query, json=body,
                                               headers=headers, timeout=t)
                resp = self._http.send(req, stream=stream)
            except (httpx.HTTPError, ssl.SSLError, OSError, ValueError) as e:
                err, unsent = _core.transport_failure(e, base, self._ca)
                if not unsent or plan.last():
                    raise err from None
                time.sleep(plan.next())
                continue
            if resp.status_code == 503 and not plan.last():
                resp.close()
                time.sleep(plan.next())
                continue
            self._current = self.urls.index(base)
            return resp

    def _learn_members(self) -> None:
        """A replicated engine's members' URLs (its members view), added to
        those known; a single engine answers 404 and has none."""
        try:
            r = self._request("GET", "/api/v1/members", timeout=min(self._timeout, 5.0))
            if r.status_code != 200:
                return
            for m in r.json().get("members", []):
                u = m.get("api_url")
                if isinstance(u, str) and u.rstrip("/") not in self.urls:
                    self.urls.append(u.rstrip("/"))
        except (WeirError, ValueError, AttributeError):
            return

    def _call(self, op: Any, pp: Dict[str, str], q: Dict[str, Any],
              b: Optional[Dict[str, Any]], timeout: Optional[float] = None) -> Any:
        resp = self._request(op.method, _core.path_of(op.path, pp), _core.query_of(q),
                             _core.body_of(b), timeout=timeout)
        return _core.decode_answer(op, resp.status_code, resp.content)

    # -- runs --------------------------------------------------------------------
    def start(self, graph: str, partitions: Partitions,
              params: Optional[Dict[str, str]] = None) -> List[StartOutcome]:
        """Starts the runs of `partitions` (at most once each: ``started``
        is false when one existed)."""
        return self.api.post_graphs_graph_runs(graph, partitions=_parts(partitions), params=params)

    def backfill(self, graph: str, from_: str, to: str, order: Optional[str] = None) -> Backfill:
        """Backfills the windows `from_` ..= `to` (``order``: ``oldest`` or
        ``newest`` first), paced by the graph's max_active_runs."""
        return self.api.post_graphs_graph_backfills(graph, from_=from_, to=to, order=order)  # type: ignore[arg-type]

    def rerun(self, graph: str, partition: str, node: str,
              downstream: Optional[bool] = None) -> RerunAnswer:
        """Reruns `node` (and its downstreams). A refusal raises
        :class:`~weir.errors.Conflict` with the outcome."""
        return self.api.post_graphs_graph_runs_partition_nodes_node_rerun(
            graph, partition, node, downstream=downstream)

    def cancel(self, graph: str, partition: str) -> Cancelled:
        """Cancels an active run (a run not active: Conflict)."""
        return self.api.post_graphs_graph_runs_partition_cancel(graph, partition)

    def clear(self, graph: str, partition: str) -> List[ClearedNode]:
        """Reruns every failed node of the run, with their downstreams."""
        return self.api.post_graphs_graph_runs_partition_clear(graph, partition)

    def mark(self, graph: str, partition: str, node: str, state: str) -> Any:
        """Marks `node` ``succeeded`` or ``failed``."""
        return self.api.post_graphs_graph_runs_partition_nodes_node_mark(
            graph, partition, node, state=state)  # type: ignore[arg-type]

    def status(self, graph: str, partition: str) -> RunWithLive:
        """The run with its nodes."""
        return self.api.get_graphs_graph_runs_partition(graph, partition)

    def runs(self, graph: Optional[str] = None, state: Optional[str] = None,
             from_: Optional[str] = None, to: Optional[str] = None,
             page_size: int = _core.PAGE_RUNS_MAX) -> Iterator[RunBrief]:
        """Every run (newest partition first), page after page: memory
        stays that of one page however many runs there are."""
        cursor = None
        while True:
            page = self.api.get_runs(graph=graph, state=state, from_=from_, to=to,  # type: ignore[arg-type]
                                     limit=page_size, cursor=cursor)
            yield from page.runs
            cursor = page.next_cursor
            if not cursor:
                return

    def wait(self, graph: str, partition: str, timeout: Optional[float] = 300.0) -> RunWithLive:
        """The run once settled (complete, failed, cancelled, withdrawn),
        from the event stream; :class:`~weir.errors.WaitTimeout` after
        `timeout` seconds (``None``: no limit). A run that fails is
        returned, not raised: look at its ``state``."""
        self.wait_all(graph, [partition], timeout)
        for _ in range(3):
            try:
                return self.status(graph, partition)
            except (ConnectionFailed, Unavailable):
                time.sleep(0.2)  # a read cut by a failover: safe to repeat
        return self.status(graph, partition)

    def wait_all(self, graph: str, partitions: Sequence[str],
                 timeout: Optional[float] = 300.0) -> Dict[str, str]:
        """Waits until every run of `partitions` settles, from one event
        stream; their final states by partition."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = set(partitions)
        done: Dict[str, str] = {}
        last_id: Optional[str] = None

        def left() -> float:
            if deadline is None:
                return _core.STREAM_SILENCE_S
            r = deadline - time.monotonic()
            if r <= 0:
                raise WaitTimeout(f"{graph}: {len(pending)} run(s) not settled after {timeout}s "
                                  f"(e.g. {sorted(pending)[0]})")
            return r

        while pending:
            quiet = min(left(), 10.0)
            try:
                resp = self._open_events(last_id, quiet)
            except (ConnectionFailed, Unavailable):
                time.sleep(min(0.2, left()))
                continue
            try:
                try:
                    self._settle_known(graph, pending, done, left)
                except (ConnectionFailed, Unavailable):
                    # A read cut by a failover: reads are safe to repeat.
                    continue
                if not pending:
                    break
                for ev in self._read_events(resp):
                    if ev.id:
                        last_id = ev.id
                    if ev.kind == "reset":
                        last_id = None
                        break
                    if ev.kind == "run_settled" and ev.data.get("graph") == graph \
                            and ev.data.get("partition") in pending:
                        pending.discard(ev.data["partition"])
                        done[ev.data["partition"]] = ev.data.get("state", "")
                        if not pending:
                            break
                    left()
            except (httpx.HTTPError, ssl.SSLError, OSError):
                pass  # cut or quiet: reopen from the last id, and look again
            finally:
                resp.close()
        return done

    def _settle_known(self, graph: str, pending: set, done: Dict[str, str], left: Any) -> None:
        if len(pending) <= 8:
            for p in sorted(pending):
                try:
                    run = self.status(graph, p)
                except WeirError as e:
                    if getattr(e, "status", 0) == 404:
                        continue  # not started yet (a backfill's): its start comes as an event
                    raise
                if settled(run.state):
                    pending.discard(p)
                    done[p] = run.state
            return
        for brief in self.runs(graph, None, *_core.span_of(pending)):
            if brief.partition in pending and settled(brief.state):
                pending.discard(brief.partition)
                done[brief.partition] = brief.state
            left()

    # -- streams -------------------------------------------------------------------
    def _open_events(self, last_id: Optional[str], read_timeout: float) -> httpx.Response:
        headers = {"Accept": "text/event-stream"}
        if last_id:
            headers["Last-Event-ID"] = last_id
        t = httpx.Timeout(self._timeout, read=read_timeout)
        resp = self._request("GET", "/api/v1/events", stream=True, timeout=t, headers=headers)  # type: ignore[arg-type]
        if resp.status_code != 200:
            resp.read()
            _core.decode_answer(OP["get_events"], resp.status_code, resp.content)
        return resp

    @staticmethod
    def _read_events(resp: httpx.Response) -> Iterator[Event]:
        parser = SseParser()
        for line in resp.iter_lines():
            ev = parser.line(line)
            if ev is not None:
                yield ev

    def events(self, since: Optional[str] = None) -> Iterator[Event]:
        """The engine's events as they come (after the event id `since`,
        when given). A cut stream is reopened with ``Last-Event-ID``: no
        event is lost or repeated; an id the engine no longer holds gives
        one ``reset`` event (refetch what you follow)."""
        last_id = since
        while True:
            try:
                resp = self._open_events(last_id, _core.STREAM_SILENCE_S)
            except (ConnectionFailed, Unavailable):
                time.sleep(0.2)
                resp = self._open_events(last_id, _core.STREAM_SILENCE_S)
            try:
                for ev in self._read_events(resp):
                    if ev.id:
                        last_id = ev.id
                    elif ev.kind == "reset":
                        last_id = None
                    yield ev
            except (httpx.HTTPError, ssl.SSLError, OSError):
                pass
            finally:
                resp.close()

    def logs(self, graph: str, partition: str, node: str, attempt: Optional[int] = None,
             follow: bool = False) -> Iterator[LogLine]:
        """A node's log lines; with ``follow``, those of the running
        attempt as they come, until it ends."""
        path = _core.path_of(OP["get_graphs_graph_runs_partition_nodes_node_logs"].path,
                             {"graph": graph, "partition": partition, "node": node})
        if not follow:
            from_line = 0
            while True:
                chunk = self.api.get_graphs_graph_runs_partition_nodes_node_logs(
                    graph, partition, node, attempt=attempt, from_line=from_line)
                yield from chunk.lines
                if not chunk.lines:
                    return
                from_line = chunk.next_line
        q = _core.query_of({"attempt": attempt, "follow": True})
        resp = self._request("GET", path, q, stream=True,
                             timeout=httpx.Timeout(self._timeout, read=None))  # type: ignore[arg-type]
        try:
            if resp.status_code != 200:
                resp.read()
                _core.decode_answer(OP["get_graphs_graph_runs_partition_nodes_node_logs"],
                                    resp.status_code, resp.content)
            if not resp.headers.get("content-type", "").startswith("text/event-stream"):
                resp.read()
                chunk = _core.decode_answer(OP["get_graphs_graph_runs_partition_nodes_node_logs"],
                                            200, resp.content)
                yield from chunk.lines
                return
            for ev in self._read_events(resp):
                if ev.kind == "line":
                    yield LogLine.from_json(ev.data)
                elif ev.kind == "error":
                    raise WeirError(f"log of {graph} {partition} {node}: {ev.data}")
                elif ev.kind == "end":
                    return
        except (httpx.HTTPError, ssl.SSLError, OSError) as e:
            raise _core.transport_failure(e, self.urls[self._current], self._ca)[0] from None
        finally:
            resp.close()


__all__ = ["Client", "Event"]
