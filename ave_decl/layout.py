"""Layouts as functions from logical coordinates to offsets, built as symbolic expressions.

Shape:stride layouts follow CuTe: nested shapes, coordinates of a nested mode are
decomposed colexicographically (leftmost sub-mode fastest). `swizzle(B, M, S)` is CuTe's
Swizzle<B,M,S>: o ^ ((o & yyy_mask) >> S). `f @ g` is functional composition f(g(x)).
The full layout algebra (coalesce, complement, divide) belongs to the layout-algebra issue.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Union

from .ir import ExprTable

Shape = Union[int, tuple["Shape", ...]]


def flatten(shape: Shape) -> tuple[int, ...]:
    if isinstance(shape, int):
        return (shape,)
    return tuple(x for s in shape for x in flatten(s))


def size_of(shape: Shape) -> int:
    return prod(flatten(shape))


@dataclass(frozen=True)
class Layout:
    shape: Shape
    stride: Shape

    def __str__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"

    @property
    def rank(self) -> int:
        return len(self.shape) if isinstance(self.shape, tuple) else 1

    @property
    def size(self) -> int:
        return size_of(self.shape)

    def cosize(self) -> int:
        return sum((s - 1) * d for s, d in zip(flatten(self.shape), flatten(self.stride))) + 1

    def offset(self, table: ExprTable, coords: tuple[int, ...]) -> int:
        """Offset for one coordinate per top-level mode, or one linear index."""
        modes_shape = self.shape if isinstance(self.shape, tuple) else (self.shape,)
        modes_stride = self.stride if isinstance(self.stride, tuple) else (self.stride,)
        if len(coords) == 1 and len(modes_shape) != 1:
            return _mode_offset(table, coords[0], modes_shape, modes_stride)
        total = table.const(0)
        for c, s, d in zip(coords, modes_shape, modes_stride):
            total = table.op("add", total, _mode_offset(table, c, s, d))
        return total


def _mode_offset(table: ExprTable, coord: int, shape: Shape, stride: Shape) -> int:
    if isinstance(shape, int):
        assert isinstance(stride, int)
        return table.op("mul", coord, table.const(stride))
    assert isinstance(stride, tuple)
    total = table.const(0)
    rest = coord
    for i, (s, d) in enumerate(zip(shape, stride)):
        n = size_of(s)
        last = i == len(shape) - 1
        part = rest if last else table.op("mod", rest, table.const(n))
        total = table.op("add", total, _mode_offset(table, part, s, d))
        if not last:
            rest = table.op("floordiv", rest, table.const(n))
    return total


@dataclass(frozen=True)
class Swizzle:
    bits: int
    base: int
    shift: int

    def __str__(self) -> str:
        return f"Swizzle<{self.bits},{self.base},{self.shift}>"

    def apply(self, table: ExprTable, offset: int) -> int:
        if self.bits == 0:
            return offset
        mask = (1 << self.bits) - 1
        yyy = mask << (self.base + max(0, self.shift))
        masked = table.op("and", offset, table.const(yyy))
        moved = table.op("shr", masked, table.const(self.shift)) if self.shift >= 0 else table.op(
            "shl", masked, table.const(-self.shift))
        return table.op("xor", offset, moved)


@dataclass(frozen=True)
class Composed:
    """outer(inner(x)): `outer @ inner` in the DSL."""

    outer: "AnyLayout"
    inner: "AnyLayout"

    def __str__(self) -> str:
        return f"{self.outer} o {self.inner}"

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def size(self) -> int:
        return self.inner.size

    def cosize(self) -> int:
        return self.outer.cosize() if isinstance(self.outer, (Layout, Composed)) else self.inner.cosize()

    def offset(self, table: ExprTable, coords: tuple[int, ...]) -> int:
        mid = self.inner.offset(table, coords)
        if isinstance(self.outer, Swizzle):
            return self.outer.apply(table, mid)
        return self.outer.offset(table, (mid,))


AnyLayout = Union[Layout, Composed, Swizzle]


def row_major(*shape: int) -> Layout:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return Layout(tuple(shape), tuple(reversed(strides)))


def col_major(*shape: int) -> Layout:
    strides, acc = [], 1
    for s in shape:
        strides.append(acc)
        acc *= s
    return Layout(tuple(shape), tuple(strides))


def _fmt(x: Shape) -> str:
    if isinstance(x, int):
        return str(x)
    return "(" + ",".join(_fmt(y) for y in x) + ")"
