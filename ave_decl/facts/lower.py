"""Lowering: checked AST -> relational facts (docs/facts.md).

One walk over each kernel does the semantic checks (names, arity, rank, types) and emits
facts; every error is a FrontEndError with the offending span (exit code 3).
"""
from __future__ import annotations

from math import prod

from ..hw.dtypes import DTYPES
from ..hw.expr import ExprTable
from ..hw.instructions import Instruction
from ..hw.layout import is_bijective
from ..lang import ast as A
from ..lang.errors import FrontEndError
from ..lang.resolve import BUILTINS, resolve_imports
from ..lang.source import SourceFile, Span
from .kernel_facts import KernelFacts
from .lower_exprs import ExpressionLowering
from .lower_instrs import InstructionLowering
from .lower_stmts import StatementLowering
from .values import Binding, Buffer, BVal, Conditional, IVal, Launch, Val

# ------------------------------------------------------------------ values

























class KernelLowering(StatementLowering, InstructionLowering, ExpressionLowering):
    """Walks one kernel; the result is a KernelFacts."""

    def __init__(self, kernel: A.Kernel, kid: int, source: SourceFile, imports: dict[str, Instruction]):
        self.k = kernel
        self.src = source
        self.imports = imports
        self.t = ExprTable()
        self.facts = KernelFacts(kid, kernel.name, source, self.t)
        self.env: dict[str, Binding] = {}
        self.buffers: dict[str, Buffer] = {}
        self.next_stmt = 1
        self.next_access = 0
        self.next_value = 0
        self.loop_stack: list[int] = []
        self.guards: list[tuple[int, int]] = []
        self.scope_stack: list[int] = [0]
        self.next_scope = 1
        self.preds: list[int] = []
        self.cur_stmt = 0
        self.launch: Launch | None = None

    # ----------------------------------------------------------- utilities
    def err(self, msg: str, node) -> FrontEndError:
        return FrontEndError(msg, getattr(node, "span", None) or self.k.span)

    def _node(self, kind: str, span: Span) -> int:
        sid = self.next_stmt
        self.next_stmt += 1
        self.facts.add("stmt", sid, kind, span.line, span.col, span.end_line, span.end_col)
        for p in self.preds:
            self.facts.add("cfg_edge", p, sid)
        self.preds = [sid]
        if self.loop_stack:
            self.facts.add("parent_loop", sid, self.loop_stack[-1])
        for cond, pol in self.guards:
            self.facts.add("guard", sid, cond, pol)
        self.cur_stmt = sid
        return sid

    def _value(self, kind: str, args: tuple[int, ...] = ()) -> int:
        vid = self.next_value
        self.next_value += 1
        self.facts.add("value", vid, kind, self.cur_stmt)
        for i, a in enumerate(args):
            self.facts.add("value_arg", vid, i, a)
        return vid

    def _access(self, buf: Buffer, kind: str, coords: tuple[int, ...], addr: int) -> int:
        aid = self.next_access
        self.next_access += 1
        self.facts.add("access", aid, self.cur_stmt, buf.id, kind)
        self.facts.add("access_addr", aid, addr)
        for d, c in enumerate(coords):
            self.facts.add("access_coord", aid, d, c)
        return aid

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
        known = {"grid", "block", "wave", "warp", "reference"}
        for kw in dec.kwargs:
            if kw.name not in known:
                raise self.err(f"unknown @kernel argument '{kw.name}' (expected grid, block, wave, warp or "
                               f"reference)", kw)
        ref = dec.kwarg("reference")
        if ref is not None and not (isinstance(ref, A.Str) and "=" in ref.value):
            raise self.err('reference= takes a string such as "C = A @ B" (checked by ave simulate)', ref)
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
        self.launch = Launch(grid, block, block_sizes, kind, size)
        for d in range(3):
            g = grid[d] if d < len(grid) else self.t.const(1)
            b = block[d] if d < len(block) else self.t.const(1)
            self.facts.add("launch", d, g, b)
        self.facts.add("group_size", kind, size)

    def _dims(self, e: A.Expr, what: str) -> tuple[int, ...]:
        elts = e.elts if isinstance(e, A.Tuple) else (e,)
        if not 1 <= len(elts) <= 3:
            raise self.err(f"{what}= takes 1 to 3 dimensions", e)
        return tuple(self.index(x, f"{what} extent") for x in elts)

    # ------------------------------------------------------------ params
    def lower_params(self) -> None:
        seen = set()
        for p in self.k.params:
            if p.name in seen:
                raise self.err(f"duplicate parameter '{p.name}'", p)
            seen.add(p.name)
            ann = p.annotation
            if isinstance(ann, A.Name) and ann.id == "int":
                self.env[p.name] = Binding(IVal(self.t.sym(f"size:{p.name}")), 0)
                self.facts.add("assumption", self.t.op("ge", self.t.sym(f"size:{p.name}"), self.t.const(0)))
                continue
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
        if buf.const_shape is not None and (buf.layout is None or is_bijective(buf.layout, prod(buf.const_shape))):
            # in-bounds coordinates and addresses determine each other: Z3 may compare coordinates
            self.facts.add("layout_bijective", buf.id)

    # ----------------------------------------------------------- statements
    def lower(self) -> KernelFacts:
        self.facts.add("kernel", self.k.name, self.src.path)
        self.lower_params()
        self.lower_launch()
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
