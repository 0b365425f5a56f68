"""Queries with kills proved in groups (solve.KernelSolver._proved_with_kills): once an
obligation's first query that needs its kills is proved, the rest are tried as disjunctions of
KILLED_TOGETHER. A group proved skips its queries; a group not proved stops the grouping and its
queries are asked one by one as without it. Either way the report is the one without groups."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ave_decl import check
from ave_decl.solver import solve

PACKED = Path(__file__).resolve().parent.parent / "examples" / "packed" / "gemm_packed_transpose.ave"
# w1 read from w0's row: the interleaved words hold one row of B twice, and the MFMA's K tags differ
SAME_ROW = ("w1 = load_vec(B[kt + 2 * i + 1, bn + 2 * j], 2)", "w1 = load_vec(B[kt + 2 * i, bn + 2 * j], 2)")


def _report(path: Path) -> str:
    return json.dumps(check(str(path), violation_sets=False, confirm=True).to_json(timings=False), sort_keys=True)


def _groups(monkeypatch) -> list[tuple[int, int]]:
    """(queries offered, queries proved) of each grouping attempt from now on."""
    seen: list[tuple[int, int]] = []
    proved_with_kills = solve.KernelSolver._proved_with_kills

    def recording(self, posed):
        proved = proved_with_kills(self, posed)
        seen.append((len(posed), len(proved)))
        return proved

    monkeypatch.setattr(solve.KernelSolver, "_proved_with_kills", recording)
    return seen


@pytest.fixture(autouse=True)
def _no_memo(monkeypatch):
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")  # each check decides its queries itself


def test_the_packed_gemms_queries_with_kills_are_proved_in_groups_with_the_report_they_give_alone(monkeypatch):
    groups = _groups(monkeypatch)
    grouped = _report(PACKED)
    assert json.loads(grouped)["kernels"][0]["verdict"] == "VERIFIED"
    assert [g for g in groups if g[0]] == [(22, 22), (22, 22)], "the tag assertion's and K pairing's rest"
    monkeypatch.setattr(solve, "KILLED_TOGETHER", 1)  # no group of two or more: every query alone
    assert _report(PACKED) == grouped


def test_a_group_holding_a_violation_leaves_its_queries_to_be_asked_alone(monkeypatch, tmp_path):
    wrong = tmp_path / "packed_same_row.ave"
    text = PACKED.read_text()
    assert SAME_ROW[0] in text
    wrong.write_text(text.replace(*SAME_ROW))
    groups = _groups(monkeypatch)
    grouped = _report(wrong)
    kernel = json.loads(grouped)["kernels"][0]
    assert kernel["verdict"] == "VIOLATION"
    assert any(f["verdict"] == "VIOLATION" and (f.get("replay") or {}).get("confirmed") for f in kernel["findings"])
    assert (22, 0) in groups, "a group was attempted and not proved"
    monkeypatch.setattr(solve, "KILLED_TOGETHER", 1)
    assert _report(wrong) == grouped
