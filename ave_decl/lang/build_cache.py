"""An on-disk cache of build products that every fresh process would otherwise rebuild: the
Lark parse tables of the grammars and the loaded, linted rule program (issue 16, "cold start").

Why not Lark's own `cache=True` or pickle: both unpickle a file from a shared directory, and
unpickling runs code. Cache entries here are plain JSON, decoded into an allowlist of classes
(`decode`); a file that does not decode, or whose content does not match its key, is ignored and
rebuilt. Keys are content hashes (grammar or rule text, the code that builds the product, the
library versions), so a changed input never meets a stale entry. Writes are atomic (a temporary
file renamed into place): concurrent processes at worst build the same entry twice.

Where: `$AVE_BUILD_CACHE` if set, else `$XDG_CACHE_HOME/ave/build` (`~/.cache/ave/build`).
`AVE_BUILD_CACHE=off` disables it (every process builds from source, as before).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..version import __version__

T = TypeVar("T")
FORMAT = 1  # bump when the encoding below changes


def cache_dir() -> Path | None:
    """The build cache folder, or None when disabled."""
    env = os.environ.get("AVE_BUILD_CACHE")
    if env is not None and env.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ave" / "build"


def digest(*parts: str | bytes) -> str:
    """A content hash of the parts (each length-prefixed, so boundaries count) and the format."""
    h = hashlib.sha256(f"ave-decl {__version__} build-cache {FORMAT}\0".encode())
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def source_digest(*modules: str) -> str:
    """The hash of the named modules' source files (found, not imported): a change to the code
    that builds an entry (during development the version does not change) invalidates it."""
    import importlib.util

    paths = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(name)
        paths.append(Path(spec.origin).read_bytes())
    return digest(*paths)


# ---------------------------------------------------------------------- JSON with types
def encode(obj: Any) -> Any:
    """JSON-able form of `obj`: tuples, sets, frozensets and dicts with any keys keep their type;
    dataclasses become {"$": class name, field: value, ...}."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [encode(x) for x in obj]
    if isinstance(obj, tuple):
        return {"$t": [encode(x) for x in obj]}
    if isinstance(obj, (set, frozenset)):
        return {"$s" if isinstance(obj, set) else "$f": sorted((encode(x) for x in obj), key=_order)}
    if isinstance(obj, dict):
        return {"$d": [[encode(k), encode(v)] for k, v in obj.items()]}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {"$": type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = encode(getattr(obj, f.name))
        return out
    raise TypeError(f"cannot encode {type(obj).__name__} in the build cache")


def _order(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


class Undecodable(ValueError):
    """A cache entry that is not what this code writes: it is rebuilt, never trusted."""


def decode(data: Any, classes: dict[str, type]) -> Any:
    """The inverse of `encode`; only the classes named in `classes` are ever constructed."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(x, classes) for x in data]
    if not isinstance(data, dict) or len(data) == 0:
        raise Undecodable("unexpected value")
    if "$" in data:
        cls = classes.get(data["$"])
        if cls is None:
            raise Undecodable(f"class {data['$']!r} is not allowed here")
        kwargs = {k: decode(v, classes) for k, v in data.items() if k != "$"}
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise Undecodable(str(exc)) from None
    if len(data) != 1:
        raise Undecodable("unexpected object")
    (tag, value), = data.items()
    if not isinstance(value, list):
        raise Undecodable("unexpected container")
    if tag == "$t":
        return tuple(decode(x, classes) for x in value)
    if tag == "$s":
        return {decode(x, classes) for x in value}
    if tag == "$f":
        return frozenset(decode(x, classes) for x in value)
    if tag == "$d":
        if not all(isinstance(p, list) and len(p) == 2 for p in value):
            raise Undecodable("unexpected dict entry")
        return {decode(k, classes): decode(v, classes) for k, v in value}
    raise Undecodable(f"unknown tag {tag!r}")


# ---------------------------------------------------------------------- entries
def cached(kind: str, key: str, build: Callable[[], T], to_data: Callable[[T], Any],
           from_data: Callable[[Any], T]) -> T:
    """The entry `kind/key`: read and decoded when present and valid, else built, written and
    returned. Any failure to read, decode or write falls back to building (a cache never turns
    a check into an error)."""
    root = cache_dir()
    path = root / kind / f"{key}.json" if root is not None else None
    if path is not None and path.is_file():
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(entry, dict) and entry.get("key") == key:
                return from_data(entry["data"])
        except Exception:  # noqa: BLE001 - a bad entry of any kind is rebuilt
            pass
    value = build()
    if path is not None:
        try:
            _write_atomic(path, json.dumps({"key": key, "data": to_data(value)}, separators=(",", ":")))
        except Exception:  # noqa: BLE001 - an unwritable cache only costs time
            pass
    return value


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # private: entries are trusted
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def lark_parser(grammar_file: Path, **options: Any):
    """A LALR `Lark` parser for the grammar file, its analysis cached (Lark's `memo_serialize`
    data, the same that its own pickle cache holds, as typed JSON). `postlex` and other objects
    that are code, not data, are passed again at load time and are not part of the entry."""
    import lark
    from lark import Lark
    from lark.grammar import Rule
    from lark.lexer import TerminalDef

    runtime = {k: options.pop(k) for k in ("postlex", "transformer", "lexer_callbacks") if k in options}
    text = grammar_file.read_text(encoding="utf-8")

    def build() -> Lark:
        return Lark(text, parser="lalr", cache=False, **options, **runtime)

    def to_data(parser: Lark) -> Any:
        data, memo = parser.memo_serialize([TerminalDef, Rule])
        data["options"] = {k: v for k, v in data["options"].items() if k not in runtime}  # as Lark.save
        return encode({"data": data, "memo": memo})

    def from_data(entry: Any) -> Lark:
        return Lark.__new__(Lark)._load(decode(entry, {}), **runtime)

    key = digest(text, lark.__version__, repr(sorted(options.items())), *sorted(runtime))
    return cached("lark", key, build, to_data, from_data)
