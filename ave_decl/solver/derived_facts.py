"""Solver-derived facts that the Datalog rules need: `may_be_empty` and `covers`.

They are quantifier-free Z3 queries over the lowered kernel, run before the fixpoint:
  * may_be_empty(h): some sizes allowed by assume(...) make loop h run zero times.
  * covers(a, level): store access `a` writes every element of its buffer exactly once when
    its free variables range over their domains: the threads of the block (shared memory;
    a local buffer belongs to one thread) and the loops around the store strictly inside
    `level` (0 = the kernel). Proved as a bijection onto [0, size): every address is in range,
    no two distinct instances share an address (injectivity), and the instance count equals
    the buffer size. A guarded store never covers.
A query that is not UNSAT in time counts as "no" (may be empty / does not cover): the safe side.
"""
from __future__ import annotations

import numpy as np
import z3

from ..facts.kernel_facts import KernelFacts
from ..facts.view import KernelView
from ..hw.expr import evaluate, symbols
from .smt import Encoder, Instance

_QUERY_MS = 2000


def _unsat(enc: Encoder, constraints: list[z3.BoolRef]) -> bool:
    return enc.query_solver(_QUERY_MS, [*constraints, *enc.side]).check() == z3.unsat


def add_semantic_facts(kf: KernelFacts) -> None:
    view = KernelView.of(kf)
    enc = Encoder(view)
    base = enc.base_constraints()
    for h in view.loops:
        inst = enc.new_instance(h, "h")
        info = view.loops[h]
        if not _unsat(enc, base + inst.constraints + [enc.int_term(info.lo, inst.env) >= enc.int_term(info.hi, inst.env)]):
            kf.add("may_be_empty", h)
    for a, acc in view.accesses.items():
        if acc.kind not in ("store", "write_all"):
            continue
        space, size_eid = view.buffers[acc.buffer]
        if space == "global" or view.all_guards(acc.stmt):
            continue
        loops = view.enclosing_loops(acc.stmt)
        for depth in range(len(loops) + 1):
            level = loops[depth - 1] if depth else 0
            if _covers(enc, base, acc, space, size_eid, loops[depth:], loops[:depth]):
                kf.add("covers", a, level)


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
    axes: list[tuple[str, np.ndarray]] = []
    for h in free_loops:
        info = enc.view.loops[h]
        lo, step = enc.nodes[info.lo].value, enc.nodes[info.step].value
        axes.append((f"loop:{h}", np.arange(lo, enc.nodes[info.hi].value, step)))
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
