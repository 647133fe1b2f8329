"""The runtime the generated models and operations stand on: decoding JSON
into dataclasses by the small specs the generator writes, and the record of
one operation."""

import dataclasses
from typing import Any, ClassVar, Dict, NamedTuple, Optional, Tuple, Type, TypeVar

M = TypeVar("M", bound="Model")


class Operation(NamedTuple):
    """One operation of the document: its id, method, path template, the
    role it needs (``None``: no token), and by status how its answer
    decodes: ``("json", spec)``, ``("raw", _)`` or ``("none", _)``."""

    id: str
    method: str
    path: str
    role: Optional[str]
    responses: Dict[str, Tuple[str, Any]]


class Model:
    """A body of the API. Fields the server adds later are kept in
    ``extra`` rather than refused, so an older client reads a newer
    engine."""

    _FIELDS: ClassVar[Dict[str, Tuple[str, Any]]] = {}

    @classmethod
    def from_json(cls: Type[M], value: Any) -> M:
        if not isinstance(value, dict):
            raise TypeError(f"{cls.__name__}: expected an object, got {type(value).__name__}")
        kwargs: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        for k, v in value.items():
            f = cls._FIELDS.get(k)
            if f is None:
                extra[k] = v
            else:
                kwargs[f[0]] = decode(f[1], v)
        if len(kwargs) < len(cls._FIELDS):
            # A field an older engine does not send: None rather than a
            # refusal of the whole body.
            for fd in dataclasses.fields(cls):  # type: ignore[arg-type]
                if fd.name not in kwargs and fd.default is dataclasses.MISSING \
                        and fd.default_factory is dataclasses.MISSING:  # type: ignore[misc]
                    kwargs[fd.name] = None
        obj = cls(**kwargs)
        object.__setattr__(obj, "extra", extra)
        return obj

    def to_json(self) -> Dict[str, Any]:
        """The body as JSON values, under the API's names."""
        names = {py: js for js, (py, _) in self._FIELDS.items()}
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            out[names.get(f.name, f.name)] = _plain(getattr(self, f.name))
        return out


def _plain(v: Any) -> Any:
    if isinstance(v, Model):
        return v.to_json()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def decode(spec: Any, value: Any) -> Any:
    """`value` decoded by `spec` ("any", ["ref", Name], ["list", s],
    ["map", s], ["opt", s])."""
    if spec == "any" or value is None:
        return value
    tag = spec[0]
    if tag == "ref":
        from ._generated import MODELS

        return MODELS[spec[1]].from_json(value)  # type: ignore[attr-defined]
    if tag == "list":
        return [decode(spec[1], x) for x in value]
    if tag == "map":
        return {k: decode(spec[1], x) for k, x in value.items()}
    if tag == "opt":
        return decode(spec[1], value)
    return value
