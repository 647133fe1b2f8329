"""What the sync and async clients share and that does no I/O: URLs of
operations, decoding answers into models or exceptions, naming transport
failures, TLS settings, the Server-Sent Events parser and the failover
plan."""

import json
import re
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple
from urllib.parse import quote

import httpx

from ._generated import OPERATIONS
from ._model import Operation, decode
from .errors import (CertificateRefused, ConfigError, ConnectionFailed, WeirError,
                     api_error)

#: How long one request may take (log follows and event streams are not
#: bounded by it), as the CLI's REQUEST_TIMEOUT.
REQUEST_TIMEOUT_S = 60.0
#: How long a client keeps trying a replicated engine's members while none
#: answers or a leader is being elected (the CLI's FAILOVER_WAIT).
FAILOVER_WAIT_S = 10.0
#: The pause after each round over the members.
FAILOVER_PAUSE_S = 0.2
#: A page of runs: the API's largest.
PAGE_RUNS_MAX = 1000
#: The engine sends a keep-alive comment every 15 s on an idle stream: a
#: stream silent for longer than this is taken as cut.
STREAM_SILENCE_S = 40.0
#: Run states that are final.
SETTLED = ("complete", "failed", "cancelled", "withdrawn")


def settled(state: Optional[str]) -> bool:
    return state in SETTLED


def span_of(partitions: Iterable[str]) -> Tuple[Optional[str], Optional[str]]:
    """The first and last of `partitions` (bounds of the list that holds
    them) when they are time windows, whose names sort as their instants;
    no bounds for keys."""
    ps = sorted(partitions)
    if ps and all(re.match(r"^\d{4}-", p) for p in ps):
        return ps[0], ps[-1]
    return None, None


def path_of(op_path: str, params: Dict[str, str]) -> str:
    """The operation's path with each parameter percent-encoded (as the
    CLI: everything but RFC 3986's unreserved characters). A value of only
    dots is refused: HTTP clients resolve it as a folder step."""

    def sub(m: "re.Match[str]") -> str:
        name = m.group(1).lstrip("*")
        v = params[name]
        if not isinstance(v, str) or v == "":
            raise ConfigError(f"{name}: an empty or non-string value cannot travel in a URL path")
        if v in (".", ".."):
            raise ConfigError(f"{v!r}: a name or key of only dots cannot travel in a URL path")
        if m.group(1).startswith("*"):
            return "/".join(quote(s, safe="-_.~") for s in v.split("/"))
        return quote(v, safe="-_.~")

    return re.sub(r"\{([^}]+)\}", sub, op_path)


def query_of(q: Dict[str, Any]) -> List[Tuple[str, str]]:
    out = []
    for k, v in q.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append((k, str(v)))
    return out


