"""Stores that, together, overwrite a whole slice of a shared buffer in each iteration of a loop.

A multi-stage refill (`S[stage, r, c] = ...` inside `for it`) writes every element of stage
`stage(it)` once per iteration, whichever thread wrote the value a later load reads; a packed
transpose writes one stage through several stores (`Vw[page, 2j, i]`, `Vw[page, 2j + 1, i]`, each
into two halves of a word), none of which covers the stage alone. The kill instantiations
(`chains.Expander.not_overwritten`) replace per-thread kills by one stage comparison for such a
*group*, or by "the group ran" where the whole buffer is rewritten each iteration (a
single-stage tile reloaded per K step): a necessary condition of "the value was not
overwritten" whoever the thread, so alternatives stay an over-approximation. Checked by
enumeration over the block's threads and the loops inside the stage loop, cached per (store,
loop); whether a read inside one of those loops sees the slice complete is the caller's question.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..facts.view import AccessInfo, KernelView
from ..hw.expr import symbols
from .smt import Encoder
from .unwritten import offsets


class Cover(NamedTuple):
    """Stores that together overwrite one slice of their buffer each iteration of a loop: the
    elements whose first `compared` coordinates (0: the whole buffer; 1: a stage) are the
    stores' at that iteration."""
    members: tuple[AccessInfo, ...]  # in program order; the first one's kills stand for all
    compared: int
    # the loops inside the stage loop around any member: a read inside one of them runs before
    # some of its iteration's writes, so the slice is not complete there
    inner: frozenset[int]


class SliceCovers:
    def __init__(self, view: KernelView, enc: Encoder, data_guarded: set[int]):
        self.view = view
        self.enc = enc
        self.data_guarded = data_guarded
        self._groups: dict[tuple[int, int], Cover | None] = {}

    def group(self, store: AccessInfo, h: int) -> Cover | None:
        """The stores that with `store` write every element of one slice of its buffer exactly
        once per iteration of loop h, over the threads and the loops inside h: a stage (all
        elements whose first coordinate is one value, which depends only on loop h and the loops
        around it) or else the whole buffer (a single-stage buffer refilled every iteration);
        `store` alone, or the stores into the buffer in the same loops up to h, with the same
        leading coordinate and the same guards (which depend only on those outer loops), in
        program order; None if they do not."""
        key = (store.aid, h)
        if key not in self._groups:
            self._groups[key] = self._find(store, h, 1) or self._find(store, h, 0)
        return self._groups[key]

    def _find(self, store: AccessInfo, h: int, compared: int) -> Cover | None:
        view = self.view
        if not self._candidate(store, h, compared):
            return None
        if self._covers((store,), h, compared):  # alone (a refill); a group only where no store does
            return self._cover((store,), h, compared)
        outer = self._outer(store, h)
        guards = view.all_guards(store.stmt)
        members = tuple(sorted(
            (a for a in view.accesses.values()
             if a.buffer == store.buffer and a.coords[:compared] == store.coords[:compared]
             and self._candidate(a, h, compared)
             and self._outer(a, h) == outer and view.all_guards(a.stmt) == guards),
            key=lambda a: (a.stmt, a.aid)))
        return self._cover(members, h, compared) if len(members) > 1 and self._covers(members, h, compared) else None

    def _cover(self, members: tuple[AccessInfo, ...], h: int, compared: int) -> Cover:
        return Cover(members, compared, frozenset(g for a in members for g in self._inner(a, h)))

    def _outer(self, a: AccessInfo, h: int) -> list[int]:
        """The loops around `a` up to h: a group's stores share them (each may have inner loops of
        its own, such as the part loop a packed store becomes)."""
        loops = self.view.enclosing_loops(a.stmt)
        return loops[:loops.index(h) + 1]

    def _inner(self, a: AccessInfo, h: int) -> list[int]:
        return self.view.enclosing_loops(a.stmt)[len(self._outer(a, h)):]

    def _covers(self, members: tuple[AccessInfo, ...], h: int, compared: int) -> bool:
        """Together, over the block's threads and the iterations of their loops inside h, the
        members write each element of the slice (the dimensions after the `compared` ones)
        exactly once."""
        parts = [offsets(self.view, self.enc, a, self._inner(a, h), compared) for a in members]
        if any(p is None for p in parts):
            return False
        flat = np.concatenate(parts)
        size = int(np.prod([self.enc.nodes[e].value for e in self.view.dims[members[0].buffer][compared:]]))
        return bool(flat.size == size and np.array_equal(np.sort(flat), np.arange(size)))

    def _candidate(self, a: AccessInfo, h: int, compared: int) -> bool:
        """A plain store inside loop h, on a bijective buffer, that runs whenever its guards hold
        (none on data), whose `compared` leading coordinates, guards, and bounds of h and the loops
        around it depend only on those loops and sizes (on no thread)."""
        view = self.view
        if (a.kind != "store" or len(a.coords) <= compared or a.buffer not in view.bijective
                or a.stmt in self.data_guarded):
            return False
        loops = view.enclosing_loops(a.stmt)
        if h not in loops:
            return False
        uniform = {f"loop:{g}" for g in loops[:loops.index(h) + 1]}
        table = view.kf.table

        def ok(eid: int) -> bool:
            return all(n in uniform or n.startswith("size:") for n in symbols(table, eid))

        # the bounds of h and the loops around it too: else the iteration the kill names may run
        # for the reader's thread and never for the threads that write the element
        bounds = [e for g in loops[:loops.index(h) + 1] for e in (view.loops[g].lo, view.loops[g].hi)]
        return (all(ok(c) for c in a.coords[:compared]) and all(ok(c) for c, _p in view.all_guards(a.stmt))
                and all(ok(e) for e in bounds))
