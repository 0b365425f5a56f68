"""The nesting bound of the language: every walk over a kernel's AST recurses, so deep input is
refused once, up front, with a location, instead of a RecursionError somewhere downstream.

The bound counts statements and expressions alike along one path from a kernel's top-level
statement (or decorator, or parameter annotation) to a leaf: a loop or `if` body, every `elif`
(an `elif` chain nests), every operator, call, subscript, keyword and tuple is one level;
parentheses are not. Walkers take at most about four Python frames per level (the lowering's
`index -> eval -> load -> _coords`), so 100 levels stay far inside Python's default recursion
limit of 1000 whatever the caller's own depth. Real kernels nest about 14 levels deep.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from . import ast as A
from .errors import FrontEndError
from .source import Span

MAX_NESTING = 100


def children(node) -> list:
    """The AST nodes directly below `node`, in source order."""
    out: list = []
    for name in node.__dataclass_fields__:
        if name == "span":
            continue
        value = getattr(node, name)
        if isinstance(value, tuple):
            out.extend(v for v in value if hasattr(v, "__dataclass_fields__"))
        elif hasattr(value, "__dataclass_fields__"):
            out.append(value)
    return out


def walk(node, into_lambdas: bool = True) -> Iterator:
    """Every node of a statement or expression, in source order (optionally not inside lambdas);
    iterative, so it never recurses."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if into_lambdas or not isinstance(n, A.Lambda):
            stack.extend(reversed(children(n)))


def rewrite(node, fn):
    """`node` rebuilt top-down: where `fn` returns a node, that node replaces the subtree. Unchanged
    subtrees are kept (so other nodes keep their identity); lambdas are left alone (their names
    are their parameters)."""
    got = fn(node)
    if got is not None:
        return got
    if not hasattr(node, "__dataclass_fields__") or isinstance(node, A.Lambda):
        return node
    changes = {}
    for name in node.__dataclass_fields__:
        if name == "span":
            continue
        value = getattr(node, name)
        if isinstance(value, tuple):
            new = tuple(rewrite(v, fn) for v in value)
            if any(a is not b for a, b in zip(new, value)):
                changes[name] = new
        elif hasattr(value, "__dataclass_fields__"):
            new = rewrite(value, fn)
            if new is not value:
                changes[name] = new
    return replace(node, **changes) if changes else node


def _roots(kernel: A.Kernel | A.Helper) -> list:
    return [kernel.decorator, *(p.annotation for p in kernel.params if p.annotation is not None), *kernel.body]


def deepest(module: A.Module, limit: int | None = None) -> tuple[int, Span | None]:
    """The depth of the deepest path (iteratively: this walk must not recurse itself), and the
    span of the first node in source order that is deeper than `limit` (or of the deepest node
    when `limit` is None or never exceeded)."""
    best, where = 0, None
    for kernel in (*module.helpers, *module.kernels):
        stack = [(r, 1) for r in reversed(_roots(kernel))]
        while stack:
            node, depth = stack.pop()
            span = getattr(node, "span", None)
            if depth > best:
                best, where = depth, span if span is not None and span.line > 0 else where
            if limit is not None and depth > limit:
                return depth, span if span is not None and span.line > 0 else where
            stack.extend((c, depth + 1) for c in reversed(children(node)))
    return best, where


def check_nesting(module: A.Module, limit: int = MAX_NESTING) -> None:
    """FrontEndError at the first node nested more than `limit` levels deep."""
    depth, span = deepest(module, limit)
    if depth > limit:
        raise FrontEndError(nesting_message(limit), span)


def nesting_message(limit: int = MAX_NESTING) -> str:
    return (f"kernel is nested too deeply: more than {limit} levels of statements and expressions "
            f"(every loop or if body, elif, operator, call and subscript is one level)")


def recursion_error(path: str, module: A.Module | None) -> FrontEndError:
    """The error for a RecursionError that escaped the bound anyway (a safety net, not the
    mechanism): located at the deepest node when the file parsed, else at its first line."""
    span = deepest(module)[1] if module is not None else None
    return FrontEndError("kernel is nested too deeply (Python's recursion limit was reached while analysing it)",
                         span or Span(path, 1, 1, 1, 2))
