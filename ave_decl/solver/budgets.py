"""Deterministic work budgets for the solver's internal caps, in Z3 resource units, not seconds.

Z3's `rlimit` counts solver work (propagations, conflicts, simplification steps): the same query
on the same Z3 stops at the same point whatever the machine load. So whatever an internal cap
decides — which counterexample is printed (small-model re-solves), a violation set's count, whether
a `covers` / `may_be_empty` fact is proved — is the same from run to run. The wall clock
(`--timeout`, or a far safety net where no user bound reaches) stays the outer bound of every call;
it decides nothing on its own unless the machine is so slow that it trips before the budget.

Calibration (docs/smt.md, "Budgets"): on examples/*.ave and their mutants the largest use of a
correct run is ~0.2 M units per small-model re-solve, ~0.05 M per derived-fact query and ~0.08 M per
enumeration call; Z3 does roughly 1-3 M units per second on this machine (less under load).
"""
from __future__ import annotations

import z3

from .raw_terms import _unchecked

SMALL_MODEL_RLIMIT = 2_000_000  # per re-solve at smaller sizes (a preference, not a proof)
DERIVED_FACT_RLIMIT = 2_000_000  # per `covers` / `may_be_empty` / stride query (not proved: "no")
DERIVED_FACT_WALL_MS = 30_000  # safety net only: add_semantic_facts has no user timeout
QUICK_PROOF_RLIMIT = 300_000  # per budgeted proof attempt before the full solver (smt.Encoder.proves)
QUICK_PROOF_SEEDS = (0, 1, 2)  # one attempt per seed, until one decides the query
ENUM_CALL_RLIMIT = 1_000_000  # per violation-set enumeration call
ENUM_TOTAL_RLIMIT = 8_000_000  # per violation set: past it the count is "at least N"
ENUM_MAX_POINTS = 4096  # per violation set: past it the count is "at least N"


_stats_size = _unchecked(z3.Z3_stats_size)
_stats_key = _unchecked(z3.Z3_stats_get_key)  # bytes from the raw call, str from z3py's
_stats_uint = _unchecked(z3.Z3_stats_get_uint_value)


_RLIMIT_AT = [0]  # `rlimit_count`'s last index of the key


def rlimit_count(solver: z3.Solver) -> int:
    """Resource units this solver has spent so far (cumulative over its checks). One pass over
    the statistics (`keys()` then `get_key_value` made two, ~90 C calls each, per enumeration
    step: a fifth of a violation set's time), through the unchecked C getters (z3py's checked
    ones and their string decoding were a tenth of an enumeration's profile), looked up first
    where the key was the last time (14 -> 7 µs a call)."""
    stats = solver.statistics()
    ctx, handle = stats.ctx.ref(), stats.stats
    size = _stats_size(ctx, handle)
    hint = _RLIMIT_AT[0]  # where it was last time (the keys of an enumeration's solver stay put)
    if hint < size and _stats_key(ctx, handle, hint) == b"rlimit count":
        return int(_stats_uint(ctx, handle, hint))
    for i in range(size):
        if _stats_key(ctx, handle, i) == b"rlimit count":
            _RLIMIT_AT[0] = i
            return int(_stats_uint(ctx, handle, i))
    return 0



def stopped_by_wall_clock(solver: z3.Solver, used: int, limit: int) -> bool:
    """After an `unknown`: the wall-clock timeout (load-dependent) stopped it, not the rlimit. Z3
    says "timeout", or "canceled" for either limit when it cancelled a tactic: then it was the
    clock if the call had not used up its work budget (`used` of `limit` rlimit units)."""
    reason = solver.reason_unknown()
    return reason == "timeout" or (reason == "canceled" and used < limit)
