"""Kills by slice covering (solver/slice_cover.py, chains.Expander.not_overwritten): a stage that
a *group* of stores refills together each iteration kills what an earlier store left there,
whichever thread wrote it; a group that misses part of the stage, or a store under a condition on
data, kills nothing, and the stale value it leaves is a replayed violation."""
from __future__ import annotations

import ave_decl
from ave_decl.report.model import Verdict
from ave_decl.solver import slice_cover
from conftest import copy_kernel as _copy_kernel


# The prologue fills stage 0 with one thread mapping (t, 128 + t); the loop refills a stage per
# iteration with another (2t, 2t + 1), by two stores neither of which covers the stage alone. The
# read of stage 0 at iteration 2 sees the refill of iteration 1, not the prologue's value: only a
# kill by the pair (any thread) says so, since thread t's own refill writes other elements.
REFILL = _copy_kernel("refill_pairs", 128, """    S = shared(f32, (2, 256))
    S[0, t] = A[base + t]
    S[0, 128 + t] = A[base + 128 + t]
    for it in range(4):
        syncthreads()
        if it + 1 < 4:
            S[(it + 1) % 2, 2 * t] = A[base + (it + 1) * 256 + 2 * t]
            S[(it + 1) % 2, 2 * t + 1] = A[base + (it + 1) * 256 + 2 * t + 1]
        C[base + it * 256 + t] = S[it % 2, t]
        C[base + it * 256 + 128 + t] = S[it % 2, 128 + t]
        syncthreads()
""")
ODD = "S[(it + 1) % 2, 2 * t + 1] = A[base + (it + 1) * 256 + 2 * t + 1]"


def _kernel(text: str, confirm: bool = True):
    (k,) = ave_decl.check(text, path="k.ave", confirm=confirm).kernels
    return k


def _errors(k) -> list:
    return [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]


def test_a_stage_refilled_by_two_stores_together_kills_the_prologues_value(monkeypatch):
    found: dict[tuple[int, int], slice_cover.Cover | None] = {}
    group_of = slice_cover.SliceCovers.group

    def recording(self, store, h):
        found[(store.stmt, h)] = cover = group_of(self, store, h)
        return cover

    monkeypatch.setattr(slice_cover.SliceCovers, "group", recording)
    k = _kernel(REFILL, confirm=False)
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.message) for f in k.findings if f.verdict != "VERIFIED"]
    groups = {(tuple(a.stmt for a in c.members), c.compared) for c in found.values() if c}
    # the two refill stores, together, by stage (the first coordinate)
    assert len(groups) == 1 and [(len(m), n) for m, n in groups] == [(2, 1)], found


def test_a_group_that_misses_half_the_stage_leaves_a_stale_value_that_replays():
    text = REFILL.replace(ODD, "S[(it + 1) % 2, 2 * t] = A[base + (it + 1) * 256 + 2 * t]")
    bad = [f for f in _errors(_kernel(text)) if f.invariant == "ave/epilogue-placement"]
    assert bad and all(f.replay["confirmed"] for f in bad), [(f.message, f.replay) for f in bad]
    # an odd element of stage 0 still holds the prologue's tile at iteration 2
    assert any("tagged A(1,) at C coordinates (513,)" in f.message for f in bad), [f.message for f in bad]


def test_a_wrong_part_in_the_writers_own_iteration_is_still_caught():
    """The group's other store, in the writer's own iteration, wrote another part of the stage:
    it must not kill the writer's value (a kill at that iteration would hide this bug)."""
    text = REFILL.replace(ODD, "S[(it + 1) % 2, 2 * t + 1] = A[base + (it + 1) * 256 + 2 * t]")
    bad = [f for f in _errors(_kernel(text)) if f.invariant == "ave/epilogue-placement"]
    assert bad and bad[0].replay["confirmed"], [(f.message, f.replay) for f in bad]


def test_a_refill_under_a_condition_on_data_kills_nothing():
    """Whether `if M[...] > 0` refills the stage depends on data: it kills nothing, so the stale
    tile it may leave is never VERIFIED (the replay's data need not take that branch: UNKNOWN)."""
    pairs = "            S[(it + 1) % 2, 2 * t] = A[base + (it + 1) * 256 + 2 * t]\n            " + ODD + "\n"
    own = ("            S[(it + 1) % 2, t] = A[base + (it + 1) * 256 + t]\n"
           "            S[(it + 1) % 2, 128 + t] = A[base + (it + 1) * 256 + 128 + t]\n")
    with_mask = REFILL.replace("A: Tensor[f32, (N,)], C", "A: Tensor[f32, (N,)], M: Tensor[f32, (N,)], C")
    single = with_mask.replace(pairs, own)
    assert single != with_mask
    assert _kernel(single, confirm=False).verdict == Verdict.VERIFIED
    guarded = single.replace("        if it + 1 < 4:\n", "        if it + 1 < 4:\n          if M[base + t] > 0.0:\n")
    assert guarded != single
    k = _kernel(guarded)
    assert k.verdict != Verdict.VERIFIED
    assert any(f.invariant == "ave/epilogue-placement" and f.verdict != Verdict.VERIFIED for f in k.findings)


