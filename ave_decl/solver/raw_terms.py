"""Z3 terms through its C API, for the solver's hot paths.

Why: z3py re-checks an error code after every C call and coerces every operator's operands in
Python; on Ave's terms (Int index algebra, built by code the tests cover) that was a third of
the div/mod rewrite's time and a tenth of a check's. The getters here cannot fail on a live term;
the term builders make exactly the C call z3py's operator makes (so the same hash-consed term),
only for Int operands.
"""
from __future__ import annotations

import z3


def _unchecked(api):
    """The ctypes function behind a z3core wrapper, without the error-code check the wrapper does
    after every call: these getters cannot fail on a live term."""
    try:
        return api.__defaults__[-1].f
    except (AttributeError, IndexError, TypeError):  # another z3 packaging: keep the checked call
        return api


_ast_id = _unchecked(z3.Z3_get_ast_id)
_ast_kind = _unchecked(z3.Z3_get_ast_kind)
_num_args = _unchecked(z3.Z3_get_app_num_args)
_arg = _unchecked(z3.Z3_get_app_arg)
_app_decl = _unchecked(z3.Z3_get_app_decl)
_decl_kind = _unchecked(z3.Z3_get_decl_kind)
_sort_kind = _unchecked(z3.Z3_get_sort_kind)
_get_sort = _unchecked(z3.Z3_get_sort)


def _wrap(a: z3.Ast, ctx: z3.Context) -> z3.ExprRef:
    """The Python reference of a raw term (it takes a Z3 reference count), typed by its sort."""
    return z3.z3._to_expr_ref(a, ctx)


def is_int_term(x: z3.ExprRef) -> bool:
    """x has sort Int (z3py's `is_int` wraps the sort in a Python object first)."""
    c = x.ctx.ref()
    return _sort_kind(c, _get_sort(c, x.as_ast())) == z3.Z3_INT_SORT


_NARY = {"add": z3.Z3_mk_add, "sub": z3.Z3_mk_sub, "mul": z3.Z3_mk_mul}
_BINARY = {"floordiv": z3.Z3_mk_div, "mod": z3.Z3_mk_mod, "eq": z3.Z3_mk_eq, "lt": z3.Z3_mk_lt,
           "le": z3.Z3_mk_le, "gt": z3.Z3_mk_gt, "ge": z3.Z3_mk_ge}
INT_BINARY = {*_NARY, *_BINARY, "ne"}


def int_binary(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.ExprRef:
    """`a op b` for two Int terms, as z3py's operator makes it (`ne` is `distinct`)."""
    ctx = a.ctx
    if op in _NARY or op == "ne":
        pair = (z3.Ast * 2)(a.as_ast(), b.as_ast())
        if op == "ne":
            return z3.BoolRef(z3.Z3_mk_distinct(ctx.ref(), 2, pair), ctx)
        return z3.ArithRef(_NARY[op](ctx.ref(), 2, pair), ctx)
    made = _BINARY[op](ctx.ref(), a.as_ast(), b.as_ast())
    return z3.ArithRef(made, ctx) if op in ("floordiv", "mod") else z3.BoolRef(made, ctx)


def int_sum(parts: list[z3.ArithRef]) -> z3.ArithRef:
    """z3.Sum of Int terms (one n-ary addition), without its Python coercion."""
    if len(parts) == 1:
        return parts[0]
    ctx = parts[0].ctx
    return z3.ArithRef(z3.Z3_mk_add(ctx.ref(), len(parts), (z3.Ast * len(parts))(*(p.as_ast() for p in parts))), ctx)


def connective(kind: str, formulas: list[z3.BoolRef], ctx: z3.Context) -> z3.BoolRef:
    """`and` / `or` of the formulas, made through the C API: z3py's And and Or check and coerce
    every argument in Python, which cost more than solving a group of queries (solve.py)."""
    if len(formulas) == 1:
        return formulas[0]
    if not formulas:
        return z3.BoolVal(kind == "and", ctx)
    args = (z3.Ast * len(formulas))(*(f.as_ast() for f in formulas))
    make = z3.Z3_mk_and if kind == "and" else z3.Z3_mk_or
    return z3.BoolRef(make(ctx.ref(), len(formulas), args), ctx)


def conjunction(formulas: list[z3.BoolRef], ctx: z3.Context) -> z3.BoolRef:
    """`z3.And(*formulas)` for one or more formulas, the same term: an `and` application even of
    a single formula (unlike `connective`), without z3py's per-argument checks and coercions."""
    args = (z3.Ast * len(formulas))(*(f.as_ast() for f in formulas))
    return z3.BoolRef(z3.Z3_mk_and(ctx.ref(), len(formulas), args), ctx)


def negation(formula: z3.BoolRef) -> z3.BoolRef:
    """`z3.Not(formula)` of a Bool term, the same term, without z3py's cast and probe checks."""
    ctx = formula.ctx
    return z3.BoolRef(z3.Z3_mk_not(ctx.ref(), formula.as_ast()), ctx)


_REFLECTED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def compare(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    """The term z3py's `a op b` makes for two Int terms (eq ne lt le gt ge). Python calls the right
    operand's reflected method first when its class is a proper subclass of the left's: `x >= n`
    with n a numeral (IntNumRef) is z3py's `n <= x`, another term than `x >= n` (`x >= 0` with a
    Python int stays `x >= 0`: use `int_binary` with `numeral` there)."""
    if type(b) is not type(a) and isinstance(b, type(a)):
        return int_binary(_REFLECTED[op], b, a)
    return int_binary(op, a, b)


def numeral(value: int, ctx: z3.Context) -> z3.IntNumRef:
    """z3py's `IntVal(value)`, the numeral a Python int operand is coerced to: a fresh reference
    each time, so the numeral lives exactly as long as under z3py's operator (one kept alive in a
    cache would make Z3 hand later terms other ids than before)."""
    if not -(1 << 63) <= value < 1 << 63:
        return z3.IntVal(value, ctx)
    return z3.IntNumRef(z3.Z3_mk_int64(ctx.ref(), value, z3.Z3_mk_int_sort(ctx.ref())), ctx)
