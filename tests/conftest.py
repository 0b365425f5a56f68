"""Shared helpers: run the real CLI in-process (click's runner) and locate example files."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ave_decl.cli import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/engines is importable as `engines`
EXAMPLES = ROOT / "examples"
# The example corpus the audit, mutation and byte-identity tests run many times: the top-level
# examples (examples/speed/ holds kernels tuned for speed, whose proofs cost a minute each).
CORPUS = sorted(EXAMPLES.glob("*.ave"))
DATA = Path(__file__).resolve().parent / "data"


class Result:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def ave():
    def run(*args: str) -> Result:
        runner = CliRunner()
        r = runner.invoke(main, [str(a) for a in args], catch_exceptions=False)
        return Result(r.exit_code, r.stdout, r.stderr)

    return run


# the smallest kernel head of the front-end error tests: one wave, one tensor A
ONE_WAVE = "@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (64,)]):\n"


def front_end_error(ave, path: Path, text: str) -> str:
    """`ave check` of `text` written to `path`: a located front-end error (exit 3) whose message
    starts with the file's name, never a traceback. Returns what it printed."""
    path.write_text(text)
    r = ave("check", path)
    out = r.out + r.err
    assert r.code == 3, out
    assert out.startswith(f"{path}:") and "Traceback" not in out, out
    return out


def checks_simulates_and_runs(ave, path: Path, simulated: str) -> None:
    """`ave check`, `ave simulate` (whose output says `simulated`) and `ave run` of `path` all
    succeed, and the printer gives back the module it parsed."""
    from ave_decl.lang import printer
    from ave_decl.lang.parser import parse_text

    assert ave("check", path).code == 0
    r = ave("simulate", path)
    assert r.code == 0 and simulated in r.out, r.out
    assert ave("run", path).code == 0
    m = parse_text(path.read_text())
    assert parse_text(printer.module(m)) == m


def copy_kernel(name: str, block: int, body: str, per_block: int = 1024) -> str:
    """A kernel copying A to C through shared memory, `per_block` elements per block: `body`
    (indented, one line per statement) after t and base."""
    return f"""@kernel(grid=(N // {per_block},), block={block}, wave=64, reference="C = A")
def {name}(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % {per_block} == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    base = block_id(0) * {per_block}
""" + body


def checked_with_attempts(name: str, monkeypatch):
    """A check of the example (no violation sets): its KernelSolver, its findings and the prepared
    formulas of every budgeted proof attempt it made (`Encoder.quick_check`), in order."""
    from ave_decl.datalog.clingo_engine import ClingoEngine
    from ave_decl.datalog.ruleset import load_rules, rule_metadata
    from ave_decl.facts.kernel_facts import merge
    from ave_decl.facts.lower import lower_module
    from ave_decl.facts.view import KernelView
    from ave_decl.lang.parser import parse_source
    from ave_decl.lang.source import SourceFile
    from ave_decl.pipeline import split_by_kernel
    from ave_decl.solver import smt
    from ave_decl.solver.solve import KernelSolver

    src = SourceFile.read(EXAMPLES / name)
    (kf,) = lower_module(parse_source(src), src)
    prog = load_rules()
    derived = split_by_kernel(ClingoEngine(prog).run(merge([kf])))
    seen: list = []
    real = smt.Encoder.quick_check

    def recording(self, prepared, *args, **kw):
        seen.append(list(prepared))
        return real(self, prepared, *args, **kw)

    monkeypatch.setattr(smt.Encoder, "quick_check", recording)
    solver = KernelSolver(KernelView.of(kf), derived.get(kf.kid, {}), rule_metadata(prog), 10.0,
                          violation_sets=False)
    findings = solver.findings()
    monkeypatch.setattr(smt.Encoder, "quick_check", real)
    return solver, findings, seen


def pytest_report_header(config):
    from ave_decl.datalog.souffle_engine import find_souffle

    found = find_souffle()
    return f"engine differential tests compare against: {'live souffle at ' + found if found else 'golden outputs'}"


LONG_FACTOR = 60  # --hypothesis-profile=long multiplies every property test's budget


def examples(n: int) -> int:
    """A property test's example budget: `n` in `make test`, `n * LONG_FACTOR` in the long profile
    (an explicit @settings(max_examples=...) would otherwise cap the long profile too)."""
    from hypothesis import settings

    return n * LONG_FACTOR if settings.default.max_examples >= 2000 else n


def _hypothesis_profiles() -> None:
    """`make test` is deterministic (derandomized, bounded); `--hypothesis-profile=long` explores."""
    from hypothesis import HealthCheck, settings

    settings.register_profile("default", derandomize=True, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("long", max_examples=2000, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("default")


_hypothesis_profiles()
