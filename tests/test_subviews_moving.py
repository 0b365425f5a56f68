"""Subviews at offsets that vary with a loop variable (double-buffered pages of one allocation):
races and provenance are decided on storage addresses per iteration, in the verifier, the
simulator and the code generator; what cannot be shown to stay inside the storage is refused."""
from __future__ import annotations

import pytest
from conftest import EXAMPLES, front_end_error

import ave_decl
from ave_decl.hw.expr import ExprTable
from ave_decl.facts.offset_range import interval
from ave_decl.lang import ast as A
from ave_decl.lang import printer
from ave_decl.lang.depth import walk
from ave_decl.lang.loop_deps import loop_dependence, moves_with
from ave_decl.lang.parser import parse_text
from ave_decl.lang.resolve import resolve_imports
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.interpreter import Simulator
from ave_decl.sim.run import simulate_source

PAGES = EXAMPLES / "subviews" / "rotating_pages.ave"
DECL = "P = subview(smem, (it // 128) % 2 * 128, (128,))"
READ = "        C[it + 127 - t] = P[127 - t]\n"


def _variant(old: str, new: str) -> str:
    text = PAGES.read_text()
    assert old in text, old
    return text.replace(old, new)


def test_rotating_pages_verify_simulate_and_run(ave):
    m = parse_text(PAGES.read_text())
    assert parse_text(printer.module(m)) == m
    (k,) = ave_decl.check(PAGES).kernels
    assert k.verdict == Verdict.VERIFIED, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED]
    assert any(f.invariant == "ave/shared-race" for f in k.findings)
    ((_, r),) = simulate_source(SourceFile(str(PAGES), PAGES.read_text()), {"N": 384})
    assert r.reference["ok"] and r.shadow_ok and not r.races
    run = ave("run", PAGES, "--sizes", "N=384")
    assert run.code == 0 and "0 of 384 elements differ" in run.out, run.out + run.err


@pytest.mark.parametrize("old, new, invariants, race", [
    # one page for every iteration: the next iteration's store overtakes a slower wave's read
    (DECL, "P = subview(smem, 0, (128,))", {"ave/shared-race"}, "WAR"),
    # no barrier between the store and the reversed read
    ("        syncthreads()\n", "", {"ave/shared-race"}, "RAW"),
    # reading the other page: the previous iteration's tile (and a race with its next store)
    (READ, "        R = subview(smem, (it // 128 + 1) % 2 * 128, (128,))\n        C[it + 127 - t] = R[127 - t]\n",
     {"ave/shared-race", "ave/epilogue-placement"}, "WAR"),
], ids=["one_page", "no_barrier", "other_page"])
def test_page_bugs_are_replayed_violations(old, new, invariants, race):
    text = _variant(old, new)
    (k,) = ave_decl.check(text, path="pages.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert {f.invariant for f in bad} == invariants, [f.message for f in bad]
    assert all(f.replay["confirmed"] for f in bad), [f.replay for f in bad]
    assert any(race in f.replay["detail"] for f in bad if f.invariant == "ave/shared-race")


@pytest.mark.parametrize("old, new, words", [
    (READ, READ + "    C[0] = P[0]\n", "subview 'P' depends on the loop variable 'it'"),
    ("% 2 * 128, (128,)", "% 3 * 128, (128,)", "its offset lies in [0, 256], it needs [0, 128]"),
    ("(it // 128) % 2 * 128, (128,)", "it, (128,)", "its offset lies in [0, inf]"),
    ("(it // 128) % 2 * 128, (128,)", "t % 2 * 128, (128,)", "depends on thread_id(0)"),
    # a moving subview's tag is a claim about what each iteration stores: bound before the first store
    ("        syncthreads()\n", '        tag(P, lambda i: (it + i,), "A", it)\n        syncthreads()\n',
     "tag the moving subview 'P' before its first store"),
    # ... and it names only the loop variables the view moves with (it is declared anew in their iterations)
    ("    smem = shared(f32, (256,))\n", '    smem = shared(f32, (256,))\n    Q = subview(smem, 0, (128,))\n'
     '    for j in range(2):\n        tag(Q, lambda i: (i + j,), "Q", j)\n',
     "components cannot depend on a loop variable"),
])
def test_unprovable_or_escaping_moving_subviews_are_located_errors(old, new, words, tmp_path, ave):
    path = tmp_path / "k.ave"
    out = front_end_error(ave, path, _variant(old, new))
    assert words in out.splitlines()[0], out
    if "tag(" in new:  # never a verdict: `ave simulate` and `ave run` refuse it with the same line
        for command in ("simulate", "run"):
            r = ave(command, path, "--sizes", "N=256")
            assert r.code == 3 and (r.out + r.err).splitlines()[0] == out.splitlines()[0], r.out + r.err


# a tag on the moving page: element i of the page of iteration `it` holds A[it + i]
TAGGED = ("        P[t] = A[it + t]\n", '        tag(P, lambda i: (it + i,), "A", it)\n        P[t] = A[it + t]\n')


def test_a_tagged_moving_subview_verifies_and_simulates(ave, tmp_path):
    """A tag on a subview whose offset moves with `it` may name `it`: its stores are checked against
    it in each iteration (ave/shared-round-trip); check, simulate and run agree."""
    text = _variant(*TAGGED)
    (k,) = ave_decl.check(text, path="pages.ave").kernels
    assert k.verdict == Verdict.VERIFIED, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED]
    assert any(f.invariant == "ave/shared-round-trip" for f in k.findings)
    ((_, r),) = simulate_source(SourceFile("pages.ave", text), {"N": 384})
    assert r.reference["ok"] and r.shadow_ok and not r.races
    path = tmp_path / "pages.ave"
    path.write_text(text)
    run = ave("run", path, "--sizes", "N=384")
    assert run.code == 0 and "0 of 384 elements differ" in run.out, run.out + run.err


