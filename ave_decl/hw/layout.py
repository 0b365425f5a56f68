"""The layout algebra: one module for the front end, the Z3 encoding, the simulator and back ends.

* Shape:stride layouts follow CuTe (`media/docs/cpp/cute/01_layout.md`, `02_layout_algebra.md`):
  nested shapes; a coordinate of a nested mode is decomposed colexicographically (leftmost
  sub-mode fastest); `L(i)` for a single integer decomposes `i` over the whole shape.
* `coalesce`, `composition`, `complement`, `right_inverse`, `logical_divide` are CuTe's
  algorithms on integer shapes (cross-checked against NVIDIA's pycute in the tests).
* `Swizzle(B, M, S)` is CuTe's Swizzle<B,M,S>: `o ^ ((o & yyy_mask) >> S)`, an involution.
* `Composed(f, g)` is `f(g(x))` — the DSL's `f @ g` (e.g. `swizzle(3,3,3) @ row_major(64, 64)`).
* Every layout evaluates three ways: concretely on ints (`__call__`), vectorised on numpy
  arrays (`evaluate`), and symbolically into the expression DAG (`offset`), which is what the
  Z3 encoding (bit-vector XOR/shift for swizzles, see smt.py) and the facts use.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Union

import numpy as np

from .expr import ExprTable

Shape = Union[int, tuple["Shape", ...]]


def flatten(shape: Shape) -> tuple[int, ...]:
    if isinstance(shape, int):
        return (shape,)
    return tuple(x for s in shape for x in flatten(s))


def size_of(shape: Shape) -> int:
    return prod(flatten(shape))


def _fmt(x: Shape) -> str:
    if isinstance(x, int):
        return str(x)
    return "(" + ",".join(_fmt(y) for y in x) + ")"


def _prefix_product(shape: Shape, start: int = 1) -> Shape:
    if isinstance(shape, int):
        return start
    out, acc = [], start
    for s in shape:
        out.append(_prefix_product(s, acc))
        acc *= size_of(s)
    return tuple(out)


# ------------------------------------------------------------- shape:stride
@dataclass(frozen=True)
class Layout:
    shape: Shape
    stride: Shape

    def __str__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"

    @staticmethod
    def compact(shape: Shape) -> "Layout":
        """Column-major (CuTe's default, LayoutLeft) strides for a shape."""
        return Layout(shape, _prefix_product(shape))

    @property
    def rank(self) -> int:
        return len(self.shape) if isinstance(self.shape, tuple) else 1

    @property
    def size(self) -> int:
        return size_of(self.shape)

    def cosize(self) -> int:
        return self(self.size - 1) + 1 if self.size else 0

    def mode(self, i: int) -> "Layout":
        if isinstance(self.shape, tuple):
            return Layout(self.shape[i], self.stride[i])  # type: ignore[index]
        assert i == 0
        return self

    def modes(self) -> list["Layout"]:
        return [self.mode(i) for i in range(self.rank)]

    # -- concrete evaluation
    def __call__(self, *coord) -> int:
        """One integer (decomposed over the whole shape) or one coordinate per top-level mode."""
        if len(coord) == 1 and not isinstance(coord[0], tuple):
            return _crd2idx(coord[0], self.shape, self.stride)
        if len(coord) == 1:
            coord = coord[0]
        return sum(_crd2idx(c, s, d) for c, s, d in zip(coord, _as_tuple(self.shape), _as_tuple(self.stride)))

    def evaluate(self, *coords: np.ndarray) -> np.ndarray:
        """Vectorised `__call__` on integer arrays (one array, or one per top-level mode)."""
        if len(coords) == 1:
            return _crd2idx_np(np.asarray(coords[0]), self.shape, self.stride)
        return sum(_crd2idx_np(np.asarray(c), s, d)
                   for c, s, d in zip(coords, _as_tuple(self.shape), _as_tuple(self.stride)))

    def table(self) -> np.ndarray:
        """Offsets of every linear index 0..size-1."""
        return self.evaluate(np.arange(self.size))

    # -- symbolic evaluation
    def offset(self, table: ExprTable, coords: tuple[int, ...]) -> int:
        """Offset expression for one coordinate per top-level mode, or one linear index."""
        modes_shape, modes_stride = _as_tuple(self.shape), _as_tuple(self.stride)
        if len(coords) == 1 and len(modes_shape) != 1:
            return _mode_offset(table, coords[0], self.shape, self.stride)
        total = table.const(0)
        for c, s, d in zip(coords, modes_shape, modes_stride):
            total = table.op("add", total, _mode_offset(table, c, s, d))
        return total


def _as_tuple(x: Shape) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _crd2idx(coord, shape: Shape, stride: Shape) -> int:
    if isinstance(shape, int):
        assert isinstance(stride, int)
        return int(coord) * stride
    if isinstance(coord, tuple):
        return sum(_crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))  # type: ignore[arg-type]
    total, rest = 0, int(coord)
    for i, (s, d) in enumerate(zip(shape, stride)):  # type: ignore[arg-type]
        n = size_of(s)
        part, rest = (rest, 0) if i == len(shape) - 1 else (rest % n, rest // n)
        total += _crd2idx(part, s, d)
    return total


def _crd2idx_np(coord: np.ndarray, shape: Shape, stride: Shape) -> np.ndarray:
    if isinstance(shape, int):
        return coord * stride
    total = np.zeros_like(coord)
    rest = coord
    for i, (s, d) in enumerate(zip(shape, stride)):  # type: ignore[arg-type]
        n = size_of(s)
        part = rest if i == len(shape) - 1 else rest % n
        rest = rest // n
        total = total + _crd2idx_np(part, s, d)
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


def make_layout(*layouts: Layout) -> Layout:
    """Each argument becomes one mode of the result."""
    return Layout(tuple(lay.shape for lay in layouts), tuple(lay.stride for lay in layouts))


# ---------------------------------------------------------------- algebra
def coalesce(layout: Layout) -> Layout:
    """Flatten and merge modes while keeping the same int -> int function."""
    shapes, strides = [1], [0]
    for s, d in zip(flatten(layout.shape), flatten(layout.stride)):
        if s == 1:
            continue
        if shapes[-1] == 1:
            shapes[-1], strides[-1] = s, d
        elif shapes[-1] * strides[-1] == d:
            shapes[-1] *= s
        else:
            shapes.append(s)
            strides.append(d)
    if len(shapes) == 1:
        return Layout(shapes[0], strides[0])
    return Layout(tuple(shapes), tuple(strides))


def composition(a: Layout, b: Layout) -> Layout:
    """R(x) = A(B(x)), with the shape of B (CuTe's composition; B may be a tuple of layouts by mode)."""
    if isinstance(b.shape, tuple):
        return make_layout(*[composition(a, m) for m in b.modes()])
    if b.stride == 0:
        return Layout(b.shape, 0)
    out_s, out_d = [], []
    rest_shape, rest_stride = b.shape, b.stride
    flat = coalesce(a)
    fs, fd = flatten(flat.shape), flatten(flat.stride)
    for cs, cd in zip(fs[:-1], fd[:-1]):
        if not (cs % rest_stride == 0 or rest_stride % cs == 0):
            raise ValueError(f"composition {a} o {b}: stride divisibility condition fails")
        new = min(max(1, cs // rest_stride), rest_shape)
        if rest_shape % new:
            raise ValueError(f"composition {a} o {b}: shape divisibility condition fails")
        if new != 1:
            out_s.append(new)
            out_d.append(rest_stride * cd)
        rest_shape //= new
        rest_stride = -(-rest_stride // cs)
    if rest_shape != 1 or not out_s:
        out_s.append(rest_shape)
        out_d.append(rest_stride * fd[-1])
    return Layout(out_s[0], out_d[0]) if len(out_s) == 1 else Layout(tuple(out_s), tuple(out_d))


def complement(layout: Layout, cosize_hi: int = 1) -> Layout:
    """The layout of the offsets `layout` does not reach, up to `cosize_hi`."""
    out_s, out_d = [], []
    current = 1
    for d, s in sorted(zip(flatten(layout.stride), flatten(layout.shape))):
        if d == 0 or s == 1:
            continue
        if current > s * d:
            raise ValueError(f"complement of {layout}: modes overlap")
        out_s.append(d // current)
        out_d.append(current)
        current = s * d
    out_s.append(-(-cosize_hi // current))
    out_d.append(current)
    return coalesce(Layout(tuple(out_s), tuple(out_d)))


def right_inverse(layout: Layout) -> Layout:
    out_s, out_d = [], []
    current = 1
    fs, fd = flatten(layout.shape), flatten(layout.stride)
    for d, s, r in sorted(zip(fd, fs, flatten(_prefix_product(fs)))):
        if s == 1:
            continue
        if current != d:
            break
        out_s.append(s)
        out_d.append(r)
        current = s * d
    return coalesce(Layout(tuple(out_s), tuple(out_d)))


def logical_divide(a: Layout, tiler: Layout) -> Layout:
    """Split A into (tile, rest): mode 0 is `tiler`'s part of A, mode 1 the tiles' arrangement."""
    return composition(a, make_layout(tiler, complement(tiler, a.size)))


def is_bijective(f, size: int) -> bool:
    """`f` (a layout or swizzle) maps [0, size) onto [0, size) one-to-one."""
    vals = np.asarray(f.evaluate(np.arange(size)))
    return bool(np.array_equal(np.sort(vals), np.arange(size)))


# ---------------------------------------------------------------- swizzles
@dataclass(frozen=True)
class Swizzle:
    bits: int
    base: int
    shift: int

    def __str__(self) -> str:
        return f"Swizzle<{self.bits},{self.base},{self.shift}>"

    @property
    def yyy_mask(self) -> int:
        return ((1 << self.bits) - 1) << (self.base + max(0, self.shift))

    def __call__(self, offset: int) -> int:
        moved = offset & self.yyy_mask
        return offset ^ (moved >> self.shift if self.shift >= 0 else moved << -self.shift)

    def evaluate(self, offset: np.ndarray) -> np.ndarray:
        moved = np.asarray(offset) & self.yyy_mask
        return offset ^ (moved >> self.shift if self.shift >= 0 else moved << -self.shift)

    def apply(self, table: ExprTable, offset: int) -> int:
        if self.bits == 0:
            return offset
        masked = table.op("and", offset, table.const(self.yyy_mask))
        moved = table.op("shr", masked, table.const(self.shift)) if self.shift >= 0 else table.op(
            "shl", masked, table.const(-self.shift))
        return table.op("xor", offset, moved)


class _OverInner:
    """A layout that takes its coordinates (rank, size) from the layout it wraps, `inner`."""

    inner: "AnyLayout"

    @property
    def rank(self) -> int:
        return self.inner.rank  # type: ignore[union-attr]

    @property
    def size(self) -> int:
        return self.inner.size  # type: ignore[union-attr]


@dataclass(frozen=True)
class Composed(_OverInner):
    """outer(inner(x)): `outer @ inner` in the DSL."""

    outer: "AnyLayout"
    inner: "AnyLayout"

    def __str__(self) -> str:
        return f"{self.outer} o {self.inner}"

    def __call__(self, *coord) -> int:
        return self.outer(self.inner(*coord))

    def evaluate(self, *coords: np.ndarray) -> np.ndarray:
        return self.outer.evaluate(self.inner.evaluate(*coords))

    def offset(self, table: ExprTable, coords: tuple[int, ...]) -> int:
        mid = self.inner.offset(table, coords)  # type: ignore[union-attr]
        if isinstance(self.outer, Swizzle):
            return self.outer.apply(table, mid)
        return self.outer.offset(table, (mid,))


@dataclass(frozen=True)
class Based(_OverInner):
    """A layout moved by a constant element offset: where a subview's elements lie in the storage
    of the buffer it is a view of."""

    inner: "AnyLayout"
    base: int

    def __str__(self) -> str:
        return f"{self.base} + {self.inner}"

    def __call__(self, *coord) -> int:
        return self.base + self.inner(*coord)

    def evaluate(self, *coords: np.ndarray) -> np.ndarray:
        return self.base + self.inner.evaluate(*coords)  # type: ignore[union-attr]

    def offset(self, table: ExprTable, coords: tuple[int, ...]) -> int:
        return table.op("add", table.const(self.base), self.inner.offset(table, coords))  # type: ignore[union-attr]


AnyLayout = Union[Layout, Composed, Swizzle, Based]


def row_major(*shape: int) -> Layout:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return Layout(tuple(shape), tuple(reversed(strides)))


def col_major(*shape: int) -> Layout:
    return Layout(tuple(shape), tuple(flatten(_prefix_product(tuple(shape)))))


def buffer_layout(layout: AnyLayout, shape: tuple[int, ...]) -> AnyLayout:
    """`layout=` of a buffer of `shape`, checked; a rank-1 layout of a multi-dimensional buffer acts
    on the row-major index. ValueError says what is wrong (the front end, the simulator and the
    code generator each report it at the `layout=` argument)."""
    if isinstance(layout, Swizzle):
        raise ValueError("a swizzle needs a shape:stride layout to act on: swizzle(...) @ row_major(...)")
    if layout.size != prod(shape):
        raise ValueError(f"layout {layout} has {layout.size} elements but the buffer has {prod(shape)}")
    if layout.rank not in (1, len(shape)):
        raise ValueError(f"layout {layout} has rank {layout.rank}; the buffer has rank {len(shape)}")
    return Composed(layout, row_major(*shape)) if layout.rank == 1 and len(shape) > 1 else layout


def storage_size(layout: AnyLayout, shape: tuple[int, ...]) -> int:
    """The elements a buffer of `shape` stored through `layout` (from buffer_layout) needs: one past
    its largest offset, more than its element count for a padded layout. ValueError on a negative
    offset."""
    if prod(shape) == 0:
        return 0
    offsets = np.asarray(layout.evaluate(*np.indices(shape).reshape(len(shape), -1)), np.int64)
    if offsets.min() < 0:
        raise ValueError("the layout maps an element to a negative offset")
    return int(offsets.max()) + 1


# ---------------------------------------------------------- thread-value layouts
@dataclass(frozen=True)
class TVLayout:
    """CuTe's thread-value layout of a tile: (thread, value) -> linear index of an (M, N) tile,
    column-major (`idx = m + M * n`), as in the MMA atoms' ALayout/BLayout/CLayout."""

    layout: Layout  # shape (threads, values)
    rows: int
    cols: int

    def coords(self, thread, value):
        idx = self.layout.evaluate(np.asarray(thread), np.asarray(value))
        return idx % self.rows, idx // self.rows

    @property
    def threads(self) -> int:
        return size_of(self.layout.shape[0])  # type: ignore[index]

    @property
    def values(self) -> int:
        return size_of(self.layout.shape[1])  # type: ignore[index]
