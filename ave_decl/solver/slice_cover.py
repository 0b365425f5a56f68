"""Stores that, together, overwrite a whole slice of a shared buffer in each iteration of a loop.

A multi-stage refill (`S[stage, r, c] = ...` inside `for it`) writes every element of stage
`stage(it)` once per iteration, whichever thread wrote the value a later load reads; a packed
transpose writes one stage through several stores (`Vw[page, 2j, i]`, `Vw[page, 2j + 1, i]`, each
into two halves of a word), none of which covers the stage alone. The kill instantiations
(`chains.Expander.not_overwritten`) replace per-thread kills by one stage comparison for such a
*group*: it is a necessary condition of "the value was not overwritten" whoever the thread, so
alternatives stay an over-approximation. Checked by enumeration over the block's threads and the
loops inside the stage loop, cached per (store, loop)."""
from __future__ import annotations

import numpy as np

from ..facts.view import AccessInfo, KernelView
from ..hw.expr import symbols
from .smt import Encoder
from .unwritten import offsets


class SliceCovers:
    def __init__(self, view: KernelView, enc: Encoder, data_guarded: set[int]):
        self.view = view
        self.enc = enc
        self.data_guarded = data_guarded
        self._groups: dict[tuple[int, int], tuple[AccessInfo, ...] | None] = {}

    def group(self, store: AccessInfo, h: int) -> tuple[AccessInfo, ...] | None:
        """The stores that with `store` write every element of one slice of its buffer (all
        elements whose first coordinate is one value, which depends only on loop h and the loops
        around it) exactly once per iteration of loop h, over the threads and the loops inside h:
        the stores into the buffer in the same loops, with the same first coordinate and the same
        guards (which depend only on those outer loops), in program order; None if they do not."""
        key = (store.aid, h)
        if key not in self._groups:
            self._groups[key] = self._find(store, h)
        return self._groups[key]

    def _find(self, store: AccessInfo, h: int) -> tuple[AccessInfo, ...] | None:
        view = self.view
        if not self._candidate(store, h):
            return None
        loops = view.enclosing_loops(store.stmt)
        inner = loops[loops.index(h) + 1:]
        if self._covers((store,), inner):  # alone (a refill); a group only where no store does
            return (store,)
        guards = view.all_guards(store.stmt)
        members = tuple(sorted(
            (a for a in view.accesses.values()
             if a.buffer == store.buffer and a.coords[:1] == store.coords[:1] and self._candidate(a, h)
             and view.enclosing_loops(a.stmt) == loops and view.all_guards(a.stmt) == guards),
            key=lambda a: (a.stmt, a.aid)))
        return members if len(members) > 1 and self._covers(members, inner) else None

    def _covers(self, members: tuple[AccessInfo, ...], inner: list[int]) -> bool:
        """Together, over the block's threads and the iterations of `inner`, the members write each
        element of the slice (the dimensions after the first) exactly once."""
        parts = [offsets(self.view, self.enc, a, inner) for a in members]
        if any(p is None for p in parts):
            return False
        flat = np.concatenate(parts)
        size = int(np.prod([self.enc.nodes[e].value for e in self.view.dims[members[0].buffer][1:]]))
        return bool(flat.size == size and np.array_equal(np.sort(flat), np.arange(size)))

    def _candidate(self, a: AccessInfo, h: int) -> bool:
        """A plain store inside loop h, on a bijective buffer, that runs whenever its guards hold
        (none on data), whose first coordinate and guards depend only on h, the loops around it and
        sizes."""
        view = self.view
        if (a.kind != "store" or len(a.coords) < 2 or a.buffer not in view.bijective
                or a.stmt in self.data_guarded):
            return False
        loops = view.enclosing_loops(a.stmt)
        if h not in loops:
            return False
        uniform = {f"loop:{g}" for g in loops[:loops.index(h) + 1]}
        table = view.kf.table

        def ok(eid: int) -> bool:
            return all(n in uniform or n.startswith("size:") for n in symbols(table, eid))

        return ok(a.coords[0]) and all(ok(c) for c, _p in view.all_guards(a.stmt))
