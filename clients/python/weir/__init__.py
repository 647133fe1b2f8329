"""weir from Python: a typed client for the engine's HTTP API
(:class:`Client`, :class:`AsyncClient`) and a helper for command nodes
written in Python (:mod:`weir.task`).

The models and the low-level operations (``client.api``) are generated
from weir's OpenAPI document by ``generate.py``; see docs/python.md.

The client needs httpx; ``weir.task`` and ``weir.errors`` need only the
standard library, so a command node can ``from weir import task`` on a
machine where httpx is not installed: the client's modules are imported
when first asked for."""

from typing import TYPE_CHECKING, Any

from .errors import (ApiError, BadRequest, CertificateRefused, ConfigError, Conflict,
                     ConnectionFailed, Forbidden, MethodNotAllowed, NotFound, PayloadTooLarge,
                     ServerError, Unauthorized, Unavailable, UnsupportedMediaType, WaitTimeout,
                     WeirError)

if TYPE_CHECKING:  # pragma: no cover
    from ._core import Event
    from ._generated import *  # noqa: F401,F403
    from .aclient import AsyncClient
    from .client import Client

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "Event", "WeirError", "ConfigError", "ConnectionFailed",
    "CertificateRefused", "WaitTimeout", "ApiError", "BadRequest", "Unauthorized", "Forbidden",
    "NotFound", "MethodNotAllowed", "Conflict", "PayloadTooLarge", "UnsupportedMediaType",
    "Unavailable", "ServerError",
]


def __getattr__(name: str) -> Any:
    # PEP 562: the client (and httpx) load on first use.
    import importlib

    if name.startswith("_"):
        raise AttributeError(f"module 'weir' has no attribute {name!r}")
    if name == "Client":
        from .client import Client
        return Client
    if name == "AsyncClient":
        from .aclient import AsyncClient
        return AsyncClient
    if name == "Event":
        from ._core import Event
        return Event
    if name in ("task", "errors"):
        return importlib.import_module(f"weir.{name}")
    _generated = importlib.import_module("weir._generated")
    if hasattr(_generated, name) and not name.startswith("_"):
        return getattr(_generated, name)
    raise AttributeError(f"module 'weir' has no attribute {name!r}")
