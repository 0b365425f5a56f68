"""Input tensors of a simulation: parameter shapes at given sizes, index tables holding given entries."""
from __future__ import annotations

import numpy as np

from ..lang import ast as A


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
