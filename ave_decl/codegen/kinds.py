"""Which scalar variables hold integers and which hold data (f32): decided before lowering.

A variable gets one stack slot of one type for the whole kernel, so its kind is the join over
every assignment (data wins: `x = 0` then `x += A[i]` is an f32 variable), iterated to a fixpoint.
Register and shared arrays, and layouts bound to names, are not scalars and are listed apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hw.instructions import Instruction, LoadMatrix
from ..lang import ast as A
from .dtypes import is_integer

INT, FLOAT = "int", "float"
_INT_CALLS = {"thread_id", "block_id", "lane_id", "warp_id", "wave_id"}
_FLOAT_CALLS = {"exp2", "exp", "sqrt", "rsqrt", "lane_max", "lane_sum", "fmax", "fmin", "cast", "shuffle_xor",
                "shuffle", "readfirstlane", "reduce_max", "reduce_sum"}
LAYOUT_CALLS = {"row_major", "col_major", "layout", "swizzle"}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}


@dataclass
class Kinds:
    scalars: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, str] = field(default_factory=dict)  # register/shared array -> element type
    layouts: set[str] = field(default_factory=set)

    def join(self, name: str, kind: str) -> bool:
        old = self.scalars.get(name)
        new = FLOAT if FLOAT in (old, kind) else INT
        self.scalars[name] = new
        return new != old


def is_layout_expr(e: A.Expr, layouts: set[str]) -> bool:
    if isinstance(e, A.Call):
        return e.func_name in LAYOUT_CALLS
    if isinstance(e, A.BinOp) and e.op == "@":
        return True
    return isinstance(e, A.Name) and e.id in layouts


def infer(k: A.Kernel, imports: dict[str, Instruction | LoadMatrix]) -> Kinds:
    out = Kinds()
    tensors = {p.name: p.annotation.indices[0].id for p in k.params  # type: ignore[union-attr]
               if isinstance(p.annotation, A.Subscript) and isinstance(p.annotation.indices[0], A.Name)}

    def dtype_of(name: str) -> str | None:
        return out.arrays.get(name) or tensors.get(name)

    def kind(e: A.Expr) -> str:
        if isinstance(e, A.Float):
            return FLOAT
        if isinstance(e, A.Name):
            return out.scalars.get(e.id, INT)
        if isinstance(e, A.Subscript) and isinstance(e.value, A.Name):
            dt = dtype_of(e.value.id)
            return INT if dt is not None and is_integer(dt) else FLOAT
        if isinstance(e, A.BinOp):
            if e.op in _COMPARE:
                return INT
            if e.op == "/":
                return FLOAT
            return FLOAT if FLOAT in (kind(e.left), kind(e.right)) else INT
        if isinstance(e, A.UnaryOp):
            return INT if e.op == "not" else kind(e.operand)
        if isinstance(e, A.IfExp):
            return FLOAT if FLOAT in (kind(e.then), kind(e.orelse)) else INT
        if isinstance(e, A.Call):
            name = e.func_name
            if name in _FLOAT_CALLS:
                return FLOAT
            if name in ("min", "max", "abs"):
                return FLOAT if any(kind(a) == FLOAT for a in e.args) else INT
            if name == "select" and len(e.args) == 3:
                return FLOAT if FLOAT in (kind(e.args[1]), kind(e.args[2])) else INT
        return INT

    def walk(stmts: tuple[A.Stmt, ...]) -> bool:
        changed = False
        for s in stmts:
            if isinstance(s, A.Assign) and isinstance(s.target, A.Name):
                name, v = s.target.id, s.value
                if isinstance(v, A.Call) and v.func_name in ("shared", "local") and v.args and isinstance(v.args[0], A.Name):
                    changed |= out.arrays.get(name) != v.args[0].id
                    out.arrays[name] = v.args[0].id
                elif isinstance(v, A.Call) and isinstance(imports.get(v.func_name), Instruction):
                    dt = imports[v.func_name].acc_dtype  # type: ignore[union-attr]
                    changed |= name not in out.arrays
                    out.arrays.setdefault(name, dt)
                elif isinstance(v, A.Call) and isinstance(imports.get(v.func_name), LoadMatrix):
                    src = v.args[0] if v.args else None
                    dt = dtype_of(src.value.id) if isinstance(src, A.Subscript) and isinstance(src.value, A.Name) else None
                    changed |= name not in out.arrays
                    out.arrays.setdefault(name, dt or "bf16")
                elif is_layout_expr(v, out.layouts):
                    changed |= name not in out.layouts
                    out.layouts.add(name)
                else:
                    changed |= out.join(name, kind(v))
            elif isinstance(s, A.AugAssign) and isinstance(s.target, A.Name):
                changed |= out.join(s.target.id, kind(A.BinOp(s.op, s.target, s.value)))
            elif isinstance(s, A.For):
                changed |= out.join(s.var, INT)
                changed |= walk(s.body)
            elif isinstance(s, A.If):
                changed |= walk(s.body)
                changed |= walk(s.orelse)
        return changed

    for _ in range(64):  # each round only widens (int -> float) or adds names: it terminates quickly
        if not walk(k.body):
            break
    return out
