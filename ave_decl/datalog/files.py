"""Which `.dl` files a rule program is read from (the directories' files and what they
#include), without parsing any: the key of a program's build-cache entry (ruleset.py)."""
from __future__ import annotations

import re
from pathlib import Path

from ..lang.errors import RuleError

INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$')


def listed_files(dirs: list[Path]) -> list[Path]:
    files: list[Path] = []
    for d in dirs:
        if d.is_file():
            files.append(d)
        elif d.is_dir():
            files.extend(sorted(d.rglob("*.dl")))
        else:
            raise RuleError(f"rules directory not found: {d}", None)
    return files


def rule_files(dirs: list[Path]) -> list[Path]:
    """Every file `load_program(dirs)` reads: the listed ones and what they #include (the
    content of these is the key of the program's build-cache entry)."""
    listed = listed_files(dirs)
    seen = {f.resolve() for f in listed}
    out, todo = list(listed), list(listed)
    while todo:
        for inc in includes_of(todo.pop()):
            if inc not in seen:
                seen.add(inc)
                out.append(inc)
                todo.append(inc)
    return out


def includes_of(path: Path) -> list[Path]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = INCLUDE.match(line)
        if m:
            out.append((path.parent / m.group(1)).resolve())
    return out


def included_files(files: list[Path]) -> set[Path]:
    return {inc for f in files for inc in includes_of(f)}
