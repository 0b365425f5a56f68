"""Flow across the arms of a wave-specialized `if`: the stores of one arm that a load of the other
arm may read (rules/provenance.dl `arm_reach`), instantiated as Z3 terms.

The arms run at once and meet at the block's barriers, so a store reaches a load of the other arm
through barrier intervals (intervals.py), not along one thread's path: the writer is any thread
of the other arm, at any iteration of its loops, that wrote the element in an interval strictly
before the reader's (one in the same interval is a race, ave/shared-race's `arm_race`), and that
no store to the element in an interval strictly between overwrote.

The kill and the "no store wrote it yet" alternative are stated without a free variable, at
every iteration of the storing loops (constant, few): each store of the buffer must write, per
iteration, a whole slice (the elements whose leading coordinates are a value of the loops alone),
over the threads of its arm that pass its guards; the arms' barriers must not sit under nested
`if`s (their counts then depend on the loops only). "Store F at iteration J wrote the element
before the read" is then a condition on the reader alone, and its negation at each J is implied
by "no store wrote it", so the alternatives stay an over-approximation. A kernel outside this
statement keeps the load UNKNOWN (the reason says which part), never VERIFIED.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import z3

from ..facts.view import KernelView
from ..hw.expr import evaluate, symbols
from .intervals import BarrierCount
from .smt import Encoder, Instance
from .thread_guards import block_threads, constant_block, passing
from .unwritten import loop_points


@dataclass
class Plan:
    """What a cross-arm load's alternatives are built from (one per load access)."""

    branch: int
    arm: int  # the load's arm
    first: int  # leading coordinates that name the slice (a pipeline stage)
    stores: list[int]  # the other arm's store accesses into the buffer
    iterations: dict[int, list[dict[int, int]]]  # per store: every iteration of its loops


