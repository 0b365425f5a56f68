"""Lowering of expressions: names, index arithmetic, loads, calls (mixed into KernelLowering)."""
from __future__ import annotations

from math import prod

from ..hw.dtypes import DTYPES
from ..hw.expr import BINARY_OPS, BOOL_OPS, UNARY_OPS, ExprLimitError
from ..hw.instructions import INSTRUCTIONS
from ..hw.layout import AnyLayout, Composed, Layout, Swizzle, col_major, row_major
from ..lang import ast as A
from ..lang.resolve import BUILTINS, ELEMENTWISE, LANE_EXCHANGE, SLOT_REDUCTIONS, butterfly_operand
from .values import (
    Buffer,
    Builtin,
    BVal,
    Conditional,
    DType,
    DVal,
    InstrVal,
    IVal,
    LayoutVal,
    LoopLocal,
    Val,
    const_size,
    describe,
    structure,
)

# `value_op` names of elementwise operators on data: the index operators' names plus true division and power
DATA_BINARY_OPS = {**BINARY_OPS, "/": "div", "**": "pow"}
DATA_UNARY_OPS = {**UNARY_OPS, "+": "pos"}

# the tag components a reduction's `drops=` may name (the simulator's shadow carries 6: sim/state.LMAX)
MAX_TAG = 6


