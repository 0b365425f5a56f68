"""Index expressions split into a part every lane of a block shares and a per-lane part, so that
questions about them are decided by enumerating lanes instead of asking Z3 (issue 16).

A coordinate such as `bm + wm + 4 * (lane // 16) + r` (with `bm = block_id(0) * 64`) adds a
*shared* part (block ids, sizes, variables of loops with symbolic bounds) to a *lane* part (thread
ids, variables of loops with constant bounds): `e(s, l) = A(s) + B(l)` exactly, where
`A(s) = e(s, 0) - e(0, 0)` and `B(l) = e(0, l)`, when the shared symbols occur only in terms that
are added, subtracted or scaled by constants (`lane_separable`). The lane part ranges over a finite
domain that numpy enumerates; the shared part is a sum of coefficients times terms.

Used for the per-lane strides of global accesses (derived_facts.py) and for `write_once`, the
output-coverage question "can two store instances write one element?" (`write_once_proved`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import gcd, prod

import numpy as np

from ..facts.view import KernelView
from ..hw.expr import ExprTable, evaluate, symbols
from .smt import Encoder

MAX_LANE_POINTS = 1 << 20  # threads x constant-loop points enumerated per store


def lane_separable(table: ExprTable, eid: int, shared: set[str]) -> bool:
    """Whether the symbols in `shared` (equal for both lanes of a pair) occur in `eid` only in
    terms that are added or subtracted, possibly scaled by a constant: then their contribution
    cancels in the difference of the two lanes' values, whatever its value. (`bm + i // 8` is;
    `(bm + i) // 8` is not: which side of a multiple of 8 `i` lands on depends on `bm`.)"""
    names = symbols(table, eid)
    if not names & shared or not names - shared:
        return True  # no shared symbol, or no lane-dependent one: nothing to separate
    n = table.nodes[eid]
    if n.op in ("add", "sub", "neg"):
        return all(lane_separable(table, a, shared) for a in n.args)
    if n.op == "mul":
        consts = [a for a in n.args if table.nodes[a].op == "const"]
        return len(consts) == 1 and all(lane_separable(table, a, shared) for a in n.args if a not in consts)
    return False


def shared_terms(table: ExprTable, eid: int, shared: set[str]) -> list[tuple[int, int]] | None:
    """The shared part of a separable expression as (coefficient, term) pairs, linear through
    `+ - *const` down to symbols or shared-only non-linear terms (`M // 64`); lane-only terms and
    constants are left out. None if the expression is not separable."""
    names = symbols(table, eid)
    if not names & shared:
        return []
    n = table.nodes[eid]
    if n.op in ("add", "sub", "neg"):
        parts = [shared_terms(table, a, shared) for a in n.args]
        if any(p is None for p in parts):
            return None
        signs = (-1,) if n.op == "neg" else (1, -1) if n.op == "sub" else (1, 1)
        return [(s * c, t) for s, p in zip(signs, parts) for c, t in p]  # type: ignore[union-attr]
    consts = [a for a in n.args if table.nodes[a].op == "const"] if n.op == "mul" else []
    if len(consts) == 1:
        inner = shared_terms(table, next(a for a in n.args if a not in consts), shared)
        factor = table.nodes[consts[0]].value
        return None if inner is None else [(c * factor, t) for c, t in inner]
    return None if names - shared else [(1, eid)]


def loop_values(enc: Encoder, h: int) -> range | None:
    """The iteration values of loop `h` when its bounds and step are constants (a range: its
    length is known before anything is allocated), else None (a symbolic loop)."""
    info = enc.view.loops[h]
    lo, hi, step = (enc.nodes[e] for e in (info.lo, info.hi, info.step))
    if lo.op == "const" and hi.op == "const" and step.op == "const" and step.value > 0:
        return range(lo.value, hi.value, step.value)
    return None


def lane_grid(enc: Encoder, axes: list[tuple[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], tuple[int, int]]:
    """Every (loop point, thread) at once, for numpy evaluation of index expressions: each loop
    symbol of `axes` as a (points, 1) column, each `tid:d` as a (1, threads) row, and the full
    shape (points, threads); points run over the axes in order, the last fastest."""
    combos = (np.stack(np.meshgrid(*[a for _, a in axes], indexing="ij"), -1).reshape(-1, len(axes)) if axes
              else np.zeros((1, 0), np.int64))
    env: dict[str, np.ndarray] = {name: combos[:, i:i + 1] for i, (name, _) in enumerate(axes)}
    threads = enc.block_size()
    rest = np.arange(threads, dtype=np.int64)[None, :]
    for d, extent in enumerate(enc.block_dims()):
        env[f"tid:{d}"] = rest % extent
        rest = rest // extent
    return env, (combos.shape[0], threads)


def _lane_axes(enc: Encoder, stmt: int) -> tuple[dict[str, np.ndarray], set[str]] | None:
    """Every (thread, constant-loop point) that may execute `stmt`, as flat arrays per symbol,
    and the names of its symbolic loops (shared between lanes). None when too many points."""
    view = enc.view
    axes: list[tuple[str, np.ndarray]] = []
    symbolic: set[str] = set()
    for h in view.enclosing_loops(stmt):
        values = loop_values(enc, h)
        if values is None:
            symbolic.add(f"loop:{h}")
        elif len(values) > MAX_LANE_POINTS:
            return None
        else:
            axes.append((f"loop:{h}", np.arange(values.start, values.stop, values.step, dtype=np.int64)))
    if prod(a.size for _, a in axes) * enc.block_size() > MAX_LANE_POINTS:
        return None
    env, shape = lane_grid(enc, axes)
    return {name: np.broadcast_to(v, shape).reshape(-1) for name, v in env.items()}, symbolic


def _row_keys(image: np.ndarray, lows: list[int], highs: list[int]) -> np.ndarray:
    """One integer per row of `image` (points x coordinates, coordinate d in [lows[d], highs[d]]),
    equal exactly when the rows are: a mixed-radix number when it fits in 62 bits (sorting
    integers is several times faster than np.unique over rows), else the rows' bytes."""
    span = 1
    for lo, hi in zip(lows, highs):
        span *= int(hi) - int(lo) + 1
    if span < 1 << 62:
        key = np.zeros(image.shape[0], dtype=np.int64)
        for d, (lo, hi) in enumerate(zip(lows, highs)):
            key = key * (int(hi) - int(lo) + 1) + (image[:, d] - int(lo))
        return key
    return np.ascontiguousarray(image).view(np.dtype((np.void, image.dtype.itemsize * image.shape[1]))).ravel()


