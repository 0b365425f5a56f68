"""Where the missing statement belongs (issue 19): a race, an exposed async copy or an
out-of-bounds access comes with `fix_hint`, a line range that holds the omitted barrier, wait or
mask. Each case drops the statement from a correct example (the mutation operators the benchmark
uses) and checks that the hint's range holds the dropped line."""
from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES

import ave_decl
from ave_decl.report.model import Verdict
from ave_decl.testing.mutate import OPERATORS


def hints_of(text: str) -> list[dict]:
    (k,) = ave_decl.check(text, path="k.ave", violation_sets=False).kernels
    return [f.fix_hint for f in k.findings if f.verdict == Verdict.VIOLATION and f.fix_hint]


def covers(hint: dict, line: int) -> bool:
    ranges = [hint] + ([hint["alternative"]] if "alternative" in hint else [])
    return any(r["start_line"] <= line <= r["end_line"] for r in ranges)


@pytest.mark.parametrize("example, operator", [
    ("gemm_lds_mfma.ave", "drop_barrier"),       # both barriers, one mutant each
    ("gemm_pipelined.ave", "drop_async_wait"),
    ("tails/gemm_tail.ave", "drop_mask"),
])
def test_the_hint_holds_the_dropped_statement(example, operator):
    text = (EXAMPLES / example).read_text()
    made = OPERATORS[operator](text)
    assert made
    for m in made:
        hints = hints_of(m.text)
        assert any(covers(h, m.line) for h in hints), (m.line, hints)


def test_hint_text_and_json(ave, tmp_path):
    p = tmp_path / "k.ave"
    p.write_text(OPERATORS["drop_barrier"]((EXAMPLES / "gemm_lds_mfma.ave").read_text())[0].text)
    text = ave("check", p).out
    assert "= help: add syncthreads() after line 26 and before line 28" in text
    data = ave("check", "--json", p).json()
    hints = [f["fix_hint"] for f in data["kernels"][0]["findings"] if f["fix_hint"]]
    assert {"message": "add syncthreads() after line 26 and before line 28", "file": str(p), "start_line": 27,
            "end_line": 27} in hints


def test_a_missing_mask_names_the_index_and_its_extent():
    text = (EXAMPLES / "tails" / "gemm_tail_unmasked_store.ave").read_text()
    (hint,) = hints_of(text)
    # the store is unmasked in both dimensions: the hint names the one its counterexample leaves
    assert re.search(r"store\(C\[\.\.\.\], value, mask=(row < M|col < N)\)", hint["message"]), hint["message"]
