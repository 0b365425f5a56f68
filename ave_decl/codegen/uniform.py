"""How far a value may differ between threads: the same in the whole block, the same within each
warp/wave, or per thread (a conservative analysis).

Warp operations (matrix instructions, shuffles, lane reductions, ldmatrix) need every lane of
their warp, so they may sit only under conditions that are the same within a warp; a
`syncthreads()` needs every thread of the block, so under a condition that differs between warps
(a wave-specialized `if wave_id() < 4:`) it is correct only when every wave reaches the same
barriers, which the verifier's ave/barrier-divergence proves. Anything else would hang on the host
target and is undefined on a GPU (`bar.sync`, `shfl.sync` and `s_barrier` wait for threads that
never come), so the lowering refuses it (exit 6).

Levels: BLOCK (sizes, constants, block ids, loop variables over uniform bounds), WARP (warp_id,
wave_id, readfirstlane and what is computed from them alone) and THREAD (thread and lane ids, data:
any subscript, any name of a buffer, slot reductions, lane exchanges). A name's level is the highest of every value assigned to it and of
every condition and loop bound it is assigned under (a value assigned in one arm of a per-thread
`if` differs between threads, whatever it is), to a fixpoint.
"""
from __future__ import annotations

from ..lang import ast as A

BLOCK, WARP, THREAD = 0, 1, 2
LEVEL_NAMES = {BLOCK: "the whole block", WARP: "each warp/wave", THREAD: "each thread"}

CALL_LEVELS = {"thread_id": THREAD, "lane_id": THREAD, "warp_id": WARP, "wave_id": WARP, "readfirstlane": WARP,
               "lane_max": THREAD, "lane_sum": THREAD, "shuffle_xor": THREAD, "shuffle": THREAD,
               "reduce_max": THREAD, "reduce_sum": THREAD}
ARRAYS = ("local", "shared", "subview", "view")  # a name bound to a buffer: its data differs between threads
BARRIERS = ("syncthreads",)


def level(e: A.Expr, names: dict[str, int]) -> int:
    """The level of an expression given the levels of the names it reads."""
    if isinstance(e, A.Name):
        return names.get(e.id, BLOCK)
    if isinstance(e, A.Subscript):
        return THREAD
    if isinstance(e, A.Call) and e.func_name in CALL_LEVELS:
        return CALL_LEVELS[e.func_name]
    top = BLOCK
    for value in vars(e).values():
        for x in value if isinstance(value, tuple) else (value,):
            if isinstance(x, A.Keyword):
                x = x.value
            if hasattr(x, "__dataclass_fields__") and not isinstance(x, A.Lambda):
                top = max(top, level(x, names))
                if top == THREAD:
                    return top
    return top


def loop_level(s: A.For, names: dict[str, int]) -> int:
    """The level of a loop's trip count (its range's arguments)."""
    return level(s.iter, names)


def name_levels(body: tuple[A.Stmt, ...]) -> dict[str, int]:
    names: dict[str, int] = {}

    def raise_to(name: str, lv: int) -> bool:
        if lv > names.get(name, BLOCK):
            names[name] = lv
            return True
        return False

    def walk(stmts: tuple[A.Stmt, ...], ctx: int) -> bool:
        changed = False
        for s in stmts:
            if isinstance(s, (A.Assign, A.AugAssign)) and isinstance(s.target, A.Name):
                # an array name read as a whole (reduce_max(s), a matrix instruction's operands)
                # reads per-thread data without a subscript
                is_array = isinstance(s.value, A.Call) and s.value.func_name in ARRAYS
                lv = THREAD if is_array else max(ctx, level(s.value, names))
                if isinstance(s, A.AugAssign):
                    lv = max(lv, names.get(s.target.id, BLOCK))
                changed |= raise_to(s.target.id, lv)
            elif isinstance(s, A.For):
                inner = max(ctx, loop_level(s, names))
                changed |= raise_to(s.var, inner)
                changed |= walk(s.body, inner)
            elif isinstance(s, A.If):
                inner = max(ctx, level(s.cond, names))
                changed |= walk(s.body, inner) | walk(s.orelse, inner)
        return changed

    while walk(body, BLOCK):
        pass
    return names


def barrier_under_warp_condition(body: tuple[A.Stmt, ...]) -> A.Call | None:
    """The first `syncthreads()` under a condition or loop that may differ between warps (but not
    within one): it compiles only where ave/barrier-divergence is proven."""
    names = name_levels(body)

    def walk(stmts: tuple[A.Stmt, ...], ctx: int) -> A.Call | None:
        for s in stmts:
            if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name in BARRIERS:
                if ctx == WARP:
                    return s.expr
            elif isinstance(s, A.For):
                found = walk(s.body, max(ctx, loop_level(s, names)))
                if found is not None:
                    return found
            elif isinstance(s, A.If):
                inner = max(ctx, level(s.cond, names))
                found = walk(s.body, inner) or walk(s.orelse, inner)
                if found is not None:
                    return found
        return None

    return walk(body, BLOCK)
