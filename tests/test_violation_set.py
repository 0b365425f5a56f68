"""Violation sets are exact: compared with an independent exhaustive enumeration."""
from __future__ import annotations

import itertools

import z3
from conftest import EXAMPLES

import ave_decl
from ave_decl.datalog.clingo_engine import ClingoEngine
from ave_decl.datalog.ruleset import load_rules, rule_metadata
from ave_decl.facts.lower import lower_module
from ave_decl.facts.view import KernelView
from ave_decl.lang.parser import parse_source
from ave_decl.lang.source import SourceFile
from ave_decl.pipeline import split_by_kernel
from ave_decl.report.model import Verdict
from ave_decl.solver.derived_facts import add_semantic_facts
from ave_decl.solver.solve import KernelSolver


def points_of(description: dict) -> int:
    return description["count"]


def test_transposed_gemm_set_matches_per_point_enumeration():
    src = SourceFile.read(EXAMPLES / "gemm_lds_mfma_transposed.ave")
    (kf,) = lower_module(parse_source(src), src)
    add_semantic_facts(kf)
    prog = load_rules()
    derived = split_by_kernel(ClingoEngine(prog).run(kf.rows))[kf.kid]
    solver = KernelSolver(KernelView.of(kf), derived, rule_metadata(prog), 10.0)
    (finding,) = [f for f in solver.findings() if f.verdict == Verdict.VIOLATION and f.counts]
    vs = finding.violation_set
    assert vs is not None and vs["complete"] and vs["variables"] == ["lane", "value"]
    # exhaustive: one independent query per (lane, value) point of the A operand
    (ob,) = [o for o in derived["obligation"] if o[3] == "k_pairing"]
    (q,) = solver._queries(ob[1], ob[3], ob[4], ob[5])
    violating = set()
    for lane, value in itertools.product(range(64), range(4)):
        s = solver.enc.solver(10_000)
        s.add(*solver.base, *q.constraints, q.violated, q.extras["lane_a"] == lane, q.extras["slot_a"] == value)
        if s.check() == z3.sat:
            violating.add((lane, value))
    assert vs["count"] == len(violating) == 256  # every A slot meets some B slot with another K
    assert vs["description"].startswith("256 of 256 (lane, value) pairs")


def test_out_of_bounds_set_matches_concrete_enumeration():
    text = (EXAMPLES / "gemm_lds_mfma.ave").read_text().replace(
        "b[v] = Bs[ks + (lane // 32) * 4 + v,", "b[v] = Bs[ks + (lane // 32) * 4 + v + 1,")
    report = ave_decl.check(text, path="oob.ave")
    (f,) = [f for f in report.kernels[0].findings if f.verdict == Verdict.VIOLATION and
            f.invariant == "ave/buffer-bounds"]
    vs = f.violation_set
    # concrete: which of the 256 threads ever index row >= 64 (over every ks and v)
    bad = {t for t in range(256) for ks in range(0, 64, 8) for v in range(4)
           if ks + ((t % 64) // 32) * 4 + v + 1 >= 64}
    assert vs["count"] == len(bad) == 128 and vs["complete"]
    assert vs["cubes"] == [{"thread": "bits xx1xxxxx (MSB first)"}]  # lane bit 5 set: lanes 32-63 of each wave
