"""Element types in memory and their conversions to the lowering's compute types.

Data values are f32 (as in the simulator), integers i32. bf16 and f16 live in memory as their
16-bit patterns (i16), so matrix instructions receive the raw bits; the conversions are written
out in IR (bf16 <-> f32 round-to-nearest-even, NaN kept quiet), identical on every target.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..hw.dtypes import DTYPE_BYTES
from ..lang.source import Span
from .errors import CodegenError

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()

STORAGE = {"bf16": I16, "f16": I16, "f32": F32, "f64": F64, "i8": I8, "i32": I32, "u32": I32, "i64": I64}
INTEGER = {"i8", "i32", "u32", "i64"}
# The numpy type of each element type's stored bits (bf16/f16 as their 16-bit patterns): what a
# launcher copies to the kernel and back.
NUMPY_STORAGE = {"bf16": np.uint16, "f16": np.uint16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
                 "i32": np.int32, "u32": np.int32, "i64": np.int64}


def storage_type(dtype: str, span: Span | None = None) -> ir.Type:
    if dtype not in STORAGE:
        raise CodegenError(f"the code generator does not support element type {dtype} yet", span)
    return STORAGE[dtype]


def element_bytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype]


def is_integer(dtype: str) -> bool:
    return dtype in INTEGER


def bf16_to_f32(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    return b.bitcast(b.shl(b.zext(bits, I32), ir.Constant(I32, 16)), F32)


def f32_to_bf16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even (ml_dtypes.bfloat16, the simulator's rounding); NaN stays a quiet NaN."""
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.lshr(b.add(bits, b.add(lsb, ir.Constant(I32, 0x7FFF))), ir.Constant(I32, 16))
    quiet = b.or_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    is_nan = b.fcmp_unordered("uno", x, x)
    return b.trunc(b.select(is_nan, quiet, rounded), I16)


def load_convert(b: ir.IRBuilder, raw: ir.Value, dtype: str) -> ir.Value:
    """A stored element as a compute value: f32 for floating types, i32 for integers."""
    if dtype == "bf16":
        return bf16_to_f32(b, raw)
    if dtype == "f16":
        return b.fpext(b.bitcast(raw, F16), F32)
    if dtype == "f64":
        return b.fptrunc(raw, F32)
    if dtype in ("i8",):
        return b.sext(raw, I32)
    if dtype == "i64":
        return b.trunc(raw, I32)
    return raw


def store_convert(b: ir.IRBuilder, value: ir.Value, dtype: str) -> ir.Value:
    """A compute value (f32 or i32) as the stored bits of `dtype`."""
    if is_integer(dtype):
        v = value if isinstance(value.type, ir.IntType) else b.fptosi(value, I32)
        if dtype == "i8":
            return b.trunc(v, I8)
        if dtype == "i64":
            return b.sext(v, I64)
        return v
    v = value if not isinstance(value.type, ir.IntType) else b.sitofp(value, F32)
    if dtype == "bf16":
        return f32_to_bf16(b, v)
    if dtype == "f16":
        return b.bitcast(b.fptrunc(v, F16), I16)
    if dtype == "f64":
        return b.fpext(v, F64)
    return v