# stores with at most this many lane points keep their image's rows as a set for the check of two
# stores (a set of 64 K rows is a few MiB; at MAX_LANE_POINTS it would be ~80 MiB per store, kept
# for the whole kernel): larger ones are compared by np.unique per pair
ROW_SET_POINTS = 1 << 16


@dataclass
class _StoreLanes:
    """One store's part of `write_once_proved`, the same for every pair it is in."""
    image: np.ndarray  # per (thread, constant-loop point): the lane part of each coordinate
    key_rows: list[list[tuple[str, int]]]  # per coordinate: (key, coefficient) of its shared part
    fixed: list[list[tuple[int, int]]]  # per coordinate: terms of sizes alone
    keys: set[str]  # what names an instance: grid block ids and symbolic loops' variables

    @cached_property
    def rows(self) -> frozenset[bytes]:
        """The image's distinct rows, made once per store: whether two stores' lane images are
        disjoint is then a set operation (np.unique per pair was most of speed/gemm_mma_pipelined's
        136 pairs' time)."""
        return frozenset(map(bytes, np.ascontiguousarray(self.image)))


def write_once_proved(enc: Encoder, a1: int, a2: int,
                      memo: dict[int, _StoreLanes | None] | None = None) -> bool:
    """True when no two distinct instances of the stores `a1` and `a2` (the same store when equal)
    can write one element, decided without Z3; False when undecided (Z3 then decides, and finds
    the counterexample of a real collision). `memo`: each store's part, per access, for a
    kernel's pairs (speed/gemm_mma_pipelined asks 136 pairs of 16 stores).

    For each coordinate d, e_d = A_d(s) + B_d(l). The shared parts of two instances differ by
    sum_i c_i * (k_i - k_i'), a multiple of g_d = gcd(c_i), over the keys k_i that name an
    instance (block ids of grid dimensions wider than 1, variables of symbolic loops); terms of
    sizes alone must be the same in both stores and cancel (both instances see the same sizes).
    When every lane value B_d of both stores lies in a window narrower than g_d, a collision
    needs B_d(l) == B_d(l') in every coordinate. Then: two stores whose lane images are disjoint
    never collide; one store collides with itself only if its lane map is not injective over
    (thread, constant loops), or if two distinct keys give one shared part (the key
    coefficients' matrix has a nontrivial kernel). Guards only remove instances: a proof over
    all of them covers the guarded ones."""
    view: KernelView = enc.view
    stores = [view.accesses[a1], view.accesses[a2]]
    dims = len(stores[0].coords)
    if any(s.kind != "store" for s in stores) or len(stores[1].coords) != dims:
        return False
    memo = {} if memo is None else memo
    parts = []
    for acc in stores:
        if acc.aid not in memo:
            memo[acc.aid] = _store_lanes(enc, acc)
        if memo[acc.aid] is None:
            return False
        parts.append(memo[acc.aid])
    keys = parts[1].keys
    images = [p.image for p in parts]
    key_rows = [[*parts[0].key_rows[d], *parts[1].key_rows[d]] for d in range(dims)]
    lows = [int(min(p.image[:, d].min() for p in parts)) for d in range(dims)]
    highs = [int(max(p.image[:, d].max() for p in parts)) for d in range(dims)]
    if parts[0].fixed != parts[1].fixed:
        return False  # different size-only offsets: they do not cancel
    for d, row in enumerate(key_rows):
        step = 0
        for _name, coef in row:
            step = gcd(step, abs(coef))
        if step and highs[d] - lows[d] >= step:
            return False  # lane parts may reach into another block's (or iteration's) range
    if a1 != a2 and max(x.shape[0] for x in images) <= ROW_SET_POINTS:
        return parts[0].rows.isdisjoint(parts[1].rows)
    rows = [_row_keys(x, lows, highs) for x in images]
    if a1 != a2:
        first, second = (np.unique(r) for r in rows)
        return np.unique(np.concatenate([first, second])).shape[0] == first.shape[0] + second.shape[0]
    if np.unique(rows[0]).shape[0] != rows[0].shape[0]:
        return False  # two lanes (or constant-loop points) of one block write one element
    columns = sorted({name for row in key_rows for name, _ in row})
    if set(columns) != keys:
        return False  # a key the coordinates do not name: instances differing only there collide
    if not columns:
        return True
    matrix = np.zeros((dims, len(columns)), dtype=np.float64)
    for d, row in enumerate(key_rows):
        for name, coef in row:
            matrix[d, columns.index(name)] += coef
    return int(np.linalg.matrix_rank(matrix)) == len(columns)


