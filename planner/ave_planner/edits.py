"""The fixed edit grammar of the built-in repair agent (issue 15), shared by every feedback mode.

Small AST edits a person tries when a tile kernel is wrong, one statement at a time: swap or
transpose index components, exchange the roles of a scaled and an added index term, replace a
loop or thread variable by another in scope, add or drop a block offset or a summand of an
index, +-1 on a constant, +-1 on a pipeline stage, strict <-> non-strict comparisons, drop or
mirror an XOR swizzle, toggle a `_trans` instruction variant, insert or remove a barrier or an
async wait. Written from this list alone, independently of `ave_decl.testing.mutate` (the
corpus's bugs): it never imports it, matches no text, and knows no operator name; its edits are
generic over the AST, so one that undoes a mutant does so because the grammar is general, and
the grammar also proposes edits that change the spec (inside a `tag` or an assertion), which
the frozen-spec guard rejects.

Every edit returns a whole new module; `program_order` lists them by the line of the statement
they edit, then by KINDS, so the same kernel always gives the same list.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator

from ave_decl.lang import ast as A
from ave_decl.transform.ast_rewrite import walk as walk_all

KINDS = ("swap_index", "swap_roles", "replace_var", "const_pm1", "stage_pm", "add_offset", "drop_term",
         "compare_strict", "drop_swizzle", "add_swizzle", "toggle_variant", "insert_sync", "remove_sync",
         "insert_wait")
SYNC_CALLS = ("syncthreads", "async_wait", "s_waitcnt")
THREAD_CALLS = ("thread_id", "lane_id", "wave_id", "warp_id", "block_id")
_STRICT = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}


@dataclass(frozen=True)
class GrammarEdit:
    kind: str
    line: int
    description: str
    module: A.Module


# ------------------------------------------------------------------ expression paths
Path = tuple  # ((field, index-or-None), ...) from a statement's own expression to a node


def _children(node) -> Iterator[tuple[tuple, object]]:
    if not dataclasses.is_dataclass(node):
        return
    for f in dataclasses.fields(node):
        if f.name in ("span", "path", "body", "orelse", "lanes"):
            continue
        v = getattr(node, f.name)
        if isinstance(v, tuple):
            for i, x in enumerate(v):
                if dataclasses.is_dataclass(x):
                    yield (f.name, i), x
        elif dataclasses.is_dataclass(v):
            yield (f.name, None), v


def _walk(node, path: Path = ()) -> Iterator[tuple[Path, object]]:
    yield path, node
    for step, child in _children(node):
        yield from _walk(child, path + (step,))


def _replace(node, path: Path, new):
    if not path:
        return new
    (name, i), rest = path[0], path[1:]
    v = getattr(node, name)
    if i is None:
        return dataclasses.replace(node, **{name: _replace(v, rest, new)})
    return dataclasses.replace(node, **{name: v[:i] + (_replace(v[i], rest, new),) + v[i + 1:]})


def _mentions(node, expr) -> bool:
    return any(n == expr for _, n in _walk(node))


def _subst(node, old, new):
    if node == old:
        return new
    out = node
    for step, child in list(_children(node)):
        out = _replace(out, (step,), _subst(child, old, new))
    return out


def _summands(e) -> list:
    if isinstance(e, A.BinOp) and e.op == "+":
        return _summands(e.left) + _summands(e.right)
    return [e]


def _sum(terms: list):
    out = terms[0]
    for t in terms[1:]:
        out = A.BinOp("+", out, t)
    return out


# ------------------------------------------------------------------ kernel context
@dataclass
class _Context:
    imports: set[str]
    thread_names: list[tuple[int, str]]  # (line, name) bound to thread/lane/wave/warp/block ids
    offsets: list[str]  # names bound to block_id(..) or block_id(..) * c
    shared_dims: dict[str, tuple]  # shared buffer -> its constant extents (None where not constant)
    params: set[str]
    async_copies: bool
    xors: dict[str, list[tuple]]  # buffer -> [(row index, xor operand)] of swizzled accesses


def _context(module: A.Module, k: A.Kernel) -> _Context:
    imports = {n for imp in module.imports for n in imp.names}
    threads, offsets, dims = [], [], {}
    for s in k.body:
        if not (isinstance(s, A.Assign) and isinstance(s.target, A.Name)):
            continue
        v, name = s.value, s.target.id
        base = v.left if isinstance(v, A.BinOp) and v.op == "*" else v
        if isinstance(base, A.Call) and base.func_name in THREAD_CALLS:
            threads.append((s.span.line, name))
            if base.func_name == "block_id":
                offsets.append(name)
        if isinstance(v, A.Call) and v.func_name == "shared" and len(v.args) >= 2 and isinstance(v.args[1], A.Tuple):
            dims[name] = tuple(d.value if isinstance(d, A.Int) else None for d in v.args[1].elts)
    xors: dict[str, list[tuple]] = {}
    for n in walk_all(k.body):
        if isinstance(n, A.Subscript) and isinstance(n.value, A.Name) and len(n.indices) >= 2:
            last = n.indices[-1]
            if isinstance(last, A.BinOp) and last.op == "^":
                xors.setdefault(n.value.id, []).append((n.indices[-2], last.right))
    async_copies = any(isinstance(n, A.Call) and n.func_name and "async" in n.func_name for n in walk_all(k.body))
    return _Context(imports, threads, offsets, dims, {p.name for p in k.params}, async_copies, xors)


# ------------------------------------------------------------------ expression edits
def _expr_edits(node, loops: list[str], line: int, ctx: _Context) -> Iterator[tuple[str, str, Path, object]]:
    """(kind, description, path, replacement) for every sub-expression of a statement."""
    threads = [n for ln, n in ctx.thread_names if ln < line]
    for path, e in _walk(node):
        if isinstance(e, A.Subscript) and isinstance(e.value, A.Name):
            buf, idx = e.value.id, e.indices
            for i in range(len(idx) - 1):
                swapped = idx[:i] + (idx[i + 1], idx[i]) + idx[i + 2:]
                yield "swap_index", f"swap index components {i} and {i + 1} of {buf}", path, \
                    dataclasses.replace(e, indices=swapped)
            dims = ctx.shared_dims.get(buf)
            if dims and len(dims) >= 3 and dims[0] and 2 <= dims[0] <= 4:
                s = dims[0]
                for d, word in ((1, "next"), (s - 1, "previous")):
                    stage = A.BinOp("%", A.BinOp("+", idx[0], A.Int(d)), A.Int(s))
                    yield "stage_pm", f"the {word} stage of {buf}", path, \
                        dataclasses.replace(e, indices=(stage,) + idx[1:])
            if buf in ctx.params:
                for i, ix in enumerate(idx):
                    for off in ctx.offsets:
                        if not _mentions(ix, A.Name(off)):
                            yield "add_offset", f"add {off} to index {i} of {buf}", path, \
                                dataclasses.replace(e, indices=idx[:i] + (A.BinOp("+", A.Name(off), ix),) + idx[i + 1:])
            for i, ix in enumerate(idx):
                terms = _summands(ix)
                if len(terms) > 1:
                    for j in range(len(terms)):
                        yield "drop_term", f"drop a summand of index {i} of {buf}", path, \
                            dataclasses.replace(e, indices=idx[:i] + (_sum(terms[:j] + terms[j + 1:]),) + idx[i + 1:])
            last = idx[-1] if idx else None
            if len(idx) >= 2 and not (isinstance(last, A.BinOp) and last.op == "^"):
                for row, operand in ctx.xors.get(buf, []):
                    mirrored = A.BinOp("^", last, _subst(operand, row, idx[-2]))
                    yield "add_swizzle", f"swizzle this access of {buf} as its others are", path, \
                        dataclasses.replace(e, indices=idx[:-1] + (mirrored,))
        if isinstance(e, A.BinOp) and e.op == "+":
            terms = _summands(e)
            for i, scaled in enumerate(terms):
                if not (isinstance(scaled, A.BinOp) and scaled.op == "*"):
                    continue
                factor, var = (scaled.right, scaled.left) if isinstance(scaled.right, A.Int) else \
                    (scaled.left, scaled.right)
                if not isinstance(factor, A.Int) or factor.value == 1:
                    continue
                for j, added in enumerate(terms):
                    if j != i and not isinstance(added, A.Int):
                        swapped = list(terms)
                        swapped[i], swapped[j] = A.BinOp("*", added, factor), var
                        yield "swap_roles", "exchange a scaled and an added term", path, _sum(swapped)
        if isinstance(e, A.Name):
            for group in (loops, threads):
                if e.id in group:
                    for other in group:
                        if other != e.id:
                            yield "replace_var", f"{e.id} -> {other}", path, A.Name(other)
        if isinstance(e, A.Int):
            for d in (1, -1):
                if e.value + d >= 0:
                    yield "const_pm1", f"{e.value} -> {e.value + d}", path, A.Int(e.value + d)
        if isinstance(e, A.BinOp) and e.op in _STRICT:
            yield "compare_strict", f"{e.op} -> {_STRICT[e.op]}", path, dataclasses.replace(e, op=_STRICT[e.op])
        if isinstance(e, A.BinOp) and e.op == "^":
            yield "drop_swizzle", "drop the XOR swizzle", path, e.left
        if isinstance(e, A.Call) and e.func_name:
            n = e.func_name
            other = n[:-len("_trans")] if n.endswith("_trans") else n + "_trans"
            if n in ctx.imports:  # the other variant is imported too (_with_import)
                yield "toggle_variant", f"{n} -> {other}", path, dataclasses.replace(e, func=A.Name(other))


# ------------------------------------------------------------------ statements
def _own_fields(s) -> tuple[str, ...]:
    return {A.Assign: ("target", "value"), A.AugAssign: ("target", "value"), A.ExprStmt: ("expr",),
            A.For: ("iter",), A.If: ("cond",), A.Return: ("value",)}.get(type(s), ())


def _call_stmt(name: str, *args: A.Expr) -> A.ExprStmt:
    return A.ExprStmt(A.Call(A.Name(name), tuple(args)))


def _replace_stmt(body: tuple, target, new: tuple) -> tuple:
    out = []
    for s in body:
        if s is target:
            out.extend(new)
            continue
        if isinstance(s, A.For):
            s = dataclasses.replace(s, body=_replace_stmt(s.body, target, new) or (A.Pass(),))
        elif isinstance(s, A.If):
            s = dataclasses.replace(s, body=_replace_stmt(s.body, target, new) or (A.Pass(),),
                                    orelse=_replace_stmt(s.orelse, target, new))
        out.append(s)
    return tuple(out)


def _statements(body: tuple, loops: list[str]) -> Iterator[tuple[object, list[str], bool]]:
    """(statement, loop variables in scope, first of its body) in program order."""
    for i, s in enumerate(body):
        yield s, loops, i == 0
        if isinstance(s, A.For):
            yield from _statements(s.body, loops + [s.var])
        elif isinstance(s, A.If):
            yield from _statements(s.body, loops)
            yield from _statements(s.orelse, loops)


def _stmt_edits(s, loops: list[str], first: bool, ctx: _Context) -> Iterator[tuple[str, str, tuple]]:
    """(kind, description, replacement statements) of the statement-level edits."""
    line = s.span.line
    for field in _own_fields(s):
        value = getattr(s, field)
        if value is None:
            continue
        for kind, what, path, new in _expr_edits(value, loops, line, ctx):
            yield kind, what, (dataclasses.replace(s, **{field: _replace(value, path, new)}),)
    if loops or not first:
        yield "insert_sync", "insert syncthreads() before it", (_call_stmt("syncthreads"), s)
        if ctx.async_copies:
            yield "insert_wait", "insert async_wait(0) before it", (_call_stmt("async_wait", A.Int(0)), s)
    if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name in SYNC_CALLS:
        yield "remove_sync", f"remove {s.expr.func_name}()", ()


def _with_import(module: A.Module, old: str, new: str) -> A.Module:
    """`new` imported from where `old` is (a toggled instruction variant)."""
    if any(new in imp.names for imp in module.imports):
        return module
    imports = tuple(dataclasses.replace(imp, names=imp.names + (new,)) if old in imp.names else imp
                    for imp in module.imports)
    return dataclasses.replace(module, imports=imports)


def program_order(module: A.Module) -> list[GrammarEdit]:
    """Every edit of the grammar on the module's first kernel, by line then by KINDS."""
    k = module.kernels[0]
    ctx = _context(module, k)
    out = []
    for s, loops, first in _statements(k.body, []):
        for kind, what, new in _stmt_edits(s, loops, first, ctx):
            body = _replace_stmt(k.body, s, new)
            edited = dataclasses.replace(module, kernels=(dataclasses.replace(k, body=body),) + module.kernels[1:])
            if kind == "toggle_variant":
                edited = _with_import(edited, what.split(" -> ")[0], what.split(" -> ")[1])
            out.append(GrammarEdit(kind, s.span.line, what, edited))
    rank = {k: i for i, k in enumerate(KINDS)}
    return sorted(out, key=lambda e: (e.line, rank[e.kind]))  # stable: source order within a kind
