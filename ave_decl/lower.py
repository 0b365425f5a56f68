"""Lowering: checked AST -> relational facts (docs/facts.md).

One walk over each kernel does the semantic checks (names, arity, rank, types) and emits
facts; every error is a FrontEndError with the offending span (exit code 3).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Union

from . import ast as A
from .errors import FrontEndError
from .facts import KernelFacts
from .instructions import INSTRUCTIONS, LOAD_MATRIX, MODULES, Instruction, LoadMatrix
from .ir import BINARY_OPS, BOOL_OPS, UNARY_OPS, ExprTable, substitute
from .layout import AnyLayout, Composed, Layout, Swizzle, col_major, is_bijective, row_major
from .source import SourceFile, Span

DTYPES = {"bf16", "f16", "f32", "f64", "fp8", "bf8", "i8", "i32", "u32", "i64"}
ELEMENTWISE = {"exp2", "exp", "abs", "sqrt", "rsqrt", "cast", "select", "fmax", "fmin"}


# ------------------------------------------------------------------ values
@dataclass(frozen=True)
class IVal:
    """An integer index expression (node id in the kernel's ExprTable)."""

    eid: int


@dataclass(frozen=True)
class BVal:
    eid: int


@dataclass(frozen=True)
class DVal:
    """A data value (tensor element) flowing through the kernel; vid indexes `value` facts."""

    vid: int
    dtype: str


@dataclass
class Buffer:
    id: str
    name: str
    space: str  # global | shared | local
    dtype: str
    shape: tuple[int, ...]  # expr ids
    const_shape: tuple[int, ...] | None
    layout: AnyLayout | None
    span: Span
    implicit: bool = False  # a data scalar kept as a 0-d register
    tagged: bool = False
    index_values: tuple[int, int, bool] | None = None  # an index tensor: (lo, hi, injective) of its values

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class LayoutVal:
    layout: AnyLayout


@dataclass(frozen=True)
class DType:
    name: str


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(frozen=True)
class InstrVal:
    instr: Instruction


@dataclass(frozen=True)
class Conditional:
    """An index name whose value after an `if` depends on the branch taken."""

    name: str
    span: Span


Val = Union[IVal, BVal, DVal, Buffer, LayoutVal, DType, Builtin, InstrVal, Conditional]

BUILTINS = {
    "assume", "tag", "assert_tag_eq", "assert_tag", "reset_tags", "syncthreads", "thread_id", "block_id",
    "lane_id", "wave_id", "warp_id", "shared", "local", "row_major", "col_major", "layout", "swizzle", "range",
    "min", "max", "async_copy", "async_wait", "lane_max", "lane_sum", *ELEMENTWISE,
}


@dataclass
class _Binding:
    value: Val
    scope: int  # the construct (loop/if branch) where it was bound


@dataclass
class _Launch:
    grid: tuple[int, ...]
    block: tuple[int, ...]
    block_sizes: tuple[int, ...] | None
    group_kind: str
    group_size: int


class KernelLowering:
    """Walks one kernel; the result is a KernelFacts."""

    def __init__(self, kernel: A.Kernel, kid: int, source: SourceFile, imports: dict[str, Instruction]):
        self.k = kernel
        self.src = source
        self.imports = imports
        self.t = ExprTable()
        self.facts = KernelFacts(kid, kernel.name, source, self.t)
        self.env: dict[str, _Binding] = {}
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
        self.launch: _Launch | None = None

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
        self.env[name] = _Binding(value, self.scope_stack[-1])

    def lookup(self, node: A.Name) -> Val:
        b = self.env.get(node.id)
        if b is not None:
            if isinstance(b.value, Conditional):
                raise self.err(f"index variable '{node.id}' is assigned in a branch, so its value after the "
                               f"`if` depends on the path taken (unsupported)", node)
            return b.value
        if node.id in DTYPES:
            return DType(node.id)
        if node.id in self.imports:
            return InstrVal(self.imports[node.id])
        if node.id in BUILTINS:
            return Builtin(node.id)
        if node.id in INSTRUCTIONS:
            raise self.err(f"instruction '{node.id}' is not imported (add `from ave.{INSTRUCTIONS[node.id].vendor} "
                           f"import {node.id}`)", node)
        raise self.err(f"undefined name '{node.id}'", node)

    # --------------------------------------------------------- expressions
    def index(self, e: A.Expr, what: str = "index") -> int:
        v = self.eval(e)
        if isinstance(v, BVal):
            return v.eid
        if not isinstance(v, IVal):
            raise self.err(f"{what} must be an integer expression, not {_describe(v)}", e)
        return v.eid

    def cond(self, e: A.Expr) -> int | None:
        v = self.eval(e)
        if isinstance(v, (BVal, IVal)):
            return v.eid
        if isinstance(v, DVal):
            return None  # data-dependent condition: the analysis is path-insensitive
        raise self.err(f"condition must be a boolean expression, not {_describe(v)}", e)

    def const_int(self, e: A.Expr, what: str) -> int:
        eid = self.index(e, what)
        node = self.t.nodes[eid]
        if node.op != "const":
            raise self.err(f"{what} must be a constant integer", e)
        return node.value

    def eval(self, e: A.Expr) -> Val:
        if isinstance(e, A.Name):
            v = self.lookup(e)
            if isinstance(v, Buffer) and v.implicit:
                return self.load(v, (), e)
            return v
        if isinstance(e, A.Bool):
            return BVal(self.t.const(int(e.value)))
        if isinstance(e, A.Int):
            if abs(e.value) >= 2**31:
                raise self.err(f"integer literal {e.value} does not fit in 32 bits", e)
            return IVal(self.t.const(e.value))
        if isinstance(e, A.Float):
            return DVal(self._value("const"), "f32")
        if isinstance(e, A.Str):
            raise self.err("a string is only allowed as the name argument of tag(...)", e)
        if isinstance(e, A.BinOp):
            return self._binop(e)
        if isinstance(e, A.UnaryOp):
            v = self.eval(e.operand)
            if isinstance(v, DVal):
                return DVal(self._value("elementwise", (v.vid,)), v.dtype)
            if e.op == "+":
                return v if isinstance(v, IVal) else self._type_error(e, v)
            if not isinstance(v, (IVal, BVal)):
                return self._type_error(e, v)
            op = UNARY_OPS[e.op]
            return (BVal if op == "lnot" else IVal)(self.t.op(op, v.eid))
        if isinstance(e, A.BoolOp):
            eids = [self.index(x, "operand of a boolean operator") for x in e.values]
            out = eids[0]
            for x in eids[1:]:
                out = self.t.op(BINARY_OPS[e.op], out, x)
            return BVal(out)
        if isinstance(e, A.Subscript):
            base = self.eval(e.value) if not isinstance(e.value, A.Name) else self.lookup(e.value)
            if not isinstance(base, Buffer):
                raise self.err(f"only tensors and buffers can be indexed, not {_describe(base)}", e)
            return self.load(base, e.indices, e)
        if isinstance(e, A.Call):
            return self._call(e)
        if isinstance(e, A.Tuple):
            raise self.err("a tuple is not a value here", e)
        if isinstance(e, A.Lambda):
            raise self.err("a lambda is only allowed as an argument of tag(...) or assert_tag(...)", e)
        if isinstance(e, A.IfExp):
            raise self.err("conditional expressions (x if c else y) are not supported; use select(c, x, y)", e)
        if isinstance(e, A.Attribute):
            raise self.err("attribute access is not part of the language", e)
        raise self.err("unsupported expression", e)

    def _type_error(self, e, v):
        raise self.err(f"operator cannot be applied to {_describe(v)}", e)

    def _binop(self, e: A.BinOp) -> Val:
        left, right = self.eval(e.left), self.eval(e.right)
        if e.op == "@":
            return LayoutVal(self._compose(left, right, e))
        if isinstance(left, DVal) or isinstance(right, DVal):
            args = []
            for side, v in ((e.left, left), (e.right, right)):
                if isinstance(v, DVal):
                    args.append(v.vid)
                elif isinstance(v, (IVal, BVal)):
                    args.append(self._value("index"))
                else:
                    self._type_error(side, v)
            dtype = left.dtype if isinstance(left, DVal) else right.dtype  # type: ignore[union-attr]
            return DVal(self._value("elementwise", tuple(args)), dtype)
        for side, v in ((e.left, left), (e.right, right)):
            if not isinstance(v, (IVal, BVal)):
                self._type_error(side, v)
        if e.op in ("/", "**"):
            raise self.err(f"operator '{e.op}' is not defined on index expressions (use // for division)", e)
        op = BINARY_OPS[e.op]
        eid = self.t.op(op, left.eid, right.eid)  # type: ignore[union-attr]
        return BVal(eid) if op in BOOL_OPS else IVal(eid)

    def _compose(self, outer: Val, inner: Val, e) -> AnyLayout:
        if not isinstance(outer, LayoutVal) or not isinstance(inner, LayoutVal):
            raise self.err("`@` composes layouts: both sides must be layouts", e)
        if isinstance(inner.layout, Swizzle):
            raise self.err("the right-hand side of `@` must be a shape:stride layout", e)
        return Composed(outer.layout, inner.layout)

    def load(self, buf: Buffer, indices: tuple[A.Expr, ...], node) -> DVal | IVal:
        coords = self._coords(buf, indices, node)
        aid = self._access(buf, "load", coords, self._address(buf, coords))
        if buf.index_values is not None:
            # a data-dependent index: an uninterpreted function of the coordinates it was read at
            return IVal(self.t.uf(buf.id, coords))
        vid = self._value("load")
        self.facts.add("value_load", vid, aid)
        return DVal(vid, buf.dtype)

    def _coords(self, buf: Buffer, indices: tuple[A.Expr, ...], node) -> tuple[int, ...]:
        if len(indices) != buf.rank:
            raise self.err(f"'{buf.name}' has rank {buf.rank} but is indexed with {len(indices)} "
                           f"{'index' if len(indices) == 1 else 'indices'}", node)
        return tuple(self.index(i) for i in indices)

    def _address(self, buf: Buffer, coords: tuple[int, ...]) -> int:
        if buf.layout is not None:
            return buf.layout.offset(self.t, coords)
        addr = self.t.const(0)
        for c, dim in zip(coords, buf.shape):
            addr = self.t.op("add", self.t.op("mul", addr, dim), c)
        return addr

    # ------------------------------------------------------------ builtins
    def _call(self, e: A.Call) -> Val:
        f = self.eval(e.func) if not isinstance(e.func, A.Name) else self.lookup(e.func)
        if isinstance(f, InstrVal):
            raise self.err(f"the result of {f.instr.name} must be assigned to a register array", e)
        if not isinstance(f, Builtin):
            raise self.err(f"{_describe(f)} is not callable", e.func)
        name = f.name
        if name in ("thread_id", "block_id"):
            self._arity(e, 1, 1)
            d = self.const_int(e.args[0], f"dimension of {name}")
            limit = len(self.launch.block if name == "thread_id" else self.launch.grid)  # type: ignore[union-attr]
            if not 0 <= d < limit:
                raise self.err(f"{name}({d}): the launch has {limit} dimension(s)", e.args[0])
            return IVal(self.t.sym(f"{'tid' if name == 'thread_id' else 'bid'}:{d}"))
        if name in ("lane_id", "wave_id", "warp_id"):
            self._arity(e, 0, 0)
            assert self.launch is not None
            if name != "lane_id" and name[:4] != self.launch.group_kind:
                raise self.err(f"{name}() but the kernel declares {self.launch.group_kind}=", e)
            tid = self._linear_thread()
            g = self.t.const(self.launch.group_size)
            return IVal(self.t.op("mod" if name == "lane_id" else "floordiv", tid, g))
        if name in ("min", "max"):
            self._arity(e, 2, 2)
            a, b = self.eval(e.args[0]), self.eval(e.args[1])
            if isinstance(a, IVal) and isinstance(b, IVal):
                return IVal(self.t.op(name, a.eid, b.eid))
            return self._elementwise(e, [a, b])
        if name in ("lane_max", "lane_sum"):
            return self._lane_reduce(e, name)
        if name in ELEMENTWISE:
            args = [self.eval(a) for a in e.args if not (name == "cast" and isinstance(a, A.Name) and a.id in DTYPES)]
            if name == "cast":
                self._arity(e, 2, 2)
            return self._elementwise(e, args)
        if name in ("row_major", "col_major"):
            dims = tuple(self.const_int(a, "layout extent") for a in e.args)
            if not dims:
                raise self.err(f"{name}() needs at least one extent", e)
            return LayoutVal(row_major(*dims) if name == "row_major" else col_major(*dims))
        if name == "layout":
            self._arity(e, 2, 2)
            shape, stride = self._nested(e.args[0]), self._nested(e.args[1])
            if _structure(shape) != _structure(stride):
                raise self.err("layout(shape, stride): shape and stride must have the same nesting", e)
            return LayoutVal(Layout(shape, stride))
        if name == "swizzle":
            self._arity(e, 3, 3)
            b, m, s = (self.const_int(a, "swizzle parameter") for a in e.args)
            if b < 0 or m < 0 or abs(s) < b:
                raise self.err(f"swizzle({b}, {m}, {s}) needs B >= 0, M >= 0 and |S| >= B", e)
            return LayoutVal(Swizzle(b, m, s))
        if name in ("shared", "local"):
            raise self.err(f"{name}(...) must be assigned to a name", e)
        raise self.err(f"{name}(...) is a statement, not a value", e)

    def _lane_reduce(self, e: A.Call, name: str) -> DVal:
        """`lane_max(x, width)` / `lane_sum(x, width)`: combine x over each aligned group of `width`
        lanes (a shuffle-xor butterfly); every lane gets its group's result. The result is a
        statistic: its tag is x's tag without the last component (the reduced one)."""
        self._arity(e, 2, 2)
        x = self.eval(e.args[0])
        if not isinstance(x, DVal):
            raise self.err(f"{name}() reduces a data value, not {_describe(x)}", e.args[0])
        width = self.const_int(e.args[1], f"{name} width")
        assert self.launch is not None
        g = self.launch.group_size
        if width < 2 or width & (width - 1) or g % width:
            raise self.err(f"{name} width must be a power of two in [2, {g}] dividing the {self.launch.group_kind} "
                           f"size", e.args[1])
        vid = self._value("reduce", (x.vid,))
        self.facts.add("lane_reduce", vid, name[5:], width)
        return DVal(vid, x.dtype)

    def _elementwise(self, e: A.Call, args: list[Val]) -> DVal:
        vids, dtype = [], "f32"
        for a, node in zip(args, e.args):
            if isinstance(a, DVal):
                vids.append(a.vid)
                dtype = a.dtype
            elif isinstance(a, (IVal, BVal)):
                vids.append(self._value("index"))
            else:
                self._type_error(node, a)
        return DVal(self._value("elementwise", tuple(vids)), dtype)

    def _nested(self, e: A.Expr):
        if isinstance(e, A.Tuple):
            return tuple(self._nested(x) for x in e.elts)
        return self.const_int(e, "layout shape/stride entry")

    def _arity(self, e: A.Call, lo: int, hi: int) -> None:
        n = len(e.args)
        if not lo <= n <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.err(f"{e.func_name}() takes {want} argument{'s' if hi != 1 else ''}, got {n}", e)

    def _linear_thread(self) -> int:
        assert self.launch is not None
        tid = self.t.const(0)
        for d in reversed(range(len(self.launch.block))):
            tid = self.t.op("add", self.t.op("mul", tid, self.launch.block[d]), self.t.sym(f"tid:{d}"))
        return tid

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
        self.launch = _Launch(grid, block, block_sizes, kind, size)
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
                self.env[p.name] = _Binding(IVal(self.t.sym(f"size:{p.name}")), 0)
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
                        self.env[d.id] = _Binding(IVal(sym), 0)
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
            self.env[p.name] = _Binding(buf, 0)
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

    def block(self, body: tuple[A.Stmt, ...]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.Pass):
            return
        if isinstance(s, A.For):
            return self._for(s)
        if isinstance(s, A.If):
            return self._if(s)
        if isinstance(s, A.ExprStmt):
            return self._expr_stmt(s)
        if isinstance(s, A.Assign):
            return self._assign(s.target, s.value, s)
        if isinstance(s, A.AugAssign):
            value = A.BinOp(s.op, s.target, s.value, s.span)
            return self._assign(s.target, value, s)
        raise self.err("unsupported statement", s)

    def _for(self, s: A.For) -> None:
        it = s.iter
        if not (isinstance(it, A.Call) and it.func_name == "range" and not it.kwargs):
            raise self.err("a for loop must iterate over range(...)", it)
        self._arity(it, 1, 3)
        args = [self.index(a, "range bound") for a in it.args]
        lo, hi, step = (self.t.const(0), args[0], self.t.const(1)) if len(args) == 1 else (
            args[0], args[1], args[2] if len(args) == 3 else self.t.const(1))
        step_node = self.t.nodes[step]
        if step_node.op != "const" or step_node.value <= 0:
            raise self.err("range step must be a positive constant", it.args[2] if len(it.args) == 3 else it)
        header = self._node("for", s.span)
        var = self.t.sym(f"loop:{header}")
        self.loop_stack.append(header)
        self.scope_stack.append(self._new_scope())
        saved = self.env.get(s.var)
        if s.var in BUILTINS or s.var in DTYPES or s.var in self.imports:
            raise self.err(f"'{s.var}' is a builtin name and cannot be a loop variable", s)
        if saved is not None and isinstance(saved.value, Buffer):
            raise self.err(f"loop variable '{s.var}' would hide the buffer of the same name", s)
        self.env[s.var] = _Binding(IVal(var), self.scope_stack[-1])
        self.block(s.body)
        latch = self._node("latch", s.span)
        self.facts.add("back_edge", latch, header)
        self.facts.add("loop", header, latch, s.var, lo, hi, step)
        self.loop_stack.pop()
        self.scope_stack.pop()
        if saved is None:
            del self.env[s.var]
        else:
            self.env[s.var] = saved

    def _new_scope(self) -> int:
        self.next_scope += 1
        return self.next_scope

    def _if(self, s: A.If) -> None:
        node = self._node("if", s.span)
        cond = self.cond(s.cond)
        before = dict(self.env)
        results = []
        for pol, body in ((1, s.body), (0, s.orelse)):
            self.env = dict(before)
            self.preds = [node]
            if cond is not None:
                self.guards.append((cond, pol))
            self.scope_stack.append(self._new_scope())
            self.block(body)
            self.scope_stack.pop()
            if cond is not None:
                self.guards.pop()
            results.append((dict(self.env), list(self.preds)))
        (env_then, preds_then), (env_else, preds_else) = results
        merged = dict(before)
        for name in set(env_then) | set(env_else):
            a, b = env_then.get(name), env_else.get(name)
            if a is not None and b is not None and a.value is b.value:
                merged[name] = a
            elif any(x is not None and isinstance(x.value, (IVal, BVal, LayoutVal)) for x in (a, b)):
                merged[name] = _Binding(Conditional(name, s.span), self.scope_stack[-1])
            else:
                merged[name] = a or b  # type: ignore[assignment]
        self.env = merged
        self.preds = preds_then + preds_else
        self._node("join", s.span)

    def _expr_stmt(self, s: A.ExprStmt) -> None:
        e = s.expr
        if not isinstance(e, A.Call) or not isinstance(e.func, A.Name):
            raise self.err("an expression statement must be a call such as syncthreads() or assume(...)", e)
        name = e.func.id
        f = self.lookup(e.func)
        if isinstance(f, InstrVal):
            raise self.err(f"the result of {name} must be assigned to a register array", e)
        if name == "syncthreads":
            self._arity(e, 0, 0)
            sid = self._node("barrier", s.span)
            self.facts.add("barrier", sid)
        elif name == "async_wait":
            self._arity(e, 0, 0)
            sid = self._node("async_wait", s.span)
            self.facts.add("async_wait", sid)
        elif name == "async_copy":
            self._async_copy(e, s)
        elif name == "assume":
            if not e.args:
                raise self.err("assume() needs at least one condition", e)
            self._node("assume", s.span)
            for a in e.args:
                v = self.eval(a)
                if not isinstance(v, (BVal, IVal)):
                    raise self.err("assume() takes conditions over sizes and indices", a)
                self.facts.add("assumption", v.eid)
        elif name == "tag":
            self._tag(e, s)
        elif name in ("assert_tag_eq", "assert_tag"):
            self._assert(e, s)
        elif name == "reset_tags":
            self._arity(e, 1, 1)
            buf = self._buffer_arg(e.args[0], "reset_tags")
            if buf.space == "global":
                raise self.err("reset_tags() applies to shared or local buffers", e.args[0])
            sid = self._node("reset", s.span)
            self.facts.add("reset_tags", sid, buf.id)
            # every element now holds "no tag" (Bottom): a whole-buffer write of an untagged value,
            # which also ends the provenance of everything stored before
            aid = self._access(buf, "write_all", (), self.t.sym("slot"))
            self.facts.add("store_value", aid, self._value("const"))
        elif name in BUILTINS:
            raise self.err(f"{name}(...) computes a value; assign it to a name", e)
        else:
            raise self.err(f"undefined name '{name}'", e.func)

    def _async_copy(self, e: A.Call, s: A.Stmt) -> None:
        """`async_copy(dst[i..], src[j..])`: a store into shared memory whose data lands at an
        unknown time before the issuing thread's next `async_wait()` (ave/async-copy-wait)."""
        self._arity(e, 2, 2)
        dst, src = e.args
        if not (isinstance(dst, A.Subscript) and isinstance(dst.value, A.Name)):
            raise self.err("async_copy(dst[...], src[...]) needs an indexed shared buffer as destination", dst)
        buf = self.lookup(dst.value)
        if not isinstance(buf, Buffer) or buf.space != "shared":
            raise self.err("the destination of async_copy must be a shared buffer", dst.value)
        if not (isinstance(src, A.Subscript) and isinstance(src.value, A.Name)):
            raise self.err("async_copy(dst[...], src[...]) needs an indexed global tensor as source", src)
        sbuf = self.lookup(src.value)
        if not isinstance(sbuf, Buffer) or sbuf.space != "global":
            raise self.err("the source of async_copy must be a global tensor", src.value)
        self._node("store", s.span)
        v = self.eval(src)
        assert isinstance(v, DVal)
        coords = self._coords(buf, dst.indices, dst)
        aid = self._access(buf, "store", coords, self._address(buf, coords))
        self.facts.add("store_value", aid, v.vid)
        self.facts.add("async_store", aid)

    def _buffer_arg(self, e: A.Expr, fn: str) -> Buffer:
        if isinstance(e, A.Name):
            v = self.lookup(e)
            if isinstance(v, Buffer):
                return v
            raise self.err(f"{fn}() needs a tensor or buffer, not {_describe(v)}", e)
        raise self.err(f"{fn}() needs a tensor or buffer name", e)

    def _tag(self, e: A.Call, s: A.Stmt) -> None:
        if len(e.args) < 3:
            raise self.err("tag(x, lambda i, j, ...: (...), \"Name\", captures...) needs at least 3 arguments", e)
        buf = self._buffer_arg(e.args[0], "tag")
        lam, name = e.args[1], e.args[2]
        if not isinstance(lam, A.Lambda):
            raise self.err("the second argument of tag() must be a lambda over the tensor's coordinates", lam)
        if not isinstance(name, A.Str):
            raise self.err("the third argument of tag() must be the tag's name as a string", name)
        if len(lam.params) != buf.rank:
            raise self.err(f"the tag lambda takes {len(lam.params)} coordinate(s) but '{buf.name}' has rank "
                           f"{buf.rank}", lam)
        if buf.tagged:
            raise self.err(f"'{buf.name}' already has a tag binding (one binding per tensor)", e)
        free = _free_names(lam.body, set(lam.params))
        for cap in e.args[3:]:
            if not isinstance(cap, A.Name):
                raise self.err("tag captures must be plain names", cap)
            if cap.id not in free:
                raise self.err(f"capture '{cap.id}' is not used in the tag lambda", cap)
        sid = self._node("tag", s.span)
        saved = dict(self.env)
        for i, p in enumerate(lam.params):
            self.env[p] = _Binding(IVal(self.t.sym(f"arg:{i}")), self.scope_stack[-1])
        body = lam.body.elts if isinstance(lam.body, A.Tuple) else (lam.body,)
        comps = [self.index(c, "tag component") for c in body]
        self.env = saved
        buf.tagged = True
        self.facts.add("tag_bind", buf.id, name.value, len(comps), sid)
        for i, c in enumerate(comps):
            self.facts.add("tag_comp", buf.id, i, c)

    def _operand(self, e: A.Expr, what: str) -> tuple[DVal, Buffer | None]:
        """A data value, or a whole local buffer read slot by slot."""
        if isinstance(e, A.Name):
            v = self.lookup(e)
            if isinstance(v, Buffer) and not v.implicit:
                if v.space != "local":
                    raise self.err(f"{what}: a whole {v.space} tensor cannot be an operand; index it", e)
                return self._read_all(v), v
        v = self.eval(e)
        if not isinstance(v, DVal):
            raise self.err(f"{what} must be a data value or a register array, not {_describe(v)}", e)
        return v, None

    def _read_all(self, buf: Buffer) -> DVal:
        slot = self.t.sym("slot")
        coords, rest = [], slot
        for i, d in enumerate(reversed(buf.const_shape or ())):
            last = i == len(buf.shape) - 1
            coords.append(rest if last else self.t.op("mod", rest, self.t.const(d)))
            if not last:
                rest = self.t.op("floordiv", rest, self.t.const(d))
        aid = self._access(buf, "read_all", tuple(reversed(coords)), slot)
        vid = self._value("load")
        self.facts.add("value_load", vid, aid)
        return DVal(vid, buf.dtype)

    def _assert(self, e: A.Call, s: A.Stmt) -> None:
        rel = e.func_name == "assert_tag"
        self._arity(e, 3 if rel else 2, 3 if rel else 2)
        sid = self._node("assert", s.span)
        (lv, lb), (rv, rb) = self._operand(e.args[0], "assertion operand"), self._operand(e.args[1], "assertion operand")
        if (lb is None) != (rb is None) or (lb and rb and _size(lb) != _size(rb)):
            raise self.err("both sides of a tag assertion must be single values, or register arrays of equal size", e)
        if not rel:
            self.facts.add("assert_eq", sid, lv.vid, rv.vid)
            return
        lam = e.args[2]
        if not isinstance(lam, A.Lambda) or len(lam.params) != 2:
            raise self.err("assert_tag(x, y, lambda tx, ty: ...) needs a two-parameter lambda", lam)
        saved = dict(self.env)
        self._tag_params = {lam.params[0]: "lhs", lam.params[1]: "rhs"}
        for p in lam.params:
            self.env.pop(p, None)
        body = self._relation(lam.body)
        self.env = saved
        self.facts.add("assert_rel", sid, lv.vid, rv.vid, body)

    def _relation(self, e: A.Expr) -> int:
        """The body of an assert_tag lambda: tx[i] / ty[i] become lhs:i / rhs:i symbols."""
        if isinstance(e, A.Subscript) and isinstance(e.value, A.Name) and e.value.id in self._tag_params:
            if len(e.indices) != 1:
                raise self.err("a tag component takes one index", e)
            i = self.const_int(e.indices[0], "tag component index")
            return self.t.sym(f"{self._tag_params[e.value.id]}:{i}")
        if isinstance(e, A.Name) and e.id in self._tag_params:
            raise self.err(f"use a component of the tag, e.g. {e.id}[0]", e)
        if isinstance(e, A.BinOp):
            op = BINARY_OPS.get(e.op)
            if op is None:
                raise self.err(f"operator {e.op} is not allowed in a tag relation", e)
            return self.t.op(op, self._relation(e.left), self._relation(e.right))
        if isinstance(e, A.BoolOp):
            out = self._relation(e.values[0])
            for v in e.values[1:]:
                out = self.t.op(BINARY_OPS[e.op], out, self._relation(v))
            return out
        if isinstance(e, A.UnaryOp):
            return self.t.op(UNARY_OPS[e.op], self._relation(e.operand)) if e.op != "+" else self._relation(e.operand)
        return self.index(e, "tag relation term")

    # ------------------------------------------------------------ assignment
    def _assign(self, target: A.Expr, value: A.Expr, s: A.Stmt) -> None:
        if isinstance(target, A.Subscript):
            if not isinstance(target.value, A.Name):
                raise self.err("assignment target must be a name or name[indices]", target)
            buf = self.lookup(target.value)
            if not isinstance(buf, Buffer) or buf.implicit:
                raise self.err(f"'{target.value.id}' is not a tensor or buffer", target.value)
            self._node("store", s.span)
            v = self.eval(value)
            if isinstance(v, (IVal, BVal)):
                v = DVal(self._value("index"), buf.dtype)
            if not isinstance(v, DVal):
                raise self.err(f"cannot store {_describe(v)} into '{buf.name}'", value)
            coords = self._coords(buf, target.indices, target)
            aid = self._access(buf, "store", coords, self._address(buf, coords))
            self.facts.add("store_value", aid, v.vid)
            return
        if not isinstance(target, A.Name):
            raise self.err("assignment target must be a name or name[indices]", target)
        name = target.id
        if isinstance(value, A.Call) and isinstance(value.func, A.Name):
            fname = value.func.id
            if fname in ("shared", "local") and fname not in self.env:
                return self._alloc(name, value, s)
            f = self.env.get(fname)
            if f is None and fname in self.imports and isinstance(self.imports[fname], LoadMatrix):
                return self._ldmatrix(name, value, s)
            if f is None and fname in self.imports:
                return self._mma(name, value, s)
            if f is None and fname in INSTRUCTIONS:
                self.lookup(value.func)  # raises: not imported
        existing = self.env.get(name)
        if existing is not None and isinstance(existing.value, Buffer) and not existing.value.implicit:
            raise self.err(f"'{name}' is a tensor/buffer; assign to its elements with {name}[...] = ...", target)
        self._node("assign", s.span)
        v = self.eval(value)
        if isinstance(v, DVal):
            buf = existing.value if existing is not None and isinstance(existing.value, Buffer) else None
            if buf is None:
                buf = Buffer(name, name, "local", v.dtype, (), (), None, s.span, implicit=True)
                self._declare(buf)
                self.bind(name, buf, target)
            aid = self._access(buf, "store", (), self.t.const(0))
            self.facts.add("store_value", aid, v.vid)
            return
        if isinstance(v, (IVal, BVal, LayoutVal)):
            if existing is not None and isinstance(existing.value, Buffer):
                raise self.err(f"'{name}' holds data; it cannot become an index or layout", target)
            self.bind(name, v, target)
            return
        raise self.err(f"cannot assign {_describe(v)} to a name", value)

    def _alloc(self, name: str, e: A.Call, s: A.Stmt) -> None:
        space = e.func_name
        assert space is not None
        if len(e.args) != 2:
            raise self.err(f"{space}(dtype, shape{', layout=...' if space == 'shared' else ', init=...'}) "
                           f"takes 2 positional arguments", e)
        allowed = {"layout"} if space == "shared" else {"init"}
        for kw in e.kwargs:
            if kw.name not in allowed:
                raise self.err(f"unknown argument '{kw.name}' for {space}()", kw)
        dt = e.args[0]
        if not isinstance(dt, A.Name) or dt.id not in DTYPES:
            raise self.err(f"unknown element type; expected one of {', '.join(sorted(DTYPES))}", dt)
        shape_e = e.args[1]
        dims = shape_e.elts if isinstance(shape_e, A.Tuple) else (shape_e,)
        shape = tuple(self.const_int(d, f"{space} buffer extent") for d in dims)
        if any(d <= 0 for d in shape):
            raise self.err("buffer extents must be positive", shape_e)
        layout = None
        lay_e = e.kwarg("layout")
        if lay_e is not None:
            lv = self.eval(lay_e)
            if not isinstance(lv, LayoutVal):
                raise self.err(f"layout= needs a layout, not {_describe(lv)}", lay_e)
            layout = lv.layout
            if isinstance(layout, Swizzle):
                raise self.err("a swizzle needs a shape:stride layout to act on: swizzle(...) @ row_major(...)", lay_e)
            if layout.size != prod(shape):
                raise self.err(f"layout {layout} has {layout.size} elements but the buffer has {prod(shape)}", lay_e)
            if layout.rank not in (1, len(shape)):
                raise self.err(f"layout {layout} has rank {layout.rank}; the buffer has rank {len(shape)}", lay_e)
            if layout.rank == 1 and len(shape) > 1:
                layout = Composed(layout, row_major(*shape))
        elif space == "shared":
            layout = row_major(*shape)
        buf = Buffer(name, name, space, dt.id, tuple(self.t.const(d) for d in shape), shape, layout, s.span)
        self._node("alloc", s.span)
        self._declare(buf)
        if name in self.env:
            raise self.err(f"'{name}' is already defined", e)
        self.bind(name, buf, e)
        init = e.kwarg("init")
        if init is not None:
            if space != "local":
                raise self.err("init= is only for local buffers", init)
            v = self.eval(init)
            if isinstance(v, (IVal, BVal)):
                v = DVal(self._value("index"), buf.dtype)
            if not isinstance(v, DVal):
                raise self.err("init= needs a number", init)
            aid = self._access(buf, "write_all", (), self.t.sym("slot"))
            self.facts.add("store_value", aid, v.vid)

    def _ldmatrix(self, name: str, e: A.Call, s: A.Stmt) -> None:
        """`dst = ldmatrix_x4(S[r, c])`: every lane supplies the shared address (r, c) of one row
        of an 8x8 b16 matrix; register slot v of lane l receives element (row, col) of matrix
        v // 2 from the row supplied by lane 8 * (v // 2) + (stored row). Lowered as a load of S
        at the provider lane's (r, c) + column offset, per slot, into a whole-array write of dst."""
        lm: LoadMatrix = self.imports[e.func_name]  # type: ignore[assignment]
        assert self.launch is not None
        if self.launch.group_kind != "warp" or self.launch.group_size != 32:
            raise self.err(f"{lm.name} runs on a warp of 32 threads; the kernel declares "
                           f"{self.launch.group_kind}={self.launch.group_size}", e)
        if len(self.launch.block) != 1:
            raise self.err(f"{lm.name} needs a one-dimensional block", e)
        if len(e.args) != 1 or e.kwargs or not isinstance(e.args[0], A.Subscript):
            raise self.err(f"{lm.name}(S[row, col]) takes one indexed shared buffer: this lane's row address", e)
        src = e.args[0]
        buf = self.lookup(src.value) if isinstance(src.value, A.Name) else None
        if not isinstance(buf, Buffer) or buf.space != "shared" or buf.rank < 2:
            raise self.err(f"{lm.name} reads a shared buffer of rank 2 or more (rows, columns last)", src)
        dst = self.env.get(name)
        values = 2 * lm.matrices
        if dst is None or not isinstance(dst.value, Buffer) or dst.value.space != "local" or _size(dst.value) != values:
            raise self.err(f"the result of {lm.name} needs a local register array of {values} values", e)
        if buf.dtype not in ("bf16", "f16") or dst.value.dtype not in ("bf16", "f16"):
            raise self.err(f"{lm.name} moves 16-bit elements (bf16/f16)", e)
        sid = self._node("ldmatrix", s.span)
        *lead, row, col = (self.index(i) for i in src.indices)  # lead: e.g. a pipeline stage
        t = self.t
        tid, slot = t.sym("tid:0"), t.sym("slot")
        lane, half = t.op("mod", tid, t.const(32)), t.op("mod", slot, t.const(2))
        stored_row = t.op("floordiv", lane, t.const(4)) if not lm.trans else \
            t.op("add", t.op("mul", t.const(2), t.op("mod", lane, t.const(4))), half)
        stored_col = t.op("add", t.op("mul", t.const(2), t.op("mod", lane, t.const(4))), half) if not lm.trans else \
            t.op("floordiv", lane, t.const(4))
        provider = t.op("add", t.op("mul", t.op("floordiv", tid, t.const(32)), t.const(32)),
                        t.op("add", t.op("mul", t.const(8), t.op("floordiv", slot, t.const(2))), stored_row))
        coords = (*(substitute(t, x, {"tid:0": provider}) for x in lead), substitute(t, row, {"tid:0": provider}),
                  t.op("add", substitute(t, col, {"tid:0": provider}), stored_col))
        aid = self._access(buf, "load", coords, self._address(buf, coords))
        vid = self._value("load")
        self.facts.add("value_load", vid, aid)
        self.facts.add("slot_range", sid, values)
        out = self._access(dst.value, "write_all", (), t.sym("slot"))
        self.facts.add("store_value", out, vid)

    def _mma(self, name: str, e: A.Call, s: A.Stmt) -> None:
        instr = self.imports[e.func_name]  # type: ignore[index]
        assert self.launch is not None
        if len(e.args) != 3 or e.kwargs:
            raise self.err(f"{instr.name}(a, b, c) takes three register arrays", e)
        if self.launch.group_kind != instr.group or self.launch.group_size != instr.group_size:
            raise self.err(f"{instr.name} runs on a {instr.group} of {instr.group_size} threads; the kernel declares "
                           f"{self.launch.group_kind}={self.launch.group_size}", e)
        sid = self._node("mma", s.span)
        bufs = []
        for arg, role, spec in zip(e.args, "abc", (instr.a, instr.b, instr.c)):
            buf = self._buffer_arg(arg, instr.name) if isinstance(arg, A.Name) else None
            if buf is None or buf.space != "local" or buf.implicit:
                raise self.err(f"operand {role.upper()} of {instr.name} must be a local register array", arg)
            if _size(buf) != spec.values:
                raise self.err(f"operand {role.upper()} of {instr.name} holds {spec.values} values per lane; "
                               f"'{buf.name}' has {_size(buf)}", arg)
            want = instr.in_dtypes if role != "c" else (instr.acc_dtype,)
            if buf.dtype not in want:
                raise self.err(f"operand {role.upper()} of {instr.name} must be {' or '.join(want)}, "
                               f"'{buf.name}' is {buf.dtype}", arg)
            bufs.append(buf)
        va, vb, vc = (self._read_all(b) for b in bufs)
        out = self.env.get(name)
        if out is None:
            dst = Buffer(name, name, "local", instr.acc_dtype, (self.t.const(instr.c.values),), (instr.c.values,),
                         None, s.span)
            self._declare(dst)
            self.bind(name, dst, e)
        else:
            dst = out.value  # type: ignore[assignment]
            if not isinstance(dst, Buffer) or dst.space != "local" or _size(dst) != instr.c.values:
                raise self.err(f"the result of {instr.name} needs a local register array of {instr.c.values} values",
                               e)
        vm = self._value("mma", (va.vid, vb.vid, vc.vid))
        aid = self._access(dst, "write_all", (), self.t.sym("slot"))
        self.facts.add("store_value", aid, vm)
        self.facts.add("mma", sid, instr.name, va.vid, vb.vid, vc.vid, aid)


def _size(buf: Buffer) -> int:
    return prod(buf.const_shape or ())


def _structure(x):
    return tuple(_structure(y) for y in x) if isinstance(x, tuple) else 0


def _describe(v: Val) -> str:
    if isinstance(v, Buffer):
        return f"the {v.space} buffer '{v.name}'"
    return {IVal: "an integer expression", BVal: "a condition", DVal: "a data value", LayoutVal: "a layout",
            DType: "an element type", Builtin: "a builtin function", InstrVal: "a matrix instruction"}.get(
        type(v), type(v).__name__)


def _free_names(e: A.Expr, bound: set[str]) -> set[str]:
    out: set[str] = set()

    def go(x) -> None:
        if isinstance(x, A.Name):
            if x.id not in bound:
                out.add(x.id)
        elif isinstance(x, tuple):
            for y in x:
                go(y)
        elif hasattr(x, "__dataclass_fields__"):
            for f in x.__dataclass_fields__:
                if f != "span":
                    go(getattr(x, f))

    go(e)
    return out


def resolve_imports(module: A.Module) -> dict[str, Instruction | LoadMatrix]:
    out: dict[str, Instruction | LoadMatrix] = {}
    for imp in module.imports:
        vendor = MODULES.get(imp.module)
        if vendor is None:
            raise FrontEndError(f"unknown module '{imp.module}' (known: {', '.join(sorted(MODULES))})", imp.span)
        for n in imp.names:
            instr = INSTRUCTIONS.get(n) or (LOAD_MATRIX.get(n) if vendor == "nvidia" else None)
            if instr is None or getattr(instr, "vendor", "nvidia") != vendor:
                offered = sorted([i.name for i in INSTRUCTIONS.values() if i.vendor == vendor] +
                                 (list(LOAD_MATRIX) if vendor == "nvidia" else []))
                raise FrontEndError(f"'{imp.module}' has no instruction '{n}' (it offers: {', '.join(offered)})",
                                    imp.span)
            out[n] = instr
    return out


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
