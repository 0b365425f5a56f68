"""Register-staged prefetch (issue 21): the next tile is loaded into a register vector before the
current stage is read and stored into the other stage after it, under two `if`s on one condition.
The prologue's store into stage 0 is killed by the loop's store two iterations later only if the
kill instance takes the same part of the writer's vector: the two `store_vec`s are rewritten into
part loops of different (fresh) names, which a name match alone left free (the kill then said
nothing and the replay could not reproduce the reported stale flow)."""
from __future__ import annotations

from pathlib import Path

import pytest

import ave_decl
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source
from ave_decl.testing.mutate import mutants

ROOT = Path(__file__).resolve().parent.parent
COPY = ROOT / "examples" / "pipelines" / "register_prefetch.ave"
GEMM = ROOT / "tests" / "data" / "precision" / "gemm_register_prefetch_guarded.ave"


def _check(text: str, path: str):
    report = ave_decl.check(text, path=path, confirm=True, violation_sets=False)
    (k,) = report.kernels
    return k


def test_the_register_prefetch_copy_verifies_and_simulates():
    text = COPY.read_text()
    assert _check(text, str(COPY)).verdict == Verdict.VERIFIED
    (_, sim), = simulate_source(SourceFile(str(COPY), text), {"T": 64}, shadow=True)
    assert sim.reference["ok"] and not [f for f in sim.failures if f.failed] and not sim.races


# each edit breaks the kernel: the check must say VIOLATION with a counterexample the simulator replays
BUGS = {
    "the last prefetch skipped (wrong guard on the load)": (
        "        if kt + 16 < T:\n            g[0] = load_vec", "        if kt + 32 < T:\n            g[0] = load_vec"),
    "the barrier dropped": ("        syncthreads()\n", "        pass\n"),
}
OPERATORS = ("refill_read_stage", "wrong_prologue_stage")  # the next tile into the stage being read; tile 0 into stage 1


def _mutant(bug: str) -> str:
    text = COPY.read_text()
    if bug in OPERATORS:
        (m,) = mutants(text, [bug], first_only=False)
        return m.text
    old, new = BUGS[bug]
    assert text.count(old) == 1
    return text.replace(old, new)


@pytest.mark.parametrize("bug", sorted(BUGS) + list(OPERATORS))
def test_a_broken_register_prefetch_is_a_replayed_violation(bug):
    mutant = _mutant(bug)
    (_, sim), = simulate_source(SourceFile("bug.ave", mutant), {"T": 64}, shadow=True)
    assert not sim.reference["ok"] or sim.races  # the ground truth: the bug shows when run
    k = _check(mutant, "bug.ave")
    assert k.verdict == Verdict.VIOLATION, bug
    assert any(f.replay and f.replay["confirmed"] for f in k.findings if f.verdict == Verdict.VIOLATION), bug


@pytest.mark.slow  # ~25 s: the MI300X GEMM with a guarded register prefetch
def test_the_guarded_register_prefetch_gemm_verifies():
    assert _check(GEMM.read_text(), str(GEMM)).verdict == Verdict.VERIFIED


@pytest.mark.slow
@pytest.mark.parametrize("old,new", [
    ("store_vec(As[1 - st, ar + 64 * e, ac], ga[e])", "store_vec(As[st, ar + 64 * e, ac], ga[e])"),
    ("                ga[e] = load_vec(A[bm + ar + 64 * e, kt + 32 + ac], 8)",
     "                ga[e] = load_vec(A[bm + ar + 64 * e, kt + ac], 8)"),
])
def test_a_broken_guarded_register_prefetch_gemm_is_a_replayed_violation(old, new):
    text = GEMM.read_text()
    assert text.count(old) == 1
    k = _check(text.replace(old, new), "bug.ave")
    assert k.verdict == Verdict.VIOLATION
    assert any(f.replay and f.replay["confirmed"] for f in k.findings if f.verdict == Verdict.VIOLATION)
