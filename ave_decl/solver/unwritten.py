"""Reads of shared elements no store wrote yet: the "unwritten" provenance alternative.

A load's alternatives come from the stores that reach it (chains.Expander.load). An execution in
which no store wrote the element before the read (a pipeline prologue that fills the wrong stage)
has no such store, so without an alternative of its own every tag check on the value held
vacuously. This module builds that alternative where it can be stated without a free thread or
part variable: for shared stores that write, per execution of their uniform loops, a fixed set
of in-slice offsets (enumerated over the threads that pass the store's guards on the thread id
and over its inner loops of constant range) at a slice chosen by the uniform loops, and whose
other guards depend on those loops only. A loop of the store's own (one the read is not in) that
its slice or guards name is enumerated: its range's values (every value a range varying with the
shared loops takes, each with "it is in the range there") each give the store's slice and guards
at that value; an own loop of varying range that the offsets do not name contributes "it had an
iteration". "Store F at iteration j wrote the element" is then a condition on j (a
disjunction over the enumerated values) and, where the store writes only part of what the load
can read, on the element's offset (in the runs of offsets it writes), and the alternative is
constrained by its negation at the definite iterations the kill instantiation also uses
(chains.kill_depths). Each negation is implied by "unwritten", so the alternative
over-approximates; where no such statement exists the alternative is left out (a documented
gap: docs/language.md, Unwritten reads).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import z3

from ..facts.view import KernelView
from ..hw.expr import evaluate, symbols
from .smt import Encoder, Instance
from .thread_guards import constant_block, passing


MAX_POINTS = 1 << 20  # (thread, loop iteration) points enumerated per access
MAX_ITERATIONS = 64  # values of a store's own loops enumerated for its slice and guards
MAX_RUNS = 16  # runs of consecutive offsets a store that writes part of what a load reads may write


def loop_values(view: KernelView, enc: Encoder, g: int) -> np.ndarray | None:
    """The values loop `g` takes, when its range is constant; else None."""
    lo, hi, step = (enc.nodes[e] for e in (view.loops[g].lo, view.loops[g].hi, view.loops[g].step))
    if lo.op != "const" or hi.op != "const":
        return None
    return np.arange(lo.value, hi.value, step.value)


def loop_points(view: KernelView, enc: Encoder, loops: list[int]) -> list[dict[int, int]] | None:
    """Every iteration (loop -> value) of `loops`, whose ranges must be constant; None when one is
    not, or there are more than MAX_ITERATIONS."""
    axes = [loop_values(view, enc, h) for h in loops]
    if any(a is None for a in axes):
        return None
    points = [dict(zip(loops, map(int, p))) for p in itertools.product(*axes)]
    return points if len(points) <= MAX_ITERATIONS else None


def _loop_axes(view: KernelView, enc: Encoder, loops: list[int]) -> list[tuple[str, np.ndarray]] | None:
    """("loop:g", its values) per loop of constant range; None when one is not."""
    axes = [(f"loop:{g}", loop_values(view, enc, g)) for g in loops]
    return None if any(a is None for _n, a in axes) else axes


def offsets(view: KernelView, enc: Encoder, acc, loops: list[int], first: int = 1,
            at: dict[int, int] | None = None, guards: list[tuple[int, int]] = ()) -> np.ndarray | None:
    """The flat offsets (over the dimensions after the `first` ones) that `acc` touches over every
    thread of the block that passes `guards` (conditions on the thread id alone) and every
    iteration of `loops` (constant ranges), with the loops of `at` at its values; None when those
    coordinates depend on anything else, or the buffer's extents are not constant."""
    table = view.kf.table
    dims = [enc.nodes[e] for e in view.dims.get(acc.buffer, [])]
    if len(acc.coords) <= first or len(dims) != len(acc.coords) or any(d.op != "const" for d in dims):
        return None
    axes = _loop_axes(view, enc, loops)
    if axes is None or int(np.prod([len(a) for _, a in axes])) * enc.block_size() > MAX_POINTS:
        return None
    block = enc.block_dims()
    axes.append(("linear", np.arange(enc.block_size())))
    grids = np.meshgrid(*[a for _, a in axes], indexing="ij")
    env = {name: g.ravel() for (name, _), g in zip(axes, grids)}
    rest = env["linear"]
    for d, extent in enumerate(block):
        env[f"tid:{d}"] = rest % extent
        rest = rest // extent
    linear = env.pop("linear")
    env.update({f"loop:{g}": np.int64(v) for g, v in (at or {}).items()})
    names = set(env)
    flat = np.zeros_like(linear)
    for c, d in zip(acc.coords[first:], dims[first:]):
        if not symbols(table, c) <= names:
            return None
        flat = flat * d.value + np.broadcast_to(np.asarray(evaluate(table, c, env)), flat.shape)
    return flat[passing(view, enc, list(guards))[linear]] if guards else flat


