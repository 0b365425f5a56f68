"""Output coverage of a guarded store: every in-range element is written, by exactly one instance.

`write_once` (no two guarded instances write one element) gives "at most once". "At least once"
is a for-all/exists property (every element has a writer) that Z3 does not decide over div/mod
terms, so it is reduced to quantifier-free queries through a *padded box*: the store without its
guard (U, the blocks x threads x iterations that reach it) writes a box P of elements, P_d >= the
extent E_d in each dimension (e.g. 64 * ceil(M / 64) rows for a tail tile). The proof is

  1. U writes inside P and no two instances of U write one element   (U is one-to-one into P)
  2. |U| == prod(P_d)                                                   (so U is onto P)
  3. E_d <= P_d                                                         (P contains every element)
  4. an instance of U whose element is in range passes the guard        (nothing in range is cut)

1 and 2 are preconditions: where they fail (the guess of P is wrong, or the guard selects lanes
rather than a range) the obligation is UNKNOWN, never a violation. A guard on the thread id alone
(the arm of a wave-specialized `if`: `wave_id() < 4`) selects threads: U is then taken over the
threads that pass it (enumerated over the block, thread_guards.py), |U| counts only those, and
4 checks the other guards. 3 and 4 are the queries:
a model of either is an element nobody writes (the simulator's write counts confirm it: zero).
P is guessed as the extent where U stays in range, |U| / (the other P_d) when one dimension
overruns, and the grid extent times the per-block stride of the coordinate otherwise; the guess
only has to be right for the proof, never for soundness, since 1 and 2 are checked. Before all
this, fewer instances than elements (whatever the guard) is a violation by counting, and an
unguarded store with exactly as many instances as elements needs only that count (with
write_once and the bounds invariants it is a bijection).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import z3

from ..hw.expr import symbols
from .chains import Alt, Step
from .query import Query
from .smt import Instance
from .thread_guards import constant_block, passing, thread_only

if TYPE_CHECKING:
    from .access_queries import AccessQueries


class GuardedCoverage:
    def __init__(self, access: "AccessQueries"):
        # a weak proxy: `access` holds this object, and a reference cycle kept every kernel's
        # terms and Z3 context alive until a full collection of the cyclic collector
        self.access = weakref.proxy(access)
        self.view, self.enc = access.view, access.enc
        self.timeout_ms = 10_000  # KernelSolver sets its own

    def _sat(self, formulas: list[z3.BoolRef]) -> bool | None:
        prepared = self.enc.prepare([*self.enc.base_constraints(), *formulas, *self.enc.side])
        if self.enc.proves(prepared, self.timeout_ms):
            return False
        r = self.enc.solver_holding(prepared, self.timeout_ms).check()
        return None if r == z3.unknown else r == z3.sat

    def write_count(self, store, site: Instance) -> list[Query]:
        def unknown(why: str) -> list[Query]:
            return [self.access._posed_unknown(store.aid, site, why)]

        total = self.access.instance_count(store.stmt)
        if total is None:
            return unknown("a loop around the guarded output store has bounds that depend on other loops")
        buf = store.buffer
        elements = self.access.elements(buf)
        if not self.view.all_guards(store.stmt):
            differ = self._sat([total != elements])
            if differ is False:  # the common case: as many instances as elements (one query)
                return [self.access.count_query(store.aid, site, total, total != elements)]
        if self._sat([total < elements]):  # too few instances, whatever the guard
            return [self.access.count_query(store.aid, site, total, total < elements)]
        extents = [self.enc.int_term(e, {}) for e in self.view.dims[buf]]
        selecting, total = self._thread_guards(store, total)
        u = self._unguarded(store, selecting)
        coords = [self.enc.int_term(c, u.env) for c in store.coords]
        padded = []
        for d, (c, e) in enumerate(zip(coords, extents)):
            over, under = self._sat(u.constraints + [c >= e]), self._sat(u.constraints + [c < 0])
            if over is None or under is None:
                return unknown("the solver could not bound the guarded store's coordinates")
            if under:
                return unknown("without its guard the output store reaches negative coordinates")
            if over:
                padded.append(d)
        box = self._padded_box(store, u, coords, extents, padded, total)
        if box is None:
            return unknown("the guarded store's padded extent could not be determined (a coordinate that depends "
                           "on several blocks or on no block)")
        outside = z3.Or(*[z3.Or(c < 0, c >= p) for c, p in zip(coords, box)])
        product = box[0]
        for p in box[1:]:
            product = product * p
        checks = [(u.constraints + [outside], "the guarded store writes outside its padded extent"),
                  ([product != total], "the guarded store's instances do not fill its padded extent")]
        twin = self._unguarded(store, selecting)
        keys = [k for k in u.env if k != "slot"]
        same = [a == self.enc.int_term(c, twin.env) for a, c in zip(coords, store.coords)]
        checks.append((u.constraints + twin.constraints + same + [self.access._distinct(u, twin, keys)],
                       "without its guard, two instances of the output store write one element"))
        for formulas, why in checks:
            r = self._sat(formulas)
            if r is None or r:
                return unknown(why if r else f"solver returned unknown ({why})")
        return self._queries(store, u, coords, extents, box, padded, selecting)

    def _thread_guards(self, store, total: z3.ArithRef) -> tuple[list[tuple[int, int]], z3.ArithRef]:
        """The store's guards on the thread id alone (the arm of a wave-specialized `if`) select
        threads, not a range: U is taken over the threads that pass them (enumerated), and its
        count scaled to them (instance_count is threads x the thread-independent trips)."""
        if not constant_block(self.view, self.enc):
            return [], total
        selecting = [(c, p) for c, p in self.view.all_guards(store.stmt) if thread_only(self.view, c)]
        if not selecting:
            return [], total
        threads = int(passing(self.view, self.enc, selecting).sum())
        return selecting, total / self.enc.block_size() * threads

    def _unguarded(self, store, selecting: list[tuple[int, int]]) -> Instance:
        """An instance of U: the store without its guards, except those that select threads."""
        u = self.enc.new_instance(store.stmt, "pad", with_guards=False)
        for cond, pol in selecting:
            g = self.enc.bool_term(cond, u.env)
            u.constraints.append(g if pol else z3.Not(g))
        return u

    def _padded_box(self, store, u: Instance, coords, extents, padded: list[int],
                    total: z3.ArithRef) -> list[z3.ArithRef] | None:
        box = list(extents)
        if len(padded) == 1:
            (d,) = padded
            rest = self.enc.int_val(1)
            for i, e in enumerate(extents):
                if i != d:
                    rest = rest * e
            box[d] = total / rest
            return box
        for d in padded:
            bids = sorted(n for n in symbols(self.view.kf.table, store.coords[d]) if n.startswith("bid:"))
            if len(bids) != 1:
                return None
            j = int(bids[0].split(":")[1])
            grid = self.enc.int_term(self.view.launch[j][0], {})
            env = dict(u.env)
            env[bids[0]] = u.env[bids[0]] + 1
            step = self.enc.int_term(store.coords[d], env) - coords[d]
            solver = self.enc.query_solver(self.timeout_ms, [*self.enc.base_constraints(), *u.constraints])
            if solver.check() != z3.sat:
                return None
            box[d] = grid * solver.model().eval(step, model_completion=True)
        return box

    def _queries(self, store, u: Instance, coords, extents, box, padded: list[int],
                 selecting: list[tuple[int, int]]) -> list[Query]:
        buf = store.buffer
        shape = Alt([], "missing", extents, [], [])
        out = []
        for d in padded:  # the launch's padded extent stops short of the tensor
            element = [box[d] if i == d else self.enc.int_val(0) for i in range(len(extents))]
            lhs = Alt([], "beyond", element, [], [Step("store", store.aid, store.stmt, buf, u)])
            out.append(Query(u.constraints + [extents[d] > box[d]], self.enc.bool_val(True), lhs, shape, u, u, u))
        inside = [z3.And(c >= 0, c < e) for c, e in zip(coords, extents)]
        guards = []
        for cond, pol in self.view.all_guards(store.stmt):
            if (cond, pol) in selecting:  # U holds only the threads that pass it
                continue
            g = self.enc.bool_term(cond, u.env)
            guards.append(g if pol else z3.Not(g))
        if guards:  # an instance in range that its guard turns away
            lhs = Alt([], "excluded", coords, [], [Step("store", store.aid, store.stmt, buf, u)])
            out.append(Query(u.constraints + inside + [z3.Not(z3.And(*guards))], self.enc.bool_val(True), lhs,
                             shape, u, u, u))
        return out
