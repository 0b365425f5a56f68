"""Preconditions: each technique's Datalog query, asked over a kernel's facts and derived
relations with the same engines and rule profile as the invariants (`ave_decl.relations`)."""
from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import ave_decl

from .errors import KernelError, KnowledgeError
from .knowledge import Technique

_CACHE = Path(tempfile.gettempdir()) / "ave-planner-rules"


def rule_files(techniques: list[Technique]) -> list[Path]:
    """One `.dl` per technique, content-addressed (written once, never half-written), whose line
    n is line `rules_line + n - 1` of the technique's TOML file."""
    out = []
    _CACHE.mkdir(parents=True, exist_ok=True)
    for t in techniques:
        digest = hashlib.sha256(t.rules.encode()).hexdigest()[:16]
        path = _CACHE / f"{t.id}-{digest}.dl"
        if not path.exists():
            tmp = path.with_suffix(f".{digest}.tmp")
            tmp.write_text(t.rules, encoding="utf-8")
            tmp.replace(path)
        out.append(path)
    return out


def applicable(text: str, techniques: list[Technique], engine: str = "embedded", path: str = "<kernel>") -> set[str]:
    """The ids of the techniques whose precondition relation holds for the (first) kernel."""
    files = rule_files(techniques)
    dumps, errors = ave_decl.relations(text, [t.relation for t in techniques], engine=engine,
                                       rules=[str(f) for f in files], path=path)
    if errors:
        err = errors[0]
        loc = getattr(err, "location", None)
        for t, f in zip(techniques, files):
            if loc is not None and getattr(loc, "file", None) == str(f):
                raise KnowledgeError(err.message, t.path, t.rules_line + loc.line - 1, loc.col)
        raise KernelError(err.message, path)
    held = {d.relation for d in dumps if d.tuples}
    return {t.id for t in techniques if t.relation in held}
