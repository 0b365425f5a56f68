"""Issue 16: a bank conflict the enumeration found takes its model from its concrete point
(solver/point_model.py) instead of a canonical model of its query (a fresh Z3 context per
conflict). The model must satisfy every formula of the query, the findings must be those the
solver's way gives, and a point that a guard rules out must go the solver's way."""
from __future__ import annotations

import json

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


def _made_points(monkeypatch) -> list[tuple[list[z3.BoolRef], z3.ModelRef, bool, list]]:
    """Record every model `point_model` makes: (formulas, model, whether the loop nest's frame
    gave it, decompositions). The kernel frame's call passes the point's free loops as `starts`,
    the nest's none."""
    made: list = []
    real = point_models.point_model

    def recording(formulas, point, frame, starts, decompositions, ctx):
        model = real(formulas, point, frame, starts, decompositions, ctx)
        if model is not None:
            made.append((list(formulas), model, bool(point.starts) and not starts, decompositions))
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
        assert any(nest for _f, _m, nest, _d in made)
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
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")  # (two of its conflicts' queries are alike: a hit)
    made = _made_points(monkeypatch)
    report = check(path.read_text(), path=str(path), violation_sets=False)
    assert len(made) == 3
    conflicts = [f for k in report.kernels for f in k.findings
                 if f.invariant == "ave/bank-conflicts" and f.verdict.value == "VIOLATION"]
    assert len(conflicts) == 3
    for f in conflicts:
        cex = f.counterexample
        assert cex.block == [0, 0, 0] and cex.iterations["kt"] == 0
        assert all(size <= 64 for size in cex.sizes.values())


def test_a_thread_guard_is_enumerated_and_its_conflict_takes_its_point(monkeypatch):
    """`if t >= 16`: the enumeration runs only the lanes the guard lets run, so the conflict it
    names (lanes 32 and 48; lanes 0 and 16 when every lane ran) runs, and its point is its model;
    the verdict is the one Z3 alone gives."""
    from ave_decl.solver.access_queries import AccessQueries

    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    made = _made_points(monkeypatch)
    text = _GUARDED.format(guard="t >= 16")
    report = check(text, path="guarded.ave", violation_sets=False)
    (finding,) = [f for k in report.kernels for f in k.findings
                  if f.invariant == "ave/bank-conflicts" and f.verdict.value == "VIOLATION"]
    assert len(made) == 1 and finding.queries == 1
    assert finding.message == "2-way bank conflict: lanes 32 and 48 access words 64 and 96 of bank 0"
    monkeypatch.setattr(AccessQueries, "_bank_witness", lambda *args: None)  # every access to Z3
    by_z3 = check(text, path="guarded.ave", violation_sets=False)
    assert [(line, v) for line, v, *_rest in _bank(report)] == [(line, v) for line, v, *_rest in _bank(by_z3)]


def test_a_point_a_guard_left_out_rules_out_goes_the_solvers_way(monkeypatch):
    """`if t < M // 4` with M = 64: the guard reads a size, so the enumeration leaves it out and
    names lanes 0 and 16, which do not both run; neither frame makes that point a model, and the
    whole access, asked after the pinned one, is proved."""
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    made = _made_points(monkeypatch)
    text = _GUARDED.format(guard="t < M // 4").replace("assume(M % 64 == 0)", "assume(M % 64 == 0)\n    assume(M <= 64)")
    report = check(text, path="guarded.ave", violation_sets=False)
    assert not made
    verdicts = [(f.verdict.value, f.queries) for k in report.kernels for f in k.findings
                if f.invariant == "ave/bank-conflicts"]
    assert verdicts[-1] == ("VERIFIED", 2)


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
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    made = _made_points(monkeypatch)
    two = check(path.read_text(), path=str(path), violation_sets=False, jobs=2)
    assert events == ["frame", "fork"] and len(made) == 3
    assert _bank(one) == _bank(two)


def test_no_frame_is_made_before_the_fork_when_no_bank_access_conflicts(monkeypatch):
    """A kernel whose bank accesses all enumerate conflict-free makes no frame (its canonical
    model would cost a fresh context, and with contrived assumptions the whole timeout)."""
    from ave_decl.solver import parallel

    made: list[int] = []
    real = solve.frame_values
    monkeypatch.setattr(solve, "frame_values", lambda *args: made.append(1) or real(*args))
    monkeypatch.setattr(parallel, "forks_at_once", lambda obligations: True)
    monkeypatch.setattr(parallel, "can_fork", lambda: False)
    conflict_free = _GUARDED.format(guard="t < 16").replace("S[t * 2]", "S[t + 1]")
    report = check(conflict_free, path="guarded.ave", violation_sets=False, jobs=2)
    verdicts = [f.verdict.value for k in report.kernels for f in k.findings if f.invariant == "ave/bank-conflicts"]
    assert not made and verdicts == ["VERIFIED"] * len(verdicts) and len(verdicts) >= 3


_INDEXED = """
@kernel(grid=(M // 64,), block=64, wave=64)
def indexed(A: Tensor[f32, (M,)], ids: Tensor[i32, (M,), permutation], C: Tensor[f32, (M,)], D: Tensor[f32, (M,)]):
    assume(M % 64 == 0)
    t = thread_id(0)
    bm = block_id(0) * 64
    r = ids[bm + t]
    C[r] = A[r]
    S = shared(f32, (128,))
    S[t] = A[bm + t]
    S[t + 64] = A[bm + t]
    syncthreads()
    D[bm + t] = S[t * 2]
"""


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_point_model_reports_no_other_querys_index_tables(jobs, monkeypatch):
    """A point model reads no index tensor, so its counterexample lists none, whatever query
    this process prepared before it (with two jobs, another obligation's `ids` read once
    leaked into the bank conflict's `index_tables`), memo on (cold and warm) or off."""
    monkeypatch.setattr("ave_decl.solver.parallel.can_fork", lambda: False)
    made = _made_points(monkeypatch)
    reports = [check(_INDEXED, path="indexed.ave", violation_sets=False, jobs=jobs) for _ in range(2)]
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    reports.append(check(_INDEXED, path="indexed.ave", violation_sets=False, jobs=jobs))
    assert made
    for report in reports:
        (finding,) = [f for k in report.kernels for f in k.findings
                      if f.invariant == "ave/bank-conflicts" and f.verdict.value == "VIOLATION"]
        assert finding.counterexample.index_tables == {}
    assert len({json.dumps(r.to_json(timings=False), sort_keys=True) for r in reports}) == 1
