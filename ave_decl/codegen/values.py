"""What a name is bound to while lowering: compute values, variables, buffers, layouts."""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..hw.expr import ExprTable


@dataclass(frozen=True)
class Val:
    """A compute value: `int` (i32), `float` (f32) or `bool` (i1)."""

    v: ir.Value
    kind: str


@dataclass(frozen=True)
class Var:
    """A mutable scalar: a stack slot of one kind (kinds.py), promoted to registers by SROA."""

    slot: ir.Value
    kind: str


@dataclass(frozen=True)
class ConstInt:
    """A compile-time integer: the variable of an unrolled loop."""

    value: int


@dataclass(frozen=True)
class GlobalTensor:
    name: str
    ptr: ir.Value
    dtype: str
    dims: tuple[Val, ...]


@dataclass
class SharedArray:
    name: str
    ptr: ir.Value
    dtype: str
    shape: tuple[int, ...]
    layout: object  # hw.layout Layout / Composed / Swizzle-composed, or None for row-major
    cosize: int  # elements of storage the layout spans (one past its largest offset)
    table: ExprTable | None = None  # the layout's offset expression over symbols c0..c{r-1}
    offset_eid: int = -1


@dataclass(frozen=True)
class LocalArray:
    name: str
    ptr: ir.Value
    dtype: str
    shape: tuple[int, ...]

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class LayoutConst:
    layout: object
