"""Scheduling hints (`sched_barrier`, `sched_group_barrier`, `s_setprio`, `setprio`): accepted,
checked, kept in the AST for the backends, ignored by the verifier and the simulator."""
from __future__ import annotations

import pytest
from conftest import DATA, ONE_WAVE, front_end_error

from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text

HINTS = DATA / "helpers" / "scheduling_hints.ave"


def test_hints_change_no_verdict_and_no_result(ave):
    r = ave("check", HINTS)
    assert r.code == 0, r.out
    r = ave("simulate", HINTS)
    assert r.code == 0 and "the output matches the reference" in r.out
    r = ave("run", HINTS)
    assert r.code == 0, r.out


def test_hints_stay_in_the_ast():
    m = parse_text(HINTS.read_text())
    printed = printer.module(m)
    for hint in ("s_setprio(1)", "sched_barrier(0)", "sched_group_barrier(8, 1, 0)", "setprio(0)"):
        assert hint in printed
    assert parse_text(printed) == m


@pytest.mark.parametrize("stmt, words", [
    ("s_setprio(4)", "must lie in [0, 3]"),
    ("sched_barrier(lane_id())", "constant"),
    ("sched_group_barrier(8, 1)", "sched_group_barrier"),
    ("setprio(-1)", "must lie in [0, 3]"),
])
def test_bad_hints_are_located_errors(stmt, words, tmp_path, ave):
    path = tmp_path / "k.ave"
    out = front_end_error(ave, path, ONE_WAVE + f"    {stmt}\n")
    assert out.startswith(f"{path}:3:") and words in out.splitlines()[0], out
