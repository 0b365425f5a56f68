"""Verdict cache: one JSON file per (kernel file path and content, rules, options, tool version).

A hit returns the identical report for that file (kernels and errors), read back into the same
dataclasses. The key includes the file's path as the report prints it, because the report is a
function of the path too: every location, every rendered error and the SARIF `uri` name it. A
copy of a kernel under another name is a miss and is checked (and cached) under its own name;
re-stamping a cached report with a new path would mean rewriting free text (`rendered`
snippets, messages), which cannot be done reliably. In CI the paths are the ones relative to the
checkout (`ave audit kernels/`), so they stay the same from run to run and the cache hits.

Entries are untrusted: an entry is used only if it is a regular file of bounded size, is JSON of
the expected format, names this key and path, its SHA-256 over the canonical payload matches,
and the payload decodes strictly into the report dataclasses (decode.py). Anything else is a
miss: the file is checked again and the entry rewritten. The hash catches truncated, stale and
hand-edited entries; it is integrity, not authenticity: whoever can write the cache directory can
still forge verdicts, so share a cache only between runs that trust each other. Writes are atomic
(a private temp file + rename), so concurrent audits never see half an entry; a cache that
cannot be written is skipped, never an error.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from ..lang.resources import rules_dir
from ..report.model import ErrorReport, KernelReport, _plain
from ..version import __version__
from .decode import BadEntry, decode_file_result
from .discover import read_regular

FORMAT = "ave-audit-cache/3"  # 3: findings carry fix_hint
MAX_ENTRY_BYTES = 64 * 1024 * 1024  # far above any real entry; a bigger file is not read

FileResult = tuple[list[KernelReport], list[ErrorReport]]


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ave"


@lru_cache(maxsize=16)
def rules_digest(extra_dirs: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for d in (str(rules_dir()),) + extra_dirs:
        for path in sorted(Path(d).rglob("*.dl")) if Path(d).is_dir() else [Path(d)]:
            h.update(str(path.relative_to(d) if Path(d).is_dir() else path.name).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def key(content: bytes, options: dict, extra_rules: tuple[str, ...], path: str) -> str:
    h = hashlib.sha256()
    for part in (FORMAT, __version__, rules_digest(extra_rules), json.dumps(options, sort_keys=True), path):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    h.update(content)
    return h.hexdigest()


def _digest(k: str, path: str, payload: object) -> str:
    canonical = json.dumps({"key": k, "path": path, "payload": payload}, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def parse_entry(text: str, k: str, path: str) -> FileResult:
    """The file result an entry holds, or BadEntry (any shape, any content)."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise BadEntry(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"format", "key", "path", "sha256", "payload"}:
        raise BadEntry("not a cache entry")
    if data["format"] != FORMAT or data["key"] != k or data["path"] != path:
        raise BadEntry("an entry of another format, key or file")
    try:
        digest = _digest(k, path, data["payload"])
    except (ValueError, TypeError, RecursionError) as exc:
        raise BadEntry(f"payload cannot be hashed: {exc}") from None
    if data["sha256"] != digest:
        raise BadEntry("content hash mismatch")
    try:
        kernels, errors = decode_file_result(data["payload"])
    except RecursionError:
        raise BadEntry("nested too deeply") from None
    if not kernels and not errors:  # every checked file has a kernel or an error ("defines no kernel")
        raise BadEntry("an entry with neither kernels nor errors")
    if any(kr.file != path for kr in kernels):
        raise BadEntry("a kernel of another file")
    return kernels, errors


class Cache:
    def __init__(self, directory: Path):
        self.dir = directory
        self.rejected = 0  # entries that existed but failed the integrity check (then rewritten)

    def _path(self, k: str) -> Path:
        return self.dir / k[:2] / f"{k}.json"

    def get(self, k: str, path: str) -> FileResult | None:
        """The cached result for `path` under key `k`, or None (absent, unreadable or bad)."""
        try:
            raw = read_regular(str(self._path(k)), MAX_ENTRY_BYTES)
        except (FileNotFoundError, NotADirectoryError):
            return None  # no entry (or no usable cache directory): a plain miss
        except OSError:
            self.rejected += 1
            return None
        try:
            return parse_entry(raw.decode("utf-8"), k, path)
        except (BadEntry, UnicodeDecodeError):
            self.rejected += 1
            return None

    def put(self, k: str, path: str, kernels: list[KernelReport], errors: list[ErrorReport]) -> bool:
        """Write the entry (atomically); False when it was not written."""
        if not kernels and not errors:
            return False  # would be refused on reading (see parse_entry)
        payload = {"kernels": [_plain(asdict(x)) for x in kernels], "errors": [_plain(asdict(x)) for x in errors]}
        try:
            entry = {"format": FORMAT, "key": k, "path": path, "sha256": _digest(k, path, payload),
                     "payload": payload}
            text = json.dumps(entry, allow_nan=False)
        except (ValueError, TypeError):
            return False  # a report that is not plain JSON (a non-finite timing) is not cached
        target = self._path(k)
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{k}.", suffix=".tmp", dir=target.parent)
            os.fchmod(fd, 0o644)  # like any other written file (mkstemp makes it private)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, target)
            tmp = None
            return True
        except OSError:
            return False  # read-only or full cache, or an entry path taken by a directory: run uncached
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
