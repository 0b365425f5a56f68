"""Which `if` conditions may differ between the threads of a block (a conservative analysis).

A barrier or a warp operation under such a condition is undefined on a GPU (`bar.sync` and
`shfl.sync` with a full mask wait for threads that never come) and would hang the host
target, so the lowering refuses it (exit 6). Varying: thread, lane and warp ids, data (any
subscript), and names assigned from varying expressions anywhere (fixpoint). Sizes, constants,
block ids and loop variables (the language's loop bounds are uniform) are uniform.
"""
from __future__ import annotations

from ..lang import ast as A

VARYING_CALLS = {"thread_id", "lane_id", "warp_id", "wave_id", "lane_max", "lane_sum", "shuffle_xor", "shuffle",
                 "readfirstlane"}


def _mentions(e: A.Expr, varying: set[str]) -> bool:
    if isinstance(e, A.Name):
        return e.id in varying
    if isinstance(e, A.Subscript):
        return True
    if isinstance(e, A.Call) and e.func_name in VARYING_CALLS:
        return True
    for value in vars(e).values():
        for x in value if isinstance(value, tuple) else (value,):
            if hasattr(x, "__dataclass_fields__") and not isinstance(x, A.Keyword) and _mentions(x, varying):
                return True
            if isinstance(x, A.Keyword) and _mentions(x.value, varying):
                return True
    return False


def varying_names(body: tuple[A.Stmt, ...]) -> set[str]:
    varying: set[str] = set()

    def walk(stmts: tuple[A.Stmt, ...]) -> bool:
        changed = False
        for s in stmts:
            if isinstance(s, (A.Assign, A.AugAssign)) and isinstance(s.target, A.Name):
                if s.target.id not in varying and _mentions(s.value, varying):
                    varying.add(s.target.id)
                    changed = True
            elif isinstance(s, A.For):
                changed |= walk(s.body)
            elif isinstance(s, A.If):
                changed |= walk(s.body) | walk(s.orelse)
        return changed

    while walk(body):
        pass
    return varying


def is_varying(e: A.Expr, varying: set[str]) -> bool:
    return _mentions(e, varying)
