"""One Z3 query of an obligation: constraints + the negated property + what to report."""
from __future__ import annotations

from dataclasses import dataclass, field

import z3

from .chains import Alt
from .smt import Instance


@dataclass(frozen=True)
class Point:
    """Where a query is expected to hold, as values of some of its variables (a bank conflict the
    enumeration found: both lanes' thread ids, the loop values and register slot it names). The
    others come from the canonical model of `frame` (the kernel's assumptions and the block ids'
    ranges: one per kernel), each loop the point leaves free at its first value (`starts`: loop
    variable and lower bound, outermost first); where that misses (a guard such as a prefetch's
    `kt + 32 < K` wants larger sizes), from the canonical model of `nest` (the frame, the loop
    ranges and the guards no thread or slot reads). `KernelSolver._point_model` keeps a model
    only when it satisfies the whole query."""
    pinned: tuple[tuple[z3.ExprRef, int], ...]
    frame: tuple[z3.BoolRef, ...]
    starts: tuple[tuple[z3.ExprRef, z3.ArithRef], ...]
    nest: tuple[z3.BoolRef, ...]


@dataclass
class Query:
    constraints: list[z3.BoolRef]
    violated: z3.BoolRef
    lhs: Alt
    rhs: Alt
    site: Instance
    lhs_inst: Instance
    rhs_inst: Instance
    extras: dict[str, z3.ArithRef] = field(default_factory=dict)
    unknown: str = ""  # non-empty: the query could not be posed (reason); the obligation is UNKNOWN
    # the lists `constraints` joins (the use's, each side's), when the builder has them: an
    # obligation's queries share them, so their slices are made once per part (solver/slicing.py)
    parts: tuple[list, ...] = ()
    # a stronger query asked first for its counterexample (a bank conflict the enumeration found,
    # pinned): its UNSAT or UNKNOWN says nothing of the obligation, which the next query decides
    hint: bool = False
    # expected to be satisfiable when the kernel's assumptions are (a bank conflict the
    # enumeration found where every lane and iteration runs, pinned): its model is asked for at
    # once, without a quick attempt; asked as a hint, so that its UNSAT says nothing
    certain: bool = False
    # a concrete point the query is expected to hold at (see Point), tried before any solver
    point: Point | None = None

    @classmethod
    def joined(cls, parts: tuple[list, ...], violated: z3.BoolRef, *rest, **kw) -> Query:
        """A query whose constraints are `parts` joined, kept apart for slicing."""
        return cls([c for part in parts for c in part], violated, *rest, parts=parts, **kw)
