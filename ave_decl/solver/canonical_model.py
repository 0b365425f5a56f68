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
from typing import NamedTuple

import z3

from .raw_terms import _num_args, _wrap, connective, uninterpreted_applications

Smallest = Callable[..., z3.ModelRef | None]  # solve.KernelSolver._smallest
# how Z3 prints a conversion to bit-vectors: a swizzle's xor (smt.py's bitwise terms)
BIT_VECTORS = "(_ int_to_bv "


def free_constants(formulas: list[z3.ExprRef]) -> list[z3.ExprRef]:
    """The uninterpreted constants of the formulas, in depth-first first-occurrence order."""
    if not formulas:
        return []
    ctx = formulas[0].ctx
    c = ctx.ref()
    return [_wrap(a, ctx) for a in uninterpreted_applications(formulas) if _num_args(c, a) == 0]


class CanonicalForm(NamedTuple):
    """A query's canonical text (`canonical_text`) and the constants it renames, made once per
    violated query: its counterexample and its violation set both read it (printing production
    attention's PV-layout queries took 15 ms each, and walking them for their constants 7 ms).
    No term made for it is kept (the renamed constants are made again where they are needed):
    Z3's later solving depends on which term ids are free, and a form that kept them made a
    swizzled GEMM mutant's K-coverage proof take 1.4 s instead of 0.7 s."""
    constants: list[z3.ExprRef]  # free_constants of the assertions
    text: str


def canonical_form(assertions: list[z3.BoolRef], home: z3.Context) -> CanonicalForm:
    constants = free_constants(assertions)
    return CanonicalForm(constants, canonical_text(assertions, constants, home))


def renamed_constants(constants: list[z3.ExprRef], ctx: z3.Context | None = None) -> list[z3.ExprRef]:
    """The i-th constant as `ave!v<i>` (of `ctx`, else of the constants' context); no index
    tensor is named so."""
    return [z3.Const(f"ave!v{i}", c.sort() if ctx is None else c.sort().translate(ctx))
            for i, c in enumerate(constants)]


def canonical_text(assertions: list[z3.BoolRef], constants: list[z3.ExprRef], home: z3.Context) -> str:
    """The assertions (of context `home`; `constants`: their free_constants) as SMT-LIB text with
    the i-th constant named `ave!v<i>`: text that depends on the assertions alone, not on the
    names or history of the process that made them."""
    query = connective("and", assertions, home)  # one term: one substitution
    printer = z3.Solver(ctx=home)
    printer.add(z3.substitute(query, *zip(constants, renamed_constants(constants))) if constants else query)
    return printer.sexpr()


def renamed_text(term: z3.ExprRef, constants: list[z3.ExprRef], renamed: list[z3.ExprRef]) -> str:
    """`term` (over the constants) as SMT-LIB over `canonical_text`'s names."""
    return (z3.substitute(term, *zip(constants, renamed)) if constants else term).sexpr()


def canonical_model(assertions: list[z3.BoolRef], form: CanonicalForm, sizes: list[z3.ArithRef],
                    timeout_ms: int, smallest: Smallest, home: z3.Context) -> z3.ModelRef | None:
    """The model of the assertions (of context `home`; `form`: their canonical_form) found
    from their canonical text (None when the copy cannot be read back or is not settled within
    the timeout: the caller keeps its own)."""
    constants, text = form
    ctx = z3.Context()  # fresh per query: Z3 recycles the ids of freed terms, so a context
    # shared by a kernel's violations made each model depend on when Python freed the last one's
    fresh = z3.Solver(ctx=ctx)
    fresh.set("timeout", timeout_ms)
    try:
        fresh.from_string(text)
    except z3.Z3Exception:  # a term Z3 prints but cannot read back
        return None
    query = connective("and", assertions, home)
    position = {c.get_id(): i for i, c in enumerate(constants)}
    found = smallest(fresh, [z3.Const(f"ave!v{position[s.get_id()]}", s.sort().translate(ctx))
                             for s in sizes if s.get_id() in position], False,
                     reread=text if BIT_VECTORS in text else None)
    if found is None:
        return None
    model = z3.Model(home)
    for c, v in zip(constants, renamed_constants(constants, ctx)):
        value = found.eval(v, model_completion=True)
        model.update_value(c.decl(), value.translate(home))
    back = found.translate(home)
    for d in back.decls():
        if d.arity() > 0:  # an index tensor's table
            set_table(model, d, back[d])
    if not z3.is_true(model.eval(query, model_completion=True)):
        return None  # the mapped-back model must be one of the query itself
    return model


def model_values(model: z3.ModelRef, constants: list[z3.ExprRef]) -> tuple[int | bool, ...] | None:
    """The model's values of the constants, as Python values (None for a sort other than Int
    and Bool: only those are remembered, proof_memo.ProofMemo.violation)."""
    out: list[int | bool] = []
    for c in constants:
        v = model.eval(c, model_completion=True)
        if z3.is_int_value(v):
            out.append(v.as_long())
        elif z3.is_true(v) or z3.is_false(v):
            out.append(z3.is_true(v))
        else:
            return None
    return tuple(out)


def model_of_values(assertions: list[z3.BoolRef], constants: list[z3.ExprRef],
                    values: tuple[int | bool, ...], ctx: z3.Context) -> z3.ModelRef | None:
    """A model giving the constants these values, if it satisfies every assertion (None
    otherwise: a remembered model is used only when it is checked to be one of this query)."""
    if len(values) != len(constants):
        return None
    model = z3.Model(ctx)
    for c, v in zip(constants, values):
        if isinstance(v, bool) != z3.is_bool(c):
            return None
        model.update_value(c.decl(), z3.BoolVal(v, ctx) if isinstance(v, bool) else z3.IntVal(v, ctx))
    return model if z3.is_true(model.eval(connective("and", assertions, ctx), model_completion=True)) else None


def set_table(model: z3.ModelRef, decl: z3.FuncDeclRef, table: z3.FuncInterp) -> None:
    """Give `decl` the interpretation `table` (both of `model`'s context) in `model`. Why not
    z3py's `ModelRef.update_value`: it collects each entry's arguments in an AstVector of Z3's
    *default* context, which mixes contexts and crashed the process (signal 11) on index-tensor
    counterexamples in long runs."""
    ctx = decl.ctx
    made = z3.FuncInterp(z3.Z3_add_func_interp(ctx.ref(), model.model, decl.ast, table.else_value().as_ast()), ctx)
    for i in range(table.num_entries()):
        entry = table.entry(i)
        args = z3.AstVector(ctx=ctx)
        for j in range(entry.num_args()):
            args.push(entry.arg_value(j))
        z3.Z3_func_interp_add_entry(ctx.ref(), made.f, args.vector, entry.value().as_ast())