@dataclass(frozen=True)
class _Writer:
    """A store whose writes "unwritten" denies: the loops it shares with the read, its guards
    on those loops (the others, on the thread alone, chose the offsets), and the values of its
    own loops that its slice or guards name at which it writes what the read touches, each with
    the runs [lo, hi] of in-slice offsets it writes there, or None when those are every offset
    the read can touch (one empty point when there are no such loops); and its own loops of
    varying range, which the offsets do not name."""

    store: object
    common: list[int]
    guards: list[tuple[int, int]]
    at: list[tuple[dict[int, int], list[tuple[int, int]] | None]]
    nonempty: list[int]  # own loops of varying range: the store ran when each had an iteration
    bounded: list[int]  # enumerated own loops of varying range: a value runs when in the range


class Unwritten:
    """Builds the unwritten alternative's constraints for one kernel (cached per access pair)."""

    def __init__(self, view: KernelView, enc: Encoder, data_guarded: set[int], depths: dict[str, int]):
        self.view = view
        self.enc = enc
        self.data_guarded = data_guarded
        self.depths = depths
        self._plans: dict[int, tuple[int, list[_Writer]] | None] = {}

    def constraints(self, load, reader: Instance) -> list[z3.BoolRef] | None:
        """Necessary conditions for "no store wrote the element `reader` reads before it", or None
        when they cannot be stated without a free variable (then no alternative is added)."""
        if load.aid not in self._plans:
            plan = self._plan(load, 1) or self._plan(load, 0)
            self._plans[load.aid] = plan if plan is not None and self._possible(load, plan) else None
        plan = self._plans[load.aid]
        if plan is None:
            return None
        return self._build(load, plan, reader)

    def _possible(self, load, plan: tuple[int, list]) -> bool:
        """Whether some execution of the load may read an unwritten element, decided once for an
        instance of the load whose thread and iterations are free: when not (proved UNSAT), no
        instance in any chain can, and the alternative is left out (in a correct pipeline that is
        every read: its alternative would only add queries to refute)."""
        from .derived_facts import _unsat

        inst = self.enc.new_instance(load.stmt, "nw")
        return not _unsat(self.enc, self.enc.base_constraints() + inst.constraints + self._build(load, plan, inst))

    def _build(self, load, plan: tuple[int, list], reader: Instance) -> list[z3.BoolRef]:
        first, stores = plan
        out: list[z3.BoolRef] = []
        for writer in stores:
            out += [z3.Not(w) for w in self._writes(writer, first, load, reader)]
        for c, e in zip(load.coords, self.view.dims[load.buffer]):
            x = self.enc.int_term(c, reader.env)
            out += [x >= 0, x < self.enc.int_term(e, reader.env)]
        return out

    def _plan(self, load, first: int) -> tuple[int, list[_Writer]] | None:
        """The stores into the load's buffer that write what it reads, each with the loops it shares
        with the load and the values of its own loops at which it does, when the first `first`
        coordinates (the slice: a pipeline stage) depend on uniform loops only; None when a store
        does not fit the statement in the module docstring."""
        view = self.view
        if (view.buffers[load.buffer][0] != "shared" or load.buffer in view.aliases
                or any(s == load.buffer for s, _base in view.aliases.values())):
            return None
        reader_loops = view.enclosing_loops(load.stmt)
        table = view.kf.table
        read_loops = [g for g in reader_loops
                      if any(f"loop:{g}" in symbols(table, c) for c in load.coords[first:])]
        read = offsets(view, self.enc, load, read_loops, first)
        if read is None:
            return None
        read = np.unique(read)
        resets = {row[-2] for row in view.kf.relation("reset_tags")}  # (..., statement, buffer)
        stores = []
        for store in view.accesses.values():
            if store.buffer != load.buffer or store.kind not in ("store", "write_all") or store.stmt in resets:
                continue  # a reset leaves no tag, as no store does: it only makes "unwritten" wider
            loops = view.enclosing_loops(store.stmt)
            common = [g for g in loops if g in reader_loops]
            if store.stmt > load.stmt and not common:
                continue  # after the read and in no loop around it: it never ran before the read
            if common != loops[:len(common)] or store.stmt in self.data_guarded or store.kind != "store":
                return None
            guards = view.all_guards(store.stmt)
            per_thread = [(c, p) for c, p in guards if _on_thread(table, c)]
            uniform_guards = [(c, p) for c, p in guards if not _on_thread(table, c)]
            fixed = list(store.coords[:first]) + [c for c, _p in uniform_guards]
            named = {n for c in fixed for n in symbols(table, c)}
            own = loops[len(common):]
            # enumerated: the own loops the slice or a guard names, and those of varying range the
            # offsets name (each value then writes its own offsets)
            in_slice = {n for c in store.coords[first:] for n in symbols(table, c)}
            enumerated = [g for g in own if f"loop:{g}" in named
                          or (f"loop:{g}" in in_slice and not self._constant_range(g))]
            allowed = {f"loop:{g}" for g in common + enumerated}
            if not all(n in allowed or n.startswith("size:") for n in named):
                return None
            bounded = [g for g in enumerated if not self._constant_range(g)]
            points = self._own_points(enumerated, common)
            if points is None or (per_thread and not constant_block(view, self.enc)):
                return None
            rest = [g for g in own if g not in enumerated]
            # an own loop of varying range that the offsets do not name: the store ran when it
            # had an iteration (its bounds on the shared loops and the sizes)
            varying = [g for g in rest if not self._constant_range(g)]
            if any(not self._runs_when_nonempty(store, g, first, allowed) for g in varying):
                return None
            rest = [g for g in rest if g not in varying]
            at_values = []
            for point in points:
                wrote = offsets(view, self.enc, store, rest, first, point, per_thread)
                if wrote is None:
                    return None
                hit = np.isin(read, wrote)
                if hit.all():
                    at_values.append((point, None))
                elif hit.any():  # some of what the load reads: which ones, by their offsets
                    runs = _runs(np.unique(wrote))
                    if len(runs) > MAX_RUNS:
                        return None
                    at_values.append((point, runs))
            if at_values:
                stores.append(_Writer(store, common, uniform_guards, at_values, varying, bounded))
        return first, stores

    def _writes(self, writer: _Writer, first: int, load, reader: Instance) -> list[z3.BoolRef]:
        """"`store` wrote the element before the read" at definite iterations: the reader's own
        iteration of the shared loops (when the store comes first in the body), up to the buffer's
        kill depth of earlier ones of the innermost shared loop, and its first one."""
        store, common = writer.store, writer.common
        before = store.stmt < load.stmt  # statement ids are in program order
        if not common:
            return [self._wrote(writer, dict(reader.env), first, load, reader)] if before else []
        h = common[-1]
        info = self.view.loops[h]
        step = self.enc.nodes[info.step].value
        i = reader.env[f"loop:{h}"]
        depth = self.depths.get(store.buffer, 3)
        out = []
        candidates = ([i] if before else []) + [i - m * step for m in range(1, depth + 1)]
        lo = self.enc.int_term(info.lo, reader.env)
        for j in candidates + [lo]:
            env = dict(reader.env)
            env[f"loop:{h}"] = j
            cond = self.enc.loop_range(h, j, env) + [j <= i if before else j < i]
            out.append(z3.And(*cond, self._wrote(writer, env, first, load, reader)))
        return out

    def _wrote(self, writer: _Writer, env: dict, first: int, load, reader: Instance) -> z3.BoolRef:
        """The store's execution at `env`'s loop values runs and writes the element the load
        reads, at one of the values of its own enumerated loops at which it writes there."""
        store = writer.store
        arms = []
        for point, runs in writer.at:
            at_env = dict(env)
            at_env.update({f"loop:{g}": self.enc.int_val(v) for g, v in point.items()})
            cond = []
            for c, polarity in writer.guards:
                term = self.enc.bool_term(c, at_env)
                cond.append(term if polarity else z3.Not(term))
            for g in writer.nonempty:
                info = self.view.loops[g]
                cond.append(self.enc.int_term(info.lo, at_env) < self.enc.int_term(info.hi, at_env))
            for g in writer.bounded:  # the enumerated value is an iteration of its loop there
                info, value = self.view.loops[g], point[g]
                cond += [self.enc.int_term(info.lo, at_env) <= value, value < self.enc.int_term(info.hi, at_env)]
                step = self.enc.nodes[info.step].value
                if step != 1:
                    cond.append((value - self.enc.int_term(info.lo, at_env)) % step == 0)
            for cs, cl in zip(store.coords[:first], load.coords[:first]):
                cond.append(self.enc.int_term(cs, at_env) == self.enc.int_term(cl, reader.env))
            if runs is not None:
                offset = self._offset(load, first, reader)
                cond.append(z3.Or(*[z3.And(offset >= lo, offset <= hi) for lo, hi in runs]))
            arms.append(z3.And(*cond) if cond else self.enc.bool_val(True))
        return arms[0] if len(arms) == 1 else z3.Or(*arms)

    def _own_points(self, enumerated: list[int], common: list[int]) -> list[dict[int, int]] | None:
        """The values to enumerate of the store's own loops its slice or guards name: every
        iteration of a constant range; for a range whose bounds depend on the shared loops
        (constant ranges) only, every value the bounds allow at some iteration of those (each
        point then carries "it is in the range", `_wrote`); None past MAX_ITERATIONS."""
        axes = []
        for g in enumerated:
            info = self.view.loops[g]
            step = self.enc.nodes[info.step]
            if step.op != "const" or step.value <= 0:
                return None
            values = loop_values(self.view, self.enc, g)
            if values is not None:
                axes.append([(g, int(j)) for j in values])
                continue
            lo, hi = self._extreme(info.lo, common, min), self._extreme(info.hi, common, max)
            if lo is None or hi is None:
                return None
            axes.append([(g, j) for j in range(lo, hi)])  # `_wrote` keeps those on the step
        points = [dict(p) for p in itertools.product(*axes)]
        return points if len(points) <= MAX_ITERATIONS else None

    def _extreme(self, e: int, loops: list[int], pick) -> int | None:
        """The least or greatest value (`pick`) of expression `e` over the iterations of `loops`
        (constant ranges), which must be all it names."""
        table = self.view.kf.table
        axes = _loop_axes(self.view, self.enc, loops)
        if axes is None or not symbols(table, e) <= {name for name, _a in axes}:
            return None
        grids = np.meshgrid(*[a for _, a in axes], indexing="ij") if axes else [np.zeros(1, dtype=np.int64)]
        env = {n: g.ravel() for (n, _a), g in zip(axes, grids)}
        values = np.broadcast_to(np.asarray(evaluate(table, e, env)), grids[0].ravel().shape)
        return int(pick(values)) if values.size else None

    def _constant_range(self, g: int) -> bool:
        return loop_values(self.view, self.enc, g) is not None

    def _runs_when_nonempty(self, store, g: int, first: int, allowed: set[str]) -> bool:
        """Whether own loop `g` (of varying range) leaves the store's offsets alone and its
        bounds depend on the loops of `allowed` and the sizes only (then "it had an iteration"
        is a condition on those), with a positive constant step."""
        table, info = self.view.kf.table, self.view.loops[g]
        step = self.enc.nodes[info.step]
        if step.op != "const" or step.value <= 0:
            return False
        if any(f"loop:{g}" in symbols(table, c) for c in store.coords[first:]):
            return False
        return all(n in allowed or n.startswith("size:")
                   for e in (info.lo, info.hi) for n in symbols(table, e))

    def _offset(self, load, first: int, reader: Instance) -> z3.ArithRef:
        """The flat in-slice offset of the element the reader reads (constant extents: `offsets`
        required them)."""
        dims = self.view.dims[load.buffer]
        flat = self.enc.int_val(0)
        for c, d in zip(load.coords[first:], dims[first:]):
            flat = flat * self.enc.nodes[d].value + self.enc.int_term(c, reader.env)
        return flat


def _on_thread(table, c: int) -> bool:
    """A guard on the thread id alone (it chooses which offsets a store writes)."""
    names = symbols(table, c)
    return bool(names) and all(n.startswith("tid:") for n in names)


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """Sorted distinct values as runs [lo, hi] of consecutive ones."""
    breaks = np.flatnonzero(np.diff(values) != 1)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(values) - 1]))
    return [(int(values[a]), int(values[b])) for a, b in zip(starts, ends)]
