"""Edge cases of the session-9 language constructs found in review: each used to give a wrong
verdict, a static/simulator disagreement or a refusal of a valid program."""
from __future__ import annotations

import pytest
from conftest import front_end_error

import ave_decl
from ave_decl.report.model import Verdict

HEAD = "@kernel(grid=(1,), block={block}, wave=64{ref})\ndef k(A: Tensor[f32, ({n},)], C: Tensor[f32, ({n},)]):\n"
TAGS = "    tag(A, lambda i: (i,), \"A\")\n    tag(C, lambda i: (i,), \"C\")\n    t = thread_id(0)\n"


def _kernel(body: str, block: int = 64, n: int = 64, ref: bool = False) -> str:
    return HEAD.format(block=block, n=n, ref=', reference="C = A"' if ref else "") + TAGS + body


def _findings(text: str, invariant: str, confirm: bool = False):
    (k,) = ave_decl.check(text, path="k.ave", confirm=confirm).kernels
    return k, [f for f in k.findings if f.invariant == invariant]


def test_an_index_name_also_assigned_otherwise_in_the_loop_is_not_an_induction_variable(tmp_path, ave):
    text = _kernel("    k0 = 0\n    for it in range(4):\n        x = A[k0 + t]\n        k0 += 1\n"
                   "        k0 = k0 * 64\n")
    assert "is reassigned inside a loop or branch" in front_end_error(ave, tmp_path / "k.ave", text)


@pytest.mark.parametrize("body", [
    "    if t < 64:\n        if t >= 32:\n            return\n    C[t] = A[t]\n",
    "    if t < 16:\n        C[t] = A[t]\n    elif t >= 32:\n        return\n    C[t] = A[t]\n",
])
def test_nested_early_returns_are_refused(body, tmp_path, ave):
    assert "this early return is not supported" in front_end_error(ave, tmp_path / "k.ave", _kernel(body))


def test_several_top_level_returns_guard_in_turn(ave, tmp_path):
    path = tmp_path / "k.ave"
    path.write_text(_kernel("    if t >= 48:\n        return\n    C[t] = A[t]\n    if t >= 16:\n        return\n"
                            "    x = A[t]\n", n=48))
    assert ave("check", path).code == 0


def test_arms_that_declare_the_same_register_array_each_keep_their_own(ave, tmp_path):
    arm = "        r = local(f32, (2,))\n        r[0] = A[t]\n        syncthreads()\n        C[t] = r[0]\n"
    path = tmp_path / "k.ave"
    path.write_text(_kernel(f"    if wave_id() == 0:\n{arm}    else:\n{arm}", block=128, n=128, ref=True))
    r = ave("simulate", path)
    assert r.code == 0 and "the output matches the reference" in r.out, r.out


def test_a_slot_reduction_over_a_partly_written_array_is_unknown():
    text = ("@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (64, 8)], C: Tensor[f32, (64,)]):\n"
            "    tag(A, lambda m, n: (m, n), \"A\")\n    tag(C, lambda m: (m,), \"C\")\n    t = thread_id(0)\n"
            "    s = local(f32, (8,))\n    for j in range(4):\n        s[j] = A[t, j]\n    C[t] = reduce_max(s)\n")
    _, found = _findings(text, "ave/row-statistics")
    assert Verdict.UNKNOWN in {f.verdict for f in found}
    assert any("no store that writes every slot" in f.reason for f in found)


def test_a_loop_with_a_barrier_and_a_thread_dependent_trip_count_is_a_violation():
    text = _kernel("    for i in range(0, wave_id() + 1):\n        syncthreads()\n    C[t] = A[t]\n", block=128, n=128)
    _, found = _findings(text, "ave/barrier-divergence")
    (f,) = found
    assert f.verdict == Verdict.VIOLATION and "runs this loop" in f.message
    assert {f.counterexample.lhs.tag[0], f.counterexample.rhs.tag[0]} == {1, 2}


def test_a_helper_lambda_parameter_does_not_capture_the_callers_name():
    helper = ("@device\ndef put(dst, src, r):\n    tag(dst, lambda i: (r, i), \"R\", r)\n"
              "    for v in range(4):\n        dst[v] = src[r, v]\n\n")
    body = ("    a = local(f32, (4,))\n    for {x} in range(4):\n        put(a, A, {x})\n"
            "        C[thread_id(0), {x}] = a[0]\n")
    kernel = ("@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (64, 4)], C: Tensor[f32, (64, 4)]):\n"
              "    tag(A, lambda m, n: (m, n), \"A\")\n")
    with_i = ave_decl.check(helper + kernel + body.format(x="i"), path="i.ave").kernels[0]
    with_j = ave_decl.check(helper + kernel + body.format(x="j"), path="j.ave").kernels[0]
    assert with_i.verdict == with_j.verdict == Verdict.VERIFIED
    assert len(with_i.findings) == len(with_j.findings)


def test_a_literal_argument_can_be_a_tag_capture():
    text = ("@device\ndef fill(dst, src, row, k0):\n    tag(dst, lambda v: (row, k0 + v), \"FA\", row, k0)\n"
            "    for v in range(4):\n        dst[v] = src[row, k0 + v]\n\n"
            "@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (64, 8)], C: Tensor[f32, (64,)]):\n"
            "    tag(A, lambda m, n: (m, n), \"A\")\n    a = local(f32, (4,))\n    fill(a, A, 5, 0)\n"
            "    C[thread_id(0)] = a[0]\n")
    (k,) = ave_decl.check(text, path="lit.ave").kernels
    assert k.verdict == Verdict.VERIFIED
    assert any(f.invariant == "ave/register-round-trip" and f.verdict == Verdict.VERIFIED for f in k.findings)


def test_a_lane_exchange_under_a_lane_dependent_if_is_a_replayed_violation():
    text = _kernel("    x = A[t]\n    if t > 0:\n        C[t] = readfirstlane(x)\n    else:\n        C[t] = x\n")
    _, found = _findings(text, "ave/lane-convergence", confirm=True)
    (f,) = found
    assert f.verdict == Verdict.VIOLATION and f.replay["confirmed"], f.replay


def test_a_lane_exchange_under_a_wave_uniform_if_is_verified():
    text = _kernel("    x = A[t]\n    if wave_id() == 1:\n        C[t ^ 1] = shuffle_xor(x, 1)\n    else:\n"
                   "        C[t] = x\n", block=128, n=128)
    _, found = _findings(text, "ave/lane-convergence")
    assert [f.verdict for f in found] == [Verdict.VERIFIED]


@pytest.mark.parametrize("call", ["shuffle_xor(x, 100)", "reduce_max(x)", "readfirstlane()", "shuffle_xor(x, 1, 3)"])
def test_simulate_refuses_what_check_refuses(call, tmp_path, ave):
    path = tmp_path / "k.ave"
    path.write_text(_kernel(f"    x = A[t]\n    C[t] = {call}\n"))
    r = ave("simulate", path)
    assert r.code == 3 and r.out.startswith(f"{path}:"), r.out
    assert "internal error" not in r.out
