"""Issue 16: obligations restart their instances' names (smt.Encoder.restart_names), so that a
later obligation meets an earlier one's chains as the same terms and the kernel's memos answer
for them. That is sound only if one name never stands for a variable with a range in one
obligation and another range, or none, in a later one: the div/mod normaliser would rewrite
with the stale range and assert it (`i // 4` of a loop over [0, M) read as 0). A ranged
variable's name carries its range (`Encoder.ranged_var`)."""
from __future__ import annotations

import re

import pytest
import z3
from conftest import EXAMPLES

from ave_decl.datalog.clingo_engine import ClingoEngine
from ave_decl.datalog.ruleset import load_rules, rule_metadata
from ave_decl.facts.lower import lower_module
from ave_decl.facts.view import KernelView
from ave_decl.lang.parser import parse_source
from ave_decl.lang.source import SourceFile
from ave_decl.pipeline import split_by_kernel
from ave_decl.report.model import Verdict
from ave_decl.solver import smt
from ave_decl.solver.canonical_model import free_constants
from ave_decl.solver.derived_facts import add_semantic_facts
from ave_decl.solver.solve import KernelSolver

# The first loop's instance is named like the second's (both obligations' first instance, and
# both loops' variable is `i`): with a name that did not carry the range, the second
# obligation's `i` would keep [0, 3] and its store out of bounds for i >= 16 would be VERIFIED.
TWO_LOOPS = """\
@kernel(grid=(1,), block=64, reference="C = A")
def two_loops(A: Tensor[f32, (M,)], C: Tensor[f32, (4,)]):
    assume(M >= 64)
    for i in range(4):
        C[i] = A[i]
    for i in range(0, M):
        C[i // 4] = A[i]
"""


def _check(src: SourceFile, monkeypatch) -> tuple[KernelSolver, list, list[list[z3.BoolRef]]]:
    """A whole check of the source's one kernel: its solver, findings and every prepared query."""
    (kf,) = lower_module(parse_source(src), src)
    context = add_semantic_facts(kf)
    prog = load_rules()
    derived = split_by_kernel(ClingoEngine(prog).run(kf.rows)).get(kf.kid, {})
    prepared: list[list[z3.BoolRef]] = []
    real = smt.Encoder.prepare

    def recording(self, formulas, *args, **kw):
        out = real(self, formulas, *args, **kw)
        prepared.append(out)
        return out

    monkeypatch.setattr(smt.Encoder, "prepare", recording)
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")  # every query posed, whatever this process proved before
    solver = KernelSolver(KernelView.of(kf), derived, rule_metadata(prog), 10.0, violation_sets=False,
                          context=context)
    return solver, solver.findings(), prepared


def test_a_reused_name_never_keeps_another_loops_range(tmp_path, monkeypatch):
    path = tmp_path / "two_loops.ave"
    path.write_text(TWO_LOOPS)
    _solver, findings, _ = _check(SourceFile.read(path), monkeypatch)
    bounds = [f for f in findings if f.invariant == "ave/global-bounds" and f.location.line == 7]
    assert sorted(f.verdict.value for f in bounds) == ["VERIFIED", "VIOLATION"]  # A[i]; C[i // 4]
    (store,) = [f for f in bounds if f.verdict == Verdict.VIOLATION]
    assert "outside C" in store.message and max(store.counterexample.iterations.values()) >= 16


@pytest.mark.parametrize("name", ["gemm_mma_ldmatrix.ave", "attention/flash_attention_st.ave"])
def test_every_ranged_variable_is_named_with_its_range(name, monkeypatch):
    """Over a whole check (operand instances, ldmatrix slots, reductions): each variable with a
    range is named `...@lo..hi` for exactly that range, and no variable the queries hold without
    a range has such a name; and obligations did reuse names."""
    solver, _findings, prepared = _check(SourceFile.read(EXAMPLES / name), monkeypatch)
    enc = solver.enc
    assert enc.ranges
    for var in enc._ranged:
        lo, hi = enc.ranges[var.get_id()]
        assert var.decl().name().endswith(f"@{lo}..{hi}"), (var, lo, hi)
    names: dict[str, int] = {}
    for formulas in prepared:
        for c in free_constants(formulas):
            if c.get_id() not in enc.ranges:
                assert not re.search(r"@-?\d+\.\.-?\d+$", c.decl().name()), c
            names[c.decl().name()] = names.get(c.decl().name(), 0) + 1
    assert any(n.startswith("u!0.") for n in names)  # the first instance of many an obligation


def test_a_query_posed_again_is_not_solved_again(monkeypatch):
    """Obligations that pose the same query (speed/gemm_mma_pipelined: four accumulators share
    each A operand, so their K-distinctness queries are equal) build the same terms under
    restarted names; the check proves each once (KernelSolver._identity), memo or not."""
    attempts: list[tuple[int, ...]] = []
    real = smt.Encoder.quick_check

    def recording(self, prepared, *args, **kw):
        attempts.append(tuple(f.get_id() for f in prepared))
        return real(self, prepared, *args, **kw)

    monkeypatch.setattr(smt.Encoder, "quick_check", recording)
    _solver, findings, _ = _check(SourceFile.read(EXAMPLES / "speed" / "gemm_mma_pipelined.ave"), monkeypatch)
    coverage = [f.verdict for f in findings if f.invariant == "ave/mma-k-coverage"]
    assert coverage == [Verdict.VERIFIED] * 16
    assert len(attempts) == len(set(attempts))
