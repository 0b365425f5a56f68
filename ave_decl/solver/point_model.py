"""A violated query's model made from a concrete point, without solving the query.

Why: a bank conflict the enumeration found (access_queries.py) names its lanes, loop values and
register slot; what is left to choose is the block, the sizes and the loops the address does not
read. Its canonical model (canonical_model.py) cost a fresh Z3 context, a print and a parse per
conflict: 94 conflicts over the examples, 0.74 s, production attention's 25 a fifth of a second,
and after a fork (two jobs) the first fresh context of each process copies its 16 MB of hash
tables page by page (~10 ms). Here the rest of the point comes from the canonical model of the
point's frame (the kernel's assumptions and the instance's ranges), which many conflicts of a
kernel share (one per loop nest, not one per access), and the assembled model is kept only when
it satisfies every formula of the query: a point its guards or remainders exclude goes the
solver's way, as before. The model depends on the query and the frame alone, so the report does
not depend on which process found it, or on what it found before.
"""
from __future__ import annotations

import z3

from .canonical_model import Smallest, canonical_form, canonical_model, model_values
from .query import Point
from .raw_terms import _num_args, _wrap, connective, uninterpreted_applications

Values = dict[int, int | bool]  # AST id of a constant -> its value


def frame_values(frame: tuple[z3.BoolRef, ...], sizes: list[z3.ArithRef], timeout_ms: int, smallest: Smallest,
                 ctx: z3.Context) -> Values | None:
    """The values the frame's canonical model gives its constants (sizes at most 64 where it
    can, as for a counterexample); None when it has none (the frame is infeasible, or not
    settled within the timeout) or a constant of another sort than Int and Bool."""
    formulas = list(frame)
    form = canonical_form(formulas, ctx)
    model = canonical_model(formulas, form, sizes, timeout_ms, smallest, ctx)
    values = None if model is None else model_values(model, form.constants)
    return None if values is None else {c.get_id(): v for c, v in zip(form.constants, values)}


def point_model(formulas: list[z3.BoolRef], point: Point, frame: Values,
                starts: tuple[tuple[z3.ExprRef, z3.ArithRef], ...],
                decompositions: list[tuple[z3.ArithRef, list[z3.BoolRef]]], ctx: z3.Context) -> z3.ModelRef | None:
    """The model giving the point's pinned variables their values, the others the frame's
    values, each loop variable of `starts` its start (outermost first: a bound may read an outer
    loop's value) and each bit of a decomposition (smt.Encoder.decompositions, a swizzle's xor)
    its term's bit (a constant none of them names gets the evaluator's default), if it
    satisfies every formula; None otherwise, or when a formula applies an uninterpreted
    function (an index tensor's table is not chosen here)."""
    c = ctx.ref()
    constants = []
    for a in uninterpreted_applications(formulas):
        if _num_args(c, a) > 0:
            return None
        constants.append(_wrap(a, ctx))
    pinned = {term.get_id(): value for term, value in point.pinned}
    model = z3.Model(ctx)
    for constant in constants:
        key = constant.get_id()
        value = pinned[key] if key in pinned else frame.get(key)
        if value is None:
            continue
        if isinstance(value, bool) != z3.is_bool(constant):
            return None
        model.update_value(constant.decl(), z3.BoolVal(value, ctx) if isinstance(value, bool) else z3.IntVal(value, ctx))
    for variable, start in starts:  # loops the point leaves free (Point.starts)
        value = model.eval(start, model_completion=True)
        if not z3.is_int_value(value):
            return None
        model.update_value(variable.decl(), value)
    for term, bits in decompositions:
        value = model.eval(term, model_completion=True)
        if not z3.is_int_value(value):
            return None
        for i, bit in enumerate(bits):
            model.update_value(bit.decl(), z3.BoolVal(bool((value.as_long() >> i) & 1), ctx))
    if not z3.is_true(model.eval(connective("and", formulas, ctx), model_completion=True)):
        return None
    return model

