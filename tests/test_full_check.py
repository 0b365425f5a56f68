"""Issue 16: a query the budgeted attempts leave open is decided by the full solver from its
canonical text in a fresh context (`KernelSolver._full_check`), so that how long it takes depends
on the query alone, not on which terms the kernel's context made before. The verdict is Z3's on
the very same formulas, a satisfiable query gets its canonical model (the one it got before),
and a text Z3 cannot read back is decided in the kernel's context as before."""
from __future__ import annotations

from dataclasses import asdict

import pytest
import z3
from conftest import checked_with_attempts

from ave_decl.report.model import Finding
from ave_decl.solver import proof_memo, smt, solve
from ave_decl.solver.canonical_model import CanonicalForm
from ave_decl.solver.solve import KernelSolver

TRANSPOSED = "gemm_lds_mfma_transposed.ave"  # proofs, a K-pairing violation and bank conflicts


@pytest.fixture(autouse=True)
def no_remembered_proofs():
    """Every check here decides its queries (the process's proof memo would skip those proved
    before), and leaves none remembered for later tests of the same kernel."""
    proof_memo.MEMO.clear()
    yield
    proof_memo.MEMO.clear()


def _finding(f: Finding) -> dict:
    """A finding as its JSON gives it, without the time it took."""
    out = asdict(f)
    out.pop("solver_ms")
    return out


def _prepared_queries(monkeypatch) -> tuple[KernelSolver, list[list[z3.BoolRef]]]:
    solver, _findings, seen = checked_with_attempts(TRANSPOSED, monkeypatch)
    return solver, seen


def test_the_full_check_decides_in_a_fresh_context_as_the_kernels_solver_does(monkeypatch):
    solver, queries = _prepared_queries(monkeypatch)
    assert len(queries) >= 10
    outcomes = set()
    for prepared in queries:
        result, used, model = solver._full_check(prepared, prepared, None)
        in_context = solver.enc.solver(10_000)
        in_context.add(*prepared)
        assert result == in_context.check()
        assert used is not None and used.ctx is not solver.enc.ctx  # decided from the text
        if result == z3.sat:  # its canonical model, a model of the query itself
            assert model is not None and all(z3.is_true(model.eval(f, model_completion=True)) for f in prepared)
        outcomes.add(str(result))
    assert outcomes == {"sat", "unsat"}


def test_a_text_z3_cannot_read_back_is_decided_in_the_kernels_context(monkeypatch):
    solver, queries = _prepared_queries(monkeypatch)
    monkeypatch.setattr(solve, "canonical_form", lambda assertions, home: CanonicalForm([], "(assert (not-a-term))"))
    outcomes = set()
    for prepared in queries:
        result, used, model = solver._full_check(prepared, prepared, None)
        assert used is not None and used.ctx is solver.enc.ctx
        assert result in (z3.sat, z3.unsat)
        if result == z3.sat:  # the model `_small_model` falls back to, made here at once
            assert model is not None and all(z3.is_true(model.eval(f, model_completion=True)) for f in prepared)
        outcomes.add(str(result))
    assert outcomes == {"sat", "unsat"}


def test_findings_are_the_same_when_every_query_goes_to_the_full_check(monkeypatch):
    usual = [_finding(f) for f in checked_with_attempts(TRANSPOSED, monkeypatch)[1]]
    proof_memo.MEMO.clear()
    full: list[int] = []
    real = KernelSolver._full_check

    def counted(self, *args):
        full.append(1)
        return real(self, *args)

    # the attempts decide nothing: every posed query is the full check's (the verdicts are Z3's)
    monkeypatch.setattr(smt.Encoder, "quick_check", lambda self, prepared, *a, **k: (z3.unknown, None))
    monkeypatch.setattr(KernelSolver, "_full_check", counted)
    _solver, findings, _attempts = checked_with_attempts(TRANSPOSED, monkeypatch)
    assert [_finding(f) for f in findings] == usual
    assert len(full) >= 5
