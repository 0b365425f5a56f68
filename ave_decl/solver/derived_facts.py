"""Solver-derived facts that the Datalog rules need: `may_be_empty` and `covers`.

They are quantifier-free Z3 queries over the lowered kernel, run before the fixpoint:
  * may_be_empty(h): some sizes allowed by assume(...) make loop h run zero times.
  * covers(a, level): store access `a` writes every element of its buffer exactly once when
    its free variables range over their domains: the threads of the block (shared memory;
    a local buffer belongs to one thread) and the loops around the store strictly inside
    `level` (0 = the kernel). Proved as a bijection onto [0, size): every address is in range,
    no two distinct instances share an address (injectivity), and the instance count equals
    the buffer size. A guarded store never covers.
A query that is not UNSAT within its deterministic budget (DERIVED_FACT_RLIMIT Z3 resource units,
budgets.py; the same answer whatever the machine load) counts as "no" (may be empty / does not
cover): the safe side. DERIVED_FACT_WALL_MS is only a safety net far above that budget.
"""
from __future__ import annotations

from math import prod

import numpy as np
import z3

from ..facts.kernel_facts import KernelFacts
from ..facts.view import KernelView
from ..hw.expr import evaluate, symbols
from . import proof_memo
from .budgets import DERIVED_FACT_RLIMIT, DERIVED_FACT_WALL_MS
from .lane_split import lane_grid, lane_separable, loop_values
from .smt import Encoder, Instance


def _unsat(enc: Encoder, constraints: list[z3.BoolRef]) -> bool:
    """Whether the constraints are proved unsatisfiable within the derived-fact budget (or
    were proved so before: solver/proof_memo.py)."""
    formulas = [*constraints, *enc.side]

    def decide() -> bool:
        once = enc.attempt_solver(DERIVED_FACT_WALL_MS, DERIVED_FACT_RLIMIT)  # checked once
        once.add(*enc.prepare(formulas))
        return once.check() == z3.unsat

    return proof_memo.proved_by(enc.query_key(formulas), decide)


def add_semantic_facts(kf: KernelFacts) -> z3.Context:
    """Add the solver-derived rows the rules read; return the Z3 context they were proved in
    (the kernel's solver may go on in it: pipeline.front_end says when)."""
    view = KernelView.of(kf)
    enc = Encoder(view)
    base = enc.base_constraints()
    for h in view.loops:
        inst = enc.new_instance(h, "h")
        info = view.loops[h]
        if not _unsat(enc, base + inst.constraints + [enc.int_term(info.lo, inst.env) >= enc.int_term(info.hi, inst.env)]):
            kf.add("may_be_empty", h)
    data_guarded = {s for _k, s in kf.relation("data_guard")}
    for a, acc in view.accesses.items():
        if acc.kind not in ("store", "write_all"):
            continue
        space, size_eid = view.buffers[acc.buffer]
        if space == "global" or acc.stmt in data_guarded:
            continue
        guards = view.all_guards(acc.stmt)
        if guards and space != "local":
            continue  # other threads' guards decide which elements a shared store writes
        # a register array's store under `if`s covers it, each time the `if`s let it run, when no
        # condition depends on the loops whose iterations together write the array (a kill then
        # needs the store to dominate the load: rules/dataflow.dl)
        guard_loops = {n for eid, _ in guards for n in symbols(kf.table, eid) if n.startswith("loop:")}
        loops = view.enclosing_loops(acc.stmt)
        for depth in range(len(loops) + 1):
            level = loops[depth - 1] if depth else 0
            if any(f"loop:{h}" in guard_loops for h in loops[depth:]):
                continue
            if _covers(enc, base, acc, space, size_eid, loops[depth:], loops[:depth]):
                kf.add("covers", a, level)
    add_lane_strides(kf, view, enc, base)
    return enc.ctx


