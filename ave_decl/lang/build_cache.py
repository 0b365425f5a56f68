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
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..version import __version__
from .files import write_atomic

T = TypeVar("T")
FORMAT = 2  # bump when the encoding below changes
KEEP = 32  # entries kept per kind (lark, rules)


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
# Every container is a JSON array whose first element says what it is: ["t", ...] a tuple, ["l", ...]
# a list, ["s", ...] / ["f", ...] a set / frozenset, ["d", k1, v1, ...] a dict (any keys), ["$Name",
# field values in order...] a dataclass. Arrays parse faster than objects, and decoding builds
# no intermediate dicts: a cold start decodes ~50,000 values.
def encode(obj: Any) -> Any:
    """JSON-able form of `obj`, keeping tuples, sets, frozensets, dicts with any keys and
    dataclasses (by class name and field order)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return ["l", *(encode(x) for x in obj)]
    if isinstance(obj, tuple):
        return ["t", *(encode(x) for x in obj)]
    if isinstance(obj, (set, frozenset)):
        return ["s" if isinstance(obj, set) else "f", *sorted((encode(x) for x in obj), key=_order)]
    if isinstance(obj, dict):
        return ["d", *(part for k, v in obj.items() for part in (encode(k), encode(v)))]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return ["$" + type(obj).__name__, *(encode(getattr(obj, f.name)) for f in dataclasses.fields(obj))]
    raise TypeError(f"cannot encode {type(obj).__name__} in the build cache")


def _order(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


class Undecodable(ValueError):
    """A cache entry that is not what this code writes: it is rebuilt, never trusted."""


def decode(data: Any, classes: dict[str, type]) -> Any:
    """The inverse of `encode`; only the classes named in `classes` are ever constructed, each
    with exactly its number of fields."""
    arity = {name: len(dataclasses.fields(cls)) for name, cls in classes.items()}

    def go(x: Any) -> Any:
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if not isinstance(x, list) or not x or not isinstance(x[0], str):
            raise Undecodable("unexpected value")
        tag = x[0]
        if tag == "t":
            return tuple(go(v) for v in x[1:])
        if tag == "l":
            return [go(v) for v in x[1:]]
        if tag == "s":
            return {go(v) for v in x[1:]}
        if tag == "f":
            return frozenset(go(v) for v in x[1:])
        if tag == "d":
            if len(x) % 2 == 0:
                raise Undecodable("a dict with a key and no value")
            return {go(x[i]): go(x[i + 1]) for i in range(1, len(x), 2)}
        if tag.startswith("$") and tag[1:] in classes:
            if len(x) - 1 != arity[tag[1:]]:
                raise Undecodable(f"{tag[1:]} takes {arity[tag[1:]]} fields, the entry has {len(x) - 1}")
            try:
                return classes[tag[1:]](*(go(v) for v in x[1:]))
            except TypeError as exc:  # e.g. an unhashable value where a set member is expected
                raise Undecodable(str(exc)) from None
        raise Undecodable(f"unknown tag {tag!r}")

    try:
        return go(data)
    except TypeError as exc:  # an unhashable key or set member
        raise Undecodable(str(exc)) from None


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
            _prune(path.parent)
        except Exception:  # noqa: BLE001 - an unwritable cache only costs time
            pass
    return value


def _prune(folder: Path) -> None:
    """Keep the KEEP most recently written entries of a kind: every edit of a rule file or of
    the code makes a new entry, and the old ones are never read again."""
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        old.unlink(missing_ok=True)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # private: entries are trusted
    write_atomic(path, text.encode("utf-8"), private=True)


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


def build_scanners(parser: Any) -> None:
    """Build every contextual-lexer scanner of a LALR `Lark` parser now. Lark builds each parser
    state's scanner (regular expressions compiled) on its first use in a process: about 25 ms
    for ave.lark, paid again by every audit worker unless the parent that forks them built
    them (pipeline.warm_up). Reads Lark's lexer objects; a Lark without them is left as is."""
    lexer = getattr(getattr(parser, "parser", None), "lexer", None)
    lexer = getattr(lexer, "lexer", lexer)  # a postlex connector wraps the contextual lexer
    for basic in {id(each): each for each in getattr(lexer, "lexers", {}).values()}.values():
        getattr(basic, "scanner", None)  # the property builds and keeps the scanner
