"""Lane exchange (`shuffle_xor`, `shuffle`, `readfirstlane`): a value read from another lane of the
warp/wave carries that lane's tag, in the verifier, the simulator and the code generators."""
from __future__ import annotations

import pytest
from conftest import DATA, EXAMPLES, front_end_error

import ave_decl
from ave_decl.report.model import Verdict
from ave_decl.testing.mutate import OPERATORS

EXAMPLE = EXAMPLES / "lanes" / "lane_exchange.ave"


def test_the_example_verifies_simulates_and_runs(ave):
    assert ave("check", EXAMPLE).code == 0
    r = ave("simulate", EXAMPLE)
    assert r.code == 0 and "every shadow check passed" in r.out, r.out
    r = ave("run", EXAMPLE)
    assert r.code == 0, r.out


@pytest.mark.parametrize("old, new, thread_of_source", [
    ("C[base + (t ^ 1)] = partner", "C[base + t] = partner", lambda t: t ^ 1),
    ("R[base + 63 - t] = mirrored", "R[base + t] = mirrored", lambda t: 63 - t),
])
def test_a_store_of_the_wrong_lane_is_a_replayed_violation(old, new, thread_of_source):
    text = EXAMPLE.read_text().replace(old, new)
    (k,) = ave_decl.check(text, path="bad.ave", confirm=True).kernels
    (f,) = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert f.invariant == "ave/epilogue-placement" and f.replay["confirmed"], f.replay
    c = f.counterexample
    # the chain crosses lanes: the load of x happened at the source lane
    loads = [p for p in c.lhs.chain if p.kind == "load" and p.buffer == "x"]
    assert loads and loads[0].thread == thread_of_source(c.thread_linear)


def test_the_wrong_butterfly_partner_is_caught():
    (m, *_) = OPERATORS["wrong_shuffle_mask"](EXAMPLE.read_text())
    assert "shuffle_xor(x, 2)" in m.text
    (k,) = ave_decl.check(m.text, path="m.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert bad and all(f.replay["confirmed"] for f in bad)


_BAD = ("@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (64,)], C: Tensor[f32, (64,)]):\n"
        "    x = A[thread_id(0)]\n    s = local(f32, (4,))\n    s2 = local(f32, (2, 2))\n    y = {call}\n"
        "    C[thread_id(0)] = y\n")


@pytest.mark.parametrize("call, words", [
    ("shuffle_xor(x, 64)", "must lie in [0, 64)"),
    ("shuffle_xor(x, 4, 4)", "must lie in [0, 4)"),
    ("shuffle_xor(x, 1, 3)", "power of two"),
    ("shuffle_xor(x, lane_id())", "constant"),
    ("shuffle(x)", "shuffle"),
    ("readfirstlane(3)", "exchanges a data value"),
    ("reduce_max(A)", "reduces a register array"),
    ("reduce_max(s, 1)", "reduces an axis in [0, 1) of 's' (rank 1), not axis 1"),
    ("reduce_sum(s2)", "needs axis="),
    ("reduce_sum(s2, axis=1) + 1.0", "is a register array: assign it to a name"),
    # drops= (tests/test_reductions_drops.py): a constant naming one of at most 6 tag components
    ("lane_max(x, 32, drops=6)", "drops=6 names no tag component"),
    ("reduce_max(s, drops=-7)", "drops=-7 names no tag component"),
    ("reduce_sum(s, drops=lane_id())", "constant"),
    ("lane_sum(x, 32, axis=0)", "no keyword 'axis' (it takes drops=)"),
    ("reduce_max(s, dropped=1)", "no keyword 'dropped' (it takes axis= and drops=)"),
    ("reduce_max(s, axis=1, drops=0)", "not axis 1"),
])
def test_bad_exchanges_and_reductions_are_located_errors(call, words, tmp_path, ave):
    path = tmp_path / "k.ave"
    out = front_end_error(ave, path, _BAD.format(call=call))
    assert words in out.splitlines()[0] and out.startswith(f"{path}:6:"), out


def test_nvptx_emits_warp_shuffles(tmp_path, ave):
    pytest.importorskip("llvmlite")
    text = EXAMPLE.read_text().replace("wave=64", "warp=32").replace("block=64", "block=32").replace(
        "N // 64", "N // 32").replace("N % 64", "N % 32").replace("block_id(0) * 64", "block_id(0) * 32").replace(
        "63 - ", "31 - ").replace("i // 64 * 64", "i // 32 * 32")
    path = tmp_path / "k.ave"
    path.write_text(text)
    r = ave("emit", "--target", "nvptx", path)
    assert r.code == 0, r.out + r.err
    assert "shfl.sync.bfly.b32" in r.out and r.out.count("shfl.sync.idx.b32") == 2


SLOT_MAX = DATA / "lanes" / "slot_max.ave"


def test_a_slot_reduction_is_a_row_statistic(ave):
    assert ave("check", SLOT_MAX).code == 0
    r = ave("simulate", SLOT_MAX)
    assert r.code == 0 and "every shadow check passed" in r.out and "shadow [ave/row-statistics] line 11: ok" in r.out
    assert ave("run", SLOT_MAX).code == 0
    summed = SLOT_MAX.read_text().replace("reduce_max(s)", "reduce_sum(s)").replace("max(A, axis=1)", "sum(A, axis=1)")
    assert ave_decl.check(summed, path="sum.ave").kernels[0].verdict == Verdict.VERIFIED


def test_a_slot_reduction_over_two_rows_is_a_replayed_violation():
    text = SLOT_MAX.read_text().replace("s[k] = A[t, k]", "s[k] = A[(t + k) % 64, k]")
    (k,) = ave_decl.check(text, path="rows.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.invariant == "ave/row-statistics"]
    assert bad and bad[0].replay["confirmed"], bad
    assert bad[0].message.startswith("the slot reduction mixes rows: slot ")
    c = bad[0].counterexample
    assert (c.lhs.label, c.rhs.label) == ("slot", "other slot") and c.lhs.value_index != c.rhs.value_index


BUTTERFLY = DATA / "lanes" / "butterfly_max.ave"


def test_a_butterfly_of_shuffles_is_a_row_statistic(ave):
    assert ave("check", BUTTERFLY).code == 0
    r = ave("simulate", BUTTERFLY)
    assert r.code == 0 and "every shadow check passed" in r.out
    assert ave("run", BUTTERFLY).code == 0


def test_a_butterfly_across_rows_is_a_replayed_violation():
    (m, *_) = OPERATORS["wrong_shuffle_mask"](BUTTERFLY.read_text())
    assert "shuffle_xor(x, 16)" in m.text  # the first step now pairs lanes of different rows
    (k,) = ave_decl.check(m.text, path="m.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.invariant == "ave/row-statistics"]
    assert bad and bad[0].location.line == 11 and bad[0].replay["confirmed"], bad
    c = bad[0].counterexample
    assert c.rhs.chain[0].thread == c.thread_linear ^ 16  # the partner lane
