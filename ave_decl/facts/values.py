"""The values the lowering binds names to (index expressions, data values, buffers, layouts, ...)."""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Union

from ..hw.instructions import Instruction
from ..hw.layout import AnyLayout
from ..lang.source import Span


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
    # a register array's tag may use the variables of loops around it: every store must then lie
    # inside those loops (the loop headers), so the claim is checked in the store's own iteration
    tag_loops: frozenset[int] = frozenset()
    storage: str | None = None  # a subview: the id of the shared buffer whose storage it shares
    base: int | None = None  # a subview at a varying offset: that offset (an expression; layout Based at 0)
    has_views: bool = False  # a shared buffer some subview shares
    stored: bool = False  # some statement other than its declaration has stored into it
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


@dataclass(frozen=True)
class LoopLocal:
    """An index name computed from a loop variable, seen after that loop: it has no single value
    there (every iteration gave it another), so a use is a front-end error naming the loop."""

    name: str
    loop_var: str
    loop: Span
    what: str = "index name"  # or "subview" (at an offset that varies with the loop)


Val = Union[IVal, BVal, DVal, Buffer, LayoutVal, DType, Builtin, InstrVal, Conditional, LoopLocal]


@dataclass
class Binding:
    value: Val
    scope: int  # the construct (loop/if branch) where it was bound


@dataclass
class Launch:
    grid: tuple[int, ...]
    block: tuple[int, ...]
    block_sizes: tuple[int, ...] | None
    group_kind: str
    group_size: int


def const_size(buf: Buffer) -> int:
    return prod(buf.const_shape or ())


def structure(x):
    return tuple(structure(y) for y in x) if isinstance(x, tuple) else 0


def describe(v: Val) -> str:
    if isinstance(v, Buffer):
        return f"the {v.space} buffer '{v.name}'"
    return {IVal: "an integer expression", BVal: "a condition", DVal: "a data value", LayoutVal: "a layout",
            DType: "an element type", Builtin: "a builtin function", InstrVal: "a matrix instruction"}.get(
        type(v), type(v).__name__)
