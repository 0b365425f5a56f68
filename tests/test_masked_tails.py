"""Tail tiles (issue 19): masked loads and stores, zero tags, guarded output coverage.

The kernels are `examples/tails/gemm_tail.ave` (M, N and K tails) and small edits of it, each a
bug a kernel engineer makes when handling partial tiles; every violation must come with a
counterexample the simulator confirms, and the correct kernel must verify and simulate cleanly.
"""
from __future__ import annotations

import pytest
from conftest import EXAMPLES, examples
from hypothesis import given, settings
from hypothesis import strategies as st

import ave_decl
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source

TAIL = EXAMPLES / "tails" / "gemm_tail.ave"
TEXT = TAIL.read_text()
STORE = "        store(C[row, col], acc[r], mask=row < M and col < N)"
LOAD_A = "As[r, c] = load(A[bm + r, kt + c], mask=bm + r < M and kt + c < K, other=0.0)"


def edit(old: str, new: str) -> str:
    assert old in TEXT
    return TEXT.replace(old, new)


def check(text: str, confirm: bool = True):
    (k,) = ave_decl.check(text, path="k.ave", confirm=confirm).kernels
    return k


def errors(k) -> dict[str, object]:
    return {f.invariant: f for f in k.findings if f.severity == "error" and f.verdict != Verdict.VERIFIED}


def test_tail_gemm_verifies_and_its_unmasked_store_is_a_bounds_violation(ave):
    """(The replay of bounds findings on this kernel is test_tail_bugs_are_confirmed_violations'.)"""
    r = ave("check", TAIL, EXAMPLES / "tails" / "gemm_tail_unmasked_store.ave")
    assert r.code == 1, r.out
    assert "VERIFIED  gemm_tail " in r.out
    assert "VIOLATION gemm_tail_unmasked_store" in r.out
    assert "error[ave/global-bounds]" in r.out and "= help: mask this access of C" in r.out


def test_if_else_padding_is_the_same_kernel_as_a_masked_load():
    """The natural `if/else` form and `load(mask=, other=)` lower to the same guarded accesses."""
    explicit = edit("            " + LOAD_A, "            if bm + r < M and kt + c < K:\n"
                    "                As[r, c] = A[bm + r, kt + c]\n"
                    "            else:\n"
                    "                As[r, c] = 0.0")
    a, b = parse_text(TEXT).kernels[0], parse_text(explicit).kernels[0]
    assert printer.kernel(a) == printer.kernel(b)  # the same program, statement for statement
    assert "load(" not in printer.kernel(a)
    assert check(explicit, confirm=False).verdict == Verdict.VERIFIED


@pytest.mark.parametrize("old, new, invariant, words", [
    # the store guard cuts the last row: that element is never written
    ("mask=row < M and col < N)", "mask=row < M - 1 and col < N)", "ave/output-coverage", "never written"),
    # the grid rounds down: the tail rows have no block at all
    ("grid=((M + 63) // 64,", "grid=(M // 64,", "ave/output-coverage", "store instances for"),
    # the A mask dropped: the tail rows are loaded out of bounds
    (", mask=bm + r < M and kt + c < K, other=0.0)", ")", "ave/global-bounds", "outside A"),
    # the mask shifted by one
    ("mask=bm + r < M and", "mask=bm + r <= M and", "ave/global-bounds", "outside A"),
    # padding that is not zero pairs a real B element with an untagged value
    ("kt + c < K, other=0.0)", "kt + c < K, other=1.0)", "ave/mma-k-pairing", "Top"),
])
def test_tail_bugs_are_confirmed_violations(old, new, invariant, words):
    # the pairing replay simulates MFMA shadows (about 10 s): the other cases cover replay
    confirm = invariant != "ave/mma-k-pairing"
    k = check(edit(old, new), confirm)
    assert k.verdict == Verdict.VIOLATION
    found = errors(k)
    assert invariant in found, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED]
    f = found[invariant]
    assert words in f.message
    assert not confirm or (f.replay is not None and f.replay["confirmed"]), f.replay


