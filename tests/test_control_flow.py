"""Loop-carried index variables (`k0 += 64`) and early `return` in kernels."""
from __future__ import annotations

import pytest
from conftest import DATA, ONE_WAVE, front_end_error

import ave_decl
from ave_decl.lang import ast as A
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.report.model import Verdict

INDUCTION = DATA / "loops" / "induction.ave"
EARLY = DATA / "loops" / "early_return.ave"


def _verdict(text: str, confirm: bool = False):
    (k,) = ave_decl.check(text, path="k.ave", confirm=confirm).kernels
    return k


def test_induction_variables_verify_simulate_and_run(ave):
    assert ave("check", INDUCTION).code == 0
    assert ave("simulate", INDUCTION).code == 0
    assert ave("run", INDUCTION).code == 0


def test_a_wrong_increment_is_a_replayed_violation():
    k = _verdict(INDUCTION.read_text().replace("k0 = k0 + 64", "k0 = k0 + 32"), confirm=True)
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert bad and all(f.replay["confirmed"] for f in bad)
    assert {f.invariant for f in bad} >= {"ave/output-coverage"}


def test_the_value_after_the_loop_counts_every_trip():
    """D[t] = A[k0 - 64 + t] after the loop reads A[448 + t]: a wrong trip count misplaces it."""
    text = INDUCTION.read_text().replace("(i + 448,)", "(i + 384,)")
    k = _verdict(text)
    (f,) = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.invariant == "ave/epilogue-placement"]
    assert f.location.line == 16


@pytest.mark.parametrize("update", [
    "        if t < 32:\n            k0 += 64\n",   # conditional: not an induction variable
    "        k0 = k0 * 2\n",                          # not an increment
    "        k0 += t0\n        t0 = t0 + 1\n",       # the increment changes in the loop
])
def test_other_reassignments_stay_errors(update, tmp_path, ave):
    text = ("@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (512,)]):\n    t = thread_id(0)\n"
            "    k0 = 0\n    t0 = 0\n    for it in range(4):\n        x = A[k0 + t]\n" + update)
    assert "is reassigned inside a loop or branch" in front_end_error(ave, tmp_path / "k.ave", text)


def test_early_return(ave):
    assert ave("check", EARLY).code == 0
    r = ave("simulate", EARLY, "--sizes", "M=100")
    assert r.code == 0 and "0 of 100 elements differ" in r.out
    assert ave("run", EARLY, "--sizes", "M=100").code == 0
    # the threads past the end must return: without it they store out of bounds
    k = _verdict(EARLY.read_text().replace("if r >= M:", "if r > M:"), confirm=True)
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION]
    assert bad and all(f.invariant == "ave/global-bounds" and f.replay["confirmed"] for f in bad)


def test_early_return_is_the_if_it_means():
    m = parse_text(EARLY.read_text())
    body = m.kernels[0].body
    (branch,) = [s for s in body if isinstance(s, A.If)]
    assert isinstance(branch.body[0], A.Pass) and printer._stmt(branch.orelse[0], "") == ["C[r] = A[r]"]
    assert parse_text(printer.module(m)) == m


def test_a_return_before_a_barrier_is_a_divergence():
    text = ("@kernel(grid=(1,), block=128, wave=64)\ndef k(A: Tensor[f32, (128,)], C: Tensor[f32, (128,)]):\n"
            "    tag(A, lambda i: (i,), \"A\")\n    tag(C, lambda i: (i,), \"C\")\n    t = thread_id(0)\n"
            "    if wave_id() == 1:\n        return\n    syncthreads()\n    C[t] = A[t]\n")
    k = _verdict(text, confirm=True)
    (f,) = [f for f in k.findings if f.invariant == "ave/barrier-divergence"]
    assert f.verdict == Verdict.VIOLATION and f.replay["confirmed"]


@pytest.mark.parametrize("body, words", [
    ("    for i in range(2):\n        if i == 1:\n            return\n", "return inside a loop"),
    ("    return 1\n", "returns no value"),
])
def test_bad_returns_are_located_errors(body, words, tmp_path, ave):
    assert words in front_end_error(ave, tmp_path / "k.ave", ONE_WAVE + body)
