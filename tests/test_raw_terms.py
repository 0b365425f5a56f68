"""The C-API term builders (solver/raw_terms.py) make the very terms z3py's operators make.

Why: the proof memo keys queries by their terms, and Z3's search (so a counterexample) depends on
them; the kill instantiations (solver/chains.py) and instance constraints (solver/smt.py) are built
through these builders for speed, so a builder that made an equivalent but different term (`0 <= x`
for `x >= 0`) would change reports. Identity is checked by Z3's hash-consing: the same AST id.
"""
from __future__ import annotations

import operator

import pytest
import z3

from ave_decl.solver.raw_terms import assert_all, compare, conjunction, int_binary, negation, some_differ

OPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
       "ge": operator.ge}


def _same(a: z3.ExprRef, b: z3.ExprRef) -> bool:
    return a.get_id() == b.get_id() and type(a) is type(b)


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_comparison_is_the_term_z3py_makes_whatever_the_operand_classes(op):
    ctx = z3.Context()
    x, y, n = z3.Int("x", ctx), z3.Int("y", ctx), z3.IntVal(3, ctx)  # n: an IntNumRef, a subclass
    for a, b in [(x, y), (x, n), (n, x), (n, n), (x - y, n)]:
        assert _same(compare(op, a, b), OPS[op](a, b)), (op, a, b)


def test_a_python_int_operand_is_a_numeral_on_the_right():
    ctx = z3.Context()
    x = z3.Int("x", ctx)
    assert _same(int_binary("ge", x, z3.IntVal(0, ctx)), x >= 0)
    assert _same(int_binary("sub", x, z3.IntVal(4, ctx)), x - 4)
    assert _same(int_binary("eq", int_binary("mod", x, z3.IntVal(2, ctx)), z3.IntVal(0, ctx)), x % 2 == 0)


def test_conjunction_and_negation_are_z3pys_and_and_not_even_of_one_formula():
    ctx = z3.Context()
    x = z3.Int("x", ctx)
    one, two = [x >= 0], [x >= 0, x < 4]
    assert _same(conjunction(one, ctx), z3.And(*one))  # an `and` of one child, not the formula itself
    assert _same(conjunction(two, ctx), z3.And(*two))
    assert _same(negation(conjunction(two, ctx)), z3.Not(z3.And(*two)))


def test_a_term_z3_refused_to_build_raises_instead_of_wrapping_null():
    """raw_terms.made wraps a builder's result without z3py's error check: a null term (Z3's
    answer to a bad request) must still raise, never become a reference to nothing."""
    import z3

    from ave_decl.solver.raw_terms import made

    ctx = z3.Context()
    with pytest.raises(z3.Z3Exception):
        made(z3.ArithRef, z3.Ast(None), ctx)
    x = z3.Int("x", ctx)
    assert made(z3.ArithRef, x.ast, ctx).eq(x)


def test_some_differ_is_z3pys_disjunction_of_disequalities():
    ctx = z3.Context()
    x, y, n = z3.Int("x", ctx), z3.Int("y", ctx), z3.IntVal(3, ctx)
    for xs, ys in [([x], [y]), ([x, n], [n, y]), ([n, x - y, y], [x, n, x * 2])]:
        assert _same(some_differ(xs, ys), z3.Or(*[a != b for a, b in zip(xs, ys)])), (xs, ys)
    b = z3.Bool("b", ctx)  # not Int terms: z3py's own term
    assert _same(some_differ([b], [z3.BoolVal(True, ctx)]), z3.Or(b != z3.BoolVal(True, ctx)))


def test_assert_all_asserts_what_solver_add_asserts():
    ctx = z3.Context()
    x, y = z3.Int("x", ctx), z3.Int("y", ctx)
    formulas = [x > 0, z3.ForAll([y], y * 0 == 0), x + y == 3, z3.Or(x < 2, y > 5)]  # a quantifier: z3py's path
    ours, theirs = z3.Solver(ctx=ctx), z3.Solver(ctx=ctx)
    assert_all(ours, formulas)
    theirs.add(*formulas)
    assert [f.get_id() for f in ours.assertions()] == [f.get_id() for f in theirs.assertions()]
