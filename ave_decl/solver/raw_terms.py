"""Z3 terms through its C API, for the solver's hot paths.

Why: z3py re-checks an error code after every C call and coerces every operator's operands in
Python; on Ave's terms (Int index algebra, built by code the tests cover) that was a third of
the div/mod rewrite's time and a tenth of a check's. The getters here cannot fail on a live term;
the term builders make exactly the C call z3py's operator makes (so the same hash-consed term),
only for Int operands.
"""
from __future__ import annotations

from collections.abc import Iterator

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


_inc_ref = _unchecked(z3.Z3_inc_ref)
_mk_int64 = _unchecked(z3.Z3_mk_int64)
_mk_int_sort = _unchecked(z3.Z3_mk_int_sort)
_mk_const = _unchecked(z3.Z3_mk_const)
_mk_symbol = _unchecked(z3.Z3_mk_string_symbol)  # takes bytes
_mk_and = _unchecked(z3.Z3_mk_and)
_mk_or = _unchecked(z3.Z3_mk_or)
_mk_not = _unchecked(z3.Z3_mk_not)
_mk_app = _unchecked(z3.Z3_mk_app)
_numeral_string = _unchecked(z3.Z3_get_numeral_string)  # bytes from the raw call, str from z3py's
_solver_assert = _unchecked(z3.Z3_solver_assert)


def made(cls: type, a: z3.Ast, ctx: z3.Context):
    """The z3py reference `cls(a, ctx)` makes (one Z3 reference count taken), without the
    checked calls of its constructor and of the builder that made `a`: the builders here are
    called millions of times per audit (flash attention's check: 6 % fewer instructions). A null
    `a`, Z3's answer when it refuses to build a term, raises as z3py's check would."""
    if not a:
        _refused(ctx)
    ref = cls.__new__(cls)
    ref.ast, ref.ctx = a, ctx
    _inc_ref(ctx.ref(), a)
    return ref


def _refused(ctx: z3.Context) -> None:
    """Raise Z3's error for the term it just refused to build (it returned null)."""
    raise z3.Z3Exception(z3.Z3_get_error_msg(ctx.ref(), z3.Z3_get_error_code(ctx.ref())))


def int_const(name: str, ctx: z3.Context) -> z3.ArithRef:
    """z3py's `Int(name)`, the same constant, without its sort object and checks per call."""
    c = ctx.ref()
    return made(z3.ArithRef, _mk_const(c, _mk_symbol(c, name.encode()), _mk_int_sort(c)), ctx)


def _wrap(a: z3.Ast, ctx: z3.Context) -> z3.ExprRef:
    """The Python reference of a raw term (it takes a Z3 reference count), typed by its sort."""
    return z3.z3._to_expr_ref(a, ctx)


def int_numeral_value(c, a: z3.Ast) -> int | None:
    """The value of an Int numeral (z3py's is_int_value / as_long), else None; `c` the context's
    reference."""
    if _ast_kind(c, a) != z3.Z3_NUMERAL_AST or _sort_kind(c, _get_sort(c, a)) != z3.Z3_INT_SORT:
        return None
    return int(_numeral_string(c, a))


_TYPED = {z3.Z3_INT_SORT: z3.ArithRef, z3.Z3_BOOL_SORT: z3.BoolRef}  # of an application (never a numeral)


def application_class(c, like: z3.Ast) -> type | None:
    """The reference class of an application with the sort of `like` (ArithRef for Int, BoolRef
    for Bool); None: another sort, for z3py's probes to decide. `c` the context's reference."""
    return _TYPED.get(_sort_kind(c, _get_sort(c, like)))


def reference_of(cls: type | None, a: z3.Ast, ctx: z3.Context) -> z3.ExprRef:
    """The reference of a raw application `a` (null: Z3 refused to build it, raised here) of
    class `cls` from `application_class`, or as z3py's `_to_expr_ref` types it when None."""
    if cls is not None:
        return made(cls, a, ctx)
    if not a:
        _refused(ctx)
    return _wrap(a, ctx)


def application(decl: z3.FuncDecl, args: list[z3.Ast], like: z3.Ast, ctx: z3.Context) -> z3.ExprRef:
    """`decl(*args)` (raw terms) as the reference z3py's `_to_expr_ref` gives, typed by the sort
    of `like` (a term of the same declaration): Int and Bool applications without its probes."""
    c = ctx.ref()
    n = len(args)
    a = _mk_app(c, decl, n, (z3.Ast * n)(*args))
    return reference_of(application_class(c, like), a, ctx)


def is_int_term(x: z3.ExprRef) -> bool:
    """x has sort Int (z3py's `is_int` wraps the sort in a Python object first)."""
    c = x.ctx.ref()
    return _sort_kind(c, _get_sort(c, x.as_ast())) == z3.Z3_INT_SORT


_NARY = ("add", "sub", "mul", "ne")  # made from an array of operands
_MAKERS = {op: _unchecked(f) for op, f in (("add", z3.Z3_mk_add), ("sub", z3.Z3_mk_sub), ("mul", z3.Z3_mk_mul),
                                          ("ne", z3.Z3_mk_distinct), ("floordiv", z3.Z3_mk_div), ("mod", z3.Z3_mk_mod),
                                          ("eq", z3.Z3_mk_eq), ("lt", z3.Z3_mk_lt), ("le", z3.Z3_mk_le),
                                          ("gt", z3.Z3_mk_gt), ("ge", z3.Z3_mk_ge))}
