"""Preconditions: each technique's Datalog query, asked over a kernel's facts and derived
relations with the same engines and rule profile as the invariants (`ave_decl.relations`)."""
from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import ave_decl

from .errors import KernelError, KnowledgeError
from .knowledge import Technique


def _cache() -> Path:
    """A per-user directory (mode 0700) for the generated rule files."""
    import os

    d = Path(tempfile.gettempdir()) / f"ave-planner-rules-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def rule_files(techniques: list[Technique]) -> list[Path]:
    """One `.dl` per technique, content-addressed (written once, never half-written), whose line
    n is line `rules_line + n - 1` of the technique's TOML file."""
    out = []
    cache = _cache()
    for t in techniques:
        digest = hashlib.sha256(t.rules.encode()).hexdigest()[:16]
        path = cache / f"{t.id}-{digest}.dl"
        if not path.exists() or path.read_text(encoding="utf-8", errors="replace") != t.rules:
            fd, tmp = tempfile.mkstemp(dir=cache, suffix=".tmp")
            with open(fd, "w", encoding="utf-8") as f:
                f.write(t.rules)
            Path(tmp).replace(path)
        out.append(path.resolve())
    return out


def applicable(text: str, techniques: list[Technique], engine: str = "embedded", path: str = "<kernel>") -> set[str]:
    """The ids of the techniques whose precondition relation holds for the (first) kernel."""
    files = rule_files(techniques)
    dumps, errors = ave_decl.relations(text, [t.relation for t in techniques], engine=engine,
                                       rules=[str(f) for f in files], path=path)
    if errors:
        raise _located(errors[0], techniques, files, path)
    held = {d.relation for d in dumps if d.tuples}
    return {t.id for t in techniques if t.relation in held}


def _located(err, techniques: list[Technique], files: list[Path], kernel_path: str) -> Exception:
    """The error at its line of the technique's TOML file; a rules error located nowhere in a
    technique (an unknown relation) is the knowledge base's; otherwise it is the kernel's."""
    loc = getattr(err, "location", None)
    message = err.message
    for t, f in zip(techniques, files):
        message = message.replace(str(f), t.path)
    if loc is not None:
        where = Path(loc.file).resolve() if loc.file and not loc.file.startswith("<") else None
        for t, f in zip(techniques, files):
            if where == f:
                return KnowledgeError(message, t.path, t.rules_line + loc.line - 1, loc.col)
    for t in techniques:
        if f"'{t.relation}'" in message:
            return KnowledgeError(f"{message} (the precondition's relation is not declared by its rules)",
                                  t.path, t.rules_line, 1)
    if err.kind in ("rules", "usage", "internal") or err.file in ("<rules>", "<engine>"):
        return KnowledgeError(message, techniques[0].path if len(techniques) == 1 else None)
    return KernelError(message, kernel_path)
