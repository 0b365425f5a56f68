"""Strict decoding of report dataclasses from untrusted JSON (audit cache entries).

`report.model`'s readers trust their input; a cache entry is data anyone could have written.
Here every field is checked against the dataclass's type hints (no missing or extra keys, no
wrong types, no non-finite numbers, enums by value) and the free-form dict fields the renderers
read must have their keys, so whatever passes renders without an exception. Anything else raises
`BadEntry`, which the cache treats as a miss.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from enum import Enum
from functools import lru_cache
from typing import Any

from ..report.model import ErrorReport, Finding, KernelReport


class BadEntry(ValueError):
    """The JSON does not have the shape of the report it claims to be."""


# keys the text, SARIF and baseline code read from the dict-typed fields of a finding
_DICT_SHAPES: dict[tuple[type, str], dict[str, type | tuple[type, ...]]] = {
    (Finding, "replay"): {"confirmed": bool, "detail": str, "observed": dict},
    (Finding, "suppression"): {"kind": str, "justification": str},
    (Finding, "violation_set"): {"variables": list, "count": int, "total": int, "complete": bool, "cubes": list,
                                 "description": str},
}


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _json_value(x: Any, where: str) -> None:
    """Plain JSON only (what json.loads gives, minus NaN/Infinity)."""
    if x is None or isinstance(x, (bool, int, str)):
        return
    if isinstance(x, float):
        if not math.isfinite(x):
            raise BadEntry(f"{where}: non-finite number")
        return
    if isinstance(x, list):
        for i, v in enumerate(x):
            _json_value(v, f"{where}[{i}]")
        return
    if isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                raise BadEntry(f"{where}: non-string key")
            _json_value(v, f"{where}.{k}")
        return
    raise BadEntry(f"{where}: not JSON")


def _value(tp: Any, x: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        _json_value(x, where)
        return x
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if x is None and type(None) in options:
            return None
        last: BadEntry | None = None
        for option in options:
            if option is type(None):
                continue
            try:
                return _value(option, x, where)
            except BadEntry as exc:
                last = exc
        raise last or BadEntry(f"{where}: unexpected null")
    if tp is type(None):
        if x is not None:
            raise BadEntry(f"{where}: expected null")
        return None
    if tp is bool:
        if not isinstance(x, bool):
            raise BadEntry(f"{where}: expected a boolean")
        return x
    if tp is int:
        if isinstance(x, bool) or not isinstance(x, int):
            raise BadEntry(f"{where}: expected an integer")
        return x
    if tp is float:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise BadEntry(f"{where}: expected a finite number")
        return x  # an int stays an int: the report reads back byte for byte
    if tp is str:
        if not isinstance(x, str):
            raise BadEntry(f"{where}: expected a string")
        return x
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(x)
        except (ValueError, TypeError):
            raise BadEntry(f"{where}: not a {tp.__name__}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return decode(tp, x, where)
    if origin is tuple:  # JSON has lists; asdict writes tuples as lists too
        args = typing.get_args(tp)
        if not isinstance(x, list):
            raise BadEntry(f"{where}: expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(x))
        if len(args) != len(x):
            raise BadEntry(f"{where}: expected {len(args)} items")
        return tuple(_value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, x)))
    if tp in (list, dict) or origin in (list, dict):
        want = origin or tp
        if not isinstance(x, want):
            raise BadEntry(f"{where}: expected a {want.__name__}")
        args = typing.get_args(tp)
        if want is list:
            if not args:
                _json_value(x, where)
                return list(x)
            return [_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(x)]
        if not args:
            _json_value(x, where)
            return dict(x)
        out = {}
        for k, v in x.items():
            out[_value(args[0], k, where)] = _value(args[1], v, f"{where}.{k}")
        return out
    raise BadEntry(f"{where}: cannot decode a {tp!r}")  # a field type this decoder does not know: a miss


def decode(cls: type, data: Any, where: str = "") -> Any:
    """An instance of the dataclass `cls` from `data`, or BadEntry."""
    name = where or cls.__name__
    if not isinstance(data, dict):
        raise BadEntry(f"{name}: expected an object")
    hints = _hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    if set(data) != set(fields):
        raise BadEntry(f"{name}: fields {sorted(set(data) ^ set(fields))} missing or unexpected")
    values = {}
    for f in fields:
        v = _value(hints[f], data[f], f"{name}.{f}")
        shape = _DICT_SHAPES.get((cls, f))
        if shape is not None and v is not None:
            for key, want in shape.items():
                if key not in v or not isinstance(v[key], want) or (want is int and isinstance(v[key], bool)):
                    raise BadEntry(f"{name}.{f}.{key}: missing or of the wrong type")
        values[f] = v
    return cls(**values)


def decode_file_result(payload: Any) -> tuple[list[KernelReport], list[ErrorReport]]:
    """`{"kernels": [...], "errors": [...]}` as report dataclasses, or BadEntry."""
    if not isinstance(payload, dict) or set(payload) != {"kernels", "errors"}:
        raise BadEntry("payload: expected {kernels, errors}")
    kernels, errors = payload["kernels"], payload["errors"]
    if not isinstance(kernels, list) or not isinstance(errors, list):
        raise BadEntry("payload: kernels and errors must be lists")
    return ([decode(KernelReport, k, f"kernels[{i}]") for i, k in enumerate(kernels)],
            [decode(ErrorReport, e, f"errors[{i}]") for i, e in enumerate(errors)])
