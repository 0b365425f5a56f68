"""The range of an index expression over loop variables and sizes, by interval arithmetic: what a
subview at a varying offset (`subview(S, (kb // 32) % 2 * 4096, shape)`) is checked with, at
lowering, to lie inside its storage in every iteration. Conservative: an operation it cannot
bound gives an open end, and the caller refuses what it cannot show."""
from __future__ import annotations

from ..hw.expr import ExprTable

Interval = tuple[int | None, int | None]  # None: unbounded on that side


def interval(t: ExprTable, eid: int, loops: dict[str, tuple[int, int]]) -> Interval:
    """Bounds of expression `eid`; `loops` maps `loop:<h>` to the (lo, hi) expressions of its
    range (the variable lies in [lo, hi - 1]); a size is a non-negative unknown."""
    n = t.nodes[eid]
    if n.op == "const":
        return n.value, n.value
    if n.op == "sym":
        if n.name in loops:
            lo, hi = (interval(t, x, loops) for x in loops[n.name])
            return lo[0], None if hi[1] is None else hi[1] - 1
        return (0, None) if n.name.startswith("size:") else (None, None)
    args = [interval(t, a, loops) for a in n.args]
    return _OPS.get(n.op, lambda _a: (None, None))(args)


def _add(a: Interval, b: Interval, sign: int = 1) -> Interval:
    lo_b, hi_b = (b if sign > 0 else (None if b[1] is None else -b[1], None if b[0] is None else -b[0]))
    return (None if a[0] is None or lo_b is None else a[0] + lo_b, None if a[1] is None or hi_b is None else a[1] + hi_b)


def _mul(a: Interval, b: Interval) -> Interval:
    if None not in a + b:
        products = [x * y for x in a for y in b]  # type: ignore[operator]
        return min(products), max(products)
    if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
        return a[0] * b[0], None if a[1] is None or b[1] is None else a[1] * b[1]
    return None, None


def _mod(a: Interval, b: Interval) -> Interval:
    if b[0] is None or b[0] != b[1] or b[0] <= 0 or a[0] is None or a[0] < 0:
        return None, None
    if a[1] is not None and a[1] < b[0]:
        return a
    return 0, b[0] - 1


def _floordiv(a: Interval, b: Interval) -> Interval:
    if b[0] is None or b[0] != b[1] or b[0] <= 0 or a[0] is None or a[0] < 0:  # floor and truncation agree
        return None, None
    c = b[0]
    return a[0] // c, None if a[1] is None else a[1] // c


def _pick(f, a: Interval, b: Interval) -> Interval:
    lo = None if a[0] is None or b[0] is None else f(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else f(a[1], b[1])
    if f is max:  # max(x, y) >= either lower bound
        lo = a[0] if b[0] is None else b[0] if a[0] is None else lo
    else:  # min(x, y) <= either upper bound
        hi = a[1] if b[1] is None else b[1] if a[1] is None else hi
    return lo, hi


_OPS = {
    "add": lambda a: _add(a[0], a[1]),
    "sub": lambda a: _add(a[0], a[1], -1),
    "mul": lambda a: _mul(a[0], a[1]),
    "mod": lambda a: _mod(a[0], a[1]),
    "floordiv": lambda a: _floordiv(a[0], a[1]),
    "min": lambda a: _pick(min, a[0], a[1]),
    "max": lambda a: _pick(max, a[0], a[1]),
    "neg": lambda a: _add((0, 0), a[0], -1),
}
