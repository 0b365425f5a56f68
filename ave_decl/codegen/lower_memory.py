"""Buffers: global tensors, shared arrays with layouts and swizzles, register arrays; loads,
stores and asynchronous copies (one 16-byte `cp.async` for a loop over 8 consecutive bf16)."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..hw.expr import ExprTable
from ..hw.layout import Composed, Layout, Swizzle, buffer_layout, col_major, row_major, storage_size
from ..lang import ast as A
from ..lang.consts import const_int
from .dtypes import I32, I64, element_bytes, load_convert, storage_type, store_convert
from .errors import CodegenError
from .llvm import for_range
from .values import ConstInt, GlobalTensor, LayoutConst, LocalArray, SharedArray, Val

SHARED_ALIGN = 16  # bytes: what cp.async and ldmatrix need; more would push a kernel past the verified budget
VECTOR_BYTES = (4, 8, 16)  # sizes of one asynchronous copy instruction
UNROLLED_FILL = 64  # a `local(..., init=)` of more elements is filled by a loop
MAX_LOCAL_BYTES = 512 * 1024  # local memory per thread on NVIDIA GPUs (CUDA's limit)


class MemoryLowering:
    """Mixed into KernelLowering."""

    b: ir.IRBuilder

    # ----------------------------------------------------------- layouts
    def layout_value(self, e: A.Expr):
        consts = self.consts()  # type: ignore[attr-defined]

        def num(x: A.Expr) -> int:
            v = const_int(x, consts)
            if v is None:
                raise CodegenError("a layout needs constant integers", x.span)
            return v

        def nested(x: A.Expr):
            return tuple(nested(y) for y in x.elts) if isinstance(x, A.Tuple) else num(x)

        if isinstance(e, A.Name) and isinstance(self.env.get(e.id), LayoutConst):  # type: ignore[attr-defined]
            return self.env[e.id].layout  # type: ignore[attr-defined]
        if isinstance(e, A.BinOp) and e.op == "@":
            return Composed(self.layout_value(e.left), self.layout_value(e.right))
        if isinstance(e, A.Call) and e.func_name in ("row_major", "col_major"):
            dims = [num(a) for a in e.args]
            return row_major(*dims) if e.func_name == "row_major" else col_major(*dims)
        if isinstance(e, A.Call) and e.func_name == "layout" and len(e.args) == 2:
            return Layout(nested(e.args[0]), nested(e.args[1]))
        if isinstance(e, A.Call) and e.func_name == "swizzle":
            return Swizzle(*(num(a) for a in e.args))
        raise CodegenError("not a layout expression", e.span)

    # ------------------------------------------------------- allocations
    def alloc(self, name: str, e: A.Call, s: A.Stmt) -> None:
        if len(e.args) < 2 or not isinstance(e.args[0], A.Name):
            raise CodegenError(f"{e.func_name}(dtype, shape) expected", e.span)
        dtype = e.args[0].id
        dims_e = e.args[1].elts if isinstance(e.args[1], A.Tuple) else (e.args[1],)
        shape = []
        for d in dims_e:
            v = const_int(d, self.consts())  # type: ignore[attr-defined]
            if v is None or v < 1:
                raise CodegenError("a buffer extent must be a positive constant", d.span)
            shape.append(v)
        elem = storage_type(dtype, e.args[0].span)
        count = int(np.prod(shape))
        key = id(s)
        if e.func_name == "shared":
            arr = self.shared_arrays.get(key)  # type: ignore[attr-defined]
            if arr is None:
                lay_e = e.kwarg("layout")
                layout = self.layout_value(lay_e) if lay_e is not None else None
                try:
                    if layout is not None:
                        layout = buffer_layout(layout, tuple(shape))
                    cosize = count if layout is None else storage_size(layout, tuple(shape))
                except ValueError as exc:
                    raise CodegenError(str(exc), (lay_e or e).span) from None
                offset = self.info.shared_bytes  # type: ignore[attr-defined]
                self.info.shared_bytes = offset + -(-cosize * element_bytes(dtype) // SHARED_ALIGN) * SHARED_ALIGN  # type: ignore[attr-defined]
                ptr = self.t.shared_array(self.ab, self.module, name, elem, cosize, offset)  # type: ignore[attr-defined]  (entry block: dominates every use)
                arr = SharedArray(name, ptr, dtype, tuple(shape), layout, cosize)
                if layout is not None:
                    arr.table = ExprTable()
                    arr.offset_eid = layout.offset(arr.table, tuple(arr.table.sym(f"c{i}") for i in range(len(shape))))
                self.shared_arrays[key] = arr  # type: ignore[attr-defined]
            self.env[name] = arr  # type: ignore[attr-defined]
            return
        arr = self.local_arrays.get(key)  # type: ignore[attr-defined]
        if arr is None:
            self.info.local_bytes += count * element_bytes(dtype)  # type: ignore[attr-defined]
            if self.info.local_bytes > MAX_LOCAL_BYTES:  # type: ignore[attr-defined]
                raise CodegenError(f"register arrays of {self.info.local_bytes} bytes per thread: more than the "  # type: ignore[attr-defined]
                                   f"{MAX_LOCAL_BYTES // 1024} KiB of local memory a GPU thread has", e.span)
            slot = self.t.alloca(self.ab, ir.ArrayType(elem, count), name)  # type: ignore[attr-defined]
            arr = LocalArray(name, slot, dtype, tuple(shape))
            self.local_arrays[key] = arr  # type: ignore[attr-defined]
        init = e.kwarg("init")
        fill = self.expr(init) if init is not None else Val(ir.Constant(ir.FloatType(), 0.0), "float")  # type: ignore[attr-defined]
        raw = store_convert(self.b, self.as_float(fill) if dtype not in ("i8", "i32", "u32", "i64")  # type: ignore[attr-defined]
                            else self.as_int(fill), dtype)  # type: ignore[attr-defined]
        if count <= UNROLLED_FILL:  # small arrays: stores SROA turns into register moves
            for i in range(count):
                self.b.store(raw, self.b.gep(arr.ptr, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True))
        else:
            self._fill_loop(arr, raw, count)
        self.env[name] = arr  # type: ignore[attr-defined]

    def subview(self, name: str, e: A.Call) -> None:
        """`V = subview(S, offset, shape)`: S's storage from element `offset` on, read row-major;
        the front end checked that S has no layout and that the view lies inside it."""
        storage = self.env.get(e.args[0].id) if len(e.args) == 3 and isinstance(e.args[0], A.Name) else None  # type: ignore[attr-defined]
        if not isinstance(storage, SharedArray):
            raise CodegenError("subview(shared, offset, shape) views a shared array", e.span)
        dims = e.args[2].elts if isinstance(e.args[2], A.Tuple) else (e.args[2],)
        shape = tuple(self.const_arg(d) for d in dims)  # type: ignore[attr-defined]
        fixed = const_int(e.args[1], self.consts())  # type: ignore[attr-defined]
        if fixed is not None:
            offset, builder = ir.Constant(I32, fixed), self.ab  # type: ignore[attr-defined]
        else:  # an offset that varies with a loop variable: moved where the view is declared
            offset, builder = self.as_int(self.expr(e.args[1])), self.b  # type: ignore[attr-defined]
        ptr = builder.gep(storage.ptr, [offset], source_etype=storage_type(storage.dtype))
        self.env[name] = SharedArray(name, ptr, storage.dtype, shape, None, int(np.prod(shape)))  # type: ignore[attr-defined]

    def _fill_loop(self, arr: LocalArray, raw: ir.Value, count: int) -> None:
        b = self.b
        for_range(b, self.t.alloca(self.ab, I32), ir.Constant(I32, count),  # type: ignore[attr-defined]
                  lambda i: b.store(raw, b.gep(arr.ptr, [ir.Constant(I32, 0), i], inbounds=True)), f"{arr.name}.fill")

    # ------------------------------------------------------------ addressing
    def indices(self, e: A.Subscript) -> list[ir.Value]:
        return [self.as_int(self.expr(i)) for i in e.indices]  # type: ignore[attr-defined]

    def buffer(self, e: A.Subscript):
        if not isinstance(e.value, A.Name):
            raise CodegenError("only named buffers can be indexed", e.span)
        buf = self.env.get(e.value.id)  # type: ignore[attr-defined]
        if not isinstance(buf, (GlobalTensor, SharedArray, LocalArray)):
            raise CodegenError(f"{e.value.id} is not a buffer", e.value.span)
        rank = len(buf.dims) if isinstance(buf, GlobalTensor) else len(buf.shape)
        if len(e.indices) != rank:
            raise CodegenError(f"{buf.name} has rank {rank}: {len(e.indices)} indices given", e.span)
        return buf

    def address(self, e: A.Subscript, access: str = "load") -> tuple[object, ir.Value]:
        """The buffer and a pointer to the element `e` names (its physical position); the
        pointer's element type is `storage_type(buf.dtype)`. On a target that checks bounds each
        access is a numbered site it guards (CodegenTarget.guard)."""
        buf = self.buffer(e)
        idx = self.indices(e)
        b = self.b
        if isinstance(buf, GlobalTensor):
            off = ir.Constant(I64, 0)
            for c, d in zip(idx, buf.dims):
                off = b.add(b.mul(off, b.sext(d.v, I64)), b.sext(c, I64))
            ptr = b.gep(buf.ptr, [off], source_etype=storage_type(buf.dtype))
        elif isinstance(buf, SharedArray):
            phys = self.layout_offset(buf, idx)
            ptr = b.gep(buf.ptr, [phys], source_etype=storage_type(buf.dtype))
        else:
            lin = ir.Constant(I32, 0)
            for c, d in zip(idx, buf.shape):
                lin = b.add(b.mul(lin, ir.Constant(I32, d)), c)
            ptr = b.gep(buf.ptr, [ir.Constant(I32, 0), lin])
        if not self.t.checks_bounds:  # type: ignore[attr-defined]
            return buf, ptr
        site = len(self.info.access_sites)  # type: ignore[attr-defined]
        self.info.access_sites.append((e.span, buf.name, access))  # type: ignore[attr-defined]
        # every coordinate inside its extent, as the verifier's bounds invariants read them; a
        # shared layout's offset also inside the storage it spans (its cosize)
        dims = [d.v for d in buf.dims] if isinstance(buf, GlobalTensor) else [ir.Constant(I32, d) for d in buf.shape]
        inside = ir.Constant(ir.IntType(1), 1)
        for c, d in zip(idx, dims):
            inside = b.and_(inside, b.icmp_unsigned("<", c, d))
        if isinstance(buf, SharedArray) and buf.layout is not None:
            inside = b.and_(inside, b.icmp_unsigned("<", phys, ir.Constant(I32, buf.cosize)))
        return buf, self.t.guard(b, ptr, inside, site)  # type: ignore[attr-defined]

    def layout_offset(self, buf: SharedArray, idx: list[ir.Value]) -> ir.Value:
        if buf.layout is None or buf.table is None:
            lin = ir.Constant(I32, 0)
            for c, d in zip(idx, buf.shape):
                lin = self.b.add(self.b.mul(lin, ir.Constant(I32, d)), c)
            return lin
        return self.emit_dag(buf.table, buf.offset_eid, {f"c{i}": v for i, v in enumerate(idx)})

    def emit_dag(self, table: ExprTable, eid: int, leaves: dict[str, ir.Value]) -> ir.Value:
        """An expression of the shared DAG (hw/expr.py) as i32 IR over the given symbol values."""
        memo: dict[int, ir.Value] = {}
        b = self.b
        ops = {"add": b.add, "sub": b.sub, "mul": b.mul, "xor": b.xor, "and": b.and_, "or": b.or_,
               "shl": b.shl, "shr": b.ashr}

        def go(i: int) -> ir.Value:
            if i in memo:
                return memo[i]
            n = table.nodes[i]
            if n.op == "const":
                out = ir.Constant(I32, n.value)
            elif n.op == "sym":
                out = leaves[n.name]
            elif n.op in ops:
                out = ops[n.op](go(n.args[0]), go(n.args[1]))
            elif n.op in ("floordiv", "mod"):
                out = self.floor_divmod("//" if n.op == "floordiv" else "%", go(n.args[0]), go(n.args[1]))  # type: ignore[attr-defined]
            elif n.op == "neg":
                out = b.neg(go(n.args[0]))
            else:
                raise CodegenError(f"layout operation {n.op} is not supported by the code generator")
            memo[i] = out
            return out

        return go(eid)

    # ------------------------------------------------------ loads and stores
    def load(self, e: A.Subscript) -> Val:
        buf, ptr = self.address(e)
        raw = self.b.load(ptr, typ=storage_type(buf.dtype))  # type: ignore[attr-defined]
        v = load_convert(self.b, raw, buf.dtype)  # type: ignore[attr-defined]
        return Val(v, "int" if isinstance(v.type, ir.IntType) else "float")

    def store(self, target: A.Subscript, value: Val) -> None:
        buf, ptr = self.address(target, "store")
        v = value.v if value.kind != "bool" else self.as_int(value)  # type: ignore[attr-defined]
        self.b.store(store_convert(self.b, v, buf.dtype), ptr)  # type: ignore[attr-defined]

    # ----------------------------------------------------- asynchronous copies
    def async_copy(self, e: A.Call) -> None:
        dst_e, src_e = self._copy_operands(e)
        dst, dptr = self.address(dst_e, "store")
        src, sptr = self.address(src_e)
        nbytes = element_bytes(dst.dtype)  # type: ignore[attr-defined]
        if dst.dtype == src.dtype and nbytes in VECTOR_BYTES and self.t.async_copy(self.b, dptr, sptr, nbytes):  # type: ignore[attr-defined]
            return
        raw = self.b.load(sptr, typ=storage_type(src.dtype))  # type: ignore[attr-defined]
        self.b.store(store_convert(self.b, load_convert(self.b, raw, src.dtype), dst.dtype), dptr)  # type: ignore[attr-defined]

    def _copy_operands(self, e: A.Call) -> tuple[A.Subscript, A.Subscript]:
        if len(e.args) != 2 or not all(isinstance(a, A.Subscript) for a in e.args):
            raise CodegenError("async_copy(shared[...], global[...]) expected", e.span)
        dst_e, src_e = e.args
        if not isinstance(self.buffer(dst_e), SharedArray) or not isinstance(self.buffer(src_e), GlobalTensor):  # type: ignore[arg-type]
            raise CodegenError("async_copy copies from a global tensor into a shared array", e.span)
        return dst_e, src_e  # type: ignore[return-value]

    def vector_copy(self, loop: A.For, n: int) -> bool:
        """`for e in range(n): async_copy(S[..., c + e], G[..., g + e])` as one n-element copy when
        the elements are contiguous and aligned on both sides, checked at run time (the same IR on
        every target; a swizzle that keeps 16-byte chunks folds the check away); else n copies."""
        call = loop.body[0].expr  # type: ignore[union-attr]
        dst_e, src_e = self._copy_operands(call)
        dst, src = self.buffer(dst_e), self.buffer(src_e)
        nbytes = element_bytes(dst.dtype) * n  # type: ignore[union-attr]
        if dst.dtype != src.dtype or nbytes not in VECTOR_BYTES:  # type: ignore[union-attr]
            return False
        saved = self.env.get(loop.var)  # type: ignore[attr-defined]
        ptrs = []
        for i in range(n):
            self.env[loop.var] = ConstInt(i)  # type: ignore[attr-defined]
            ptrs.append((self.address(dst_e, "store")[1], self.address(src_e)[1]))
        b = self.b
        ok = ir.Constant(ir.IntType(1), 1)
        esize = element_bytes(dst.dtype)  # type: ignore[union-attr]
        for side in (0, 1):
            base = b.ptrtoint(ptrs[0][side], I64)
            ok = b.and_(ok, b.icmp_unsigned("==", b.and_(base, ir.Constant(I64, nbytes - 1)), ir.Constant(I64, 0)))
            for i in range(1, n):
                step = b.sub(b.ptrtoint(ptrs[i][side], I64), base)
                ok = b.and_(ok, b.icmp_unsigned("==", step, ir.Constant(I64, i * esize)))
        fast, slow, done = (b.append_basic_block(x) for x in ("copy.vector", "copy.elements", "copy.done"))
        b.cbranch(ok, fast, slow)
        b.position_at_end(fast)
        if not self.t.async_copy(b, ptrs[0][0], ptrs[0][1], nbytes):  # type: ignore[attr-defined]
            vec = ir.IntType(nbytes * 8)
            b.store(b.load(ptrs[0][1], typ=vec), ptrs[0][0])
        b.branch(done)
        b.position_at_end(slow)
        for dptr, sptr in ptrs:
            b.store(b.load(sptr, typ=storage_type(src.dtype)), dptr)  # type: ignore[union-attr]
        b.branch(done)
        b.position_at_end(done)
        if saved is None:
            self.env.pop(loop.var, None)  # type: ignore[attr-defined]
        else:
            self.env[loop.var] = saved  # type: ignore[attr-defined]
        return True
