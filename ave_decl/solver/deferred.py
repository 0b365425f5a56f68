"""Constraints built only when a query needs them.

A chain hop's "not overwritten in between" constraints (chains.Expander.not_overwritten: one
instantiation per later store and iteration) are most of a deep chain's formula and most of its
construction time, yet most tag proofs hold without them: the query is first tried without its
deferred constraints (a weaker formula, so its UNSAT is the query's), and they are built only for
the queries that need them.
"""
from __future__ import annotations

from typing import Callable, Iterable

import z3


class Deferred:
    """A list of constraints made on first use and then kept (alternatives are shared by queries)."""

    __slots__ = ("_make", "_terms")

    def __init__(self, make: Callable[[], list[z3.BoolRef]]) -> None:
        self._make: Callable[[], list[z3.BoolRef]] | None = make
        self._terms: list[z3.BoolRef] | None = None

    def force(self) -> list[z3.BoolRef]:
        if self._terms is None:
            self._terms = self._make()  # type: ignore[misc]
            self._make = None
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