class CrossArm(BarrierCount):
    def __init__(self, view: KernelView, enc: Encoder, data_guarded: set[int], steps: set[tuple[int, int]]):
        super().__init__(view, enc)
        self.data_guarded = data_guarded
        self._plans: dict[int, Plan | str] = {}
        self.asynchronous = {a for _k, a in view.kf.relation("async_store")}
        # (load, store) chain steps of the rules: a copy across the arms is one only when it has
        # landed by the next barrier of its arm (`arm_reach`, `copy_late`)
        self.steps = steps

    def plan(self, aid: int, reaching: bool) -> Plan | str:
        """The plan for load `aid`, or why its flow is not followed (cached)."""
        if aid not in self._plans:
            self._plans[aid] = "a store on the load's own path reaches it too" if reaching else self._plan(aid)
        return self._plans[aid]

    def _plan(self, aid: int) -> Plan | str:
        view = self.view
        load = view.accesses[aid]
        buf = load.buffer
        if load.kind != "load" or buf in view.aliases or any(s == buf for s, _b in view.aliases.values()):
            return "the buffer is read whole or through a subview"
        stores = [a for a in view.accesses.values() if a.buffer == buf and a.kind in ("store", "write_all")]
        splits = {self._split_arm(load.stmt, s.stmt) for s in stores}
        if len(splits) != 1 or None in splits:
            return "the buffer is also stored outside the other arm of the `if`"
        ((branch, arm),) = splits
        if any(s.aid in self.asynchronous and (aid, s.aid) not in self.steps for s in stores):
            return ("a store of the other arm is an asynchronous copy that may land after the next barrier of its "
                    "arm (no full wait before it on some path)")
        if view.enclosing_loops(branch):
            return "the `if` runs in a loop (stores of its earlier executions are not followed)"
        for arm_of in (arm, 1 - arm):
            for b in self.barriers_in(branch, arm_of):
                if any(br != branch and (branch, p) in view.in_branch.get(br, []) for br, p in view.in_branch[b]):
                    return "a barrier of the arms is under a nested `if`"
        why = self.barriers_before(branch, arm, load.stmt, self.enc.new_instance(load.stmt, "r"))[1]
        iterations: dict[int, list[dict[int, int]]] = {}
        first = -1
        for s in stores:
            its = self._iterations(s.stmt)
            if its is None or s.kind != "store" or s.stmt in self.data_guarded:
                return "a store of the other arm is in a loop of varying or many trips, or under a data condition"
            f = next((f for f in (1, 0) if self._slice_store(s, f)), -1)
            if f < 0 or first not in (-1, f):
                return "a store of the other arm does not write a whole slice of the buffer per iteration"
            first, iterations[s.aid] = f, its
            why = why or self.barriers_before(branch, 1 - arm, s.stmt, self.enc.new_instance(s.stmt, "w"))[1]
        if why:
            return why
        return Plan(branch, arm, first, [s.aid for s in stores], iterations)

    def _split_arm(self, load_stmt: int, store_stmt: int) -> tuple[int, int] | None:
        arms = dict(self.view.in_branch.get(store_stmt, []))
        for br, pol in self.view.in_branch.get(load_stmt, []):
            if br in arms and arms[br] != pol:
                return br, pol
        return None

    def _iterations(self, stmt: int) -> list[dict[int, int]] | None:
        return loop_points(self.view, self.enc, self.view.enclosing_loops(stmt))

    def _slice_store(self, store, first: int) -> bool:
        """Per iteration, the store's threads that pass its guards write every in-slice offset: its
        first `first` coordinates depend on the loops only, the others and the guards on the thread."""
        table, view = self.view.kf.table, self.view
        dims = [self.enc.nodes[e] for e in view.dims.get(store.buffer, [])]
        if (len(dims) != len(store.coords) or len(dims) <= first or any(d.op != "const" for d in dims)
                or not constant_block(view, self.enc)):
            return False
        looped = lambda n: n.startswith(("loop:", "size:"))  # noqa: E731
        threaded = lambda n: n.startswith("tid:")  # noqa: E731
        if not all(looped(n) for c in store.coords[:first] for n in symbols(table, c)):
            return False
        guards = view.all_guards(store.stmt)
        per_thread = list(store.coords[first:]) + [c for c, _p in guards]
        if not all(threaded(n) for c in per_thread for n in symbols(table, c)):
            return False
        env, keep = block_threads(self.enc), passing(view, self.enc, guards)
        flat = np.zeros(self.enc.block_size(), dtype=np.int64)
        for c, d in zip(store.coords[first:], dims[first:]):
            flat = flat * d.value + np.broadcast_to(np.asarray(evaluate(table, c, env)), flat.shape)
        size = int(np.prod([d.value for d in dims[first:]]))
        return bool(np.array_equal(np.unique(flat[keep]), np.arange(size)))

    # ------------------------------------------------------------ instances
    def interval(self, plan: Plan, stmt: int, arm: int, inst: Instance) -> z3.ArithRef:
        """The barrier interval of `inst` (closed form: the plan checked that one exists)."""
        return self.barriers_before(plan.branch, arm, stmt, inst)[0]

    def writer(self, plan: Plan, sa: int, load, reader: Instance) -> tuple[Instance, list[z3.BoolRef]]:
        """Any thread of the other arm at any iteration of the store's loops, in an earlier interval."""
        store = self.view.accesses[sa]
        w = self.enc.new_instance(store.stmt, "w", share_block=reader)
        before = self.interval(plan, store.stmt, 1 - plan.arm, w) < self.interval(plan, load.stmt, plan.arm, reader)
        return w, w.constraints + [before]

    def _wrote(self, plan: Plan, sa: int, point: dict[int, int], load, reader: Instance,
               after: z3.ArithRef | None) -> z3.BoolRef:
        """Store `sa` at the definite iteration `point` wrote the element the reader reads, in an
        interval before the reader's (and after `after`, when given)."""
        store = self.view.accesses[sa]
        inst = Instance("k", store.stmt, dict(reader.env))
        for h, j in point.items():
            inst.env[f"loop:{h}"] = self.enc.int_val(j)
        b = self.interval(plan, store.stmt, 1 - plan.arm, inst)
        cond = [b < self.interval(plan, load.stmt, plan.arm, reader)]
        if after is not None:
            cond.append(b > after)
        for cs, cl in zip(store.coords[:plan.first], load.coords[:plan.first]):
            cond.append(self.enc.int_term(cs, inst.env) == self.enc.int_term(cl, reader.env))
        return z3.And(*cond, *self.in_bounds(load, reader))

    def in_bounds(self, load, reader: Instance) -> list[z3.BoolRef]:
        out = []
        for c, e in zip(load.coords, self.view.dims[load.buffer]):
            x = self.enc.int_term(c, reader.env)
            out += [x >= 0, x < self.enc.int_term(e, reader.env)]
        return out

    def not_overwritten(self, plan: Plan, sa: int, writer: Instance, load, reader: Instance) -> list[z3.BoolRef]:
        """No store wrote the element at a definite iteration in an interval strictly between the
        writer's and the reader's (a slice store there definitely did: it writes the whole slice)."""
        bw = self.interval(plan, self.view.accesses[sa].stmt, 1 - plan.arm, writer)
        return [z3.Not(self._wrote(plan, s, p, load, reader, bw)) for s in plan.stores for p in plan.iterations[s]]

    def unwritten(self, plan: Plan, load, reader: Instance) -> list[z3.BoolRef]:
        """Necessary conditions for "no store of the other arm wrote the element before the read"."""
        return self.in_bounds(load, reader) + [z3.Not(self._wrote(plan, s, p, load, reader, None))
                                               for s in plan.stores for p in plan.iterations[s]]
