"""Facts decided by enumeration instead of Z3 (issue 16): per-lane strides of global accesses
whose coordinates add block offsets, sizes or symbolic-loop terms to a lane part, and the first
bank-conflicting phase of a shared access, vectorised over loop points. Each must give exactly
what the slower path gave."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ave_decl.facts.lower import lower_module
from ave_decl.hw.expr import ExprTable
from ave_decl.lang.parser import parse_source
from ave_decl.lang.source import SourceFile
from ave_decl.solver import derived_facts
from ave_decl.solver.access_queries import BANKS, _first_conflicting_phase
from ave_decl.solver.lane_split import lane_separable

ROOT = Path(__file__).resolve().parent.parent


def _separable(tree, shared: set[str]) -> bool:
    """`tree` in prefix form: ("add", "bid:0", ("mul", "tid:0", 2)); strings are symbols."""
    t = ExprTable()

    def build(node) -> int:
        if isinstance(node, int):
            return t.const(node)
        if isinstance(node, str):
            return t.sym(node)
        op, *args = node
        return t.op(op, *[build(a) for a in args])

    return lane_separable(t, build(tree), shared)


@pytest.mark.parametrize("tree, shared, expected", [
    (('add', ('mul', 'bid:0', 64), ('floordiv', 'tid:0', 8)), {"bid:0"}, True),
    (('sub', ('add', 'loop:1', ('mod', 'tid:0', 8)), 'size:K'), {"loop:1", "size:K"}, True),
    (('mul', ('add', 'bid:0', 'tid:0'), 4), {"bid:0"}, True),
    (('neg', ('add', 'bid:0', 'tid:0')), {"bid:0"}, True),
    (('floordiv', ('add', 'bid:0', 'tid:0'), 8), {"bid:0"}, False),  # which side of a multiple of 8
    (('mul', 'size:N', 'tid:0'), {"size:N"}, False),  # a size-dependent lane stride
    (('mod', ('mul', 'bid:0', 64), 7), {"bid:0"}, True),  # no lane part: nothing to separate
    (('floordiv', 'tid:0', 2), {"bid:0"}, True),  # no shared part
])
def test_lane_separability(tree, shared, expected):
    assert _separable(tree, shared) is expected


def _stride_rows(path: Path) -> list[list[tuple]]:
    src = SourceFile.read(path)
    out = []
    for kf in lower_module(parse_source(src), src):
        derived_facts.add_semantic_facts(kf)
        out.append(sorted(kf.relation("access_lane_coord_stride") + kf.relation("access_lane_stride")))
    return out


@pytest.mark.parametrize("name", ["gemm_lds_mfma.ave", "gemm_pipelined.ave", "fused_moe.ave",
                                  "flash_attention_gqa.ave", "gemm_mma_ldmatrix.ave",
                                  "tails/gemm_tail_unmasked_store.ave",  # guarded: masked tails
                                  "pipelines/gemm_pipelined3.ave", "production/fa_fwd_gfx942.ave"])
def test_enumerated_strides_equal_the_z3_ones(name, monkeypatch):
    path = ROOT / "examples" / name
    calls: list[int] = []
    by_z3 = derived_facts._strides_by_z3
    monkeypatch.setattr(derived_facts, "_strides_by_z3", lambda *args: calls.append(1) or by_z3(*args))
    enumerated = _stride_rows(path)
    enumerated_calls = len(calls)
    monkeypatch.setattr(derived_facts, "lane_separable", lambda *args: False)  # every such access to Z3
    assert enumerated == _stride_rows(path)
    assert any(enumerated), "the example has no global access with strides: the test compares nothing"
    assert len(calls) > 2 * enumerated_calls, "the enumeration decided no access the Z3 path decides"


def test_guarded_accesses_take_the_enumerated_strides_once_a_pair_of_lanes_runs(monkeypatch):
    """Guards only take pairs of lanes away: the largest run found without them holds, with its
    differences, once Z3 finds two lanes that execute the access together (one check, not five)."""
    path = ROOT / "examples" / "tails" / "gemm_tail_unmasked_store.ave"
    asked: list[int] = []
    pair_runs = derived_facts._pair_runs
    monkeypatch.setattr(derived_facts, "_pair_runs", lambda *args: asked.append(1) or pair_runs(*args))
    enumerated = _stride_rows(path)
    assert asked, "no guarded access was decided by the enumeration"
    monkeypatch.setattr(derived_facts, "lane_separable", lambda *args: False)  # every such access to Z3
    assert enumerated == _stride_rows(path)


def _first_conflict_by_loop(words: np.ndarray, phase: int) -> tuple[int, int] | None:
    for row in range(words.shape[0]):
        for start in range(0, words.shape[1], phase):
            w = words[row, start:start + phase]
            banks = w % BANKS
            if any(np.unique(w[banks == b]).size > 1 for b in np.unique(banks)):
                return row, start
    return None


@pytest.mark.parametrize("seed", range(40))
def test_first_conflicting_phase_matches_a_loop(seed):
    rng = np.random.default_rng(seed)
    rows, lanes = int(rng.integers(1, 5)), int(rng.integers(1, 200))
    phase = int(rng.choice([8, 16, 32]))
    stride = int(rng.choice([1, 2, 4, 32, 33]))
    words = (np.arange(lanes)[None, :] * stride + rng.integers(-3, 3, size=(rows, 1)) * 64).astype(np.int64)
    if rng.random() < 0.5:  # a few random lanes moved: conflicts in some phases only
        hit = rng.integers(0, lanes, size=int(rng.integers(0, 3)))
        words[:, hit] += 32 * int(rng.integers(1, 4))
    assert _first_conflicting_phase(words, phase) == _first_conflict_by_loop(words, phase)


# ---------------------------------------------------------------- write_once by lane enumeration
_EPILOGUE = """
@kernel(grid=(M // 64, {grid1}), block=256, wave=64)
def epilogue(A: Tensor[f32, (M, K)], C: Tensor[f32, (M, N)]):
    assume(M % 64 == 0, N % 64 == 0, K % 64 == 0, K >= 64)
    tag(C, lambda m, n: (m, n), "C")
    t = thread_id(0)
    bm = block_id(0) * 64
    bn = block_id(1) * 64
    acc = local(f32, (16,), init=0)
{body}
"""


def _output_coverage(text: str, enumerate_lanes: bool, monkeypatch) -> list[tuple[int, str, int]]:
    """(line, verdict, queries) of every output-coverage finding, with or without the enumeration.
    (Counterexamples are not compared: which model Z3 returns depends on the terms its context
    made before, and the enumeration leaves some queries out.)"""
    from ave_decl import check
    from ave_decl.solver import access_queries

    if not enumerate_lanes:
        monkeypatch.setattr(access_queries, "write_once_proved", lambda *args: False)
    report = check(text, path="epilogue.ave", violation_sets=False)
    monkeypatch.undo()
    assert not report.errors, report.errors
    return sorted((f.location.line, f.verdict.value, f.queries) for k in report.kernels for f in k.findings
                  if f.invariant == "ave/output-coverage")


_ROWS16 = "    for r in range(16):\n"


@pytest.mark.parametrize("grid1, body, decided", [
    ("N // 64", _ROWS16 + "        C[bm + (t // 64) * 16 + r, bn + t % 64] = acc[r]", 1),
    # two stores into disjoint rows, each injective: three pairs decided
    ("N // 64", "    for r in range(8):\n        C[bm + (t // 64) * 16 + r, bn + t % 64] = acc[r]\n"
                "        C[bm + (t // 64) * 16 + 8 + r, bn + t % 64] = acc[r]", 3),
    # a symbolic loop named by a coordinate is a key like a block id
    ("1", "    for j in range(N // 64):\n" + _ROWS16.replace("    for", "        for")
          + "            C[bm + (t // 64) * 16 + r, j * 64 + t % 64] = acc[r]", 1),
    # the block offset is missing: blocks write the same elements
    ("N // 64", _ROWS16 + "        C[(t // 64) * 16 + r, bn + t % 64] = acc[r]", 0),
    # two lanes of one block write one element
    ("N // 64", _ROWS16 + "        C[bm + (t // 64) * 16 + r % 8, bn + t % 64] = acc[r]", 0),
    # lane rows reach into the next block's rows
    ("N // 64", _ROWS16 + "        C[bm + (t // 64) * 32 + r, bn + t % 64] = acc[r]", 0),
    # every iteration of a symbolic loop writes the same elements
    ("N // 64", "    for kt in range(0, K, 64):\n" + _ROWS16.replace("    for", "        for")
                + "            C[bm + (t // 64) * 16 + r, bn + t % 64] = acc[r]", 0),
    # two stores that overlap
    ("N // 64", "    for r in range(8):\n        C[bm + (t // 64) * 16 + r, bn + t % 64] = acc[r]\n"
                "        C[bm + (t // 64) * 16 + 4 + r, bn + t % 64] = acc[r]", 2),  # each store alone: decided
])
def test_write_once_by_enumeration_agrees_with_z3(grid1, body, decided, monkeypatch):
    """The enumeration decides only pairs Z3 proves (never one with a collision), and the
    verdicts are the same either way."""
    text = _EPILOGUE.format(grid1=grid1, body=body)
    by_lanes = _output_coverage(text, True, monkeypatch)
    by_z3 = _output_coverage(text, False, monkeypatch)
    assert [(line, verdict) for line, verdict, _ in by_lanes] == [(line, verdict) for line, verdict, _ in by_z3]
    assert sum(q == 0 for _, _, q in by_lanes) - sum(q == 0 for _, _, q in by_z3) == decided
    collides = "VIOLATION" in {verdict for _, verdict, _ in by_z3}
    assert collides == (decided != len(by_z3) - 1), by_z3  # every write_once pair decided, or a collision


@pytest.mark.parametrize("body", [
    "    for r in range(8):\n        C[bm + (t // 64) * 16 + r, bn + t % 64] = acc[r]\n"
    "        C[bm + (t // 64) * 16 + 8 + r, bn + t % 64] = acc[r]",  # disjoint
    "    for r in range(8):\n        C[bm + (t // 64) * 16 + r, bn + t % 64] = acc[r]\n"
    "        C[bm + (t // 64) * 16 + 4 + r, bn + t % 64] = acc[r]",  # overlapping
])
def test_two_stores_compared_by_row_sets_and_by_sorting_agree(body):
    """Two stores' lane images are compared as sets of rows, or (images past ROW_SET_POINTS) by
    np.unique over both: the same findings either way."""
    from ave_decl.solver import lane_split

    text = _EPILOGUE.format(grid1="N // 64", body=body)
    by_sets = _output_coverage(text, True, pytest.MonkeyPatch())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lane_split, "ROW_SET_POINTS", 0)
        by_sorting = _output_coverage(text, True, pytest.MonkeyPatch())
    assert by_sets == by_sorting


# ---------------------------------------------------------------- bank conflicts through a pipeline stage
def test_residues_stand_for_a_symbolic_loops_remainders():
    from ave_decl.hw.expr import evaluate, residues

    t = ExprTable()
    stage = t.op("mod", t.op("floordiv", t.sym("loop:1"), t.const(32)), t.const(2))
    addr = t.op("add", t.op("mul", stage, t.const(64 * 33)), t.op("mul", t.sym("tid:0"), t.const(33)))
    known = varying = lambda name: name.startswith("tid:")  # noqa: E731
    assert residues(t, addr, known, varying) == ({stage: 2}, {"tid:0"})
    assert residues(t, t.op("add", addr, t.sym("loop:1")), known, varying) is None  # the loop outside a remainder
    assert residues(t, t.op("mod", t.sym("tid:0"), t.const(8)), known, varying) == ({}, {"tid:0"})  # nothing to abstract
    # a remainder that also varies with the thread differs between the two lanes compared: not taken
    per_lane = t.op("mod", t.op("add", t.sym("tid:0"), t.sym("loop:1")), t.const(2))
    assert residues(t, per_lane, known, varying) is None
    lanes = np.arange(4)[None, :]
    got = evaluate(t, addr, {"tid:0": lanes}, {stage: np.arange(2)[:, None]})
    assert got.tolist() == [[0, 33, 66, 99], [2112, 2145, 2178, 2211]]


_STAGED = """
@kernel(grid=(M // 64,), block=64, wave=64)
def staged(A: Tensor[f32, (M, K)], C: Tensor[f32, (M, K)]):
    assume(M % 64 == 0, K % 32 == 0, K >= 32)
    t = thread_id(0)
    bm = block_id(0) * 64
    S = shared(f32, {shape})
    for kt in range(0, K, 32):
{body}
"""
_BY_STAGE = ("        st = (kt // 32) % 2\n        S[st, t, 0] = A[bm + t, kt]\n        syncthreads()\n"
             "        C[bm + t, kt] = S[st, t, 0]")
# stage 1 conflicts (two words per bank), stage 0 does not
_STAGE_ONE_CONFLICTS = ("        st = (kt // 32) % 2\n        S[t * (1 + st)] = A[bm + t, kt]\n        syncthreads()\n"
                        "        C[bm + t, kt] = S[t * (1 + st)]\n        syncthreads()")
# a remainder of the thread id and a symbolic loop (found by review: one value of it for both
# lanes of a phase proved these conflict-free, while lanes 0 and 1 conflict)
_BY_LANE = "        S[t] = A[bm + t, kt]\n        syncthreads()\n        C[bm + t, kt] = S[{index}]\n        syncthreads()"


def _bank_findings(text: str) -> list[tuple[int, str, int, str]]:
    from ave_decl import check

    report = check(text, path="staged.ave", violation_sets=False)
    assert not report.errors, report.errors
    return sorted((f.location.line, f.verdict.value, f.queries, f.message) for k in report.kernels
                  for f in k.findings if f.invariant == "ave/bank-conflicts")


@pytest.mark.parametrize("text, verdicts", [
    # padded rows: both stages enumerated, no Z3 query
    (_STAGED.format(shape="(2, 64, 33)", body=_BY_STAGE), [("VERIFIED", 0)] * 2),
    # a conflict at some stage: the enumeration's, pinned, confirmed by Z3 (its first query)
    (_STAGED.format(shape="(2, 64, 32)", body=_BY_STAGE), [("VIOLATION", 1)] * 2),
    (_STAGED.format(shape="(128,)", body=_STAGE_ONE_CONFLICTS), [("VIOLATION", 1)] * 2),
    # ... at a stage that never runs (K == 32: stage 0 alone): the pinned query is refuted, then
    # the access is proved whole (a second query)
    (_STAGED.replace("K >= 32", "K == 32").format(shape="(128,)", body=_STAGE_ONE_CONFLICTS),
     [("VERIFIED", 2)] * 2),
    (_STAGED.format(shape="(64,)", body=_BY_LANE.format(index="((t + kt // 32) % 2) * 32 + t // 2")),
     [("VERIFIED", 0), ("VIOLATION", 1)]),
    (_STAGED.format(shape="(64,)", body=_BY_LANE.format(index="(t * K) % 64")), [("VERIFIED", 0), ("VIOLATION", 1)]),
])
def test_bank_conflicts_through_a_stage_index(text, verdicts, monkeypatch):
    """A shared buffer indexed by a pipeline stage `(kt // 32) % 2` of a loop bounded by a size:
    padded rows are proved conflict-free by enumerating both stages (no Z3 query); unpadded ones
    conflict at a stage that may never run, so Z3 is asked that conflict first (its lanes and
    stage pinned: quick to confirm), then, if it cannot happen, the whole access; here the verdicts
    and messages are those of Z3 alone. A remainder that varies with the thread is not
    enumerated: Z3 finds those conflicts."""
    from ave_decl.solver.access_queries import AccessQueries

    enumerated = _bank_findings(text)
    assert [(v, q) for _line, v, q, _m in enumerated] == verdicts
    monkeypatch.setattr(AccessQueries, "_bank_witness", lambda *args: None)  # every access to Z3
    by_z3 = _bank_findings(text)
    assert [(line, v, m) for line, v, _q, m in enumerated] == [(line, v, m) for line, v, _q, m in by_z3]


_GUARDED = """
@kernel(grid=(M // 64,), block=64, wave=64)
def guarded(A: Tensor[f32, (M,)], C: Tensor[f32, (M,)]):
    assume(M % 64 == 0)
    t = thread_id(0)
    bm = block_id(0) * 64
    S = shared(f32, (128,))
    S[t] = A[bm + t]
    S[t + 64] = A[bm + t]
    syncthreads()
    if {guard}:
        C[bm + t] = S[t * 2]
"""


@pytest.mark.parametrize("guard, verdict, queries", [
    ("t < 16", "VERIFIED", 0),  # lanes 0-15 read words 0-30: one bank each
    ("t >= 16", "VIOLATION", 1),  # lanes 32 and 48 read words 64 and 96 of bank 0
    # a guard that reads a size is left out: the conflict of lanes 0 and 16 is asked pinned
    # first, then the access whole (M = 64: lanes 0-15 run)
    ("t < M // 4", "VERIFIED", 2),
])
def test_bank_conflicts_under_a_guard(guard, verdict, queries, monkeypatch):
    """The read `S[t * 2]` conflicts first for lanes 0 and 16 when every lane runs; under a guard
    that conflict may not run. A guard on thread ids (and enumerated loops) is enumerated too:
    only the lanes it lets run are compared (no query when none conflict, one certain query when
    two do); any other guard is left out (fewer lanes cannot conflict more), and Z3 is asked that
    conflict first, pinned, then the access whole. The verdicts are those Z3 alone gives."""
    from ave_decl.solver.access_queries import AccessQueries

    text = _GUARDED.format(guard=guard).replace("assume(M % 64 == 0)", "assume(M % 64 == 0)\n    assume(M <= 64)")
    enumerated = _bank_findings(text)
    assert [(v, q) for _line, v, q, _m in enumerated] == [("VERIFIED", 0), ("VERIFIED", 0), (verdict, queries)]
    monkeypatch.setattr(AccessQueries, "_bank_witness", lambda *args: None)  # every access to Z3
    by_z3 = _bank_findings(text)
    assert [(line, v) for line, v, _q, _m in enumerated] == [(line, v) for line, v, _q, _m in by_z3]


def test_a_pinned_conflict_left_undecided_leaves_the_verdict_to_the_whole_access(monkeypatch):
    """The pinned query is stronger than the access's: its UNSAT, or an UNKNOWN (found by review:
    a spent budget there made the obligation UNKNOWN, its verdict then hanging on the budget),
    says nothing; the whole access decides."""
    import z3

    from ave_decl.solver import smt, solve

    asked: list = []
    formulas = solve.KernelSolver.formulas

    def recording(self, q):
        asked.append(q)
        return formulas(self, q)

    quick_check = smt.Encoder.quick_check

    def undecided_hints(self, prepared, *args, **kw):
        return (z3.unknown, None) if asked and asked[-1].hint else quick_check(self, prepared, *args, **kw)

    solver_holding = smt.Encoder.solver_holding

    def spent_on_hints(self, prepared, timeout_ms, rlimit=0):  # the full solver's budget spent at once
        return solver_holding(self, prepared, timeout_ms, 1 if asked and asked[-1].hint else rlimit)

    monkeypatch.setattr(solve.KernelSolver, "formulas", recording)
    monkeypatch.setattr(smt.Encoder, "quick_check", undecided_hints)
    monkeypatch.setattr(smt.Encoder, "solver_holding", spent_on_hints)
    text = _GUARDED.format(guard="t < M // 4").replace("assume(M % 64 == 0)", "assume(M % 64 == 0)\n    assume(M <= 64)")
    findings = _bank_findings(text)  # a guard on a size: left out of the enumeration
    assert [(v, q) for _line, v, q, _m in findings] == [("VERIFIED", 0), ("VERIFIED", 0), ("VERIFIED", 2)]
    assert any(q.hint for q in asked)


def test_a_conflicts_degree_counts_the_lanes_its_guard_lets_run():
    """Lanes 0-15 read words 0, 4, ..., 60: bank 0 serves words 0 and 32, a 2-way conflict; the
    whole phase (64 lanes, words up to 252) would make it 4-way (found by review)."""
    text = _GUARDED.replace("S = shared(f32, (128,))", "S = shared(f32, (256,))").replace(
        "    S[t + 64] = A[bm + t]\n", "    S[t + 64] = A[bm + t]\n    S[t + 128] = A[bm + t]\n    S[t + 192] = A[bm + t]\n")
    text = text.format(guard="t < 16").replace("S[t * 2]", "S[(t * 4) % 256]")
    guarded = [m for _line, v, _q, m in _bank_findings(text) if v == "VIOLATION"]
    assert guarded == ["2-way bank conflict: lanes 0 and 8 access words 0 and 32 of bank 0"]


@pytest.mark.parametrize("name", ["gemm_mfma16", "gemm_lds_mfma_transposed"])
def test_a_certain_conflict_gets_the_counterexample_the_solver_path_gives(name, monkeypatch):
    """A conflict the enumeration found where every lane and iteration runs is satisfiable (when
    the kernel's assumptions are): its model is made at its point (solver/point_model.py), else
    its canonical model is asked for at once, without the quick attempt in the kernel's context
    whose SAT led to the same canonical model; the report is the one that path gives."""
    import json

    from ave_decl import check
    from ave_decl.solver import smt
    from ave_decl.solver.access_queries import AccessQueries
    from conftest import EXAMPLES

    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    path = str(EXAMPLES / f"{name}.ave")
    attempts = [0]
    quick_check = smt.Encoder.quick_check

    def counting(self, *args, **kw):
        attempts[0] += 1
        return quick_check(self, *args, **kw)

    monkeypatch.setattr(smt.Encoder, "quick_check", counting)
    at_once = json.dumps(check(path, violation_sets=False, confirm=True).to_json(timings=False), sort_keys=True)
    fewer = attempts[0]
    bank_conflicts = AccessQueries.bank_conflicts

    def uncertain(self, aid):
        queries = bank_conflicts(self, aid)
        for q in queries:
            q.certain, q.point = False, None
        return queries

    monkeypatch.setattr(AccessQueries, "bank_conflicts", uncertain)
    attempts[0] = 0
    assert json.dumps(check(path, violation_sets=False, confirm=True).to_json(timings=False), sort_keys=True) == at_once
    assert fewer < attempts[0]


_NEGATIVE = """
@kernel(grid=(M // 64,), block=64, wave=64)
def negative(A: Tensor[f32, (M,)], C: Tensor[f32, (M,)]):
    assume(M % 64 == 0)
    t = thread_id(0)
    bm = block_id(0) * 64
    S = shared(f32, (256,))
    for i in range(4):
        S[t + i * 64] = A[bm + t]
    syncthreads()
{body}
"""


@pytest.mark.parametrize("body", [
    "    if t // -8 <= -2:\n        C[bm + t] = S[(t // 9) * 32]",  # a guard the enumeration evaluates
    "    C[bm + t] = S[(t // -8) * -32 % 256]",  # an address
])
def test_a_division_by_a_negative_constant_rounds_alike_in_the_enumeration_and_in_z3(body, monkeypatch):
    """Python's floor division (the evaluator's, so the enumeration's) and Z3's div round apart
    for a negative divisor; the encoding now rounds as Python does (found by review: the
    enumeration named a conflict under `t // -8` whose pinned query Z3 proved absent, and that
    UNSAT proved the access: VERIFIED where lanes 9 and 18 conflict). The enumeration and Z3
    alone agree, and a pinned conflict's UNSAT no longer decides an access (the whole access is
    asked after it)."""
    from ave_decl.solver.access_queries import AccessQueries

    text = _NEGATIVE.format(body=body)
    enumerated = _bank_findings(text)
    assert enumerated[-1][1] == "VIOLATION"
    monkeypatch.setattr(AccessQueries, "_bank_witness", lambda *args: None)  # every access to Z3
    by_z3 = _bank_findings(text)  # the same verdicts and degrees (Z3 may name other lanes)
    assert [(line, v, m.split(":")[0]) for line, v, _q, m in enumerated] == \
        [(line, v, m.split(":")[0]) for line, v, _q, m in by_z3]


def test_the_encoding_divides_by_a_negative_constant_as_python_does():
    """`a // c` and `a % c` for c < 0 in the Z3 encoding equal Python's (and the evaluator's)."""
    import z3

    from ave_decl.solver.smt import _by_negative_constant

    a = z3.Int("a")
    for c in (-1, -3, -8):
        for value in range(-20, 21):
            for op, expected in (("floordiv", value // c), ("mod", value % c)):
                got = z3.simplify(z3.substitute(_by_negative_constant(op, a, c), (a, z3.IntVal(value))))
                assert got.as_long() == expected, (op, value, c)
