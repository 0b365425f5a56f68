"""Conditions in provenance (issue 19): `select` conditions recorded on provenance paths, the
`mask_rel` obligation and `assert_mask`, on the causal mask of the flash-attention example."""
from __future__ import annotations

import pytest
from conftest import EXAMPLES

import ave_decl
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source

ATTENTION = (EXAMPLES / "flash_attention_gqa.ave").read_text()
MASK = "r % 4, s[r] * 0.2550348616, -1e30)"


def shifted(offset: str) -> str:
    assert MASK in ATTENTION
    return ATTENTION.replace(MASK, f"r % 4{offset}, s[r] * 0.2550348616, -1e30)")


@pytest.mark.parametrize("offset, words, masked", [
    (" + 1", "leaks through the mask", False),   # key = query + 1 is kept
    (" - 1", "is masked off", True),             # the diagonal key = query is removed
])
def test_a_shifted_causal_mask_names_the_pair(offset, words, masked, confirm=False):
    (k,) = ave_decl.check(shifted(offset), path="fa.ave", confirm=confirm, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    (f,) = [f for f in k.findings if f.invariant == "ave/masked-flow" and f.verdict != Verdict.VERIFIED]
    assert f.verdict == Verdict.VIOLATION and words in f.message
    _h, query, key = f.counterexample.lhs.tag
    assert (key > query) != masked and abs(key - query) <= 1
    assert not confirm or (f.replay["confirmed"] and f.replay["observed"]["masked"] is masked), f.replay
    # the mask is the only thing wrong: every other error-level obligation still holds
    assert {x.invariant for x in k.findings if x.severity == "error" and x.verdict != Verdict.VERIFIED} == {
        "ave/masked-flow"}


@pytest.mark.slow
def test_the_removed_diagonal_replays():
    """--confirm replays the counterexample (10-30 s; the leak's is in block 1 at S=64, ~30 s more).
    In make test, test_the_simulators_masked_flags_agree checks the simulator's side."""
    test_a_shifted_causal_mask_names_the_pair(" - 1", "is masked off", True, confirm=True)


def test_the_simulators_masked_flags_agree():
    sizes, first_block = {"H": 4, "HKV": 1, "S": 32}, [(0, 0)]
    ((_, ok),) = simulate_source(SourceFile("fa.ave", ATTENTION), sizes, blocks=first_block)
    ((_, bad),) = simulate_source(SourceFile("fa.ave", shifted(" + 1")), sizes, blocks=first_block)
    flow = {f.invariant: f for f in ok.failures}["ave/masked-flow"]
    assert flow.checked > 0 and flow.failed == 0
    flow = {f.invariant: f for f in bad.failures}["ave/masked-flow"]
    assert flow.failed > 0 and flow.first["lhs_tag"][2] == flow.first["lhs_tag"][1] + 1


def test_mask_rel_off_an_assert_mask_is_a_rule_error(ave, tmp_path):
    (tmp_path / "bad.dl").write_text(
        "// @id user/bad-mask\n// @title t\n// @severity error\n// @description d\n"
        'obligation(k, s, "user/bad-mask", "mask_rel", v, v) :- assert_rel(k, s, v, _, _).\n')
    r = ave("check", "--rules", tmp_path, EXAMPLES / "flash_attention_gqa.ave")
    assert r.code == 4, r.out + r.err
    assert "mask_rel" in r.out + r.err and "assert_mask" in r.out + r.err


@pytest.mark.parametrize("call, message", [
    ("assert_mask(pa)", "assert_mask"),
    ("assert_mask(pa, lambda a, b: a[0] < b[0])", "one-parameter lambda"),
    ("assert_mask(pa, lambda t: t < 1)", "use a component of the tag"),
])
def test_assert_mask_errors_are_located(ave, tmp_path, call, message):
    p = tmp_path / "bad.ave"
    p.write_text(ATTENTION.replace("assert_mask(pa, lambda t: t[2] <= t[1])", call))
    r = ave("check", p)
    assert r.code == 3, r.out + r.err
    assert message in r.out + r.err and f"{p}:" in r.out + r.err
