"""Run one Datalog program on either engine and give back a comparable outcome.

An outcome is ("ok", {relation: sorted rows as lists}) or ("error", error class, line). Rows are
compared as sorted lists: Soufflé writes in index order, which is not meaningful.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from ave_decl.datalog.clingo_engine import ClingoEngine
from ave_decl.datalog.engines import error_class
from ave_decl.datalog.lint import lint
from ave_decl.datalog.loader import load_program
from ave_decl.datalog.souffle_engine import SouffleEngine, find_souffle
from ave_decl.lang.errors import RuleError

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
GOLDEN = HERE / "golden"


def _norm(outputs: dict[str, list[tuple]]) -> dict[str, list[list]]:
    return {rel: sorted([list(r) for r in rows]) for rel, rows in sorted(outputs.items())}


def case_facts(dl: Path) -> dict[str, list[tuple]]:
    f = dl.with_suffix(".facts.json")
    if not f.exists():
        return {}
    return {rel: [tuple(r) for r in rows] for rel, rows in json.loads(f.read_text()).items()}


def _error(exc: RuleError):
    return ("error", error_class(exc), exc.span.line if exc.span else None)


def _linted(tmp: str, text: str):
    path = Path(tmp) / "program.dl"
    path.write_text(text)
    prog = load_program([path])
    lint(prog)
    return prog, path


def clingo_outcome(text: str, facts: dict[str, list[tuple]]):
    with tempfile.TemporaryDirectory() as tmp:
        try:
            prog, _ = _linted(tmp, text)
            return ("ok", _norm(ClingoEngine(prog).run(facts)))
        except RuleError as exc:
            return _error(exc)


def souffle_outcome(text: str, facts: dict[str, list[tuple]], jobs: int = 1):
    """Soufflé's answer; its parse/semantic errors come from its own stderr, not our linter."""
    binary = find_souffle()
    assert binary, "souffle not found"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "program.dl"
        try:
            prog, path = _linted(tmp, text)
        except RuleError as exc:
            if error_class(exc) == "profile":  # outside the profile: rejected before any engine runs
                return _error(exc)
            prog = None
        if prog is not None:
            try:
                return ("ok", _norm(SouffleEngine(prog, binary, jobs=jobs).run(facts)))
            except RuleError as exc:
                return _error(exc)
        proc = subprocess.run([binary, "--wno=all", "-D", tmp, str(path)], capture_output=True, text=True, cwd=tmp)
        return _error(SouffleEngine.__new__(SouffleEngine)._error(proc.returncode, proc.stderr + proc.stdout,
                                                                  Path(tmp) / "x"))


def load_golden(name: str):
    data = json.loads((GOLDEN / name).read_text())
    return data


def to_json_outcome(outcome) -> dict:
    if outcome[0] == "ok":
        return {"outputs": outcome[1]}
    return {"error": {"class": outcome[1], "line": outcome[2]}}


def from_json_outcome(data: dict):
    if "outputs" in data:
        return ("ok", data["outputs"])
    return ("error", data["error"]["class"], data["error"]["line"])