class ExpressionLowering:
    """Lowering of expressions: names, index arithmetic, loads, calls."""

    def lookup(self, node: A.Name) -> Val:
        b = self.env.get(node.id)
        if b is not None:
            if isinstance(b.value, Conditional):
                raise self.err(f"index variable '{node.id}' is assigned in a branch, so its value after the "
                               f"`if` depends on the path taken (unsupported)", node)
            if isinstance(b.value, LoopLocal):
                raise self.err(f"{b.value.what} '{node.id}' depends on the loop variable '{b.value.loop_var}' of the loop "
                               f"at {b.value.loop}, so it has no value after that loop", node)
            return b.value
        ended = self.ended_loops.get(node.id)
        if ended is not None:
            raise self.err(f"loop variable '{node.id}' is used after its loop (at {ended}); it has no value there",
                           node)
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
            raise self.err(f"{what} must be an integer expression, not {describe(v)}", e)
        return v.eid

    def cond(self, e: A.Expr) -> int | None:
        v = self.eval(e)
        if isinstance(v, (BVal, IVal)):
            return v.eid
        if isinstance(v, DVal):
            return None  # data-dependent condition: the analysis is path-insensitive
        raise self.err(f"condition must be a boolean expression, not {describe(v)}", e)

    def const_int(self, e: A.Expr, what: str) -> int:
        eid = self.index(e, what)
        node = self.t.nodes[eid]
        if node.op != "const":
            raise self.err(f"{what} must be a constant integer", e)
        return node.value

    def eval(self, e: A.Expr) -> Val:
        try:  # zero-cost: no extra frame per nesting level (lang/depth.py counts frames per level)
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
                vid = self._value("const")
                if e.value == 0.0:  # a known zero (padding): docs/language.md, Zero tags
                    self.mark_zero(vid)
                return DVal(vid, "f32")
            if isinstance(e, A.Str):
                raise self.err("a string is only allowed as the name argument of tag(...)", e)
            if isinstance(e, A.BinOp):
                return self._binop(e)
            if isinstance(e, A.UnaryOp):
                v = self.eval(e.operand)
                if isinstance(v, DVal):
                    out = DVal(self._value("elementwise", (v.vid,), op=DATA_UNARY_OPS.get(e.op, e.op)), v.dtype)
                    if v.vid in self.zero_values and e.op in "+-":
                        self.mark_zero(out.vid)
                    return out
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
                    raise self.err(f"only tensors and buffers can be indexed, not {describe(base)}", e)
                return self.load(base, e.indices, e)
            if isinstance(e, A.Call):
                return self._call(e)
            if isinstance(e, A.Tuple):
                raise self.err("a tuple is not a value here", e)
            if isinstance(e, A.Lambda):
                raise self.err("a lambda is only allowed as an argument of tag(...) or assert_tag(...)", e)
            if isinstance(e, A.IfExp):
                raise self.err("conditional expressions (x if c else y) are not supported: use load(A[i], mask=c, other=y) for a masked load, or select(c, x, y)", e)
            if isinstance(e, A.Attribute):
                raise self.err("attribute access is not part of the language", e)
            raise self.err("unsupported expression", e)
        except ExprLimitError as exc:  # the innermost expression whose constant or depth is out of bounds
            raise self.err(str(exc), e) from None

    def _type_error(self, e, v):
        raise self.err(f"operator cannot be applied to {describe(v)}", e)

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
                    args.append(self._index_value(v.eid))
                else:
                    self._type_error(side, v)
            dtype = left.dtype if isinstance(left, DVal) else right.dtype  # type: ignore[union-attr]
            vid = self._value("elementwise", tuple(args), op=DATA_BINARY_OPS.get(e.op, e.op))
            self._butterfly(e.op, (e.left, e.right), vid, args)
            return DVal(vid, dtype)
        for side, v in ((e.left, left), (e.right, right)):
            if not isinstance(v, (IVal, BVal)):
                self._type_error(side, v)
        if e.op in ("/", "**"):
            raise self.err(f"operator '{e.op}' is not defined on index expressions (use // for division)", e)
        op = BINARY_OPS[e.op]
        divisor = self.t.nodes[right.eid]  # type: ignore[union-attr]
        if op in ("floordiv", "mod") and divisor.op == "const" and divisor.value == 0:
            raise self.err(f"{'division' if op == 'floordiv' else 'remainder'} by zero", e)
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
        self.vector_access(aid, node)
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
        if buf.layout is not None and buf.base is not None:  # a subview at a varying offset
            return self.t.op("add", buf.base, buf.layout.offset(self.t, coords))
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
            raise self.err(f"{describe(f)} is not callable", e.func)
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
        if name in LANE_EXCHANGE:
            return self._lane_exchange(e, name)
        if name in SLOT_REDUCTIONS:
            return self._slot_reduce(e, name)
        if name in ELEMENTWISE:
            args = [self.eval(a) for a in e.args if not (name == "cast" and isinstance(a, A.Name) and a.id in DTYPES)]
            if name == "cast":
                self._arity(e, 2, 2)
            out = self._elementwise(e, args)
            if name == "cast" and isinstance(args[0], DVal) and args[0].vid in self.zero_values:
                self.mark_zero(out.vid)
            return out
        if name in ("row_major", "col_major"):
            dims = tuple(self.const_int(a, "layout extent") for a in e.args)
            if not dims:
                raise self.err(f"{name}() needs at least one extent", e)
            return LayoutVal(row_major(*dims) if name == "row_major" else col_major(*dims))
        if name == "layout":
            self._arity(e, 2, 2)
            shape, stride = self._nested(e.args[0]), self._nested(e.args[1])
            if structure(shape) != structure(stride):
                raise self.err("layout(shape, stride): shape and stride must have the same nesting", e)
            return LayoutVal(Layout(shape, stride))
        if name == "swizzle":
            self._arity(e, 3, 3)
            b, m, s = (self.const_int(a, "swizzle parameter") for a in e.args)
            if b < 0 or m < 0 or abs(s) < b:
                raise self.err(f"swizzle({b}, {m}, {s}) needs B >= 0, M >= 0 and |S| >= B", e)
            if b + m + abs(s) > 31:  # its masks are 32-bit constants: offsets are 32-bit
                raise self.err(f"swizzle({b}, {m}, {s}) needs B + M + |S| <= 31 (shared-memory offsets are 32-bit)", e)
            return LayoutVal(Swizzle(b, m, s))
        if name in ("shared", "local"):
            raise self.err(f"{name}(...) must be assigned to a name", e)
        raise self.err(f"{name}(...) is a statement, not a value", e)

    def _lane_reduce(self, e: A.Call, name: str) -> DVal:
        """`lane_max(x, width)` / `lane_sum(x, width)`: combine x over each aligned group of `width`
        lanes (a shuffle-xor butterfly); every lane gets its group's result. The result is a
        statistic: its tag is x's tag without the last component (the reduced one)."""
        self._arity(e, 2, 2)
        drops = self._drops(e, name)
        x = self.eval(e.args[0])
        if not isinstance(x, DVal):
            raise self.err(f"{name}() reduces a data value, not {describe(x)}", e.args[0])
        width = self.const_int(e.args[1], f"{name} width")
        assert self.launch is not None
        self.require_whole_groups(f"{name}()", e)
        g = self.launch.group_size
        if width < 2 or width & (width - 1) or g % width:
            raise self.err(f"{name} width must be a power of two in [2, {g}] dividing the {self.launch.group_kind} "
                           f"size", e.args[1])
        vid = self._value("reduce", (x.vid,))
        self.facts.add("lane_reduce", vid, name[5:], width)
        self.facts.add("reduce_drops", vid, drops)
        return DVal(vid, x.dtype)

    def _drops(self, e: A.Call, name: str) -> int:
        """The `drops=` keyword of a reduction: which component of the operand's tag the reduced
        elements vary in (negative: from the end; default -1, the last). A constant in
        [-MAX_TAG, MAX_TAG): whether the operand's tag has that component is a property of its
        flow, checked by ave/row-statistics. Which keywords a call takes is checked before
        lowering (lang/keywords.py), for the simulator too."""
        given = e.kwarg("drops")
        if given is None:
            return -1
        drops = self.const_int(given, f"{name} drops")
        if not -MAX_TAG <= drops < MAX_TAG:
            raise self.err(f"{name}(): drops={drops} names no tag component (tags have at most {MAX_TAG}; "
                           f"-1 is the last)", given)
        return drops

    def _slot_reduce(self, e: A.Call, name: str) -> DVal:
        """`reduce_max(s)` / `reduce_sum(s)`: combine every slot of the 1-D register array `s` of this
        thread. Like a lane reduction the result is a statistic: its tag is the slots' tag without the
        dropped component, and every slot must hold an element of the same row (ave/row-statistics)."""
        buf, axis, drops = self._slot_reduce_args(e, name)
        if buf.rank != 1:
            raise self.err(f"{name}(..., axis={axis}) of the rank-{buf.rank} register array '{buf.name}' is a "
                           f"register array: assign it to a name (m = {name}({buf.name}, axis={axis}))", e)
        slots = self._read_all(buf)
        vid = self._value("reduce", (slots.vid,))
        self.facts.add("slot_reduce", vid, name[7:], const_size(buf))
        self.facts.add("reduce_drops", vid, drops)
        return DVal(vid, buf.dtype)

    def _axis_reduce(self, name: str, e: A.Call, s: A.Stmt) -> None:
        """`m = reduce_max(s, axis=a)` of a register array of rank >= 2: m (a register array of s's
        shape without axis a; an existing one must have that many slots) gets, in each slot, the
        statistic of the slots of s along axis a at the same other coordinates (`slot_reduce_axis`)."""
        fname = e.func_name or ""
        buf, axis, drops = self._slot_reduce_args(e, fname)
        shape = buf.const_shape or ()
        out_shape = shape[:axis] + shape[axis + 1:]
        self._node("assign", s.span)
        slots = self._read_all(buf)
        vid = self._value("reduce", (slots.vid,))
        self.facts.add("slot_reduce", vid, fname[7:], shape[axis])
        self.facts.add("reduce_drops", vid, drops)
        self.facts.add("slot_reduce_axis", vid, prod(shape[axis + 1:]), prod(out_shape))
        existing = self.env.get(name)
        dst = existing.value if existing is not None else None
        if dst is None:
            dst = Buffer(name, name, "local", buf.dtype, tuple(self.t.const(d) for d in out_shape), out_shape, None,
                         s.span)
            self._declare(dst)
            self.bind(name, dst, e)
        elif not isinstance(dst, Buffer) or dst.space != "local" or dst.implicit or const_size(dst) != prod(out_shape):
            raise self.err(f"the result of {fname}(..., axis={axis}) needs a register array of {prod(out_shape)} "
                           f"values", e)
        aid = self._access(dst, "write_all", (), self.t.sym("slot"))
        self.facts.add("store_value", aid, vid)

    def _slot_reduce_args(self, e: A.Call, name: str) -> tuple[Buffer, int, int]:
        """The register array, axis and drops of a slot reduction, checked (a located error each)."""
        self._arity(e, 1, 2)
        drops = self._drops(e, name)
        axis_e = e.kwarg("axis") if e.kwarg("axis") is not None else (e.args[1] if len(e.args) == 2 else None)
        if axis_e is not None and len(e.args) == 2 and e.kwarg("axis") is not None:
            raise self.err(f"{name}() got the axis twice", e)
        buf = self.lookup(e.args[0]) if isinstance(e.args[0], A.Name) else None
        if not isinstance(buf, Buffer) or buf.space != "local" or buf.implicit or buf.const_shape is None:
            raise self.err(f"{name}() reduces a register array (local(...)) given by name", e.args[0])
        if axis_e is None and buf.rank != 1:
            raise self.err(f"{name}() of the rank-{buf.rank} register array '{buf.name}' needs axis= (which "
                           f"axis it reduces)", e)
        axis = 0 if axis_e is None else self.const_int(axis_e, f"{name} axis")
        if not 0 <= axis < buf.rank:
            raise self.err(f"{name}() reduces an axis in [0, {buf.rank}) of '{buf.name}' (rank {buf.rank}), not "
                           f"axis {axis}", axis_e)
        return buf, axis, drops

    def _lane_exchange(self, e: A.Call, name: str) -> DVal:
        """`shuffle_xor(x, mask)`, `shuffle(x, lane)`, `readfirstlane(x)`: x as another lane of the same
        warp/wave computed it. The value (and its tag) is x's at the source thread, whose linear id is
        recorded as an index expression of this thread's (`lane_source`)."""
        arity = {"shuffle_xor": (2, 3), "shuffle": (2, 2), "readfirstlane": (1, 1)}[name]
        self._arity(e, *arity)
        x = self.eval(e.args[0])
        if not isinstance(x, DVal):
            raise self.err(f"{name}() exchanges a data value, not {describe(x)}", e.args[0])
        assert self.launch is not None
        self.require_whole_groups(f"{name}()", e)
        g = self.launch.group_size
        tid = self._linear_thread()
        first = self.t.op("sub", tid, self.t.op("mod", tid, self.t.const(g)))  # lane 0 of this group
        if name == "shuffle_xor":
            mask = self.const_int(e.args[1], "shuffle_xor mask")
            width = self.const_int(e.args[2], "shuffle_xor width") if len(e.args) == 3 else g
            if width < 2 or width & (width - 1) or width > g:
                raise self.err(f"the width of shuffle_xor must be a power of two in [2, {g}]", e.args[2])
            if not 0 <= mask < width:
                raise self.err(f"the mask of shuffle_xor must lie in [0, {width}) (a lane of the same group of "
                               f"{width})", e.args[1])
            src = self.t.op("xor", tid, self.t.const(mask))
        elif name == "shuffle":
            lane = self.eval(e.args[1])
            if not isinstance(lane, IVal):
                raise self.err("the source lane of shuffle() must be an index expression", e.args[1])
            src = self.t.op("add", first, self.t.op("mod", lane.eid, self.t.const(g)))
        else:
            src = first
        vid = self._value("shuffle", (x.vid,))
        self.facts.add("lane_source", vid, src)
        return DVal(vid, x.dtype)

    def _elementwise(self, e: A.Call, args: list[Val]) -> DVal:
        vids, dtype = [], "f32"
        for a, node in zip(args, e.args):
            if isinstance(a, DVal):
                vids.append(a.vid)
                dtype = a.dtype
            elif isinstance(a, (IVal, BVal)):
                vids.append(self._index_value(a.eid))
            else:
                self._type_error(node, a)
        vid = self._value("elementwise", tuple(vids), op=e.func_name or "call")
        self._butterfly(e.func_name or "", e.args, vid, vids)
        return DVal(vid, dtype)

    def _butterfly(self, op: str, nodes: tuple, vid: int, args: list[int]) -> None:
        """`butterfly(v, own, partner)` for a butterfly step (lang.resolve.butterfly_operand), and
        `reduce_drops` when its shuffle_xor names the component the step reduces over."""
        pos = butterfly_operand(op, tuple(nodes))
        if pos is not None and len(args) == 2:
            self.facts.add("butterfly", vid, args[pos], args[1 - pos])
            shuffle = nodes[1 - pos]
            if shuffle.kwarg("drops") is not None:
                self.facts.add("reduce_drops", vid, self._drops(shuffle, "shuffle_xor"))

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
