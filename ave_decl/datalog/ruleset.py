"""The rule set of a run: the core rules plus user directories, loaded and linted once."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..lang.resources import rules_dir
from .contract import check_contract
from .lint import lint
from .loader import load_program
from .program import Program


@lru_cache(maxsize=8)
def _load(dirs: tuple[str, ...]) -> Program:
    prog = load_program([Path(d) for d in dirs])
    lint(prog)
    check_contract(prog)
    return prog


def load_rules(extra_dirs: tuple[str, ...] = ()) -> Program:
    """Core rules (rules/ and rules/invariants/) plus `--rules DIR` directories."""
    return _load((str(rules_dir()),) + tuple(str(Path(d).resolve()) for d in extra_dirs))


def rule_metadata(prog: Program) -> dict[str, dict[str, str]]:
    """Invariant id -> header fields (title, severity, description, help)."""
    return {m.id: m.fields for m in prog.files if m.id}