@pytest.mark.parametrize("old, new, invariant, line", [
    # a store the tag does not name: thread t stages the neighbour's element
    ("P[t] = A[it + t]", "P[t] = A[it + (t + 1) % 128]", "ave/shared-round-trip", 17),
    # only the first two iterations fill their page: the third reads page 0 as iteration 0 left it.
    # Its loads are no roots (a tag naming `it` would claim the stale element is A[256 + i]): they
    # follow their stores, so the stale value reaches C and is caught there
    ("        P[t] = A[it + t]\n", "        if it < 256:\n            P[t] = A[it + t]\n", "ave/epilogue-placement", 20),
])
def test_a_tagged_moving_subview_catches_wrong_and_stale_pages(old, new, invariant, line):
    text = _variant(*TAGGED).replace(old, new)
    (k,) = ave_decl.check(text, path="pages.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    first = min(bad, key=lambda f: f.location.line)
    assert (first.invariant, first.location.line) == (invariant, line), [f.message for f in bad]
    assert all(f.replay["confirmed"] for f in bad), [f.replay for f in bad]


def test_offset_ranges_by_interval_arithmetic():
    t = ExprTable()
    j = t.sym("loop:7")
    loops = {"loop:7": (t.const(0), t.sym("size:N"))}
    page = t.op("mul", t.op("mod", t.op("floordiv", j, t.const(32)), t.const(2)), t.const(4096))
    assert interval(t, page, loops) == (0, 4096)
    assert interval(t, t.op("add", page, t.const(8)), loops) == (8, 4104)
    assert interval(t, t.op("mul", j, t.const(2)), loops) == (0, None)  # grows with N: unbounded
    assert interval(t, t.op("mod", t.op("sub", j, t.const(1)), t.const(2)), loops) == (None, None)  # j - 1 < 0
    assert interval(t, t.sym("tid:0"), loops) == (None, None)


# a fixed view declared in a loop: its offset is a name bound once outside the loop
FIXED = '''# Expected: VERIFIED
@kernel(grid=(1,), block=128, wave=64, reference="C = A")
def fixed_page(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N == 128)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    smem = shared(f32, (256,))
    OFF = 128
    for r in range(2):
        P = subview(smem, OFF, (128,))
        tag(P, lambda i: (i,), "A")
        if r == 0:
            P[t] = A[t]
        syncthreads()
        x = P[127 - t]
    C[127 - t] = x
'''


def test_a_fixed_subview_in_a_loop_is_not_moving():
    """A view whose offset is a name bound outside the loop is fixed for the simulator as for the
    verifier (no `alias_moving`): its tagged loads are roots, and check and simulate agree."""
    (k,) = ave_decl.check(FIXED, path="fixed.ave").kernels
    assert k.verdict == Verdict.VERIFIED, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED]
    module = parse_text(FIXED)
    sim = Simulator(module.kernels[0], resolve_imports(module), {"N": 128})
    r = sim.run()
    assert r.reference is None and r.shadow_ok and not r.races
    assert not sim.env["P"].moving
    ((_, r),) = simulate_source(SourceFile("fixed.ave", FIXED), {"N": 128})
    assert r.reference["ok"] and r.shadow_ok


def test_loop_dependence_follows_local_assignments():
    (k,) = parse_text(PAGES.read_text().replace(DECL, "q = it // 128\n        p = q % 2\n"
                                                      "        P = subview(smem, p * 128, (128,))")).kernels
    deps = loop_dependence(k)
    assert deps["q"] == deps["p"] == deps["it"] == {"it"} and "t" not in deps
    offset = next(n for n in walk(k.body[-1]) if isinstance(n, A.Call) and n.func_name == "subview").args[1]
    assert moves_with(offset, deps, {"it": 0}) and not moves_with(offset, deps, {})