INT_BINARY = frozenset(_MAKERS)


def int_binary(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.ExprRef:
    """`a op b` for two Int terms, as z3py's operator makes it (`ne` is `distinct`)."""
    ctx = a.ctx
    if op in _NARY:
        pair = (z3.Ast * 2)(a.ast, b.ast)
        return made(z3.BoolRef if op == "ne" else z3.ArithRef, _MAKERS[op](ctx.ref(), 2, pair), ctx)
    return made(z3.ArithRef if op in ("floordiv", "mod") else z3.BoolRef, _MAKERS[op](ctx.ref(), a.ast, b.ast), ctx)


def int_sum(parts: list[z3.ArithRef]) -> z3.ArithRef:
    """z3.Sum of Int terms (one n-ary addition), without its Python coercion."""
    if len(parts) == 1:
        return parts[0]
    ctx = parts[0].ctx
    return made(z3.ArithRef, _MAKERS["add"](ctx.ref(), len(parts), (z3.Ast * len(parts))(*(p.ast for p in parts))), ctx)


def uninterpreted_applications(formulas: list[z3.ExprRef]) -> Iterator[z3.Ast]:
    """The applications of uninterpreted constants and functions in the formulas (raw terms),
    each once, in depth-first first-occurrence order. Walked through the unchecked C getters: a
    z3py wrapper per node cost more than the solve it serves (canonical_model's free constants)."""
    if not formulas:
        return
    c = formulas[0].ctx.ref()
    seen: set[int] = set()
    stack = [f.as_ast() for f in reversed(formulas)]
    while stack:
        a = stack.pop()
        key = _ast_id(c, a)
        if key in seen:
            continue
        seen.add(key)
        if _ast_kind(c, a) != z3.Z3_APP_AST:
            continue
        if _decl_kind(c, _app_decl(c, a)) == z3.Z3_OP_UNINTERPRETED:
            yield a
        stack.extend(_arg(c, a, i) for i in reversed(range(_num_args(c, a))))


def assert_all(solver: z3.Solver, formulas: list[z3.BoolRef]) -> None:
    """`solver.add(*formulas)`: the same assertions in the same order, a Bool term of the
    solver's context through the unchecked C call (z3py casts and probes each, and a check
    asserts ~200: 90k calls per production-attention check); anything else through z3py."""
    ctx = solver.ctx
    c, handle = ctx.ref(), solver.solver
    for f in formulas:
        if type(f) is z3.BoolRef and f.ctx is ctx:
            _solver_assert(c, handle, f.ast)
        else:
            solver.add(f)


def some_differ(xs: list[z3.ArithRef], ys: list[z3.ArithRef]) -> z3.BoolRef:
    """`z3.Or(*[x != y for x, y in zip(xs, ys)])`, the same term (an `or` application even of one
    pair), for Int terms of one context through the C API: z3py coerced and probed every operand
    (5,238 tag comparisons per production-attention check); anything else through z3py."""
    pairs = list(zip(xs, ys))
    if not pairs or not all(isinstance(x, z3.ArithRef) and isinstance(y, z3.ArithRef) and x.ctx is y.ctx
                            and is_int_term(x) and is_int_term(y) for x, y in pairs):
        return z3.Or(*[x != y for x, y in pairs])
    return _boolean(_mk_or, [compare("ne", x, y) for x, y in pairs], pairs[0][0].ctx)


def connective(kind: str, formulas: list[z3.BoolRef], ctx: z3.Context) -> z3.BoolRef:
    """`and` / `or` of the formulas, made through the C API: z3py's And and Or check and coerce
    every argument in Python, which cost more than solving a group of queries (solve.py)."""
    if len(formulas) == 1:
        return formulas[0]
    if not formulas:
        return z3.BoolVal(kind == "and", ctx)
    return _boolean(_mk_and if kind == "and" else _mk_or, formulas, ctx)


def conjunction(formulas: list[z3.BoolRef], ctx: z3.Context) -> z3.BoolRef:
    """`z3.And(*formulas)` for one or more formulas, the same term: an `and` application even of
    a single formula (unlike `connective`), without z3py's per-argument checks and coercions."""
    return _boolean(_mk_and, formulas, ctx)


def _boolean(maker, formulas: list[z3.BoolRef], ctx: z3.Context) -> z3.BoolRef:
    """The n-ary `and` / `or` application (`maker`) of the formulas, whatever their number."""
    args = (z3.Ast * len(formulas))(*(f.ast for f in formulas))
    return made(z3.BoolRef, maker(ctx.ref(), len(formulas), args), ctx)


def negation(formula: z3.BoolRef) -> z3.BoolRef:
    """`z3.Not(formula)` of a Bool term, the same term, without z3py's cast and probe checks."""
    ctx = formula.ctx
    return made(z3.BoolRef, _mk_not(ctx.ref(), formula.ast), ctx)


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
    c = ctx.ref()
    return made(z3.IntNumRef, _mk_int64(c, value, _mk_int_sort(c)), ctx)
