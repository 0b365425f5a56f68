"""Query slicing (solver/slicing.py, `KernelSolver._proved_sliced`): a slice is some of its
query's constraints plus its property, so its UNSAT is the query's; the queries it proves are
UNSAT in full; and the report is the one the check gives without slicing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import z3
from conftest import EXAMPLES

from ave_decl import check
from ave_decl.report.model import Verdict
from ave_decl.solver.chains import Alt, Step, product_components, product_operands, row_of
from ave_decl.solver.deferred import relaxed, strict
from ave_decl.solver.smt import Instance
from ave_decl.solver.slicing import Slice, Slicer, promising, query_slice, weaker_slices, worth_slicing
from ave_decl.solver.solve import KernelSolver

FA = EXAMPLES / "production" / "fa_fwd_gfx942.ave"
# the production attention dividing O by another row's sum: a row-statistics violation at the O
# store, in an obligation whose 648 queries are sliced
ROW_BUG = ("O[h, row, lane % 32] = o0[r] / l[r]", "O[h, row, lane % 32] = o0[r] / l[(r + 4) % 16]")


def _ids(formulas) -> list[int]:
    return [f.get_id() for f in formulas]


def test_connected_keeps_what_reaches_the_property_and_nothing_over_a_blocked_variable():
    ctx = z3.Context()
    x, y, z, w, b = (z3.Int(n, ctx) for n in "xyzwb")
    link, bound, apart, pinned = x == y + 1, y < 5, z == w, b == x
    slicer = Slicer(ctx)
    prop = x != 3
    kept = slicer.connected([link, apart, pinned, bound], slicer.variables(prop), slicer.variables(b))
    assert _ids(kept) == _ids([link, bound])
    assert _ids(slicer.connected([link, apart, pinned, bound], slicer.variables(prop), frozenset())) == \
        _ids([link, pinned, bound])


def test_weaker_slices_are_the_strict_subsets():
    """A slice whose formulas are a strict subset of another's is weaker: its UNSAT proves the
    other (KernelSolver._proved_slices proves those first). Equal-content slices are one key."""
    ctx = z3.Context()
    x, y, z = (z3.Int(n, ctx) for n in "xyz")
    f1, f2, f3, f4 = x > 0, y < x, z == y, x != 3
    shared = [f1, f2]  # a piece of two slices: masked once
    weaker = weaker_slices({b"a": (shared,), b"b": ([f3], shared), b"c": ([f1], [f4]), b"d": ([f1, f2, f3], [f4])},
                           ctx)
    assert weaker == {b"a": [], b"b": [b"a"], b"c": [], b"d": [b"a", b"b", b"c"]}
    assert weaker_slices({b"a": ([f1, f2],), b"b": ([f2], [f1])}, ctx) == {b"a": [], b"b": []}  # equal sets: neither weaker


def test_a_sample_of_distinct_slices_keeping_most_of_their_queries_is_not_promising():
    def sample(identities: list[int], kept: int) -> list:
        return [(None, Slice((), None, (i,), kept, 100)) for i in identities]

    assert not promising(sample(list(range(16)), 97))  # production attention's stored tags
    assert promising(sample(list(range(15)) + [0], 97))  # two slices equal: they may collapse
    assert promising(sample(list(range(16)), 50))  # half the constraints left out


def test_worth_slicing_needs_fewer_distinct_slices_or_much_smaller_ones():
    assert worth_slicing(648, 162, 9000, 10000)
    assert worth_slicing(9, 9, 40, 100)
    assert not worth_slicing(9, 9, 85, 100)
    assert worth_slicing(9, 6, 85, 100) and not worth_slicing(9, 7, 85, 100)


def _queries_of(path: Path, monkeypatch) -> list:
    """Every obligation's queries, as `discharge` builds them."""
    seen: list = []
    built = KernelSolver._queries

    def recording(self, *args):
        queries = built(self, *args)
        seen.extend(queries)
        return queries

    monkeypatch.setattr(KernelSolver, "_queries", recording)
    check(str(path), violation_sets=False)
    return seen


@pytest.mark.parametrize("name", ["flash_attention_gqa.ave", "packed/gemm_packed_transpose.ave",
                                  "gemm_mma_ldmatrix.ave"])
def test_a_slice_is_its_querys_property_and_some_of_its_constraints(name, monkeypatch):
    queries = _queries_of(EXAMPLES / name, monkeypatch)
    sliced = 0
    for q in queries:
        if not hasattr(q.violated, "get_id"):
            continue
        s = query_slice(Slicer(q.violated.ctx), q)
        if s is None:
            continue
        sliced += 1
        *kept, prop = s.formulas
        assert prop.get_id() == q.violated.get_id()
        whole = _ids(relaxed(q.constraints))
        assert set(_ids(kept)) <= set(whole), "a formula the query does not assert"
        assert s.kept == len(kept) < s.whole == len(whole)
    assert sliced, f"{name}: no query was sliced, the test checks nothing"


