"""Reads of shared elements no store wrote yet (solver/unwritten.py): a pipeline whose prologue
fills the wrong stage reads an unwritten stage in its first iteration. Without an alternative for
that read every tag check on the value held vacuously (the mutant was VERIFIED)."""
from __future__ import annotations

from pathlib import Path

import pytest

import ave_decl
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source
from ave_decl.testing.mutate import mutants
from conftest import copy_kernel

ROOT = Path(__file__).resolve().parent.parent
PIPELINED = ROOT / "examples" / "gemm_pipelined.ave"
SIZES = {"M": 64, "N": 64, "K": 128}


@pytest.mark.parametrize("site", [0, 1])
def test_a_prologue_filling_the_wrong_stage_is_a_replayed_violation(site):
    m = mutants(PIPELINED.read_text(), ["wrong_prologue_stage"], first_only=False)[site]
    (_, sim), = simulate_source(SourceFile("stage.ave", m.text), SIZES, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(m.text, path="stage.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    found = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"]]
    assert found and any(f.counterexample.lhs.tag in (None, []) for f in found)  # the untagged (unwritten) element


def test_the_correct_pipeline_still_verifies():
    (k,) = ave_decl.check(PIPELINED.read_text(), path=str(PIPELINED), violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED


def _copy_kernel(name: str, body: str, per_block: int = 256) -> str:
    """conftest.copy_kernel with 128 threads, `body` indented by 4 after its first line."""
    return copy_kernel(name, 128, "    " + body + "\n", per_block)


def _replayed_violation(text: str, sizes: dict[str, int]) -> None:
    """The simulator sees the wrong output, and the checker reports a violation it replays."""
    (_, sim), = simulate_source(SourceFile("k.ave", text), sizes, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(text, path="k.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    assert any(f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"] for f in k.findings)


def _verifies(text: str, sizes: dict[str, int]) -> None:
    (_, sim), = simulate_source(SourceFile("k.ave", text), sizes, shadow=True)
    assert sim.reference["ok"]
    (k,) = ave_decl.check(text, path="k.ave", violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED


def _staged(read: str, guard: str, src: str, late_read: str = "") -> str:
    return _copy_kernel("staged", f"""S = shared(f32, (2, 128))
    for o in range(2):
        syncthreads()
        {read}
        syncthreads()
        for h in range(3):
            if {guard}:
                S[h % 2, t] = A[base + {src} + t]
        {late_read}""")


READ = "C[base + o * 128 + 127 - t] = S[0, 127 - t]"


@pytest.mark.parametrize("text", [
    # read before any store of the first outer iteration: nothing wrote S[0] yet (was VERIFIED:
    # the store's stage and guard name `h`, a loop the read is not in, so no alternative was posed)
    _staged(READ, "h < 2 * o + 1", "128"),
    # the stores that reach the second iteration's read skip stage 0 in the first one
    _staged("pass", "h > 2 * o + 1", "o * 128", "syncthreads()\n        " + READ),
], ids=["read-before-inner-store-loop", "guard-skips-the-stage"])
def test_a_stage_written_only_by_an_inner_loop_iteration_the_guard_skips_is_a_replayed_violation(text):
    _replayed_violation(text, {"N": 256})


def test_a_stage_written_by_an_inner_loop_before_the_read_verifies():
    _verifies(_staged("pass", "h < 2 * o + 1", "o * 128", "syncthreads()\n        " + READ), {"N": 256})


def _size_guarded_read(late: str) -> str:
    return _copy_kernel("late", f"""S = shared(f32, (2, 128))
    if N > 256:
        S[0, t] = A[base + t]
    syncthreads()
    C[base + 127 - t] = S[0, 127 - t]
    C[base + 128 + t] = A[base + 128 + t]
    syncthreads()
    {late}""")


@pytest.mark.parametrize("late", ["reset_tags(S)", "S[1, t] = load(A[base + t], mask=t < 64, other=0.0)"],
                         ids=["reset-after-the-read", "masked-store-after-the-read"])
def test_a_store_after_the_read_does_not_hide_an_unwritten_read(late):
    """At N = 256 nothing wrote S[0] before the read. A store outside the statement the
    alternative needs (a whole-buffer reset, a masked store), after the read and in no loop
    around it, made the load lose its unwritten alternative: VERIFIED (found by a helper
    probing the checker against the simulator)."""
    _replayed_violation(_size_guarded_read(late), {"N": 256})


def _partly_written(stores: str) -> str:
    return _copy_kernel("part", f"""S = shared(f32, (2, 128))
    {stores}
    syncthreads()
    C[base + 127 - t] = S[0, 127 - t]""", per_block=128)


HALVES = ["if t < 64:\n        S[0, t] = A[base + t]", "if t >= 64:\n        S[0, t] = A[base + t]"]
BY_ROWS = "for r in range(2):\n        if t < 64:\n            S[0, r * 64 + t] = A[base + r * 64 + t]"


GUARDED_ROW = "if t < 64:\n        for r in range(1):\n            S[0, r * 64 + t] = A[base + r * 64 + t]"


@pytest.mark.parametrize("stores", [HALVES[0], GUARDED_ROW], ids=["thread-guard", "thread-guard-and-inner-loop"])
def test_a_store_that_writes_part_of_what_the_read_reads_leaves_the_rest_unwritten(stores):
    """Half the threads fill the stage, all read it: the other half was never written. The
    store's offsets depend on a guard on the thread, so no alternative was posed: VERIFIED."""
    _replayed_violation(_partly_written(stores), {"N": 128})


@pytest.mark.parametrize("stores", ["\n    ".join(HALVES), BY_ROWS], ids=["two-halves", "rows-by-a-loop"])
def test_stores_that_together_write_what_the_read_reads_verify(stores):
    _verifies(_partly_written(stores), {"N": 128})


def _vary(bounds: str, stage: str, guard: str = "") -> str:
    guarded = f"if {guard}:\n                " if guard else ""
    return _copy_kernel("vary", f"""S = shared(f32, (2, 128))
    for o in range(2):
        for h in range({bounds}):
            {guarded}S[{stage}, t] = A[base + o * 128 + t]
        syncthreads()
        C[base + o * 128 + 127 - t] = S[o % 2, 127 - t]
        syncthreads()""")


@pytest.mark.parametrize("text", [
    _vary("o", "o % 2"),  # no iteration at o = 0: nothing wrote stage 0 (was VERIFIED)
    _vary("o + 1", "h % 2", "h == o + 1"),  # the guard's value is past the range at every o
], ids=["empty-at-the-first-iteration", "guard-outside-the-range"])
def test_a_store_in_a_loop_of_varying_range_that_never_runs_leaves_the_stage_unwritten(text):
    _replayed_violation(text, {"N": 256})


@pytest.mark.parametrize("text", [_vary("o + 1", "o % 2"), _vary("o + 1", "h % 2", "h == o")],
                         ids=["runs-at-every-iteration", "stage-by-the-loop"])
def test_a_store_in_a_loop_of_varying_range_that_runs_verifies(text):
    _verifies(text, {"N": 256})


@pytest.mark.parametrize("body", [
    # a reset at the end of each iteration: it leaves no tag, as no store does (was VERIFIED)
    """S = shared(f32, (2, 128))
    for o in range(2):
        syncthreads()
        if o == 1:
            S[o % 2, t] = A[base + o * 128 + t]
        syncthreads()
        C[base + o * 256 + 127 - t] = S[o % 2, 127 - t]
        C[base + o * 256 + 128 + t] = A[base + o * 256 + 128 + t]
        syncthreads()
        reset_tags(S)""",
    # half a stage per iteration of a loop of varying range: at o = 0 the second half is unwritten
    """S = shared(f32, (2, 256))
    for o in range(2):
        syncthreads()
        for j in range(o + 1):
            S[o % 2, j * 128 + t] = A[base + o * 256 + j * 128 + t]
        syncthreads()
        C[base + o * 256 + 255 - t] = S[o % 2, 255 - t]
        C[base + o * 256 + 127 - t] = S[o % 2, 127 - t]""",
], ids=["reset-in-the-loop", "offsets-by-a-loop-of-varying-range"])
def test_more_never_written_stages_are_replayed_violations(body):
    _replayed_violation(_copy_kernel("more", body, per_block=512), {"N": 512})
