"""A violated query's model as a function of the query alone.

Why: Z3's model of a satisfiable query depends on the history of its context and process (which
terms were made before and in which order) and on the names of its variables (which fresh-name
counter values earlier obligations consumed). So the same violated query gave another
counterexample when earlier queries were skipped (the proof memo, solver/proof_memo.py), or ran
in another order or another process (an audit chunk of other files). Here the query's free
constants are renamed `ave!v0, ave!v1, ...` in first-occurrence order, the renamed query is printed as
SMT-LIB text and read into a fresh context (a term-by-term `translate` still carried the
history; the text does not), solved there, and the model is mapped back onto the original
constants (and checked against every assertion). Index-tensor functions keep their names
(they name tables, not instances).
"""
from __future__ import annotations

from collections.abc import Callable

import z3

Smallest = Callable[[z3.Solver, list[z3.ArithRef]], z3.ModelRef]


def free_constants(formulas: list[z3.ExprRef]) -> list[z3.ExprRef]:
    """The uninterpreted constants of the formulas, in depth-first first-occurrence order."""
    seen: set[int] = set()
    out: list[z3.ExprRef] = []
    stack = list(reversed(formulas))
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(t)
        elif z3.is_app(t):
            stack.extend(t.arg(i) for i in reversed(range(t.num_args())))
    return out


def canonical_model(solver: z3.Solver, sizes: list[z3.ArithRef], timeout_ms: int,
                    smallest: Smallest) -> z3.ModelRef | None:
    """The model of `solver`'s assertions found from their canonical text (None when the copy
    cannot be read back or is not settled within the timeout: the caller keeps its own)."""
    home = solver.ctx
    assertions = list(solver.assertions())
    constants = free_constants(assertions)
    renamed = [z3.Const(f"ave!v{i}", c.sort()) for i, c in enumerate(constants)]  # no tensor is named so
    printer = z3.Solver(ctx=home)
    printer.add([z3.substitute(a, *zip(constants, renamed)) for a in assertions] if constants else assertions)
    ctx = z3.Context()
    fresh = z3.Solver(ctx=ctx)
    fresh.set("timeout", timeout_ms)
    try:
        fresh.add(z3.parse_smt2_string(printer.sexpr(), ctx=ctx))
    except z3.Z3Exception:  # a term Z3 prints but cannot read back
        return None
    if fresh.check() != z3.sat:
        return None
    position = {c.get_id(): i for i, c in enumerate(constants)}
    found = smallest(fresh, [z3.Const(f"ave!v{position[s.get_id()]}", s.sort().translate(ctx))
                             for s in sizes if s.get_id() in position])
    model = z3.Model(home)
    for c, v in zip(constants, renamed):
        value = found.eval(v.translate(ctx), model_completion=True)
        model.update_value(c.decl(), value.translate(home))
    back = found.translate(home)
    for d in back.decls():
        if d.arity() > 0:  # an index tensor's table
            model.update_value(d, back[d])
    if not all(z3.is_true(model.eval(a, model_completion=True)) for a in assertions):
        return None  # the mapped-back model must be one of the query itself
    return model
