"""Violation sets are exact: compared with an independent exhaustive enumeration, and their printed
description (cubes and text) describes exactly the enumerated set."""
from __future__ import annotations

import itertools
import re

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


def _values(constraint: str, size: int) -> set[int]:
    """The values one cube constraint allows: "any", "5", "3-7" or "bits x1x0 (MSB first)"."""
    if constraint == "any":
        return set(range(size))
    if m := re.fullmatch(r"(\d+)(?:-(\d+))?", constraint):
        lo = int(m.group(1))
        return set(range(lo, int(m.group(2) or lo) + 1))
    m = re.fullmatch(r"bits ([01x]+) \(MSB first\)", constraint)
    assert m, constraint
    pattern = m.group(1)[::-1]  # LSB first
    return {v for v in range(size) if all(c == "x" or int(c) == (v >> i) & 1 for i, c in enumerate(pattern))}


def cube_points(cubes: list[dict[str, str]], sizes: dict[str, int]) -> set[tuple[int, ...]]:
    """Every point the cubes describe (their union), over variables in `sizes` order."""
    names = list(sizes)
    out: set[tuple[int, ...]] = set()
    for cube in cubes:
        assert list(cube) == names
        out |= set(itertools.product(*[sorted(_values(cube[n], sizes[n])) for n in names]))
    return out


def text_cubes(description: str, names: list[str]) -> list[dict[str, str]]:
    """The cubes as printed in the one-line description ("... pairs: lane 0-31; value any | ...")."""
    head, sep, body = description.partition(": ") if ": " in description else (description, "", "")
    if not sep:
        return []
    cubes = []
    for part in body.split(" | "):
        fields = part.split("; ")
        assert [f.split(" ", 1)[0] for f in fields] == names, part
        cubes.append({f.split(" ", 1)[0]: f.split(" ", 1)[1] for f in fields})
    return cubes


def check_description(vs: dict, sizes: dict[str, int], points: set[tuple[int, ...]]) -> None:
    """The JSON cubes and the printed text both describe exactly `points`."""
    assert vs["count"] == len(points) and vs["variables"] == list(sizes)
    assert cube_points(vs["cubes"], sizes) == points
    assert text_cubes(vs["description"], list(sizes)) == vs["cubes"]
    total = 1
    for n in sizes.values():
        total *= n
    prefix = f"{len(points)} of {total} " if vs["complete"] else f"at least {len(points)} of {total} "
    assert vs["description"].startswith(prefix)


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
    s = solver.enc.query_solver(10_000, solver.formulas(q))
    for lane, value in itertools.product(range(64), range(4)):
        s.push()
        s.add(q.extras["lane_a"] == lane, q.extras["slot_a"] == value)
        if s.check() == z3.sat:
            violating.add((lane, value))
        s.pop()
    assert vs["count"] == len(violating) == 256  # every A slot meets some B slot with another K
    assert vs["description"].startswith("256 of 256 (lane, value) pairs")
    check_description(vs, {"lane": 64, "value": 4}, violating)


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
    check_description(vs, {"thread": 256}, {(t,) for t in bad})


def _violating_threads(solver: KernelSolver, q, size: int) -> set[tuple[int]]:
    """One independent question per thread (push/pop on one solver: no blocking clauses)."""
    out = set()
    s = solver.enc.query_solver(10_000, solver.formulas(q))
    for t in range(size):
        s.push()
        s.add(solver.enc.linear_thread(q.site) == t)
        if s.check() == z3.sat:
            out.add((t,))
        s.pop()
    return out


def test_description_with_negated_bits_matches_per_thread_queries():
    """Without the first barrier of the LDS GEMM the racing threads are those whose bits 6 and 4
    differ: the cubes need negated literals (pyeda's `Complement`, formerly read as a free bit,
    which printed 192 threads for a set of 128)."""
    text = (EXAMPLES / "gemm_lds_mfma.ave").read_text().replace("        syncthreads()\n        for ks",
                                                                   "        pass\n        for ks", 1)
    src = SourceFile("race.ave", text)
    (kf,) = lower_module(parse_source(src), src)
    add_semantic_facts(kf)
    prog = load_rules()
    derived = split_by_kernel(ClingoEngine(prog).run(kf.rows))[kf.kid]
    solver = KernelSolver(KernelView.of(kf), derived, rule_metadata(prog), 10.0)
    races = [f for f in solver.findings() if f.verdict == Verdict.VIOLATION and f.violation_set
             and f.invariant == "ave/shared-race"]
    partial = [f for f in races if f.violation_set["count"] < 256]
    assert partial, [f.violation_set["description"] for f in races]
    for f in partial:
        vs = f.violation_set
        assert any("0" in c["thread"] for c in vs["cubes"])  # a negated literal is printed
        (ob,) = [o for o in derived["obligation"] if o[2] == "ave/shared-race" and
                 solver.view.span(o[1]).line == f.location.line and o[3] in ("raw_race", "war_race")][:1]
        first = next(q for q in solver._queries(ob[1], ob[3], ob[4], ob[5])
                     if solver.enc.query_solver(10_000, [*solver.base, *q.constraints, q.violated,
                                                         *solver.enc.side]).check() == z3.sat)
        check_description(vs, {"thread": 256}, _violating_threads(solver, first, 256))