def _store_lanes(enc: Encoder, acc) -> _StoreLanes | None:
    """A store's lane image, key coefficients and size-only terms; None when its coordinates do
    not split into a linear shared part and an enumerable lane part."""
    view: KernelView = enc.view
    table = view.kf.table
    grid_keys = {f"bid:{d}" for d, (grid, _b) in enumerate(view.launch)
                 if not (enc.nodes[grid].op == "const" and enc.nodes[grid].value == 1)}
    domain = _lane_axes(enc, acc.stmt)
    if domain is None or not acc.coords:
        return None
    env, symbolic = domain
    keys = grid_keys | symbolic
    points = next(iter(env.values())).shape[0]
    if points == 0:
        return None  # never runs: Z3 says so with the loop bounds
    values: list[np.ndarray] = []
    fixed: list[list[tuple[int, int]]] = []
    key_rows: list[list[tuple[str, int]]] = []
    for c in acc.coords:
        names = symbols(table, c)
        shared = {n for n in names if n in keys or n.startswith(("size:", "bid:"))}
        if names - shared - set(env):
            return None  # an index-tensor read, or a name no lane or key binds
        terms = shared_terms(table, c, shared)
        if terms is None:
            return None
        fixed.append(sorted((coef, t) for coef, t in terms if table.nodes[t].name not in keys
                            or table.nodes[t].op != "sym"))
        row = []
        for coef, t in terms:
            node = table.nodes[t]
            if node.op == "sym" and node.name in keys:
                row.append((node.name, coef))
            elif symbols(table, t) & keys:
                return None  # a key inside a larger term: not a plain linear shared part
        key_rows.append(row)
        lane = evaluate(table, c, {**env, **{n: 0 for n in shared}})
        values.append(np.broadcast_to(np.asarray(lane, dtype=np.int64), (points,)))
    return _StoreLanes(np.stack(values, axis=1), key_rows, fixed, keys)
