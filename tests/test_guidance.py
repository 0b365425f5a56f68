"""The guidance experiment's `--fast` slice (issue 15; bench/guidance.py): the harness runs every
feedback mode on two bugs within the budget, and its frozen-spec guard rejects a spec-changing
candidate before evaluation. It asserts that the harness works, never its figures (those are
docs/agent-guidance.md's, from the full run)."""
from __future__ import annotations

import json
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
    bugs, _ = guidance.corpus(True, None, 0, cache=False)
    return bugs[0]


def test_the_fast_slice_runs_every_mode_within_the_budget():
    result = guidance.run(fast=True, jobs=1, cache=False)
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


def _without_times(rec: dict) -> dict:
    return {**{k: v for k, v in rec.items() if k != "cpu_s"},
            "modes": {m: {k: v for k, v in x.items() if k != "seconds"} for m, x in rec["modes"].items()}}


def test_the_shared_memo_changes_no_record(bug):
    """The modes of a bug share call answers, guard answers and parsed texts (for the wall time);
    each mode starting afresh gives the same record, evaluation counts and trajectories included."""
    shared = guidance.run_bug(bug, 6, "search", None, 0, memo=True)
    fresh = guidance.run_bug(bug, 6, "search", None, 0, memo=False)
    assert _without_times(shared) == _without_times(fresh)
    assert any(step["counted"] for m in shared["modes"].values() for step in m["trajectory"])


def test_the_corpus_is_cached_under_the_hash_of_its_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("AVE_GUIDANCE_CACHE", str(tmp_path))
    bugs, dropped = guidance.corpus(True, None, 0)
    (entry,) = tmp_path.glob("corpus-*.json")
    data = json.loads(entry.read_text())
    assert [b["id"] for b in data["bugs"]] == [b.id for b in bugs]
    # a stored entry made under the same key is what the next call returns (it is read) ...
    data["bugs"] = data["bugs"][:1]
    entry.write_text(json.dumps(data))
    assert [b.id for b in guidance.corpus(True, None, 0)[0]] == [bugs[0].id]
    # ... and one whose key is not the sources' hash is stale: rebuilt, then rewritten
    data["key"] = "0" * 64
    entry.write_text(json.dumps(data))
    again, _ = guidance.corpus(True, None, 0)
    assert [b.id for b in again] == [b.id for b in bugs]
    assert json.loads(entry.read_text())["key"] != data["key"]
    entry.write_text("{not json")
    assert [b.id for b in guidance.corpus(True, None, 0)[0]] == [b.id for b in bugs]


def test_the_corpus_key_follows_the_workloads_text_and_the_arguments(tmp_path):
    wl = tmp_path / "w.ave"
    wl.write_text("a")
    key = guidance.corpus_key([wl], False, None, 0)
    assert guidance.corpus_key([wl], False, None, 0) == key
    assert guidance.corpus_key([wl], False, None, 1) != key and guidance.corpus_key([wl], True, None, 0) != key
    wl.write_text("b")
    assert guidance.corpus_key([wl], False, None, 0) != key


def test_a_cut_short_run_is_a_spread_over_workloads_and_operators():
    B = guidance.Bug
    bugs = [B(f"{w}~{o}{i}", w, "GEMM", "mutant", o, "", {}, {}) for w in ("u", "v") for o in ("p", "q")
            for i in range(2)]
    assert [b.id for b in guidance._round_robin(bugs)][:4] == ["u~p0", "v~p0", "u~q0", "v~q0"]


def test_the_headline_says_when_the_median_is_censored_at_the_budget():
    def block(inv: tuple[int, int], res: tuple[int, int]) -> dict:
        return {m: {"fixed": f, "bugs": 10, "median_evaluations": e} for m, (f, e) in
                (("invariant", inv), ("result", res))}

    assert "at least 10.2x fewer (censored at the budget); the >= 5x goal is met" in \
        guidance.headline(block((8, 4), (1, 41)), 40)
    assert "at least 2.0x fewer (censored at the budget); the >= 5x goal is not shown" in \
        guidance.headline(block((8, 20), (1, 41)), 40)
    assert "2.0x fewer; the >= 5x goal is not met" in guidance.headline(block((8, 10), (8, 20)), 40)
    assert "5.0x fewer; the >= 5x goal is not met" in guidance.headline(block((7, 4), (8, 20)), 40)  # fix rate
    assert "the ratio is unknown" in guidance.headline(block((2, 41), (1, 41)), 40)
