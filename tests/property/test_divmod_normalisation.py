"""The range-aware div/mod normalisation (ave_decl/divmod.py) is an equivalence: for every value
of the ranged variables inside their ranges (and any value of the unranged one) the normalised
term equals the original. Checked by Z3 itself (UNSAT of `original != normalised`), so a wrong
rewrite rule cannot hide behind a lucky sample."""
from __future__ import annotations

import z3
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ave_decl.solver.divmod import DivModSimplifier

RANGES = {"lane": (0, 63), "slot": (0, 3), "e": (0, 7), "t": (0, 255)}
DIVISORS = [1, 2, 3, 4, 6, 8, 16, 32, 64, 128]


@st.composite
def terms(draw):
    """A random quasi-affine term as steps over the variables and earlier results."""
    return draw(st.lists(st.tuples(st.sampled_from(["add", "sub", "mul", "div", "mod", "affine"]),
                                   st.integers(0, 40), st.integers(0, 40), st.sampled_from(DIVISORS),
                                   st.integers(-3, 70)), min_size=1, max_size=10))


def build(steps, ctx):
    xs = [z3.Int(name, ctx) for name in (*RANGES, "kt")]  # kt has no range: rules must not need one
    vals = list(xs)
    for op, i, j, c, k in steps:
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        vals.append({"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * k, "div": lambda: a / c,
                     "mod": lambda: a % c, "affine": lambda: (a * c + b) / (2 * c)}[op]())
    return xs, vals[-1]


@settings(max_examples=examples(150), deadline=None)
@given(terms())
def test_normalised_term_is_equal_within_the_ranges(steps):
    ctx = z3.Context()
    xs, term = build(steps, ctx)
    ranges = {x.get_id(): RANGES[str(x)] for x in xs if str(x) in RANGES}
    simplifier = DivModSimplifier(ranges, ctx)
    normalised = simplifier.formula(term)
    s = z3.Solver(ctx=ctx)
    s.set("timeout", 20000)
    s.add(*[z3.And(x >= RANGES[str(x)][0], x <= RANGES[str(x)][1]) for x in xs if str(x) in RANGES])
    s.add(term != normalised)
    assert s.check() == z3.unsat, (term, normalised, s.model() if s.check() == z3.sat else None)
    # the ranges it reports relying on are ranges of known variables, nothing invented
    assert all(str(v) in RANGES for v in simplifier.used.values())


def test_normalisation_removes_the_lane_substitution():
    """(tid // 64 * 64 + lane) // 64 == tid // 64 and ... % 64 == lane, without a solver."""
    ctx = z3.Context()
    tid, lane = z3.Int("tid", ctx), z3.Int("lane", ctx)
    simplifier = DivModSimplifier({lane.get_id(): (0, 63), tid.get_id(): (0, 255)}, ctx)
    linear = tid / 64 * 64 + lane
    assert simplifier.formula(linear % 64).eq(lane)
    assert simplifier.formula(linear / 64).eq(tid / 64)
    # a vector copy index: (e // 2 * 128 + t) * 2 + e % 2, split by 16 columns
    e, t = z3.Int("e", ctx), z3.Int("t", ctx)
    simplifier = DivModSimplifier({e.get_id(): (0, 7), t.get_id(): (0, 127)}, ctx)
    i = (e / 2 * 128 + t) * 2 + e % 2
    assert "div" not in simplifier.formula(i % 16).sexpr() or "mod" in simplifier.formula(i % 16).sexpr()
    assert z3.simplify(simplifier.formula(i / 16) - (e / 2 * 16 + t / 8)).eq(z3.IntVal(0, ctx))
