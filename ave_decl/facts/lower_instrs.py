"""Lowering of allocations, async copies and matrix instructions (mixed into KernelLowering)."""
from __future__ import annotations

from math import prod

from ..hw.dtypes import DTYPE_BYTES, DTYPES
from ..hw.expr import CONST_BOUND, substitute, symbols
from ..hw.instructions import LoadMatrix
from ..hw.layout import Based, buffer_layout, row_major
from ..hw.targets import TARGETS
from ..lang import ast as A
from .lower_stmts import symbol_words
from .offset_range import interval
from .values import Buffer, BVal, DVal, IVal, LayoutVal, const_size, describe


class InstructionLowering:
    """Lowering of allocations, async copies and matrix instructions."""

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
            raise self.err(f"{fn}() needs a tensor or buffer, not {describe(v)}", e)
        raise self.err(f"{fn}() needs a tensor or buffer name", e)

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
        shape = self._const_shape(shape_e, f"{space} buffer")
        if prod(shape) >= CONST_BOUND:
            raise self.err(f"the buffer has {prod(shape)} elements; a buffer holds fewer than 2**31", shape_e)
        if space == "shared":
            self._charge_shared(prod(shape) * DTYPE_BYTES[dt.id], e)
        layout = None
        lay_e = e.kwarg("layout")
        if lay_e is not None:
            lv = self.eval(lay_e)
            if not isinstance(lv, LayoutVal):
                raise self.err(f"layout= needs a layout, not {describe(lv)}", lay_e)
            try:
                layout = buffer_layout(lv.layout, shape)
            except ValueError as exc:
                raise self.err(str(exc), lay_e) from None
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
                v = DVal(self._index_value(v.eid), buf.dtype)
            if not isinstance(v, DVal):
                raise self.err("init= needs a number", init)
            aid = self._access(buf, "write_all", (), self.t.sym("slot"))
            self.facts.add("store_value", aid, v.vid)

    def _subview(self, name: str, e: A.Call, s: A.Stmt) -> None:
        """`V = subview(S, offset, shape)`: a buffer of its own (shape, bounds, tag) whose elements
        are S's storage from element `offset` on, row-major. Accesses through it carry storage
        addresses, so the races and the provenance of every alias of S meet (`alias` facts)."""
        if len(e.args) != 3 or e.kwargs:
            raise self.err("subview(buffer, offset, shape) takes a shared buffer, an element offset and a shape", e)
        storage = self.lookup(e.args[0]) if isinstance(e.args[0], A.Name) else None
        if not isinstance(storage, Buffer) or storage.space != "shared" or storage.storage is not None:
            raise self.err("subview() views a shared buffer declared with shared(...)", e.args[0])
        if storage.const_shape is None or storage.layout != row_major(*storage.const_shape):
            raise self.err("subview() views a shared buffer without a layout (its storage offsets are row-major)",
                           e.args[0])
        if storage.tagged:
            raise self.err(f"'{storage.name}' is tagged: tag its subviews instead of the storage they share", e.args[0])
        shape = self._const_shape(e.args[2], "subview")
        offset, base = self._subview_offset(e.args[1], storage, prod(shape))
        buf = Buffer(name, name, "shared", storage.dtype, tuple(self.t.const(d) for d in shape), shape,
                     Based(row_major(*shape), 0 if base is not None else offset), s.span, storage=storage.id,
                     base=base)
        self._node("alloc", s.span)
        self._declare(buf)
        self.facts.add("alias", buf.id, storage.id, offset)
        if base is not None:
            self.facts.add("alias_moving", buf.id, base)
        storage.has_views = True
        if name in self.env:
            raise self.err(f"'{name}' is already defined", e)
        self.bind(name, buf, e)

    def _subview_offset(self, e: A.Expr, storage: Buffer, size: int) -> tuple[int, int | None]:
        """A subview's offset: a constant (offset, None), or an index expression of loop variables
        and sizes, shown by interval arithmetic to keep the view inside its storage in every
        iteration: (-1, the expression)."""
        eid = self.index(e, "subview offset")
        total = prod(storage.const_shape or ())
        node = self.t.nodes[eid]
        if node.op == "const":
            if node.value < 0 or node.value + size > total:
                raise self.err(f"the subview spans elements {node.value} to {node.value + size - 1} of "
                               f"'{storage.name}', which holds {total}", e)
            return node.value, None
        other = {n for n in symbols(self.t, eid) if not n.startswith(("loop:", "size:"))}
        if other:
            raise self.err(f"a subview's offset may vary with loop variables and sizes only (one offset for every "
                           f"thread); this one depends on {symbol_words(other)}", e)
        lo, hi = interval(self.t, eid, self.loop_ranges)
        if lo is None or hi is None or lo < 0 or hi + size > total:
            found = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
            raise self.err(f"cannot show that the subview lies inside '{storage.name}' ({total} elements) in every "
                           f"iteration: its offset lies in {found}, it needs [0, {total - size}]", e)
        return -1, eid

    def _const_shape(self, shape_e: A.Expr, what: str) -> tuple[int, ...]:
        """A buffer's shape: constant, positive extents (one, or a tuple)."""
        dims = shape_e.elts if isinstance(shape_e, A.Tuple) else (shape_e,)
        shape = tuple(self.const_int(d, f"{what} extent") for d in dims)
        if any(d <= 0 for d in shape):
            raise self.err(f"{what} extents must be positive", shape_e)
        return shape

    def _charge_shared(self, nbytes: int, e: A.Call) -> None:
        """Add a shared buffer (all its stages) to the block's shared memory; past the declared
        target's per-block limit (hw/targets.py) the kernel cannot launch."""
        assert self.launch is not None
        target = TARGETS[self.launch.group_kind]
        self.shared_bytes += nbytes
        if self.shared_bytes > target.shared_bytes:
            raise self.err(f"shared memory: this buffer ({nbytes} bytes) brings the block to {self.shared_bytes} bytes; "
                           f"{target.name} allows {target.shared_bytes} bytes ({target.shared_bytes // 1024} KiB) "
                           f"per block", e)

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
        self.require_whole_groups(lm.name, e)
        if len(e.args) != 1 or e.kwargs or not isinstance(e.args[0], A.Subscript):
            raise self.err(f"{lm.name}(S[row, col]) takes one indexed shared buffer: this lane's row address", e)
        src = e.args[0]
        buf = self.lookup(src.value) if isinstance(src.value, A.Name) else None
        if not isinstance(buf, Buffer) or buf.space != "shared" or buf.rank < 2:
            raise self.err(f"{lm.name} reads a shared buffer of rank 2 or more (rows, columns last)", src)
        if len(src.indices) != buf.rank:
            raise self.err(f"{buf.name} has rank {buf.rank}: {len(src.indices)} indices given", src)
        dst = self.env.get(name)
        values = 2 * lm.matrices
        if dst is None or not isinstance(dst.value, Buffer) or dst.value.space != "local" or const_size(dst.value) != values:
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
        self.require_whole_groups(instr.name, e)
        sid = self._node("mma", s.span)
        bufs = []
        for arg, role, spec in zip(e.args, "abc", (instr.a, instr.b, instr.c)):
            buf = self._buffer_arg(arg, instr.name) if isinstance(arg, A.Name) else None
            if buf is None or buf.space != "local" or buf.implicit:
                raise self.err(f"operand {role.upper()} of {instr.name} must be a local register array", arg)
            if const_size(buf) != spec.values:
                raise self.err(f"operand {role.upper()} of {instr.name} holds {spec.values} values per lane; "
                               f"'{buf.name}' has {const_size(buf)}", arg)
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
            if not isinstance(dst, Buffer) or dst.space != "local" or const_size(dst) != instr.c.values:
                raise self.err(f"the result of {instr.name} needs a local register array of {instr.c.values} values",
                               e)
        vm = self._value("mma", (va.vid, vb.vid, vc.vid))
        aid = self._access(dst, "write_all", (), self.t.sym("slot"))
        self.facts.add("store_value", aid, vm)
        self.facts.add("mma", sid, instr.name, va.vid, vb.vid, vc.vid, aid)
