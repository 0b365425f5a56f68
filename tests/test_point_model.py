"""Issue 16: a bank conflict the enumeration found takes its model from its concrete point
(solver/point_model.py) instead of a canonical model of its query (a fresh Z3 context per
conflict). The model must satisfy every formula of the query, the findings must be those the
solver's way gives, and a point that a guard rules out must go the solver's way."""
from __future__ import annotations

import pytest
import z3
from conftest import EXAMPLES
from test_enumerated_facts import _GUARDED

from ave_decl import check
from ave_decl.solver import point_model as point_models
from ave_decl.solver import proof_memo, solve
from ave_decl.solver.solve import KernelSolver


@pytest.fixture(autouse=True)
def no_remembered_proofs():
    """Every check here solves its queries (a remembered violation would skip the point)."""
    proof_memo.MEMO.clear()
    yield
    proof_memo.MEMO.clear()


def _made_points(monkeypatch) -> list[tuple[list[z3.BoolRef], z3.ModelRef, tuple, list]]:
    """Record every model `point_model` makes: (formulas, model, starts, decompositions)."""
    made: list = []
    real = point_models.point_model

    def recording(formulas, point, frame, starts, decompositions, ctx):
        model = real(formulas, point, frame, starts, decompositions, ctx)
        if model is not None:
            made.append((list(formulas), model, starts, decompositions))
        return model

    monkeypatch.setattr(solve, "point_model", recording)
    return made


def _bank(report) -> list[tuple]:
    return [(f.location.line, f.verdict.value, f.message, f.counterexample.lane if f.counterexample else None,
             f.counterexample.instruction if f.counterexample else None)
            for k in report.kernels for f in k.findings if f.invariant == "ave/bank-conflicts"]


@pytest.mark.parametrize("name, how", [
    ("gemm_lds_mfma.ave", "kernel frame"),  # three conflicts, one frame: the launch's
    ("gemm_lds_swizzled.ave", "bits"),  # a swizzle's xor: bit decompositions filled from their terms
    ("speed/gemm_mfma_mi300x.ave", "nest"),  # a prefetch guard `kt + 32 < K` wants the nest's sizes
])
def test_points_give_models_of_their_queries_and_the_solvers_findings(name, how, monkeypatch):
    path = EXAMPLES / name
    made = _made_points(monkeypatch)
    by_points = check(path.read_text(), path=str(path), violation_sets=False)
    assert made, "no bank conflict took its point's model"
    for formulas, model, _starts, _decompositions in made:  # a model of the query itself
        assert all(z3.is_true(model.eval(f, model_completion=True)) for f in formulas)
    if how == "nest":
        assert any(starts == () for _f, _m, starts, _d in made)
    if how == "bits":
        assert any(decompositions for _f, _m, _s, decompositions in made)
    proof_memo.MEMO.clear()
    monkeypatch.setattr(KernelSolver, "_point_model", lambda self, point, formulas, key: None)
    by_solver = check(path.read_text(), path=str(path), violation_sets=False)
    assert _bank(by_points) == _bank(by_solver)
    assert [k.verdict for k in by_points.kernels] == [k.verdict for k in by_solver.kernels]


def test_a_point_is_at_the_first_block_and_iteration_of_the_loops_it_leaves_free(monkeypatch):
    """On the kernel frame, every loop the conflict does not name starts at its first value and
    the block is the first (the launch ranges' canonical model at the smallest sizes)."""
    path = EXAMPLES / "gemm_lds_mfma.ave"
    _made_points(monkeypatch)
    report = check(path.read_text(), path=str(path), violation_sets=False)
    conflicts = [f for k in report.kernels for f in k.findings
                 if f.invariant == "ave/bank-conflicts" and f.verdict.value == "VIOLATION"]
    assert len(conflicts) == 3
    for f in conflicts:
        cex = f.counterexample
        assert cex.block == [0, 0, 0] and cex.iterations["kt"] == 0
        assert all(size <= 64 for size in cex.sizes.values())


def test_a_point_a_guard_rules_out_goes_the_solvers_way(monkeypatch):
    """`if t >= 16`: the enumeration (which leaves guards out) names lanes 0 and 16, which the
    guard does not run; the point is ruled out before any frame is solved, and the conflict Z3
    finds (among lanes 16-63) is reported as without points."""
    tried: list[bool] = []
    real = point_models.pinned_guards_hold

    def recording(point, ctx):
        tried.append(real(point, ctx))
        return tried[-1]

    monkeypatch.setattr(solve, "pinned_guards_hold", recording)
    made = _made_points(monkeypatch)
    text = _GUARDED.format(guard="t >= 16")
    report = check(text, path="guarded.ave", violation_sets=False)
    assert tried == [False] and not made
    (finding,) = [f for k in report.kernels for f in k.findings
                  if f.invariant == "ave/bank-conflicts" and f.verdict.value == "VIOLATION"]
    assert min(finding.counterexample.lhs.lane, finding.counterexample.rhs.lane) >= 16
    proof_memo.MEMO.clear()
    monkeypatch.setattr(KernelSolver, "_point_model", lambda self, point, formulas, key: None)
    assert _bank(report) == _bank(check(text, path="guarded.ave", violation_sets=False))


def test_the_kernel_frame_is_made_before_helpers_are_forked(monkeypatch):
    """With two jobs, the parent makes the kernel frame's model before it forks (each process's
    first fresh Z3 context after a fork copies 16 MB page by page): the very frame the conflicts'
    points use (no helper is forked here, so every conflict is decided in this process and
    none makes a frame again), and the report is the one process's."""
    from ave_decl.solver import parallel

    path = EXAMPLES / "gemm_lds_mfma.ave"
    one = check(path.read_text(), path=str(path), violation_sets=False)
    proof_memo.MEMO.clear()
    events: list[str] = []
    real_frame, real_spread = solve.frame_values, parallel.discharge_all

    def frame(*args):
        events.append("frame")
        return real_frame(*args)

    def spread(*args):
        events.append("fork")
        return real_spread(*args)

    monkeypatch.setattr(solve, "frame_values", frame)
    monkeypatch.setattr(parallel, "discharge_all", spread)
    monkeypatch.setattr(parallel, "can_fork", lambda: False)
    two = check(path.read_text(), path=str(path), violation_sets=False, jobs=2)
    assert events == ["frame", "fork"]
    assert _bank(one) == _bank(two)
