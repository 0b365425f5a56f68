"""Reads of shared elements no store wrote yet (solver/unwritten.py): a pipeline whose prologue
fills the wrong stage reads an unwritten stage in its first iteration. Without an alternative for
that read every tag check on the value held vacuously (the mutant was VERIFIED)."""
from __future__ import annotations

from pathlib import Path

import pytest

import ave_decl
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source
from ave_decl.testing.mutate import mutants

ROOT = Path(__file__).resolve().parent.parent
PIPELINED = ROOT / "examples" / "gemm_pipelined.ave"
SIZES = {"M": 64, "N": 64, "K": 128}


@pytest.mark.parametrize("site", [0, 1])
def test_a_prologue_filling_the_wrong_stage_is_a_replayed_violation(site):
    m = mutants(PIPELINED.read_text(), ["wrong_prologue_stage"], first_only=False)[site]
    (_, sim), = simulate_source(SourceFile("stage.ave", m.text), SIZES, shadow=True)
    assert not sim.reference["ok"]
    (k,) = ave_decl.check(m.text, path="stage.ave", confirm=True, violation_sets=False).kernels
    assert k.verdict == Verdict.VIOLATION
    found = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.replay and f.replay["confirmed"]]
    assert found and any(f.counterexample.lhs.tag in (None, []) for f in found)  # the untagged (unwritten) element


def test_the_correct_pipeline_still_verifies():
    (k,) = ave_decl.check(PIPELINED.read_text(), path=str(PIPELINED), violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED
