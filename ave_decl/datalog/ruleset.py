"""The rule set of a run: the core rules plus user directories, loaded and linted once per
process, and once per rules content on disk (lang/build_cache.py: a fresh `ave check` reads the
linted program as typed JSON instead of parsing and linting 22 rule files, ~1 s)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..lang import source as _source
from ..lang.errors import RuleError
from ..lang.build_cache import cached, decode, digest, encode, source_digest
from ..lang.resources import rules_dir
from . import program as _program
from .program import Program

# The code that builds a program: its source is part of the cache key. Imported only on a miss
# (the Soufflé-syntax parser and the linter are a fifth of a cold start's imports).
_BUILDERS = ("ave_decl.datalog.loader", "ave_decl.datalog.lint", "ave_decl.datalog.contract",
             "ave_decl.datalog.program", "ave_decl.lang.source")

# Every class a cached program may hold (lang/build_cache.decode constructs nothing else).
_PROGRAM_CLASSES: dict[str, type] = {
    cls.__name__: cls for cls in (
        _program.Var, _program.Wild, _program.Num, _program.Sym, _program.BinTerm, _program.UnTerm,
        _program.Functor, _program.Record, _program.Nil, _program.AdtTerm, _program.Aggregate, _program.Atom,
        _program.Constraint, _program.Rule, _program.Decl, _program.RuleFileMeta, _program.Program,
        _source.Span, _source.CallSite)
}


@lru_cache(maxsize=8)
def _load(dirs: tuple[str, ...]) -> Program:
    paths = [Path(d) for d in dirs]

    def build() -> Program:
        from .contract import check_contract
        from .lint import lint
        from .loader import load_program

        prog = load_program(paths)
        lint(prog)
        check_contract(prog)
        return prog

    from .files import rule_files

    try:
        files = rule_files(paths)
    except (OSError, ValueError, RuleError):
        return build()  # the loader reports what is wrong with the directories
    key = digest(source_digest(*_BUILDERS), *(part for f in files for part in (str(f), f.read_bytes())))
    return cached("rules", key, build, encode, lambda data: _as_program(decode(data, _PROGRAM_CLASSES)))


def _as_program(value: object) -> Program:
    if not isinstance(value, Program):
        raise TypeError("not a rule program")
    return value


def load_rules(extra_dirs: tuple[str, ...] = ()) -> Program:
    """Core rules (rules/ and rules/invariants/) plus `--rules DIR` directories."""
    return _load((str(rules_dir()),) + tuple(str(Path(d).resolve()) for d in extra_dirs))


def rule_metadata(prog: Program) -> dict[str, dict[str, str]]:
    """Invariant id -> header fields (title, severity, description, help)."""
    return {m.id: m.fields for m in prog.files if m.id}
