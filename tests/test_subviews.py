"""Subviews (`subview(smem, offset, shape)`): aliases of one shared allocation, with their own
shapes, bounds and tags, whose races and provenance meet through storage addresses."""
from __future__ import annotations

import pytest
from conftest import EXAMPLES, ONE_WAVE, front_end_error

import ave_decl
from ave_decl.report.model import Verdict

ONE = EXAMPLES / "subviews" / "one_allocation.ave"


def _bad(text: str):
    (k,) = ave_decl.check(text, path="k.ave", confirm=True).kernels
    return {f.invariant: f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"}


def test_an_allocation_shared_by_subviews_verifies_and_simulates(ave):
    assert ave("check", ONE).code == 0
    r = ave("simulate", ONE)
    assert r.code == 0 and "the output matches the reference" in r.out, r.out


@pytest.mark.parametrize("old, new", [
    ("    Q[t] = A[64 + t]", "    Q[t - 1] = A[64 + t]"),   # past the start of Q: into K's region
    ("    Q[t] = A[64 + t]", "    smem[t] = A[64 + t]"),    # through the storage itself
])
def test_a_store_into_a_tagged_subview_through_another_alias_is_a_replayed_violation(old, new):
    bad = _bad(ONE.read_text().replace(old, new))
    f = bad["ave/shared-round-trip"]
    assert "lies in a tagged subview" in f.message and f.replay["confirmed"], f.replay
    assert f.counterexample.instruction["address"] < 64


def test_a_subview_has_its_own_bounds():
    bad = _bad(ONE.read_text().replace("    Q[t] = A[64 + t]", "    Q[t - 1] = A[64 + t]"))
    assert bad["ave/buffer-bounds"].replay["confirmed"]


def test_races_meet_across_aliases():
    text = ("@kernel(grid=(1,), block=128, wave=64)\ndef k(A: Tensor[f32, (64,)], C: Tensor[f32, (64,)]):\n"
            "    tag(A, lambda i: (i,), \"A\")\n    tag(C, lambda i: (i,), \"C\")\n    t = thread_id(0)\n"
            "    smem = shared(f32, (128,))\n    K = subview(smem, 64, (64,))\n    if t < 64:\n        K[t] = A[t]\n"
            "    if t >= 64:\n        C[t - 64] = smem[t]\n")
    f = _bad(text)["ave/shared-race"]
    assert f.replay["confirmed"] and "smem" in f.message


@pytest.mark.parametrize("body, words", [
    ("    s = local(f32, (4,))\n    V = subview(s, 0, (2,))\n", "views a shared buffer"),
    ("    s = shared(f32, (8, 8), layout=swizzle(1, 0, 1) @ row_major(8, 8))\n    V = subview(s, 0, (2,))\n",
     "without a layout"),
    ("    s = shared(f32, (64,))\n    V = subview(s, 60, (8,))\n", "spans elements 60 to 67"),
    ("    s = shared(f32, (64,))\n    tag(s, lambda i: (i,), \"S\")\n    V = subview(s, 0, (8,))\n", "is tagged"),
    ("    s = shared(f32, (64,))\n    V = subview(s, 0, (8,))\n    tag(s, lambda i: (i,), \"S\")\n", "has subviews"),
    ("    s = shared(f32, (64,))\n    V = subview(s, thread_id(0), (8,))\n", "loop variables and sizes only"),
])
def test_bad_subviews_are_located_errors(body, words, tmp_path, ave):
    assert words in front_end_error(ave, tmp_path / "k.ave", ONE_WAVE + body)


def test_subviews_compile_to_offsets_into_the_one_allocation(ave):
    r = ave("run", ONE)
    assert r.code == 0 and "ok        one_allocation on host" in r.out, r.out + r.err
    r = ave("emit", "--target", "nvptx", ONE)  # one 512-byte array; Q is 64 elements (256 bytes) in
    assert r.code == 0 and ".shared .align 128 .b8 __ave_shared[512];" in r.out, r.out + r.err
    assert any(ln.strip().startswith("st.shared.b32") and "+256]" in ln for ln in r.out.splitlines()), r.out


def test_races_between_the_arms_of_an_if_meet_across_aliases():
    """A producer arm stores through a subview, the consumer arm reads the storage itself, with no
    barrier between them: the same barrier interval (arm_race pairs accesses by storage)."""
    text = ("@kernel(grid=(1,), block=128, wave=64)\ndef k(A: Tensor[f32, (64,)], C: Tensor[f32, (64,)]):\n"
            "    tag(A, lambda i: (i,), \"A\")\n    tag(C, lambda i: (i,), \"C\")\n    t = thread_id(0)\n"
            "    smem = shared(f32, (128,))\n    K = subview(smem, 64, (64,))\n    if wave_id() == 0:\n"
            "        K[t] = A[t]\n        syncthreads()\n    else:\n        C[t - 64] = smem[t]\n        syncthreads()\n")
    f = _bad(text)["ave/shared-race"]
    assert "in the other arm" in f.message and f.replay["confirmed"], f.replay
