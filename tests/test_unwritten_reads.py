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


STAGED_BY_INNER_LOOP = '''
@kernel(grid=(N // 256,), block=128, wave=64, reference="C = A")
def staged(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % 256 == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    base = block_id(0) * 256
    S = shared(f32, (2, 128))
    for o in range(2):
        syncthreads()
        {read}
        syncthreads()
        for h in range(3):
            if {guard}:
                S[h % 2, t] = A[base + {src} + t]
        {late_read}
'''
READ = "C[base + o * 128 + 127 - t] = S[0, 127 - t]"


def _staged(read: str, guard: str, src: str, late_read: str = "") -> str:
    return STAGED_BY_INNER_LOOP.format(read=read, guard=guard, src=src, late_read=late_read)


@pytest.mark.parametrize("text", [
    # read before any store of the first outer iteration: nothing wrote S[0] yet (was VERIFIED:
    # the store's stage and guard name `h`, a loop the read is not in, so no alternative was posed)
    _staged(READ, "h < 2 * o + 1", "128"),
    # the stores that reach the second iteration's read skip stage 0 in the first one
    _staged("pass", "h > 2 * o + 1", "o * 128", "syncthreads()\n        " + READ),
], ids=["read-before-inner-store-loop", "guard-skips-the-stage"])
def test_a_stage_written_only_by_an_inner_loop_iteration_the_guard_skips_is_a_replayed_violation(text):
    (_, sim), = simulate_source(SourceFile("staged.ave", text), {"N": 256}, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(text, path="staged.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    found = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"]]
    assert found


def test_a_stage_written_by_an_inner_loop_before_the_read_verifies():
    text = _staged("pass", "h < 2 * o + 1", "o * 128", "syncthreads()\n        " + READ)
    (_, sim), = simulate_source(SourceFile("staged.ave", text), {"N": 256}, shadow=True)
    assert sim.reference["ok"]
    (k,) = ave_decl.check(text, path="staged.ave", violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED


SIZE_GUARDED_READ = '''
@kernel(grid=(N // 256,), block=128, wave=64, reference="C = A")
def late(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % 256 == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    base = block_id(0) * 256
    S = shared(f32, (2, 128))
    if N > 256:
        S[0, t] = A[base + t]
    syncthreads()
    C[base + 127 - t] = S[0, 127 - t]
    C[base + 128 + t] = A[base + 128 + t]
    syncthreads()
    {late}
'''


@pytest.mark.parametrize("late", ["reset_tags(S)", "S[1, t] = load(A[base + t], mask=t < 64, other=0.0)"],
                         ids=["reset-after-the-read", "masked-store-after-the-read"])
def test_a_store_after_the_read_does_not_hide_an_unwritten_read(late):
    """At N = 256 nothing wrote S[0] before the read. A store outside the statement the
    alternative needs (a whole-buffer reset, a masked store), after the read and in no loop
    around it, made the load lose its unwritten alternative: VERIFIED (found by a helper
    probing the checker against the simulator)."""
    text = SIZE_GUARDED_READ.format(late=late)
    (_, sim), = simulate_source(SourceFile("late.ave", text), {"N": 256}, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(text, path="late.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    assert any(f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"] for f in k.findings)


PARTLY_WRITTEN = '''
@kernel(grid=(N // 128,), block=128, wave=64, reference="C = A")
def part(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % 128 == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    base = block_id(0) * 128
    S = shared(f32, (2, 128))
    {stores}
    syncthreads()
    C[base + 127 - t] = S[0, 127 - t]
'''
HALVES = ["if t < 64:\n        S[0, t] = A[base + t]", "if t >= 64:\n        S[0, t] = A[base + t]"]
BY_ROWS = "for r in range(2):\n        if t < 64:\n            S[0, r * 64 + t] = A[base + r * 64 + t]"


@pytest.mark.parametrize("stores", [HALVES[0], "if t < 64:\n        for r in range(1):\n            S[0, r * 64 + t] = A[base + r * 64 + t]"],
                         ids=["thread-guard", "thread-guard-and-inner-loop"])
def test_a_store_that_writes_part_of_what_the_read_reads_leaves_the_rest_unwritten(stores):
    """Half the threads fill the stage, all read it: the other half was never written. The
    store's offsets depend on a guard on the thread, so no alternative was posed: VERIFIED."""
    text = PARTLY_WRITTEN.format(stores=stores)
    (_, sim), = simulate_source(SourceFile("part.ave", text), {"N": 128}, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(text, path="part.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    assert any(f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"] for f in k.findings)


@pytest.mark.parametrize("stores", ["\n    ".join(HALVES), BY_ROWS], ids=["two-halves", "rows-by-a-loop"])
def test_stores_that_together_write_what_the_read_reads_verify(stores):
    text = PARTLY_WRITTEN.format(stores=stores)
    (_, sim), = simulate_source(SourceFile("part.ave", text), {"N": 128}, shadow=True)
    assert sim.reference["ok"]
    (k,) = ave_decl.check(text, path="part.ave", violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED


VARYING_INNER = '''
@kernel(grid=(N // 256,), block=128, wave=64, reference="C = A")
def vary(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % 256 == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    base = block_id(0) * 256
    S = shared(f32, (2, 128))
    for o in range(2):
        for h in range({bounds}):
            {guard}S[{stage}, t] = A[base + o * 128 + t]
        syncthreads()
        C[base + o * 128 + 127 - t] = S[o % 2, 127 - t]
        syncthreads()
'''


def _vary(bounds: str, stage: str, guard: str = "") -> str:
    return VARYING_INNER.format(bounds=bounds, stage=stage, guard=f"if {guard}:\n                " if guard else "")


@pytest.mark.parametrize("text", [
    _vary("o", "o % 2"),  # no iteration at o = 0: nothing wrote stage 0 (was VERIFIED)
    _vary("o + 1", "h % 2", "h == o + 1"),  # the guard's value is past the range at every o
], ids=["empty-at-the-first-iteration", "guard-outside-the-range"])
def test_a_store_in_a_loop_of_varying_range_that_never_runs_leaves_the_stage_unwritten(text):
    (_, sim), = simulate_source(SourceFile("vary.ave", text), {"N": 256}, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(text, path="vary.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    assert any(f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"] for f in k.findings)


@pytest.mark.parametrize("text", [_vary("o + 1", "o % 2"), _vary("o + 1", "h % 2", "h == o")],
                         ids=["runs-at-every-iteration", "stage-by-the-loop"])
def test_a_store_in_a_loop_of_varying_range_that_runs_verifies(text):
    (_, sim), = simulate_source(SourceFile("vary.ave", text), {"N": 256}, shadow=True)
    assert sim.reference["ok"]
    (k,) = ave_decl.check(text, path="vary.ave", violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED


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
    text = f'''
@kernel(grid=(N // 512,), block=128, wave=64, reference="C = A")
def more(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % 512 == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    base = block_id(0) * 512
    {body}
'''
    (_, sim), = simulate_source(SourceFile("more.ave", text), {"N": 512}, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(text, path="more.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    assert any(f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"] for f in k.findings)
