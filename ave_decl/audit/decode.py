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
from itertools import repeat
from typing import Any, Callable, Iterable

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


class _Bad(Exception):
    """A decoding failure on its way up: the message, and the path to it (innermost part first),
    completed by each container it passes (paths are built only for a bad entry, never per value:
    formatting a path per value was most of a warm audit's time)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def at(self, part: str) -> "_Bad":
        self.path.append(part)
        return self


Decoder = Callable[[Any], Any]


def _json_value(x: Any) -> None:
    """Plain JSON only (what json.loads gives, minus NaN/Infinity)."""
    if x is None or isinstance(x, (bool, int, str)):
        return
    if isinstance(x, float):
        if not math.isfinite(x):
            raise _Bad("non-finite number")
        return
    if isinstance(x, list):
        i = 0
        try:
            for i, v in enumerate(x):
                _json_value(v)
        except _Bad as exc:
            exc.path.append(f"[{i}]")
            raise
        return
    if isinstance(x, dict):
        k = ""
        try:
            for k, v in x.items():
                if not isinstance(k, str):
                    raise _Bad("non-string key")
                _json_value(v)
        except _Bad as exc:
            if isinstance(k, str):
                exc.path.append(f".{k}")
            raise
        return
    raise _Bad("not JSON")


def _plain(x: Any) -> Any:
    _json_value(x)
    return x


def _each(decoders: Iterable[Decoder], x: list) -> list:
    """The items of the list `x`, each by its decoder; a bad one's path gets its index."""
    out, i = [], 0
    try:
        for i, (decode_item, v) in enumerate(zip(decoders, x)):
            out.append(decode_item(v))
    except _Bad as exc:
        exc.path.append(f"[{i}]")
        raise
    return out


def _items(item: Decoder) -> Decoder:
    return lambda x: _each(repeat(item), _is(x, list))


def _checked(kind: type, message: str) -> Decoder:
    """A scalar of this type (a bool is not an int)."""
    def scalar(x: Any) -> Any:
        if not isinstance(x, kind) or (kind is int and isinstance(x, bool)):
            raise _Bad(message)
        return x
    return scalar


def _number(x: Any) -> Any:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise _Bad("expected a finite number")
    return x  # an int stays an int: the report reads back byte for byte


def _none(x: Any) -> None:
    if x is not None:
        raise _Bad("expected null")
    return None


@lru_cache(maxsize=None)
def _decoder(tp: Any) -> Decoder:
    """The decoder of values of type `tp`, built once per type: the type hints are read here,
    not per value."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return _plain
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        nullable = type(None) in options
        choices = [_decoder(o) for o in options if o is not type(None)]

        def union(x: Any) -> Any:
            if x is None and nullable:
                return None
            last: _Bad | None = None
            for choice in choices:
                try:
                    return choice(x)
                except _Bad as exc:
                    last = exc
            raise last or _Bad("unexpected null")
        return union
    if tp is type(None):
        return _none
    if tp is bool:
        return _checked(bool, "expected a boolean")
    if tp is int:
        return _checked(int, "expected an integer")
    if tp is float:
        return _number
    if tp is str:
        return _checked(str, "expected a string")
    if isinstance(tp, type) and issubclass(tp, Enum):
        def enum(x: Any) -> Enum:
            try:
                return tp(x)
            except (ValueError, TypeError):
                raise _Bad(f"not a {tp.__name__}") from None
        return enum
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    if origin is tuple:  # JSON has lists; asdict writes tuples as lists too
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            items = _items(_decoder(args[0]))
            return lambda x: tuple(items(x))
        parts = [_decoder(a) for a in args]

        def fixed(x: Any) -> tuple:
            if len(parts) != len(_is(x, list)):
                raise _Bad(f"expected {len(parts)} items")
            return tuple(_each(parts, x))
        return fixed
    if tp in (list, dict) or origin in (list, dict):
        want = origin or tp
        args = typing.get_args(tp)
        if want is list:
            if not args:
                return lambda x: list(_plain(_is(x, list)))
            return _items(_decoder(args[0]))
        if not args:
            return lambda x: dict(_plain(_is(x, dict)))
        key, value = _decoder(args[0]), _decoder(args[1])

        def dict_of(x: Any) -> dict:
            _is(x, dict)
            out, k = {}, ""
            try:
                for k, v in x.items():
                    out[key(k)] = value(v)
            except _Bad as exc:
                exc.path.append(f".{k}")
                raise
            return out
        return dict_of

    def unknown(x: Any) -> Any:  # a field type this decoder does not know: a miss
        raise _Bad(f"cannot decode a {tp!r}")
    return unknown


def _is(x: Any, want: type) -> Any:
    if not isinstance(x, want):
        raise _Bad(f"expected a {want.__name__}")
    return x


def _dataclass(cls: type) -> Decoder:
    """A decoder of the dataclass `cls`: exactly its fields, each by its type hint, and the
    keys the renderers read in its dict-typed fields (_DICT_SHAPES)."""
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    names = set(fields)
    plan = [(f, _decoder(hints[f]), _DICT_SHAPES.get((cls, f))) for f in fields]

    def instance(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Bad("expected an object")
        if data.keys() != names:
            raise _Bad(f"fields {sorted(set(data) ^ names)} missing or unexpected")
        values = {}
        for f, decode_field, shape in plan:
            try:
                v = decode_field(data[f])
                if shape is not None and v is not None:
                    for key, want in shape.items():
                        if key not in v or not isinstance(v[key], want) or (want is int and isinstance(v[key], bool)):
                            raise _Bad("missing or of the wrong type").at(f".{key}")
            except _Bad as exc:
                exc.path.append(f".{f}")
                raise
            values[f] = v
        return cls(**values)
    return instance


def decode(cls: type, data: Any, where: str = "") -> Any:
    """An instance of the dataclass `cls` from `data`, or BadEntry (its message says where)."""
    try:
        return _decoder(cls)(data)
    except _Bad as exc:
        raise BadEntry(f"{where or cls.__name__}{''.join(reversed(exc.path))}: {exc.message}") from None


def decode_file_result(payload: Any) -> tuple[list[KernelReport], list[ErrorReport]]:
    """`{"kernels": [...], "errors": [...]}` as report dataclasses, or BadEntry."""
    if not isinstance(payload, dict) or set(payload) != {"kernels", "errors"}:
        raise BadEntry("payload: expected {kernels, errors}")
    kernels, errors = payload["kernels"], payload["errors"]
    if not isinstance(kernels, list) or not isinstance(errors, list):
        raise BadEntry("payload: kernels and errors must be lists")
    return ([decode(KernelReport, k, f"kernels[{i}]") for i, k in enumerate(kernels)],
            [decode(ErrorReport, e, f"errors[{i}]") for i, e in enumerate(errors)])
