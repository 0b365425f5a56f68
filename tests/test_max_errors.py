"""`ave check --max-errors N`: an agent loop that reads only a candidate's first findings stops
deciding obligations after them. The bar: the verdict and the first N errors are exactly the
full check's (suppressed findings never count), and the report says how many were left."""
from __future__ import annotations

import pytest

import ave_decl

# four errors (two failing tag assertions, an out-of-range load and store) and one assertion
# that holds, in the naive GEMM; `ignore` suppresses the first (its line and the next: the
# assertion that holds)
KERNEL = '''
@kernel(grid=(M // 16, N // 16), block=(16, 16), wave=64, reference="C = A @ B")
def gemm_bugs(A: Tensor[f32, (M, K)], B: Tensor[f32, (K, N)], C: Tensor[f32, (M, N)]):
    assume(M % 16 == 0, N % 16 == 0)
    tag(A, lambda m, k: (m, k), "A")
    tag(B, lambda k, n: (k, n), "B")
    m = block_id(0) * 16 + thread_id(1)
    n = block_id(1) * 16 + thread_id(0)
    acc = 0.0
    for k in range(K):
        a = A[m, k]
        b = B[k, n]
        assert_tag(a, b, lambda ta, tb: ta[1] == tb[1]){ignore}
        assert_tag(a, b, lambda ta, tb: ta[1] == tb[0])
        assert_tag(a, b, lambda ta, tb: ta[0] == tb[1])
        acc += a * b + A[m, k + 1]
    C[m + 1, n] = acc
'''


def _errors(kernel) -> list[tuple]:
    return [(f.invariant, f.location.line, f.verdict.value, f.message) for f in kernel.findings
            if f.severity == "error" and f.verdict.value != "VERIFIED" and f.suppression is None]


def _kernel(text: str, max_errors: int | None):
    (k,) = ave_decl.check(text, path="bugs.ave", violation_sets=False, max_errors=max_errors).kernels
    return k


@pytest.mark.parametrize("ignore", ["", "  # ave: ignore[ave/tag-assert] known"])
def test_first_errors_and_verdict_are_the_full_checks(ignore):
    text = KERNEL.format(ignore=ignore)
    full = _kernel(text, None)
    assert full.unchecked == 0 and full.verdict.value == "VIOLATION"
    every = _errors(full)
    assert len(every) >= 3, every  # the kernel has the errors the test is about
    stopped_somewhere = False
    for n in range(1, len(every) + 2):
        k = _kernel(text, n)
        assert k.verdict == full.verdict
        assert _errors(k)[:n] == every[:n]
        assert k.unchecked >= 0 and len(k.findings) + k.unchecked >= len(_errors(k))
        stopped_somewhere |= k.unchecked > 0
        if n >= len(every):
            assert k.unchecked == 0 or _errors(k) == every
    assert stopped_somewhere


def test_every_violation_suppressed_decides_everything():
    """A suppressed violation never fixes the verdict, so the check goes on past it."""
    text = KERNEL.format(ignore="  # ave: ignore[*] x").replace("ta[0] == tb[1])", "ta[0] == tb[1])  # ave: ignore[*] x")
    text = text.replace("C[m + 1, n] = acc", "C[m, n] = acc  # ave: ignore[*] x").replace("A[m, k + 1]", "A[m, k]")
    full, one = _kernel(text, None), _kernel(text, 1)
    assert full.verdict == one.verdict
    assert one.unchecked == 0


def test_cli_notes_the_undecided_and_rejects_zero(ave, tmp_path):
    f = tmp_path / "bugs.ave"
    f.write_text(KERNEL.format(ignore=""))
    r = ave("check", "--max-errors", "1", f)
    assert r.code == 1
    assert "obligation(s) not decided after the first errors (--max-errors)" in r.out
    assert ave("check", "--max-errors", "1", "--json", f).json()["kernels"][0]["unchecked"] > 0
    assert ave("check", "--max-errors", "0", f).code == 2