def body_of(b: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if b is None:
        return None
    return {k: v for k, v in b.items() if v is not None}


def decode_answer(op: Operation, status: int, content: bytes) -> Any:
    """The success body of `op` decoded, or the error it is raised."""
    text = content.decode("utf-8", "replace")
    resp = op.responses.get(str(status))
    if 200 <= status < 300:
        if resp is None or resp[0] == "json":
            try:
                value = json.loads(text) if text.strip() else None
            except ValueError:
                raise WeirError(f"{op.method} {op.path}: the engine's answer is not JSON: "
                                f"{text[:200]!r}") from None
            try:
                return decode(resp[1] if resp else "any", value)
            except (TypeError, KeyError, AttributeError) as e:
                raise WeirError(f"{op.method} {op.path}: the engine's answer is not what "
                                f"this client expects: {e}") from None
        if resp[0] == "raw":
            return content
        return None
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    outcome = None
    if status == 409 and resp is not None and resp[0] == "json" and resp[1] != "any" \
            and not (isinstance(body, dict) and "error" in body):
        try:
            outcome = decode(resp[1], body)
        except (TypeError, KeyError, AttributeError):
            outcome = body
    raise api_error(status, body, text, role=op.role, outcome=outcome)


def ssl_context(ca: Optional[str], ca_from: str) -> Any:
    """True (the system's roots), or a context trusting `ca` beside them."""
    if ca is None:
        return True
    ctx = ssl.create_default_context()
    try:
        ctx.load_verify_locations(cafile=ca)
    except FileNotFoundError:
        raise ConfigError(f"{ca_from} {ca}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as e:
        raise ConfigError(f"{ca_from} {ca}: not a PEM certificate: {e}") from None
    return ctx


def _chain(e: BaseException) -> Iterable[BaseException]:
    seen = set()
    x: Optional[BaseException] = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        yield x
        x = x.__cause__ or x.__context__


def transport_failure(e: Exception, url: str, ca: Optional[str]) -> Tuple[WeirError, bool]:
    """The exception for a transport failure `e` reaching `url`, and
    whether the request surely was not sent (so another member may be
    tried)."""
    text = " ".join(str(x) for x in _chain(e))
    if any(isinstance(x, ssl.SSLCertVerificationError) for x in _chain(e)) \
            or "CERTIFICATE_VERIFY_FAILED" in text:
        hint = (f"the CA {ca} did not sign it" if ca else
                "pass ca= (or set $WEIR_CA) with the CA certificate that signed it")
        return CertificateRefused(f"{url}: the engine's certificate was refused ({_short(text)}); "
                                  f"{hint}", url), False
    if "WRONG_VERSION_NUMBER" in text or "wrong version number" in text:
        return ConnectionFailed(f"{url}: the engine does not speak TLS there; "
                                "try http:// instead of https://", url), False
    if isinstance(e, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return ConfigError(f"engine URL {url!r}: {e}"), False
    if isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout)):
        return ConnectionFailed(f"{url}: no engine answers there ({_short(text)}); is "
                                "`weir serve` running, and is the URL right?", url), True
    if isinstance(e, httpx.TimeoutException):
        return ConnectionFailed(f"{url}: the engine did not answer in time ({type(e).__name__})",
                                url), False
    if isinstance(e, ssl.SSLError) or "SSL" in text:
        return ConnectionFailed(f"{url}: TLS failed: {_short(text)}", url), False
    return ConnectionFailed(f"{url}: the connection broke before an answer ({_short(text)})",
                            url), False


def _short(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "no detail"


@dataclass
class Failover:
    """Which base URL to try next: the members in turn while none
    answers or one answers 503, for up to `wait_s` (decide, then the
    caller does the I/O)."""

    bases: List[str]
    wait_s: float
    deadline: float = 0.0
    round: int = 0
    start: int = 0

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.wait_s

    def base(self) -> str:
        return self.bases[(self.start + self.round) % len(self.bases)]

    def last(self) -> bool:
        return len(self.bases) <= 1 and self.wait_s <= 0 or time.monotonic() >= self.deadline

    def next(self) -> float:
        """Moves to the next member; the pause to take before trying it."""
        self.round += 1
        return FAILOVER_PAUSE_S if self.round % len(self.bases) == 0 else 0.0


@dataclass
class Event:
    """One Server-Sent Event of the engine: ``id`` (``<epoch>-<seq>``, to
    resume from), ``kind`` (``run_settled``, ``completed``..., or
    ``reset``: the id resumed from is gone, refetch) and ``data`` (the
    event's fields, ``seq`` among them)."""

    id: Optional[str]
    kind: str
    data: Dict[str, Any] = field(default_factory=dict)


class SseParser:
    """Lines in, events out (the WHATWG event stream format)."""

    def __init__(self) -> None:
        self._id: Optional[str] = None
        self._kind = ""
        self._data: List[str] = []

    def line(self, line: str) -> Optional[Event]:
        if line == "":
            if not self._data and not self._kind:
                return None
            raw = "\n".join(self._data)
            try:
                data = json.loads(raw) if raw else {}
            except ValueError:
                data = {"text": raw}
            if not isinstance(data, dict):
                data = {"value": data}
            ev = Event(self._id, self._kind or "message", data)
            self._id, self._kind, self._data = None, "", []
            return ev
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "id":
            self._id = value
        elif name == "event":
            self._kind = value
        elif name == "data":
            self._data.append(value)
        return None


OP = OPERATIONS
