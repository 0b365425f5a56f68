"""A register array's tag is a claim proved at its stores (ave/register-round-trip), not a source."""
from __future__ import annotations

import pytest
from conftest import DATA, front_end_error

import ave_decl
from ave_decl.report.model import Verdict

CLAIM = DATA / "helpers" / "register_tag_claim.ave"


def _by_invariant(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.kernels[0].findings:
        if f.severity == "error" and f.verdict != Verdict.VERIFIED:
            out.setdefault(f.invariant, []).append(f)
    return out


def test_a_false_register_tag_is_a_violation_with_a_replayed_counterexample():
    bad = _by_invariant(ave_decl.check(CLAIM, confirm=True))
    (store,) = bad["ave/register-round-trip"]
    assert store.location.line == 15 and store.replay["confirmed"]
    assert store.counterexample.lhs.tag_name == "B" and store.counterexample.rhs.tag_name == "F"
    # loads of a tagged register follow their stores: two alike-tagged fragments are compared by
    # what was stored into them, so the assertion is not vacuous
    (eq,) = bad["ave/tag-assert"]
    assert eq.location.line == 16 and eq.replay["confirmed"]


def test_a_true_register_tag_verifies():
    fixed = CLAIM.read_text().replace("b[v] = B[lane, 3 - v]", "b[v] = B[lane, v]").replace(
        "C[lane, v] = a[v] + b[v]", "C[lane, v] = a[v]")
    report = ave_decl.check(fixed, path="fixed.ave")
    assert report.kernels[0].verdict == Verdict.VERIFIED
    assert any(f.invariant == "ave/register-round-trip" and f.verdict == Verdict.VERIFIED
               for f in report.kernels[0].findings)


def test_the_simulator_checks_register_stores(ave):
    r = ave("simulate", CLAIM)
    assert r.code == 1
    assert "shadow [ave/register-round-trip] line 15: FAILED" in r.out
    assert "shadow [ave/register-round-trip] line 14: ok" in r.out


_KERNEL = """from ave.amdgpu import mfma_f32_32x32x8_bf16
@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[bf16, (32, 64)], C: Tensor[f32, (64,)]):
    tag(A, lambda m, k: (m, k), "A")
    lane = lane_id()
{body}"""


@pytest.mark.parametrize("body, words", [
    ("    a = local(bf16, (4,))\n    a[0] = A[lane % 32, 0]\n    tag(a, lambda v: (lane, v), \"F\", lane)\n",
     "before its first store"),
    ("    a = local(bf16, (4,))\n    for ks in range(0, 64, 8):\n"
     "        tag(a, lambda v: (lane, ks + v), \"F\", lane, ks)\n"
     "    a[0] = A[lane % 32, 0]\n", "outside a loop whose variable"),
    ("    s = shared(bf16, (4,))\n    for ks in range(0, 64, 8):\n        tag(s, lambda v: (ks + v,), \"F\", ks)\n",
     "cannot depend on a loop variable"),
])
def test_register_tag_rules_are_located_errors(body, words, tmp_path, ave):
    assert words in front_end_error(ave, tmp_path / "k.ave", _KERNEL.format(body=body))


def test_a_whole_array_write_into_a_tagged_register_is_unknown():
    src = _KERNEL.format(body="""    a = local(bf16, (4,))
    b = local(bf16, (4,))
    acc = local(f32, (16,), init=0)
    tag(acc, lambda r: (lane, r), "Acc", lane)
    for v in range(4):
        a[v] = A[lane % 32, v]
        b[v] = A[lane % 32, v]
    acc = mfma_f32_32x32x8_bf16(a, b, acc)
""")
    (k,) = ave_decl.check(src, path="acc.ave").kernels
    unknown = [f for f in k.findings if f.invariant == "ave/register-round-trip"]
    assert [f.verdict for f in unknown] == [Verdict.UNKNOWN]
    assert "whole-array write" in unknown[0].reason
