"""`m = reduce_max(s, axis=a)` of a 2-D register array: a register array of statistics, one per
slot of the other axis, in the verifier, the simulator and the code generator."""
from __future__ import annotations

import pytest
from conftest import DATA, front_end_error

import ave_decl
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source

AXIS_MAX = DATA / "reductions" / "axis_max.ave"
# the same rows with the array transposed: reduced along axis 0
ALONG_0 = (("s = local(f32, (4, 8))", "s = local(f32, (8, 4))"), ("s[i, k] =", "s[k, i] ="), ("s, axis=1)", "s, axis=0)"))
# A tagged (k, m): the reduced slots differ in component 0 of their tag
KEY_FIRST = (('lambda m, k: (m, k), "A"', 'lambda m, k: (k, m), "A"'), ("s, axis=1)", "s, axis=1, drops=0)"))


def _variant(*edits: tuple[str, str]) -> str:
    text = AXIS_MAX.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


def _simulated(text: str):
    ((_, r),) = simulate_source(SourceFile("k.ave", text), {})
    return r


@pytest.mark.parametrize("edits", [(), ALONG_0, KEY_FIRST], ids=["axis1", "axis0", "drops0"])
def test_an_axis_reduction_verifies_and_simulates_to_its_reference(edits):
    text = _variant(*edits)
    m = parse_text(text)
    assert parse_text(printer.module(m)) == m
    (k,) = ave_decl.check(text, path="k.ave").kernels
    assert k.verdict == Verdict.VERIFIED, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED]
    assert any(f.invariant == "ave/row-statistics" for f in k.findings)
    r = _simulated(text)
    assert r.reference["ok"] and r.shadow_ok and any(f.line == 12 and f.checked for f in r.failures)


def test_an_axis_reduction_compiles_and_runs(ave):
    r = ave("run", AXIS_MAX)
    assert r.code == 0 and "0 of 256 elements differ" in r.out, r.out + r.err


@pytest.mark.parametrize("edits", [
    (("s, axis=1)", "s, axis=0)"),),  # along axis 0: one key of 4 different rows
    (('lambda m, k: (m, k), "A"', 'lambda m, k: (k, m), "A"'),),  # the key is component 0, not the last
], ids=["wrong_axis", "wrong_component"])
def test_an_axis_reduction_over_two_rows_is_a_replayed_violation(edits):
    text = _variant(*edits)
    (k,) = ave_decl.check(text, path="k.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.invariant == "ave/row-statistics"]
    assert bad and bad[0].location.line == 12 and bad[0].replay["confirmed"], bad
    assert bad[0].message.startswith("the slot reduction mixes rows")
    c = bad[0].counterexample
    assert c.lhs.value_index != c.rhs.value_index
    assert any(f.invariant == "ave/row-statistics" and f.line == 12 and f.failed for f in _simulated(text).failures)


@pytest.mark.parametrize("old, new, words", [
    ("    m = reduce_max(s, axis=1)\n", "    m = local(f32, (3,))\n    m = reduce_max(s, axis=1)\n",
     "needs a register array of 4 values"),
    ("reduce_max(s, axis=1)", "reduce_max(s, axis=2)", "not axis 2"),
    ("reduce_max(s, axis=1)", "reduce_max(s)", "needs axis="),
    ("reduce_max(s, axis=1)", "reduce_max(s, axis=1, drops=9)", "drops=9 names no tag component"),
])
def test_bad_axis_reductions_are_located_errors(old, new, words, tmp_path, ave):
    path = tmp_path / "k.ave"
    out = front_end_error(ave, path, _variant((old, new)))
    assert words in out.splitlines()[0], out
