"""The codec of the parent<->child records (`kernelbench.harness.protocol`): a frozen dataclass to JSON-ready
values and back, exactly. `from_plain` requires every field, refuses unknown keys and checks each value against
its annotation, so a key one end forgot to write is an error, never a silent default (STYLE.md).

Imports only the standard library: the sandboxed child imports it before the candidate, and cheaply.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

R = TypeVar("R")


class ProtocolError(ValueError):
    """A message that is not exactly one of the records below (missing, unknown or mistyped field)."""


# --- the codec: every record below goes through these two functions ------------------------------------

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def to_plain(value: Any) -> Any:
    """A record (or a value inside one) as JSON-ready lists, dicts and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def from_plain(cls: type[R], data: Any, where: str = "") -> R:
    """`cls` built from `data`, exactly: every field present, no other key, each value of its annotated type."""
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: expected an object, got {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in data]
    unknown = [k for k in data if k not in names]
    if missing or unknown:
        raise ProtocolError(f"{where}: missing fields {missing}, unknown fields {sorted(map(str, unknown))}")
    hints = _hints(cls)
    return cls(**{n: value_of(hints[n], data[n], f"{where}.{n}") for n in names})


def value_of(tp: Any, value: Any, where: str) -> Any:
    """`value` read as annotation `tp` requires (records inside as `from_plain` reads them); `where` names it in
    the error."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return value_of(inner, value, where)
    if dataclasses.is_dataclass(tp):
        return from_plain(tp, value, where)
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list, got {type(value).__name__}")
        if origin is list:
            return [value_of(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(value_of(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ProtocolError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(value_of(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(value).__name__}")
        return {k: value_of(args[1], v, f"{where}[{k!r}]") for k, v in value.items()}
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp in (int, str, bool) and isinstance(value, tp) and (tp is bool or not isinstance(value, bool)):
        return value
    raise ProtocolError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {type(value).__name__}")


class Record:
    """`to_dict` / `from_dict` of a frozen record (the codec above)."""

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        return from_plain(cls, data)
