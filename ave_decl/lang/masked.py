"""Predicated memory access: `load(ref, mask=c, other=x)` and `store(ref, value, mask=c)`.

Both are rewritten, right after parsing, into the `if` statements they mean, so the verifier,
the simulator and the backends see one construct (a guarded access) and agree on it:

    B[i] = f(load(A[i, j], mask=c, other=0.0))   ->   if c: B[i] = f(A[i, j])
                                                      else: B[i] = f(0.0)
    y = f(load(A[i, j], mask=c, other=0.0))      ->   y = f(0.0)
                                                      if c: y = f(A[i, j])
    store(C[i, j], v, mask=c)                     ->   if c: C[i, j] = v

(a name gets its default first, so it is one variable on both paths; a branch-local name per
branch would be two).

The load happens only where the mask holds, so bounds are checked under the mask (the `if`
guards its instances), and the default value (`other`, 0.0 unless given) is what the masked-off
lanes see, as with `tl.load(ptr, mask, other)` or an AMD buffer load whose out-of-range lanes
read 0. A default of 0 is a *zero* value for the tag analysis (docs/language.md, Zero tags).
Expressions are pure, so evaluating the rest of the right-hand side in both branches is exact.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from . import ast as A
from .depth import rewrite, walk
from .errors import FrontEndError

NAMES = ("load", "store")


def _err(msg: str, node) -> FrontEndError:
    return FrontEndError(msg, node.span)


def _masked_parts(call: A.Call) -> tuple[A.Subscript, A.Expr | None, A.Expr]:
    """(reference, mask, other) of a `load(...)` call, checked."""
    allowed = {"mask", "other"}
    for kw in call.kwargs:
        if kw.name not in allowed:
            raise _err(f"load() has no keyword '{kw.name}' (it takes mask= and other=)", kw)
    if len(call.args) != 1:
        raise _err("load() takes one indexed reference, e.g. load(A[i, j], mask=i < M, other=0.0)", call)
    ref = call.args[0]
    if not isinstance(ref, A.Subscript):
        raise _err("the argument of load() must be an indexed reference such as A[i, j]", ref)
    other = call.kwarg("other")
    return ref, call.kwarg("mask"), other if other is not None else A.Float(0.0, call.span)


def _calls(node, names: tuple[str, ...]) -> Iterator[A.Call]:
    """The calls of `names` in a statement or expression, in source order (not inside lambdas)."""
    return (n for n in walk(node, into_lambdas=False) if isinstance(n, A.Call) and n.func_name in names)


def _find_loads(e, out: list[A.Call]) -> None:
    out.extend(_calls(e, ("load",)))


def substitute(e, target: A.Call, by: A.Expr):
    """`e` with the call node `target` (by identity) replaced by `by` (unchanged subtrees are
    kept, so other nodes keep their identity)."""
    return rewrite(e, lambda n: by if n is target else None)


def _one_load(value: A.Expr, where: str) -> A.Call | None:
    loads: list[A.Call] = []
    _find_loads(value, loads)
    if len(loads) > 1:
        raise _err(f"at most one load(...) per {where}: assign the others to names first", loads[1])
    return loads[0] if loads else None


def _names(e) -> set[str]:
    return {n.id for n in walk(e) if isinstance(n, A.Name)}


def _assignment(s: A.Assign | A.AugAssign) -> tuple[A.Stmt, ...]:
    if isinstance(s.target, A.Subscript):
        for x in s.target.indices:
            if (bad := _one_load(x, "index")) is not None:
                raise _err("load() cannot be used inside an index", bad)
    call = _one_load(s.value, "statement")
    if call is None:
        return (s,)
    ref, mask, other = _masked_parts(call)
    then = replace(s, value=substitute(s.value, call, ref))
    if mask is None:  # an unmasked load(...) is a plain load
        return (then,)
    orelse = replace(s, value=substitute(s.value, call, other))
    if isinstance(s, A.Assign) and isinstance(s.target, A.Name) and s.target.id not in _names(s.value):
        # a name possibly first assigned here: the default first, then the load where the mask holds,
        # so the name is one variable on both paths (not one per branch)
        return (orelse, A.If(mask, (then,), (), s.span))
    return (A.If(mask, (then,), (orelse,), s.span),)


def _store(s: A.ExprStmt, call: A.Call) -> tuple[A.Stmt, ...]:
    for kw in call.kwargs:
        if kw.name != "mask":
            raise _err(f"store() has no keyword '{kw.name}' (it takes mask=)", kw)
    if len(call.args) != 2:
        raise _err("store() takes an indexed reference and a value, e.g. store(C[i, j], acc, mask=i < M)", call)
    ref, value = call.args
    if not isinstance(ref, A.Subscript):
        raise _err("the first argument of store() must be an indexed reference such as C[i, j]", ref)
    stmts = _assignment(A.Assign(ref, value, s.span))
    mask = call.kwarg("mask")
    return stmts if mask is None else (A.If(mask, stmts, (), s.span),)


def _stmt(s: A.Stmt) -> tuple[A.Stmt, ...]:
    if isinstance(s, (A.Assign, A.AugAssign)):
        return _assignment(s)
    if isinstance(s, A.ExprStmt):
        if isinstance(s.expr, A.Call) and s.expr.func_name == "store":
            return _store(s, s.expr)
        if (bad := _one_load(s.expr, "statement")) is not None:
            raise _err("a load(...) is a value: assign it, e.g. x = load(A[i], mask=i < M)", bad)
        return (s,)
    if isinstance(s, A.For):
        _no_access_call(s.iter)
        return (replace(s, body=_block(s.body)),)
    if isinstance(s, A.If):
        _no_access_call(s.cond)
        return (replace(s, body=_block(s.body), orelse=_block(s.orelse)),)
    return (s,)


def _no_access_call(e: A.Expr) -> None:
    loads: list[A.Call] = []
    _find_loads(e, loads)
    if loads:
        raise _err("load() is only allowed in an assignment's right-hand side", loads[0])


def _block(body: tuple[A.Stmt, ...]) -> tuple[A.Stmt, ...]:
    return tuple(out for s in body for out in _stmt(s))


def _uses(module: A.Module) -> bool:
    return any(True for k in module.kernels for stmt in k.body for _ in _calls(stmt, NAMES))


def desugar_masked(module: A.Module) -> A.Module:
    """Every kernel with its predicated loads and stores rewritten into guarded accesses."""
    if not _uses(module):
        return module
    return replace(module, kernels=tuple(replace(k, body=_block(k.body)) for k in module.kernels))