def test_the_queries_slices_prove_in_production_attention_are_unsat_in_full(monkeypatch):
    proved_by_slices: list = []
    sliced = KernelSolver._proved_sliced

    def watched(self, queries):
        proved = sliced(self, queries)
        chosen = [q for q in queries if id(q) in proved]
        for q in chosen[:: max(1, len(chosen) // 4)]:  # a few per obligation: each full query costs
            solver = z3.Solver(ctx=self.enc.ctx)
            solver.set("timeout", 60_000)
            solver.add(*self.enc.prepare([*self.base, *strict(q.constraints), q.violated, *self.enc.side]))
            proved_by_slices.append(solver.check())
        return proved

    monkeypatch.setattr(KernelSolver, "_proved_sliced", watched)
    (k,) = check(str(FA), violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED
    assert len(proved_by_slices) >= 20, "slicing proved too little here to test anything"
    assert z3.sat not in proved_by_slices


def _report(text: str, path: str) -> str:
    return json.dumps(check(text, path=path, violation_sets=False).to_json(timings=False), sort_keys=True)


@pytest.mark.slow
def test_a_row_statistics_violation_is_reported_as_without_slicing(monkeypatch):
    text = FA.read_text()
    assert ROW_BUG[0] in text
    text = text.replace(*ROW_BUG)
    with_slices = _report(text, str(FA))
    assert '"ave/row-statistics"' in with_slices and '"violation"' in with_slices.lower()
    monkeypatch.setattr(KernelSolver, "_proved_sliced", lambda self, queries: set())
    assert _report(text, str(FA)) == with_slices


def _step(role: str, stmt: int, buffer: str = "") -> Step:
    return Step(role, -1, stmt, buffer, Instance(role, stmt))


def test_product_operands_split_a_chain_at_its_outermost_products_markers():
    """`mma_result` lays a product out as [A marker, A's chain, B marker, B's chain] after the
    steps that reach it; an operand's own products nest inside, as brackets."""
    reach = [_step("load", 9), _step("store", 8)]
    inner = [_step("mma-operand", 5, "A"), _step("source", 4), _step("mma-operand", 5, "B"), _step("source", 3)]
    a_side = [_step("mma-operand", 7, "A"), _step("load", 6), *inner]
    b_side = [_step("mma-operand", 7, "B"), _step("load", 2), _step("source", 1)]
    assert product_operands([*reach, *a_side, *b_side]) == (reach, a_side, b_side)
    assert product_operands(inner) == ([], inner[:2], inner[2:])
    assert product_operands(reach) is None


def test_product_components_follow_a_dropped_component():
    """A product's tag is A's components but the last, then B's last; a row statistic of it
    (`row_of`) drops one: dropping the last leaves no component from B."""
    ctx = z3.Context()
    h, q, d = (z3.Int(n, ctx) for n in "hqd")
    full = Alt([h, q, d], "t", [], [], [])
    assert [[str(t) for t in side] for side in product_components(full)] == [["h", "q"], ["d"]]
    row = row_of(full, -1)
    assert [[str(t) for t in side] for side in product_components(row)] == [["h", "q"], []]
    first = row_of(full, 0)
    assert [[str(t) for t in side] for side in product_components(first)] == [["q"], ["d"]]


def test_a_row_broadcast_slice_leaves_out_the_b_operands_chain(monkeypatch):
    """Production attention's `o * corr` broadcasts compare rows, which the P V product's A
    operand gives: the slices keep nothing only the V operand's chain binds (solver/slicing.py)."""
    queries = [q for q in _queries_of(FA, monkeypatch) if q.lhs.tag and product_operands(q.lhs.chain)
               and len(q.lhs.tag) == 3 and q.rhs.stat]
    assert queries, "no broadcast of a product meets a statistic here: the test checks nothing"
    checked = 0
    for q in queries[:40]:
        slicer = Slicer(q.violated.ctx)
        only_b = slicer.ignored(q.lhs, slicer.variables(q.violated)) - slicer.variables_of(q.lhs.tag)
        s = query_slice(slicer, q)
        if s is None or not only_b:
            continue
        checked += 1
        assert not any(slicer.variables(f) & only_b for f in s.formulas)
    assert checked, "no slice left an operand out: the test checks nothing"
