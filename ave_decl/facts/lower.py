"""Lowering: checked AST -> relational facts (docs/facts.md).

One walk over each kernel does the semantic checks (names, arity, rank, types) and emits
facts; every error is a FrontEndError with the offending span (exit code 3).
"""
from __future__ import annotations

from math import prod

from ..hw.dtypes import DTYPES
from ..hw.expr import ExprLimitError, ExprTable
from ..hw.instructions import Instruction
from ..hw.layout import is_bijective
from ..hw.targets import TARGETS
from ..lang import ast as A
from ..lang import printer
from ..lang.errors import FrontEndError
from ..lang.keywords import check_keywords
from ..lang.reference import tolerance_value
from ..lang.resolve import BUILTINS, resolve_imports
from ..lang.source import SourceFile, Span
from .kernel_facts import KernelFacts
from .lower_exprs import ExpressionLowering
from .lower_instrs import InstructionLowering
from .lower_stmts import StatementLowering
from .values import Binding, Buffer, BVal, Conditional, IVal, Launch, Val

# ------------------------------------------------------------------ values


def printable(text: str) -> str:
    """A symbol both engines can carry: control characters (tab, newline, ...) as escapes."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)

























class KernelLowering(StatementLowering, InstructionLowering, ExpressionLowering):
    """Walks one kernel; the result is a KernelFacts."""

    def __init__(self, kernel: A.Kernel, kid: int, source: SourceFile, imports: dict[str, Instruction]):
        self.k = kernel
        self.src = source
        self.imports = imports
        self.t = ExprTable.bounded()  # 32-bit constants, bounded depth (docs/language.md, "Limits")
        self.facts = KernelFacts(kid, kernel.name, source, self.t)
        self.env: dict[str, Binding] = {}
        self.buffers: dict[str, Buffer] = {}
        self.next_stmt = 1
        self.next_access = 0
        self.next_value = 0
        self.zero_values: set[int] = set()  # values known to be zero (`value_zero`)
        self.loop_stack: list[int] = []
        self.loop_ranges: dict[str, tuple[int, int]] = {}  # loop:<header> -> (lo, hi) expressions
        self.guards: list[tuple[int, int]] = []
        self.branches: list[tuple[int, int]] = []  # the `if` statements around, with the arm (`in_branch`)
        self.data_guarded = 0  # depth of `if`s over data around the current statement (`data_guard`)
        self.scope_stack: list[int] = [0]
        self.next_scope = 1
        self.preds: list[int] = []
        self.cur_stmt = 0
        self.cur_kind, self.cur_span = "", kernel.span  # of the statement being lowered (for messages)
        self.launch: Launch | None = None
        self.shared_bytes = 0  # of every shared(...) buffer so far, all stages
        self.block_expr: A.Expr | None = None  # the block= expression (launch errors point at it)
        self.ended_loops: dict[str, Span] = {}  # loop variable -> its (ended) loop, for messages

    # ----------------------------------------------------------- utilities
    def err(self, msg: str, node) -> FrontEndError:
        return FrontEndError(msg, getattr(node, "span", None) or self.k.span)

    def _node(self, kind: str, span: Span) -> int:
        sid = self.next_stmt
        self.next_stmt += 1
        self.facts.add("stmt", sid, kind, span.line, span.col, span.end_line, span.end_col)
        if span.via:
            self.facts.call_sites[sid] = span.via
        for p in self.preds:
            self.facts.add("cfg_edge", p, sid)
        self.preds = [sid]
        if self.loop_stack:
            self.facts.add("parent_loop", sid, self.loop_stack[-1])
        for cond, pol in self.guards:
            self.facts.add("guard", sid, cond, pol)
        for branch, pol in self.branches:
            self.facts.add("in_branch", sid, branch, pol)
        if self.data_guarded:
            self.facts.add("data_guard", sid)
        self.cur_stmt, self.cur_kind, self.cur_span = sid, kind, span
        return sid

    def _value(self, kind: str, args: tuple[int, ...] = (), op: str | None = None) -> int:
        vid = self.next_value
        self.next_value += 1
        self.facts.add("value", vid, kind, self.cur_stmt)
        for i, a in enumerate(args):
            self.facts.add("value_arg", vid, i, a)
        if op is not None:  # the operator of an elementwise value (`value_op`)
            self.facts.add("value_op", vid, op)
        return vid

    def _index_value(self, eid: int) -> int:
        """An integer used as data: an `index` value, with the expression it was computed from."""
        vid = self._value("index")
        self.facts.add("value_expr", vid, eid)
        node = self.t.nodes[eid]
        if node.op == "const" and node.value == 0:
            self.mark_zero(vid)
        return vid

    def mark_zero(self, vid: int) -> None:
        """A value known to be zero: a literal 0, or -x / cast(x) of one (docs/language.md, Zero tags)."""
        self.zero_values.add(vid)
        self.facts.add("value_zero", vid)

    def _access(self, buf: Buffer, kind: str, coords: tuple[int, ...], addr: int) -> int:
        if buf.tag_loops and kind in ("store", "write_all") and not buf.tag_loops <= set(self.loop_stack):
            raise FrontEndError(f"this store into '{buf.name}' lies outside a loop whose variable the array's tag "
                                f"uses: a register tag that names a loop variable is checked in that loop's "
                                f"iterations", self.cur_span)
        if kind in ("store", "write_all") and self.cur_kind != "alloc":  # `init=` is written at the declaration
            buf.stored = True
        aid = self.next_access
        self.next_access += 1
        self.facts.add("access", aid, self.cur_stmt, buf.id, kind)
        self.facts.add("access_addr", aid, addr)
        for d, c in enumerate(coords):
            self.facts.add("access_coord", aid, d, c)
        return aid

    def vector_access(self, aid: int, ref) -> None:
        """Record that an element access is one of the elements of a vector access."""
        lanes = getattr(ref, "lanes", 1)
        if lanes > 1:
            self.facts.add("access_vector", aid, lanes)

    def bind(self, name: str, value: Val, node) -> None:
        if name in BUILTINS or name in DTYPES or name in self.imports:
            raise self.err(f"'{name}' is a builtin name and cannot be assigned", node)
        old = self.env.get(name)
        if old is not None and isinstance(old.value, (IVal, BVal, Conditional)) and old.scope != self.scope_stack[-1]:
            raise self.err(f"index variable '{name}' is reassigned inside a loop or branch; "
                           f"give the new value its own name", node)
        self.env[name] = Binding(value, self.scope_stack[-1])


















    # ------------------------------------------------------------ launch
    def lower_launch(self) -> None:
        dec = self.k.decorator
        if dec.func_name != "kernel":
            raise self.err("a kernel needs the decorator @kernel(grid=..., block=..., wave=64 | warp=32)", dec)
        if dec.args:
            raise self.err("@kernel takes keyword arguments only: grid=, block=, wave= or warp=", dec)
        known = {"grid", "block", "wave", "warp", "reference", "tolerance"}
        for kw in dec.kwargs:
            if kw.name not in known:
                raise self.err(f"unknown @kernel argument '{kw.name}' (expected grid, block, wave, warp, "
                               f"reference or tolerance)", kw)
        ref = dec.kwarg("reference")
        if ref is not None and not (isinstance(ref, A.Str) and "=" in ref.value):
            raise self.err('reference= takes a string such as "C = A @ B" (checked by ave simulate)', ref)
        tol = dec.kwarg("tolerance")
        if tol is not None:
            if ref is None:
                raise self.err("tolerance= bounds the error against reference=: give a reference", tol)
            tolerance_value(tol)
        grid_e, block_e = dec.kwarg("grid"), dec.kwarg("block")
        if grid_e is None or block_e is None:
            raise self.err("@kernel needs grid= and block=", dec)
        grid = self._dims(grid_e, "grid")
        block = self._dims(block_e, "block")
        block_sizes = tuple(self.t.nodes[b].value for b in block) if all(
            self.t.nodes[b].op == "const" for b in block) else None
        if block_sizes is None:
            raise self.err("block= must be constant", block_e)
        wave, warp = dec.kwarg("wave"), dec.kwarg("warp")
        if wave is not None and warp is not None:
            raise self.err("give either wave= or warp=, not both", dec)
        kind, size = ("wave", self.const_int(wave, "wave size")) if wave is not None else (
            ("warp", self.const_int(warp, "warp size")) if warp is not None else ("wave", 64))
        if size not in (32, 64):
            raise self.err(f"{kind} size must be 32 or 64, got {size}", wave or warp)
        self._check_launch(grid_e, grid, block_e, block_sizes, kind)
        self.launch = Launch(grid, block, block_sizes, kind, size)
        self.block_expr = block_e
        for d in range(3):
            g = grid[d] if d < len(grid) else self.t.const(1)
            b = block[d] if d < len(block) else self.t.const(1)
            self.facts.add("launch", d, g, b)
        self.facts.add("group_size", kind, size)

    def _kernel_attrs(self) -> None:
        """`kernel_attr(k, name, value)`: the decorator's keyword arguments as written (a string's
        contents, other values printed as source), for rules that read the reference or the launch."""
        for kw in self.k.decorator.kwargs:
            text = kw.value.value if isinstance(kw.value, A.Str) else printer.expr(kw.value)
            self.facts.add("kernel_attr", kw.name, printable(text))

    def _check_launch(self, grid_e: A.Expr, grid: tuple[int, ...], block_e: A.Expr, block: tuple[int, ...],
                      kind: str) -> None:
        """The launch fits the declared target (hw/targets.py): constant extents >= 1 and within
        the per-dimension limits, at most `max_threads` threads per block. Symbolic grid
        extents depend on the sizes and are not checked here."""
        target = TARGETS[kind]
        for what, e, extents, limits in (("block", block_e, block, target.max_block), ("grid", grid_e, None, target.max_grid)):
            elts = e.elts if isinstance(e, A.Tuple) else (e,)
            for d, x in enumerate(elts):
                value = extents[d] if extents is not None else (
                    self.t.nodes[grid[d]].value if self.t.nodes[grid[d]].op == "const" else None)
                if value is None:
                    continue
                if value < 1:
                    raise self.err(f"{what} extent {value} (dimension {d}) must be at least 1", x)
                if value > limits[d]:
                    raise self.err(f"{what} extent {value} (dimension {d}) exceeds the limit of {target.name}: "
                                   f"{limits[d]}", x)
        threads = prod(block)
        if threads > target.max_threads:
            raise self.err(f"block={'x'.join(map(str, block))} has {threads} threads; {target.name} allows at most "
                           f"{target.max_threads} threads per block", block_e)

    def require_whole_groups(self, what: str, node) -> None:
        """`what` (a matrix instruction, a lane reduction) runs on every lane of a wave/warp: on a
        block whose thread count is not a multiple of the group size the last group is partial and
        its missing lanes hold nothing (mma.sync/ldmatrix are `.aligned`, MFMA reads all 64 lanes)."""
        assert self.launch is not None and self.launch.block_sizes is not None
        threads, g = prod(self.launch.block_sizes), self.launch.group_size
        if threads % g:
            line = getattr(getattr(node, "span", None), "line", 0)
            raise self.err(f"block= has {threads} threads, not a multiple of the {self.launch.group_kind} size {g}: "
                           f"{what}{f' (line {line})' if line else ''} needs whole {self.launch.group_kind}s",
                           self.block_expr)

    def _dims(self, e: A.Expr, what: str) -> tuple[int, ...]:
        elts = e.elts if isinstance(e, A.Tuple) else (e,)
        if not 1 <= len(elts) <= 3:
            raise self.err(f"{what}= takes 1 to 3 dimensions", e)
        return tuple(self.index(x, f"{what} extent") for x in elts)

    # ------------------------------------------------------------ params
    def lower_params(self) -> None:
        seen: set[str] = set()
        for p in self.k.params:
            try:
                self._param(p, seen)
            except ExprLimitError as exc:  # a constant dimension product beyond 32 bits
                raise self.err(str(exc), p) from None

    def _param(self, p: A.Param, seen: set[str]) -> None:
        if p.name in seen:
            raise self.err(f"duplicate parameter '{p.name}'", p)
        seen.add(p.name)
        ann = p.annotation
        if isinstance(ann, A.Name) and ann.id == "int":
            self.env[p.name] = Binding(IVal(self.t.sym(f"size:{p.name}")), 0)
            self.facts.add("assumption", self.t.op("ge", self.t.sym(f"size:{p.name}"), self.t.const(0)))
            return
        if not (isinstance(ann, A.Subscript) and isinstance(ann.value, A.Name) and ann.value.id == "Tensor"
                and len(ann.indices) in (2, 3)):
            raise self.err(f"parameter '{p.name}' needs a type Tensor[dtype, (dims...)] or int", ann)
        dt, shape = ann.indices[:2]
        if not isinstance(dt, A.Name) or dt.id not in DTYPES:
            raise self.err(f"unknown element type in Tensor[...]; expected one of {', '.join(sorted(DTYPES))}", dt)
        dims = shape.elts if isinstance(shape, A.Tuple) else (shape,)
        eids = []
        for d in dims:
            if isinstance(d, A.Name):
                if d.id in self.env and not isinstance(self.env[d.id].value, IVal):
                    raise self.err(f"'{d.id}' is already a tensor; a dimension must be a size name", d)
                if d.id not in self.env:
                    sym = self.t.sym(f"size:{d.id}")
                    self.env[d.id] = Binding(IVal(sym), 0)
                    self.facts.add("assumption", self.t.op("ge", sym, self.t.const(1)))
                eids.append(self.env[d.id].value.eid)  # type: ignore[union-attr]
            elif isinstance(d, A.Int) and d.value > 0:
                eids.append(self.t.const(d.value))
            else:
                raise self.err("a tensor dimension must be a size name or a positive integer", d)
        buf = Buffer(p.name, p.name, "global", dt.id, tuple(eids), None, None, p.span)
        if len(ann.indices) == 3:
            buf.index_values = self._index_values(ann.indices[2], buf)
        self._declare(buf)
        self.env[p.name] = Binding(buf, 0)
        if buf.index_values is not None:
            lo, hi, injective = buf.index_values
            self.facts.add("index_values", buf.id, lo, hi, int(injective))

    def _index_values(self, e: A.Expr, buf: Buffer) -> tuple[int, int, bool]:
        """`Tensor[i32, (n,), (lo, hi)]`: an index tensor whose values lie in [lo, hi);
        `Tensor[i32, (n,), permutation]`: a permutation of [0, n) (routing tables, sorted ids)."""
        if buf.dtype not in ("i32", "u32", "i64"):
            raise self.err("only an integer tensor can declare its values (an index tensor)", e)
        if isinstance(e, A.Name) and e.id == "permutation":
            if len(buf.shape) != 1:
                raise self.err("a permutation is a one-dimensional index tensor", e)
            return self.t.const(0), buf.shape[0], True
        if isinstance(e, A.Tuple) and len(e.elts) == 2:
            return self.index(e.elts[0], "lower value bound"), self.index(e.elts[1], "upper value bound"), False
        raise self.err("the third entry of Tensor[...] is (lo, hi) or permutation", e)

    def _declare(self, buf: Buffer) -> None:
        base, n = buf.id, 2
        while buf.id in self.buffers:
            buf.id = f"{base}#{n}"
            n += 1
        self.buffers[buf.id] = buf
        size = self.t.const(1)
        for d in buf.shape:
            size = self.t.op("mul", size, d)
        self.facts.add("buffer", buf.id, buf.space, size)
        self.facts.add("buffer_type", buf.id, buf.dtype)
        for d, extent in enumerate(buf.shape):
            self.facts.add("buffer_dim", buf.id, d, extent)
        if buf.const_shape is not None and buf.base is None and (buf.layout is None or
                                                                is_bijective(buf.layout, prod(buf.const_shape))):
            # in-bounds coordinates and addresses determine each other: Z3 may compare coordinates
            # (not through a subview whose offset varies: equal coordinates in two iterations differ)
            self.facts.add("layout_bijective", buf.id)

    # ----------------------------------------------------------- statements
    def lower(self) -> KernelFacts:
        check_keywords(self.k)  # before any value: the simulator checks the same (lang/keywords.py)
        self.facts.add("kernel", self.k.name, self.src.path)
        self.lower_params()
        self.lower_launch()
        self._kernel_attrs()
        entry = self._node("entry", self.k.span)
        self.facts.add("entry", entry)
        self.block(self.k.body)
        self._node("exit", self.k.span)
        self.facts.export_expressions()
        return self.facts





























def lower_module(module: A.Module, source: SourceFile, first_kid: int = 0) -> list[KernelFacts]:
    """All kernels of a parsed file, with consecutive kernel ids."""
    imports = resolve_imports(module)
    if not module.kernels:
        raise FrontEndError("the file defines no kernel (a `@kernel(...)` function)", Span(source.path, 1, 1, 1, 2))
    names: set[str] = set()
    out = []
    for i, k in enumerate(module.kernels):
        if k.name in names:
            raise FrontEndError(f"kernel '{k.name}' is defined twice", k.span)
        names.add(k.name)
        out.append(KernelLowering(k, first_kid + i, source, imports).lower())
    return out
