"""The guidance experiment's `--fast` slice (issue 15; bench/guidance.py): the harness runs every
feedback mode on two bugs within the budget, and its frozen-spec guard rejects a spec-changing
candidate before evaluation. It asserts that the harness works, never its figures (those are
docs/agent-guidance.md's, from the full run)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("ave_planner", reason="ave-planner is not installed (make install installs planner/)")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import guidance  # noqa: E402

from ave_planner.agent import MODES, Feedback, Proposal, Task  # noqa: E402
from ave_planner.evaluate import CHECK_FIRST, CallCache, Evaluator  # noqa: E402
from ave_planner.feedback import feedback  # noqa: E402
from ave_planner.repair import repair  # noqa: E402


@pytest.fixture(scope="module")
def bug():
    bugs, _ = guidance.corpus(True, None, 0)
    return bugs[0]


def test_the_fast_slice_runs_every_mode_within_the_budget():
    result = guidance.run(fast=True, jobs=1)
    s = result["summary"]
    assert s["bugs"] == 2 and set(s["overall"]) == set(MODES)
    for rec in result["records"]:
        assert rec["verdict"] in ("VIOLATION", "UNKNOWN", "VERIFIED", "ERROR")
        for mode, m in rec["modes"].items():
            # the bug's own evaluation is counted, in the mode's gate order: a check-first mode
            # stops at the failing check (one call), a result-first mode runs the reference first
            own = m["evaluations"] - sum(step["counted"] for step in m["trajectory"])
            assert own == 1 if mode in CHECK_FIRST and rec["verdict"] == "VIOLATION" else 1 <= own <= 2
            assert all(step["counted"] == 0 for step in m["trajectory"] if step["outcome"] == "rejected")
            if m["fixed"]:
                assert m["fix_where"] in ("use site", "chain", "elsewhere", "no counterexample")
    text = guidance.table(s)
    assert "| invariant |" in text and "Invariant ablation" in text


class _Hacker:
    """Proposes the bug with its assertion deleted (the cheapest "fix"), then the kernel with a
    weakened assume, then gives up."""

    name = "hacker"

    def start(self, text: str, task: Task, mode: str, fb: Feedback) -> None:
        line = next(ln for ln in text.split("\n") if "assert_tag(" in ln)
        self.queue = [text.replace(line + "\n", ""), text.replace("K >= 64", "K >= 128")]

    def propose(self, fb):
        return Proposal(self.queue.pop(0)) if self.queue else None


def test_the_harness_rejects_spec_changing_candidates_before_evaluating_them(bug):
    for mode in MODES:
        ev = Evaluator(bug.sizes_a, bug.sizes_b, 4, guidance.simulate, CallCache())
        res = repair(bug.text, _Hacker(), mode, ev)
        assert res.rejected == 2 and res.candidates == 0 and not res.fixed
        assert res.evaluations == 1  # the bug's own evaluation: its first gate fails
        assert [s.outcome for s in res.steps] == ["rejected", "rejected"]
        assert "frozen spec" in res.steps[0].feedback["changes"][0]


def test_feedback_modes_are_pure_functions_of_one_evaluation(bug):
    ev = Evaluator(bug.sizes_a, bug.sizes_b, 4, guidance.simulate, CallCache())
    e = ev.evaluate(bug.text, "invariant")
    assert feedback("invariant", e) == feedback("invariant", e)
    site = feedback("invariant-site", e).data
    assert set(site) == {"verdict", "findings", "output_matches", "accepted"}
    assert all(set(f) == {"invariant", "line"} for f in site["findings"])
    assert set(feedback("result", e).data) == {"output_matches", "accepted"}
