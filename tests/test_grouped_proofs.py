"""Grouped proofs (solver/solve.py `_proved_together`): a group whose first query's kill-free
formula is satisfiable is not attempted. The skipped groups could not have been proved, and the
report is the one the attempts would give."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ave_decl import check
from ave_decl.solver.solve import KernelSolver

ROOT = Path(__file__).resolve().parent.parent


def _report(path: Path) -> str:
    return json.dumps(check(str(path), violation_sets=False).to_json(timings=False), sort_keys=True)


# stored-tag groups of a refilled stage (K distinctness, whose groups were skipped in the
# pipelined GEMMs, is not grouped at all now: solve.UNGROUPED)
@pytest.mark.parametrize("name", ["buffers/lds_pipeline.ave", "pipelines/register_prefetch.ave"])
def test_skipped_groups_are_unprovable_and_the_report_is_unchanged(name, monkeypatch):
    path = ROOT / "examples" / name
    as_shipped = _report(path)
    skipped: list[bool] = []
    first_needs_kills = KernelSolver._first_needs_kills

    def watched(self, group):
        needs = first_needs_kills(self, group)
        if needs:  # the attempt it saves must fail
            skipped.append(self._group_proved(group))
        return needs

    monkeypatch.setattr(KernelSolver, "_first_needs_kills", watched)
    assert _report(path) == as_shipped
    assert skipped, f"{name}: no group was skipped, the test checks nothing"
    assert not any(skipped), "a skipped group was provable"
    monkeypatch.setattr(KernelSolver, "_first_needs_kills", lambda self, group: False)  # every group attempted
    assert _report(path) == as_shipped


@pytest.mark.parametrize("name", ["pipelines/gemm_pipelined3.ave", "pipelines/gemm_pipelined3_wait2.ave"])
def test_ungrouped_relations_are_proved_one_by_one_with_the_same_report(name, monkeypatch):
    """solve.UNGROUPED (async waits, K pairing, K distinctness): no group is attempted for their obligations,
    and the report is the one grouping every relation gives."""
    from ave_decl.solver import solve

    path = ROOT / "examples" / name
    attempted: list[str] = []
    proved_together = KernelSolver._proved_together
    discharge = KernelSolver.discharge

    def tracking(self, site, inv, relation, lhs, rhs):
        self._relation_now = relation
        return discharge(self, site, inv, relation, lhs, rhs)

    def watched(self, posed):
        attempted.append(self._relation_now)
        return proved_together(self, posed)

    monkeypatch.setattr(KernelSolver, "discharge", tracking)
    monkeypatch.setattr(KernelSolver, "_proved_together", watched)
    as_shipped = _report(path)
    assert attempted and not set(attempted) & solve.UNGROUPED
    attempted.clear()
    monkeypatch.setattr(solve, "UNGROUPED", frozenset())
    assert _report(path) == as_shipped
    assert {"async_exposed", "k_pairing", "k_distinct"} <= set(attempted), "the examples have obligations of each"