def _trip_count(enc: Encoder, header: int) -> int | None:
    info = enc.view.loops[header]
    lo, hi, step = (enc.nodes[e] for e in (info.lo, info.hi, info.step))
    if lo.op != "const" or hi.op != "const":
        return None
    return max(0, -(-(hi.value - lo.value) // step.value))


def _covers(enc: Encoder, base, acc, space: str, size_eid: int, free_loops: list[int],
            fixed_loops: list[int]) -> bool:
    size_node = enc.nodes[size_eid]
    if size_node.op != "const":
        return False
    # a whole-buffer write (instruction result, reset_tags) writes each slot once per execution,
    # whichever threads execute it; element stores are one element per thread
    uniform = space == "local" or acc.kind == "write_all"
    count = 1 if uniform else enc.block_size()
    if acc.kind == "write_all":
        count *= size_node.value
    for h in free_loops:
        trip = _trip_count(enc, h)
        if trip is None:
            return False
        count *= trip
    if count != size_node.value:
        return False
    concrete = _covers_by_enumeration(enc, acc, uniform, size_node.value, free_loops)
    if concrete is not None:
        return concrete
    first = enc.new_instance(acc.stmt, "c", with_guards=False)
    shared_loops = {h: first.env[f"loop:{h}"] for h in fixed_loops}
    second = enc.new_instance(acc.stmt, "d", share_block=first, loops=shared_loops, with_guards=False,
                              share_thread=first if uniform else None)
    addr1 = enc.int_term(acc.addr, first.env)
    addr2 = enc.int_term(acc.addr, second.env)
    ctx = base + first.constraints + second.constraints
    in_range = _unsat(enc, base + first.constraints + _slot_range(acc, first, size_node.value)
                      + [z3.Or(addr1 < 0, addr1 >= size_node.value)])
    if not in_range:
        return False
    differ = [first.env[f"loop:{h}"] != second.env[f"loop:{h}"] for h in free_loops]
    if not uniform:
        differ += [first.env[f"tid:{d}"] != second.env[f"tid:{d}"] for d in range(len(enc.block_dims()))]
    if acc.kind == "write_all":
        differ.append(first.env["slot"] != second.env["slot"])
    if not differ:
        return True
    return _unsat(enc, ctx + _slot_range(acc, first, size_node.value) + _slot_range(acc, second, size_node.value)
                  + [z3.Or(*differ), addr1 == addr2])


def _covers_by_enumeration(enc: Encoder, acc, uniform: bool, size: int, free_loops: list[int]) -> bool | None:
    """Exact check on the finite domain when the address depends only on the free variables.

    Swizzled addresses (XOR through bit-vectors) make the injectivity query slow in Z3 (a 16x32
    swizzled tile timed out at 2 s); enumerating at most `size` points with numpy is exact and
    takes microseconds. None when the address depends on anything else (then Z3 decides)."""
    table = enc.view.kf.table
    names = {f"loop:{h}" for h in free_loops}
    dims = enc.block_dims()
    if not uniform:
        names |= {f"tid:{d}" for d in range(len(dims))}
    if acc.kind == "write_all":
        names.add("slot")
    if not symbols(table, acc.addr) <= names:
        return None
    ranges = [range(enc.nodes[enc.view.loops[h].lo].value, enc.nodes[enc.view.loops[h].hi].value,
                    enc.nodes[enc.view.loops[h].step].value) for h in free_loops]
    instances = prod(len(r) for r in ranges) * (1 if uniform else prod(dims)) * (size if acc.kind == "write_all" else 1)
    if instances != size:  # the check below compares the counts first; decided before allocating (loops of 2**30)
        return False
    axes: list[tuple[str, np.ndarray]] = []
    for h, r in zip(free_loops, ranges):
        axes.append((f"loop:{h}", np.arange(r.start, r.stop, r.step)))
    if not uniform:
        axes += [(f"tid:{d}", np.arange(extent)) for d, extent in enumerate(dims)]
    if acc.kind == "write_all":
        axes.append(("slot", np.arange(size)))
    grids = np.meshgrid(*[a for _, a in axes], indexing="ij") if axes else []
    env = {name: g.ravel() for (name, _), g in zip(axes, grids)}
    for d in range(len(dims)):
        env.setdefault(f"tid:{d}", np.zeros(1, dtype=np.int64))
    addrs = np.broadcast_to(np.asarray(evaluate(table, acc.addr, env)), (max(1, len(next(iter(env.values())))),))
    return bool(addrs.size == size and np.array_equal(np.sort(addrs), np.arange(size)))


def _slot_range(acc, inst: Instance, size: int) -> list[z3.BoolRef]:
    if acc.kind != "write_all":
        return []
    return [inst.env["slot"] >= 0, inst.env["slot"] < size]


# ------------------------------------------------------------ per-lane strides of global accesses
def add_lane_strides(kf: KernelFacts, view: KernelView, enc: Encoder, base: list[z3.BoolRef]) -> None:
    """`access_lane_coord_stride(a, dim, run, stride)` and `access_lane_stride(a, run, stride)`.

    For a global load or store, two lanes l and l + 1 of one aligned run of `run` lanes (a power
    of two, at most the wave/warp and the block) executing it in the same block and iteration:
    coordinate `dim` differs by the constant `stride` for every such pair (both lanes active,
    every size allowed by assume(...)); `run` is the largest run for which every coordinate's
    difference is constant. The address stride (elements, row-major) is emitted when it is a
    constant too: no coordinate that moves has a size-dependent trailing extent. Coordinates are
    thread maps (linear, // and % by constants), so each query is small; an unproved one (or an
    index-tensor read that varies per lane) leaves the access without strides: the safe side
    for a performance warning."""
    block = enc.block_size()
    runs = [r for r in (64, 32, 16, 8, 4, 2) if r <= view.group_size and r <= block]
    if not runs:
        return
    for a, acc in view.accesses.items():
        if view.buffers[acc.buffer][0] != "global" or acc.kind not in ("load", "store") or not acc.coords:
            continue
        found = _strides_by_enumeration(enc, acc, runs)
        if found is not None and view.all_guards(acc.stmt):
            # guards only take pairs of lanes away, so the largest run holds under them too (with
            # the same differences) if any pair runs together; another answer is Z3's to give
            # (masked tails: 5 Z3 checks per access -> 1)
            if found and found[0] == runs[0]:
                found = found if _pair_runs(enc, base, acc) else ()  # no pair runs: Z3's answer too
            else:
                found = None
        if found is None:
            found = _strides_by_z3(enc, base, acc, runs)
        if not found:
            continue
        run, diffs = found
        for d, diff in enumerate(diffs):
            kf.add("access_lane_coord_stride", a, d, run, diff)
        stride = _address_stride(enc, view.dims[acc.buffer], diffs)
        if stride is not None:
            kf.add("access_lane_stride", a, run, stride)


def _address_stride(enc: Encoder, extents: list[int], diffs: list[int]) -> int | None:
    """Row-major address difference of coordinate differences; None when it depends on a size."""
    total, trailing = 0, 1
    for d in reversed(range(len(diffs))):
        if diffs[d]:
            if trailing is None:
                return None
            total += diffs[d] * trailing
        node = enc.nodes[extents[d]]
        trailing = trailing * node.value if trailing is not None and node.op == "const" else None
    return total


def _strides_by_enumeration(enc: Encoder, acc, runs: list[int]) -> tuple | None:
    """Exact, when the coordinates depend only on thread ids and loops with constant bounds: every
    pair of consecutive lanes at every loop point, guards left out (the caller's to weigh). ()
    when no run has constant differences, None when not enumerable (Z3 decides)."""
    view = enc.view
    loops = {f"loop:{h}": h for h in view.enclosing_loops(acc.stmt)}
    names: set[str] = set()
    for c in acc.coords:
        names |= symbols(view.kf.table, c)
    axes: list[tuple[str, np.ndarray]] = []
    shared: dict[str, int] = {}  # the same for both lanes of a pair: block ids, sizes, symbolic loops
    for name in sorted(names):
        if name in loops:
            values = loop_values(enc, loops[name])
            if values is None:
                shared[name] = 0
                continue
            if len(values) > 4096:  # decided before allocating (loops of 2**30)
                return None
            axes.append((name, np.arange(values.start, values.stop, values.step)))
        elif name.startswith("uf:"):
            return None  # an index-tensor read: Z3 decides, with the table's value ranges
        elif not name.startswith("tid:"):
            shared[name] = 0
    if shared and not all(lane_separable(view.kf.table, c, set(shared)) for c in acc.coords):
        return None
    if any(a.size == 0 for _, a in axes) or np.prod([a.size for _, a in axes]) > 4096:
        return None  # an empty loop: Z3 finds that no pair executes the access
    env, shape = lane_grid(enc, axes)
    env.update(shared)  # only in added terms (lane_separable): they cancel in a lane difference
    diffs = [np.diff(np.broadcast_to(np.asarray(evaluate(view.kf.table, c, env), dtype=np.int64), shape), axis=1)
             for c in acc.coords]
    lane = np.arange(shape[1] - 1)
    for run in runs:
        inside = lane % run != run - 1
        picked = [d[:, inside] for d in diffs]
        if all(p.size and (p == p.flat[0]).all() for p in picked):
            return run, [int(p.flat[0]) for p in picked]
    return ()


def _strides_by_z3(enc: Encoder, base: list[z3.BoolRef], acc, runs: list[int]) -> tuple[int, list[int]] | None:
    check, t1, t2, diffs = _pair_solver(enc, base, acc)
    # candidate differences from one pair (l even: a pair inside every aligned run)
    result, model = check(t1 % 2 == 0)
    if result != z3.sat:
        return None  # no two consecutive lanes execute the access together (or undecided)
    candidate = []
    for diff in diffs:
        value = model.eval(diff, model_completion=True)
        if not z3.is_int_value(value):
            return None
        candidate.append(value.as_long())
    for run in runs:
        same_run = t1 / run == t2 / run
        if all(check(same_run, diff != value)[0] == z3.unsat for diff, value in zip(diffs, candidate)):
            return run, candidate
    return None


def _pair_runs(enc: Encoder, base: list[z3.BoolRef], acc) -> bool:
    """Whether two consecutive lanes (the first even) execute the access together: `_strides_by_z3`'s
    first question, asked the same way (the same instances, names and budget)."""
    check, t1, _t2, _diffs = _pair_solver(enc, base, acc)
    return check(t1 % 2 == 0)[0] == z3.sat


def _pair_solver(enc: Encoder, base: list[z3.BoolRef], acc):
    """Two lanes l and l + 1 executing the access in one block and iteration: a `check(*extra)`
    of that pair, their linear thread ids and the coordinates' differences."""
    view = enc.view
    first = enc.new_instance(acc.stmt, "l")
    loops = {h: first.env[f"loop:{h}"] for h in view.enclosing_loops(acc.stmt)}
    second = enc.new_instance(acc.stmt, "m", share_block=first, loops=loops)
    t1, t2 = enc.linear_thread(first), enc.linear_thread(second)
    pair = base + first.constraints + second.constraints + [t2 == t1 + 1]
    diffs = [enc.int_term(c, second.env) - enc.int_term(c, first.env) for c in acc.coords]
    # One solver for every query of this access: the pair is div/mod-normalised once and each
    # query is a push/pop (the budget is per check); the solver also asserts the ranges of the
    # index-tensor reads in the coordinate differences the queries constrain.
    solver = enc.query_solver(DERIVED_FACT_WALL_MS, [*pair, *enc.side], rlimit=DERIVED_FACT_RLIMIT,
                              terms=tuple(diffs))

    def check(*extra: z3.BoolRef):
        solver.push()
        solver.add(*extra)
        try:
            result = solver.check()
            return result, (solver.model() if result == z3.sat else None)
        finally:
            solver.pop()

    return check, t1, t2, diffs
