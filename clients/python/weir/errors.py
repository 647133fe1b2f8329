"""The exceptions the client raises: one per API error kind, each carrying
the server's message, and the client-side failures (no engine found, a
connection refused, a certificate refused, a wait that timed out). Every
one is a :class:`WeirError`; no exception of the HTTP library escapes."""

import re
from typing import Any, Dict, Optional, Type


class WeirError(Exception):
    """Anything the client raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(WeirError):
    """No engine could be found, or a URL, token file or CA file is
    unusable (the message names it and what to pass)."""


class ConnectionFailed(WeirError):
    """No engine answered at the URL (refused, unreachable, or the
    connection broke before an answer). ``url`` is the one tried last."""

    def __init__(self, message: str, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class CertificateRefused(ConnectionFailed):
    """The engine's TLS certificate was refused: pass ``ca=`` (or set
    ``$WEIR_CA``) with the CA that signed it."""


class WaitTimeout(WeirError, TimeoutError):
    """``wait`` gave up before the run settled; ``run`` is the last state
    seen (or ``None``)."""

    def __init__(self, message: str, run: Any = None) -> None:
        super().__init__(message)
        self.run = run


class ApiError(WeirError):
    """An answer that is not 2xx: ``status``, ``kind`` and ``message`` from
    the body ``{"error": {"status", "kind", "message"}}``, and ``body``,
    the decoded body."""

    status = 0

    def __init__(self, status: int, kind: str, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.body = body

    def __str__(self) -> str:
        return f"{self.status} {self.kind}: {self.message}"


class BadRequest(ApiError):
    """400: the message names the bad field (a malformed partition, an
    unknown param...)."""


class Unauthorized(ApiError):
    """401: no token, or one unknown, revoked or expired."""


class Forbidden(ApiError):
    """403: the token's role is below the route's. ``role`` is the role
    the route needs (``operator``, ``admin``)."""

    def __init__(self, status: int, kind: str, message: str, body: Any = None,
                 role: Optional[str] = None) -> None:
        super().__init__(status, kind, message, body)
        m = re.search(r"needs the (\w+) role", message)
        self.role = m.group(1) if m else role


class NotFound(ApiError):
    """404: the message names what is unknown (a graph, a run, a node)."""


class Conflict(ApiError):
    """409: the request conflicts with the state. ``outcome`` is the
    answer's decoded body when it is an outcome (a rerun's
    ``RerunAnswer``, a cancel's ``Cancelled``), else ``None``."""

    def __init__(self, status: int, kind: str, message: str, body: Any = None,
                 outcome: Any = None) -> None:
        super().__init__(status, kind, message, body)
        self.outcome = outcome


class PayloadTooLarge(ApiError):
    """413: the body is over the engine's limit (64 KiB)."""


class UnsupportedMediaType(ApiError):
    """415: the body is not JSON."""


class MethodNotAllowed(ApiError):
    """405: the path is served, but not with this method."""


class Unavailable(ApiError):
    """503: the engine is not ready, or a replicated engine has no leader
    (the client has retried its members until its failover wait)."""


class ServerError(ApiError):
    """Any other 5xx."""


BY_STATUS: Dict[int, Type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    503: Unavailable,
}


def api_error(status: int, body: Any, text: str, role: Optional[str] = None,
              outcome: Any = None) -> ApiError:
    """The exception for an answer `status` with `body` (decoded JSON, or
    None) and raw `text`."""
    kind, message = "http_%d" % status, "HTTP %d: %s" % (status, text.strip()[:500])
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        e = body["error"]
        kind = str(e.get("kind", kind))
        message = str(e.get("message", message))
    elif outcome is not None:
        kind = "conflict"
        o = outcome.to_json() if hasattr(outcome, "to_json") else outcome
        message = "refused: %s" % (o.get("outcome") if isinstance(o, dict) and "outcome" in o
                                   else o)
    cls = BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    if cls is Forbidden:
        return Forbidden(status, kind, message, body, role=role)
    if cls is Conflict:
        return Conflict(status, kind, message, body, outcome=outcome)
    return cls(status, kind, message, body)
