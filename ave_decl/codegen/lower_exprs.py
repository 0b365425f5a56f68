"""Expressions: integer index arithmetic (Python floor semantics) and f32 data arithmetic."""
from __future__ import annotations

import math

from llvmlite import ir

from ..hw.dtypes import DTYPES
from ..lang import ast as A
from .dtypes import F32, I1, I32, load_convert, store_convert
from .errors import CodegenError
from .values import ConstInt, GlobalTensor, LayoutConst, LocalArray, SharedArray, Val, Var

_ICMP = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_FCMP_ORDERED = {"==": "==", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
LOG2E = 1.4426950408889634


def _pow2(c: int) -> bool:
    return c > 0 and c & (c - 1) == 0


class ExprLowering:
    """Mixed into KernelLowering: `expr(e) -> Val` and the coercions between kinds."""

    b: ir.IRBuilder

    # ------------------------------------------------------------ coercions
    def as_int(self, x: Val) -> ir.Value:
        if x.kind == "int":
            return x.v
        if x.kind == "bool":
            return self.b.zext(x.v, I32)
        return self.b.fptosi(x.v, I32)

    def as_float(self, x: Val) -> ir.Value:
        if x.kind == "float":
            return x.v
        if x.kind == "bool":
            return self.b.uitofp(x.v, F32)
        return self.b.sitofp(x.v, F32)

    def as_bool(self, x: Val) -> ir.Value:
        if x.kind == "bool":
            return x.v
        if x.kind == "int":
            return self.b.icmp_signed("!=", x.v, ir.Constant(I32, 0))
        return self.b.fcmp_unordered("!=", x.v, ir.Constant(F32, 0.0))

    def coerce(self, x: Val, kind: str) -> ir.Value:
        return {"int": self.as_int, "float": self.as_float, "bool": self.as_bool}[kind](x)

    @staticmethod
    def const(value: int) -> Val:
        return Val(ir.Constant(I32, value), "int")

    def consts(self) -> dict[str, int]:
        """The compile-time integer names in scope (unrolled loop variables)."""
        return {n: v.value for n, v in self.env.items() if isinstance(v, ConstInt)}  # type: ignore[attr-defined]

    # ----------------------------------------------------------- expressions
    def expr(self, e: A.Expr) -> Val:
        if isinstance(e, A.Name):
            return self.name_value(e)
        if isinstance(e, A.Int):
            if not -2 ** 31 <= e.value < 2 ** 31:
                raise CodegenError("integer constant out of the 32-bit range", e.span)
            return self.const(e.value)
        if isinstance(e, A.Bool):
            return self.const(int(e.value))
        if isinstance(e, A.Float):
            return Val(ir.Constant(F32, e.value), "float")
        if isinstance(e, A.Subscript):
            return self.load(e)  # type: ignore[attr-defined]
        if isinstance(e, A.BinOp):
            if e.op == "@":
                raise CodegenError("`@` composes layouts; it is not arithmetic", e.span)
            return self.binop(e.op, self.expr(e.left), self.expr(e.right), e)
        if isinstance(e, A.UnaryOp):
            return self.unary(e)
        if isinstance(e, A.BoolOp):
            vals = [self.as_bool(self.expr(x)) for x in e.values]
            out = vals[0]
            for x in vals[1:]:
                out = self.b.and_(out, x) if e.op == "and" else self.b.or_(out, x)
            return Val(out, "bool")
        if isinstance(e, A.IfExp):
            return self.choose(self.expr(e.cond), self.expr(e.then), self.expr(e.orelse))
        if isinstance(e, A.Call):
            return self.call(e)  # type: ignore[attr-defined]
        raise CodegenError("this expression is not supported by the code generator", e.span)

    def name_value(self, e: A.Name) -> Val:
        v = self.env.get(e.id)  # type: ignore[attr-defined]
        if isinstance(v, Val):
            return v
        if isinstance(v, Var):
            return Val(self.b.load(v.slot), v.kind)
        if isinstance(v, ConstInt):
            return self.const(v.value)
        if isinstance(v, (GlobalTensor, SharedArray, LocalArray)):
            raise CodegenError(f"{e.id} is a buffer: index it to read an element", e.span)
        if isinstance(v, LayoutConst):
            raise CodegenError(f"{e.id} is a layout, not a value", e.span)
        if e.id in DTYPES:
            raise CodegenError(f"the element type {e.id} is not a value", e.span)
        raise CodegenError(f"undefined name {e.id}", e.span)

    def choose(self, cond: Val, then: Val, orelse: Val) -> Val:
        kind = "float" if "float" in (then.kind, orelse.kind) else "int"
        return Val(self.b.select(self.as_bool(cond), self.coerce(then, kind), self.coerce(orelse, kind)), kind)

    def unary(self, e: A.UnaryOp) -> Val:
        x = self.expr(e.operand)
        if e.op == "+":
            return x
        if e.op == "not":
            return Val(self.b.not_(self.as_bool(x)), "bool")
        if e.op == "-":
            if x.kind == "float":
                return Val(self.b.fneg(x.v), "float")
            return Val(self.b.neg(self.as_int(x)), "int")
        if x.kind == "float":
            raise CodegenError("`~` needs an integer", e.span)
        return Val(self.b.not_(self.as_int(x)), "int")

    def binop(self, op: str, x: Val, y: Val, e: A.Expr) -> Val:
        b = self.b
        if op in _ICMP:
            if "float" in (x.kind, y.kind):
                fx, fy = self.as_float(x), self.as_float(y)
                r = b.fcmp_unordered("!=", fx, fy) if op == "!=" else b.fcmp_ordered(_FCMP_ORDERED[op], fx, fy)
                return Val(r, "bool")
            return Val(b.icmp_signed(_ICMP[op], self.as_int(x), self.as_int(y)), "bool")
        if op == "/" or "float" in (x.kind, y.kind):
            return Val(self.float_op(op, self.as_float(x), self.as_float(y), e), "float")
        return Val(self.int_op(op, self.as_int(x), self.as_int(y), e), "int")

    def float_op(self, op: str, x: ir.Value, y: ir.Value, e: A.Expr) -> ir.Value:
        b = self.b
        if op == "+":
            return b.fadd(x, y)
        if op == "-":
            return b.fsub(x, y)
        if op == "*":
            return b.fmul(x, y)
        if op == "/":
            return b.fdiv(x, y)
        if op in ("//", "%"):
            return self.float_divmod(op, x, y)
        raise CodegenError(f"`{op}` needs integer operands", e.span)

    def float_divmod(self, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
        """numpy's npy_divmod (what the simulator computes): the remainder from `frem`, moved to the
        divisor's sign; the quotient (x - mod) / y, rounded to the nearest integer."""
        b = self.b
        zero, one = ir.Constant(F32, 0.0), ir.Constant(F32, 1.0)
        mod = b.frem(x, y)
        div = b.fdiv(b.fsub(x, mod), y)
        adjust = b.and_(b.fcmp_unordered("!=", mod, zero),
                        b.icmp_signed("!=", b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
        mod = b.select(adjust, b.fadd(mod, y), mod)
        if op == "%":
            return b.select(b.fcmp_ordered("==", mod, zero), self.intrinsic("llvm.copysign.f32", F32, [zero, y]), mod)
        div = b.select(adjust, b.fsub(div, one), div)
        floor = self.intrinsic("llvm.floor.f32", F32, [div])
        floor = b.select(b.fcmp_ordered(">", b.fsub(div, floor), ir.Constant(F32, 0.5)), b.fadd(floor, one), floor)
        exact = self.intrinsic("llvm.copysign.f32", F32, [zero, b.fdiv(x, y)])
        quotient = b.select(b.fcmp_unordered("!=", div, zero), floor, exact)
        return b.select(b.fcmp_ordered("==", y, zero), b.fdiv(x, y), quotient)

    def int_op(self, op: str, x: ir.Value, y: ir.Value, e: A.Expr) -> ir.Value:
        b = self.b
        simple = {"+": b.add, "-": b.sub, "*": b.mul, "^": b.xor, "&": b.and_, "|": b.or_}
        if op in simple:
            return simple[op](x, y)
        if op in ("<<", ">>"):  # counts outside [0, 31] are poison in LLVM: give the simulator's (XLA's) values
            big = b.icmp_unsigned(">=", y, ir.Constant(I32, 32))
            if op == "<<":
                return b.select(big, ir.Constant(I32, 0), b.shl(x, y))
            return b.ashr(x, b.select(big, ir.Constant(I32, 31), y))
        if op in ("//", "%"):
            return self.floor_divmod(op, x, y)
        raise CodegenError(f"`{op}` is not an integer operation", e.span)

    def floor_divmod(self, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
        """Python's `//` and `%` (floor semantics) on i32; a zero divisor gives 0, never LLVM's
        undefined behaviour (verified kernels never divide by zero; the simulator gives 0)."""
        b = self.b
        zero = ir.Constant(I32, 0)
        if isinstance(y, ir.Constant) and isinstance(y.constant, int) and y.constant > 0:
            c = y.constant
            if _pow2(c):
                shift = ir.Constant(I32, int(math.log2(c)))
                return b.ashr(x, shift) if op == "//" else b.and_(x, ir.Constant(I32, c - 1))
            q, r = b.sdiv(x, y), b.srem(x, y)
            neg = b.icmp_signed("<", r, zero)
            if op == "//":
                return b.sub(q, b.zext(neg, I32))
            return b.add(r, b.select(neg, y, zero))
        # 0 and -1 never reach sdiv: x / 0 is undefined, and INT_MIN / -1 traps (SIGFPE on x86)
        is_zero = b.icmp_signed("==", y, zero)
        minus_one = b.icmp_signed("==", y, ir.Constant(I32, -1))
        safe = b.select(b.or_(is_zero, minus_one), ir.Constant(I32, 1), y)
        q, r = b.sdiv(x, safe), b.srem(x, safe)
        fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("!=", b.icmp_signed("<", r, zero),
                                                                  b.icmp_signed("<", safe, zero)))
        out = b.sub(q, b.zext(fix, I32)) if op == "//" else b.add(r, b.select(fix, safe, zero))
        by_minus_one = b.neg(x) if op == "//" else zero  # wraps at INT_MIN, as two's complement does
        return b.select(is_zero, zero, b.select(minus_one, by_minus_one, out))

    # ------------------------------------------------------------ intrinsics
    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        module: ir.Module = self.module  # type: ignore[attr-defined]
        fn = module.globals.get(name)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name=name)
        return self.b.call(fn, args)

    def unary_math(self, name: str, x: ir.Value) -> ir.Value:
        if name == "exp2":
            return self.intrinsic("llvm.exp2.f32", F32, [x])
        if name == "exp":  # exp(x) = exp2(x log2 e): one instruction on every GPU, the same IR everywhere
            return self.intrinsic("llvm.exp2.f32", F32, [self.b.fmul(x, ir.Constant(F32, LOG2E))])
        if name == "abs":
            return self.intrinsic("llvm.fabs.f32", F32, [x])
        root = self.intrinsic("llvm.sqrt.f32", F32, [x])
        return root if name == "sqrt" else self.b.fdiv(ir.Constant(F32, 1.0), root)

    def cast(self, x: Val, dtype: str) -> Val:
        """`cast(x, bf16)`: round to the narrow type and back (the simulator's `narrow`); casts to
        wider or integer types keep the value, as the simulator does."""
        if dtype in ("bf16", "f16"):
            v = self.as_float(x)
            return Val(load_convert(self.b, store_convert(self.b, v, dtype), dtype), "float")
        return Val(self.as_float(x), "float")

    def minmax(self, name: str, x: Val, y: Val) -> Val:
        if "float" in (x.kind, y.kind):
            fn = "llvm.minimum.f32" if name in ("min", "fmin") else "llvm.maximum.f32"
            return Val(self.intrinsic(fn, F32, [self.as_float(x), self.as_float(y)]), "float")
        xi, yi = self.as_int(x), self.as_int(y)
        cmp = self.b.icmp_signed("<" if name == "min" else ">", xi, yi)
        return Val(self.b.select(cmp, xi, yi), "int")


__all__ = ["ExprLowering", "I1"]
