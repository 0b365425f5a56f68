"""Warp/wave operations: matrix instructions, `ldmatrix`, lane reductions (butterflies of
`shuffle_xor`). Operand bits and lane semantics come from hw/instructions.py; the target hook
emits the instruction (NVPTX, AMDGPU) or its emulation over a warp exchange (host)."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..hw.instructions import Instruction, LoadMatrix
from ..lang import ast as A
from .consts import known_divisor
from .dtypes import F32, I16, I32, element_bytes, load_convert, storage_type, store_convert
from .errors import CodegenError
from .values import LocalArray, SharedArray, Val


class InstrLowering:
    """Mixed into KernelLowering."""

    b: ir.IRBuilder

    def register_array(self, e: A.Expr, what: str) -> LocalArray:
        arr = self.env.get(e.id) if isinstance(e, A.Name) else None  # type: ignore[attr-defined]
        if not isinstance(arr, LocalArray):
            raise CodegenError(f"the {what} operand must be a register array (local(...))", e.span)
        return arr

    def raw_slots(self, arr: LocalArray, count: int, dtype: str, e: A.Expr) -> list[ir.Value]:
        """`count` elements of a register array as the bits of `dtype` (converted if stored otherwise)."""
        if arr.count < count:
            raise CodegenError(f"{arr.name} holds {arr.count} values; the instruction reads {count}", e.span)
        out = []
        for i in range(count):
            raw = self.b.load(self.b.gep(arr.ptr, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), i)]))
            if arr.dtype != dtype:
                raw = store_convert(self.b, load_convert(self.b, raw, arr.dtype), dtype)
            out.append(raw)
        return out

    def write_slots(self, arr: LocalArray, values: list[ir.Value], dtype: str) -> None:
        """Store values (bits of `dtype`, or f32 when dtype is f32) into the first slots of `arr`."""
        for i, raw in enumerate(values):
            if arr.dtype != dtype:
                raw = store_convert(self.b, load_convert(self.b, raw, dtype), arr.dtype)
            self.b.store(raw, self.b.gep(arr.ptr, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), i)]))

    def result_array(self, name: str, dtype: str, count: int, s: A.Stmt,
                     shape: tuple[int, ...] | None = None) -> LocalArray:
        arr = self.env.get(name)  # type: ignore[attr-defined]
        if isinstance(arr, LocalArray):
            return arr
        key = id(s)
        arr = self.local_arrays.get(key)  # type: ignore[attr-defined]
        if arr is None:
            slot = self.t.alloca(self.ab, ir.ArrayType(storage_type(dtype), count), name)  # type: ignore[attr-defined]
            arr = LocalArray(name, slot, dtype, shape or (count,))
            self.local_arrays[key] = arr  # type: ignore[attr-defined]
        self.env[name] = arr  # type: ignore[attr-defined]
        return arr

    # --------------------------------------------------------------- mma
    def mma(self, name: str, e: A.Call, s: A.Stmt) -> None:
        instr: Instruction = self.imports[e.func_name]  # type: ignore[attr-defined, assignment]
        self.require_group(instr.group_size, e)  # type: ignore[attr-defined]
        self.require_converged(instr.name, e)  # type: ignore[attr-defined]
        if len(e.args) != 3:
            raise CodegenError(f"{instr.name}(a, b, c) takes three register arrays", e.span)
        a, bm, c = (self.register_array(x, w) for x, w in zip(e.args, ("A", "B", "C")))
        dt = instr.in_dtypes[0] if a.dtype not in instr.in_dtypes else a.dtype
        av = self.raw_slots(a, instr.a.values, dt, e.args[0])
        bv = self.raw_slots(bm, instr.b.values, dt, e.args[1])
        cv = self.raw_slots(c, instr.c.values, "f32", e.args[2])
        d = self.t.mma(self.b, instr, dt, av, bv, cv, self.lane)  # type: ignore[attr-defined]
        out = self.result_array(name, instr.acc_dtype, instr.c.values, s)
        self.write_slots(out, d, "f32")

    # ----------------------------------------------------------- ldmatrix
    def ldmatrix(self, name: str, e: A.Call, s: A.Stmt) -> None:
        lm: LoadMatrix = self.imports[e.func_name]  # type: ignore[attr-defined, assignment]
        self.require_group(32, e)  # type: ignore[attr-defined]
        self.require_converged(lm.name, e)  # type: ignore[attr-defined]
        src = e.args[0] if len(e.args) == 1 else None
        if not isinstance(src, A.Subscript):
            raise CodegenError(f"{lm.name}(shared[row, col]) takes the address of one row", e.span)
        buf = self.buffer(src)  # type: ignore[attr-defined]
        if not isinstance(buf, SharedArray) or element_bytes(buf.dtype) != 2:
            raise CodegenError(f"{lm.name} reads 16-bit elements of a shared array", src.span)
        self.check_row_chunks(buf, src)
        _, ptr = self.address(src)  # type: ignore[attr-defined]
        values = self.t.ldmatrix(self.b, lm, ptr, self.lane)  # type: ignore[attr-defined]
        out = self.env.get(name)  # type: ignore[attr-defined]
        if not isinstance(out, LocalArray):
            out = self.result_array(name, buf.dtype, 2 * lm.matrices, s)
        self.write_slots(out, values, buf.dtype)

    def check_row_chunks(self, buf: SharedArray, src: A.Subscript) -> None:
        """The hardware reads 16 contiguous, 16-byte aligned bytes from each row address: the
        layout must keep every aligned 8-element run of the last coordinate contiguous and
        aligned, and the column index must be a provable multiple of 8."""
        col = src.indices[-1]
        if known_divisor(col, self.consts(), self.defs) % 8:  # type: ignore[attr-defined]
            raise CodegenError("cannot show that this ldmatrix column is a multiple of 8 elements (16 bytes): "
                               "write it as 8 * (...) or a multiple of 8", col.span)
        if buf.shape[-1] % 8:
            raise CodegenError(f"ldmatrix rows of {buf.name} must hold a multiple of 8 elements", src.span)
        if buf.layout is None:
            return
        shape = buf.shape
        coords = np.indices(shape).reshape(len(shape), -1)
        phys = np.asarray(buf.layout.evaluate(*coords)).reshape(shape)
        runs = phys.reshape(shape[:-1] + (shape[-1] // 8, 8))
        contiguous = np.all(runs - runs[..., :1] == np.arange(8)) and np.all(runs[..., 0] % 8 == 0)
        if not contiguous:
            raise CodegenError(f"the layout of {buf.name} breaks aligned 8-element rows apart: ldmatrix reads "
                               "16 contiguous bytes per row (use a swizzle with M >= 3)", src.span)

    # ------------------------------------------------------ lane reductions
    def lane_reduce(self, e: A.Call) -> Val:
        if len(e.args) != 2:
            raise CodegenError(f"{e.func_name}(value, width) expected", e.span)
        width = self.const_arg(e.args[1])  # type: ignore[attr-defined]
        if width < 1 or width & (width - 1) or width > self.sig.group:  # type: ignore[attr-defined]
            raise CodegenError(f"the width of {e.func_name} must be a power of two at most the warp/wave size", e.span)
        if width > self.t.max_group:  # type: ignore[attr-defined]
            raise CodegenError(f"{self.t.name} shuffles lanes within {self.t.max_group}", e.span)  # type: ignore[attr-defined]
        self.require_group(self.sig.group, e)  # type: ignore[attr-defined]
        self.require_converged(f"{e.func_name}()", e)  # type: ignore[attr-defined]
        v = self.as_float(self.expr(e.args[0]))  # type: ignore[attr-defined]
        mask = 1
        while mask < width:
            other = self.t.shuffle_xor(self.b, v, mask, self.lane)  # type: ignore[attr-defined]
            if e.func_name == "lane_max":
                v = self.intrinsic("llvm.maximum.f32", F32, [v, other])  # type: ignore[attr-defined]
            else:
                v = self.b.fadd(v, other)
            mask *= 2
        return Val(v, "float")

    def slot_reduce(self, e: A.Call) -> Val:
        """reduce_max(s) / reduce_sum(s): every slot of one thread's register array, in slot order."""
        arr = self.register_array(e.args[0], e.func_name or "reduce")
        values = [load_convert(self.b, raw, arr.dtype) for raw in self.raw_slots(arr, arr.count, arr.dtype, e)]
        return Val(self._combine_slots(e.func_name or "", values), "float")

    def axis_reduce(self, name: str, e: A.Call, s: A.Stmt) -> None:
        """m = reduce_max(s, axis=a) of a register array of rank >= 2: slot (o, i) of m combines
        the slots (o, j, i) of s, j in order (s's slots grouped as (outer, axis, inner))."""
        arr = self.register_array(e.args[0], e.func_name or "reduce")
        axis = self.const_arg(e.kwarg("axis") if e.kwarg("axis") is not None else e.args[1])  # type: ignore[attr-defined]
        outer, n, inner = int(np.prod(arr.shape[:axis])), arr.shape[axis], int(np.prod(arr.shape[axis + 1:]))
        values = [load_convert(self.b, raw, arr.dtype) for raw in self.raw_slots(arr, arr.count, arr.dtype, e)]
        out = [self._combine_slots(e.func_name or "", [values[(o * n + j) * inner + i] for j in range(n)])
               for o in range(outer) for i in range(inner)]
        dst = self.result_array(name, arr.dtype, outer * inner, s, arr.shape[:axis] + arr.shape[axis + 1:])
        self.write_slots(dst, out, "f32")

    def _combine_slots(self, func: str, values: list[ir.Value]) -> ir.Value:
        acc = values[0]
        for v in values[1:]:
            acc = (self.intrinsic("llvm.maximum.f32", F32, [acc, v])  # type: ignore[attr-defined]
                   if func == "reduce_max" else self.b.fadd(acc, v))
        return acc

    def lane_exchange(self, e: A.Call) -> Val:
        """shuffle_xor(x, mask[, width]) / shuffle(x, lane) / readfirstlane(x): x of another lane."""
        self.require_group(self.sig.group, e)  # type: ignore[attr-defined]
        self.require_converged(f"{e.func_name}()", e)  # type: ignore[attr-defined]
        v = self.as_float(self.expr(e.args[0]))  # type: ignore[attr-defined]
        group = self.sig.group  # type: ignore[attr-defined]
        if e.func_name == "shuffle_xor":
            mask = self.const_arg(e.args[1])  # type: ignore[attr-defined]
            if not 0 <= mask < min(group, self.t.max_group):  # type: ignore[attr-defined]
                raise CodegenError(f"{self.t.name} shuffles lanes within {self.t.max_group}", e.span)  # type: ignore[attr-defined]
            return Val(self.t.shuffle_xor(self.b, v, mask, self.lane), "float")  # type: ignore[attr-defined]
        if group > self.t.max_group:  # type: ignore[attr-defined]
            raise CodegenError(f"{self.t.name} shuffles lanes within {self.t.max_group}", e.span)  # type: ignore[attr-defined]
        if e.func_name == "shuffle":  # the source lane modulo the group (a power of two)
            src = self.b.and_(self.as_int(self.expr(e.args[1])), ir.Constant(I32, group - 1))  # type: ignore[attr-defined]
        else:
            src = ir.Constant(I32, 0)
        return Val(self.t.shuffle(self.b, v, src, self.lane), "float")  # type: ignore[attr-defined]


__all__ = ["InstrLowering", "I16"]
