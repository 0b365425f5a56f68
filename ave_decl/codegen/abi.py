"""The kernel ABI every target shares: parameter order, element types, launch shape at sizes.

Parameters, in this order: every declared parameter as written (a tensor is a pointer to its
row-major elements, an `int` parameter an i32), then every symbolic size that appears only in
tensor shapes, in order of first appearance, as i32. Launchers (host, CUDA, HIP) marshal
arguments from this description, and `docs/backends.md` documents it for third parties.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..hw.dtypes import DTYPES
from ..lang import ast as A
from ..lang.consts import const_int
from .errors import CodegenError

GROUP_CONSTRUCTS = ("lane_id", "warp_id", "wave_id", "lane_max", "lane_sum", "shuffle_xor", "shuffle", "readfirstlane")


@dataclass(frozen=True)
class TensorParam:
    name: str
    dtype: str
    dims: tuple[str | int, ...]  # a size name or a literal extent per dimension

    def shape(self, sizes: dict[str, int]) -> tuple[int, ...]:
        return tuple(sizes[d] if isinstance(d, str) else d for d in self.dims)


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[TensorParam | str, ...]  # a tensor, or the name of an i32 size
    grid: tuple[A.Expr, ...]
    block: tuple[int, ...]
    group: int  # lanes of a warp (NVIDIA) / wave (AMD)
    group_declared: bool  # `warp=` or `wave=` given

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    @property
    def tensors(self) -> tuple[TensorParam, ...]:
        return tuple(p for p in self.params if isinstance(p, TensorParam))

    @property
    def sizes(self) -> tuple[str, ...]:
        return tuple(p for p in self.params if isinstance(p, str))

    def grid_at(self, sizes: dict[str, int]) -> tuple[int, ...]:
        out = []
        for e in self.grid:
            v = const_int(e, sizes)
            if v is None:
                raise CodegenError("the grid extent is not an integer expression of the sizes", e.span)
            out.append(v)
        return tuple(out)


def _elements(e: A.Expr | None) -> tuple[A.Expr, ...]:
    if e is None:
        return ()
    return e.elts if isinstance(e, A.Tuple) else (e,)


def signature(k: A.Kernel) -> KernelSignature:
    dec = k.decorator
    params: list[TensorParam | str] = []
    seen: set[str] = set()
    later: list[str] = []
    for p in k.params:
        seen.add(p.name)
        if isinstance(p.annotation, A.Subscript):
            dt = p.annotation.indices[0]
            dtype = dt.id if isinstance(dt, A.Name) and dt.id in DTYPES else None
            if dtype is None:
                raise CodegenError(f"tensor {p.name} has no element type", p.span)
            dims_e = p.annotation.indices[1] if len(p.annotation.indices) > 1 else None
            dims: list[str | int] = []
            for d in _elements(dims_e):
                if isinstance(d, A.Name):
                    dims.append(d.id)
                    later.append(d.id)
                elif isinstance(d, A.Int):
                    dims.append(d.value)
                else:
                    raise CodegenError("a tensor extent must be a size name or an integer", d.span)
            params.append(TensorParam(p.name, dtype, tuple(dims)))
        else:
            params.append(p.name)
    for name in later:
        if name not in seen:
            seen.add(name)
            params.append(name)
    block = []
    for e in _elements(dec.kwarg("block")):
        v = const_int(e, {})
        if v is None or v < 1:
            raise CodegenError("the code generator needs a constant block shape", e.span)
        block.append(v)
    group_e = dec.kwarg("warp") or dec.kwarg("wave")
    group = const_int(group_e, {}) if group_e is not None else 64
    if group is None or group < 1:
        raise CodegenError("the warp/wave size must be a constant", group_e.span if group_e else dec.span)
    if len(block) > 3 or len(_elements(dec.kwarg("grid"))) > 3:
        raise CodegenError("grids and blocks have at most 3 dimensions", dec.span)
    return KernelSignature(k.name, tuple(params), _elements(dec.kwarg("grid")), tuple(block), group,
                           group_e is not None)


def uses_group(k: A.Kernel, imports: dict) -> A.Expr | None:
    """The first construct whose meaning depends on the warp/wave size (None if there is none)."""
    found: list[A.Expr] = []

    def visit(node) -> None:
        if found:
            return
        if isinstance(node, A.Call) and (node.func_name in GROUP_CONSTRUCTS or node.func_name in imports):
            found.append(node)
            return
        for value in vars(node).values() if hasattr(node, "__dataclass_fields__") else ():
            for x in value if isinstance(value, tuple) else (value,):
                if hasattr(x, "__dataclass_fields__"):
                    visit(x)

    for s in k.body:
        visit(s)
    return found[0] if found else None