def test_a_guard_that_selects_lanes_is_unknown_not_a_violation():
    """Half the waves store, the other half would write the same elements: without the guard the
    store is not one-to-one, so the padded-box proof does not apply (UNKNOWN, with the reason)."""
    text = edit("        col = bn + (w % 2) * 32 + lane % 32\n" + STORE, "        col = bn + lane % 32\n"
                "        store(C[row, col], acc[r], mask=row < M and col < N and w % 2 == 0)")
    (k,) = ave_decl.check(text, path="k.ave").kernels
    (cov,) = [f for f in k.findings if f.invariant == "ave/output-coverage" and f.verdict != Verdict.VERIFIED]
    assert cov.verdict == Verdict.UNKNOWN and "one element" in cov.message


@pytest.mark.parametrize("line, message", [
    ("x = load(A[0, 0], mask=M > 1, fill=0.0)", "load() has no keyword 'fill'"),
    ("x = load(A[0, 0], mask=M > 1) + load(A[0, 1], mask=M > 2)", "at most one load(...) per statement"),
    ("load(A[0, 0], mask=M > 1)", "a load(...) is a value"),
    ("x = load(A, mask=M > 1)", "must be an indexed reference"),
    ("store(C[0, 0], 1.0, where=M > 1)", "store() has no keyword 'where'"),
    ("x = A[0, 0] if M > 1 else 0.0", "use load(A[i], mask=c, other=y)"),
])
def test_masked_access_errors_are_located(ave, tmp_path, line, message):
    p = tmp_path / "bad.ave"
    p.write_text("@kernel(grid=(1,), block=64, wave=64)\n"
                 "def k(A: Tensor[f32, (M, K)], C: Tensor[f32, (M, K)]):\n"
                 f"    {line}\n")
    r = ave("check", p)
    assert r.code == 3, r.out + r.err
    assert f"{p}:3:" in r.out + r.err and message in r.out + r.err, r.out + r.err


# Simulated sizes: one block, tails in M and N, one or two K tiles (a few seconds each).
@settings(max_examples=examples(1), deadline=None)
@given(m=st.integers(1, 63), n=st.integers(1, 63), k=st.sampled_from([64, 128]))
def test_tail_gemm_simulates_cleanly_at_drawn_tail_sizes(m, n, k):
    """The shadow tags follow the same zero algebra as the verifier: a correct tail kernel passes
    every shadow check and matches the reference, whatever the tail sizes."""
    ((_, r),) = simulate_source(SourceFile.read(TAIL), {"M": m, "N": n, "K": k})
    assert r.reference["ok"], r.reference
    assert r.shadow_ok and not r.errors, [(f.invariant, f.failed, f.first) for f in r.failures if f.failed]
    assert all(f.checked > 0 for f in r.failures)


BRANCH_SCALAR = """@kernel(grid=(N // 64,), block=64, reference="C = A")
def branch_scalar(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % 64 == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    i = block_id(0) * 64 + t
    DEFINE
    C[i] = x
"""


@pytest.mark.parametrize("define", [
    "if t < 32:\n        x = A[i]\n    else:\n        x = A[0]",   # a name first assigned in both branches
    "x = load(A[i], mask=t < 32, other=1.0)",                           # the masked load's default
])
def test_a_scalar_first_assigned_under_a_mask_keeps_both_values(define):
    """Both branches store into one variable: the else value reaches the use (it did not, once: the
    join kept the then-branch's register only, and these kernels were VERIFIED)."""
    (k,) = ave_decl.check(BRANCH_SCALAR.replace("DEFINE", define), path="k.ave").kernels
    assert k.verdict == Verdict.VIOLATION
    assert {f.invariant for f in k.findings if f.verdict == Verdict.VIOLATION} == {"ave/epilogue-placement"}
