"""Verdict cache: one JSON file per (kernel file content, rules, options, tool version).

A hit returns the identical report for that file (kernels and errors), read back into the
same dataclasses. Writes are atomic (temp file + rename), so concurrent workers never see a
half-written entry.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from ..lang.resources import rules_dir
from ..report.model import ErrorReport, KernelReport, _plain, error_from_json, kernel_from_json
from ..version import __version__


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


def key(content: bytes, options: dict, extra_rules: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    h.update(__version__.encode())
    h.update(rules_digest(extra_rules).encode())
    h.update(json.dumps(options, sort_keys=True).encode())
    h.update(content)
    return h.hexdigest()


class Cache:
    def __init__(self, directory: Path):
        self.dir = directory

    def _path(self, k: str) -> Path:
        return self.dir / k[:2] / f"{k}.json"

    def get(self, k: str) -> tuple[list[KernelReport], list[ErrorReport]] | None:
        path = self._path(k)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return [kernel_from_json(x) for x in data["kernels"]], [error_from_json(x) for x in data["errors"]]

    def put(self, k: str, kernels: list[KernelReport], errors: list[ErrorReport]) -> None:
        path = self._path(k)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"kernels": [_plain(asdict(x)) for x in kernels], "errors": [_plain(asdict(x)) for x in errors]}
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
