"""`@device` helpers: inlined at every call, right after parsing, so that the verifier, the
simulator and the backends see one kernel body and agree on it (docs/language.md, "Helpers").

    @device                                   @kernel(...)
    def load_frag(dst, src, row, k0):         def f(...):
        for i in range(0, 4):                     ...
            dst[i] = src[row, k0 + i]             for i_load_frag_1 in range(0, 4):
        tag(dst, lambda i: (row, k0 + i),   ->        a[i_load_frag_1] = As[r, kk + i_load_frag_1]
            "A", row, k0)                         tag(a, lambda i: (r, kk + i), "A", r, kk)

A parameter stands for its argument: a name or a literal (a buffer, a size, an index name, a
lambda) is substituted as written; any other argument (`bm + r`, `A[i, j] * 2`) is first bound
to a fresh name at the call site, so it is evaluated once, where the call is. Names the helper
assigns (and its loop variables) are renamed per call (`i` -> `i_load_frag_1`), so two calls
never share a register or an index. Tags and assertions inside a helper are therefore bound per
call, to the call's arguments. A helper's other names must be the kernel's parameters or sizes,
builtins, imported instructions or other helpers: a helper never sees the caller's locals.

Every node of an inlined body keeps its span inside the helper, with `via` naming the calls it
was reached through, so a diagnostic names both the helper line and the call site.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ..hw.dtypes import DTYPES
from . import ast as A
from .depth import check_nesting, children, walk
from .errors import FrontEndError
from .packed import vector_type
from .resolve import BUILTINS
from .source import CallSite, Span

HELPER_DECORATOR = "device"
# A helper calling another is inlined into it; deeper than this is surely a mistake (real kernels
# nest helpers 3-4 deep), and the bound keeps the expansion's recursion shallow.
MAX_CALL_DEPTH = 16
# Statements a kernel may have once its helpers are inlined: a helper called in a chain of helpers
# that each call the next twice doubles per level, so the expansion is bounded before it is built
# (the authors' flash-attention kernel inlines to about 1,500 statements).
MAX_INLINED_STATEMENTS = 20_000

# names of the language a helper may use without a parameter (`masked.py`'s load/store included)
_GLOBAL_NAMES = BUILTINS | set(DTYPES) | {"load", "store", "Tensor", "int"}


def _err(msg: str, node) -> FrontEndError:
    return FrontEndError(msg, node.span)


def _statement_count(body: tuple[A.Stmt, ...]) -> int:
    return sum(1 for s in body for n in walk(s, into_lambdas=False) if isinstance(n, _STMT_TYPES))


_STMT_TYPES = (A.Assign, A.AugAssign, A.ExprStmt, A.Pass, A.For, A.If, A.Return)


def _assigned_names(body: tuple[A.Stmt, ...]) -> list[tuple[str, A.Stmt]]:
    """Names a block binds (assignment targets, loop variables), with the statement, in order."""
    out = []
    for s in body:
        for n in walk(s, into_lambdas=False):
            if isinstance(n, (A.Assign, A.AugAssign)) and isinstance(n.target, A.Name):
                out.append((n.target.id, n))
            elif isinstance(n, A.For):
                out.append((n.var, n))
    return out


def _simple(arg: A.Expr) -> bool:
    """An argument substituted as written: evaluating it twice is evaluating it once."""
    if isinstance(arg, (A.Name, A.Int, A.Float, A.Bool, A.Str, A.Lambda)):
        return True
    if isinstance(arg, A.UnaryOp) and arg.op in "-+":
        return isinstance(arg.operand, (A.Int, A.Float))
    return isinstance(arg, A.Tuple) and all(_simple(x) for x in arg.elts)


class _Renamer:
    """Rebuilds a helper's body for one call: parameters replaced by their arguments, locals by
    their per-call names, spans given `via`."""

    def __init__(self, arguments: dict[str, A.Expr], renamed: dict[str, str], via: tuple[CallSite, ...],
                 fresh=None):
        self.arguments = arguments
        self.renamed = renamed
        self.via = via
        self.fresh = fresh  # name -> a name no one uses (to rename a lambda parameter an argument would meet)

    def span(self, span: Span) -> Span:
        return replace(span, via=self.via) if span.line > 0 else span

    def node(self, n, shadowed: frozenset[str] = frozenset()):
        if isinstance(n, A.Name):
            if n.id in shadowed:
                return A.Name(n.id, self.span(n.span))
            if n.id in self.arguments:
                return self.arguments[n.id]  # an argument keeps the caller's span
            return A.Name(self.renamed.get(n.id, n.id), self.span(n.span))
        if isinstance(n, A.Lambda):
            # an argument substituted into the body must not meet a lambda parameter of its name
            # (`lambda i: (r, i)` called with r := the caller's `i`): such parameters are renamed
            incoming = {y.id for x in walk(n.body) if isinstance(x, A.Name) and x.id in self.arguments
                        and x.id not in n.params and x.id not in shadowed
                        for y in walk(self.arguments[x.id]) if isinstance(y, A.Name)}
            clash = [p for p in n.params if p in incoming]
            if clash and self.fresh is not None:
                renames = {p: self.fresh(p) for p in clash}
                n = A.Lambda(tuple(renames.get(p, p) for p in n.params),
                             _Renamer({}, renames, self.via).node(n.body, shadowed), n.span)
            inner = shadowed | frozenset(n.params)
            return A.Lambda(n.params, self.node(n.body, inner), self.span(n.span))
        if isinstance(n, A.For):
            var = self.renamed.get(n.var, n.var)
            return A.For(var, self.node(n.iter, shadowed), tuple(self.node(s, shadowed) for s in n.body),
                         self.span(n.span))
        changes: dict = {}
        for name in n.__dataclass_fields__:
            value = getattr(n, name)
            if name == "span":
                changes[name] = self.span(value)
            elif isinstance(value, tuple):
                changes[name] = tuple(self.node(v, shadowed) if hasattr(v, "__dataclass_fields__") else v
                                      for v in value)
            elif hasattr(value, "__dataclass_fields__"):
                changes[name] = self.node(value, shadowed)
        return replace(n, **changes)


class _Inliner:
    def __init__(self, module: A.Module):
        self.helpers = {h.name: h for h in module.helpers}
        self.taken = {n.id for root in (*module.kernels, *module.helpers) for s in root.body for n in walk(s)
                      if isinstance(n, A.Name)} | {p.name for root in module.kernels for p in root.params}
        self.calls: dict[str, int] = {}
        self.sizes = {h.name: _statement_count(h.body) for h in module.helpers}
        self.known: set[str] = set()  # the kernel's own names a helper may use
        self.statements = 0

    def kernel(self, k: A.Kernel, imports: set[str]) -> A.Kernel:
        self.known = _GLOBAL_NAMES | imports | set(self.helpers) | {p.name for p in k.params}
        for p in k.params:
            self.known |= {n.id for n in walk(p.annotation) if isinstance(n, A.Name)}
        self.statements = _statement_count(k.body)
        return replace(k, body=self.block(k.body, ()))

    def fresh(self, name: str, helper: str, n: int) -> str:
        candidate, extra = f"{name}_{helper}_{n}", 0
        while candidate in self.taken:
            extra += 1
            candidate = f"{name}_{helper}_{n}_{extra}"
        self.taken.add(candidate)
        return candidate

    def block(self, body: tuple[A.Stmt, ...], stack: tuple[str, ...]) -> tuple[A.Stmt, ...]:
        out: list[A.Stmt] = []
        for s in body:
            call = self._helper_call(s)
            if call is not None:
                target = s.target if isinstance(s, A.Assign) else None
                out.extend(self.call(call, s, target, stack))
            elif isinstance(s, A.Return):  # a kernel's early return (lang/early_return.py)
                out.append(s)
            elif isinstance(s, A.For):
                self._no_nested_call(s.iter)
                out.append(replace(s, body=self.block(s.body, stack)))
            elif isinstance(s, A.If):
                self._no_nested_call(s.cond)
                out.append(replace(s, body=self.block(s.body, stack), orelse=self.block(s.orelse, stack)))
            else:
                self._no_nested_call(s)
                out.append(s)
        return tuple(out)

    def _helper_call(self, s: A.Stmt) -> A.Call | None:
        value = s.expr if isinstance(s, A.ExprStmt) else s.value if isinstance(s, A.Assign) else None
        if isinstance(value, A.Call) and value.func_name in self.helpers:
            return value
        return None

    def _no_nested_call(self, node) -> None:
        for n in walk(node):
            if isinstance(n, A.Call) and n.func_name in self.helpers:
                raise _err(f"a call of helper '{n.func_name}' must be a statement of its own or the whole "
                           f"right-hand side of an assignment (helpers are inlined statements)", n)

    def _bind(self, h: A.Helper, call: A.Call) -> dict[str, A.Expr]:
        names = [p.name for p in h.params]
        if len(call.args) > len(names):
            raise _err(f"helper '{h.name}' takes {len(names)} argument(s), {len(call.args)} given", call)
        bound = dict(zip(names, call.args))
        for kw in call.kwargs:
            self._no_nested_call(kw.value)
            if kw.name not in names:
                raise _err(f"helper '{h.name}' has no parameter '{kw.name}' (it has: {', '.join(names) or 'none'})",
                           kw)
            if kw.name in bound:
                raise _err(f"helper '{h.name}' got two values for parameter '{kw.name}'", kw)
            bound[kw.name] = kw.value
        missing = [n for n in names if n not in bound]
        if missing:
            raise _err(f"helper '{h.name}' is missing argument(s): {', '.join(missing)}", call)
        for arg in call.args:
            self._no_nested_call(arg)
        return bound

    def call(self, call: A.Call, stmt: A.Stmt, target: A.Expr | None, stack: tuple[str, ...]) -> list[A.Stmt]:
        name = call.func_name
        assert name is not None
        h = self.helpers[name]
        if name in stack:
            chain = " -> ".join((*stack[stack.index(name):], name))
            raise _err(f"helper '{name}' calls itself ({chain}); helpers are inlined, so they cannot recurse", call)
        if len(stack) >= MAX_CALL_DEPTH:
            raise _err(f"helpers nest more than {MAX_CALL_DEPTH} calls deep here", call)
        self.statements += self.sizes[name]
        if self.statements > MAX_INLINED_STATEMENTS:
            raise _err(f"the kernel has more than {MAX_INLINED_STATEMENTS} statements once its helpers are inlined",
                       call)
        bound = self._bind(h, call)
        n = self.calls[name] = self.calls.get(name, 0) + 1
        via = (CallSite(name, call.span), *call.span.via)
        arguments: dict[str, A.Expr] = {}
        prelude: list[A.Stmt] = []
        captured = {c.id for s in h.body for x in walk(s) if isinstance(x, A.Call) and x.func_name == "tag"
                    for c in x.args[3:] if isinstance(c, A.Name)}
        for param, arg in bound.items():
            if _simple(arg) and not (param in captured and not isinstance(arg, A.Name)):
                arguments[param] = arg
            else:  # evaluated once, at the call, into a fresh name
                fresh = A.Name(self.fresh(param, name, n), arg.span)
                prelude.append(A.Assign(fresh, arg, arg.span))
                arguments[param] = fresh
        params = {p.name for p in h.params}
        renamed: dict[str, str] = {}
        for local, s in _assigned_names(h.body):
            if local in params:
                raise FrontEndError(f"helper '{name}' assigns to its parameter '{local}' (parameters stand for the "
                                    f"call's arguments; use a new name)", replace(s.span, via=via))
            if local not in renamed:
                renamed[local] = self.fresh(local, name, n)
        body, ret = h.body, None
        if body and isinstance(body[-1], A.Return):
            body, ret = body[:-1], body[-1]
        renamer = _Renamer(arguments, renamed, via, lambda p: self.fresh(p, name, n))
        self._check_free_names(h, body, ret, params | set(renamed), via)
        expanded = list(self.block(tuple(renamer.node(s) for s in body), (*stack, name)))
        if target is not None:
            if ret is None or ret.value is None:
                raise _err(f"helper '{name}' returns no value (its last statement is not `return <value>`)", call)
            result = renamer.node(ret.value)
            self._no_nested_call(result)
            expanded.append(A.Assign(target, result, stmt.span))
        return prelude + expanded

    def _check_free_names(self, h: A.Helper, body, ret, bound: set[str], via) -> None:
        roots = [*body, *([ret] if ret is not None else [])]
        for root in roots:
            for n, shadowed in _names_with_scope(root):
                if n.id not in bound and n.id not in shadowed and n.id not in self.known \
                        and vector_type(n.id) is None:
                    raise FrontEndError(f"name '{n.id}' in helper '{h.name}' is not one of its parameters or "
                                        f"locals, nor a parameter or size of the kernel: pass it as an argument",
                                        replace(n.span, via=via))


def _names_with_scope(root) -> Iterator[tuple[A.Name, frozenset[str]]]:
    """Every Name below `root` with the lambda parameters in scope at it."""
    stack: list[tuple[object, frozenset[str]]] = [(root, frozenset())]
    while stack:
        n, shadowed = stack.pop()
        if isinstance(n, A.Name):
            yield n, shadowed
            continue
        if isinstance(n, A.Lambda):
            shadowed = shadowed | frozenset(n.params)
        stack.extend((c, shadowed) for c in reversed(children(n)))


def _check_helpers(module: A.Module, imports: set[str]) -> None:
    seen: dict[str, A.Helper] = {}
    kernels = {k.name for k in module.kernels}
    for h in module.helpers:
        if h.name in seen:
            raise _err(f"helper '{h.name}' is defined twice (first at {seen[h.name].span})", h)
        if h.name in _GLOBAL_NAMES or h.name in imports:
            raise _err(f"helper '{h.name}' would hide the built-in or imported name '{h.name}'", h)
        if h.name in kernels:
            raise _err(f"helper '{h.name}' has the name of a kernel of this file", h)
        names = [p.name for p in h.params]
        for i, p in enumerate(h.params):
            if p.name in names[:i]:
                raise _err(f"helper '{h.name}' has two parameters named '{p.name}'", p)
        for i, s in enumerate(h.body):
            for n in walk(s, into_lambdas=False):
                if isinstance(n, A.Return) and not (n is s and i == len(h.body) - 1):
                    raise _err(f"return is only allowed as the last statement of a @{HELPER_DECORATOR} helper", n)
        seen[h.name] = h


def inline_helpers(module: A.Module) -> A.Module:
    """The module with every helper call of every kernel replaced by the helper's body."""
    if not module.helpers:  # (the parser refuses a `return` in a kernel)
        return module
    imports = {n for imp in module.imports for n in imp.names}
    _check_helpers(module, imports)
    inliner = _Inliner(module)
    kernels = tuple(inliner.kernel(k, imports) for k in module.kernels)
    out = replace(module, kernels=kernels)
    check_nesting(out)  # inlining nests helper bodies inside the kernel's loops and branches
    return out
