"""Small AST utilities the catalogue's transformations share: rewriting, walking, recognising."""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

from ..lang import ast as A

Rewrite = Callable[[object], object | None]


def rewrite(node, fn: Rewrite):
    """Top-down rewrite of any AST node: `fn` returns a replacement, or None to descend."""
    new = fn(node)
    if new is not None:
        return new
    if isinstance(node, tuple):
        return tuple(rewrite(x, fn) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {f.name: rewrite(getattr(node, f.name), fn) for f in dataclasses.fields(node)
                   if f.name not in ("span", "path")}
        return dataclasses.replace(node, **changes)
    return node


def walk(node) -> Iterator[object]:
    """Every AST node under `node`, itself included."""
    yield node
    if isinstance(node, tuple):
        for x in node:
            yield from walk(x)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            if f.name not in ("span", "path"):
                yield from walk(getattr(node, f.name))


def mentions(node, name: str) -> bool:
    return any(isinstance(n, A.Name) and n.id == name for n in walk(node))


def const_range(s) -> int | None:
    """The trip count of `for v in range(c)` with a constant c."""
    if (isinstance(s, A.For) and isinstance(s.iter, A.Call) and s.iter.func_name == "range"
            and len(s.iter.args) == 1 and isinstance(s.iter.args[0], A.Int)):
        return s.iter.args[0].value
    return None


def with_range(s: A.For, *bounds: A.Expr | int) -> A.For:
    args = tuple(A.Int(b) if isinstance(b, int) else b for b in bounds)
    return dataclasses.replace(s, iter=A.Call(A.Name("range"), args))


def is_call_stmt(s, func: str) -> bool:
    return isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name == func


def shared_decls(body: tuple) -> dict[str, A.Assign]:
    """Top-level `name = shared(dtype, (d0, d1), ...)` declarations with constant 2-D extents."""
    out = {}
    for s in body:
        if (isinstance(s, A.Assign) and isinstance(s.target, A.Name) and isinstance(s.value, A.Call)
                and s.value.func_name == "shared" and len(s.value.args) == 2):
            dims = s.value.args[1]
            if isinstance(dims, A.Tuple) and len(dims.elts) == 2 and all(isinstance(d, A.Int) for d in dims.elts):
                out[s.target.id] = s
    return out


def shared_buffers(module: A.Module) -> dict[str, tuple[int, int]]:
    """2-D shared buffers with a power-of-two column count: name -> (rows, cols)."""
    out = {}
    for k in module.kernels:
        for name, decl in shared_decls(k.body).items():
            rows, cols = (d.value for d in decl.value.args[1].elts)  # type: ignore[attr-defined]
            if cols & (cols - 1) == 0:
                out[name] = (rows, cols)
    return out


def thread_count(kernel: A.Kernel) -> int | None:
    """The block size of a 1-D launch (`block=T`)."""
    for kw in kernel.decorator.kwargs:
        if kw.name == "block" and isinstance(kw.value, A.Int):
            return kw.value.value
    return None


def thread_vars(kernel: A.Kernel) -> set[str]:
    """Names bound at the top of the kernel to `thread_id(0)`."""
    return {s.target.id for s in kernel.body if isinstance(s, A.Assign) and isinstance(s.target, A.Name)
            and isinstance(s.value, A.Call) and s.value.func_name == "thread_id"
            and s.value.args == (A.Int(0),)}


PER_THREAD_CALLS = {"thread_id", "lane_id", "wave_id", "warp_id", "local"}


def per_thread_names(kernel: A.Kernel) -> set[str]:
    """Top-level names whose value can differ between the threads of a block: thread, lane,
    wave and warp ids, register arrays (`local`), and anything computed from them."""
    out: set[str] = set()
    for s in kernel.body:
        if isinstance(s, A.Assign) and isinstance(s.target, A.Name) and (
                any(isinstance(n, A.Call) and n.func_name in PER_THREAD_CALLS for n in walk(s.value))
                or any(mentions(s.value, d) for d in out)):
            out.add(s.target.id)
    return out
