"""Input tensors of a simulation: parameter shapes at given sizes, index tables holding given entries."""
from __future__ import annotations

import numpy as np

from ..lang import ast as A
from ..lang.consts import const_int
from .state import ROUND, SimulationError, narrow


def tensor_dims(p: A.Param) -> tuple[A.Expr, ...]:
    """The dimension expressions of a tensor parameter `Tensor[dtype, (d0, d1, ...)]` (none for a size)."""
    if not isinstance(p.annotation, A.Subscript) or len(p.annotation.indices) < 2:
        return ()
    dims = p.annotation.indices[1]
    return dims.elts if isinstance(dims, A.Tuple) else (dims,)


def tensor_shape(p: A.Param, sizes: dict[str, int]) -> tuple[int, ...]:
    """The shape of a tensor parameter at these sizes (KeyError for a size not given)."""
    return tuple(sizes[d.id] if isinstance(d, A.Name) else d.value for d in tensor_dims(p))  # type: ignore[union-attr]


def with_entries(values: np.ndarray, entries: list[list[int]], permutation: bool) -> np.ndarray:
    """An index table holding the given [coordinates..., value] entries (those inside its shape).
    A permutation stays one: each entry's value is swapped in from where it was, which keeps
    every earlier entry because the entries themselves are injective."""
    out = values.copy()
    flat = out.reshape(-1)
    for *coords, value in entries:
        if len(coords) != out.ndim or not all(0 <= c < n for c, n in zip(coords, out.shape)):
            continue
        at = int(np.ravel_multi_index(tuple(coords), out.shape))
        if permutation:
            where = np.flatnonzero(flat == value)
            if where.size:
                flat[where[0]] = flat[at]
        flat[at] = value
    return out


def random_inputs(kernel: A.Kernel, sizes: dict[str, int], seed: int = 0,
                  index_entries: dict[str, list[list[int]]] | None = None) -> dict[str, np.ndarray]:
    """The inputs of a run, as float32 arrays holding values of each tensor's element type: normal
    samples rounded to narrow types, a permutation or values in [lo, hi) for index tensors (one
    seeded generator in parameter order: the simulator and every backend get the same inputs)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for p in kernel.params:
        if not isinstance(p.annotation, A.Subscript):
            continue
        dt = p.annotation.indices[0].id  # type: ignore[union-attr]
        shape = tensor_shape(p, sizes)
        values = rng.standard_normal(shape).astype(np.float32)
        if len(p.annotation.indices) == 3:  # an index tensor: a permutation or values in [lo, hi)
            spec = p.annotation.indices[2]
            values = _index_values(spec, shape, sizes, rng)
            values = with_entries(values, (index_entries or {}).get(p.name, []),
                                  permutation=isinstance(spec, A.Name))
        elif dt in ("i8", "i32", "u32", "i64"):  # integer data: small integers (the kernel stores integers)
            values = np.round(values * 8).astype(np.float32)
        if dt in ROUND:
            values = narrow(values, dt)
        out[p.name] = values
    return out


def _index_values(spec: A.Expr, shape: tuple[int, ...], sizes: dict[str, int], rng) -> np.ndarray:
    if isinstance(spec, A.Name) and spec.id == "permutation":
        return rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float32)
    bounds = [const_int(x, sizes) for x in spec.elts] if isinstance(spec, A.Tuple) else []  # type: ignore[union-attr]
    if len(bounds) != 2 or None in bounds:
        raise SimulationError("an index tensor's range must be two integer expressions of the sizes", spec.span)
    lo, hi = bounds
    return rng.integers(lo, hi, size=shape).astype(np.float32)
