"""Kills across the arms of an `if` and under guards (rules/dataflow.dl, solver/derived_facts.py):
a register accumulator that a matrix instruction overwrites in *each* arm of a wave-specialized
`if` no longer lets its initial value reach the epilogue; one arm alone does not kill it, and the
counterexample is then a thread of the other arm."""
from __future__ import annotations

from conftest import EXAMPLES

import ave_decl
from ave_decl.report.model import Verdict

LOOP = '''        for ks in range(0, 64, 8):
            for v in range(4):
                a[v] = As[(w // 2) * 32 + lane % 32, ks + (lane // 32) * 4 + v]
                b[v] = Bs[ks + (lane // 32) * 4 + v, (w % 2) * 32 + lane % 32]
            assert_tag(a, b, lambda ta, tb: ta[1] == tb[0])
            acc = mfma_f32_32x32x8_bf16(a, b, acc)
'''
ARM = '''            for ks in range(0, 64, 8):
                {hint}
                for v in range(4):
                    a[v] = As[(w // 2) * 32 + lane % 32, ks + (lane // 32) * 4 + v]
                    b[v] = Bs[ks + (lane // 32) * 4 + v, (w % 2) * 32 + lane % 32]
                acc = mfma_f32_32x32x8_bf16(a, b, acc)
'''


def _specialized(else_arm: str) -> str:
    src = (EXAMPLES / "gemm_lds_mfma.ave").read_text()
    assert LOOP in src
    arms = "        if w < 2:\n" + ARM.format(hint="s_setprio(1)") + "        else:\n" + else_arm
    return src.replace(LOOP, arms)


def _check(text: str, confirm: bool = False):
    (k,) = ave_decl.check(text, path="k.ave", confirm=confirm).kernels
    return k


def test_an_accumulator_written_in_both_arms_reaches_the_epilogue_from_them():
    k = _check(_specialized(ARM.format(hint="sched_group_barrier(8, 1, 0)")))
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.message) for f in k.findings if f.verdict != "VERIFIED"]


def test_an_arm_that_does_not_accumulate_leaves_the_initial_value_live():
    k = _check(_specialized("            pass\n"))
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert [f.invariant for f in bad] == ["ave/epilogue-placement"], [(f.invariant, f.message) for f in bad]
    # the accumulating arm's first MFMA is a kill instance (chains._first_iteration_kill): the
    # counterexample's thread is one of the arm that skips it, and the replay confirms it
    (f,) = [f for f in _check(_specialized("            pass\n"), confirm=True).findings
            if f.verdict != Verdict.VERIFIED and f.severity == "error"]
    assert f.verdict == Verdict.VIOLATION and f.replay["confirmed"], (f.message, f.replay)
    assert f.counterexample.thread_linear >= 128, f.counterexample.thread_linear  # waves 2, 3: the `else` arm
