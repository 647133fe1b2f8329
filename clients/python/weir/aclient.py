"""The asynchronous client: :class:`AsyncClient`, the same operations as
:class:`weir.Client` as coroutines and async iterators (see client.py for
how the engine is found and how a replicated engine's members are
tried)."""

import asyncio
import ssl
import time
from typing import Any, AsyncIterator, Dict, List, Optional, Sequence, Union

import httpx

from . import _core
from ._core import OP, Event, Failover, SseParser, settled
from ._discover import PathLike, find
from ._generated import (AsyncApi, Backfill, Cancelled, ClearedNode, LogLine, RerunAnswer,
                         RunBrief, RunWithLive, StartOutcome)
from .client import Partitions, _parts
from .errors import ConnectionFailed, Unavailable, WaitTimeout, WeirError


class AsyncClient:
    """As :class:`weir.Client`, async: ``await client.start(...)``,
    ``async for run in client.runs()``. Use it as ``async with``, or call
    ``await client.aclose()``."""

    def __init__(self, url: Union[None, str, Sequence[str]] = None, token: Optional[str] = None,
                 token_file: Optional[PathLike] = None, ca: Optional[PathLike] = None,
                 data: Optional[PathLike] = None, timeout: float = _core.REQUEST_TIMEOUT_S,
                 failover_wait: float = _core.FAILOVER_WAIT_S,
                 max_connections: int = 100) -> None:
        found = find(url, token, token_file, ca, data)
        self.urls: List[str] = found.urls
        self.data = found.data
        self._ca = found.ca
        verify = _core.ssl_context(found.ca, "ca=" if ca is not None else "$WEIR_CA=")
        self._timeout = timeout
        self._failover_wait = failover_wait
        self._current = 0
        self._learned: Optional[asyncio.Future] = None
        self._http = httpx.AsyncClient(
            verify=verify, timeout=timeout, follow_redirects=False,
            limits=httpx.Limits(max_connections=max_connections),
            headers={"Authorization": f"Bearer {found.token}"})
        self.api = AsyncApi(self._call)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _request(self, method: str, path: str, query: Any = None, body: Any = None,
                       stream: bool = False, timeout: Any = None,
                       headers: Optional[Dict[str, str]] = None,
                       learn: bool = True) -> httpx.Response:
        if learn:
            await self._learn_once()
        plan = Failover(self.urls, self._failover_wait if len(self.urls) > 1 else 0.0,
                        start=self._current)
        t = self._timeout if timeout is None else timeout
        while True:
            base = plan.base()
            try:
                req = self._http.build_request(method, base + path, params=query, json=body,
                                               headers=headers, timeout=t)
                resp = await self._http.send(req, stream=stream)
            except (httpx.HTTPError, ssl.SSLError, OSError, ValueError) as e:
                err, unsent = _core.transport_failure(e, base, self._ca)
                if not unsent or plan.last():
                    raise err from None
                await asyncio.sleep(plan.next())
                continue
            if resp.status_code == 503 and not plan.last():
                await resp.aclose()
                await asyncio.sleep(plan.next())
                continue
            self._current = self.urls.index(base)
            return resp

    async def _learn_once(self) -> None:
        # One look at the members view, shared by the requests that start
        # together.
        if self._learned is None:
            self._learned = asyncio.ensure_future(self._learn_members())
        await asyncio.shield(self._learned)

    async def _learn_members(self) -> None:
        try:
            r = await self._request("GET", "/api/v1/members", timeout=min(self._timeout, 5.0),
                                    learn=False)
            if r.status_code != 200:
                return
            for m in r.json().get("members", []):
                u = m.get("api_url")
                if isinstance(u, str) and u.rstrip("/") not in self.urls:
                    self.urls.append(u.rstrip("/"))
        except (WeirError, ValueError, AttributeError):
            return

    async def _call(self, op: Any, pp: Dict[str, str], q: Dict[str, Any],
                    b: Optional[Dict[str, Any]]) -> Any:
        resp = await self._request(op.method, _core.path_of(op.path, pp), _core.query_of(q),
                                   _core.body_of(b))
        return _core.decode_answer(op, resp.status_code, resp.content)

    # -- runs --------------------------------------------------------------------
    async def start(self, graph: str, partitions: Partitions,
                    params: Optional[Dict[str, str]] = None) -> List[StartOutcome]:
        return await self.api.post_graphs_graph_runs(graph, partitions=_parts(partitions),
                                                     params=params)

    async def backfill(self, graph: str, from_: str, to: str,
                       order: Optional[str] = None) -> Backfill:
        return await self.api.post_graphs_graph_backfills(graph, from_=from_, to=to, order=order)  # type: ignore[arg-type]

    async def rerun(self, graph: str, partition: str, node: str,
                    downstream: Optional[bool] = None) -> RerunAnswer:
        return await self.api.post_graphs_graph_runs_partition_nodes_node_rerun(
            graph, partition, node, downstream=downstream)

    async def cancel(self, graph: str, partition: str) -> Cancelled:
        return await self.api.post_graphs_graph_runs_partition_cancel(graph, partition)

    async def clear(self, graph: str, partition: str) -> List[ClearedNode]:
        return await self.api.post_graphs_graph_runs_partition_clear(graph, partition)

    async def mark(self, graph: str, partition: str, node: str, state: str) -> Any:
        return await self.api.post_graphs_graph_runs_partition_nodes_node_mark(
            graph, partition, node, state=state)  # type: ignore[arg-type]

    async def status(self, graph: str, partition: str) -> RunWithLive:
        return await self.api.get_graphs_graph_runs_partition(graph, partition)

    async def runs(self, graph: Optional[str] = None, state: Optional[str] = None,
                   from_: Optional[str] = None, to: Optional[str] = None,
                   page_size: int = _core.PAGE_RUNS_MAX) -> AsyncIterator[RunBrief]:
        cursor = None
        while True:
            page = await self.api.get_runs(graph=graph, state=state, from_=from_, to=to,  # type: ignore[arg-type]
                                           limit=page_size, cursor=cursor)
            for r in page.runs:
                yield r
            cursor = page.next_cursor
            if not cursor:
                return

    async def wait(self, graph: str, partition: str,
                   timeout: Optional[float] = 300.0) -> RunWithLive:
        await self.wait_all(graph, [partition], timeout)
        for _ in range(3):
            try:
                return await self.status(graph, partition)
            except (ConnectionFailed, Unavailable):
                await asyncio.sleep(0.2)  # a read cut by a failover: safe to repeat
        return await self.status(graph, partition)

    async def wait_all(self, graph: str, partitions: Sequence[str],
                       timeout: Optional[float] = 300.0) -> Dict[str, str]:
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
                resp = await self._open_events(last_id, quiet)
            except (ConnectionFailed, Unavailable):
                await asyncio.sleep(min(0.2, left()))
                continue
            try:
                try:
                    await self._settle_known(graph, pending, done, left)
                except (ConnectionFailed, Unavailable):
                    # A read cut by a failover: reads are safe to repeat.
                    continue
                if not pending:
                    break
                async for ev in self._read_events(resp):
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
                pass
            finally:
                await resp.aclose()
        return done

    async def _settle_known(self, graph: str, pending: set, done: Dict[str, str],
                            left: Any) -> None:
        if len(pending) <= 8:
            for p in sorted(pending):
                try:
                    run = await self.status(graph, p)
                except WeirError as e:
                    if getattr(e, "status", 0) == 404:
                        continue
                    raise
                if settled(run.state):
                    pending.discard(p)
                    done[p] = run.state
            return
        async for brief in self.runs(graph, None, *_core.span_of(pending)):
            if brief.partition in pending and settled(brief.state):
                pending.discard(brief.partition)
                done[brief.partition] = brief.state
            left()

    # -- streams -------------------------------------------------------------------
    async def _open_events(self, last_id: Optional[str], read_timeout: float) -> httpx.Response:
        headers = {"Accept": "text/event-stream"}
        if last_id:
            headers["Last-Event-ID"] = last_id
        t = httpx.Timeout(self._timeout, read=read_timeout)
        resp = await self._request("GET", "/api/v1/events", stream=True, timeout=t,
                                   headers=headers)
        if resp.status_code != 200:
            await resp.aread()
            _core.decode_answer(OP["get_events"], resp.status_code, resp.content)
        return resp

    @staticmethod
    async def _read_events(resp: httpx.Response) -> AsyncIterator[Event]:
        parser = SseParser()
        async for line in resp.aiter_lines():
            ev = parser.line(line)
            if ev is not None:
                yield ev

    async def events(self, since: Optional[str] = None) -> AsyncIterator[Event]:
        last_id = since
        while True:
            try:
                resp = await self._open_events(last_id, _core.STREAM_SILENCE_S)
            except (ConnectionFailed, Unavailable):
                await asyncio.sleep(0.2)
                resp = await self._open_events(last_id, _core.STREAM_SILENCE_S)
            try:
                async for ev in self._read_events(resp):
                    if ev.id:
                        last_id = ev.id
                    elif ev.kind == "reset":
                        last_id = None
                    yield ev
            except (httpx.HTTPError, ssl.SSLError, OSError):
                pass
            finally:
                await resp.aclose()

    async def logs(self, graph: str, partition: str, node: str, attempt: Optional[int] = None,
                   follow: bool = False) -> AsyncIterator[LogLine]:
        op = OP["get_graphs_graph_runs_partition_nodes_node_logs"]
        if not follow:
            from_line = 0
            while True:
                chunk = await self.api.get_graphs_graph_runs_partition_nodes_node_logs(
                    graph, partition, node, attempt=attempt, from_line=from_line)
                for line in chunk.lines:
                    yield line
                if not chunk.lines:
                    return
                from_line = chunk.next_line
        path = _core.path_of(op.path, {"graph": graph, "partition": partition, "node": node})
        resp = await self._request("GET", path, _core.query_of({"attempt": attempt, "follow": True}),
                                   stream=True, timeout=httpx.Timeout(self._timeout, read=None))
        try:
            if resp.status_code != 200:
                await resp.aread()
                _core.decode_answer(op, resp.status_code, resp.content)
            if not resp.headers.get("content-type", "").startswith("text/event-stream"):
                await resp.aread()
                for line in _core.decode_answer(op, 200, resp.content).lines:
                    yield line
                return
            async for ev in self._read_events(resp):
                if ev.kind == "line":
                    yield LogLine.from_json(ev.data)
                elif ev.kind == "error":
                    raise WeirError(f"log of {graph} {partition} {node}: {ev.data}")
                elif ev.kind == "end":
                    return
        except (httpx.HTTPError, ssl.SSLError, OSError) as e:
            raise _core.transport_failure(e, self.urls[self._current], self._ca)[0] from None
        finally:
            await resp.aclose()


__all__ = ["AsyncClient"]
