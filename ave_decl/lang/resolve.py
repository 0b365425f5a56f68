"""Name resolution of the language: the builtin names and the matrix-instruction imports of a module."""
from __future__ import annotations

from ..hw.instructions import INSTRUCTIONS, LOAD_MATRIX, MODULES, Instruction, LoadMatrix
from . import ast as A
from .errors import FrontEndError

ELEMENTWISE = {"exp2", "exp", "abs", "sqrt", "rsqrt", "cast", "select", "fmax", "fmin"}

# Values read from another lane of the same warp/wave: `shuffle_xor(x, mask)` (the butterfly
# partner lane ^ mask), `shuffle(x, lane)` (a given lane), `readfirstlane(x)` (lane 0)
LANE_EXCHANGE = ("shuffle_xor", "shuffle", "readfirstlane")
# Reductions over the register slots of one thread: `reduce_max(s)`, `reduce_sum(s)` of a 1-D array
SLOT_REDUCTIONS = ("reduce_max", "reduce_sum")

def butterfly_operand(op: str, args: tuple) -> int | None:
    """The position of `x` in a butterfly step `op(x, shuffle_xor(x, m))` (either order) with op a
    reduction (fmax, fmin, +), else None. The step combines a value with the same value at the
    partner lane: a partial reduction of the row, so its result is a row statistic."""
    if op not in ("fmax", "fmin", "+") or len(args) != 2:
        return None
    for i in (0, 1):
        other = args[1 - i]
        if isinstance(other, A.Call) and other.func_name == "shuffle_xor" and other.args and other.args[0] == args[i]:
            return i
    return None


# Scheduling hints (AMD's llvm.amdgcn.sched.barrier / sched.group.barrier / s.setprio): kept in the
# AST for the backends, ignored by the verifier and the simulator. name -> (parameter names, largest
# value of each; all are constant integers >= 0)
SCHEDULING_HINTS: dict[str, tuple[tuple[str, int], ...]] = {
    "sched_barrier": (("mask", 2**31 - 1),),
    "sched_group_barrier": (("mask", 2**31 - 1), ("size", 2**31 - 1), ("sync_id", 2**31 - 1)),
    "s_setprio": (("priority", 3),),
    "setprio": (("priority", 3),),
}


BUILTINS = {
    "assume", "tag", "assert_tag_eq", "assert_tag", "assert_mask", "reset_tags", "syncthreads", "thread_id", "block_id",
    "lane_id", "wave_id", "warp_id", "shared", "local", "row_major", "col_major", "layout", "swizzle", "range",
    "min", "max", "async_copy", "async_wait", "async_commit", "lane_max", "lane_sum", *ELEMENTWISE, *SCHEDULING_HINTS,
    *LANE_EXCHANGE, *SLOT_REDUCTIONS, "make_rsrc", "raw_buffer_load", "raw_buffer_store",
    "buffer_load_lds", "s_waitcnt", "pack", "bitcast", "perm", "prmt", "load_vec", "store_vec", "view",
}


def free_names(e: A.Expr, bound: set[str]) -> set[str]:
    out: set[str] = set()

    def go(x) -> None:
        if isinstance(x, A.Name):
            if x.id not in bound:
                out.add(x.id)
        elif isinstance(x, tuple):
            for y in x:
                go(y)
        elif hasattr(x, "__dataclass_fields__"):
            for f in x.__dataclass_fields__:
                if f != "span":
                    go(getattr(x, f))

    go(e)
    del go  # empties the closure's cell: no function <-> cell cycle left for the collector
    return out


def resolve_imports(module: A.Module) -> dict[str, Instruction | LoadMatrix]:
    out: dict[str, Instruction | LoadMatrix] = {}
    for imp in module.imports:
        vendor = MODULES.get(imp.module)
        if vendor is None:
            raise FrontEndError(f"unknown module '{imp.module}' (known: {', '.join(sorted(MODULES))})", imp.span)
        for n in imp.names:
            instr = INSTRUCTIONS.get(n) or (LOAD_MATRIX.get(n) if vendor == "nvidia" else None)
            if instr is None or getattr(instr, "vendor", "nvidia") != vendor:
                offered = sorted([i.name for i in INSTRUCTIONS.values() if i.vendor == vendor] +
                                 (list(LOAD_MATRIX) if vendor == "nvidia" else []))
                raise FrontEndError(f"'{imp.module}' has no instruction '{n}' (it offers: {', '.join(offered)})",
                                    imp.span)
            out[n] = instr
    return out
