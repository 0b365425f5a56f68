"""Constraints built only when a query needs them.

A chain hop's "not overwritten in between" constraints (chains.Expander.not_overwritten: one
instantiation per later store and iteration) are most of a deep chain's formula and most of its
construction time, yet most tag proofs hold without them: the query is first tried without its
deferred constraints (a weaker formula, so its UNSAT is the query's), and they are built only for
the queries that need them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from weakref import ref

import z3


class Deferred:
    """A list of constraints made on first use and then kept (alternatives are shared by queries):
    `method(*args)`, a method of the kernel's chain expander or of its cross-arm planner. The
    method's owner is held weakly: the expander keeps its alternatives, which hold their
    Deferreds, so a strong reference made a reference cycle per kernel, and a kernel's terms and
    Z3 context lived on until a full collection of the cyclic collector (several per audit
    chunk, each walking every object)."""

    __slots__ = ("_owner", "_function", "_args", "_terms")

    def __init__(self, method: Callable[..., list[z3.BoolRef]], *args: object) -> None:
        self._owner = ref(method.__self__)  # type: ignore[attr-defined]  # a plain weak reference: no callback
        self._function = method.__func__  # type: ignore[attr-defined]
        self._args: tuple[object, ...] = args
        self._terms: list[z3.BoolRef] | None = None

    def force(self) -> list[z3.BoolRef]:
        if self._terms is None:
            owner = self._owner()
            if owner is None:  # only queries of a live solver are forced
                raise RuntimeError("a deferred constraint outlived the solver that made it")
            self._terms = self._function(owner, *self._args)
            self._args = ()
        return self._terms


def strict(constraints: Iterable) -> list[z3.BoolRef]:
    """Every constraint, the deferred ones built."""
    out: list[z3.BoolRef] = []
    for c in constraints:
        if isinstance(c, Deferred):
            out.extend(c.force())
        else:
            out.append(c)
    return out


def relaxed(constraints: Iterable) -> list[z3.BoolRef]:
    """The constraints without the deferred ones (a weaker formula)."""
    return [c for c in constraints if not isinstance(c, Deferred)]


def has_deferred(constraints: Iterable) -> bool:
    return any(isinstance(c, Deferred) for c in constraints)