# A single-stage buffer the loop rewrites whole from iteration 1 on, by two stores with another
# thread mapping than the prologue's: the prologue's value is dead from iteration 1 on, which
# only a kill by the pair ("they ran", no stage to compare) shows.
WHOLE = _copy_kernel("whole", 128, """    S = shared(f32, (256,))
    S[t] = A[base + t]
    S[128 + t] = A[base + 128 + t]
    for it in range(4):
        syncthreads()
        if it > 0:
            S[2 * t] = A[base + it * 256 + 2 * t]
            S[2 * t + 1] = A[base + it * 256 + 2 * t + 1]
        syncthreads()
        C[base + it * 256 + t] = S[t]
        C[base + it * 256 + 128 + t] = S[128 + t]
""")


def test_a_buffer_rewritten_whole_each_iteration_kills_without_a_stage():
    k = _kernel(WHOLE, confirm=False)
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.message) for f in k.findings if f.verdict != "VERIFIED"]
    half = WHOLE.replace("S[2 * t + 1] = A[base + it * 256 + 2 * t + 1]", "S[2 * t] = A[base + it * 256 + 2 * t]")
    bad = [f for f in _errors(_kernel(half)) if f.invariant == "ave/epilogue-placement"]
    assert bad and all(f.replay["confirmed"] for f in bad), [(f.message, f.replay) for f in bad]


def test_a_slice_store_in_a_loop_around_the_read_has_not_finished_the_slice_at_the_read():
    """Row r + 1 of this iteration's stage is written after the read at inner iteration r: the
    stage refill of the reader's own iteration must not count as done (it hid this bug)."""
    text = _copy_kernel("inner", 64, """    S = shared(f32, (2, 4, 64))
    for it in range(4):
        for r in range(4):
            S[it % 2, r, t] = A[base + it * 256 + r * 64 + t]
            C[base + it * 256 + ((r + 1) % 4) * 64 + t] = S[it % 2, (r + 1) % 4, t]
""")
    bad = [f for f in _errors(_kernel(text)) if f.invariant == "ave/epilogue-placement"]
    assert bad and bad[0].replay["confirmed"], [(f.message, f.replay) for f in bad]
    fixed = text.replace("((r + 1) % 4) * 64 + t] = S[it % 2, (r + 1) % 4, t]", "r * 64 + t] = S[it % 2, r, t]")
    assert fixed != text
    assert _kernel(fixed, confirm=False).verdict == Verdict.VERIFIED


def test_a_store_loop_after_the_read_in_an_outer_loop_kills_in_the_writers_outer_iteration():
    """The reader is in loop o before the store loop h: h's iterations of the reader's own o run
    after the read, so they must not kill the value it reads (they did: VERIFIED)."""
    text = _copy_kernel("ob6", 128, per_block=256, body="""    S = shared(f32, (2, 128))
    S[1, t] = A[base + t]
    for o in range(2):
        syncthreads()
        C[base + o * 128 + 127 - t] = S[1 - o, 127 - t]
        syncthreads()
        for h in range(3):
            if h < 2 * o + 1:
                S[h % 2, t] = A[base + 128 + (t + 1 - o) % 128]
""")
    bad = [f for f in _errors(_kernel(text)) if f.invariant == "ave/epilogue-placement"]
    assert bad and bad[0].replay["confirmed"], [(f.message, f.replay) for f in bad]


def test_a_store_loop_whose_bounds_depend_on_the_thread_covers_nothing():
    """`for it in range(1 + wave_id())`: the iteration a slice kill names may run for the
    reader's wave and never for the one that writes the element; never VERIFIED."""
    text = _copy_kernel("tb2", 128, """    S = shared(f32, (128,))
    for it in range(1 + wave_id()):
        S[t] = A[base + (t + 64 * (1 - it) * (1 - t // 64)) % 128]
    syncthreads()
    C[base + 127 - t] = S[127 - t]
""")
    assert _kernel(text, confirm=False).verdict != Verdict.VERIFIED


def test_a_member_before_the_read_still_kills_in_the_readers_iteration():
    """A buffer rewritten whole by two stores, one before the read and one after it: the first
    store's own (per-thread) kill in the reader's iteration stays next to the group's."""
    text = _copy_kernel("g4", 64, per_block=512, body="""    S = shared(f32, (2, 2, 32))
    for c2 in range(16, 32, 16):
        S[t // 32, (t // 16) % 2, c2 + t % 16] = A[base + 64 * (t // 32) + 32 * ((t // 16) % 2) + c2 + t % 16]
    for it in range(4):
        syncthreads()
        S[t % 2, t // 32, (t // 2) % 16] = A[base + it * 128 + 64 * (t % 2) + 32 * (t // 32) + (t // 2) % 16]
        syncthreads()
        C[base + it * 128 + t] = S[0, t // 32, t % 32]
        C[base + it * 128 + 64 + t] = S[1, t // 32, t % 32]
        syncthreads()
        for c2 in range(16, 32, 16):
            S[t // 32, (t // 16) % 2, c2 + t % 16] = A[base + ((it + 1) % 4) * 128 + 64 * (t // 32)
                                                       + 32 * ((t // 16) % 2) + c2 + t % 16]
""")
    k = _kernel(text, confirm=False)
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.message) for f in k.findings if f.verdict != "VERIFIED"]
