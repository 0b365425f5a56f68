"""The kernel-wide div/mod normaliser gives, query for query, what a fresh simplifier per query
gives: the same rewritten formulas and the same range constraints in the same order, however
much of the query was memoised by earlier ones, with ranges set late (Encoder.set_range drops
memo entries that involve the variable) and terms freed between queries (Z3 reuses their ids)."""
from __future__ import annotations

import gc
import random
from pathlib import Path

import z3
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import ave_decl
from ave_decl.solver.divmod import DivModSimplifier
from ave_decl.solver.smt import Encoder

DIVISORS = [1, 2, 3, 4, 7, 8, 16, 32, 64, 128]


def _term(rng: random.Random, xs: list[z3.ArithRef], pool: list[z3.ArithRef], depth: int) -> z3.ArithRef:
    if depth == 0 or rng.random() < 0.2:
        if pool and rng.random() < 0.3:
            return rng.choice(pool)
        return rng.choice(xs) if rng.random() < 0.7 else z3.IntVal(rng.randint(-5, 300), xs[0].ctx)
    a, b = _term(rng, xs, pool, depth - 1), _term(rng, xs, pool, depth - 1)
    op = rng.choice(["add", "sub", "scale", "div", "mod", "div", "mod", "mul", "ite"])
    t = {"add": lambda: a + b, "sub": lambda: a - b, "scale": lambda: a * rng.choice([2, 4, 64, -1]),
         "div": lambda: a / rng.choice(DIVISORS), "mod": lambda: a % rng.choice(DIVISORS),
         "mul": lambda: a * b, "ite": lambda: z3.If(a > b, a, b % 64)}[op]()
    if rng.random() < 0.3:
        pool.append(t)
    return t


def _formula(rng: random.Random, xs, pool) -> z3.BoolRef:
    a, b = _term(rng, xs, pool, rng.randint(1, 5)), _term(rng, xs, pool, rng.randint(1, 4))
    return rng.choice([a == b, a != b, z3.Or(a < b, a % 32 == 3), z3.And(a <= b, b / 2 == 1)])


def _encoder(ctx: z3.Context) -> Encoder:
    """An Encoder with only what the normaliser uses (no kernel needed)."""
    enc = Encoder.__new__(Encoder)
    enc.ctx, enc.ranges, enc._ranged, enc._normaliser = ctx, {}, [], None
    return enc


@settings(max_examples=examples(10), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_shared_normaliser_matches_a_fresh_simplifier_per_query(seed):
    rng = random.Random(seed)
    ctx = z3.Context()
    enc = _encoder(ctx)
    xs = [z3.Int(f"v{i}", ctx) for i in range(6)]
    for x in xs[:3]:
        lo = rng.choice([0, 0, 1, -4, 64])
        enc.set_range(x, lo, lo + rng.choice([0, 1, 7, 63, 255]))
    pool: list[z3.ArithRef] = []
    for q in range(8):
        if q == 4:  # a range set after earlier queries memoised terms with this variable
            enc.set_range(xs[3], 0, rng.choice([1, 3, 63]))
        formulas = [_formula(rng, xs, pool) for _ in range(rng.randint(1, 4))]
        if pool:
            formulas.append(rng.choice(pool) >= 0)  # a shared subterm as a whole formula
        fresh = DivModSimplifier(dict(enc.ranges), ctx)
        expected = [fresh.formula(f) for f in formulas] + fresh.range_constraints()
        got = enc.normaliser().normalise(formulas)
        assert len(got) == len(expected) and all(a.eq(b) for a, b in zip(got, expected)), (seed, q)
        if rng.random() < 0.3:  # drop terms and collect them: Z3 may reuse their ids
            del pool[len(pool) // 2:], formulas, expected, got, fresh
            gc.collect()


def test_checking_leaves_the_host_programs_z3_setting_alone():
    source = (Path(__file__).resolve().parents[2] / "examples" / "gemm_naive.ave").read_text()
    for setting in (True, False):
        z3.z3.Z3_DEBUG = setting
        try:
            ave_decl.check(source, path="gemm_naive.ave", violation_sets=False)
            assert z3.z3.Z3_DEBUG is setting
        finally:
            z3.z3.Z3_DEBUG = True
